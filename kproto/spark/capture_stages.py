"""The two stages of decoding captures in parallel, as functions over Arrow batches (no Spark here).

Stage 1 (:func:`extract_segments`, one capture file at a time, files in parallel): the file's TCP
segments as rows with the file name, packet number, the time of the file's first packet (to order
rotated files) and a connection key (the 4-tuple with the lower endpoint first, so both directions
share it); capture damage as rows with ``diagnostic`` set.

Stage 2 (:func:`decode_sorted_segments`): rows sorted by connection key, then file order, then packet
number, go through one :class:`~kproto.spark.capture_rows.CaptureTableDecoder` per key.  A key can
hold several connections over time (port reuse): the reassembler inside tells them apart by their
SYNs, as it does in a single-process decode.  The input is streamed: one connection's state is held
at a time, not a whole group.
"""

from __future__ import annotations

from typing import Any, Collection, Dict, Iterable, Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.capture.diagnostics import CaptureDiagnostic
from kproto.capture.packets import TcpSegment
from kproto.capture.reader import CaptureReader
from kproto.spark.batches import RowBuffer
from kproto.spark.capture_rows import PROBLEM_CAPTURE, CaptureTableDecoder
from kproto.spark.inputs import first_packet_time
from kproto.spark.schema import PROBLEMS

__all__ = ["SEGMENTS", "CONNECTION_KEY", "READING_ORDER", "extract_segments", "decode_sorted_segments"]

#: Stage 1 rows: a TCP segment, or (``diagnostic`` set, key null) a capture diagnostic.
SEGMENTS = pa.schema([
    ("lo_ip", pa.string()), ("lo_port", pa.int32()), ("hi_ip", pa.string()), ("hi_port", pa.int32()),
    ("file", pa.string()), ("file_time", pa.int64()), ("packet", pa.int64()), ("time", pa.int64()),
    ("src", pa.string()), ("sport", pa.int32()), ("dst", pa.string()), ("dport", pa.int32()),
    ("seq", pa.int64()), ("ack", pa.int64()), ("flags", pa.int32()),
    ("payload", pa.binary()), ("payload_length", pa.int64()),
    ("diagnostic", pa.string()), ("file_offset", pa.int64()),
])

#: Columns that group stage 1 rows by connection.
CONNECTION_KEY = ("lo_ip", "lo_port", "hi_ip", "hi_port")
#: Sort order within a connection key (nulls first, as :func:`~kproto.spark.inputs.capture_order_key`).
READING_ORDER = ("file_time", "file", "packet")

_BATCH_ROWS = 32768
_SEGMENT_FIELDS = ("packet", "time", "src", "sport", "dst", "dport", "seq", "ack", "flags", "payload", "payload_length")


