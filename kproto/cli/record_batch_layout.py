"""Where each field of a magic 2 record batch (Kafka 0.11+) sits: labelled byte ranges for the hex dump.

The records layer decodes batches but keeps no byte positions, so this walks the layout itself
(``docs/records.md``)::

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 | crc uint32
    | attributes int16 | last_offset_delta int32 | base_timestamp int64 | max_timestamp int64
    | producer_id int64 | producer_epoch int16 | base_sequence int32 | records_count int32 | records

and, when the batch is not compressed, each record::

    length varint | attributes int8 | timestamp_delta varlong | offset_delta varint
    | key_length varint + key | value_length varint + value | headers_count varint
    | per header: key_length varint + key (UTF-8) | value_length varint + value

Varints are zigzag-encoded signed numbers (a length of -1 is null).  Like the magic 0/1 walker it never
raises: bytes that do not fit are one raw range with the reason, and the walk of that batch ends there.
A compressed batch's records are labelled as one range with a summary of what they decompress to (the
records live in decompressed bytes, not in the frame).  The CRC-32C and the whole batch are checked by
the records layer (:func:`kproto.records.decode_records`), whose verdict the ``crc`` label carries.
"""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple

from kproto.errors import KprotoError
from kproto.records import decode_records
from kproto.records.format import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    CODEC_MASK,
    CODEC_NAMES,
    LOG_OVERHEAD,
)
from kproto.reference import FieldRange

__all__ = ["batch_ranges", "attributes_text"]

#: (name, struct format) of the fixed header after base_offset and batch_length.
_HEADER = (
    ("partition_leader_epoch", ">i"),
    ("magic", ">b"),
    ("crc", ">I"),
    ("attributes", ">h"),
    ("last_offset_delta", ">i"),
    ("base_timestamp", ">q"),
    ("max_timestamp", ">q"),
    ("producer_id", ">q"),
    ("producer_epoch", ">h"),
    ("base_sequence", ">i"),
    ("records_count", ">i"),
)
_ENTRY = struct.Struct(">qi")


class _Short(Exception):
    """A record field runs past the bytes of its batch."""


def attributes_text(attributes: int) -> str:
    """``0x0011 (codec gzip, transactional)``: the batch attribute bits in words."""
    codec = attributes & CODEC_MASK
    words = [f"codec {CODEC_NAMES.get(codec, 'none' if codec == 0 else f'unknown {codec}')}"]
    if attributes & ATTR_TIMESTAMP_TYPE:
        words.append("LogAppendTime")
    if attributes & ATTR_TRANSACTIONAL:
        words.append("transactional")
    if attributes & ATTR_CONTROL:
        words.append("control")
    if attributes & ATTR_DELETE_HORIZON:
        words.append("delete horizon")
    return f"0x{attributes & 0xFFFF:04x} ({', '.join(words)})"


def batch_ranges(raw: bytes, pos: int, end: int, base: int, entry: str, out: List[FieldRange]) -> bool:
    """Label the batch ``raw[pos:end]`` (``end`` from its batch_length, within ``raw``); False when it does
    not fit the layout (its remaining bytes are then one raw range)."""
    offset, length = _ENTRY.unpack_from(raw, pos)
    out.append(FieldRange(f"{entry}.base_offset", "value", base + pos, base + pos + 8, offset))
    out.append(FieldRange(f"{entry}.batch_length", "value", base + pos + 8, base + pos + 12, length))
    if end - pos < BATCH_HEADER_SIZE:
        out.append(
            FieldRange(
                f"{entry}.undecodable",
                "raw",
                base + pos + 12,
                base + end,
                f"batch of {end - pos} bytes is shorter than its {BATCH_HEADER_SIZE}-byte header",
            )
        )
        return False
    verdict = _verdict(raw[pos:end])
    p = pos + LOG_OVERHEAD
    values = {}
    for name, fmt in _HEADER:
        size = struct.calcsize(fmt)
        value: Any = struct.unpack_from(fmt, raw, p)[0]
        values[name] = value
        if name == "crc":
            value = f"0x{value:08x} ({verdict[0]})"
        elif name == "attributes":
            value = attributes_text(value)
        out.append(FieldRange(f"{entry}.{name}", "value", base + p, base + p + size, value))
        p += size
    codec = values["attributes"] & CODEC_MASK
    if codec:
        if p < end:
            out.append(
                FieldRange(
                    f"{entry}.records",
                    "value",
                    base + p,
                    base + end,
                    f"{CODEC_NAMES.get(codec, f'codec {codec}')}-compressed: {verdict[1]}",
                )
            )
        return True
    for index in range(values["records_count"]):
        if p >= end:
            break
        mark = len(out)
        try:
            p = _record_ranges(raw, p, end, base, f"{entry}.records[{index}]", out)
        except _Short as exc:
            del out[mark:]  # the record is one raw range, not a half-labelled one
            out.append(FieldRange(f"{entry}.records[{index}].undecodable", "raw", base + p, base + end, str(exc)))
            return False
    if p != end:
        out.append(FieldRange(f"{entry}.trailing", "raw", base + p, base + end, "bytes after the last record"))
    return True


