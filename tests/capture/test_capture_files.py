"""pcap / pcapng container reading: formats, byte orders, resolutions, blocks, damage."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.capture import CaptureDiagnostic, DiagnosticKind, PacketRecord, iter_packet_records
from kproto.pcap.writer import PcapngWriter, PcapWriter

FRAME_A = bytes(range(60))
FRAME_B = b"\xff" * 33


def records(data, **kw):
    out = list(iter_packet_records(data, **kw))
    return [r for r in out if isinstance(r, PacketRecord)], [d for d in out if isinstance(d, CaptureDiagnostic)]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_byte_orders_and_resolutions(order, nano):
    buf = io.BytesIO()
    w = PcapWriter(buf, 113, byte_order=order, nanosecond=nano)
    w.write(1_700_000_000_123_456_789, FRAME_A)
    w.write(1_700_000_001_000_001_000, FRAME_B, original_length=1500)
    recs, diags = records(buf.getvalue())
    assert diags == []
    assert [r.data for r in recs] == [FRAME_A, FRAME_B]
    assert [r.link_type for r in recs] == [113, 113]
    assert [r.number for r in recs] == [1, 2]
    expect0 = 1_700_000_000_123_456_789 if nano else 1_700_000_000_123_456_000
    assert recs[0].timestamp_ns == expect0
    assert recs[1].timestamp_ns == 1_700_000_001_000_001_000
    assert recs[1].original_length == 1500
    assert recs[0].file_offset == 24 and recs[1].file_offset == 24 + 16 + len(FRAME_A)


def test_pcap_link_type_high_bits_are_fcs_information():
    buf = io.BytesIO()
    PcapWriter(buf, 1 | 0x10000000 | (2 << 29)).write(0, FRAME_A)  # FCS present, 4 bytes
    recs, _ = records(buf.getvalue())
    assert recs[0].link_type == 1


def _pcapng_two_interfaces(order: str) -> bytes:
    buf = io.BytesIO()
    w = PcapngWriter(buf, byte_order=order)
    us = w.add_interface(1)  # default resolution: microseconds
    ns = w.add_interface(276, tsresol=9, name="any")
    binary = w.add_interface(101, tsresol=0x80 | 20)  # 2^-20 s units
    w.write_block(0x00000004, b"\x00\x00\x00\x00")  # name resolution block: skipped
    w.write(us, 1_000_000_123_000, FRAME_A)
    w.write(ns, 2_000_000_000_000_000_007, FRAME_B)
    w.write(binary, 3 * 1_000_000_000, FRAME_A[:41], original_length=100)
    w.write_block(0x40000ABC, b"unknown local block")  # skipped
    w.write_block(0x00000005, struct.pack(order + "III", 0, 0, 0))  # interface statistics: skipped
    return buf.getvalue()


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_interfaces_resolutions_and_skipped_blocks(order):
    recs, diags = records(_pcapng_two_interfaces(order))
    assert diags == []
    assert [(r.interface, r.link_type) for r in recs] == [(0, 1), (1, 276), (2, 101)]
    assert [r.data for r in recs] == [FRAME_A, FRAME_B, FRAME_A[:41]]
    assert recs[0].timestamp_ns == 1_000_000_123_000
    assert recs[1].timestamp_ns == 2_000_000_000_000_000_007
    assert recs[2].timestamp_ns == 3_000_000_000
    assert recs[2].original_length == 100


def test_pcapng_sections_switch_byte_order_and_reset_interfaces():
    buf = io.BytesIO()
    w = PcapngWriter(buf, byte_order="<")
    w.add_interface(1)
    w.write(0, 5_000, FRAME_A)
    w.start_section(">")
    w.add_interface(113, tsresol=9)
    w.write(0, 7, FRAME_B)
    recs, diags = records(buf.getvalue())
    assert diags == []
    assert [(r.link_type, r.timestamp_ns, r.data) for r in recs] == [(1, 5_000, FRAME_A), (113, 7, FRAME_B)]


def test_pcapng_simple_and_obsolete_packet_blocks():
    buf = io.BytesIO()
    w = PcapngWriter(buf, byte_order="<")
    w.add_interface(1, snaplen=50)
    w.write_simple(FRAME_A)  # cut at the interface snaplen
    # Obsolete Packet Block (type 2): interface id u16, drops u16, ts high, ts low, caplen, origlen.
    w.write_block(2, struct.pack("<HHIIII", 0, 0, 0, 1_000_000, len(FRAME_B), len(FRAME_B)) + FRAME_B)
    recs, diags = records(buf.getvalue())
    assert diags == []
    assert recs[0].data == FRAME_A[:50] and recs[0].timestamp_ns is None and recs[0].original_length == 60
    assert recs[1].data == FRAME_B and recs[1].timestamp_ns == 1_000_000_000


def test_pcapng_tsoffset():
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(1, tsoffset=1_600_000_000)
    w.write(0, 1_600_000_100_000_005_000, FRAME_A)
    data = buf.getvalue()
    assert struct.unpack_from("<II", data, data.index(FRAME_A) - 20 + 4) == (0, 100_000_005)  # stored relative
    recs, _ = records(data)
    assert recs[0].timestamp_ns == 1_600_000_100_000_005_000


class _Trickle(io.RawIOBase):
    """A non-seekable stream returning at most 7 bytes per read, like a slow pipe."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = 7 if n < 0 else min(n, 7)
        out = self._data[self._pos : self._pos + n]
        self._pos += len(out)
        return out


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_non_seekable_trickling_stream(fmt):
    if fmt == "pcap":
        buf = io.BytesIO()
        w = PcapWriter(buf, 1)
        for i in range(50):
            w.write(i * 1000, FRAME_A[: i + 1])
        data = buf.getvalue()
    else:
        data = _pcapng_two_interfaces("<")
    expected, _ = records(data)
    got, diags = records(_Trickle(data))
    assert diags == []
    assert [(r.data, r.timestamp_ns, r.file_offset) for r in got] == [
        (r.data, r.timestamp_ns, r.file_offset) for r in expected
    ]


