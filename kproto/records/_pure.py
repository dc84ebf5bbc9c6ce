"""Pure-Python message set codec: the twin of the Cython module ``kproto._fast._records``.

Both modules expose the same names (``Message``, ``decode``, ``decode_columns``, ``encode_plain``) and must
give the same results and raise the same error class at the same offset for the same input;
``tests/test_records_differential.py`` holds them to it.  :mod:`kproto._backend` picks one.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections import namedtuple
from typing import Any, Iterable, List, Optional, Tuple

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.compression import decompress
from kproto.records.decoded import MessageColumns, MessageSet
from kproto.records.format import CODEC_MASK, CODEC_NAMES, MIN_MESSAGE_SIZE, MIN_MESSAGE_SIZE_V1, NO_TIMESTAMP

__all__ = ["Message", "decode", "decode_columns", "encode_plain"]

_HEAD = struct.Struct(">qiIbb")  # offset, message_size, crc, magic, attributes
_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PREFIX = struct.Struct(">qiI")  # offset, message_size, crc
_BODY_V0 = struct.Struct(">bbi")  # magic, attributes, key length
_BODY_V1 = struct.Struct(">bbqi")  # magic, attributes, timestamp, key length
_I32_MAX = 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

_MessageFields = namedtuple(
    "_MessageFields",
    "key value timestamp offset magic attributes codec timestamp_type crc",
    defaults=(None, None, None, 0, 0, 0, 0, None, 0),
)


class Message(_MessageFields):
    """One decoded message.

    ``key``/``value``: ``bytes`` or ``None`` (null and empty stay distinct); ``timestamp``: int for magic 1,
    ``None`` for magic 0; ``offset``: absolute; ``magic``; ``attributes``: the message's own attribute byte;
    ``codec``: the codec it travelled with (the wrapper's for messages expanded from a compressed wrapper);
    ``timestamp_type``: 0 CreateTime / 1 LogAppendTime for magic 1, ``None`` for magic 0; ``crc``: as stored.
    """

    __slots__ = ()


_new = tuple.__new__


def _as_bytes(data: Any) -> bytes:
    return data if type(data) is bytes else memoryview(data).tobytes()


def decode(data: Any, check_crc: bool, limit: int) -> MessageSet:
    """Decode a message set into :class:`Message` objects (see :func:`kproto.records.decode_message_set`)."""
    messages: List[Message] = []
    valid, partial = _decode_into(_as_bytes(data), messages, None, check_crc, limit, False, 0)
    return MessageSet(messages, valid, partial)


def decode_columns(data: Any, check_crc: bool, limit: int) -> MessageColumns:
    """Decode a message set into columns (see :func:`kproto.records.decode_columns`)."""
    messages: List[Message] = []
    crc_flags: List[bool] = []
    valid, partial = _decode_into(_as_bytes(data), messages, crc_flags, check_crc, limit, False, 0)
    key_data, key_bounds, key_null = _pack_binary([m.key for m in messages])
    value_data, value_bounds, value_null = _pack_binary([m.value for m in messages])
    return MessageColumns(
        count=len(messages),
        offsets=array("q", [m.offset for m in messages]),
        timestamps=array("q", [NO_TIMESTAMP if m.timestamp is None else m.timestamp for m in messages]),
        magics=array("b", [m.magic for m in messages]),
        attributes=array("b", [m.attributes - 256 if m.attributes > 127 else m.attributes for m in messages]),
        codecs=array("b", [m.codec for m in messages]),
        crc_ok=array("B", [1 if ok else 0 for ok in crc_flags] if not check_crc else [1] * len(messages)),
        key_data=key_data,
        key_offsets=key_bounds,
        key_null=key_null,
        value_data=value_data,
        value_offsets=value_bounds,
        value_null=value_null,
        valid_bytes=valid,
        partial=partial,
    )


def _pack_binary(items: List[Optional[bytes]]) -> Tuple[bytes, array, array]:
    bounds = array("i", [0])
    total = 0
    for item in items:
        if item is not None:
            total += len(item)
            if total > _I32_MAX:
                raise LimitExceededError("decoded keys or values exceed 2 GiB, more than int32 column offsets hold")
        bounds.append(total)
    data = b"".join([item for item in items if item is not None])
    return data, bounds, array("B", [1 if item is None else 0 for item in items])


def _decode_into(
    buf: bytes,
    out: List[Message],
    crc_flags: Optional[List[bool]],
    check_crc: bool,
    limit: int,
    inner: bool,
    carrier_codec: int,
) -> Tuple[int, bool]:
    """Append the messages of ``buf`` to ``out``; return (valid bytes, ended with a partial message)."""
    n = len(buf)
    pos = 0
    head, i32, i64, crc32, append = _HEAD.unpack_from, _I32.unpack_from, _I64.unpack_from, zlib.crc32, out.append
    while pos < n:
        left = n - pos
        if left < 18:
            if left < 12:
                return pos, True
            size = _ENTRY.unpack_from(buf, pos)[1]
            if size < MIN_MESSAGE_SIZE:
                raise DecodeError(f"message size {size} is below the minimum of {MIN_MESSAGE_SIZE}", pos + 8)
            return pos, True
        offset, size, crc, magic, attributes = head(buf, pos)
        if size < MIN_MESSAGE_SIZE:
            raise DecodeError(f"message size {size} is below the minimum of {MIN_MESSAGE_SIZE}", pos + 8)
        start = pos + 12
        end = start + size
        if end > n:
            return pos, True
        crc_ok = True
        if check_crc or crc_flags is not None:
            crc_ok = crc32(buf[start + 4 : end]) == crc
            if not crc_ok and check_crc:
                raise DecodeError(f"CRC mismatch: stored 0x{crc:08x}, computed 0x{crc32(buf[start + 4 : end]):08x}", start)
        if magic == 0:
            timestamp = timestamp_type = None
            p = start + 6
        elif magic == 1:
            if size < MIN_MESSAGE_SIZE_V1:
                raise DecodeError(f"message size {size} is below the magic 1 minimum of {MIN_MESSAGE_SIZE_V1}", pos + 8)
            timestamp = i64(buf, start + 6)[0]
            timestamp_type = (attributes >> 3) & 1
            p = start + 14
        else:
            raise DecodeError(f"unsupported message magic {magic}", start + 4)
        klen = i32(buf, p)[0]
        p += 4
        if klen == -1:
            key = None
        elif klen < -1 or klen > end - p - 4:
            raise DecodeError(f"key length {klen} does not fit the {end - p - 4} bytes left in the message", p - 4)
        else:
            key = buf[p : p + klen]
            p += klen
        vlen = i32(buf, p)[0]
        p += 4
        if vlen == -1 and p == end:
            value = None
        elif vlen != end - p:
            raise DecodeError(f"value length {vlen} does not match the {end - p} bytes left in the message", p - 4)
        else:
            value = buf[p:end]
        codec = attributes & CODEC_MASK
        if codec:
            _expand_wrapper(
                buf, out, crc_flags, check_crc, limit, inner, pos, p, offset, magic, attributes, timestamp, value, crc_ok
            )
        else:
            append(_new(Message, (key, value, timestamp, offset, magic, attributes & 0xFF, carrier_codec, timestamp_type, crc)))
            if crc_flags is not None:
                crc_flags.append(crc_ok)
        pos = end
    return pos, False


def _expand_wrapper(
    buf: bytes,
    out: List[Message],
    crc_flags: Optional[List[bool]],
    check_crc: bool,
    limit: int,
    inner: bool,
    entry: int,
    value_pos: int,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: Optional[int],
    value: Optional[bytes],
    crc_ok: bool,
) -> None:
    """Decompress a wrapper's inner set and append its messages with absolute offsets."""
    codec = attributes & CODEC_MASK
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise DecodeError(f"unknown compression codec {codec}", entry + 17)
    if inner:
        raise LimitExceededError("a compressed message inside a compressed message set (nested compression)", entry + 17)
    if value is None:
        raise DecodeError(f"{name} wrapper message has a null value", value_pos - 4)
    raw = decompress(codec, value, magic=magic, limit=limit, position=value_pos)
    found: List[Message] = []
    flags: Optional[List[bool]] = [] if crc_flags is not None else None
    try:
        valid, partial = _decode_into(raw, found, flags, check_crc, limit, True, codec)
    except DecodeError as exc:
        raise type(exc)(f"{exc.reason} [decompressed byte {exc.offset} of the {name} wrapper]", value_pos) from None
    if partial:
        raise DecodeError(f"the {name} wrapper's inner message set is truncated at decompressed byte {valid}", value_pos)
    if not found:
        raise DecodeError(f"the {name} wrapper holds no messages", value_pos)
    if magic == 1:
        found = _absolute_inner(found, entry, offset, attributes, timestamp)
    out.extend(found)
    if crc_flags is not None and flags is not None:
        crc_flags.extend([ok and crc_ok for ok in flags])


def _absolute_inner(
    found: List[Message], entry: int, offset: int, attributes: int, timestamp: Optional[int]
) -> List[Message]:
    """Magic 1: turn relative inner offsets absolute; LogAppendTime wrappers lend their timestamp."""
    last = found[-1].offset
    if offset == 0:  # some producers (older librdkafka) leave the wrapper at 0: inner offsets are used as they are
        delta = 0
    elif offset < last:
        raise DecodeError(f"wrapper offset {offset} is below its last inner offset {last}", entry)
    else:
        delta = offset - last
    log_append = bool(attributes & 0x08)
    if not delta and not log_append:
        return found
    result = []
    for m in found:
        m = m._replace(offset=m.offset + delta)
        if log_append:
            m = m._replace(timestamp=timestamp, timestamp_type=1)
        result.append(m)
    return result


def encode_plain(messages: Iterable[Any], magic: int, base_offset: int, attributes: int) -> Tuple[bytes, int, int]:
    """Encode uncompressed messages at offsets ``base_offset``, +1, ...; return (bytes, count, max timestamp)."""
    parts: List[bytes] = []
    add = parts.append
    pack_prefix, pack_i32, crc32 = _PREFIX.pack, _I32.pack, zlib.crc32
    body_v0, body_v1 = _BODY_V0.pack, _BODY_V1.pack
    offset = base_offset
    max_timestamp = NO_TIMESTAMP
    index = -1
    for index, item in enumerate(messages):
        key, value, timestamp = _fields(item, index)
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        if klen > _I32_MAX or vlen > _I32_MAX:
            raise EncodeError(f"message {index}: key or value longer than 2 GiB")
        if offset > _I64_MAX:
            raise EncodeError(f"message {index}: offset {offset} does not fit int64")
        if magic == 0:
            head = body_v0(0, attributes, klen)
        else:
            if timestamp is None:
                timestamp = NO_TIMESTAMP
            elif timestamp > max_timestamp:
                max_timestamp = timestamp
            head = body_v1(1, attributes, timestamp, klen)
        body = b"".join((head, key or b"", pack_i32(vlen), value or b""))
        if len(body) + 4 > _I32_MAX:
            raise EncodeError(f"message {index}: larger than 2 GiB")
        add(pack_prefix(offset, len(body) + 4, crc32(body)))
        add(body)
        offset += 1
    return b"".join(parts), index + 1, max_timestamp


def _fields(item: Any, index: int) -> Tuple[Optional[bytes], Optional[bytes], Optional[int]]:
    """(key, value, timestamp) of a tuple or message object, checked."""
    if type(item) is tuple:
        if len(item) == 2:
            key, value = item
            timestamp = None
        elif len(item) == 3:
            key, value, timestamp = item
        else:
            raise EncodeError(f"message {index}: a tuple must be (key, value) or (key, value, timestamp)")
    else:
        try:
            key, value = item.key, item.value
        except AttributeError:
            raise EncodeError(
                f"message {index}: expected a (key, value[, timestamp]) tuple or an object with key and value"
            ) from None
        timestamp = getattr(item, "timestamp", None)
    return _binary(key, "key", index), _binary(value, "value", index), _timestamp(timestamp, index)


def _binary(field: Any, name: str, index: int) -> Optional[bytes]:
    if field is None or type(field) is bytes:
        return field
    if isinstance(field, (bytes, bytearray, memoryview)):
        return memoryview(field).tobytes()
    raise EncodeError(f"message {index}: {name} must be bytes-like or None, not {type(field).__name__}")


def _timestamp(timestamp: Any, index: int) -> Optional[int]:
    if timestamp is None:
        return None
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise EncodeError(f"message {index}: timestamp must be an int or None, not {type(timestamp).__name__}")
    if not _I64_MIN <= timestamp <= _I64_MAX:
        raise EncodeError(f"message {index}: timestamp {timestamp} does not fit int64")
    return timestamp
