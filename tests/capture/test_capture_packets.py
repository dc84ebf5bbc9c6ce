"""Link layer / IP / TCP header decoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.capture import CaptureDiagnostic, DiagnosticKind, PacketRecord, TcpSegment, decode_tcp_segment
from kproto.capture.packets import SUPPORTED_LINK_TYPES
from kproto.pcap.numbers import TCP_ACK, TCP_PSH
from kproto.pcap.writer import PlannedSegment, build_frame

V4 = (("192.0.2.1", 40000), ("192.0.2.2", 9092))
V6 = (("2001:db8::1", 40000), ("2001:db8::2", 9092))
WRITABLE_LINK_TYPES = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276]


def seg(addrs=V4, payload=b"hello kafka", seq=1234, ack=99):
    return PlannedSegment(0, True, addrs[0], addrs[1], seq, ack, TCP_ACK | TCP_PSH, payload, 5_000, 0)


def decode(frame, link_type, original_length=None, number=1):
    rec = PacketRecord(number, 7, link_type, frame, len(frame) if original_length is None else original_length, 0, 100)
    return decode_tcp_segment(rec)


# Link types 228 and 229 carry one IP version each by definition.
LINK_AND_IP = [(lt, a) for lt in WRITABLE_LINK_TYPES for a in (V4, V6) if (lt, a) not in ((228, V6), (229, V4))]


@pytest.mark.parametrize("link_type,addrs", LINK_AND_IP, ids=[f"{lt}-v{4 if a is V4 else 6}" for lt, a in LINK_AND_IP])
def test_every_link_type_and_ip_version(link_type, addrs):
    s = decode(build_frame(seg(addrs), link_type), link_type)
    assert isinstance(s, TcpSegment)
    assert (s.src, s.sport, s.dst, s.dport) == (addrs[0][0], 40000, addrs[1][0], 9092)
    assert (s.seq, s.ack, s.flags, s.payload, s.payload_length) == (1234, 99, TCP_ACK | TCP_PSH, b"hello kafka", 11)
    assert (s.number, s.timestamp_ns) == (1, 7)


def test_null_link_type_either_host_byte_order():
    for order in "<>":
        s = decode(build_frame(seg(V6), 0, null_byte_order=order), 0)
        assert isinstance(s, TcpSegment) and s.src == "2001:db8::1"


@pytest.mark.parametrize("tags", [(5,), (100, 200), (1, 2, 3)])
def test_vlan_and_qinq(tags):
    s = decode(build_frame(seg(), 1, vlan=tags), 1)
    assert isinstance(s, TcpSegment) and s.payload == b"hello kafka"


def test_too_many_vlan_tags_is_malformed():
    frame = build_frame(seg(), 1, vlan=tuple(range(1, 11)))
    d = decode(frame, 1)
    assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.MALFORMED_PACKET


def test_ipv4_options_and_ipv6_extension_headers():
    s = decode(build_frame(seg(), 1, ipv4_options=b"\x01\x01\x01\x00" * 2), 1)
    assert isinstance(s, TcpSegment) and s.payload == b"hello kafka"
    s = decode(build_frame(seg(V6), 1, ipv6_extensions=True), 1)
    assert isinstance(s, TcpSegment) and s.payload == b"hello kafka"


def test_ethernet_padding_is_not_payload():
    frame = build_frame(seg(payload=b""), 1) + b"\x00" * 6  # minimum frame size padding
    s = decode(frame, 1)
    assert isinstance(s, TcpSegment) and s.payload == b"" and s.payload_length == 0


def test_ipv4_total_length_zero_means_what_was_captured():
    frame = bytearray(build_frame(seg(), 1))
    struct.pack_into("!H", frame, 14 + 2, 0)  # TSO capture: total length not filled in yet
    s = decode(bytes(frame), 1)
    assert isinstance(s, TcpSegment) and s.payload == b"hello kafka"


def test_snaplen_cut_payload_keeps_wire_length():
    frame = build_frame(seg(payload=b"x" * 100), 1)
    s = decode(frame[:-60], 1, original_length=len(frame))
    assert isinstance(s, TcpSegment) and s.payload == b"x" * 40 and s.payload_length == 100
    d = decode(frame[:40], 1, original_length=len(frame))  # cut inside the TCP header
    assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.SNAPLEN_TRUNCATED


def test_ip_length_beyond_an_uncut_frame_is_malformed():
    frame = build_frame(seg(payload=b"x" * 100), 1)
    d = decode(frame[:-60], 1)  # the frame claims it was captured whole
    assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.MALFORMED_PACKET


def test_ipv4_fragments_are_reported():
    frame = bytearray(build_frame(seg(), 1))
    struct.pack_into("!H", frame, 14 + 6, 0x2000)  # more fragments
    d = decode(bytes(frame), 1, number=9)
    assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.IP_FRAGMENT and d.packet == 9
    struct.pack_into("!H", frame, 14 + 6, 0x0010)  # offset 16*8
    assert decode(bytes(frame), 1).kind is DiagnosticKind.IP_FRAGMENT


def test_ipv6_fragment_header():
    base = build_frame(seg(V6), 101)
    ip, tcp = bytearray(base[:40]), base[40:]
    ip[6] = 44
    struct.pack_into("!H", ip, 4, len(tcp) + 8)
    atomic = bytes([6, 0, 0, 0, 0, 0, 0, 1])  # offset 0, M=0: an atomic fragment is a whole packet
    s = decode(bytes(ip) + atomic + tcp, 101)
    assert isinstance(s, TcpSegment) and s.payload == b"hello kafka"
    first = bytes([6, 0, 0, 1, 0, 0, 0, 1])  # M=1
    d = decode(bytes(ip) + first + tcp, 101)
    assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.IP_FRAGMENT


def test_non_tcp_is_skipped_quietly():
    frame = bytearray(build_frame(seg(), 1))
    frame[14 + 9] = 17  # UDP
    assert decode(bytes(frame), 1) is None
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + b"\x00" * 28
    assert decode(arp, 1) is None
    assert decode(struct.pack("<I", 7) + b"\x00" * 40, 0) is None  # unknown address family


def test_unsupported_link_type():
    d = decode(b"\x00" * 64, 147)
    assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.UNSUPPORTED_LINK_TYPE


def test_short_and_bad_headers():
    good = build_frame(seg(), 1)
    for cut in range(0, 14 + 20 + 20):
        d = decode(good[:cut], 1)
        assert isinstance(d, CaptureDiagnostic) and d.kind is DiagnosticKind.MALFORMED_PACKET, cut
    bad_ihl = bytearray(good)
    bad_ihl[14] = 0x43
    assert decode(bytes(bad_ihl), 1).kind is DiagnosticKind.MALFORMED_PACKET
    bad_doff = bytearray(good)
    bad_doff[14 + 20 + 12] = 0x20
    assert decode(bytes(bad_doff), 1).kind is DiagnosticKind.MALFORMED_PACKET
    bad_doff[14 + 20 + 12] = 0xF0  # 60-byte TCP header in a packet that is shorter
    assert decode(bytes(bad_doff), 1).kind is DiagnosticKind.MALFORMED_PACKET
    assert decode(build_frame(seg(V6), 101), 228).kind is DiagnosticKind.MALFORMED_PACKET


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(SUPPORTED_LINK_TYPES)), st.binary(max_size=120))
def test_garbage_link_layers_never_raise(link_type, data):
    out = decode(data, link_type)
    assert out is None or isinstance(out, (TcpSegment, CaptureDiagnostic))
    if isinstance(out, TcpSegment):
        assert len(out.payload) <= len(data)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(WRITABLE_LINK_TYPES), st.integers(0, 200), st.data())
def test_mutated_real_frames_never_raise(link_type, flip_at, data):
    frame = bytearray(build_frame(seg(V6 if link_type == 229 else V4, payload=b"p" * 30), link_type))
    if flip_at < len(frame):
        frame[flip_at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    out = decode(bytes(frame[:cut]), link_type, original_length=len(frame))
    assert out is None or isinstance(out, (TcpSegment, CaptureDiagnostic))
