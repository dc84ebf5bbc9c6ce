"""Message sets (magic 0 and 1), pure Python: the twin of the Cython module ``kproto._fast._legacy_records``.

Both modules expose the same names (``LegacyRecord``, ``decode``, ``decode_columns``, ``encode_plain``) and must
give the same results and raise the same error class at the same offset for the same input;
``tests/records/test_records_differential.py`` holds them to it.  :mod:`kproto._backend` picks one.

This module is the readable reference of the two: plain Python, no reference counting, no reuse of
buffers, no slicing tricks.  :mod:`kproto.records.default_records` (magic 2) reads the legacy entries of a
mixed buffer with :func:`_decode_into`.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections import namedtuple
from typing import Any, Iterable, List, Optional, Tuple

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.compression import decompress
from kproto.records.decoded import MessageColumns, MessageSet, _pack_binary
from kproto.records.format import (
    CODEC_MASK,
    CODEC_NAMES,
    CODEC_ZSTD,
    MIN_MESSAGE_SIZE,
    MIN_MESSAGE_SIZE_V1,
    NO_TIMESTAMP,
    codec_id,
)

__all__ = ["LegacyRecord", "decode", "decode_columns", "encode_plain"]

# offset, message_size, crc, magic, attributes (unsigned), then for magic 0 the key length and, when that is
# -1 (null key), the value length: the 26 bytes of the smallest message
_HEAD_KV = struct.Struct(">qiIbBii")
_TS_KEY = struct.Struct(">qi")  # magic 1: timestamp, key length
_TS_KV = struct.Struct(">qii")  # magic 1: timestamp, key length, value length (if the key is null)
_BODY_V0_NULL_KEY = struct.Struct(">bbii")  # magic, attributes, key length -1, value length
_BODY_V1_NULL_KEY = struct.Struct(">bbqii")  # magic, attributes, timestamp, key length -1, value length
_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_PREFIX = struct.Struct(">qiI")  # offset, message_size, crc
_BODY_V0 = struct.Struct(">bbi")  # magic, attributes, key length
_BODY_V1 = struct.Struct(">bbqi")  # magic, attributes, timestamp, key length
_I32_MAX = 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

_MessageFields = namedtuple(
    "_MessageFields",
    "key value timestamp offset magic attributes codec timestamp_type crc",
    defaults=(None, None, None, 0, 0, 0, None, None, 0),
)


class LegacyRecord(_MessageFields):
    """One decoded magic 0/1 message (Kafka's ``LegacyRecord``; not a protocol message).

    ``key``/``value``: ``bytes`` or ``None`` (null and empty stay distinct); ``timestamp``: int for magic 1,
    ``None`` for magic 0; ``offset``: absolute; ``magic``; ``attributes``: the message's own attribute byte;
    ``codec``: the name of the codec it travelled with (the wrapper's, for messages expanded from a compressed
    wrapper: ``"gzip"``, ``"snappy"``, ``"lz4"``; ``None`` uncompressed), as encoding takes it;
    ``timestamp_type``: 0 CreateTime / 1 LogAppendTime for magic 1, ``None`` for magic 0; ``crc``: as stored.
    """

    __slots__ = ()


_new = tuple.__new__


def _as_bytes(data: Any) -> bytes:
    return data if type(data) is bytes else memoryview(data).tobytes()


def decode(data: Any, check_crc: bool, limit: int, check_inner_crc: bool = True) -> MessageSet:
    """Decode a message set into :class:`LegacyRecord` objects (see :func:`kproto.records.decode_message_set`)."""
    messages: List[LegacyRecord] = []
    valid, partial = _decode_into(_as_bytes(data), messages, None, check_crc, [limit], False, None, check_inner_crc)
    return MessageSet(messages, valid, partial)


def decode_columns(data: Any, check_crc: bool, limit: int) -> MessageColumns:
    """Decode a message set into columns (see :func:`kproto.records.decode_columns`)."""
    messages: List[LegacyRecord] = []
    crc_flags: List[bool] = []
    valid, partial = _decode_into(_as_bytes(data), messages, crc_flags, check_crc, [limit], False, None)
    key_data, key_bounds, key_null = _pack_binary([m.key for m in messages])
    value_data, value_bounds, value_null = _pack_binary([m.value for m in messages])
    return MessageColumns(
        count=len(messages),
        offsets=array("q", [m.offset for m in messages]),
        timestamps=array("q", [NO_TIMESTAMP if m.timestamp is None else m.timestamp for m in messages]),
        magics=array("b", [m.magic for m in messages]),
        attributes=array("b", [m.attributes - 256 if m.attributes > 127 else m.attributes for m in messages]),
        codecs=array("b", [codec_id(m.codec) for m in messages]),
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


def _decode_into(
    buf: bytes,
    out: List[LegacyRecord],
    crc_flags: Optional[List[bool]],
    check_crc: bool,
    budget: List[int],
    inner: bool,
    carrier_codec: Optional[str],
    check_inner_crc: bool = True,
) -> Tuple[int, bool]:
    """Append the messages of ``buf`` to ``out``; return (valid bytes, ended with a partial message).

    ``budget`` holds the decompressed bytes the whole call may still produce: one cap for the message set,
    however many wrappers it holds.
    """
    n = len(buf)
    pos = 0
    # Everything the loop touches is a local: one struct call reads the entry head and (magic 0) the key
    # length, attributes come unsigned (no masking), messages are built with tuple.__new__.
    head, ts_key, i32, crc32, append = (
        _HEAD_KV.unpack_from,
        _TS_KEY.unpack_from,
        _I32.unpack_from,
        zlib.crc32,
        out.append,
    )
    new, message, ts_kv = _new, LegacyRecord, _TS_KV.unpack_from
    track = crc_flags is not None
    crc_ok = True
    last_head = n - 26  # a message starting after this cannot be complete (the smallest is 26 bytes)
    view = memoryview(buf)
    while pos < n:
        if pos > last_head:  # a partial tail, unless its size is bad
            if n - pos < 12:
                return pos, True
            size = _ENTRY.unpack_from(buf, pos)[1]
            if size < MIN_MESSAGE_SIZE:
                raise DecodeError(f"message size {size} is below the minimum of {MIN_MESSAGE_SIZE}", pos + 8)
            return pos, True
        offset, size, crc, magic, attributes, klen, vlen = head(buf, pos)
        if size < 14:  # MIN_MESSAGE_SIZE
            raise DecodeError(f"message size {size} is below the minimum of {MIN_MESSAGE_SIZE}", pos + 8)
        end = pos + 12 + size
        if end > n:
            return pos, True
        if check_crc:
            # a slice copy is the cheapest view of a short message; a long one is read in place
            if crc32(buf[pos + 16 : end] if size < 1024 else view[pos + 16 : end]) != crc:
                raise DecodeError(
                    f"CRC mismatch: stored 0x{crc:08x}, computed 0x{crc32(buf[pos + 16 : end]):08x}", pos + 12
                )
        elif track:
            crc_ok = crc32(buf[pos + 16 : end] if size < 1024 else view[pos + 16 : end]) == crc
        if magic == 0 and klen == -1 and vlen == size - 14 and not attributes & 7:
            # the common case, a magic 0 message with a null key and a value, not a wrapper
            append(new(message, (None, buf[pos + 26 : end], None, offset, 0, attributes, carrier_codec, None, crc)))
            if crc_flags is not None:
                crc_flags.append(crc_ok)
            pos = end
            continue
        if magic == 1 and size >= 22:
            timestamp, klen, vlen = ts_kv(buf, pos + 18)
            if klen == -1 and vlen == size - 22 and not attributes & 7:  # the same for magic 1
                append(
                    new(
                        message,
                        (
                            None,
                            buf[pos + 34 : end],
                            timestamp,
                            offset,
                            1,
                            attributes,
                            carrier_codec,
                            (attributes >> 3) & 1,
                            crc,
                        ),
                    )
                )
                if crc_flags is not None:
                    crc_flags.append(crc_ok)
                pos = end
                continue
        if magic == 0:
            timestamp = timestamp_type = None
            if klen == -1:  # null key: the value length was read with the head
                key = None
                p = pos + 26
                if vlen == end - p:
                    value = buf[p:end]
                elif vlen == -1 and p == end:
                    value = None
                else:
                    raise DecodeError(
                        f"value length {vlen} does not match the {end - p} bytes left in the message", p - 4
                    )
                if attributes & CODEC_MASK:
                    _expand_wrapper(
                        buf,
                        out,
                        crc_flags,
                        check_crc and check_inner_crc,
                        budget,
                        inner,
                        pos,
                        p,
                        offset,
                        0,
                        attributes,
                        None,
                        value,
                        crc_ok,
                    )
                else:
                    append(new(message, (None, value, None, offset, 0, attributes, carrier_codec, None, crc)))
                    if crc_flags is not None:
                        crc_flags.append(crc_ok)
                pos = end
                continue
            p = pos + 22
        elif magic == 1:
            if size < MIN_MESSAGE_SIZE_V1:
                raise DecodeError(f"message size {size} is below the magic 1 minimum of {MIN_MESSAGE_SIZE_V1}", pos + 8)
            timestamp, klen = ts_key(buf, pos + 18)
            timestamp_type = (attributes >> 3) & 1
            p = pos + 30
        else:
            raise DecodeError(f"unsupported message magic {magic}", pos + 16)
        if klen == -1:
            key = None
        elif klen < -1 or klen > end - p - 4:
            raise DecodeError(f"key length {klen} does not fit the {end - p - 4} bytes left in the message", p - 4)
        else:
            key = buf[p : p + klen]
            p += klen
        vlen = i32(buf, p)[0]
        p += 4
        if vlen == end - p:
            value = buf[p:end]
        elif vlen == -1 and p == end:
            value = None
        else:
            raise DecodeError(f"value length {vlen} does not match the {end - p} bytes left in the message", p - 4)
        if attributes & CODEC_MASK:
            _expand_wrapper(
                buf,
                out,
                crc_flags,
                check_crc and check_inner_crc,
                budget,
                inner,
                pos,
                p,
                offset,
                magic,
                attributes,
                timestamp,
                value,
                crc_ok,
            )
        else:
            append(new(message, (key, value, timestamp, offset, magic, attributes, carrier_codec, timestamp_type, crc)))
            if crc_flags is not None:
                crc_flags.append(crc_ok)
        pos = end
    return pos, False


def _expand_wrapper(
    buf: bytes,
    out: List[LegacyRecord],
    crc_flags: Optional[List[bool]],
    check_crc: bool,
    budget: List[int],
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
    name = CODEC_NAMES.get(codec) if codec != CODEC_ZSTD else None  # zstd exists only in magic 2
    if name is None:
        raise DecodeError(f"unknown compression codec {codec}", entry + 17)
    if inner:
        raise LimitExceededError(
            "a compressed message inside a compressed message set (nested compression)", entry + 17
        )
    if value is None:
        raise DecodeError(f"{name} wrapper message has a null value", value_pos - 4)
    raw = decompress(codec, value, magic=magic, limit=budget[0], position=value_pos)
    budget[0] -= len(raw)  # what the next wrappers of this call may still decompress
    found: List[LegacyRecord] = []
    flags: Optional[List[bool]] = [] if crc_flags is not None else None
    try:
        valid, partial = _decode_into(raw, found, flags, check_crc, budget, True, name)
    except DecodeError as exc:
        raise type(exc)(f"{exc.reason} [decompressed byte {exc.offset} of the {name} wrapper]", value_pos) from None
    if partial:
        raise DecodeError(
            f"the {name} wrapper's inner message set is truncated at decompressed byte {valid}", value_pos
        )
    if not found:
        raise DecodeError(f"the {name} wrapper holds no messages", value_pos)
    if any(m.magic != magic for m in found):
        raise DecodeError(f"the {name} wrapper (magic {magic}) holds messages of another magic", value_pos)
    if magic == 1:
        found = _absolute_inner(found, entry, offset, attributes, timestamp)
    out.extend(found)
    if crc_flags is not None and flags is not None:
        crc_flags.extend([ok and crc_ok for ok in flags])


def _absolute_inner(
    found: List[LegacyRecord], entry: int, offset: int, attributes: int, timestamp: Optional[int]
) -> List[LegacyRecord]:
    """Magic 1: turn relative inner offsets absolute; LogAppendTime wrappers lend their timestamp."""
    last = found[-1].offset
    if offset == 0:  # some producers (older librdkafka) leave the wrapper at 0: inner offsets are used as they are
        delta = 0
    elif offset < last:
        raise DecodeError(f"wrapper offset {offset} is below its last inner offset {last}", entry)
    else:
        delta = offset - last
        if delta > _I64_MAX:
            raise DecodeError(f"wrapper offset {offset} minus last inner offset {last} does not fit int64", entry)
        if max(m.offset for m in found) > _I64_MAX - delta:
            raise DecodeError(
                f"inner offsets of the wrapper at offset {offset} do not fit int64 once made absolute", entry
            )
    log_append = bool(attributes & 0x08)
    if not delta and not log_append:
        return found
    # new messages built as tuples (namedtuple._replace, a keyword call per message, cost ~1 us each)
    return [
        _new(
            LegacyRecord,
            (
                m.key,
                m.value,
                timestamp if log_append else m.timestamp,
                m.offset + delta,
                m.magic,
                m.attributes,
                m.codec,
                1 if log_append else m.timestamp_type,
                m.crc,
            ),
        )
        for m in found
    ]


def encode_plain(messages: Iterable[Any], magic: int, base_offset: int, attributes: int) -> Tuple[bytes, int, int]:
    """Encode uncompressed messages at offsets ``base_offset``, +1, ...; return (bytes, count, max timestamp)."""
    parts: List[bytes] = []
    add = parts.append
    pack_prefix, pack_i32, crc32 = _PREFIX.pack, _I32.pack, zlib.crc32
    body_v0, body_v1, body_v0_null_key = _BODY_V0.pack, _BODY_V1.pack, _BODY_V0_NULL_KEY.pack
    body_v1_null_key = _BODY_V1_NULL_KEY.pack
    join = b"".join
    offset = base_offset
    last_offset = _I64_MAX  # offsets past it do not fit int64
    max_timestamp = NO_TIMESTAMP
    index = -1
    for index, item in enumerate(messages):
        # the common shapes, (key, value) and (key, value, int timestamp) with bytes/None fields, are taken
        # as they are; anything else goes through the full checks of _fields
        if type(item) is tuple and len(item) == 2:
            key, value = item
            timestamp = None
            if (type(value) is not bytes and value is not None) or (type(key) is not bytes and key is not None):
                key, value, timestamp = _fields(item, index)
        elif type(item) is tuple and len(item) == 3:
            key, value, timestamp = item
            if (
                (type(value) is not bytes and value is not None)
                or (type(key) is not bytes and key is not None)
                or (timestamp is not None and (type(timestamp) is not int or not _I64_MIN <= timestamp <= _I64_MAX))
            ):
                key, value, timestamp = _fields(item, index)
        else:
            key, value, timestamp = _fields(item, index)
        vlen = -1 if value is None else len(value)
        if vlen > _I32_MAX or (key is not None and len(key) > _I32_MAX):
            raise EncodeError(f"message {index}: key or value longer than 2 GiB")
        if offset > last_offset:
            raise EncodeError(f"message {index}: offset {offset} does not fit int64")
        # a null key: the head and the value are pieces of their own (the CRC continued from one to the
        # other), so a value is copied once, into the joined set
        if magic == 0:
            if key is None:
                head = body_v0_null_key(0, attributes, -1, vlen)
                if value is None:
                    value = b""
                if len(head) + len(value) + 4 > _I32_MAX:
                    raise EncodeError(f"message {index}: larger than 2 GiB")
                add(pack_prefix(offset, len(head) + len(value) + 4, crc32(value, crc32(head))))
                add(head)
                add(value)
                offset += 1
                continue
            head = body_v0(0, attributes, len(key))
        else:
            if timestamp is None:
                timestamp = NO_TIMESTAMP
            elif timestamp > max_timestamp:
                max_timestamp = timestamp
            if key is None and value is not None:
                head = body_v1_null_key(1, attributes, timestamp, -1, vlen)
                if len(head) + vlen + 4 > _I32_MAX:
                    raise EncodeError(f"message {index}: larger than 2 GiB")
                add(pack_prefix(offset, len(head) + vlen + 4, crc32(value, crc32(head))))
                add(head)
                add(value)
                offset += 1
                continue
            head = body_v1(1, attributes, timestamp, -1 if key is None else len(key))
        body = join((head, key or b"", pack_i32(vlen), value or b""))
        if len(body) + 4 > _I32_MAX:
            raise EncodeError(f"message {index}: larger than 2 GiB")
        add(pack_prefix(offset, len(body) + 4, crc32(body)))
        add(body)
        offset += 1
    return join(parts), index + 1, max_timestamp


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


def _binary(field: Any, name: str, index: int, noun: str = "message") -> Optional[bytes]:
    if field is None or type(field) is bytes or type(field) is bytearray:
        return field  # type: ignore[return-value]  # a bytearray is copied into the message when it is encoded, so it need not be frozen
    if isinstance(field, (bytes, bytearray, memoryview)):
        return memoryview(field).tobytes()
    raise EncodeError(f"{noun} {index}: {name} must be bytes-like or None, not {type(field).__name__}")


def _timestamp(timestamp: Any, index: int, noun: str = "message") -> Optional[int]:
    if timestamp is None:
        return None
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise EncodeError(f"{noun} {index}: timestamp must be an int or None, not {type(timestamp).__name__}")
    if not _I64_MIN <= timestamp <= _I64_MAX:
        raise EncodeError(f"{noun} {index}: timestamp {timestamp} does not fit int64")
    return timestamp
