"""The records codec: decode any mix of magic 0/1/2 records, encode magic 0/1 message sets and magic 2
record batches, with every compression codec.  :mod:`kproto.records` offers its names.

The work is done by the backend :mod:`kproto._backend` selected (Cython or pure Python); this module checks
options once and dispatches.
"""

from __future__ import annotations

import struct
from types import ModuleType
import time
from typing import Any, Iterable, List, Literal, Optional, Sequence, overload

from kproto._backend import batch_builder_impl, records_impl
from kproto.errors import EncodeError
from kproto.records.compression import SNAPPY_FRAMINGS, compress_buffer
from kproto.records.decoded import DecodedRecords, MessageColumns, MessageSet, RecordColumns
from kproto.records.format import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CODEC_ZSTD,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    TIMESTAMP_TYPE_MASK,
    codec_id,
)

__all__ = [
    "ColumnBatchCodec",
    "LegacyRecord",
    "MessageSetCodec",
    "Record",
    "decode_columns",
    "decode_message_set",
    "decode_records",
    "encode_control_batch",
    "encode_message_set",
    "encode_record_batch",
    "encode_record_batch_columns",
    "record_rows",
]

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1


_impl = records_impl


def _check_int(value: Any, name: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise EncodeError(f"{name} must be an int in [{low}, {high}], not {value!r}")
    return value


def _check_limit(max_decompressed_size: int) -> int:
    if not isinstance(max_decompressed_size, int) or not 0 <= max_decompressed_size <= 2**62:
        raise ValueError(f"max_decompressed_size must be a non-negative int, not {max_decompressed_size!r}")
    return max_decompressed_size


class MessageSetCodec:
    """The message set API bound to one implementation module (:func:`kproto._backend.records_module`: the
    compiled or the pure record core).  The module-level functions use the backend :mod:`kproto._backend` chose; tests
    and benchmarks build one of these per backend to run both in one process.
    """

    def __init__(self, impl: ModuleType) -> None:
        self.impl = impl
        self.LegacyRecord = impl.LegacyRecord
        self.Record = impl.Record

    def decode_records(
        self,
        data: Any,
        *,
        check_crc: bool = True,
        check_inner_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> DecodedRecords:
        """Decode any concatenation of magic 0/1 message set entries and magic 2 record batches.

        Iterating the result gives every record (``Record``: ``offset``, ``timestamp``, ``key``, ``value``,
        ``headers``, ``magic``, ``codec``, ``timestamp_type``, ``producer_id``, ``producer_epoch``,
        ``sequence``, ``is_transactional``, ``is_control``); ``.batches`` gives each entry's header
        (:class:`~kproto.records.decoded.Batch`).  An incomplete last entry is dropped without error
        (``partial``/``valid_bytes``).  Bad input raises :class:`~kproto.errors.DecodeError` with the absolute
        offset; CRC32 (magic 0/1) and CRC-32C (magic 2) are checked unless ``check_crc=False``
        (``check_inner_crc``: see :meth:`decode_message_set`); the bytes all compressed entries of the call
        decompress to are capped by ``max_decompressed_size`` (:class:`~kproto.errors.LimitExceededError`).
        """
        decoded: DecodedRecords = self.impl.decode_records(
            data, bool(check_crc), _check_limit(max_decompressed_size), bool(check_inner_crc)
        )
        return decoded

    def encode_record_batch(
        self,
        records: Iterable[Any],
        *,
        base_offset: int = 0,
        codec: Optional[str] = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        timestamp_type: int = 0,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """Encode one magic 2 record batch.

        ``records`` are ``(key, value)``, ``(key, value, timestamp)`` or ``(key, value, timestamp, headers)``
        tuples, or objects with those attributes; headers are ``(str, bytes | None)`` pairs.  A record without
        a timestamp gets the current time in ms.  Offset deltas are 0, 1, ...; the base timestamp is the
        first record's and the max timestamp the largest, as Kafka's producers write them.  ``codec`` is
        ``None``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"`` (always applied).  ``timestamp_type=1``
        marks LogAppendTime.  An empty input gives ``b""``.
        """
        if timestamp_type not in (0, 1):
            raise EncodeError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not {timestamp_type!r}")
        attributes = (ATTR_TIMESTAMP_TYPE if timestamp_type else 0) | (ATTR_TRANSACTIONAL if transactional else 0)
        return self._encode_batch(
            records, base_offset, codec, producer_id, producer_epoch, base_sequence, attributes, partition_leader_epoch
        )

    def encode_control_batch(
        self,
        commit: bool,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int = 0,
        base_offset: int = 0,
        timestamp: Optional[int] = None,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """Encode a transaction marker: a transactional control batch holding one commit or abort record."""
        key = struct.pack(">hh", 0, 1 if commit else 0)
        value = struct.pack(">hi", 0, _check_int(coordinator_epoch, "coordinator_epoch", _I32_MIN, _I32_MAX))
        return self._encode_batch(
            [(key, value, timestamp)],
            base_offset,
            None,
            producer_id,
            producer_epoch,
            -1,
            ATTR_TRANSACTIONAL | ATTR_CONTROL,
            partition_leader_epoch,
        )

    def _encode_batch(
        self,
        records: Iterable[Any],
        base_offset: int,
        codec: Optional[str],
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        attributes: int,
        partition_leader_epoch: int,
    ) -> bytes:
        batch: bytes = self.impl.encode_batch(
            records,
            _check_int(base_offset, "base_offset", _I64_MIN, _I64_MAX),
            codec_id(codec),
            _check_int(producer_id, "producer_id", _I64_MIN, _I64_MAX),
            _check_int(producer_epoch, "producer_epoch", _I16_MIN, _I16_MAX),
            _check_int(base_sequence, "base_sequence", _I32_MIN, _I32_MAX),
            attributes,
            _check_int(partition_leader_epoch, "partition_leader_epoch", _I32_MIN, _I32_MAX),
            time.time_ns() // 1_000_000,
        )
        return batch

    def decode_message_set(
        self,
        data: Any,
        *,
        check_crc: bool = True,
        check_inner_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> MessageSet:
        """Decode a magic 0/1 message set (the bytes of a ``records`` field, without its int32 size).

        Compressed wrappers are expanded into their inner messages with absolute offsets.  A set that ends
        in an incomplete message (a fetch response cut at ``max_bytes``) is not an error: the result's
        ``partial`` is True and ``valid_bytes`` says where the complete messages end.  Anything else that
        does not parse raises :class:`~kproto.errors.DecodeError` naming the absolute byte offset; wrappers
        that together decompress to more than ``max_decompressed_size`` bytes (default
        :data:`~kproto.records.format.DEFAULT_MAX_DECOMPRESSED_SIZE`, 64 MiB) or nested compression raises
        :class:`~kproto.errors.LimitExceededError`.  ``check_crc=False`` skips CRC32 validation.

        ``check_inner_crc=False`` (with ``check_crc=True``) checks every top-level message's CRC, compressed
        wrappers included, but not the CRCs of the messages inside a wrapper.  The wrapper's CRC covers the
        compressed bytes they are decompressed from, so an intact wrapper means intact inner bytes; an inner
        CRC can then only catch a producer that computed it wrongly.  That is the work aiokafka's consumer
        does (``validate_crc()`` of the wrapper; kafka-python's checks the inner messages too, as the
        default here does).  Everything else (lengths, magics,
        offsets, the decompression cap) is still validated.  No effect on uncompressed messages or on magic 2
        batches, whose one CRC-32C covers every record.
        """
        messages: MessageSet = self.impl.decode(
            data, bool(check_crc), _check_limit(max_decompressed_size), bool(check_inner_crc)
        )
        return messages

    @overload
    def decode_columns(
        self, data: Any, *, check_crc: bool = ..., max_decompressed_size: int = ..., arrow: Literal[False] = ...
    ) -> RecordColumns: ...

    @overload
    def decode_columns(
        self, data: Any, *, check_crc: bool = ..., max_decompressed_size: int = ..., arrow: Literal[True]
    ) -> Any: ...

    def decode_columns(
        self,
        data: Any,
        *,
        check_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        arrow: bool = False,
    ) -> Any:
        """Decode records of any magic straight into columns: a
        :class:`~kproto.records.decoded.RecordColumns`, or with ``arrow=True`` a ``pyarrow.RecordBatch``
        (offset, timestamp, magic, attributes, codec, crc_ok, key, value, timestamp_type, producer_id,
        producer_epoch, sequence, is_transactional, is_control, batch_offset, leader_epoch, headers).

        Same rules as :meth:`decode_records`, except that ``check_crc=False`` still computes each CRC and
        records the outcome in ``crc_ok`` instead of raising (with ``check_crc=True`` a mismatch raises, so
        ``crc_ok`` is all true).  The Cython backend builds no per-record Python objects.
        """
        columns: RecordColumns = self.impl.decode_record_columns(
            data, bool(check_crc), _check_limit(max_decompressed_size)
        )
        return columns.to_arrow() if arrow else columns

    def record_rows(
        self, records: Iterable[Any], row_type: type, topic: Any, partition: Any, *, start: int = _I64_MIN
    ) -> List[Any]:
        """The records at or past offset ``start``, in order, as ``row_type`` rows ``(topic, partition,
        offset, timestamp, key, value, headers)``: the row a consumer hands out (``kproto.client``'s
        ``ConsumerRecord``).  ``records`` are ``Record`` objects (or anything with their attributes);
        ``row_type`` is a tuple subclass of seven fields (a named tuple), built as ``tuple.__new__`` builds
        it.  The compiled backend reads each ``Record`` from its C struct and fills the row in place, so no
        Python code runs per record."""
        if not (isinstance(row_type, type) and issubclass(row_type, tuple)):
            raise TypeError(f"row_type must be a tuple subclass, not {row_type!r}")
        rows: List[Any] = self.impl.record_rows(
            records, row_type, topic, partition, _check_int(start, "start", _I64_MIN, _I64_MAX)
        )
        return rows

    def decode_message_columns(
        self, data: Any, *, check_crc: bool = True, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> MessageColumns:
        """:meth:`decode_columns` restricted to magic 0/1 message sets, without the magic 2 columns."""
        columns: MessageColumns = self.impl.decode_columns(data, bool(check_crc), _check_limit(max_decompressed_size))
        return columns

    def encode_message_set(
        self,
        messages: Iterable[Any],
        *,
        magic: int = 0,
        codec: Optional[str] = None,
        base_offset: int = 0,
        snappy_framing: str = "xerial",
        timestamp_type: int = 0,
    ) -> bytes:
        """Encode messages into a magic 0 or 1 message set.

        ``messages`` are ``(key, value)`` or ``(key, value, timestamp)`` tuples or objects with ``key``,
        ``value`` (and optionally ``timestamp``) attributes; keys/values are bytes-like or ``None``.  Magic 0
        has no timestamp field (timestamps are ignored); magic 1 writes ``-1`` for a missing one.  Offsets
        are ``base_offset``, ``base_offset + 1``, ...

        With ``codec`` (``"gzip"``, ``"snappy"``, ``"lz4"``) the messages go into one compressed wrapper
        whose offset is that of the last message; inner offsets are absolute for magic 0 and relative
        (0..n-1) for magic 1, as Kafka writes them; a magic 1 wrapper carries the largest inner timestamp.
        Snappy uses xerial framing (``snappy_framing="raw"`` for plain snappy); lz4 uses Kafka's frame, with
        the broken header checksum for magic 0.  ``timestamp_type=1`` (LogAppendTime) sets attribute bit 3,
        magic 1 only.  An empty input gives ``b""``.
        """
        if magic not in (0, 1):
            raise EncodeError(f"magic must be 0 or 1, not {magic!r} (encode_record_batch writes magic 2)")
        cid = codec_id(codec)
        if cid == CODEC_ZSTD:
            raise EncodeError("zstd exists only in magic 2 record batches (encode_record_batch)")
        if snappy_framing not in SNAPPY_FRAMINGS:
            raise EncodeError(f"snappy_framing must be 'xerial' or 'raw', not {snappy_framing!r}")
        if not isinstance(base_offset, int) or not _I64_MIN <= base_offset <= _I64_MAX:
            raise EncodeError(f"base_offset must be an int64, not {base_offset!r}")
        if timestamp_type not in (0, 1) or (timestamp_type and magic == 0):
            raise EncodeError("timestamp_type must be 0, or 1 (LogAppendTime) with magic 1")
        ts_bit = TIMESTAMP_TYPE_MASK if timestamp_type else 0
        if not cid:
            plain: bytes = self.impl.encode_plain(messages, magic, base_offset, ts_bit)[0]
            return plain
        inner, count, max_timestamp = self.impl.encode_plain(messages, magic, base_offset if magic == 0 else 0, 0)
        if not count:
            return b""
        if base_offset + count - 1 > _I64_MAX:
            raise EncodeError(f"offsets from {base_offset} for {count} messages do not fit int64")
        payload = compress_buffer(cid, inner, magic=magic, snappy_framing=snappy_framing)
        wrapper = ((None, payload, max_timestamp),)
        wrapped: bytes = self.impl.encode_plain(wrapper, magic, base_offset + count - 1, cid | ts_bit)[0]
        return wrapped


class ColumnBatchCodec:
    """Magic 2 batches encoded from columns, bound to one implementation module
    (``kproto._fast._batch_builder`` or ``kproto.records.batch_builder``, see the latter for why columns)."""

    def __init__(self, impl: ModuleType) -> None:
        self.impl = impl

    def encode_record_batch_columns(
        self,
        values: Sequence[Optional[bytes]],
        *,
        keys: Optional[Sequence[Optional[bytes]]] = None,
        timestamps: Optional[Sequence[int]] = None,
        headers: Optional[Sequence[Any]] = None,
        base_offset: int = 0,
        codec: Optional[str] = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        timestamp_type: int = 0,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """:func:`encode_record_batch` of records given as columns of one length, and the same bytes.

        ``values`` and ``keys`` hold ``bytes`` or ``None`` (``keys=None``: no record has a key);
        ``timestamps`` ints (``None``: the current time in ms for every record); ``headers`` per record
        ``None`` or ``(str, bytes | None)`` pairs (``None``: no record has headers).  Lists are taken as
        they are, other sequences copied into lists.  A column of another length or a field of another type
        raises :class:`~kproto.errors.EncodeError` naming the record's index; nothing is encoded then."""
        if timestamp_type not in (0, 1):
            raise EncodeError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not {timestamp_type!r}")
        attributes = (ATTR_TIMESTAMP_TYPE if timestamp_type else 0) | (ATTR_TRANSACTIONAL if transactional else 0)
        if timestamps is None:
            timestamps = [time.time_ns() // 1_000_000] * len(values)
        batch: bytes = self.impl.encode_columns(
            keys,
            values,
            timestamps,
            headers,
            _check_int(base_offset, "base_offset", _I64_MIN, _I64_MAX),
            codec_id(codec),
            _check_int(producer_id, "producer_id", _I64_MIN, _I64_MAX),
            _check_int(producer_epoch, "producer_epoch", _I16_MIN, _I16_MAX),
            _check_int(base_sequence, "base_sequence", _I32_MIN, _I32_MAX),
            attributes,
            _check_int(partition_leader_epoch, "partition_leader_epoch", _I32_MIN, _I32_MAX),
        )
        return batch


_active = MessageSetCodec(_impl)
_active_columns = ColumnBatchCodec(batch_builder_impl)

#: The message type of the active backend (a Cython class or a namedtuple; same attribute names).
LegacyRecord = _active.LegacyRecord
#: The record type of the active backend (any magic; same attribute names in both backends).
Record = _active.Record
decode_records = _active.decode_records
encode_record_batch = _active.encode_record_batch
encode_record_batch_columns = _active_columns.encode_record_batch_columns
encode_control_batch = _active.encode_control_batch
decode_message_set = _active.decode_message_set
decode_columns = _active.decode_columns
encode_message_set = _active.encode_message_set
record_rows = _active.record_rows
