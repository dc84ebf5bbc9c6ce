"""Reading a capture as a sequence of TCP segments and diagnostics.

:class:`CaptureReader` joins :mod:`kproto.capture.files` (container formats) and
:mod:`kproto.capture.packets` (link/IP/TCP headers) and counts what it saw, so a caller can tell "no
Kafka here" from "nothing readable here".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, Set, Tuple, Union

from kproto.capture.diagnostics import CaptureDiagnostic, DiagnosticKind
from kproto.capture.files import DEFAULT_MAX_RECORD_BYTES, CaptureSource, PacketRecord, iter_packet_records
from kproto.capture.packets import TcpSegment, decode_tcp_segment

__all__ = ["CaptureStats", "CaptureReader", "read_tcp_segments"]


@dataclass
class CaptureStats:
    """Counts kept while reading; ``diagnostics`` counts per kind, including suppressed repeats."""

    packets: int = 0
    tcp_segments: int = 0
    other_packets: int = 0  #: well-formed packets that are not TCP over IP
    diagnostics: Dict[str, int] = field(default_factory=dict)


class CaptureReader:
    """Iterate over the TCP segments of a pcap/pcapng capture, with diagnostics in place.

    ``source`` is a path, bytes, or a binary file object (stdin works).  The reader is single-use: iterate
    it once.  An unsupported link type is reported once per (interface, link type) and counted for each
    packet, so a capture full of such packets does not drown the output.
    """

    def __init__(self, source: CaptureSource, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self._source = source
        self._max_record_bytes = max_record_bytes
        self.stats = CaptureStats()

    def __iter__(self) -> Iterator[Union[TcpSegment, CaptureDiagnostic]]:
        stats = self.stats
        counts = stats.diagnostics
        reported_links: Set[Tuple[int, int]] = set()
        decode = decode_tcp_segment
        for item in iter_packet_records(self._source, max_record_bytes=self._max_record_bytes):
            if type(item) is PacketRecord:
                stats.packets += 1
                result = decode(item)
                if result is None:
                    stats.other_packets += 1
                    continue
                if type(result) is TcpSegment:
                    stats.tcp_segments += 1
                    yield result
                    continue
                assert isinstance(result, CaptureDiagnostic)
                counts[result.kind.value] = counts.get(result.kind.value, 0) + 1
                if result.kind is DiagnosticKind.UNSUPPORTED_LINK_TYPE:
                    link_key = (item.interface, item.link_type)
                    if link_key in reported_links:
                        continue
                    reported_links.add(link_key)
                yield result
                continue
            assert isinstance(item, CaptureDiagnostic)
            counts[item.kind.value] = counts.get(item.kind.value, 0) + 1
            yield item


def read_tcp_segments(
    source: CaptureSource, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> Iterator[Union[TcpSegment, CaptureDiagnostic]]:
    """Shorthand for ``iter(CaptureReader(source, ...))``."""
    return iter(CaptureReader(source, max_record_bytes=max_record_bytes))
