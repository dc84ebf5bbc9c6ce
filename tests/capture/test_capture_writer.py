"""Captures written by kproto.pcap.writer, read back through the reader and reassembly."""

from __future__ import annotations

import io
import random
import subprocess
from collections import defaultdict
from typing import Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.capture import CaptureReader, Direction, StreamClosed, StreamData, StreamGap, reassemble
from kproto.pcap.writer import (
    Impairments,
    Side,
    TcpConversation,
    apply_impairments,
    plan_segments,
    write_capture,
    write_segments,
)

LINK_TYPES = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276]


def payload(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def conversation(v6: bool = False, port: int = 40000, isn: int = 1_000_000, **kw) -> TcpConversation:
    ip_c, ip_s = ("2001:db8::10", "2001:db8::20") if v6 else ("192.0.2.10", "192.0.2.20")
    msgs = [
        (Side.CLIENT, payload(5000, port), 10.0),
        (Side.SERVER, payload(300, port + 1), 10.5),
        ("client", payload(1, port + 2), 11.0),
        ("server", payload(9000, port + 3), 11.5),
    ]
    return TcpConversation((ip_c, port), (ip_s, 9092), msgs, client_isn=isn, **kw)


def expected_streams(conv: TcpConversation) -> Tuple[bytes, bytes]:
    to_server = b"".join(d for side, d, _ in conv.messages if Side(side) is Side.CLIENT)
    to_client = b"".join(d for side, d, _ in conv.messages if Side(side) is Side.SERVER)
    return to_server, to_client


def read_back(data) -> Tuple[Dict[Tuple[int, Direction], bytearray], list, list]:
    """Per (connection serial, direction) bytes with '?' for gaps; the events; the reader diagnostics."""
    reader = CaptureReader(data)
    items = list(reader)
    diags = [x for x in items if not hasattr(x, "seq")]
    events = list(reassemble(items))
    streams: Dict[Tuple[int, Direction], bytearray] = defaultdict(bytearray)
    for e in events:
        buf = streams[(e.connection.serial, e.direction)]
        if isinstance(e, StreamData):
            assert e.offset == len(buf)
            buf += e.data
        elif isinstance(e, StreamGap):
            assert e.offset == len(buf)
            buf += b"?" * e.length
    return streams, events, diags


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("link_type", LINK_TYPES)
@pytest.mark.parametrize("v6", [False, True], ids=["v4", "v6"])
def test_round_trip_every_format_order_link_type_and_ip_version(fmt, order, link_type, v6):
    if (link_type, v6) in ((228, True), (229, False)):
        link_type = 229 if v6 else 228  # 228/229 carry one IP version each: use the right one
    conv = conversation(v6=v6)
    buf = io.BytesIO()
    write_capture(buf, [conv], format=fmt, byte_order=order, link_type=link_type, nanosecond=order == ">", mss=1000)
    streams, events, diags = read_back(buf.getvalue())
    assert diags == []
    to_server, to_client = expected_streams(conv)
    assert bytes(streams[(1, Direction.FORWARD)]) == to_server
    assert bytes(streams[(1, Direction.REVERSE)]) == to_client
    closes = [e.reason for e in events if isinstance(e, StreamClosed)]
    assert closes == ["fin", "fin"]


@pytest.mark.parametrize("vlan", [(10,), (10, 20), (1, 2, 3)])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_vlan_round_trip(vlan, fmt):
    conv = conversation(v6=len(vlan) == 2)
    buf = io.BytesIO()
    write_capture(buf, [conv], format=fmt, vlan=vlan, ipv4_options=b"\x01\x01\x01\x00", ipv6_extensions=True)
    streams, _, diags = read_back(buf.getvalue())
    assert diags == []
    assert (bytes(streams[(1, Direction.FORWARD)]), bytes(streams[(1, Direction.REVERSE)])) == expected_streams(conv)


def test_pcapng_simple_blocks_and_skipped_blocks():
    conv = conversation()
    buf = io.BytesIO()
    write_capture(buf, [conv], format="pcapng", simple_blocks=True, extra_blocks=True)
    streams, events, diags = read_back(buf.getvalue())
    assert diags == []
    assert (bytes(streams[(1, Direction.FORWARD)]), bytes(streams[(1, Direction.REVERSE)])) == expected_streams(conv)
    assert all(e.timestamp_ns is None for e in events if isinstance(e, StreamData))


def test_timestamps_survive_and_name_the_completing_packet():
    conv = conversation()
    buf = io.BytesIO()
    written = write_capture(buf, [conv], format="pcap", nanosecond=True, mss=1000)
    _, events, _ = read_back(buf.getvalue())
    data = [e for e in events if isinstance(e, StreamData)]
    by_number = {i + 1: s for i, s in enumerate(written.segments)}
    for e in data:
        assert e.timestamp_ns == by_number[e.packet].timestamp_ns
    assert data[0].timestamp_ns == 10_000_000_000


@pytest.mark.parametrize(
    "imp",
    [
        Impairments(swap={0, 2}),
        Impairments(retransmit={0, 3, 7}),
        Impairments(shuffle_window=5, seed=1),
        Impairments(shuffle_window=3, seed=2, retransmit={1, 4}, swap={9}),
    ],
    ids=["swap", "retransmit", "shuffle", "mixed"],
)
def test_reordering_and_retransmission_lose_nothing(imp):
    conv = conversation()
    buf = io.BytesIO()
    write_capture(buf, [conv], mss=700, impairments=imp)
    streams, _, _ = read_back(buf.getvalue())
    assert (bytes(streams[(1, Direction.FORWARD)]), bytes(streams[(1, Direction.REVERSE)])) == expected_streams(conv)


def _lost_ranges(conv: TcpConversation, mss: int, drop) -> Dict[bool, List[Tuple[int, int]]]:
    ranges: Dict[bool, List[Tuple[int, int]]] = {True: [], False: []}
    offsets = {True: 0, False: 0}
    for s in plan_segments(conv, mss=mss):
        if s.data_index is None:
            continue
        if s.data_index in drop:
            ranges[s.from_client].append((offsets[s.from_client], offsets[s.from_client] + len(s.payload)))
        offsets[s.from_client] += len(s.payload)
    return ranges


def _check_with_gaps(got: bytes, want: bytes, lost: List[Tuple[int, int]]) -> None:
    assert len(got) == len(want)
    for lo, hi in lost:
        assert got[lo:hi] == b"?" * (hi - lo)
    mask = bytearray(want)
    for lo, hi in lost:
        mask[lo:hi] = b"?" * (hi - lo)
    assert got == bytes(mask)


@pytest.mark.parametrize("drop", [{0}, {2}, {4, 5}, {5}, {6, 8}, {12}, {1, 13}])
def test_loss_becomes_gaps_of_exactly_the_lost_bytes(drop):
    conv = conversation()
    buf = io.BytesIO()
    write_capture(buf, [conv], mss=1000, impairments=Impairments(drop=drop, shuffle_window=2, seed=5))
    streams, events, _ = read_back(buf.getvalue())
    lost = _lost_ranges(conv, 1000, drop)
    to_server, to_client = expected_streams(conv)
    _check_with_gaps(bytes(streams[(1, Direction.FORWARD)]), to_server, lost[True])
    _check_with_gaps(bytes(streams[(1, Direction.REVERSE)]), to_client, lost[False])
    assert [e.reason for e in events if isinstance(e, StreamClosed)] == ["fin", "fin"]


def test_snaplen_cut_becomes_gaps():
    conv = conversation()
    buf = io.BytesIO()
    write_capture(buf, [conv], mss=1000, snaplen=54 + 100)  # Ethernet+IPv4+TCP headers + 100 payload bytes
    streams, events, diags = read_back(buf.getvalue())
    assert diags == []
    to_server, _ = expected_streams(conv)
    got = bytes(streams[(1, Direction.FORWARD)])
    assert len(got) == len(to_server)
    for start in range(0, len(to_server), 1000):
        chunk = to_server[start : start + 1000]
        assert got[start : start + 100] == chunk[:100]
        assert got[start + 100 : start + len(chunk)] == b"?" * (len(chunk) - 100)
    assert {e.reason for e in events if isinstance(e, StreamGap)} == {"cut by the capture snaplen"}


def test_many_interleaved_conversations_v4_and_v6_with_reset_and_midstream():
    convs = [conversation(port=41000 + i, v6=i % 2 == 1, isn=2**32 - 3000 * i - 1) for i in range(6)]
    convs.append(conversation(port=42000, handshake=False, close=False))
    convs.append(conversation(port=42001, reset=True))
    buf = io.BytesIO()
    write_capture(buf, convs, format="pcapng", mss=512, impairments={0: Impairments(shuffle_window=4, seed=9)})
    streams, events, diags = read_back(buf.getvalue())
    assert diags == []
    serial_of_port = {}
    for e in events:
        port = e.connection.initiator.port if e.connection.initiator.port != 9092 else e.connection.responder.port
        serial_of_port[port] = e.connection.serial
    for conv in convs:
        serial = serial_of_port[conv.client[1]]
        to_server, to_client = expected_streams(conv)
        assert bytes(streams[(serial, Direction.FORWARD)]) == to_server
        assert bytes(streams[(serial, Direction.REVERSE)]) == to_client
    closes = defaultdict(list)
    for e in events:
        if isinstance(e, StreamClosed):
            closes[e.connection.initiator.port].append(e.reason)
    assert closes[42000] == ["end-of-capture", "end-of-capture"]
    assert closes[42001] == ["rst", "rst"]


def test_write_to_path_and_file(tmp_path):
    conv = conversation()
    path = tmp_path / "c.pcapng"
    n = write_capture(path, [conv], format="pcapng").packets
    assert n == len(plan_segments(conv))
    streams, _, _ = read_back(path)
    assert bytes(streams[(1, Direction.FORWARD)]) == expected_streams(conv)[0]


def test_writer_rejects_bad_options():
    conv = conversation()
    with pytest.raises(ValueError):
        write_capture(io.BytesIO(), [conv], format="cap")
    with pytest.raises(ValueError):
        write_capture(io.BytesIO(), [conv], link_type=113, vlan=(1,))
    with pytest.raises(ValueError):
        write_capture(io.BytesIO(), [conversation(v6=True)], link_type=228)
    with pytest.raises(ValueError):
        plan_segments(conv, mss=0)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=6),
    mss=st.integers(1, 1500),
    seed=st.integers(0, 2**32),
    window=st.integers(0, 8),
    fmt=st.sampled_from(["pcap", "pcapng"]),
    link_type=st.sampled_from([1, 113, 276, 0, 101]),
)
def test_random_segmentation_and_reordering_round_trip(sizes, mss, seed, window, fmt, link_type):
    msgs = [(Side.CLIENT if i % 2 == 0 else Side.SERVER, payload(n, seed + i), 1.0 + i) for i, n in enumerate(sizes)]
    conv = TcpConversation(("198.51.100.1", 50000), ("198.51.100.2", 9092), msgs, client_isn=seed % 2**32)
    segs = plan_segments(conv, mss=mss)
    n_data = sum(s.data_index is not None for s in segs)
    rng = random.Random(seed)
    imp = Impairments(shuffle_window=window, seed=seed, retransmit=set(rng.sample(range(n_data), min(3, n_data))))
    buf = io.BytesIO()
    write_segments(buf, apply_impairments(segs, imp), format=fmt, link_type=link_type)
    streams, _, diags = read_back(buf.getvalue())
    assert diags == []
    assert (bytes(streams[(1, Direction.FORWARD)]), bytes(streams[(1, Direction.REVERSE)])) == expected_streams(conv)


