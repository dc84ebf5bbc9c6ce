"""Splitting one pcap/pcapng file into byte ranges that tasks read independently, without losing a packet.

A capture has no index: records are only found by walking from the start, each length leading to the
next.  Large files are still read in parallel, the way Hadoop reads line and sequence files in
splits of ``split_bytes``:

1. **Guess** (:func:`guess_boundary`, one task per range, in parallel): from the range's first byte,
   the first offset where a record *validates* — pcapng: a known block type whose leading and
   trailing lengths agree, chained over the following blocks; pcap: plausible record headers
   (captured length within the limit and no more than the original length, sub-second field in range,
   time no earlier than an hour before the file's first packet and within a year of it) chained over
   :data:`PCAP_CHAIN` records.  From there the task walks record headers (:func:`walk_records`) up to
   the first record starting at or after the range's end — it *finishes* the record that crosses its
   end — and reports where it stopped and how many packets it passed.
2. **Check** (:func:`settle_boundaries`, on the driver): the true start of range ``k+1`` is where the
   walk of range ``k`` stopped (range 0 starts after the file header, so its walk is exact, and so,
   inductively, is every stop).  A guess that disagrees (a payload that happens to look like a run of
   record headers) is not trusted: that range is walked again from the true boundary.  So the
   heuristics only decide how often a range is walked twice, never which packets are read; the
   packet counts give each range the number of its first packet (Wireshark's frame number).
3. **Read** (:class:`RangeStream`): the capture reader reads the file header (pcap) or the leading
   section header and interface blocks (pcapng), then the range's exact bytes, as one small capture;
   packet numbers and file offsets are shifted back to the whole file's.

What is not split (read as one range, which is always right): files not larger than ``split_bytes``;
pcapng files with a second section or an interface block after the first packet (later ranges would
need interfaces they cannot see); files whose head does not parse (the reader reports why).  A
damaged record ends the file's reading, as in a single-process read: ranges after it are empty.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, List, Optional, Tuple

from kproto.capture.files import DEFAULT_MAX_RECORD_BYTES

__all__ = [
    "DEFAULT_SPLIT_BYTES",
    "MIN_SPLIT_BYTES",
    "PCAP_CHAIN",
    "FileHead",
    "RangeWalk",
    "read_head",
    "guess_boundary",
    "walk_records",
    "scan_range",
    "settle_boundaries",
    "RangeStream",
]

#: Default bytes per range (Hadoop's default block size).
DEFAULT_SPLIT_BYTES = 128 << 20
#: Smallest split size accepted (tests use small ones; real files want large ones).
MIN_SPLIT_BYTES = 1024
#: pcap record headers that must chain for a guessed boundary to count (or the chain reaches the end).
PCAP_CHAIN = 8
_PCAPNG_CHAIN = 3

_PCAP_MAGICS = {0xA1B2C3D4: 1000, 0xA1B23C4D: 1}  # magic -> ns per sub-second unit
_SHB = 0x0A0D0D0A
_IDB = 1
_PACKET_BLOCKS = frozenset({2, 3, 6})  # obsolete Packet Block, Simple, Enhanced
# Block types a guessed boundary may land on: the packet blocks, interface statistics, name
# resolution, systemd journal export, decryption secrets, custom blocks (and SHB/IDB, which make the
# file unsplittable when the walk meets them).
_PCAPNG_TYPES = frozenset({_SHB, _IDB, 2, 3, 4, 5, 6, 9, 10, 0xBAD, 0x40000BAD})
_YEAR_S = 366 * 86400

ReadAt = Callable[[int, int], bytes]


@dataclass(frozen=True)
class FileHead:
    """What a range reader needs from the start of a capture file.

    ``format`` is ``"pcap"``, ``"pcapng"`` or ``None`` (unsplittable: not a capture, damaged head);
    ``prefix`` is the file header (pcap) or the leading section and interface blocks (pcapng);
    ``data_start`` is the offset of the first record after it; ``first_time_s`` the first packet's
    time in seconds (``None`` if it has none).
    """

    format: Optional[str]
    prefix: bytes
    data_start: int
    order: str = "<"
    first_time_s: Optional[int] = None
    ns_per_unit: int = 1000


@dataclass(frozen=True)
class RangeWalk:
    """One range's walk: where it started (true or guessed), where it stopped, packets passed, and
    whether it ended the file's reading (damage) or met blocks that make the file unsplittable."""

    start: Optional[int]
    stop: int
    packets: int
    fatal: bool = False
    unsplittable: bool = False


