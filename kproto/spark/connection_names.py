"""Names of TCP connections that do not depend on how the capture was split up.

:class:`~kproto.capture.reassembly.ConnectionId` numbers connections in the order one reassembler saw
them, so the same connection gets a different ``serial`` when the whole capture goes through one
reassembler (single process) than when each 4-tuple gets its own (Spark, grouped by connection).  The
name used in the tables counts instead how many connections the same two endpoints had before this one
(connection reuse: a SYN after the previous connection ended): ``10.0.0.1:51000>10.0.0.2:9092#1``.
"""

from __future__ import annotations

from typing import Dict, Tuple

from kproto.capture.reassembly import ConnectionId, Endpoint

__all__ = ["ConnectionNames"]


class ConnectionNames:
    """Assign names as connections first appear in the reassembly events (see module docstring).

    Events of a reused 4-tuple's earlier connection always come before the later connection's first
    event (the reassembler starts the new one only after the old one ended), so the count is the same
    whichever way the capture was split.
    """

    def __init__(self) -> None:
        self._names: Dict[ConnectionId, str] = {}
        self._uses: Dict[Tuple[Endpoint, Endpoint], int] = {}
        self._last: object = None  # events come in runs of one connection: skip the hashing then

    def see(self, cid: ConnectionId) -> None:
        """Note a connection (call for every event; cheap once it is known)."""
        if cid is self._last or cid in self._names:
            self._last = cid
            return
        self._last = cid
        a, b = cid.initiator, cid.responder
        key = (a, b) if a <= b else (b, a)
        uses = self._uses.get(key, 0) + 1
        self._uses[key] = uses
        self._names[cid] = f"{a}>{b}#{uses}"

    def name(self, cid: ConnectionId) -> str:
        """The name of a connection passed to :meth:`see` before."""
        return self._names[cid]