def extract_segments(file: str, data: bytes, *, batch_rows: int = _BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Stage 1 for one capture file (``data`` is its content): :data:`SEGMENTS` batches."""
    file_time = first_packet_time(data)
    segments: List[TcpSegment] = []
    diagnostics: List[CaptureDiagnostic] = []
    for item in CaptureReader(data):
        if type(item) is TcpSegment:
            segments.append(item)
            if len(segments) >= batch_rows:
                yield _segment_batch(file, file_time, segments)
                segments = []
        else:
            diagnostics.append(item)  # type: ignore[arg-type]
    if segments:
        yield _segment_batch(file, file_time, segments)
    if diagnostics:
        yield _diagnostic_batch(file, file_time, diagnostics)


def _segment_batch(file: str, file_time: Optional[int], segments: List[TcpSegment]) -> pa.RecordBatch:
    n = len(segments)
    packet, time, src, sport, dst, dport, seq, ack, flags, payload, payload_length = zip(*segments)
    cols = {
        "packet": pa.array(packet, pa.int64()), "time": pa.array(time, pa.int64()),
        "src": pa.array(src, pa.string()), "sport": pa.array(sport, pa.int32()),
        "dst": pa.array(dst, pa.string()), "dport": pa.array(dport, pa.int32()),
        "seq": pa.array(seq, pa.int64()), "ack": pa.array(ack, pa.int64()), "flags": pa.array(flags, pa.int32()),
        "payload": pa.array(payload, pa.binary()), "payload_length": pa.array(payload_length, pa.int64()),
    }
    # Which end is "lower" only has to be consistent between the two directions; vectorised here.
    src_low = pc.or_(pc.less(cols["src"], cols["dst"]),
                     pc.and_(pc.equal(cols["src"], cols["dst"]), pc.less_equal(cols["sport"], cols["dport"])))
    cols["lo_ip"] = pc.if_else(src_low, cols["src"], cols["dst"])
    cols["lo_port"] = pc.if_else(src_low, cols["sport"], cols["dport"])
    cols["hi_ip"] = pc.if_else(src_low, cols["dst"], cols["src"])
    cols["hi_port"] = pc.if_else(src_low, cols["dport"], cols["sport"])
    cols["file"] = pa.repeat(pa.scalar(file, pa.string()), n)
    cols["file_time"] = pa.repeat(pa.scalar(file_time, pa.int64()), n)
    cols["diagnostic"] = pa.nulls(n, pa.string())
    cols["file_offset"] = pa.nulls(n, pa.int64())
    return pa.RecordBatch.from_arrays([cols[f.name] for f in SEGMENTS], schema=SEGMENTS)


def _diagnostic_batch(file: str, file_time: Optional[int], diagnostics: List[CaptureDiagnostic]) -> pa.RecordBatch:
    n = len(diagnostics)
    cols = {f.name: pa.nulls(n, f.type) for f in SEGMENTS}
    cols["file"] = pa.array([file] * n, pa.string())
    cols["file_time"] = pa.array([file_time] * n, pa.int64())
    cols["packet"] = pa.array([d.packet for d in diagnostics], pa.int64())
    cols["diagnostic"] = pa.array([str(d) for d in diagnostics], pa.string())
    cols["file_offset"] = pa.array([d.file_offset for d in diagnostics], pa.int64())
    return pa.RecordBatch.from_arrays([cols[f.name] for f in SEGMENTS], schema=SEGMENTS)


def decode_sorted_segments(
    batches: Iterable[pa.RecordBatch], *, ports: Collection[int] = DEFAULT_PORTS, detect: bool = True,
    flush_rows: int = 65536,
) -> Iterator[Tuple[str, pa.RecordBatch]]:
    """Stage 2: :data:`SEGMENTS` batches sorted by :data:`CONNECTION_KEY` then :data:`READING_ORDER`
    in, ``(table name, batch)`` pairs out."""
    problems = RowBuffer(PROBLEMS)
    decoder: Optional[CaptureTableDecoder] = None
    key: Any = None
    tags: Dict[str, int] = {}
    for batch in batches:
        columns = [batch.column(name).to_pylist() for name in CONNECTION_KEY + ("file", "diagnostic", "file_offset")]
        fields = [batch.column(name).to_pylist() for name in _SEGMENT_FIELDS]
        for lo_ip, lo_port, hi_ip, hi_port, file, diagnostic, file_offset, *seg in zip(*columns, *fields):
            if diagnostic is not None:
                problems.append((PROBLEM_CAPTURE, diagnostic, file, seg[0], file_offset, None, None, None, None))
                continue
            row_key = (lo_ip, lo_port, hi_ip, hi_port)
            if row_key != key:
                if decoder is not None:
                    decoder.finish()
                    yield from decoder.take()
                decoder = CaptureTableDecoder(ports=ports, detect=detect)
                key = row_key
                tags = {}
            tag = tags.get(file)
            if tag is None:
                tag = tags[file] = decoder.file_tag(file)
            seg[0] += tag
            decoder.feed(TcpSegment(*seg))  # type: ignore[union-attr]
            if decoder.pending() >= flush_rows:  # type: ignore[union-attr]
                yield from decoder.take()  # type: ignore[union-attr]
    if decoder is not None:
        decoder.finish()
        yield from decoder.take()
    batch = problems.take()
    if batch is not None:
        yield "problems", batch

