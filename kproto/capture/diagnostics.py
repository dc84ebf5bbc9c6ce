"""Diagnostics: what the capture layer reports instead of raising.

A capture from the field is full of things a strict parser would choke on: a file cut short while
tcpdump was still writing, a snaplen that kept only headers, IP fragments, an unknown link type on one
pcapng interface.  None of them should stop the reading of the rest, so every layer of
:mod:`kproto.capture` turns such input into a :class:`CaptureDiagnostic` placed in the output stream
at the point it was found, and carries on where that is possible.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

__all__ = ["DiagnosticKind", "CaptureDiagnostic"]


class DiagnosticKind(str, enum.Enum):
    """What went wrong; the string values are stable and meant for logs and tables."""

    #: The input is not a pcap or pcapng capture (unknown magic number).
    NOT_A_CAPTURE = "not-a-capture"
    #: The file ends inside a header, record or block; reading stops there.
    TRUNCATED_FILE = "truncated-file"
    #: A pcapng block whose framing is impossible (length not a multiple of 4, trailer mismatch, ...).
    BAD_BLOCK = "bad-block"
    #: A record or block larger than the configured limit; reading stops there (framing is not trusted).
    RECORD_TOO_LARGE = "record-too-large"
    #: A packet on an interface whose link type this reader does not decode.
    UNSUPPORTED_LINK_TYPE = "unsupported-link-type"
    #: A packet referring to a pcapng interface that was never described.
    UNKNOWN_INTERFACE = "unknown-interface"
    #: Link, IP or TCP header bytes that do not parse (too short, bad lengths, wrong version).
    MALFORMED_PACKET = "malformed-packet"
    #: An IPv4 or IPv6 fragment; reassembly of IP fragments is not supported.
    IP_FRAGMENT = "ip-fragment"
    #: The capture kept fewer bytes of a TCP payload than were on the wire (snaplen); the rest is a gap.
    SNAPLEN_TRUNCATED = "snaplen-truncated"


@dataclass(frozen=True)
class CaptureDiagnostic:
    """One problem found while reading a capture.

    ``packet`` is the 1-based number of the packet record (as Wireshark numbers frames) or ``None`` when
    the problem is not tied to a packet (file header, a pcapng block between packets).  ``file_offset`` is
    the byte offset in the capture file where the offending record or block starts, when known.
    """

    kind: DiagnosticKind
    detail: str
    packet: Optional[int] = None
    file_offset: Optional[int] = None

    def __str__(self) -> str:
        where = []
        if self.packet is not None:
            where.append(f"packet {self.packet}")
        if self.file_offset is not None:
            where.append(f"file offset {self.file_offset}")
        location = f" ({', '.join(where)})" if where else ""
        return f"{self.kind.value}{location}: {self.detail}"
