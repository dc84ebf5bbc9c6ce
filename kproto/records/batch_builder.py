"""Magic 2 record batches from columns: the pure-Python twin of ``kproto._fast._batch_builder``.

Why columns: a producer accumulates a partition's records as they come, and every record it holds as a
tuple is an object made, kept and taken apart again by the encoder.  Four lists -- keys, values,
timestamps, headers -- hold the same records with nothing made per record, and the compiled twin walks
them in C loops: one pass measures every record, a second writes the batch into one buffer, and the
CRC-32C runs over it in place.  This module mirrors it function for function and writes the same bytes,
which are the bytes :func:`kproto.records.encode_record_batch` writes for the same records.

``keys`` and ``headers`` may be ``None`` (no record has one); a key or value is ``bytes`` or ``None``; a
timestamp an int64; the headers of a record ``None`` or a sequence of ``(str, bytes | None)`` pairs.
Anything else raises :class:`~kproto.errors.EncodeError` naming the record's index.
"""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Sequence, Tuple

from kproto.errors import EncodeError
from kproto.records.checksums import crc32c
from kproto.records.compression import compress_buffer

__all__ = ["check_columns", "encode_columns", "section"]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I32_MAX = 2**31 - 1
_BATCH_PREFIX = struct.Struct(">qiib")  # base_offset, batch_length, partition_leader_epoch, magic
_BATCH_HEAD_AFTER_CRC = struct.Struct(">Hiqqqhii")  # attributes .. records_count
_CRC_AT = 17  # the CRC-32C's offset in the batch; it covers what follows it
_HEAD = 61  # the batch header's size
_U32 = struct.Struct(">I")


def _zigzag(value: int) -> bytes:
    """A zigzag varint (int64)."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def check_columns(keys: Optional[Sequence[Any]], values: Sequence[Any], timestamps: Sequence[Any], headers: Any) -> int:
    """The record count, once the columns are lists of one length."""
    count = len(values)
    for name, column in (("keys", keys), ("timestamps", timestamps), ("headers", headers)):
        if column is not None and len(column) != count:
            raise EncodeError(f"{len(column)} {name} for {count} values: the columns must have one length")
    return count


def _binary(field: Any, name: str, index: int) -> bytes:
    if field is None:
        return b"\x01"
    if type(field) is not bytes:
        raise EncodeError(f"record {index}: the {name} is {type(field).__name__}, not bytes or None")
    return _zigzag(len(field)) + field


def _timestamp(timestamp: Any, index: int) -> int:
    if type(timestamp) is not int or not _I64_MIN <= timestamp <= _I64_MAX:
        raise EncodeError(f"record {index}: timestamp {timestamp!r} is not an int64")
    return timestamp


def _header_section(pairs: Any, index: int) -> bytes:
    if not pairs:
        return b"\x00"
    out = [b""]
    count = 0
    try:
        for hkey, hvalue in pairs:
            if type(hkey) is str:
                name = hkey.encode("utf-8")
            elif type(hkey) is bytes:
                name = hkey
                name.decode("utf-8")
            else:
                raise EncodeError(f"record {index}: a header key is {type(hkey).__name__}, not str")
            out.append(_zigzag(len(name)) + name)
            out.append(_binary(hvalue, "header value", index))
            count += 1
    except (TypeError, ValueError) as exc:  # not pairs, or a key that is not UTF-8
        if isinstance(exc, EncodeError):
            raise
        raise EncodeError(f"record {index}: headers must be (str, bytes | None) pairs ({exc})") from None
    out[0] = _zigzag(count)
    return b"".join(out)


def section(
    keys: Optional[Sequence[Any]], values: Sequence[Any], timestamps: Sequence[Any], headers: Any
) -> Tuple[bytes, int, int, int]:
    """The records section of a batch: (its bytes, the record count, the base and the max timestamp).

    Offset deltas are 0, 1, ...; timestamp deltas are taken from the first record's, as Kafka's producers
    write them."""
    count = check_columns(keys, values, timestamps, headers)
    if not count:
        return b"", 0, -1, -1
    base_ts = max_ts = _timestamp(timestamps[0], 0)
    out: List[bytes] = []
    for index in range(count):
        timestamp = _timestamp(timestamps[index], index)
        if timestamp > max_ts:
            max_ts = timestamp
        delta = timestamp - base_ts
        if not _I64_MIN <= delta <= _I64_MAX:
            raise EncodeError(
                f"record {index}: timestamp {timestamp} is too far from the first record's {base_ts} for an int64 delta"
            )
        body = b"".join(
            (
                b"\x00",
                _zigzag(delta),
                _zigzag(index),
                _binary(keys[index] if keys is not None else None, "key", index),
                _binary(values[index], "value", index),
                _header_section(headers[index] if headers is not None else None, index),
            )
        )
        if len(body) > _I32_MAX:
            raise EncodeError(f"record {index}: larger than 2 GiB")
        out.append(_zigzag(len(body)))
        out.append(body)
    return b"".join(out), count, base_ts, max_ts


def encode_columns(
    keys: Optional[Sequence[Any]],
    values: Sequence[Any],
    timestamps: Sequence[Any],
    headers: Any,
    base_offset: int,
    codec: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    attributes: int,
    partition_leader_epoch: int,
) -> bytes:
    """One magic 2 batch of the records in the columns (``b""`` for none); ``codec`` is the codec's id
    (:func:`kproto.records.format.codec_id`), applied to the records section; ``attributes`` are the
    batch's other attribute bits."""
    records, count, base_ts, max_ts = section(keys, values, timestamps, headers)
    if not count:
        return b""
    if count - 1 > _I64_MAX - base_offset:
        raise EncodeError(f"offsets from {base_offset} for {count} records do not fit int64")
    payload: Any = compress_buffer(codec, records, magic=2) if codec else records
    return _assemble(
        payload, count, base_ts, max_ts, base_offset, codec, producer_id, producer_epoch, base_sequence, attributes,
        partition_leader_epoch,
    )  # fmt: skip


def _assemble(
    payload: Any,
    count: int,
    base_ts: int,
    max_ts: int,
    base_offset: int,
    codec: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    attributes: int,
    partition_leader_epoch: int,
) -> bytes:
    """The batch: its header, the CRC-32C over what follows the CRC, and ``payload``."""
    length = _HEAD - 12 + len(payload)
    if length > _I32_MAX:
        raise EncodeError("batch larger than 2 GiB")
    head = _BATCH_HEAD_AFTER_CRC.pack(
        attributes | codec, count - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count
    )
    covered = head + bytes(payload)
    prefix = _BATCH_PREFIX.pack(base_offset, length, partition_leader_epoch, 2)
    return prefix + _U32.pack(crc32c(covered)) + covered
