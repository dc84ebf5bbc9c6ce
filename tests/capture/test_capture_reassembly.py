"""TCP reassembly, fed with hand-built segments (no files involved)."""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.capture import Direction, StreamClosed, StreamData, StreamGap, TcpReassembler, TcpSegment
from kproto.pcap.numbers import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN

C = ("10.0.0.1", 40000)
S = ("10.0.0.2", 9092)


def c2s(seq, payload=b"", flags=TCP_ACK, ack=0, n=0, length=None):
    return TcpSegment.make(
        C[0],
        C[1],
        S[0],
        S[1],
        seq % 2**32,
        ack=ack % 2**32,
        flags=flags,
        payload=payload,
        payload_length=length,
        number=n,
        timestamp_ns=n * 1000,
    )


def s2c(seq, payload=b"", flags=TCP_ACK, ack=0, n=0, length=None):
    return TcpSegment.make(
        S[0],
        S[1],
        C[0],
        C[1],
        seq % 2**32,
        ack=ack % 2**32,
        flags=flags,
        payload=payload,
        payload_length=length,
        number=n,
        timestamp_ns=n * 1000,
    )


class Streams:
    """Collects events into per-connection, per-direction byte strings ('?' for gap bytes), checking that
    offsets are contiguous and nothing follows a close.  ``data``/``gaps``/``closed`` describe the first
    connection; ``all_data`` every connection, keyed by (serial, direction)."""

    def __init__(self, events) -> None:
        self.events = list(events)
        self.all_data: Dict[Tuple[int, Direction], bytearray] = {}
        self.all_gaps: Dict[Tuple[int, Direction], List[Tuple[int, int, str]]] = {}
        self.all_closed: Dict[Tuple[int, Direction], Optional[str]] = {}
        lengths: Dict[Tuple[int, Direction], int] = {}
        for e in self.events:
            key = (e.connection.serial, e.direction)
            buf = self.all_data.setdefault(key, bytearray())
            gaps = self.all_gaps.setdefault(key, [])
            pos = lengths.get(key, 0)
            assert self.all_closed.get(key) is None, f"event after close: {e}"
            if isinstance(e, StreamData):
                assert e.offset == pos, e
                assert e.data
                lengths[key] = pos + len(e.data)
                buf += e.data
            elif isinstance(e, StreamGap):
                assert e.offset == pos and e.length > 0, e
                lengths[key] = pos + e.length
                # Fuzzed sequence numbers can declare gigabyte gaps: only small ones are materialised.
                buf += b"?" * e.length if e.length <= 1 << 20 else b"<huge gap>"
                gaps.append((e.offset, e.length, e.reason))
            else:
                assert isinstance(e, StreamClosed)
                assert e.offset == pos
                self.all_closed[key] = e.reason
        first = min((serial for serial, _ in self.all_data), default=1)
        self.data = {d: self.all_data.get((first, d), bytearray()) for d in Direction}
        self.gaps = {d: self.all_gaps.get((first, d), []) for d in Direction}
        self.closed = {d: self.all_closed.get((first, d)) for d in Direction}


def run(segments, **kw) -> Streams:
    r = TcpReassembler(**kw)
    events = []
    for s in segments:
        r.feed(s)
        events += r.events()
    r.finish()
    events += r.events()
    return Streams(events)


def handshake(cisn=100, sisn=5000):
    return [
        c2s(cisn, flags=TCP_SYN, n=1),
        s2c(sisn, flags=TCP_SYN | TCP_ACK, ack=cisn + 1, n=2),
        c2s(cisn + 1, ack=sisn + 1, n=3),
    ]


def test_in_order_with_handshake_and_fin():
    segs = handshake() + [
        c2s(101, b"hello ", n=4),
        c2s(107, b"world", n=5),
        s2c(5001, b"ok", ack=112, n=6),
        c2s(112, flags=TCP_FIN | TCP_ACK, n=7),
        s2c(5003, flags=TCP_FIN | TCP_ACK, ack=113, n=8),
    ]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"hello world"
    assert bytes(st_.data[Direction.REVERSE]) == b"ok"
    assert st_.closed == {Direction.FORWARD: "fin", Direction.REVERSE: "fin"}
    data = [e for e in st_.events if isinstance(e, StreamData)]
    assert [(e.packet, e.timestamp_ns) for e in data] == [(4, 4000), (5, 5000), (6, 6000)]
    cid = data[0].connection
    assert cid.initiator == C and cid.responder == S and cid.syn_seen and cid.serial == 1
    assert cid.source(Direction.REVERSE) == S and str(cid.initiator) == "10.0.0.1:40000"


