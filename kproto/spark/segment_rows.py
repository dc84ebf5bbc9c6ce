"""Kafka log segment files (``.log``, any message format: magic 0/1 messages, magic 2 record batches) to table rows.

A segment is a message set on disk, so it is decoded with the columnar records decoder in chunks of
``chunk_bytes``: each chunk ends where its last complete message ends (``valid_bytes``), the next one
starts there, so memory stays bounded and no per-message Python object is made.  The topic and
partition come from the directory name (``<topic>-<partition>``).

Damage never raises: a tail that is not a complete message (a broker killed mid-write, a file cut in a
copy) is a ``truncated-segment`` problem, a message that does not parse a ``corrupt-segment`` problem
(the messages before it are kept; the damaged entry is skipped by its length field when that length
fits in the file, otherwise the rest of the file is skipped: there is no next boundary to trust), CRC
mismatches are rows with ``crc_ok = false``.

Large segments are decoded in byte ranges by several tasks (:func:`entry_boundaries`): every entry of
every message format (magic 0 and 1 messages, magic 2 record batches) starts with its offset (int64)
and its length (int32), so a walk over those 12-byte headers finds entry boundaries without decoding
anything, and each range starts on one.  The walk stops where the decode would stop trusting the
framing (a negative length, an entry running past the end of the file): the range holding that point
reads to the end of the file and reports it, the ranges after it are empty.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pyarrow as pa

from kproto.errors import DecodeError
from kproto.spark.batches import decode_message_columns, with_constants
from kproto.spark.inputs import topic_partition
from kproto.spark.schema import PROBLEMS

__all__ = [
    "segment_batches",
    "entry_boundaries",
    "PROBLEM_TRUNCATED_SEGMENT",
    "PROBLEM_CORRUPT_SEGMENT",
    "PROBLEM_UNNAMED_SEGMENT",
    "DEFAULT_CHUNK_BYTES",
]

PROBLEM_TRUNCATED_SEGMENT = "truncated-segment"
PROBLEM_CORRUPT_SEGMENT = "corrupt-segment"
#: The segment's directory is not named ``<topic>-<partition>``: its messages have null topic/partition.
PROBLEM_UNNAMED_SEGMENT = "unnamed-segment-directory"

#: Bytes decoded at a time (a larger message grows the chunk to fit it).
DEFAULT_CHUNK_BYTES = 8 << 20

Batch = Tuple[str, pa.RecordBatch]


_ENTRY_HEADER = struct.Struct(">qi")


def entry_boundaries(read_at: Callable[[int, int], bytes], size: int, starts: List[int]) -> List[int]:
    """For each nominal range start (ascending), the first entry boundary at or after it, walking entry
    headers from the start of the file; ``size`` for starts after the point where the framing ends."""
    out: List[int] = []
    pos = 0
    want = iter(starts)
    target = next(want, None)
    window = b""
    window_at = 0
    while target is not None:
        while pos < target:
            if pos + 12 > size:
                pos = size
                break
            if pos + 12 > window_at + len(window):
                window_at = pos
                window = read_at(pos, 1 << 20)
            length = _ENTRY_HEADER.unpack_from(window, pos - window_at)[1]
            if length < 0 or pos + 12 + length > size:
                pos = size
                break
            pos += 12 + length
        out.append(pos)
        target = next(want, None)
    return out


def segment_batches(file: str, data: Any, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, base: int = 0) -> Iterator[Batch]:
    """``("messages", batch)`` and ``("problems", batch)`` pairs for the segment ``file`` whose
    contents are ``data`` (bytes-like), or for the range of it starting at byte ``base`` (an entry
    boundary; file offsets in ``problems`` count from the start of the file)."""
    topic, partition = topic_partition(file)
    if topic is None and base == 0:
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
            good, damaged_at = _before_damage(view[:end], pos, exc)
            if good is not None:
                yield "messages", _messages(good, topic, partition, file)
            skip = _entry_end(view, damaged_at)
            then = "the rest of the file is skipped" if skip is None else f"skipped to byte {base + skip}"
            error = _entry_error(view[damaged_at : end if skip is None else skip], exc)
            detail = f"message at byte {base + damaged_at} does not decode ({error}; offsets from its start); {then}"
            yield "problems", _problem(PROBLEM_CORRUPT_SEGMENT, detail, file, base + damaged_at)
            if skip is None:
                return
            pos, size = skip, chunk_bytes
            continue
        if columns.count:
            yield "messages", _messages(columns, topic, partition, file)
        if columns.valid_bytes:
            pos += columns.valid_bytes
            size = chunk_bytes
        elif end < total:
            size *= 2  # one message larger than the chunk
        else:
            detail = (
                f"{total - pos} bytes after the last complete message do not hold a complete message "
                "(a truncated file, or a damaged size field)"
            )
            yield "problems", _problem(PROBLEM_TRUNCATED_SEGMENT, detail, file, base + pos)
            return


def _entry_error(entry: memoryview, fallback: DecodeError) -> DecodeError:
    """The error of the damaged entry decoded alone, so its offsets do not depend on how the file was
    cut into chunks or ranges."""
    try:
        decode_message_columns(entry)
    except DecodeError as exc:
        return exc
    return fallback


def _entry_end(view: memoryview, at: int) -> Optional[int]:
    """Where the entry at ``at`` ends by its length field, when that fits in ``view``."""
    if at + 12 > len(view):
        return None
    length = _ENTRY_HEADER.unpack_from(view, at)[1]
    end = at + 12 + length
    return end if length >= 0 and end <= len(view) else None


def _before_damage(view: memoryview, pos: int, exc: DecodeError) -> Tuple[Optional[Any], int]:
    """The complete messages in front of a decode error, and where the damaged message starts."""
    good = None
    damaged_at = pos
    if exc.offset is not None and exc.offset > 0:
        try:
            # Cut inside the damaged message: the decoder then stops at its start (an incomplete tail).
            good = decode_message_columns(view[pos : min(pos + exc.offset, len(view))])
            damaged_at = pos + good.valid_bytes
        except DecodeError:
            good = None
    return (good if good is not None and good.count else None), damaged_at


def _messages(columns: Any, topic: Optional[str], partition: Optional[int], file: str) -> pa.RecordBatch:
    return with_constants(
        columns.to_arrow(),
        topic=topic,
        partition=partition,
        exchange_id=None,
        connection=None,
        direction=None,
        file=file,
        time_us=None,
    )


def _problem(kind: str, detail: str, file: str, offset: Optional[int]) -> pa.RecordBatch:
    row = [[kind], [detail], [file], [None], [offset], [None], [None], [None], [None]]
    return pa.RecordBatch.from_arrays([pa.array(v, f.type) for v, f in zip(row, PROBLEMS)], schema=PROBLEMS)
