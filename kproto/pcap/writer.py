"""Writing TCP conversations to pcap or pcapng files.

Tests, the sample-data generator and bug reports need captures whose content is known byte for byte.
This module turns conversations, sequences of ``(direction, bytes, timestamp)``, into packets with real
TCP/IP headers (handshake optional, correct sequence and acknowledgement numbers, FIN, correct IPv4
header and TCP checksums, so tshark accepts them) and writes them with any of the link types
:mod:`kproto.capture.packets` reads.  It can also damage the traffic the way networks and capture setups
do: segment writes at an MSS, reorder, retransmit and drop segments, and cut packets at a snaplen.

Three levels, each usable on its own:

* :func:`plan_segments` turns one :class:`TcpConversation` into :class:`PlannedSegment` objects in
  send order (pure data: seq, ack, flags, payload, timestamp);
* :func:`build_frame` turns one planned segment into link-layer bytes;
* :class:`PcapWriter` / :class:`PcapngWriter` write frames to a file;

and :func:`write_capture` does all three for a list of conversations with the damage requested in
:class:`Impairments`.  Dropped segments model *capture* loss: the receiver got them, so later
acknowledgements cover them, as in a real capture that missed packets.
"""

from __future__ import annotations

import array
import enum
import ipaddress
import os
import random
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Collection, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from kproto.pcap.numbers import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
)
from kproto.pcap.numbers import TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN

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

Destination = Union[str, "os.PathLike[str]", BinaryIO]


class Side(str, enum.Enum):
    """Who sends a message in a :class:`TcpConversation`."""

    CLIENT = "client"
    SERVER = "server"


Message = Tuple[Union[Side, str], bytes, float]


@dataclass
class TcpConversation:
    """One TCP connection to write.

    ``messages`` are ``(side, data, timestamp)`` with ``side`` a :class:`Side` (or ``"client"`` /
    ``"server"``) and ``timestamp`` in seconds since the epoch (microsecond precision is kept).  Each
    message is one application write: it is cut into segments of at most the MSS, spaced one
    microsecond apart.  ``handshake`` adds SYN, SYN/ACK, ACK before the first message; ``close`` adds
    FIN from the client then the server after the last one, ``reset`` an RST from the client instead.
    """

    client: Tuple[str, int]
    server: Tuple[str, int]
    messages: Sequence[Message]
    handshake: bool = True
    close: bool = True
    reset: bool = False
    client_isn: int = 1_000_000
    server_isn: int = 3_000_000_000


class PlannedSegment:
    """One TCP segment to write, in terms independent of the link layer.

    ``data_index`` numbers the segments that carry payload within their conversation, in send order
    (``None`` for pure control segments); :class:`Impairments` refers to segments by it.
    """

    __slots__ = (
        "conversation",
        "from_client",
        "src",
        "dst",
        "seq",
        "ack",
        "flags",
        "payload",
        "timestamp_ns",
        "data_index",
    )

    def __init__(
        self,
        conversation: int,
        from_client: bool,
        src: Tuple[str, int],
        dst: Tuple[str, int],
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        timestamp_ns: int,
        data_index: Optional[int],
    ) -> None:
        self.conversation = conversation
        self.from_client = from_client
        self.src = src
        self.dst = dst
        self.seq = seq
        self.ack = ack
        self.flags = flags
        self.payload = payload
        self.timestamp_ns = timestamp_ns
        self.data_index = data_index

    def copy(self) -> "PlannedSegment":
        return PlannedSegment(
            self.conversation,
            self.from_client,
            self.src,
            self.dst,
            self.seq,
            self.ack,
            self.flags,
            self.payload,
            self.timestamp_ns,
            self.data_index,
        )

    def __repr__(self) -> str:
        return (
            f"PlannedSegment(conv={self.conversation} {'c>s' if self.from_client else 's>c'} "
            f"seq={self.seq} ack={self.ack} "
            f"flags={self.flags:#x} len={len(self.payload)} t={self.timestamp_ns} data_index={self.data_index})"
        )


