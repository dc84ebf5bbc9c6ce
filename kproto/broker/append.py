"""Validating a produced message set and assigning it offsets, as a 0.8/0.9 broker does before appending.

A broker ignores the offsets a producer writes (protocol.md §4.3):

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
    out = bytearray()
    entries: List[Tuple[int, int]] = []
    offset = next_offset
    pos, end = 0, len(message_set)
    while end - pos >= _LOG_OVERHEAD:
        _, size = _ENTRY_HEAD.unpack_from(message_set, pos)
        if size < _MIN_MESSAGE:
            return ErrorCode.CORRUPT_MESSAGE
        if end - pos - _LOG_OVERHEAD < size:
            break  # a partial trailing entry: dropped, as the broker trims invalid bytes
        if _LOG_OVERHEAD + size > message_max_bytes:
            return ErrorCode.MESSAGE_TOO_LARGE
        entry = message_set[pos:pos + _LOG_OVERHEAD + size]
        rewritten = _assign(entry, offset)
        if isinstance(rewritten, ErrorCode):
            return rewritten
        data, count = rewritten
        entries.append((offset + count - 1, len(out)))
        out += data
        offset += count
        pos += _LOG_OVERHEAD + size
    return PreparedAppend(bytes(out), tuple(entries), next_offset, offset - next_offset)


def _assign(entry: bytes, offset: int) -> Union[Tuple[bytes, int], ErrorCode]:
    """One shallow entry with offsets from ``offset``: (new bytes, message count) or an error."""
    message = memoryview(entry)[_LOG_OVERHEAD:]
    (crc,) = struct.unpack_from(">I", message, 0)
    if zlib.crc32(message[4:]) != crc:
        return ErrorCode.CORRUPT_MESSAGE
    magic, attributes = message[4], message[5]
    codec = attributes & 0x07
    if magic not in (0, 1) or (codec and codec not in _CODEC_NAMES):
        return ErrorCode.CORRUPT_MESSAGE
    if not codec:
        return _ENTRY_HEAD.pack(offset, len(message)) + bytes(message), 1
    try:
        inner = decode_message_set(entry)
        pairs = [(m.key, m.value, m.timestamp) for m in inner]
        if not pairs:
            return ErrorCode.CORRUPT_MESSAGE
        data = encode_message_set(pairs, magic=magic, codec=_CODEC_NAMES[codec], base_offset=offset)
    except KprotoError:
        return ErrorCode.CORRUPT_MESSAGE
    return data, len(pairs)
