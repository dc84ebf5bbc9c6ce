"""The capture writer under its capture-package name: TCP conversations to pcap or pcapng files.

It lives in :mod:`kproto.pcap.writer`, below both the capture reader and the mock broker (which records
its traffic with it); this module offers the same public names.
"""

from kproto.pcap.writer import (
    Impairments,
    PcapngWriter,
    PcapWriter,
    PlannedSegment,
    Side,
    TcpConversation,
    TcpSegmenter,
    WrittenCapture,
    apply_impairments,
    build_frame,
    plan_segments,
    write_capture,
    write_segments,
)

__all__ = [
    "Side",
    "TcpConversation",
    "Impairments",
    "PlannedSegment",
    "WrittenCapture",
    "plan_segments",
    "apply_impairments",
    "build_frame",
    "PcapWriter",
    "PcapngWriter",
    "write_capture",
    "write_segments",
    "TcpSegmenter",
]
