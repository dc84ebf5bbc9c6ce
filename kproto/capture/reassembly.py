"""TCP reassembly: per connection and direction, segments in, ordered byte-stream events out.

The reassembler is sans-I/O: :meth:`TcpReassembler.feed` takes one
:class:`~kproto.capture.packets.TcpSegment` (in capture order), :meth:`TcpReassembler.events` hands
back what that made available, and :meth:`TcpReassembler.finish` ends the capture.  It does no reading
of its own, so the capture reader, tests and the Spark pipeline (packets grouped by connection) feed it
alike.

Events, for each direction of each connection, in the order they became known:

* :class:`StreamData`: bytes at a stream offset, with the capture time and number of the packet that
  carried them (for bytes released by a late segment filling a hole, the later of the two times: the
  moment the bytes were all seen);
* :class:`StreamGap`: ``length`` bytes at ``offset`` that the capture does not have; delivery resumes
  after them;
* :class:`StreamClosed`: FIN reached, RST seen, or the capture ended.

Rules
    * **Offsets** count payload bytes from the first byte after the SYN, or from the first segment seen
      in that direction when the connection was caught mid-stream (no SYN); sequence numbers are
      unwrapped relative to the current position, so wraparound and streams beyond 4 GiB work.
    * **Overlaps and retransmissions: first seen wins.**  Bytes already delivered or already buffered
      are never replaced; a retransmission only fills what is still missing.  (Captured data is kept over
      the placeholder left by a packet the snaplen cut short.)
    * **Gaps** are declared when (a) the peer acknowledges bytes the capture never had (the receiver got
      them, so they will not come again), (b) the out-of-order buffer of a direction exceeds
      ``max_buffered_bytes`` or ``max_buffered_segments``, (c) an RST or the end of the capture leaves
      holes, or (d) the snaplen cut a packet's payload.  An acknowledgement that covers exactly one
      byte more than was seen at the end of a stream is taken as the acknowledgement of an unseen FIN,
      not as a lost byte; an acknowledgement more than 1 GiB ahead is taken as garbage.  A segment's
      acknowledgement is handled before its payload, so a gap in a request comes out before the
      response that reveals it.
    * **Open connections are bounded** by ``max_open_connections``: a capture of a port scan or of
      hundreds of thousands of one-packet flows would otherwise hold state for each until the end.
      Past the bound, the connection least recently active is closed early: its holes become gaps and
      both directions end with reason ``"evicted"`` (counted in ``stats.evicted_connections``).
    * **Connections** are keyed by their two endpoints.  The *initiator* is the sender of a SYN (or the
      receiver of a SYN/ACK); without handshake, the sender of the first packet seen.  A SYN on a
      finished connection's endpoints starts a new connection (``serial`` tells them apart); other
      segments arriving after a connection finished are ignored.  Bytes from before the first segment
      seen mid-stream (negative offsets) are dropped.
"""

from __future__ import annotations

import bisect
import enum
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from kproto.capture.packets import TcpSegment
from kproto.pcap.numbers import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN

__all__ = [
    "Endpoint",
    "Direction",
    "ConnectionId",
    "StreamData",
    "StreamGap",
    "StreamClosed",
    "StreamEvent",
    "ReassemblyStats",
    "TcpReassembler",
    "reassemble",
    "DEFAULT_MAX_BUFFERED_BYTES",
    "DEFAULT_MAX_BUFFERED_SEGMENTS",
    "DEFAULT_MAX_OPEN_CONNECTIONS",
    "GAP_EVICTED",
]

#: Default cap on out-of-order bytes held per direction of a connection.
DEFAULT_MAX_BUFFERED_BYTES = 4 * 1024 * 1024
#: Default cap on out-of-order pieces held per direction (guards against floods of tiny segments).
DEFAULT_MAX_BUFFERED_SEGMENTS = 8192
#: Default cap on connections tracked at once (a few KiB each, with the Kafka state built on them).
DEFAULT_MAX_OPEN_CONNECTIONS = 10_000

