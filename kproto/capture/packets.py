"""Decoding captured link-layer frames down to TCP segments.

Only the fields TCP reassembly needs are read: addresses, ports, sequence and acknowledgement numbers,
flags and the payload.  Everything that is not TCP over IPv4/IPv6 (ARP, UDP, LLC, ...) is skipped
quietly; headers that do not parse become :class:`~kproto.capture.diagnostics.CaptureDiagnostic`.

Link types (``LINKTYPE_*`` values as stored in pcap/pcapng files)
    0 BSD null (address family in the capturing host's byte order, either order accepted),
    1 Ethernet (with any number up to 8 of 802.1Q / 802.1ad / QinQ tags), 12 and 14 (raw IP as some
    systems wrote ``DLT_RAW``), 101 raw IP, 108 OpenBSD loop (family in network order), 113 Linux cooked
    (SLL), 228 raw IPv4, 229 raw IPv6, 276 Linux cooked v2 (SLL2).

IP
    IPv4 options are skipped by the header length.  IPv4 fragments and non-atomic IPv6 fragments
    carrying TCP are reported as ``ip-fragment`` (no IP reassembly).  IPv6 extension headers
    (hop-by-hop, routing, destination options, mobility, HIP, shim6, AH) are walked, at most 16 of them.
    The IP length bounds the TCP payload, so Ethernet padding and trailers never leak into a stream.  An
    IP length of 0 (IPv4 captured before TCP segmentation offload, IPv6 jumbograms) means "as much as
    was captured", as Wireshark reads it.

TCP checksums are not checked: captures taken on a sending host routinely carry unfinished checksums
(offload), and a wrong checksum says nothing about whether the receiver got the bytes.
"""

from __future__ import annotations

import socket
import struct
from typing import Dict, NamedTuple, Optional, Tuple, Union

from kproto.capture.diagnostics import CaptureDiagnostic, DiagnosticKind
from kproto.capture.files import PacketRecord
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

__all__ = ["TcpSegment", "SUPPORTED_LINK_TYPES", "decode_tcp_segment"]

# DLT_RAW was 12 on most systems and 14 on OpenBSD; old files carry those numbers as link types.
_LINKTYPE_RAW_ALIASES = (12, 14)

#: Every link type :func:`decode_tcp_segment` understands.
SUPPORTED_LINK_TYPES = frozenset(
    (
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_RAW,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
        LINKTYPE_LINUX_SLL2,
    )
    + _LINKTYPE_RAW_ALIASES
)

_ETH_IPV4 = 0x0800
_ETH_IPV6 = 0x86DD
_ETH_VLAN_TAGS = (0x8100, 0x88A8, 0x9100, 0x9200)
_MAX_VLAN_TAGS = 8
_MAX_IPV6_EXTENSIONS = 16
# AF_INET6 differs per OS: Linux 10, Windows 23, OpenBSD/NetBSD 24, FreeBSD 28, macOS 30.
_AF_INET6_VALUES = frozenset((10, 23, 24, 28, 30))
_IPV6_EXT_8 = frozenset((0, 43, 60, 135, 139, 140))  # length in 8-octet units, not counting the first 8
_IPPROTO_TCP = 6
_IPPROTO_FRAGMENT = 44
_IPPROTO_AH = 51

_u16 = struct.Struct("!H").unpack_from
_u32 = struct.Struct("!I").unpack_from
_tcp_fields = struct.Struct("!HHIIBB").unpack_from
_ipv4_fields = struct.Struct("!BxHxxHxBxx4s4s").unpack_from


class TcpSegment(NamedTuple):
    """One TCP segment from a capture, as reassembly needs it.

    ``payload`` is what the capture kept; ``payload_length`` is the length of the payload on the wire,
    larger than ``len(payload)`` when the snaplen cut the packet (reassembly reports the difference as a
    gap).  ``src``/``dst`` are textual IP addresses.  ``number`` is the packet's 1-based frame number in
    the capture and ``timestamp_ns`` its time in nanoseconds since the epoch (``None`` if the capture
    has no time for it).  A plain tuple, so it pickles cheaply (Spark ships segments between workers).
    """

    number: int
    timestamp_ns: Optional[int]
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    payload_length: int

    @classmethod
    def make(
        cls,
        src: str,
        sport: int,
        dst: str,
        dport: int,
        seq: int,
        *,
        ack: int = 0,
        flags: int = TCP_ACK,
        payload: bytes = b"",
        payload_length: Optional[int] = None,
        number: int = 0,
        timestamp_ns: Optional[int] = 0,
    ) -> "TcpSegment":
        """Build a segment by keyword (tests, callers feeding reassembly from their own packet source)."""
        length = len(payload) if payload_length is None else payload_length
        return cls(number, timestamp_ns, src, sport, dst, dport, seq, ack, flags, payload, length)

    def __repr__(self) -> str:
        names = "".join(
            n
            for bit, n in ((TCP_SYN, "S"), (TCP_FIN, "F"), (TCP_RST, "R"), (TCP_PSH, "P"), (TCP_ACK, "."))
            if self.flags & bit
        )
        return (
            f"TcpSegment(#{self.number} {self.src}:{self.sport} > {self.dst}:{self.dport} [{names}] seq={self.seq} "
            f"ack={self.ack} len={len(self.payload)}/{self.payload_length})"
        )