@dataclass
class Impairments:
    """Damage to apply to one conversation's segments (indices are ``PlannedSegment.data_index``).

    * ``drop``: segments left out of the capture (the peer still acknowledges them).
    * ``retransmit``: segments sent again, ``retransmit_after`` segments later (clamped to the end).
    * ``swap``: for each index ``i``, segment ``i`` and the next data segment exchange places.
    * ``shuffle_window`` with ``seed``: random order inside each run of ``shuffle_window`` consecutive
      data segments of the same direction.

    Packets keep the timestamps of the places they land in, so capture time stays monotonic.
    """

    drop: Collection[int] = ()
    retransmit: Collection[int] = ()
    retransmit_after: int = 2
    swap: Collection[int] = ()
    shuffle_window: int = 0
    seed: int = 0


@dataclass
class WrittenCapture:
    """What :func:`write_capture` wrote: the segments in file order and the packet count."""

    segments: List[PlannedSegment] = field(default_factory=list)

    @property
    def packets(self) -> int:
        return len(self.segments)


def _side(value: Union[Side, str]) -> bool:
    side = Side(value)
    return side is Side.CLIENT


class TcpSegmenter:
    """Sequence numbering of one TCP connection, segment by segment, as its traffic happens.

    :func:`plan_segments` uses it for a whole :class:`TcpConversation`; the mock broker's recorder uses
    it to write a connection's packets as they cross the socket, so nothing of the traffic is held in
    memory.  Each method returns the segments of one event in send order.
    """

    def __init__(
        self,
        client: Tuple[str, int],
        server: Tuple[str, int],
        *,
        client_isn: int = 1_000_000,
        server_isn: int = 3_000_000_000,
        mss: int = 1460,
        index: int = 0,
    ) -> None:
        if mss < 1:
            raise ValueError("mss must be at least 1")
        self.client, self.server = client, server
        self.mss = mss
        self.index = index
        self._c_seq = client_isn & 0xFFFFFFFF
        self._s_seq = server_isn & 0xFFFFFFFF
        self._data_index = 0

    def _segment(
        self, from_client: bool, flags: int, payload: bytes, ts: int, numbered: bool = False
    ) -> PlannedSegment:
        if from_client:
            seg = PlannedSegment(
                self.index,
                True,
                self.client,
                self.server,
                self._c_seq,
                self._s_seq,
                flags,
                payload,
                ts,
                self._data_index if numbered else None,
            )
            self._c_seq = (self._c_seq + len(payload) + (1 if flags & (TCP_SYN | TCP_FIN) else 0)) & 0xFFFFFFFF
        else:
            seg = PlannedSegment(
                self.index,
                False,
                self.server,
                self.client,
                self._s_seq,
                self._c_seq,
                flags,
                payload,
                ts,
                self._data_index if numbered else None,
            )
            self._s_seq = (self._s_seq + len(payload) + (1 if flags & (TCP_SYN | TCP_FIN) else 0)) & 0xFFFFFFFF
        if numbered:
            self._data_index += 1
        if not flags & TCP_ACK:
            seg.ack = 0
        return seg

    def handshake(self, first_ns: int) -> List[PlannedSegment]:
        """SYN, SYN/ACK, ACK, spaced one microsecond apart and ending before ``first_ns``."""
        return [
            self._segment(True, TCP_SYN, b"", first_ns - 3000),
            self._segment(False, TCP_SYN | TCP_ACK, b"", first_ns - 2000),
            self._segment(True, TCP_ACK, b"", first_ns - 1000),
        ]

    def data(self, from_client: bool, data: bytes, ts: int) -> List[PlannedSegment]:
        """One application write cut at the MSS, one microsecond apart from ``ts`` on (PSH on the last)."""
        chunks = [bytes(data[i : i + self.mss]) for i in range(0, len(data), self.mss)]
        out = []
        for n, chunk in enumerate(chunks):
            out.append(
                self._segment(from_client, TCP_ACK | (TCP_PSH if n == len(chunks) - 1 else 0), chunk, ts, numbered=True)
            )
            ts += 1000
        return out

    def close(self, ts: int) -> List[PlannedSegment]:
        """FIN from the client, FIN from the server, the client's last ACK."""
        return [
            self._segment(True, TCP_FIN | TCP_ACK, b"", ts + 1000),
            self._segment(False, TCP_FIN | TCP_ACK, b"", ts + 2000),
            self._segment(True, TCP_ACK, b"", ts + 3000),
        ]

    def reset(self, ts: int) -> List[PlannedSegment]:
        """An RST from the client."""
        return [self._segment(True, TCP_RST | TCP_ACK, b"", ts + 1000)]