def test_out_of_order_is_released_with_the_time_of_the_filling_packet():
    segs = handshake() + [c2s(106, b"world", n=4), c2s(101, b"hello", n=5)]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"helloworld"
    data = [e for e in st_.events if isinstance(e, StreamData)]
    assert [(e.data, e.packet, e.timestamp_ns) for e in data] == [(b"hello", 5, 5000), (b"world", 4, 5000)]


def test_overlaps_first_seen_wins():
    segs = handshake() + [
        c2s(103, b"CDEF", n=4),  # buffered
        c2s(101, b"abcdXYgh", n=5),  # overlaps the buffered CDEF: the buffered bytes stay
        c2s(105, b"zzzzij", n=6),  # overlaps delivered bytes: only "ij" is new
    ]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"abCDEFghij"


def test_retransmission_is_ignored():
    segs = handshake() + [c2s(101, b"abc", n=4), c2s(101, b"abc", n=5), c2s(104, b"def", n=6), c2s(101, b"abcdef", n=7)]
    r = TcpReassembler()
    for s in segs:
        r.feed(s)
    r.finish()
    st_ = Streams(r.events())
    assert bytes(st_.data[Direction.FORWARD]) == b"abcdef"
    assert r.stats.duplicate_bytes == 9


def test_gap_declared_when_peer_acknowledges_unseen_bytes():
    segs = handshake() + [
        c2s(101, b"aaaa", n=4),
        # 105..108 lost in the capture
        c2s(109, b"cccc", n=5),
        s2c(5001, b"resp", ack=113, n=6),  # the server got everything
    ]
    r = TcpReassembler()
    events = []
    for s in segs:
        r.feed(s)
        events += r.events()
    # The gap and the data after it come out as soon as the acknowledgement is seen, before finish().
    kinds = [(type(e).__name__, e.direction) for e in events]
    assert ("StreamGap", Direction.FORWARD) in kinds
    st_ = Streams(events)
    assert bytes(st_.data[Direction.FORWARD]) == b"aaaa????cccc"
    assert st_.gaps[Direction.FORWARD] == [(4, 4, "acknowledged by the peer but not in the capture")]
    gap = next(e for e in events if isinstance(e, StreamGap))
    assert gap.packet == 6


def test_lost_tail_is_declared_when_acknowledged_and_a_single_extra_byte_is_the_fin():
    segs = handshake() + [c2s(101, b"aaaa", n=4), s2c(5001, b"r", ack=109, n=5)]  # 105..108 never captured
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"aaaa????"
    # Now only the FIN was missed: acknowledging one byte past the data is not a gap.
    segs = handshake() + [c2s(101, b"aaaa", n=4), s2c(5001, b"r", ack=106, n=5)]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"aaaa" and st_.gaps[Direction.FORWARD] == []


def test_buffer_limit_declares_a_gap():
    segs = handshake() + [c2s(101 + 10 + 10 * i, b"x" * 10, n=4 + i) for i in range(10)]
    r = TcpReassembler(max_buffered_bytes=35)
    events = []
    for s in segs:
        r.feed(s)
        events += r.events()
    st_ = Streams(events)
    # The first 10 bytes never came; once more than 35 bytes waited, the hole became a gap.
    assert st_.gaps[Direction.FORWARD] == [(0, 10, "out-of-order buffer limit reached")]
    assert bytes(st_.data[Direction.FORWARD]) == b"?" * 10 + b"x" * 100
    r2 = TcpReassembler(max_buffered_segments=3)
    for s in segs:
        r2.feed(s)
    assert [e for e in r2.events() if isinstance(e, StreamGap)]


def test_midstream_connection_without_syn():
    segs = [s2c(7777, b"response-tail", n=1), c2s(42, b"request", ack=7777 + 13, n=2), s2c(7790, b"next", n=3)]
    st_ = run(segs)
    # The first packet's sender is taken as the initiator.
    assert bytes(st_.data[Direction.FORWARD]) == b"response-tailnext"
    assert bytes(st_.data[Direction.REVERSE]) == b"request"
    cid = st_.events[0].connection
    assert cid.initiator == S and not cid.syn_seen
    assert st_.closed == {Direction.FORWARD: "end-of-capture", Direction.REVERSE: "end-of-capture"}