def _verdict(batch: bytes) -> Tuple[str, str]:
    """(crc note, records summary) from the records layer's decode of one batch."""
    try:
        decoded = decode_records(batch)
    except KprotoError as exc:
        return f"does not decode: {exc}", f"does not decode: {exc}"
    records = list(decoded)
    count = len(records)
    summary = f"{count} record{'s' if count != 1 else ''}"
    if count:
        summary += f", offsets {records[0].offset}..{records[-1].offset}"
        headers = sum(len(r.headers) for r in records)
        if headers:
            summary += f", {headers} header{'s' if headers != 1 else ''}"
    return "ok", summary


def _varint(raw: bytes, p: int, end: int) -> Tuple[int, int]:
    """A zigzag varint at ``p``: (value, next position)."""
    value = shift = 0
    while True:
        if p >= end or shift > 63:
            raise _Short("varint runs past the batch" if p >= end else "varint longer than 10 bytes")
        byte = raw[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), p
        shift += 7


def _labelled_varint(
    raw: bytes, p: int, end: int, base: int, path: str, part: str, out: List[FieldRange]
) -> Tuple[int, int]:
    value, q = _varint(raw, p, end)
    out.append(FieldRange(path, part, base + p, base + q, None if part == "length" and value == -1 else value))
    return value, q


def _bytes(raw: bytes, p: int, end: int, base: int, path: str, out: List[FieldRange], text: bool = False) -> int:
    length, p = _labelled_varint(raw, p, end, base, path, "length", out)
    if length < -1 or p + max(length, 0) > end:
        raise _Short(f"length {length} does not fit the {end - p} bytes left")
    if length > 0:
        data = raw[p : p + length]
        value: Optional[Any] = data
        if text:
            try:
                value = data.decode("utf-8")
            except UnicodeDecodeError:
                value = data
        out.append(FieldRange(path, "value", base + p, base + p + length, value))
    return p + max(length, 0)


def _record_ranges(raw: bytes, p: int, end: int, base: int, path: str, out: List[FieldRange]) -> int:
    length, q = _labelled_varint(raw, p, end, base, f"{path}.length", "value", out)
    record_end = q + length
    if length < 6 or record_end > end:
        raise _Short(f"record length {length} does not fit the {end - q} bytes left")
    out.append(FieldRange(f"{path}.attributes", "value", base + q, base + q + 1, raw[q]))
    q += 1
    _, q = _labelled_varint(raw, q, record_end, base, f"{path}.timestamp_delta", "value", out)
    _, q = _labelled_varint(raw, q, record_end, base, f"{path}.offset_delta", "value", out)
    q = _bytes(raw, q, record_end, base, f"{path}.key", out)
    q = _bytes(raw, q, record_end, base, f"{path}.value", out)
    count, q = _labelled_varint(raw, q, record_end, base, f"{path}.headers", "count", out)
    for index in range(max(count, 0)):
        q = _bytes(raw, q, record_end, base, f"{path}.headers[{index}].key", out, text=True)
        q = _bytes(raw, q, record_end, base, f"{path}.headers[{index}].value", out)
    if q != record_end:
        raise _Short(f"{record_end - q} bytes after the record's headers")
    return q
