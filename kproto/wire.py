"""Primitive wire pieces shared by the generated codecs: packers and the errors they raise.

The generated modules inline their reads (a length check, one ``unpack_from`` per run of fixed-width
fields, a slice) and call into this module only to build an error, so the cost of a helpful message —
field path, offset, bytes needed and left — is paid only when the input is bad.
"""

from __future__ import annotations

import struct
from typing import Sequence, Tuple

from kproto.errors import DecodeError, EncodeError, LengthMismatchError

__all__ = [
    "I8", "I16", "I32", "I64", "MAX_STRING_BYTES", "short_read", "short_run", "bad_length", "bad_count",
    "bad_utf8", "bad_bool", "string_too_long", "not_nullable", "trailing_bytes", "encode_failure",
]

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")

#: An int16 length prefix caps every string at this many UTF-8 bytes.
MAX_STRING_BYTES = 32767

#: A run of fixed-width fields read with one unpack: (field name, offset within the run, width) each.
RunLayout = Sequence[Tuple[str, int, int]]


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


def bad_count(field: str, pos: int, count: int, end: int, min_size: int) -> DecodeError:
    if count < 0:
        return DecodeError(f"invalid array count {count} at offset {pos}", pos, field)
    left = end - pos - 4
    return DecodeError(
        f"array count {count} at offset {pos} cannot fit in the {left} bytes left "
        f"(each element takes at least {min_size})", pos, field)


def bad_utf8(field: str, pos: int, exc: UnicodeDecodeError) -> DecodeError:
    return DecodeError(f"invalid UTF-8 at offset {pos + exc.start}: {exc.reason}", pos + exc.start, field)


def bad_bool(field: str, pos: int, value: int) -> DecodeError:
    return DecodeError(f"boolean byte {value} at offset {pos} is neither 0 nor 1", pos, field)


def trailing_bytes(what: str, pos: int, end: int) -> LengthMismatchError:
    return LengthMismatchError(f"{end - pos} trailing bytes after {what} at offset {pos}", pos)


def string_too_long(field: str, length: int) -> EncodeError:
    return EncodeError(f"{field}: {length} UTF-8 bytes do not fit an int16 length (max {MAX_STRING_BYTES})")


def not_nullable(field: str) -> EncodeError:
    return EncodeError(f"{field}: None given but the field is not nullable in this version")


def encode_failure(what: str, exc: Exception) -> EncodeError:
    """Turn a low-level packing failure (wrong type, out of range) into an EncodeError."""
    return EncodeError(f"cannot encode {what}: {exc}")
