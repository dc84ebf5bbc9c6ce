"""Where each field of each message of a message set sits: labelled byte ranges for the hex dump.

A record set may hold magic 0/1 message set entries and magic 2 record batches (the magic byte sits at
the same place in both); batches are labelled by :mod:`kproto.cli.record_batch_layout`.  The records layer decodes
message sets but (rightly) keeps no byte positions, so this is a small walker
of its own over the magic 0/1 layout (specs/ and docs/protocol-notes.md)::

    offset int64 | message_size int32 | crc uint32 | magic int8 | attributes int8
                 | [timestamp int64, magic 1] | key int32 length + bytes | value int32 length + bytes

It never raises: bytes that do not fit the layout (a truncated last entry, an unknown magic, a bad key
length) are labelled as such and the walk ends there.  A compressed wrapper's value is labelled with a
summary of what it decompresses to; the inner messages live in decompressed bytes, not in the frame, so
they are not byte ranges of it.
"""

from __future__ import annotations

import struct
import zlib
from typing import List

from kproto.errors import KprotoError
from kproto.cli.record_batch_layout import batch_ranges
from kproto.records import decode_message_set
from kproto.records.format import CODEC_MASK, CODEC_NAMES, LOG_OVERHEAD, MIN_MESSAGE_SIZE
from kproto.reference import FieldRange

__all__ = ["message_set_ranges"]

_ENTRY = struct.Struct(">qi")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def message_set_ranges(raw: bytes, base: int, path: str) -> List[FieldRange]:
    """Labelled ranges covering every byte of the message set ``raw``, which starts at ``base``."""
    out: List[FieldRange] = []
    pos, n, index = 0, len(raw), 0
    while pos < n:
        entry = f"{path}[{index}]"
        if n - pos < LOG_OVERHEAD:
            out.append(FieldRange(f"{path}.partial_tail", "raw", base + pos, base + n, "incomplete entry header"))
            break
        offset, size = _ENTRY.unpack_from(raw, pos)
        if n - pos > 16 and raw[pos + 16] == 2 and size >= 0 and pos + LOG_OVERHEAD + size <= n:
            if not batch_ranges(raw, pos, pos + LOG_OVERHEAD + size, base, entry, out):
                break
            pos, index = pos + LOG_OVERHEAD + size, index + 1
            continue
        out.append(FieldRange(f"{entry}.offset", "value", base + pos, base + pos + 8, offset))
        out.append(FieldRange(f"{entry}.message_size", "value", base + pos + 8, base + pos + 12, size))
        start, end = pos + LOG_OVERHEAD, pos + LOG_OVERHEAD + size
        if size < MIN_MESSAGE_SIZE or end > n:
            why = "message truncated (partial message at the end of a fetch)" if end > n else "message size too small"
            if start < n:
                out.append(FieldRange(f"{entry}.truncated", "raw", base + start, base + n, why))
            break
        if not _message_ranges(raw, start, end, base, entry, out):
            break
        pos, index = end, index + 1
    return out


def _message_ranges(raw: bytes, start: int, end: int, base: int, entry: str, out: List[FieldRange]) -> bool:
    """Label one message (crc .. value); False when it does not fit the layout (the rest is labelled raw)."""
    crc = _U32.unpack_from(raw, start)[0]
    computed = zlib.crc32(raw[start + 4 : end])
    crc_note = f"0x{crc:08x} (ok)" if crc == computed else f"0x{crc:08x} (mismatch: computed 0x{computed:08x})"
    out.append(FieldRange(f"{entry}.crc", "value", base + start, base + start + 4, crc_note))
    magic, attributes = raw[start + 4], raw[start + 5]
    out.append(FieldRange(f"{entry}.magic", "value", base + start + 4, base + start + 5, magic))
    codec = attributes & CODEC_MASK
    codec_name = CODEC_NAMES.get(codec, "none" if codec == 0 else f"unknown codec {codec}")
    out.append(
        FieldRange(
            f"{entry}.attributes",
            "value",
            base + start + 5,
            base + start + 6,
            f"0x{attributes:02x} (codec {codec_name})",
        )
    )
    p = start + 6
    if magic == 1:
        if end - p < 16:
            out.append(FieldRange(f"{entry}.undecodable", "raw", base + p, base + end, "magic 1 message too short"))
            return False
        out.append(FieldRange(f"{entry}.timestamp", "value", base + p, base + p + 8, _I64.unpack_from(raw, p)[0]))
        p += 8
    elif magic != 0:
        out.append(FieldRange(f"{entry}.undecodable", "raw", base + p, base + end, f"unknown magic {magic}"))
        return False
    p = _length_prefixed(raw, p, end, base, f"{entry}.key", out)
    if p < 0:
        return False
    p = _length_prefixed(raw, p, end, base, f"{entry}.value", out)
    if p < 0:
        return False
    if p != end:
        out.append(FieldRange(f"{entry}.trailing", "raw", base + p, base + end, "bytes after the value"))
    if codec:
        _note_wrapper(raw, start - LOG_OVERHEAD, end, entry, codec_name, out)
    return True


def _length_prefixed(raw: bytes, p: int, end: int, base: int, path: str, out: List[FieldRange]) -> int:
    """Label an int32-length-prefixed byte string; returns the position after it, -1 if it does not fit."""
    if end - p < 4:
        out.append(FieldRange(f"{path}.undecodable", "raw", base + p, base + end, "length truncated"))
        return -1
    length = _I32.unpack_from(raw, p)[0]
    if length == -1:
        out.append(FieldRange(path, "length", base + p, base + p + 4, None))
        return p + 4
    if length < -1 or length > end - p - 4:
        out.append(
            FieldRange(
                f"{path}.undecodable",
                "raw",
                base + p,
                base + end,
                f"length {length} does not fit the {end - p - 4} bytes left",
            )
        )
        return -1
    out.append(FieldRange(path, "length", base + p, base + p + 4, length))
    if length:
        out.append(FieldRange(path, "value", base + p + 4, base + p + 4 + length, raw[p + 4 : p + 4 + length]))
    return p + 4 + length


def _note_wrapper(raw: bytes, entry_start: int, end: int, entry: str, codec_name: str, out: List[FieldRange]) -> None:
    """Replace the compressed value's label by a summary of the inner messages."""
    try:
        inner = decode_message_set(raw[entry_start:end])
        count = len(inner)
        summary = f"{codec_name}-compressed: {count} inner message{'s' if count != 1 else ''}" + (
            f", offsets {inner[0].offset}..{inner[count - 1].offset}" if count else ""
        )
    except KprotoError as exc:
        summary = f"{codec_name}-compressed, does not decompress: {exc}"
    for i in range(len(out) - 1, -1, -1):
        r = out[i]
        if r.path == f"{entry}.value" and r.part == "value":
            out[i] = FieldRange(r.path, r.part, r.start, r.end, summary)
            return