_MOD = 1 << 32
_HALF = 1 << 31
# An acknowledgement further ahead than this is taken as garbage, not as news about lost bytes.
_MAX_ACK_JUMP = 1 << 30

GAP_NOT_CAPTURED = "acknowledged by the peer but not in the capture"
GAP_BUFFER_LIMIT = "out-of-order buffer limit reached"
GAP_SNAPLEN = "cut by the capture snaplen"
GAP_RESET = "hole before a connection reset"
GAP_END = "hole at the end of the capture"
GAP_EVICTED = "hole in a connection evicted to stay within max_open_connections"


class Endpoint(NamedTuple):
    """An IP address (text form) and a port."""

    ip: str
    port: int

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


class Direction(enum.IntEnum):
    """Direction within a connection: ``FORWARD`` is from the initiator to the responder."""

    FORWARD = 0
    REVERSE = 1


@dataclass(frozen=True)
class ConnectionId:
    """Identity of one TCP connection in a capture.

    ``serial`` numbers connections in the order they were first seen (port reuse gives a new serial);
    ``syn_seen`` tells whether the handshake was captured (the initiator is then certain).
    """

    initiator: Endpoint
    responder: Endpoint
    serial: int
    syn_seen: bool

    def source(self, direction: Direction) -> Endpoint:
        return self.initiator if direction is Direction.FORWARD else self.responder

    def destination(self, direction: Direction) -> Endpoint:
        return self.responder if direction is Direction.FORWARD else self.initiator

    def __str__(self) -> str:
        return f"#{self.serial} {self.initiator} -> {self.responder}"


class StreamData(NamedTuple):
    """``data`` at ``offset`` of one direction; ``packet``/``timestamp_ns``: when it was complete."""

    connection: ConnectionId
    direction: Direction
    offset: int
    data: bytes
    timestamp_ns: Optional[int]
    packet: int


class StreamGap(NamedTuple):
    """``length`` bytes at ``offset`` that are missing from the capture; ``reason`` says how we know."""

    connection: ConnectionId
    direction: Direction
    offset: int
    length: int
    timestamp_ns: Optional[int]
    packet: Optional[int]
    reason: str


class StreamClosed(NamedTuple):
    """End of one direction: ``reason`` is ``"fin"``, ``"rst"``, ``"end-of-capture"`` or ``"evicted"``
    (too many connections open at once; later packets of it are ignored)."""

    connection: ConnectionId
    direction: Direction
    offset: int
    timestamp_ns: Optional[int]
    packet: Optional[int]
    reason: str


StreamEvent = Union[StreamData, StreamGap, StreamClosed]


@dataclass
class ReassemblyStats:
    """Counters over everything fed so far."""

    segments: int = 0
    connections: int = 0
    delivered_bytes: int = 0
    duplicate_bytes: int = 0  #: payload bytes already delivered or buffered when they came (again)
    gap_bytes: int = 0
    gaps: int = 0
    ignored_segments: int = 0  #: after a connection finished, or before the first segment of a mid-stream direction
    evicted_connections: int = 0  #: closed early to stay within max_open_connections
    gap_reasons: Dict[str, int] = field(default_factory=dict)


class _Piece:
    """A buffered interval [start, end): bytes, or a placeholder (``data is None``) for uncaptured ones."""

    __slots__ = ("start", "end", "data", "ts", "packet")

    def __init__(self, start: int, end: int, data: Optional[bytes], ts: Optional[int], packet: int) -> None:
        self.start = start
        self.end = end
        self.data = data
        self.ts = ts
        self.packet = packet


def _piece_start(p: _Piece) -> int:
    return p.start


def _later(a: Optional[int], b: Optional[int]) -> Optional[int]:
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


