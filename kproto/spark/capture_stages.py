"""The two stages of decoding captures in parallel, as plain functions (no Spark here).

Stage 1 (:func:`segment_rows` / :func:`extract_segments`, one
:class:`~kproto.spark.capture_plan.CaptureRange` at a time, ranges in parallel) reads a byte range of
a capture file and packs its TCP segments **per connection**: one row per connection key (the 4-tuple
with the lower endpoint first, so both directions share it) per range, holding every segment's header
fields as fixed-size binary records (:data:`SEGMENT_RECORD`) and their payloads concatenated.
Capture damage becomes rows with ``diagnostic`` set.  Rows, not packets, are what travels between
the stages, so a range of 100,000 packets over 6 connections costs 6 rows, not 100,000:
``run_captures`` writes them to spill files (:mod:`kproto.spark.capture_spill`), the lazy
DataFrames of ``capture_tables`` shuffle them as :data:`SEGMENTS` batches.

Stage 2 (:func:`decode_packed_rows`, or :func:`decode_sorted_segments` over Arrow batches): rows
sorted by connection key, then reading order (file time, file, first packet number) go through one
:class:`~kproto.spark.capture_rows.CaptureTableDecoder` per key, their segments unpacked with one
``struct.iter_unpack`` per row.  A key can hold several connections over time (port reuse): the
reassembler inside tells them apart by their SYNs, as it does in a single-process decode.  The input
is streamed: one connection's state is held at a time.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, Collection, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, cast

import pyarrow as pa

from kproto.capture.diagnostics import CaptureDiagnostic
from kproto.capture.conversation import DEFAULT_PORTS
from kproto.capture.packets import TcpSegment
from kproto.capture.reader import CaptureReader
from kproto.spark.batches import RowBuffer
from kproto.spark.capture_plan import CaptureRange
from kproto.spark.capture_rows import PROBLEM_CAPTURE, CaptureTableDecoder
from kproto.spark.capture_splits import RangeStream
from kproto.spark.inputs import first_packet_time, open_input
from kproto.spark.schema import PROBLEMS

__all__ = [
    "SEGMENTS",
    "SEGMENT_RECORD",
    "CONNECTION_KEY",
    "READING_ORDER",
    "segment_rows",
    "extract_segments",
    "PackedRow",
    "decode_packed_rows",
    "decode_sorted_segments",
]

#: Stage 1 rows: a connection's segments in one range (``segments`` holds one :data:`SEGMENT_RECORD`
#: per segment, ``payloads`` their payloads end to end), or (``diagnostic`` set, key null) a capture
#: diagnostic.
SEGMENTS = pa.schema(
    [
        ("lo_ip", pa.string()),
        ("lo_port", pa.int32()),
        ("hi_ip", pa.string()),
        ("hi_port", pa.int32()),
        ("file", pa.string()),
        ("file_time", pa.int64()),
        ("packet", pa.int64()),
        ("segments", pa.binary()),
        ("payloads", pa.binary()),
        ("diagnostic", pa.string()),
        ("file_offset", pa.int64()),
    ]
)

#: One segment's header fields in a stage 1 row: packet number, time (ns), seq, ack, payload length on
#: the wire, captured payload length, TCP flags, and bit 0 = sent by the higher endpoint, bit 1 = no time.
SEGMENT_RECORD = struct.Struct("<qqIIqIBB")

#: Columns that group stage 1 rows by connection.
CONNECTION_KEY = ("lo_ip", "lo_port", "hi_ip", "hi_port")
#: Sort order within a connection key (nulls first, as :func:`~kproto.spark.inputs.capture_order_key`).
READING_ORDER = ("file_time", "file", "packet")

#: Payload bytes a connection collects before its row is emitted (bounds a stage 1 task's memory).
_ROW_BYTES = 16 << 20
_BATCH_BYTES = 64 << 20


class _Packing:
    """One connection's segments of the current range, packed."""

    __slots__ = ("first", "records", "payloads", "size")

    def __init__(self, first: int) -> None:
        self.first = first
        self.records: List[bytes] = []
        self.payloads: List[bytes] = []
        self.size = 0


def segment_rows(item: CaptureRange) -> Iterator[Tuple[Any, ...]]:
    """Stage 1 for one range of a capture file: :data:`SEGMENTS` rows as tuples (the columns in order).

    A whole file (nothing planned for it) finds its own first packet time here, so small files need
    no planning job.  At most :data:`_BATCH_BYTES` of payloads are held: past that, every open
    connection's row is emitted."""
    number_shift = item.first_packet - 1
    offset_shift = item.start - len(item.prefix)
    stream = open_input(item.path)
    file, file_time = item.path, item.file_time
    if item.start == 0 and not item.prefix:
        try:
            file_time = first_packet_time(stream)
        finally:
            stream.seek(0)
    source: Any = RangeStream(stream, item.prefix, item.start, item.stop) if item.prefix or item.start else stream
    open_rows: Dict[Tuple[str, int, str, int], _Packing] = {}
    buffered = 0
    pack = SEGMENT_RECORD.pack

    def row(key: Tuple[str, int, str, int], packing: _Packing) -> Tuple[Any, ...]:
        return (*key, file, file_time, packing.first, b"".join(packing.records), b"".join(packing.payloads), None, None)

    try:
        for seg in CaptureReader(source):
            if type(seg) is not TcpSegment:
                found = cast(CaptureDiagnostic, seg)
                diag = dataclasses.replace(
                    found,
                    packet=None if found.packet is None else found.packet + number_shift,
                    file_offset=None if found.file_offset is None else found.file_offset + offset_shift,
                )
                yield (None, None, None, None, file, file_time, diag.packet, None, None, str(diag), diag.file_offset)
                continue
            number, time, src, sport, dst, dport, seq, ack, flags, payload, payload_length = seg
            if src < dst or (src == dst and sport <= dport):
                key = (src, sport, dst, dport)
                side = 0
            else:
                key = (dst, dport, src, sport)
                side = 1
            number += number_shift
            packing = open_rows.get(key)
            if packing is None:
                packing = open_rows[key] = _Packing(number)
            size = len(payload)
            packing.records.append(
                pack(number, time or 0, seq, ack, payload_length, size, flags, side | (2 if time is None else 0))
            )
            if size:
                packing.payloads.append(payload)
                packing.size += size
                buffered += size
                if packing.size >= _ROW_BYTES:
                    yield row(key, open_rows.pop(key))
                if buffered >= _BATCH_BYTES:
                    for key, packing in open_rows.items():
                        yield row(key, packing)
                    open_rows.clear()
                    buffered = 0
    finally:
        source.close()
    for key, packing in open_rows.items():
        yield row(key, packing)