def plan_segments(conversation: TcpConversation, *, mss: int = 1460, index: int = 0) -> List[PlannedSegment]:
    """The segments of ``conversation`` in send order, before any impairment."""
    segmenter = TcpSegmenter(
        conversation.client,
        conversation.server,
        client_isn=conversation.client_isn,
        server_isn=conversation.server_isn,
        mss=mss,
        index=index,
    )
    messages = list(conversation.messages)
    first_ns = round(messages[0][2] * 1_000_000) * 1000 if messages else 0
    out: List[PlannedSegment] = []
    if conversation.handshake:
        out += segmenter.handshake(first_ns)
    ts = first_ns
    for side, data, when in messages:
        ts = max(ts, round(when * 1_000_000) * 1000)
        segments = segmenter.data(_side(side), data, ts)
        ts += 1000 * len(segments)
        out += segments
    if conversation.reset:
        out += segmenter.reset(ts)
    elif conversation.close:
        out += segmenter.close(ts)
    return out


def apply_impairments(segments: List[PlannedSegment], impairments: Impairments) -> List[PlannedSegment]:
    """Reorder, duplicate and drop ``segments`` (one conversation, send order) as ``impairments`` says."""
    order = list(segments)
    data_positions = [i for i, s in enumerate(order) if s.data_index is not None]
    if impairments.shuffle_window > 1:
        rng = random.Random(impairments.seed)
        run: List[int] = []
        runs: List[List[int]] = []
        for pos in data_positions:
            if run and (order[run[-1]].from_client != order[pos].from_client or len(run) == impairments.shuffle_window):
                runs.append(run)
                run = []
            run.append(pos)
        if run:
            runs.append(run)
        for run in runs:
            items = [order[p] for p in run]
            rng.shuffle(items)
            for p, item in zip(run, items):
                order[p] = item
    for idx in sorted(impairments.swap):
        here = next((i for i, s in enumerate(order) if s.data_index == idx), None)
        if here is None:
            continue
        nxt = next((i for i in range(here + 1, len(order)) if order[i].data_index is not None), None)
        if nxt is not None:
            order[here], order[nxt] = order[nxt], order[here]
    for idx in sorted(impairments.retransmit, reverse=True):
        here = next((i for i, s in enumerate(order) if s.data_index == idx), None)
        if here is None:
            continue
        later = here + 1
        seen = 0
        while later < len(order) and seen < impairments.retransmit_after:
            if order[later].data_index is not None:
                seen += 1
            later += 1
        order.insert(later, order[here].copy())
    dropped = set(impairments.drop)
    # Drop only the first transmission of a retransmitted segment, as a capture that missed one copy would.
    kept: List[PlannedSegment] = []
    for seg in order:
        if seg.data_index in dropped:
            dropped.discard(seg.data_index)
            continue
        kept.append(seg)
    # Packets take the timestamps of the slots they land in: capture time stays monotonic.
    times = sorted(s.timestamp_ns for s in kept)
    result = []
    for seg, ts in zip(kept, times):
        seg = seg.copy()
        seg.timestamp_ns = ts
        result.append(seg)
    return result


# --- headers -------------------------------------------------------------------------------------------


