"""Primitive wire pieces shared by the generated codecs: packers, varints, tag sections, and errors.

The generated modules inline their reads (a length check, one ``unpack_from`` per run of fixed-width
fields, a slice) and call into this module only to build an error, so the cost of a helpful message —
field path, offset, bytes needed and left — is paid only when the input is bad.

Flexible versions (KIP-482) add two encodings, both handled here for the pure-Python build (the compiled
build reads and writes varints with the inline C loops of ``kproto/_generated/_c_wire.pxd`` and comes here
only for errors and non-empty tag sections):

* unsigned varints: 7 bits per byte, least significant group first, high bit set on every byte but the
  last; kproto accepts at most 5 bytes and values up to 2**32 - 1 (a compact length or count is stored
  plus one, so 0 means null); a varint padded with zero groups is refused, so that every body that
  decodes re-encodes to the same bytes;
* the tag section closing every struct: a varint count, then per field a varint tag, a varint size and
  that many bytes; tags strictly ascending, each size within the bytes the struct has left.
"""

from __future__ import annotations

import struct
from typing import Any, List, Sequence, Tuple
from uuid import UUID, SafeUUID

from kproto.errors import DecodeError, EncodeError, LengthMismatchError, UnsupportedVersionError

__all__ = [
    "I8",
    "I16",
    "I32",
    "I64",
    "MAX_STRING_BYTES",
    "MAX_UVARINT_BYTES",
    "short_read",
    "short_run",
    "bad_length",
    "bad_count",
    "bad_utf8",
    "bad_utf8_at",
    "bad_sized",
    "utf8",
    "bad_bool",
    "bad_marker",
    "bools",
    "string_too_long",
    "not_nullable",
    "not_in_version",
    "trailing_bytes",
    "encode_failure",
    "read_uvarint",
    "bad_uvarint",
    "put_uvarint",
    "read_tag_section",
    "tag_size_mismatch",
    "put_tag_section",
    "ZERO_UUID",
    "uuid_at",
    "SMALL_ARRAY_MAX",
    "SMALL_ARRAYS",
]

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")

#: An int16 length prefix caps every string at this many UTF-8 bytes.
MAX_STRING_BYTES = 32767

#: Longest unsigned varint accepted (32 bits of value); a longer one is a DecodeError.
MAX_UVARINT_BYTES = 5
_MAX_UVARINT = 0xFFFFFFFF

#: A run of fixed-width fields read with one unpack: (field name, offset within the run, width) each.
RunLayout = Sequence[Tuple[str, int, int]]

#: The pure-Python decoders read an array of fewer than this many fixed-width values (replica lists,
#: partition lists, ...) with ``SMALL_ARRAYS[format][count]``, a precompiled ``struct.Struct``: formatting
#: a format string and looking it up in struct's cache cost more than the unpack itself.
SMALL_ARRAY_MAX = 32
SMALL_ARRAYS = {fmt: [struct.Struct(f">{count}{fmt}") for count in range(SMALL_ARRAY_MAX)] for fmt in "bhHiqd"}


#: The null uuid, shared by every absent or all-zero uuid field (UUID objects are immutable, and
#: constructing one costs several microseconds: a default per decoded struct made decoding 10x slower).
ZERO_UUID = UUID(int=0)
_ZERO_16 = bytes(16)


def uuid_at(buf: Any, pos: int) -> UUID:
    """The uuid in ``buf[pos:pos + 16]`` (the caller checked the bytes are there)."""
    raw = bytes(buf[pos : pos + 16])
    if raw == _ZERO_16:
        return ZERO_UUID
    # UUID(bytes=...) checks its arguments in Python code (1.6 us); its two slots stored directly, as
    # UUID's own constructor ends by doing, cost a third of that.
    value = _new_uuid(UUID)
    _set_slot(value, "int", int.from_bytes(raw, "big"))
    _set_slot(value, "is_safe", _UUID_SAFETY_UNKNOWN)
    return value


_new_uuid = object.__new__
_set_slot = object.__setattr__
_UUID_SAFETY_UNKNOWN = SafeUUID.unknown


def short_read(field: str, pos: int, need: int, end: int) -> DecodeError:
    return DecodeError(f"need {need} bytes at offset {pos}, {max(end - pos, 0)} left", pos, field)


def short_run(layout: RunLayout, pos: int, end: int) -> DecodeError:
    """The first field of a merged fixed-width run that does not fit before ``end``."""
    for name, rel, width in layout:
        if pos + rel + width > end:
            return short_read(name, pos + rel, width, end)
    return short_read(layout[-1][0], pos, 0, end)  # unreachable when called after a failed length check