_addr_cache: Dict[bytes, str] = {}


def _address(raw: bytes) -> str:
    # Captures repeat a handful of addresses millions of times; inet_ntop per packet is measurable.
    text = _addr_cache.get(raw)
    if text is None:
        if len(_addr_cache) > 4096:
            _addr_cache.clear()
        text = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
        _addr_cache[raw] = text
    return text


def _malformed(record: PacketRecord, why: str) -> CaptureDiagnostic:
    return CaptureDiagnostic(DiagnosticKind.MALFORMED_PACKET, why, record.number, record.file_offset)


def _ip_after_ethertype(
    record: PacketRecord, data: bytes, ethertype: int, off: int
) -> Union[Tuple[int, int], CaptureDiagnostic, None]:
    """Skip 802.1Q/QinQ tags after an EtherType (Ethernet and Linux cooked captures alike): ``(IP version,
    offset of the IP header)``, a diagnostic for damaged tags, or None for a frame that is not IP."""
    tags = 0
    while ethertype in _ETH_VLAN_TAGS:
        tags += 1
        if tags > _MAX_VLAN_TAGS:
            return _malformed(record, f"more than {_MAX_VLAN_TAGS} VLAN tags")
        if off + 4 > len(data):
            return _malformed(record, "VLAN tag cut short")
        ethertype = _u16(data, off + 2)[0]
        off += 4
    if ethertype == _ETH_IPV4:
        return 4, off
    if ethertype == _ETH_IPV6:
        return 6, off
    return None