def test_sequence_number_wraparound():
    isn = 2**32 - 6
    segs = handshake(cisn=isn) + [
        c2s(isn + 1 + 10, b"0123456789", n=5),  # beyond the wrap, arrives first
        c2s(isn + 1, b"abcdefghij", n=4),
        c2s(isn + 21, flags=TCP_FIN | TCP_ACK, n=6),
    ]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"abcdefghij0123456789"
    assert st_.closed[Direction.FORWARD] == "fin"


def test_stream_longer_than_4_gib_of_sequence_space():
    # Offsets keep growing past 2**32 even though sequence numbers wrap (sent in 1 MiB steps of length-only
    # segments whose bytes the snaplen did not keep, so the test stays small).
    r = TcpReassembler()
    r.feed(c2s(0, flags=TCP_SYN, n=1))
    step = 1 << 20
    for i in range(4200):
        r.feed(c2s(1 + i * step, b"", n=2 + i, length=step))
        r.events()
    r.feed(c2s(1 + 4200 * step, b"end", n=9999))
    last = r.events()[-1]
    assert isinstance(last, StreamData) and last.offset == 4200 * step and last.data == b"end"


def test_rst_flushes_and_closes_both_directions():
    segs = handshake() + [c2s(101, b"ab", n=4), c2s(105, b"ef", n=5), c2s(107, flags=TCP_RST, n=6)]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"ab??ef"
    assert st_.gaps[Direction.FORWARD][0][2] == "hole before a connection reset"
    assert st_.closed == {Direction.FORWARD: "rst", Direction.REVERSE: "rst"}


def test_fin_waits_for_missing_data_and_late_packets_are_ignored():
    segs = handshake() + [
        c2s(104, b"def", flags=TCP_FIN | TCP_ACK, n=4),
        c2s(101, b"abc", n=5),
        s2c(5001, flags=TCP_FIN | TCP_ACK, ack=108, n=6),
        c2s(101, b"abc", n=7),  # late retransmission after both FINs
    ]
    r = TcpReassembler()
    for s in segs:
        r.feed(s)
    r.finish()
    st_ = Streams(r.events())
    assert bytes(st_.data[Direction.FORWARD]) == b"abcdef"
    assert st_.closed == {Direction.FORWARD: "fin", Direction.REVERSE: "fin"}
    assert r.stats.ignored_segments == 1


def test_port_reuse_starts_a_new_connection():
    first = handshake() + [
        c2s(101, b"one", n=4),
        c2s(104, flags=TCP_FIN | TCP_ACK, n=5),
        s2c(5001, flags=TCP_FIN | TCP_ACK, ack=105, n=6),
    ]
    second = handshake(cisn=9000, sisn=70000) + [c2s(9001, b"two", n=10)]
    st_ = run(first + second)
    serials = sorted({e.connection.serial for e in st_.events})
    assert serials == [1, 2]
    got = {(e.connection.serial, bytes(e.data)) for e in st_.events if isinstance(e, StreamData)}
    assert got == {(1, b"one"), (2, b"two")}


def test_snaplen_placeholder_becomes_a_gap_unless_a_full_copy_arrives():
    segs = handshake() + [c2s(101, b"abcd", length=10, n=4), c2s(111, b"klm", n=5)]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"abcd??????klm"
    assert st_.gaps[Direction.FORWARD] == [(4, 6, "cut by the capture snaplen")]
    # A retransmitted full copy arriving while the placeholder is still buffered fills it.
    segs = handshake() + [c2s(111, b"klm", n=4), c2s(101, b"abcd", length=10, n=5)]
    r = TcpReassembler()
    for s in segs:
        r.feed(s)
    # Nothing delivered yet beyond "abcd"? The placeholder is at the front: it is delivered as a gap at once.
    r.finish()
    st_ = Streams(r.events())
    assert bytes(st_.data[Direction.FORWARD]) == b"abcd??????klm"


def test_placeholder_gives_way_to_real_data_in_the_buffer():
    segs = handshake() + [
        c2s(121, b"tail", n=4),  # keeps everything after the hole buffered
        c2s(105, b"efgh", length=16, n=5),  # 105..120, only 4 bytes captured
        c2s(109, b"ijklmnopqrst", n=6),  # full copy of the cut part
        c2s(101, b"abcd", n=7),
    ]
    st_ = run(segs)
    assert bytes(st_.data[Direction.FORWARD]) == b"abcdefghijklmnopqrsttail"


def test_events_keep_capture_order_across_connections():
    other = ("10.0.0.3", 40001)
    segs = [
        c2s(1, b"A1", n=1),
        TcpSegment.make(other[0], other[1], S[0], S[1], 50, payload=b"B1", number=2),
        c2s(3, b"A2", n=3),
    ]
    r = TcpReassembler()
    order = []
    for s in segs:
        r.feed(s)
        order += [bytes(e.data) for e in r.events() if isinstance(e, StreamData)]
    assert order == [b"A1", b"B1", b"A2"]