def bad_length(field: str, pos: int, length: int, nullable: bool) -> DecodeError:
    allowed = "-1 (null) or >= 0" if nullable else ">= 0 (field is not nullable)"
    return DecodeError(f"invalid length {length} at offset {pos}, expected {allowed}", pos, field)


def bad_count(field: str, pos: int, count: int, end: int, min_size: int, width: int = 4) -> DecodeError:
    """An array count that is negative (or null where not allowed) or cannot fit the bytes left."""
    if count < 0:
        return DecodeError(f"invalid array count {count} at offset {pos} (null is not allowed here)", pos, field)
    left = end - pos - width
    return DecodeError(
        f"array count {count} at offset {pos} cannot fit in the {left} bytes left "
        f"(each element takes at least {min_size})",
        pos,
        field,
    )


def utf8(buf: bytes, pos: int, size: int, field: str) -> str:
    """The UTF-8 text of ``buf[pos:pos + size]`` (already bounds-checked by the caller)."""
    try:
        return buf[pos : pos + size].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_utf8(field, pos, exc) from None


def bad_utf8_at(buf: bytes, pos: int, size: int, field: str) -> DecodeError:
    """The error for text the compiled reader found not to be UTF-8 (re-read here to say where)."""
    try:
        buf[pos : pos + size].decode("utf-8")
    except UnicodeDecodeError as exc:
        return bad_utf8(field, pos, exc)
    return DecodeError(f"invalid UTF-8 at offset {pos}", pos, field)  # not reached


def bad_sized(field: str, pos: int, size: int, end: int, width: int, nullable: bool) -> DecodeError:
    """A string/bytes length (read just before ``pos``, ``width`` bytes wide) that is negative or too long."""
    if size < 0:
        return bad_length(field, pos - width, size, nullable)
    return short_read(field, pos, size, end)


def bad_utf8(field: str, pos: int, exc: UnicodeDecodeError) -> DecodeError:
    return DecodeError(f"invalid UTF-8 at offset {pos + exc.start}: {exc.reason}", pos + exc.start, field)


def bad_bool(field: str, pos: int, value: int) -> DecodeError:
    return DecodeError(f"boolean byte {value} at offset {pos} is neither 0 nor 1", pos, field)


def trailing_bytes(what: str, pos: int, end: int) -> LengthMismatchError:
    return LengthMismatchError(f"{end - pos} trailing bytes after {what} at offset {pos}", pos)


def string_too_long(field: str, length: int) -> EncodeError:
    return EncodeError(f"{length} UTF-8 bytes do not fit an int16 length (max {MAX_STRING_BYTES})", field)


def not_nullable(field: str) -> EncodeError:
    return EncodeError("None given but the field is not nullable in this version", field)


def encode_failure(what: str, exc: Exception, path: str = "") -> EncodeError:
    """Turn a low-level packing failure (wrong type, out of range) into an EncodeError naming the field."""
    return EncodeError(f"cannot encode {what}: {exc}", path)


def bad_marker(field: str, pos: int, value: int) -> DecodeError:
    return DecodeError(f"nullable struct marker {value} at offset {pos} is neither -1 (null) nor 1", pos, field)


def bools(field: str, values: List[int], pos: int) -> List[bool]:
    """An array of booleans from its bytes, each 0 or 1."""
    for i, value in enumerate(values):
        if value not in (0, 1):
            raise bad_bool(f"{field}[{i}]", pos + i, value)
    return [value == 1 for value in values]


def not_in_version(field: str, version: int, versions: str) -> UnsupportedVersionError:
    return UnsupportedVersionError(f"set, but version {version} cannot carry it (versions {versions})", field)


def read_uvarint(buf: bytes, pos: int, end: int, field: str) -> Tuple[int, int]:
    """``(value, position after it)`` of the unsigned varint at ``pos``; a DecodeError when it is
    truncated, longer than :data:`MAX_UVARINT_BYTES` or above 2**32 - 1."""
    value = 0
    shift = 0
    start = pos
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > _MAX_UVARINT:
                raise DecodeError(f"unsigned varint at offset {start} overflows 32 bits ({value})", start, field)
            if byte == 0 and pos - start > 1:
                # Padded with a zero group: refused, so that whatever decodes re-encodes to the same bytes.
                raise DecodeError(f"unsigned varint at offset {start} is not minimally encoded", start, field)
            return value, pos
        shift += 7
        if shift >= 7 * MAX_UVARINT_BYTES:
            raise DecodeError(
                f"unsigned varint at offset {start} is longer than {MAX_UVARINT_BYTES} bytes", start, field
            )
    raise DecodeError(
        f"unsigned varint at offset {start} is cut off after {pos - start} bytes ({max(end - start, 0)} left)",
        start,
        field,
    )