def _checksum(data: bytes) -> bytes:
    """RFC 1071 Internet checksum of ``data``, as the two bytes to store."""
    if len(data) % 2:
        data += b"\0"
    # Summing native-order 16-bit words and storing the result natively gives the same bytes as the
    # big-endian computation (the one's complement sum is byte-order independent).
    total = sum(array.array("H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return struct.pack("=H", ~total & 0xFFFF)


_MAC_CLIENT = bytes.fromhex("020000000001")
_MAC_SERVER = bytes.fromhex("020000000002")


def _tcp_header(seg: PlannedSegment, src_ip: bytes, dst_ip: bytes) -> bytes:
    options = b"\x02\x04\x05\xb4" if seg.flags & TCP_SYN else b""  # MSS 1460 on SYNs, as real stacks send
    hl = 20 + len(options)
    header = (
        struct.pack("!HHIIBBHHH", seg.src[1], seg.dst[1], seg.seq, seg.ack, (hl // 4) << 4, seg.flags, 65535, 0, 0)
        + options
    )
    length = hl + len(seg.payload)
    pseudo = (
        src_ip + dst_ip + (struct.pack("!BBH", 0, 6, length) if len(src_ip) == 4 else struct.pack("!IxxxB", length, 6))
    )
    csum = _checksum(pseudo + header + seg.payload)
    return header[:16] + csum + header[18:]


def _ip_packet(seg: PlannedSegment, ip_id: int, ipv4_options: bytes, ipv6_extensions: bool) -> Tuple[bytes, int]:
    src = ipaddress.ip_address(seg.src[0])
    dst = ipaddress.ip_address(seg.dst[0])
    if src.version != dst.version:
        raise ValueError(f"mixed IP versions in {seg.src} -> {seg.dst}")
    tcp = _tcp_header(seg, src.packed, dst.packed) + seg.payload
    if src.version == 4:
        if len(ipv4_options) % 4 or len(ipv4_options) > 40:
            raise ValueError("ipv4_options must be a multiple of 4 bytes, at most 40")
        ihl = 20 + len(ipv4_options)
        head = (
            struct.pack(
                "!BBHHHBBH4s4s",
                0x40 | ihl // 4,
                0,
                ihl + len(tcp),
                ip_id & 0xFFFF,
                0x4000,
                64,
                6,
                0,
                src.packed,
                dst.packed,
            )
            + ipv4_options
        )
        head = head[:10] + _checksum(head) + head[12:]
        return head + tcp, 4
    ext = b""
    next_header = 6
    if ipv6_extensions:
        # Hop-by-hop (PadN) then destination options (PadN), each 8 bytes: exercises the reader's walk.
        ext = bytes([60, 0, 1, 4, 0, 0, 0, 0]) + bytes([6, 0, 1, 4, 0, 0, 0, 0])
        next_header = 0
    head = struct.pack("!IHBB16s16s", 0x60000000, len(ext) + len(tcp), next_header, 64, src.packed, dst.packed)
    return head + ext + tcp, 6


def build_frame(
    seg: PlannedSegment,
    link_type: int = LINKTYPE_ETHERNET,
    *,
    vlan: Sequence[int] = (),
    ip_id: int = 0,
    null_byte_order: str = "<",
    ipv4_options: bytes = b"",
    ipv6_extensions: bool = False,
) -> bytes:
    """Link-layer bytes of one segment: link header (+ VLAN tags on Ethernet), IP, TCP, payload.

    ``vlan`` lists VLAN ids outermost first; with two or more, the outer tags use the 802.1ad TPID.
    ``null_byte_order`` is the capturing host's byte order for link type 0.
    """
    packet, version = _ip_packet(seg, ip_id, ipv4_options, ipv6_extensions)
    ethertype = 0x0800 if version == 4 else 0x86DD
    if vlan and link_type != LINKTYPE_ETHERNET:
        raise ValueError("VLAN tags are only written on Ethernet")
    if link_type == LINKTYPE_ETHERNET:
        src_mac, dst_mac = (_MAC_CLIENT, _MAC_SERVER) if seg.from_client else (_MAC_SERVER, _MAC_CLIENT)
        tags = b"".join(
            struct.pack("!HH", 0x88A8 if i < len(vlan) - 1 else 0x8100, vid & 0x0FFF) for i, vid in enumerate(vlan)
        )
        return dst_mac + src_mac + tags + struct.pack("!H", ethertype) + packet
    if link_type == LINKTYPE_LINUX_SLL:
        pkttype = 4 if seg.from_client else 0  # outgoing / to us, as seen on the client host
        src_mac = _MAC_CLIENT if seg.from_client else _MAC_SERVER
        return struct.pack("!HHH8sH", pkttype, 1, 6, src_mac, ethertype) + packet
    if link_type == LINKTYPE_LINUX_SLL2:
        pkttype = 4 if seg.from_client else 0
        src_mac = _MAC_CLIENT if seg.from_client else _MAC_SERVER
        return struct.pack("!HHIHBB8s", ethertype, 0, 1, 1, pkttype, 6, src_mac) + packet
    if link_type == LINKTYPE_NULL:
        return struct.pack(null_byte_order + "I", 2 if version == 4 else 30) + packet
    if link_type == LINKTYPE_LOOP:
        return struct.pack("!I", 2 if version == 4 else 24) + packet
    if link_type in (LINKTYPE_RAW, 12, 14):
        return packet
    if link_type == LINKTYPE_IPV4:
        if version != 4:
            raise ValueError("link type 228 carries IPv4 only")
        return packet
    if link_type == LINKTYPE_IPV6:
        if version != 6:
            raise ValueError("link type 229 carries IPv6 only")
        return packet
    raise ValueError(f"link type {link_type} is not written")


# --- file writers ----------------------------------------------------------------------------------------


class PcapWriter:
    """Writes a classic pcap file: one link type, microsecond or nanosecond timestamps, either byte order."""

    def __init__(
        self,
        stream: BinaryIO,
        link_type: int,
        *,
        byte_order: str = "<",
        nanosecond: bool = False,
        snaplen: int = 262144,
    ) -> None:
        if byte_order not in ("<", ">"):
            raise ValueError("byte_order is '<' or '>'")
        self._stream = stream
        self._order = byte_order
        self._nano = nanosecond
        self.snaplen = snaplen
        magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
        stream.write(struct.pack(byte_order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type))

    def write(self, timestamp_ns: int, frame: bytes, original_length: Optional[int] = None) -> None:
        """Write one record; ``frame`` is cut at the snaplen, ``original_length`` defaults to ``len(frame)``."""
        orig = len(frame) if original_length is None else original_length
        data = frame[: self.snaplen]
        sec, ns = divmod(timestamp_ns, 1_000_000_000)
        frac = ns if self._nano else ns // 1000
        self._stream.write(struct.pack(self._order + "IIII", sec, frac, len(data), orig) + data)


def _pad4(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _option(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + _pad4(value)


class PcapngWriter:
    """Writes a pcapng file: sections, interfaces (link type, ``if_tsresol``), EPB/SPB and raw blocks."""

    def __init__(self, stream: BinaryIO, *, byte_order: str = "<") -> None:
        self._stream = stream
        self._order = byte_order
        self._interfaces: List[Tuple[int, int, int]] = []  # (units per second, snaplen, tsoffset)
        self.start_section(byte_order)

    def write_block(self, block_type: int, body: bytes) -> None:
        """Write any block (used for blocks readers must skip)."""
        body = _pad4(body)
        total = len(body) + 12
        self._stream.write(
            struct.pack(self._order + "II", block_type, total) + body + struct.pack(self._order + "I", total)
        )

    def start_section(self, byte_order: str) -> None:
        """Begin a new section (its interfaces start again from 0), possibly in the other byte order."""
        if byte_order not in ("<", ">"):
            raise ValueError("byte_order is '<' or '>'")
        self._order = byte_order
        self._interfaces = []
        body = struct.pack(byte_order + "IHHq", 0x1A2B3C4D, 1, 0, -1) + _option(byte_order, 0, b"")
        self.write_block(0x0A0D0D0A, body)

    def add_interface(
        self, link_type: int, *, tsresol: int = 6, tsoffset: int = 0, snaplen: int = 0, name: Optional[str] = None
    ) -> int:
        """Describe an interface; ``tsresol`` is the ``if_tsresol`` byte (6 = µs, 9 = ns, 0x80|n = 2^-n),
        ``tsoffset`` the ``if_tsoffset`` in seconds (timestamps are stored relative to it)."""
        exponent = tsresol & 0x7F
        units = (1 << exponent) if tsresol & 0x80 else 10**exponent
        options = b""
        if name is not None:
            options += _option(self._order, 2, name.encode())
        if tsresol != 6:
            options += _option(self._order, 9, bytes([tsresol]))
        if tsoffset:
            options += _option(self._order, 14, struct.pack(self._order + "q", tsoffset))
        options += _option(self._order, 0, b"")
        self.write_block(1, struct.pack(self._order + "HHI", link_type, 0, snaplen) + options)
        self._interfaces.append((units, snaplen, tsoffset))
        return len(self._interfaces) - 1

    def write(self, interface: int, timestamp_ns: int, frame: bytes, original_length: Optional[int] = None) -> None:
        """Write an Enhanced Packet Block; the frame is cut at the interface's snaplen if it has one."""
        units, snaplen, tsoffset = self._interfaces[interface]
        orig = len(frame) if original_length is None else original_length
        data = frame[:snaplen] if snaplen else frame
        ticks = (timestamp_ns - tsoffset * 1_000_000_000) * units // 1_000_000_000
        body = struct.pack(self._order + "IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), orig) + _pad4(
            data
        )
        self.write_block(6, body)

    def write_simple(self, frame: bytes, original_length: Optional[int] = None) -> None:
        """Write a Simple Packet Block (interface 0, no timestamp)."""
        _, snaplen, _ = self._interfaces[0]
        orig = len(frame) if original_length is None else original_length
        data = frame[:snaplen] if snaplen else frame
        self.write_block(3, struct.pack(self._order + "I", orig) + data)


def _open_destination(dest: Destination) -> Tuple[BinaryIO, bool]:
    if isinstance(dest, (str, os.PathLike)):
        return open(dest, "wb"), True
    if hasattr(dest, "write"):
        return dest, False
    raise TypeError(f"expected a path or a binary file object, got {type(dest).__name__}")


def write_segments(
    dest: Destination,
    segments: Iterable[PlannedSegment],
    *,
    format: str = "pcap",
    link_type: int = LINKTYPE_ETHERNET,
    byte_order: str = "<",
    nanosecond: bool = False,
    tsresol: Optional[int] = None,
    vlan: Sequence[int] = (),
    snaplen: int = 262144,
    simple_blocks: bool = False,
    extra_blocks: bool = False,
    ipv4_options: bytes = b"",
    ipv6_extensions: bool = False,
) -> int:
    """Write ``segments`` in the given order; returns the number of packets written.

    ``format`` is ``"pcap"`` or ``"pcapng"``.  For pcap, ``nanosecond`` picks the magic; for pcapng,
    ``tsresol`` is the ``if_tsresol`` byte (default 9 with ``nanosecond``, else 6), ``simple_blocks``
    writes Simple Packet Blocks (no timestamps) and ``extra_blocks`` adds blocks a reader must skip (a
    name resolution block, a custom block and an interface statistics block).  Frames longer than
    ``snaplen`` are cut to it, keeping their original length.
    """
    stream, owned = _open_destination(dest)
    count = 0
    try:
        if format == "pcap":
            pcap = PcapWriter(stream, link_type, byte_order=byte_order, nanosecond=nanosecond, snaplen=snaplen)
            out = pcap.write
            iface = None
            ng = None
        elif format == "pcapng":
            ng = PcapngWriter(stream, byte_order=byte_order)
            if extra_blocks:
                ng.write_block(0x00000004, struct.pack(byte_order + "HH", 0, 0))  # empty name resolution block
                ng.write_block(0x40000ABC, b"local-use block")  # a type reserved for local use
            iface = ng.add_interface(
                link_type, tsresol=tsresol if tsresol is not None else (9 if nanosecond else 6), snaplen=snaplen
            )
            out = None
        else:
            raise ValueError("format is 'pcap' or 'pcapng'")
        for seg in segments:
            frame = build_frame(
                seg,
                link_type,
                vlan=vlan,
                ip_id=count,
                null_byte_order=byte_order,
                ipv4_options=ipv4_options,
                ipv6_extensions=ipv6_extensions,
            )
            if ng is None:
                assert out is not None
                out(seg.timestamp_ns, frame)
            elif simple_blocks:
                ng.write_simple(frame)
            else:
                assert iface is not None
                ng.write(iface, seg.timestamp_ns, frame)
            count += 1
        if ng is not None and extra_blocks:
            # Interface statistics block: interface id, timestamp, no options.
            ng.write_block(0x00000005, struct.pack(byte_order + "III", 0, 0, 0))
    finally:
        if owned:
            stream.close()
    return count


def write_capture(
    dest: Destination,
    conversations: Sequence[TcpConversation],
    *,
    mss: int = 1460,
    impairments: Union[None, Impairments, Dict[int, Impairments]] = None,
    **options: object,
) -> WrittenCapture:
    """Write ``conversations`` to ``dest``, interleaved by time; see :func:`write_segments` for ``options``.

    ``impairments`` applies to every conversation, or maps a conversation's index to its own.
    """
    planned: List[List[PlannedSegment]] = []
    for i, conv in enumerate(conversations):
        segs = plan_segments(conv, mss=mss, index=i)
        imp = impairments.get(i) if isinstance(impairments, dict) else impairments
        if imp is not None:
            segs = apply_impairments(segs, imp)
        planned.append(segs)
    # Stable merge by time: conversations with equal timestamps keep their order.
    merged = sorted(
        (seg for segs in planned for seg in segs),
        key=lambda s: s.timestamp_ns,
    )
    written = WrittenCapture(merged)
    write_segments(dest, merged, **options)  # type: ignore[arg-type]
    return written
