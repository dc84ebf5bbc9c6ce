"""Kafka log segment files (``.log``, message format magic 0/1, Kafka 0.8–0.10) to table rows.

A segment is a message set on disk, so it is decoded with the columnar records decoder in chunks of
``chunk_bytes``: each chunk ends where its last complete message ends (``valid_bytes``), the next one
starts there, so memory stays bounded and no per-message Python object is made.  The topic and
partition come from the directory name (``<topic>-<partition>``).

Damage never raises: a tail that is not a complete message (a broker killed mid-write, a file cut in a
copy) is a ``truncated-segment`` problem, a message that does not parse a ``corrupt-segment`` problem
(the messages before it are kept, the rest of the file is skipped: without a valid size there is no
next boundary to trust), CRC mismatches are rows with ``crc_ok = false``.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple

import pyarrow as pa

from kproto.errors import DecodeError
from kproto.spark.batches import decode_message_columns, with_constants
from kproto.spark.inputs import topic_partition
from kproto.spark.schema import PROBLEMS

__all__ = ["segment_batches", "PROBLEM_TRUNCATED_SEGMENT", "PROBLEM_CORRUPT_SEGMENT", "PROBLEM_UNNAMED_SEGMENT",
           "DEFAULT_CHUNK_BYTES"]

PROBLEM_TRUNCATED_SEGMENT = "truncated-segment"
PROBLEM_CORRUPT_SEGMENT = "corrupt-segment"
#: The segment's directory is not named ``<topic>-<partition>``: its messages have null topic/partition.
PROBLEM_UNNAMED_SEGMENT = "unnamed-segment-directory"

#: Bytes decoded at a time (a larger message grows the chunk to fit it).
DEFAULT_CHUNK_BYTES = 8 << 20

Batch = Tuple[str, pa.RecordBatch]


def segment_batches(file: str, data: Any, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[Batch]:
    """``("messages", batch)`` and ``("problems", batch)`` pairs for the segment ``file`` whose
    contents are ``data`` (bytes-like)."""
    topic, partition = topic_partition(file)
    if topic is None:
        yield "problems", _problem(PROBLEM_UNNAMED_SEGMENT, "directory name is not <topic>-<partition>", file, None)
    view = memoryview(data)
    total = len(view)
    pos = 0
    size = chunk_bytes
    while pos < total:
        end = min(total, pos + size)
        try:
            columns = decode_message_columns(view[pos:end])
        except DecodeError as exc:
            good, problem = _before_damage(view[:end], pos, exc, file)
            if good is not None:
                yield "messages", _messages(good, topic, partition, file)
            yield "problems", problem
            return
        if columns.count:
            yield "messages", _messages(columns, topic, partition, file)
        if columns.valid_bytes:
            pos += columns.valid_bytes
            size = chunk_bytes
        elif end < total:
            size *= 2  # one message larger than the chunk
        else:
            detail = (f"{total - pos} bytes after the last complete message do not hold a complete message "
                      "(a truncated file, or a damaged size field)")
            yield "problems", _problem(PROBLEM_TRUNCATED_SEGMENT, detail, file, pos)
            return


def _before_damage(view: memoryview, pos: int, exc: DecodeError, file: str) -> Tuple[Optional[Any], pa.RecordBatch]:
    """The complete messages in front of a decode error, and the problem row (at the damaged message)."""
    good = None
    damaged_at = pos
    if exc.offset is not None and exc.offset > 0:
        try:
            # Cut inside the damaged message: the decoder then stops at its start (an incomplete tail).
            good = decode_message_columns(view[pos:min(pos + exc.offset, len(view))])
            damaged_at = pos + good.valid_bytes
        except DecodeError:
            good = None
    detail = f"message at byte {damaged_at} does not decode ({exc}); the rest of the file is skipped"
    return (good if good is not None and good.count else None), _problem(PROBLEM_CORRUPT_SEGMENT, detail, file, damaged_at)


def _messages(columns: Any, topic: Optional[str], partition: Optional[int], file: str) -> pa.RecordBatch:
    return with_constants(columns.to_arrow(), topic=topic, partition=partition, exchange_id=None, connection=None,
                          direction=None, file=file, time_us=None)


def _problem(kind: str, detail: str, file: str, offset: Optional[int]) -> pa.RecordBatch:
    row = [[kind], [detail], [file], [None], [offset], [None], [None], [None], [None]]
    return pa.RecordBatch.from_arrays([pa.array(v, f.type) for v, f in zip(row, PROBLEMS)], schema=PROBLEMS)
