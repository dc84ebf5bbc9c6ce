"""Reading network captures: pcap/pcapng files and TCP reassembly.

Layers, each importing only the ones before it:

* :mod:`kproto.capture.files`: pcap/pcapng containers → :class:`PacketRecord`;
* :mod:`kproto.capture.packets`: link layer / IP / TCP headers → :class:`TcpSegment`;
* :mod:`kproto.capture.reader`: both together, with counters (:class:`CaptureReader`);
* :mod:`kproto.capture.reassembly`: sans-I/O TCP reassembly → :class:`StreamData` / :class:`StreamGap`
  / :class:`StreamClosed` events;
* :mod:`kproto.capture.conversation`: Kafka frames over reassembled streams, requests paired with
  responses, raw SASL tokens followed, TLS connections recognised (imports the codec; import it
  explicitly); it uses :mod:`kproto.capture.sasl` (what SASL tokens say, which parts are secret) and
  :mod:`kproto.capture.tls` (TLS records and hellos).

Damaged input becomes :class:`CaptureDiagnostic` items in the output, never an exception.
"""

from kproto.capture.diagnostics import CaptureDiagnostic, DiagnosticKind
from kproto.capture.files import DEFAULT_MAX_RECORD_BYTES, PacketRecord, iter_packet_records
from kproto.capture.packets import SUPPORTED_LINK_TYPES, TcpSegment, decode_tcp_segment
from kproto.capture.reader import CaptureReader, CaptureStats, read_tcp_segments
from kproto.capture.reassembly import (
    ConnectionId,
    Direction,
    Endpoint,
    ReassemblyStats,
    StreamClosed,
    StreamData,
    StreamEvent,
    StreamGap,
    TcpReassembler,
    reassemble,
)

__all__ = [
    "CaptureDiagnostic",
    "DiagnosticKind",
    "DEFAULT_MAX_RECORD_BYTES",
    "PacketRecord",
    "iter_packet_records",
    "SUPPORTED_LINK_TYPES",
    "TcpSegment",
    "decode_tcp_segment",
    "CaptureReader",
    "CaptureStats",
    "read_tcp_segments",
    "ConnectionId",
    "Direction",
    "Endpoint",
    "ReassemblyStats",
    "StreamClosed",
    "StreamData",
    "StreamEvent",
    "StreamGap",
    "TcpReassembler",
    "reassemble",
]