def test_invalid_limits():
    with pytest.raises(ValueError):
        TcpReassembler(max_buffered_segments=0)


# --- property tests -----------------------------------------------------------------------------------


def _segments_for(data: bytes, cuts: List[int], isn: int) -> List[TcpSegment]:
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(data))) + [len(data)]
    return [c2s(isn + 1 + lo, data[lo:hi], n=10 + i) for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])) if hi > lo]


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=600),
    cuts=st.lists(st.integers(0, 600), max_size=30),
    isn=st.integers(0, 2**32 - 1),
    seed=st.integers(0, 2**32),
    dup=st.integers(0, 5),
)
def test_any_segmentation_order_and_duplication_gives_the_same_bytes(data, cuts, isn, seed, dup):
    rng = random.Random(seed)
    segs = _segments_for(data, cuts, isn)
    segs += [rng.choice(segs) for _ in range(dup)]  # retransmissions
    # Overlapping re-segmentation of the same bytes (a sender repacketizing a retransmission).
    lo = rng.randrange(len(data))
    hi = rng.randrange(lo, len(data)) + 1
    segs.append(c2s(isn + 1 + lo, data[lo:hi], n=99))
    rng.shuffle(segs)
    st_ = run([c2s(isn, flags=TCP_SYN, n=1)] + segs)
    assert bytes(st_.data[Direction.FORWARD]) == data
    assert st_.gaps[Direction.FORWARD] == []


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=400),
    cuts=st.lists(st.integers(0, 400), max_size=20),
    seed=st.integers(0, 2**32),
    drop=st.sets(st.integers(0, 20), max_size=5),
    limit=st.integers(1, 500),
)
def test_losses_become_gaps_of_exactly_the_lost_bytes(data, cuts, seed, drop, limit):
    rng = random.Random(seed)
    segs = _segments_for(data, cuts, 1000)
    lost = [s for i, s in enumerate(segs) if i in drop]
    kept = [s for i, s in enumerate(segs) if i not in drop] + [c2s(1001 + len(data), flags=TCP_FIN | TCP_ACK, n=400)]
    rng.shuffle(kept)
    st_ = run(
        [c2s(1000, flags=TCP_SYN, n=1)] + kept + [s2c(1, flags=TCP_ACK, ack=1001 + len(data) + 1, n=500)],
        max_buffered_bytes=limit,
    )
    assert st_.closed[Direction.FORWARD] == "fin"
    out = bytes(st_.data[Direction.FORWARD])
    assert len(out) == len(data)
    lost_ranges = [(s.seq - 1001, s.seq - 1001 + len(s.payload)) for s in lost]
    for i, (a, b) in enumerate(zip(out, data)):
        in_lost = any(lo <= i < hi for lo, hi in lost_ranges)
        if in_lost:
            assert a == ord("?")
        elif a != b:
            # A byte may only be missing if a limit forced a gap before it arrived; it is then '?'.
            assert a == ord("?")
    gap_bytes = sum(n for _, n, _ in st_.gaps[Direction.FORWARD])
    assert gap_bytes >= sum(hi - lo for lo, hi in lost_ranges)
    if limit >= len(data):
        assert gap_bytes == sum(hi - lo for lo, hi in lost_ranges)
        assert all(out[i] == data[i] for i in range(len(data)) if not any(lo <= i < hi for lo, hi in lost_ranges))


_segment_strategy = st.builds(
    lambda from_client, seq, ack, flags, payload, extra: (c2s if from_client else s2c)(
        seq, payload, flags=flags, ack=ack, length=len(payload) + extra
    ),
    st.booleans(),
    st.integers(0, 2**32 - 1) | st.integers(990, 1100),
    st.integers(0, 2**32 - 1) | st.integers(990, 1100),
    st.integers(0, 0x3F),
    st.binary(max_size=40),
    st.integers(0, 30) | st.just(0),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_segment_strategy, max_size=40), st.integers(1, 200))
def test_arbitrary_segments_never_break_the_event_invariants(segments, limit):
    # Random flags, sequence and acknowledgement numbers: whatever comes out must still be a sequence of
    # contiguous data/gap events per direction that ends with at most one close (checked by Streams).
    st_ = run(segments, max_buffered_bytes=limit, max_buffered_segments=8)
    for key, buf in st_.all_data.items():
        assert st_.all_closed[key] is not None  # finish() closed everything