def bad_uvarint(field: str, buf: bytes, pos: int, end: int) -> DecodeError:
    """The error for a varint the compiled reader refused (re-read slowly to say why)."""
    try:
        read_uvarint(buf, pos, end, field)
    except DecodeError as exc:
        return exc
    return DecodeError(f"bad unsigned varint at offset {pos}", pos, field)  # not reached


def put_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 .. 2**32 - 1) as an unsigned varint."""
    if not 0 <= value <= _MAX_UVARINT:
        raise OverflowError(f"{value} does not fit an unsigned varint of 32 bits")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_tag_section(
    buf: bytes, pos: int, end: int, known: Tuple[int, ...], refused: Tuple[int, ...] = ()
) -> Tuple[List[Tuple[int, bytes]], List[Tuple[int, int, int]], int]:
    """Read a tag section: ``(unknown fields as (tag, bytes), known fields as (tag, start, end), end)``.

    Tags must be strictly ascending (out of order or repeated is an error) and each field's size must fit
    in the bytes the struct has left.  ``refused`` are the tags the struct gives fields in other versions
    only: such a tag is an error, not an unknown field to keep (Kafka's readers refuse it, since its meaning
    is known and this version does not have it).
    """
    count, pos = read_uvarint(buf, pos, end, "_tagged_fields")
    unknown: List[Tuple[int, bytes]] = []
    spans: List[Tuple[int, int, int]] = []
    last = -1
    for _ in range(count):
        at = pos
        tag, pos = read_uvarint(buf, pos, end, "_tagged_fields")
        if tag <= last:
            order = "repeated" if tag == last else "out of order"
            raise DecodeError(f"tag {tag} at offset {at} is {order} (after tag {last})", at, f"_tagged_fields[{tag}]")
        last = tag
        size, pos = read_uvarint(buf, pos, end, f"_tagged_fields[{tag}]")
        if size > end - pos:
            raise DecodeError(
                f"tagged field {tag} of {size} bytes at offset {pos} is longer than the "
                f"{end - pos} bytes left in its struct",
                pos,
                f"_tagged_fields[{tag}]",
            )
        if tag in known:
            spans.append((tag, pos, pos + size))
        elif tag in refused:
            raise DecodeError(
                f"tag {tag} at offset {at} is a field this version does not have", at, f"_tagged_fields[{tag}]"
            )
        else:
            unknown.append((tag, buf[pos : pos + size]))
        pos += size
    return unknown, spans, pos


def tag_size_mismatch(field: str, tag: int, pos: int, end: int) -> DecodeError:
    """A known tagged field whose value did not use exactly the bytes its size gave."""
    return DecodeError(f"tagged field {tag} ends at offset {pos}, but its size says {end}", pos, field)


def put_tag_section(out: bytearray, known: List[Tuple[int, Any]], unknown: Any, struct: str) -> None:
    """Append a tag section: known fields (already encoded) and kept unknown ones, in ascending tag order."""
    fields = list(known)
    seen = {tag for tag, _ in known}
    for item in unknown:
        try:
            tag, data = item
        except (TypeError, ValueError):
            raise EncodeError(f"{struct}.unknown_tagged_fields: {item!r} is not a (tag, bytes) pair") from None
        if not isinstance(tag, int) or not 0 <= tag <= _MAX_UVARINT or not isinstance(data, (bytes, bytearray)):
            raise EncodeError(f"{struct}.unknown_tagged_fields: {item!r} is not a (tag, bytes) pair")
        if tag in seen:
            raise EncodeError(f"{struct}.unknown_tagged_fields: tag {tag} given twice (or is a known field)")
        seen.add(tag)
        fields.append((tag, data))
    fields.sort(key=lambda pair: pair[0])
    put_uvarint(out, len(fields))
    for tag, data in fields:
        put_uvarint(out, tag)
        put_uvarint(out, len(data))
        out += data


# Last, once every name is defined: where the build compiled a copy of this module, that copy's names take
# the place of these (see kproto._backend.adopt_compiled_copy); KPROTO_PURE=1 keeps these.
from kproto._backend import adopt_compiled_copy  # noqa: E402  (it loads the record core, which may import this module)

adopt_compiled_copy(globals())
