"""Validating a produced message set and assigning it offsets, as a 0.8/0.9 broker does before appending.

A broker ignores the offsets a producer writes (docs/protocol-notes.md, "Message sets the broker handles"):

* an uncompressed entry gets the next offset written over its offset field (the CRC does not cover the
  offset, so nothing else changes);
* a compressed wrapper is decompressed, every inner message gets the next absolute offset (magic 0) and
  the set is compressed again with the same codec; the wrapper's offset is its last inner message's.
  Like a JVM broker, the result uses xerial framing for snappy and Kafka's 0.8/0.9 LZ4 frame, whatever
  the producer wrote (librdkafka writes raw snappy).

Validation follows 0.9.0's ``analyzeAndValidateMessageSet``: a trailing partial entry is dropped, an
entry shorter than the minimum message or with a bad CRC (or an undecodable wrapper) is
CORRUPT_MESSAGE, an entry larger than ``message.max.bytes`` is MESSAGE_TOO_LARGE; an error rejects the
whole partition's set.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import List, Tuple, Union

from kproto import ErrorCode
from kproto.errors import KprotoError
from kproto.records import decode_message_set, encode_message_set

__all__ = ["DEFAULT_MESSAGE_MAX_BYTES", "PreparedAppend", "prepare_append"]

#: ``message.max.bytes`` default: 1000000 + LogOverhead (12).
DEFAULT_MESSAGE_MAX_BYTES = 1000012

_ENTRY_HEAD = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_LOG_OVERHEAD = 12
_MIN_MESSAGE = 14  # crc + magic + attributes + key length + value length
_CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4"}


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
    message_set: bytes, next_offset: int, *, message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
) -> Union[PreparedAppend, ErrorCode]:
    """``message_set`` with offsets from ``next_offset`` on, or the error code that rejects it."""
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
            recompressed = _recompress(bytes(view[pos:stop]), offset, buf[pos + _LOG_OVERHEAD + 4], codec)
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
    if zlib.crc32(view[start + 4:stop]) != crc:
        return ErrorCode.CORRUPT_MESSAGE
    magic, codec = view[start + 4], view[start + 5] & 0x07
    if magic not in (0, 1) or (codec and codec not in _CODEC_NAMES):
        return ErrorCode.CORRUPT_MESSAGE
    return codec


def _recompress(entry: bytes, offset: int, magic: int, codec: int) -> Union[Tuple[bytes, int], ErrorCode]:
    """A compressed wrapper re-encoded with inner offsets from ``offset``: (bytes, message count)."""
    try:
        inner = decode_message_set(entry)
        messages = [(m.key, m.value, m.timestamp) for m in inner]
        if not messages:
            return ErrorCode.CORRUPT_MESSAGE
        data = encode_message_set(messages, magic=magic, codec=_CODEC_NAMES[codec], base_offset=offset)
    except KprotoError:
        return ErrorCode.CORRUPT_MESSAGE
    return data, len(messages)
