"""Validating a produced message set and assigning it offsets, as a 0.8/0.9 broker does before appending.

A broker ignores the offsets a producer writes (docs/protocol-notes.md, "Message sets the broker handles"):

* an uncompressed entry gets the next offset written over its offset field (the CRC does not cover the
  offset, so nothing else changes);
* a compressed wrapper is decompressed, every inner message gets the next absolute offset (magic 0) and
  the set is compressed again with the same codec; the wrapper's offset is its last inner message's.
  Like a JVM broker, the result uses xerial framing for snappy and Kafka's 0.8/0.9 LZ4 frame, whatever
  the producer wrote (librdkafka writes raw snappy).

Decompression is bounded per Produce request, not per wrapper: one :class:`DecompressionBudget` is
shared by every partition of a request, so many small wrappers cannot each expand to the full cap.
Re-compressing is the costly part of an append, so the broker runs compressed appends on a worker
thread (:func:`has_compressed_entries` tells which those are).

Validation follows 0.9.0's ``analyzeAndValidateMessageSet``: a trailing partial entry is dropped, an
entry shorter than the minimum message or with a bad CRC (or an undecodable wrapper) is
CORRUPT_MESSAGE, an entry larger than ``message.max.bytes`` is MESSAGE_TOO_LARGE; an error rejects the
whole partition's set.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

from kproto import ErrorCode
from kproto.errors import KprotoError, LimitExceededError
from kproto.records import DEFAULT_MAX_DECOMPRESSED_SIZE, decode_message_set, encode_message_set

__all__ = [
    "DEFAULT_MESSAGE_MAX_BYTES",
    "DecompressionBudget",
    "PreparedAppend",
    "has_compressed_entries",
    "prepare_append",
]

#: ``message.max.bytes`` default: 1000000 + LogOverhead (12).
DEFAULT_MESSAGE_MAX_BYTES = 1000012

_ENTRY_HEAD = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_LOG_OVERHEAD = 12
_MIN_MESSAGE = 14  # crc + magic + attributes + key length + value length
_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4"}


class DecompressionBudget:
    """Bytes that the compressed wrappers of one request may still decompress to."""

    def __init__(self, limit: int) -> None:
        self.remaining = limit
        #: Bytes decompressed so far (what tests and the abuse benchmark read).
        self.used = 0

    def spend(self, size: int) -> None:
        self.remaining -= size
        self.used += size


def has_compressed_entries(message_set: bytes) -> bool:
    """Whether any shallow entry of ``message_set`` is a compressed wrapper (cheap: headers only)."""
    pos, end = 0, len(message_set)
    while end - pos >= _LOG_OVERHEAD + _MIN_MESSAGE:
        _, size = _ENTRY_HEAD.unpack_from(message_set, pos)
        if size < _MIN_MESSAGE:
            return False
        if message_set[pos + _LOG_OVERHEAD + 5] & 0x07:
            return True
        pos += _LOG_OVERHEAD + size
    return False


@dataclass(frozen=True)
class PreparedAppend:
    """A message set ready to append: its bytes with offsets assigned, and where each entry ends.

    ``entries`` holds (last offset in the entry, byte position where the entry starts) per shallow entry.
    """

    data: bytes
    entries: Tuple[Tuple[int, int], ...]
    first_offset: int
    count: int


def prepare_append(
    message_set: bytes,
    next_offset: int,
    *,
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES,
    budget: Optional[DecompressionBudget] = None,
) -> Union[PreparedAppend, ErrorCode]:
    """``message_set`` with offsets from ``next_offset`` on, or the error code that rejects it.

    Compressed wrappers draw on ``budget`` (default: one of 64 MiB for this call); a wrapper that
    would exceed it is MESSAGE_TOO_LARGE.
    """
    if budget is None:
        budget = DecompressionBudget(DEFAULT_MAX_DECOMPRESSED_SIZE)
    # Uncompressed entries get their offset written in place in one copy of the input; a compressed
    # entry is replaced by its re-compressed form, so the output is assembled from runs and wrappers.
    buf = bytearray(message_set)
    view = memoryview(buf)
    pieces: List[bytes] = []
    entries: List[Tuple[int, int]] = []
    offset, out_len, run_start = next_offset, 0, 0
    pos, end = 0, len(buf)
    while end - pos >= _LOG_OVERHEAD:
        _, size = _ENTRY_HEAD.unpack_from(buf, pos)
        if size < _MIN_MESSAGE:
            return ErrorCode.CORRUPT_MESSAGE
        stop = pos + _LOG_OVERHEAD + size
        if stop > end:
            break  # a partial trailing entry: dropped, as the broker trims invalid bytes
        if _LOG_OVERHEAD + size > message_max_bytes:
            return ErrorCode.MESSAGE_TOO_LARGE
        codec = _check(view, pos + _LOG_OVERHEAD, stop)
        if isinstance(codec, ErrorCode):
            return codec
        if not codec:
            _OFFSET.pack_into(buf, pos, offset)
            entries.append((offset, out_len + pos - run_start))
            offset += 1
        else:
            recompressed = _recompress(bytes(view[pos:stop]), offset, buf[pos + _LOG_OVERHEAD + 4], codec, budget)
            if isinstance(recompressed, ErrorCode):
                return recompressed
            data, count = recompressed
            pieces.append(bytes(view[run_start:pos]))
            out_len += pos - run_start
            entries.append((offset + count - 1, out_len))
            pieces.append(data)
            out_len += len(data)
            offset += count
            run_start = stop
        pos = stop
    pieces.append(bytes(view[run_start:pos]))
    view.release()
    return PreparedAppend(b"".join(pieces), tuple(entries), next_offset, offset - next_offset)


def _check(view: memoryview, start: int, stop: int) -> Union[int, ErrorCode]:
    """The codec of the message in ``view[start:stop]`` after checking its CRC, magic and codec."""
    (crc,) = _CRC.unpack_from(view, start)
    if zlib.crc32(view[start + 4 : stop]) != crc:
        return ErrorCode.CORRUPT_MESSAGE
    magic, codec = view[start + 4], view[start + 5] & 0x07
    if magic not in (0, 1) or (codec and codec not in _CODEC_NAMES):
        return ErrorCode.CORRUPT_MESSAGE
    return codec


def _recompress(
    entry: bytes, offset: int, magic: int, codec: int, budget: DecompressionBudget
) -> Union[Tuple[bytes, int], ErrorCode]:
    """A compressed wrapper re-encoded with inner offsets from ``offset``: (bytes, message count)."""
    try:
        inner = decode_message_set(entry, max_decompressed_size=max(budget.remaining, 0))
        messages = [(m.key, m.value, m.timestamp) for m in inner]
        if not messages:
            return ErrorCode.CORRUPT_MESSAGE
        # What the wrapper decompressed to: every inner entry's log overhead, header and payload.
        header = _LOG_OVERHEAD + _MIN_MESSAGE + (8 if magic else 0)
        budget.spend(sum(header + len(k or b"") + len(v or b"") for k, v, _ in messages))
        data = encode_message_set(messages, magic=magic, codec=_CODEC_NAMES[codec], base_offset=offset)
    except LimitExceededError:
        return ErrorCode.MESSAGE_TOO_LARGE
    except KprotoError:
        return ErrorCode.CORRUPT_MESSAGE
    return data, len(messages)