def decode_tcp_segment(record: PacketRecord) -> Union[TcpSegment, CaptureDiagnostic, None]:
    """Decode one packet record to a :class:`TcpSegment`.

    Returns ``None`` for packets that are not TCP over IP (nothing wrong with them, just not ours) and a
    diagnostic for packets whose headers are damaged, fragmented, cut by the snaplen inside the TCP
    header, or on an unsupported link type.
    """
    data = record.data
    link = record.link_type
    n = len(data)
    if link == LINKTYPE_ETHERNET:
        if n < 14:
            return _malformed(record, f"Ethernet header needs 14 bytes, {n} captured")
        found = _ip_after_ethertype(record, data, (data[12] << 8) | data[13], 14)
        if not isinstance(found, tuple):
            return found
        version, off = found
    elif link == LINKTYPE_LINUX_SLL or link == LINKTYPE_LINUX_SLL2:
        if link == LINKTYPE_LINUX_SLL:
            if n < 16:
                return _malformed(record, f"Linux cooked header needs 16 bytes, {n} captured")
            ethertype = _u16(data, 14)[0]
            off = 16
        else:
            if n < 20:
                return _malformed(record, f"Linux cooked v2 header needs 20 bytes, {n} captured")
            ethertype = _u16(data, 0)[0]
            off = 20
        found = _ip_after_ethertype(record, data, ethertype, off)
        if not isinstance(found, tuple):
            return found
        version, off = found
    elif link == LINKTYPE_RAW or link in _LINKTYPE_RAW_ALIASES or link == LINKTYPE_IPV4 or link == LINKTYPE_IPV6:
        if n < 1:
            return _malformed(record, "empty raw IP packet")
        off = 0
        version = data[0] >> 4
        if link == LINKTYPE_IPV4 and version != 4 or link == LINKTYPE_IPV6 and version != 6:
            return _malformed(record, f"IP version {version} on link type {link}")
        if version != 4 and version != 6:
            return _malformed(record, f"raw IP packet with IP version {version}")
    elif link == LINKTYPE_NULL or link == LINKTYPE_LOOP:
        if n < 4:
            return _malformed(record, f"loopback header needs 4 bytes, {n} captured")
        family = _u32(data, 0)[0]
        if link == LINKTYPE_NULL and family & 0xFFFF0000:
            # Written in the capturing host's byte order: a little-endian host leaves the value byte-swapped.
            family = int.from_bytes(data[:4], "little")
        off = 4
        if family == 2:
            version = 4
        elif family in _AF_INET6_VALUES:
            version = 6
        else:
            return None
    else:
        return CaptureDiagnostic(
            DiagnosticKind.UNSUPPORTED_LINK_TYPE, f"link type {link} is not decoded", record.number, record.file_offset
        )

    # --- IP ---
    if version == 4:
        if off + 20 > n:
            return _malformed(record, "IPv4 header cut short")
        vihl, total, frag, proto, raw_src, raw_dst = _ipv4_fields(data, off)
        if vihl >> 4 != 4:
            return _malformed(record, f"IPv4 header with version {vihl >> 4}")
        ihl = (vihl & 0x0F) * 4
        if ihl < 20:
            return _malformed(record, f"IPv4 header length {ihl} below 20")
        if proto != _IPPROTO_TCP:
            return None
        if frag & 0x3FFF:
            return CaptureDiagnostic(
                DiagnosticKind.IP_FRAGMENT,
                "IPv4 fragment of a TCP packet (IP reassembly unsupported)",
                record.number,
                record.file_offset,
            )
        src = _addr_cache.get(raw_src) or _address(raw_src)
        dst = _addr_cache.get(raw_dst) or _address(raw_dst)
        if total == 0:
            total = n - off
        elif total < ihl:
            return _malformed(record, f"IPv4 total length {total} below header length {ihl}")
        tcp_off = off + ihl
        ip_end = off + total
    else:
        if off + 40 > n:
            return _malformed(record, "IPv6 header cut short")
        if data[off] >> 4 != 6:
            return _malformed(record, f"IPv6 header with version {data[off] >> 4}")
        payload_len = _u16(data, off + 4)[0]
        nh = data[off + 6]
        raw_src = data[off + 8 : off + 24]
        raw_dst = data[off + 24 : off + 40]
        src = _addr_cache.get(raw_src) or _address(raw_src)
        dst = _addr_cache.get(raw_dst) or _address(raw_dst)
        ip_end = off + 40 + payload_len if payload_len else n
        pos = off + 40
        for _ in range(_MAX_IPV6_EXTENSIONS):
            if nh == _IPPROTO_TCP:
                break
            if nh in _IPV6_EXT_8 or nh == _IPPROTO_AH or nh == _IPPROTO_FRAGMENT:
                if pos + 8 > n:
                    return _malformed(record, f"IPv6 extension header {nh} cut short")
                if nh == _IPPROTO_FRAGMENT:
                    frag = _u16(data, pos + 2)[0]
                    if frag & 0xFFF9:  # offset bits or M flag: part of a real fragment train
                        if data[pos] == _IPPROTO_TCP:
                            return CaptureDiagnostic(
                                DiagnosticKind.IP_FRAGMENT,
                                "IPv6 fragment of a TCP packet (IP reassembly unsupported)",
                                record.number,
                                record.file_offset,
                            )
                        return None
                    size = 8
                elif nh == _IPPROTO_AH:
                    size = (data[pos + 1] + 2) * 4
                else:
                    size = (data[pos + 1] + 1) * 8
                nh = data[pos]
                pos += size
            else:
                return None  # UDP, ICMPv6, ESP, no-next-header...
        else:
            return _malformed(record, f"more than {_MAX_IPV6_EXTENSIONS} IPv6 extension headers")
        tcp_off = pos

    # --- TCP ---
    if tcp_off + 20 > n:
        if record.original_length > n:
            return CaptureDiagnostic(
                DiagnosticKind.SNAPLEN_TRUNCATED, "TCP header not captured (snaplen)", record.number, record.file_offset
            )
        return _malformed(record, "TCP header cut short")
    sport, dport, seq, ack, doff, flags = _tcp_fields(data, tcp_off)
    hl = (doff >> 4) * 4
    if hl < 20:
        return _malformed(record, f"TCP header length {hl} below 20")
    start = tcp_off + hl
    if start > ip_end:
        return _malformed(record, f"TCP header length {hl} runs past the IP packet")
    if start > n:
        if record.original_length > n:
            return CaptureDiagnostic(
                DiagnosticKind.SNAPLEN_TRUNCATED,
                "TCP options not captured (snaplen)",
                record.number,
                record.file_offset,
            )
        return _malformed(record, "TCP options cut short")
    wire_len = ip_end - start
    if ip_end > n and record.original_length <= n:
        # The IP header promises more than the frame had on the wire: damaged, not merely cut short.
        return _malformed(record, f"IP length says {ip_end - off} bytes, frame has {n - off}")
    payload = data[start:ip_end] if ip_end <= n else data[start:]
    return TcpSegment(record.number, record.timestamp_ns, src, sport, dst, dport, seq, ack, flags, payload, wire_len)