def read_head(read_at: ReadAt, size: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> FileHead:
    """Parse the head of a capture of ``size`` bytes read through ``read_at(offset, n)``."""
    head = read_at(0, 24)
    if len(head) < 24:
        return FileHead(None, b"", 0)
    for order in "<>":
        magic = struct.unpack_from(order + "I", head)[0]
        if magic in _PCAP_MAGICS:
            first = read_at(24, 16)
            first_s = struct.unpack_from(order + "I", first)[0] if len(first) == 16 else None
            return FileHead("pcap", head, 24, order, first_s, _PCAP_MAGICS[magic])
    if struct.unpack_from("<I", head)[0] != _SHB:
        return FileHead(None, b"", 0)
    bom = head[8:12]
    order = "<" if bom == b"\x4d\x3c\x2b\x1a" else ">" if bom == b"\x1a\x2b\x3c\x4d" else ""
    if not order:
        return FileHead(None, b"", 0)
    pos = 0
    while pos + 12 <= size:
        block = read_at(pos, 8)
        block_type, total = struct.unpack(order + "II", block)
        if (block_type == _SHB) != (pos == 0) or total < 12 or total % 4 or total > max_record_bytes:
            return FileHead(None, b"", 0)
        if block_type in _PACKET_BLOCKS:
            return FileHead("pcapng", read_at(0, pos), pos, order, None)
        pos += total
    return FileHead(None, b"", 0)


def _pcap_header_ok(buf: bytes, at: int, head: FileHead, max_record_bytes: int) -> Optional[int]:
    """Length of the pcap record at ``at`` of ``buf`` if its header is plausible, else ``None``."""
    ts, frac, caplen, origlen = struct.unpack_from(head.order + "IIII", buf, at)
    if caplen > max_record_bytes or caplen > origlen or frac * head.ns_per_unit >= 1_000_000_000:
        return None
    first = head.first_time_s
    if first is not None and not (first - 3600 <= ts <= first + _YEAR_S):
        return None
    return 16 + caplen


def _pcapng_block_ok(buf: bytes, at: int, head: FileHead, max_record_bytes: int) -> Optional[int]:
    block_type, total = struct.unpack_from(head.order + "II", buf, at)
    if block_type not in _PCAPNG_TYPES or total < 12 or total % 4 or total > max_record_bytes:
        return None
    if at + total > len(buf) or struct.unpack_from(head.order + "I", buf, at + total - 4)[0] != total:
        return None
    return total


def guess_boundary(
    buf: bytes, base: int, end: int, size: int, head: FileHead, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> Optional[int]:
    """The first offset in ``[base, end)`` where a record validates, or ``None``.

    ``buf`` holds the file's bytes from offset ``base`` on (at least up to ``end`` plus a few records,
    or to the file's end ``size``).
    """
    pcap = head.format == "pcap"
    check = _pcap_header_ok if pcap else _pcapng_block_ok
    chain = PCAP_CHAIN if pcap else _PCAPNG_CHAIN
    header = 16 if pcap else 12
    step = 1 if pcap else 4
    first = base if pcap else base + (-base % 4)
    for candidate in range(first, min(end, size), step):
        pos = candidate - base
        links = 0
        while links < chain:
            if base + pos == size:
                links = chain  # the chain reached the file's end exactly: a boundary
                break
            if pos + header > len(buf):
                break
            length = check(buf, pos, head, max_record_bytes)
            if length is None:
                break
            pos += length
            links += 1
        if links >= chain:
            return candidate
    return None


def walk_records(
    buf: bytes,
    base: int,
    start: int,
    end: int,
    size: int,
    head: FileHead,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> RangeWalk:
    """Walk records from ``start`` (a record boundary) while they start before ``end``.

    Stops as the capture reader stops: on a record that is too large, cut short or (pcapng) framed
    impossibly, the walk is ``fatal`` and the rest of the file unread.  ``buf`` holds the file from
    ``base`` to at least one record past ``end`` (or to ``size``).
    """
    pos = start
    packets = 0
    pcap = head.format == "pcap"
    order = head.order
    while pos < end:
        at = pos - base
        if pcap:
            if pos + 16 > size:
                return RangeWalk(start, size, packets, fatal=True)
            caplen = struct.unpack_from(order + "I", buf, at + 8)[0]
            length = 16 + caplen
            if caplen > max_record_bytes or pos + length > size:
                return RangeWalk(start, size, packets, fatal=True)
            packets += 1
        else:
            if pos + 8 > size:
                return RangeWalk(start, size, packets, fatal=True)
            block_type, length = struct.unpack_from(order + "II", buf, at)
            if length < 12 or length % 4 or length > max_record_bytes or pos + length > size:
                return RangeWalk(start, size, packets, fatal=True)
            if at + length > len(buf) or struct.unpack_from(order + "I", buf, at + length - 4)[0] != length:
                return RangeWalk(start, size, packets, fatal=True)
            if block_type == _SHB or block_type == _IDB:
                return RangeWalk(start, pos, packets, unsplittable=True)
            if block_type in _PACKET_BLOCKS:
                packets += 1
        pos += length
    return RangeWalk(start, pos, packets)


def _window(read_at: ReadAt, start: int, end: int, size: int, max_record_bytes: int) -> bytes:
    # The range plus room for the record crossing its end and a guess's chain of records after it.
    return read_at(start, min(size, end + (PCAP_CHAIN + 2) * (max_record_bytes + 16)) - start)


def scan_range(
    read_at: ReadAt,
    size: int,
    head: FileHead,
    start: int,
    end: int,
    *,
    exact: bool,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> RangeWalk:
    """Step 1 for the range ``[start, end)``: from ``start`` itself when ``exact`` (a known boundary),
    else from the guessed boundary (``start`` of the result is ``None`` when no record starts in it)."""
    if exact and start >= end:
        return RangeWalk(start, start, 0)
    buf = _window(read_at, start, end, size, max_record_bytes)
    first = start if exact else guess_boundary(buf, start, end, size, head, max_record_bytes)
    if first is None:
        return RangeWalk(None, start, 0)
    return walk_records(buf, start, first, end, size, head, max_record_bytes)


def settle_boundaries(
    ranges: List[Tuple[int, int]], walks: List[RangeWalk], rescan: Callable[[int, int], RangeWalk]
) -> Optional[List[Tuple[int, int, int]]]:
    """Step 2: ``(start, stop, first packet number)`` per range from the guessed walks, walking again
    (``rescan(start, end)``, exact) every range whose guess missed the true boundary; ``None`` when the
    file must be read as one range."""
    settled: List[Tuple[int, int, int]] = []
    boundary = ranges[0][0]
    number = 1
    ended = False
    for (start, end), walk in zip(ranges, walks):
        if ended:
            settled.append((boundary, boundary, number))
            continue
        if walk.start != boundary and not (walk.start is None and boundary >= end):
            walk = rescan(boundary, end)
        if walk.unsplittable:
            return None
        stop = walk.stop if walk.start is not None else boundary
        if walk.fatal:
            ended = True
        settled.append((boundary, stop, number))
        number += walk.packets
        boundary = max(stop, boundary)
    return settled


class RangeStream:
    """A read-only binary stream of ``prefix`` followed by bytes ``[start, stop)`` of ``source``.

    The capture reader reads it as a small capture file: offsets in it map back to the file as
    ``offset - len(prefix) + start``.
    """

    def __init__(self, source: BinaryIO, prefix: bytes, start: int, stop: int) -> None:
        self._source = source
        self._prefix = memoryview(prefix)
        self._left = stop - start
        source.seek(start)

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = len(self._prefix) + self._left
        head = bytes(self._prefix[:n])
        self._prefix = self._prefix[len(head) :]
        want = min(n - len(head), self._left)
        if want <= 0:
            return head
        data = self._source.read(want)
        self._left -= len(data)
        return head + data if head else data

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> "RangeStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
