"""Correlation ids: handing them out, and pairing each response with the request it answers.

A Kafka connection answers requests strictly in the order they were sent (docs/protocol-notes.md, "Ordering"),
so the requests in flight form a FIFO queue and a response can only answer the *oldest* one.  The
correlation id a response carries is therefore a check, not a lookup key: a response whose id belongs
to a younger request in flight is *out of order*, one whose id belongs to no request is *unknown*, and
both are :class:`~kproto.errors.ProtocolError`.

The one tolerated exception is the 0.8.2 broker quirk: 0.8.2 answers ConsumerMetadata (GroupCoordinator
v0) with correlation id 0 whatever the request carried (kafka-python's parser carries the same
exception).  It is accepted only when the tracker was built with ``broker_quirks="0.8.2"``, and only for
a GroupCoordinator request at the head of the queue.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Iterator, Optional

from kproto.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "GROUP_COORDINATOR_KEY",
    "BROKER_QUIRKS",
    "InFlight",
    "InFlightLimitError",
    "CorrelationTracker",
]

GROUP_COORDINATOR_KEY = 10
#: The values ``broker_quirks`` accepts: ``None`` (a well-behaved broker) or ``"0.8.2"``.
BROKER_QUIRKS = (None, "0.8.2")

_INT32_MAX = 0x7FFFFFFF


def check_quirks(broker_quirks: Optional[str]) -> Optional[str]:
    """``broker_quirks`` itself, after checking it is one of :data:`BROKER_QUIRKS`."""
    if broker_quirks not in BROKER_QUIRKS:
        raise ValueError(f"broker_quirks must be one of {BROKER_QUIRKS}, not {broker_quirks!r}")
    return broker_quirks


class InFlightLimitError(LocalProtocolError):
    """``send`` refused: the connection already has ``max_in_flight`` requests awaiting responses."""


@dataclass(frozen=True)
class InFlight:
    """A request sent and not yet answered: what is needed to decode and pair its response."""

    correlation_id: int
    api_key: int
    api_version: int
    request: Any


class CorrelationTracker:
    """Assigns correlation ids and pairs responses with the requests in flight, oldest first.

    Ids count up from ``first_id`` and wrap from 2**31−1 back to 0 (they are int32 on the wire and
    negative ids upset some brokers' logs).  ``max_in_flight`` (None = unlimited) bounds the queue.
    """

    def __init__(
        self, *, first_id: int = 0, max_in_flight: Optional[int] = None, broker_quirks: Optional[str] = None
    ) -> None:
        if not 0 <= first_id <= _INT32_MAX:
            raise ValueError("first_id must be a non-negative int32")
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1 (or None for no limit)")
        self.max_in_flight = max_in_flight
        self.broker_quirks = check_quirks(broker_quirks)
        self._next_id = first_id
        self._queue: Deque[InFlight] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[InFlight]:
        return iter(self._queue)

    @property
    def full(self) -> bool:
        """True when one more tracked request would exceed ``max_in_flight``."""
        return self.max_in_flight is not None and len(self._queue) >= self.max_in_flight

    def next_id(self) -> int:
        """Take the next correlation id (also for requests that get no response)."""
        cid = self._next_id
        self._next_id = 0 if cid == _INT32_MAX else cid + 1
        return cid

    def track(self, correlation_id: int, api_key: int, api_version: int, request: Any) -> InFlight:
        """Register a request that expects a response; raises :class:`InFlightLimitError` when full."""
        if self.full:
            raise InFlightLimitError(
                f"{len(self._queue)} requests already in flight (max_in_flight={self.max_in_flight}); "
                "wait for a response before sending more"
            )
        entry = InFlight(correlation_id, api_key, api_version, request)
        self._queue.append(entry)
        return entry

    def match(self, correlation_id: int) -> InFlight:
        """The request a response with ``correlation_id`` answers, removed from the queue."""
        if not self._queue:
            raise RemoteProtocolError(f"response with correlation id {correlation_id} but no request is in flight")
        head = self._queue[0]
        if correlation_id != head.correlation_id and not self._quirk_applies(head, correlation_id):
            if any(entry.correlation_id == correlation_id for entry in self._queue):
                raise RemoteProtocolError(
                    f"response with correlation id {correlation_id} arrived out of order: the oldest request "
                    f"in flight has correlation id {head.correlation_id}"
                )
            raise RemoteProtocolError(
                f"response with unknown correlation id {correlation_id} (expected {head.correlation_id})"
            )
        return self._queue.popleft()

    def _quirk_applies(self, head: InFlight, correlation_id: int) -> bool:
        return (
            self.broker_quirks == "0.8.2"
            and correlation_id == 0
            and head.api_key == GROUP_COORDINATOR_KEY
            and head.api_version == 0
        )

    def drain(self) -> list:
        """Remove and return every request still in flight (the connection is going away)."""
        pending = list(self._queue)
        self._queue.clear()
        return pending