def extract_segments(item: CaptureRange) -> Iterator[pa.RecordBatch]:
    """Stage 1 for one range of a capture file: :data:`SEGMENTS` batches (of at most about
    :data:`_BATCH_BYTES` of payloads each)."""
    rows: List[Tuple[Any, ...]] = []
    size = 0
    for row in segment_rows(item):
        rows.append(row)
        size += len(row[8] or b"")
        if size >= _BATCH_BYTES:
            yield _batch(rows)
            rows, size = [], 0
    if rows:
        yield _batch(rows)


def _batch(rows: List[Tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*rows))
    return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(columns, SEGMENTS)], schema=SEGMENTS)


def _unpack(
    lo_ip: str, lo_port: int, hi_ip: str, hi_port: int, records: bytes, payloads: bytes, tag: int
) -> Iterator[TcpSegment]:
    view = memoryview(payloads)
    at = 0
    ends = ((lo_ip, lo_port, hi_ip, hi_port), (hi_ip, hi_port, lo_ip, lo_port))
    for number, time, seq, ack, payload_length, size, flags, bits in SEGMENT_RECORD.iter_unpack(records):
        src, sport, dst, dport = ends[bits & 1]
        yield TcpSegment(
            number + tag,
            None if bits & 2 else time,
            src,
            sport,
            dst,
            dport,
            seq,
            ack,
            flags,
            bytes(view[at : at + size]),
            payload_length,
        )
        at += size


def decode_sorted_segments(
    batches: Iterable[pa.RecordBatch],
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    flush_rows: int = 65536,
) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Stage 2: :data:`SEGMENTS` batches sorted by :data:`CONNECTION_KEY` then :data:`READING_ORDER`
    in, ``(table name, batch)`` pairs out."""
    return decode_packed_rows(_packed_rows(batches), ports=ports, detect=detect, flush_rows=flush_rows)


def _packed_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[PackedRow]:
    names = CONNECTION_KEY + ("file", "packet")
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in names]
        diagnostics, offsets = batch.column("diagnostic").to_pylist(), batch.column("file_offset").to_pylist()
        records, payloads = batch.column("segments"), batch.column("payloads")
        for i, (lo_ip, lo_port, hi_ip, hi_port, file, packet) in enumerate(zip(*columns)):
            if diagnostics[i] is not None:
                yield PackedRow(None, file, packet, b"", b"", diagnostics[i], offsets[i])
            else:
                yield PackedRow(
                    (lo_ip, lo_port, hi_ip, hi_port), file, packet, records[i].as_py(), payloads[i].as_py(), None, None
                )


class PackedRow(NamedTuple):
    """What stage 2 reads of a stage 1 row: a connection's packed segments of one range (``key`` the
    4-tuple), or a capture diagnostic (``key`` None, ``diagnostic`` set)."""

    key: Optional[Tuple[str, int, str, int]]
    file: str
    packet: Optional[int]
    records: Any  # bytes-like: SEGMENT_RECORD records
    payloads: Any  # bytes-like: the payloads end to end
    diagnostic: Optional[str]
    file_offset: Optional[int]


def decode_packed_rows(
    rows: Iterable[PackedRow],
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    flush_rows: int = 65536,
) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Stage 2 over :class:`PackedRow` s sorted by key, then reading order: ``(table name, batch)``
    pairs out, one :class:`~kproto.spark.capture_rows.CaptureTableDecoder` per key."""
    problems = RowBuffer(PROBLEMS)
    decoder: Optional[CaptureTableDecoder] = None
    key: Any = None
    tags: Dict[str, int] = {}
    for row_key, file, packet, records, payloads, diagnostic, file_offset in rows:
        if row_key is None:
            problems.append((PROBLEM_CAPTURE, diagnostic, file, packet, file_offset, None, None, None, None))
            continue
        if row_key != key:
            if decoder is not None:
                decoder.finish()
                yield from decoder.take()
            decoder = CaptureTableDecoder(ports=ports, detect=detect)
            key = row_key
            tags = {}
        assert decoder is not None
        tag = tags.get(file)
        if tag is None:
            tag = tags[file] = decoder.file_tag(file)
        feed = decoder.feed
        for segment in _unpack(*row_key, records, payloads, tag):
            feed(segment)
        if decoder.pending() >= flush_rows:
            yield from decoder.take()
    if decoder is not None:
        decoder.finish()
        yield from decoder.take()
    batch = problems.take()
    if batch is not None:
        yield "problems", batch