def test_path_source(tmp_path):
    buf = io.BytesIO()
    PcapWriter(buf, 1).write(0, FRAME_A)
    path = tmp_path / "a.pcap"
    path.write_bytes(buf.getvalue())
    assert records(path)[0][0].data == FRAME_A
    assert records(str(path))[0][0].data == FRAME_A


def test_not_a_capture_and_empty():
    _, diags = records(b"GET / HTTP/1.1\r\n")
    assert [d.kind for d in diags] == [DiagnosticKind.NOT_A_CAPTURE]
    _, diags = records(b"")
    assert [d.kind for d in diags] == [DiagnosticKind.TRUNCATED_FILE]


def test_record_larger_than_limit_stops_reading():
    buf = io.BytesIO()
    w = PcapWriter(buf, 1)
    w.write(0, FRAME_A)
    w.write(0, b"x" * 5000)
    w.write(0, FRAME_A)
    recs, diags = records(buf.getvalue(), max_record_bytes=4096)
    assert len(recs) == 1
    assert [d.kind for d in diags] == [DiagnosticKind.RECORD_TOO_LARGE]
    assert diags[0].packet == 2 and diags[0].file_offset == 24 + 16 + 60


def test_hostile_record_length_does_not_allocate():
    # A pcap header followed by a record claiming 4 GiB of data.
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + struct.pack(
        "<IIII", 0, 0, 0xFFFFFFF0, 0xFFFFFFF0
    )
    recs, diags = records(data)
    assert recs == [] and diags[0].kind is DiagnosticKind.RECORD_TOO_LARGE


def test_pcapng_bad_blocks():
    good = _pcapng_two_interfaces("<")
    # Block length not a multiple of 4 in the first IDB (offset 28, after the 28-byte SHB).
    shb_len = struct.unpack_from("<I", good, 4)[0]
    bad = bytearray(good)
    struct.pack_into("<I", bad, shb_len + 4, 21)
    recs, diags = records(bytes(bad))
    assert recs == [] and diags[0].kind is DiagnosticKind.BAD_BLOCK and diags[0].file_offset == shb_len
    # Trailer that disagrees with the header.
    bad = bytearray(good)
    idb_len = struct.unpack_from("<I", good, shb_len + 4)[0]
    struct.pack_into("<I", bad, shb_len + idb_len - 4, idb_len + 4)
    recs, diags = records(bytes(bad))
    assert diags[0].kind is DiagnosticKind.BAD_BLOCK
    # Bad byte-order magic.
    bad = bytearray(good)
    bad[8:12] = b"\x00\x00\x00\x00"
    assert records(bytes(bad))[1][0].kind is DiagnosticKind.BAD_BLOCK


def test_pcapng_packet_on_unknown_interface_and_oversized_caplen_continue():
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(1)
    w.write_block(6, struct.pack("<IIIII", 7, 0, 0, 4, 4) + b"abcd")  # interface 7 does not exist
    w.write_block(6, struct.pack("<IIIII", 0, 0, 0, 400, 400) + b"abcd")  # caplen beyond the block
    w.write(0, 0, FRAME_A)
    recs, diags = records(buf.getvalue())
    assert [d.kind for d in diags] == [DiagnosticKind.UNKNOWN_INTERFACE, DiagnosticKind.BAD_BLOCK]
    assert [d.packet for d in diags] == [1, 2]
    assert [r.number for r in recs] == [3] and recs[0].data == FRAME_A


@pytest.mark.parametrize("maker", ["pcap", "pcapng"])
def test_every_truncation_point_gives_records_then_a_diagnostic(maker):
    if maker == "pcap":
        buf = io.BytesIO()
        w = PcapWriter(buf, 1, nanosecond=True)
        for i in range(3):
            w.write(i, FRAME_A)
        data = buf.getvalue()
    else:
        data = _pcapng_two_interfaces(">")
    full, _ = records(data)
    for cut in range(len(data)):
        recs, diags = records(data[:cut])
        # What was read is a prefix of the full read, and a cut anywhere but a record boundary is reported.
        assert [r.data for r in recs] == [r.data for r in full[: len(recs)]]
        assert all(d.kind in (DiagnosticKind.TRUNCATED_FILE,) for d in diags)
        assert len(diags) <= 1


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a"]))
def test_garbage_after_a_valid_magic_never_raises(tail, magic):
    out = list(iter_packet_records(magic + tail, max_record_bytes=4096))
    assert all(isinstance(x, (PacketRecord, CaptureDiagnostic)) for x in out)
    assert all(len(x.data) <= 4096 for x in out if isinstance(x, PacketRecord))