@pytest.mark.usefixtures("tshark_required")
@pytest.mark.parametrize("fmt,link_type,v6", [("pcap", 1, False), ("pcapng", 276, True), ("pcap", 113, False)])
def test_tshark_agrees_on_packets_and_stream_payload(tmp_path, fmt, link_type, v6):
    convs = [conversation(port=43000, v6=v6), conversation(port=43001, v6=v6, isn=2**32 - 100)]
    path = tmp_path / f"t.{fmt}"
    written = write_capture(path, convs, format=fmt, link_type=link_type, vlan=(7,) if link_type == 1 else (), mss=1200)
    out = (
        subprocess.run(
            [
                "tshark",
                "-r",
                str(path),
                "-o",
                "tcp.check_checksum:TRUE",
                "-o",
                "ip.check_checksum:TRUE",
                "-T",
                "fields",
                "-E",
                "separator=/t",
                "-E",
                "aggregator=;",
                "-e",
                "tcp.stream",
                "-e",
                "tcp.srcport",
                "-e",
                "tcp.len",
                "-e",
                "tcp.checksum.status",
                "-e",
                "ip.checksum.status",
                "-e",
                "_ws.expert.severity",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()
    )
    assert len(out) == written.packets
    per_stream: Dict[Tuple[int, int], int] = defaultdict(int)
    for line in out:
        stream, sport, length, tcp_ok, ip_ok, severities = (line.split("\t") + [""] * 6)[:6]
        assert tcp_ok == "1"  # checksum good
        assert ip_ok in ("1", "")  # good (IPv4) or absent (IPv6)
        per_stream[(int(stream), int(sport))] += int(length)
        # tshark's TCP analysis finds nothing to warn about (retransmissions, unseen segments, bad lengths).
        assert not {"6291456", "8388608"} & set(severities.split(";")), line
    streams, events, _ = read_back(path)
    ours = {}
    for e in events:
        cid = e.connection
        ours[(cid.serial - 1, cid.source(e.direction).port)] = len(streams[(cid.serial, e.direction)])
    assert {k: v for k, v in per_stream.items() if v} == {k: v for k, v in ours.items() if v}