class _Half:
    """State of one direction of a connection."""

    __slots__ = ("base", "next", "pieces", "starts", "buffered", "fin", "closed", "acked")

    def __init__(self) -> None:
        self.base: Optional[int] = None  # sequence number of offset 0
        self.next = 0  # offset delivered up to
        self.pieces: List[_Piece] = []  # sorted, non-overlapping, all beyond `next`
        self.starts: List[int] = []  # piece starts, for bisect
        self.buffered = 0  # bytes of data held in pieces
        self.fin: Optional[int] = None  # offset of the FIN, when seen
        self.closed = False
        self.acked = 0  # highest offset the peer acknowledged

    def offset_of(self, seq: int) -> int:
        assert self.base is not None
        return self.next + ((seq - self.base - self.next + _HALF) % _MOD - _HALF)


class _Connection:
    __slots__ = ("cid", "key", "halves", "finished")

    def __init__(self, cid: ConnectionId, key: "_Key") -> None:
        self.cid = cid
        self.key = key
        self.halves = (_Half(), _Half())
        self.finished = False


_Key = Tuple[Endpoint, Endpoint]


class TcpReassembler:
    """Reassembles every TCP connection of a capture; see the module docstring for the rules.

    ``max_buffered_bytes`` and ``max_buffered_segments`` bound the out-of-order data held per direction;
    beyond them the oldest hole is declared a gap.  ``max_open_connections`` bounds the connections
    tracked at once (the least recently active is evicted).  ``max_finished`` bounds how many finished
    connections are remembered to recognise their late packets.
    """

    def __init__(
        self,
        *,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
        max_buffered_segments: int = DEFAULT_MAX_BUFFERED_SEGMENTS,
        max_finished: int = 65536,
        max_open_connections: int = DEFAULT_MAX_OPEN_CONNECTIONS,
    ) -> None:
        if max_buffered_bytes < 0 or max_buffered_segments < 1 or max_open_connections < 1:
            raise ValueError("buffer and connection limits must be positive")
        self.max_open_connections = max_open_connections
        self.max_buffered_bytes = max_buffered_bytes
        self.max_buffered_segments = max_buffered_segments
        self.max_finished = max_finished
        self.stats = ReassemblyStats()
        # Open connections, least recently active first.
        self._connections: "OrderedDict[_Key, _Connection]" = OrderedDict()
        # Both orientations of every open connection's 4-tuple, so one lookup per segment finds it.
        self._active: Dict[Tuple[str, int, str, int], Tuple[_Connection, Direction]] = {}
        self._finished: "OrderedDict[_Key, _Connection]" = OrderedDict()
        self._events: List[StreamEvent] = []
        self._serial = 0

    # --- public -------------------------------------------------------------------------------------

    def events(self) -> List[StreamEvent]:
        """Return (and forget) the events produced since the last call."""
        out = self._events
        self._events = []
        return out

    def feed(self, seg: TcpSegment) -> None:
        """Process one segment; call :meth:`events` to collect what it released."""
        self.stats.segments += 1
        flags = seg.flags
        flow = (seg.src, seg.sport, seg.dst, seg.dport)
        found = self._active.get(flow)
        if found is None:
            src = Endpoint(seg.src, seg.sport)
            dst = Endpoint(seg.dst, seg.dport)
            key = (src, dst) if src <= dst else (dst, src)
            if key in self._finished and not (flags & TCP_SYN and not flags & TCP_ACK):
                self.stats.ignored_segments += 1  # late packet of a finished connection
                return
            conn = self._new_connection(key, seg, src, dst)
            found = self._active[flow]
            if len(self._connections) > self.max_open_connections:
                self._evict(ts=seg.timestamp_ns, packet=seg.number)
        conn, direction = found
        self._connections.move_to_end(conn.key)
        half = conn.halves[direction]
        ts = seg.timestamp_ns

        if flags & TCP_SYN:
            if half.base is None:
                half.base = (seg.seq + 1) % _MOD
            elif (seg.seq + 1) % _MOD != half.base and half.next == 0 and not half.pieces:
                half.base = (seg.seq + 1) % _MOD  # a new ISN before any data: the last SYN wins
        if half.base is None:
            half.base = seg.seq
        # The acknowledgement says what the peer had received before it sent this segment: handle it
        # first, so a gap it reveals comes out before the answer this segment may carry.
        if flags & TCP_ACK:
            other = conn.halves[1 - direction]
            if other.base is not None and not other.closed:
                acked = other.offset_of(seg.ack)
                if other.next < acked <= other.next + _MAX_ACK_JUMP and acked > other.acked:
                    other.acked = acked
                    self._gap_to(
                        conn,
                        Direction(1 - direction),
                        other,
                        self._ack_horizon(other),
                        GAP_NOT_CAPTURED,
                        ts,
                        seg.number,
                    )
        start = half.offset_of((seg.seq + (1 if flags & TCP_SYN else 0)) % _MOD)
        if seg.payload_length:
            self._add(conn, direction, half, start, seg.payload, seg.payload_length, ts, seg.number)
        if flags & TCP_FIN and not half.closed:
            fin = start + seg.payload_length
            if half.fin is None or fin < half.fin:
                half.fin = fin
            self._check_fin(conn, direction, half, ts, seg.number)
        if flags & TCP_RST:
            for d in (Direction.FORWARD, Direction.REVERSE):
                h = conn.halves[d]
                if not h.closed:
                    self._flush(conn, d, h, GAP_RESET, ts, seg.number)
                if not h.closed:  # flushing may have reached a FIN
                    self._close(conn, d, h, "rst", ts, seg.number)
        if conn.halves[0].closed and conn.halves[1].closed:
            self._retire(conn)

    def _evict(self, ts: Optional[int], packet: Optional[int]) -> None:
        """Close the least recently active connection early (its holes become gaps)."""
        conn = next(iter(self._connections.values()))
        self.stats.evicted_connections += 1
        for d in (Direction.FORWARD, Direction.REVERSE):
            h = conn.halves[d]
            if h.closed:
                continue
            self._flush(conn, d, h, GAP_EVICTED, ts, packet)
            if not h.closed:
                self._close(conn, d, h, "evicted", ts, packet)
        self._retire(conn)

    def finish(self) -> None:
        """End of capture: declare what is still missing as gaps, close every open direction."""
        for conn in list(self._connections.values()):
            for d in (Direction.FORWARD, Direction.REVERSE):
                h = conn.halves[d]
                if h.closed:
                    continue
                self._flush(conn, d, h, GAP_END, None, None)
                if not h.closed:  # flushing may have reached a FIN
                    self._close(conn, d, h, "end-of-capture", None, None)
            self._retire(conn)

    # --- internals ----------------------------------------------------------------------------------

    def _new_connection(self, key: _Key, seg: TcpSegment, src: Endpoint, dst: Endpoint) -> _Connection:
        if seg.flags & TCP_SYN:
            initiator, responder = (dst, src) if seg.flags & TCP_ACK else (src, dst)
        else:
            initiator, responder = src, dst
        self._serial += 1
        self.stats.connections += 1
        conn = _Connection(ConnectionId(initiator, responder, self._serial, bool(seg.flags & TCP_SYN)), key)
        self._finished.pop(key, None)
        self._connections[key] = conn
        self._active[initiator + responder] = (conn, Direction.FORWARD)
        self._active[responder + initiator] = (conn, Direction.REVERSE)
        return conn

    def _retire(self, conn: _Connection) -> None:
        conn.finished = True
        key = conn.key
        if self._connections.get(key) is conn:
            del self._connections[key]
            cid = conn.cid
            self._active.pop(cid.initiator + cid.responder, None)
            self._active.pop(cid.responder + cid.initiator, None)
        self._finished[key] = conn
        self._finished.move_to_end(key)
        while len(self._finished) > self.max_finished:
            self._finished.popitem(last=False)

    @staticmethod
    def _buffered_end(h: _Half) -> int:
        return h.pieces[-1].end if h.pieces else h.next

    def _ack_horizon(self, h: _Half) -> int:
        """How far acknowledged holes may be declared now: up to the last buffered byte, and beyond it
        only by more than one byte (a single byte may be the acknowledgement of an unseen FIN)."""
        end = self._buffered_end(h)
        if h.fin is not None:
            return min(h.acked, h.fin)
        if h.acked > end + 1:
            return h.acked
        return min(h.acked, end)

    def _add(
        self,
        conn: _Connection,
        direction: Direction,
        h: _Half,
        start: int,
        payload: bytes,
        wire_len: int,
        ts: Optional[int],
        packet: int,
    ) -> None:
        if h.closed:
            self.stats.duplicate_bytes += len(payload)
            return
        end = start + wire_len
        cap_end = start + len(payload)
        if end <= h.next:
            self.stats.duplicate_bytes += len(payload)
            return
        if h.fin is not None and end > h.fin:
            end = h.fin  # nothing is sent after a FIN; treat the excess as garbage
            cap_end = min(cap_end, end)
        if start < h.next:
            cut = h.next - start
            self.stats.duplicate_bytes += min(cut, len(payload))
            payload = payload[cut:]
            start = h.next
            cap_end = max(cap_end, start)
        if start == h.next and not h.pieces and cap_end == end:
            # Fast path: in order, nothing buffered.
            if end > start:
                h.next = end
                self._emit_data(conn, direction, start, bytes(payload[: end - start]), ts, packet)
            self._check_fin(conn, direction, h, ts, packet)
            return
        if cap_end > start:
            self._insert(h, start, cap_end, payload[: cap_end - start], ts, packet)
        if end > cap_end:
            self._insert(h, max(cap_end, start), end, None, ts, packet)
        self._deliver(conn, direction, h, ts)
        self._check_fin(conn, direction, h, ts, packet)
        while h.pieces and (h.buffered > self.max_buffered_bytes or len(h.pieces) > self.max_buffered_segments):
            self._gap_to(conn, direction, h, h.pieces[0].start, GAP_BUFFER_LIMIT, ts, packet)

    def _insert(self, h: _Half, start: int, end: int, data: Optional[bytes], ts: Optional[int], packet: int) -> None:
        """Insert [start, end) into the buffered pieces; bytes already there stay (first seen wins).

        Placeholders (``data is None``) give way to real data, never the other way round.
        """
        pieces = h.pieces
        starts = h.starts
        i = bisect.bisect_right(starts, start) - 1
        if i < 0 or pieces[i].end <= start:
            i += 1
        hi = bisect.bisect_left(starts, end, i)
        result: List[_Piece] = []
        blockers: List[_Piece] = []
        for p in pieces[i:hi]:
            if p.data is None and data is not None:
                # Keep only the parts of the placeholder outside the new data.
                if p.start < start:
                    result.append(_Piece(p.start, start, None, p.ts, p.packet))
                if p.end > end:
                    result.append(_Piece(end, p.end, None, p.ts, p.packet))
            else:
                result.append(p)
                blockers.append(p)
        pos = start
        added = 0
        for p in blockers:
            if p.start > pos:
                result.append(self._slice_piece(start, data, pos, p.start, ts, packet))
                added += p.start - pos
            if data is not None:
                self.stats.duplicate_bytes += max(0, min(p.end, end) - max(p.start, pos))
            pos = max(pos, p.end)
        if pos < end:
            result.append(self._slice_piece(start, data, pos, end, ts, packet))
            added += end - pos
        if data is not None:
            h.buffered += added
        if len(result) > 1:
            result.sort(key=_piece_start)
        pieces[i:hi] = result
        starts[i:hi] = [p.start for p in result]

    @staticmethod
    def _slice_piece(start: int, data: Optional[bytes], lo: int, hi: int, ts: Optional[int], packet: int) -> _Piece:
        return _Piece(lo, hi, None if data is None else bytes(data[lo - start : hi - start]), ts, packet)

    def _deliver(self, conn: _Connection, direction: Direction, h: _Half, release_ts: Optional[int]) -> None:
        """Deliver the buffered pieces that now continue the stream.

        ``release_ts`` is the time of the packet that filled the hole before them (``None`` when a gap
        declaration released them): no byte can have been complete before it.
        """
        pieces = h.pieces
        n = 0
        while n < len(pieces) and pieces[n].start <= h.next:
            p = pieces[n]
            n += 1
            if p.data is not None:
                h.buffered -= len(p.data)
            if p.end <= h.next:
                continue
            if p.data is None:
                self._emit_gap(conn, direction, h.next, p.end - h.next, p.ts, p.packet, GAP_SNAPLEN)
            else:
                self._emit_data(conn, direction, h.next, p.data[h.next - p.start :], _later(p.ts, release_ts), p.packet)
            h.next = p.end
        if n:
            del pieces[:n]
            del h.starts[:n]

    def _gap_to(
        self,
        conn: _Connection,
        direction: Direction,
        h: _Half,
        upto: int,
        reason: str,
        ts: Optional[int],
        packet: Optional[int],
    ) -> None:
        """Declare every hole below ``upto`` a gap and deliver what follows each hole."""
        while h.next < upto:
            if h.pieces and h.pieces[0].start <= h.next:
                self._deliver(conn, direction, h, None)
                continue
            hole_end = min(upto, h.pieces[0].start) if h.pieces else upto
            self._emit_gap(conn, direction, h.next, hole_end - h.next, ts, packet, reason)
            h.next = hole_end
            self._deliver(conn, direction, h, None)
        self._check_fin(conn, direction, h, ts, packet)

    def _flush(
        self, conn: _Connection, direction: Direction, h: _Half, reason: str, ts: Optional[int], packet: Optional[int]
    ) -> None:
        if h.base is not None:
            self._gap_to(conn, direction, h, self._buffered_end(h), reason, ts, packet)

    def _check_fin(
        self, conn: _Connection, direction: Direction, h: _Half, ts: Optional[int], packet: Optional[int]
    ) -> None:
        if h.fin is not None and h.next >= h.fin and not h.closed:
            self._close(conn, direction, h, "fin", ts, packet)

    def _close(
        self, conn: _Connection, direction: Direction, h: _Half, reason: str, ts: Optional[int], packet: Optional[int]
    ) -> None:
        h.closed = True
        h.pieces.clear()
        h.starts.clear()
        h.buffered = 0
        self._events.append(StreamClosed(conn.cid, direction, h.next, ts, packet, reason))

    def _emit_data(
        self, conn: _Connection, direction: Direction, offset: int, data: bytes, ts: Optional[int], packet: int
    ) -> None:
        self.stats.delivered_bytes += len(data)
        self._events.append(StreamData(conn.cid, direction, offset, data, ts, packet))  # type: ignore[arg-type]

    def _emit_gap(
        self,
        conn: _Connection,
        direction: Direction,
        offset: int,
        length: int,
        ts: Optional[int],
        packet: Optional[int],
        reason: str,
    ) -> None:
        stats = self.stats
        stats.gaps += 1
        stats.gap_bytes += length
        stats.gap_reasons[reason] = stats.gap_reasons.get(reason, 0) + 1
        self._events.append(StreamGap(conn.cid, direction, offset, length, ts, packet, reason))


def reassemble(
    segments: Iterable[TcpSegment],
    *,
    max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
    max_buffered_segments: int = DEFAULT_MAX_BUFFERED_SEGMENTS,
) -> Iterator[StreamEvent]:
    """Feed ``segments`` (other items, such as diagnostics, are skipped) and yield the events, then finish."""
    r = TcpReassembler(max_buffered_bytes=max_buffered_bytes, max_buffered_segments=max_buffered_segments)
    for seg in segments:
        if type(seg) is TcpSegment:
            r.feed(seg)
            if r._events:
                yield from r.events()
    r.finish()
    yield from r.events()
