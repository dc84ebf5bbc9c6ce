"""Fuzz harness: TCP reassembly and Kafka conversation tracking on segments cut, reordered and repeated.

The input describes one TCP connection: two byte streams (client→server, server→client; seeds put Kafka
requests and responses there), initial sequence numbers (any value: wraparound is exercised), and how to
cut the streams into segments, interleave them, reorder them a little, retransmit some (whole, or merged
with a neighbour so retransmissions overlap) and whether the handshake and FINs were captured.  A
second, garbage connection (random flags, sequence numbers and payloads) can ride along.

Layout: 16 header bytes, then the client stream, the server stream, and schedule bytes (cycled)::

    0      flags: 1 handshake, 2 FINs, 4 garbage connection, 8 server speaks first, 16 RST at the end
    1-4    client ISN    5-8  server ISN     9-10  client stream length   11-12 server stream length
    13     largest segment (1..256)   14  reordering window (0..7)   15  retransmission rate (/256)

Oracles: nothing at all escapes ``TcpReassembler`` or ``KafkaConversations`` (the capture layer reports
damage as records, never raises); for the real connection, each direction's ``StreamData`` events are
contiguous and spell out exactly the stream sent (from the first byte seen when no handshake was
captured), with no gap; each direction is closed exactly once; every record ``str()``-ingifies.  Budget:
64·n + 1 MiB, 1 s CPU.

    python fuzz/fuzz_tcp_reassembly.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.oracles import Budget, fail, outcome  # noqa: E402

NAME = "tcp_reassembly"
_HEADER = struct.Struct(">BIIHHBBB")
_MOD = 1 << 32
CLIENT = ("10.0.0.1", 40000)
SERVER = ("10.0.0.10", 9092)
_m = None
#: Keeps one input cheap: streams longer than this many segments get larger segments.
MAX_SEGMENTS_PER_DIRECTION = 64


def setup() -> None:
    global _m
    from kproto.capture import packets, reassembly
    from kproto.capture import conversation

    _m = (packets, reassembly, conversation)


def build_input(
    client: bytes,
    server: bytes,
    *,
    flags: int = 3,
    client_isn: int = 1000,
    server_isn: int = 5000,
    max_segment: int = 40,
    window: int = 2,
    retransmit: int = 30,
    schedule: bytes = b"",
) -> bytes:
    """An input for this harness (used to make seeds)."""
    return (
        _HEADER.pack(
            flags, client_isn, server_isn, len(client), len(server), max_segment - 1 & 0xFF, window, retransmit
        )
        + client
        + server
        + schedule
    )


class _Schedule:
    def __init__(self, data: bytes) -> None:
        self.data = data or b"\x00"
        self.i = 0

    def next(self) -> int:
        b = self.data[self.i % len(self.data)]
        self.i += 1
        return b


def plan(data: bytes):
    """(segments, expectations) for an input; expectations per direction: (isn, stream bytes)."""
    packets = _m[0]
    if len(data) < _HEADER.size:
        return None
    flags, cisn, sisn, clen, slen, maxseg, window, rate = _HEADER.unpack_from(data)
    body = data[_HEADER.size :]
    client = body[:clen]
    server = body[clen : clen + slen]
    sched = _Schedule(body[clen + slen :])
    maxseg += 1
    window &= 7
    from kproto.pcap.numbers import TCP_ACK as A, TCP_FIN as F, TCP_PSH as P, TCP_RST as R, TCP_SYN as S

    def seg(from_client: bool, seq: int, fl: int, payload: bytes = b"", ack: int = 0):
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        return packets.TcpSegment.make(
            src[0], src[1], dst[0], dst[1], seq % _MOD, ack=ack % _MOD, flags=fl, payload=payload
        )

    def cut(stream: bytes, from_client: bool, isn: int):
        out, pos = [], 0
        floor = max(1, len(stream) // MAX_SEGMENTS_PER_DIRECTION)
        while pos < len(stream):
            n = max(floor, 1 + sched.next() % maxseg)
            out.append((from_client, pos, stream[pos : pos + n]))
            pos += n
        return out

    head = []
    if flags & 1:
        head = [seg(True, cisn, S), seg(False, sisn, S | A, ack=cisn + 1), seg(True, cisn + 1, A, ack=sisn + 1)]
    c_parts = cut(client, True, cisn)
    s_parts = cut(server, False, sisn)
    order = []
    first, second = (s_parts, c_parts) if flags & 8 else (c_parts, s_parts)
    while first or second:  # interleave: a few pieces from one side, then from the other
        for src in (first, second):
            for _ in range(1 + sched.next() % 3):
                if src:
                    order.append(src.pop(0))
    # reorder within a window
    for i in range(len(order)):
        j = i + sched.next() % (window + 1)
        if j < len(order):
            order[i], order[j] = order[j], order[i]
    # retransmissions: repeat a piece, or a piece merged with the next one of the same direction
    final = []
    for i, piece in enumerate(order):
        final.append(piece)
        if sched.next() < rate:
            later = [p for p in order[i + 1 : i + 4] if p[0] == piece[0] and p[1] == piece[1] + len(piece[2])]
            if later and sched.next() & 1:
                final.append((piece[0], piece[1], piece[2] + later[0][2]))
            else:
                final.append(piece)
    segments = list(head)
    for from_client, off, payload in final:
        isn = cisn if from_client else sisn
        segments.append(seg(from_client, isn + (1 if flags & 1 else 0) + off, P, payload))
    if flags & 2:
        for from_client, stream, isn in ((True, client, cisn), (False, server, sisn)):
            segments.append(seg(from_client, isn + (1 if flags & 1 else 0) + len(stream), F))
    if flags & 16:
        segments.append(seg(True, cisn + (1 if flags & 1 else 0) + len(client), R))
    if flags & 4:  # garbage connection
        for _ in range(1 + sched.next() % 8):
            fl = sched.next()
            seq = sched.next() << 24 | sched.next() << 8 | sched.next()
            payload = bytes(sched.next() for _ in range(sched.next() % 24))
            segments.insert(
                sched.next() % (len(segments) + 1),
                packets.TcpSegment.make(
                    "10.9.9.9", 5555, "10.0.0.10", 9092, seq, ack=sched.next() << 16, flags=fl, payload=payload
                ),
            )
    first_seen = {}
    for s in segments:
        if s.src == CLIENT[0] or s.src == SERVER[0]:
            key = s.src == CLIENT[0]
            if key not in first_seen and (s.payload or s.flags & (S | F)):
                first_seen[key] = s
    return segments, {True: (client, cisn), False: (server, sisn)}, flags, first_seen


def one_input(data: bytes) -> None:
    if _m is None:
        setup()
    planned = plan(data)
    if planned is None:
        return
    segments, streams, flags, first_seen = planned
    packets, reassembly, conversation = _m
    with Budget(len(data), what="reassembly + conversations", data=data):
        res = outcome(_run, segments, allowed=(), what="TcpReassembler/KafkaConversations", data=data)
    events, records = res[1]
    check_streams(events, streams, flags, first_seen, data)


def _run(segments):
    reassembly, conversation = _m[1], _m[2]
    r = reassembly.TcpReassembler()
    conv = conversation.KafkaConversations(ports={9092})
    events, records = [], []
    for s in segments:
        r.feed(s)
        for e in r.events():
            events.append(e)
            conv.feed(e)
        records.extend(conv.records())
    r.finish()
    for e in r.events():
        events.append(e)
        conv.feed(e)
    conv.finish()
    records.extend(conv.records())
    for rec in records:
        str(rec)
    return events, records


def check_streams(events, streams, flags, first_seen, data) -> None:
    reassembly = _m[1]
    for from_client, (stream, isn) in streams.items():
        src = CLIENT if from_client else SERVER
        mine = [
            e
            for e in events
            if e.connection.source(e.direction) == reassembly.Endpoint(*src)
            and (e.connection.initiator.port in (CLIENT[1], SERVER[1]))
            and e.connection.responder.port in (CLIENT[1], SERVER[1])
        ]
        if flags & 1:
            start = 0
        else:
            first = first_seen.get(from_client)
            if first is None:
                continue
            start = (first.seq - isn) % _MOD
            start = min(start, len(stream))
        got = bytearray()
        expect_at = None
        closes = 0
        for e in mine:
            if isinstance(e, reassembly.StreamGap):
                if flags & 16:
                    continue  # an RST while data was still out of order leaves holes: allowed
                raise fail(f"reassembly declared a gap in a stream with no loss: {e!r}", data)
            if isinstance(e, reassembly.StreamClosed):
                closes += 1
                continue
            if expect_at is None:
                expect_at = e.offset
            if e.offset != expect_at:
                raise fail(f"StreamData at offset {e.offset}, expected {expect_at}", data)
            got += e.data
            expect_at += len(e.data)
        if closes != 1:
            raise fail(f"direction {'client' if from_client else 'server'} closed {closes} times", data)
        if flags & 16:
            continue
        want = stream[start:]
        if bytes(got) != want:
            raise fail(
                f"{'client' if from_client else 'server'} stream reassembled as {bytes(got)[:80].hex()}... "
                f"({len(got)} bytes), sent {want[:80].hex()}... ({len(want)} bytes)",
                data,
            )


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
