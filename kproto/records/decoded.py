"""Containers for decode results shared by both backends: :class:`MessageSet`, :class:`MessageColumns`,
and for records of any magic :class:`Batch`, :class:`DecodedRecords` and :class:`RecordColumns`."""

from __future__ import annotations

from array import array
from itertools import chain
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

__all__ = ["Batch", "DecodedRecords", "MessageLike", "MessageSet", "MessageColumns", "RecordColumns", "RecordLike"]


class RecordLike(Protocol):
    """What a decoded record offers, whichever backend built it (a Cython class or a named tuple)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> Optional[int]: ...
    @property
    def timestamp_type(self) -> Optional[int]: ...
    @property
    def key(self) -> Optional[bytes]: ...
    @property
    def value(self) -> Optional[bytes]: ...
    @property
    def headers(self) -> Sequence[Tuple[str, Optional[bytes]]]: ...
    @property
    def magic(self) -> int: ...
    @property
    def codec(self) -> Optional[str]: ...
    @property
    def attributes(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def sequence(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


class MessageLike(Protocol):
    """What a decoded magic 0/1 message offers, whichever backend built it."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> Optional[int]: ...
    @property
    def timestamp_type(self) -> Optional[int]: ...
    @property
    def key(self) -> Optional[bytes]: ...
    @property
    def value(self) -> Optional[bytes]: ...
    @property
    def magic(self) -> int: ...
    @property
    def codec(self) -> Optional[str]: ...
    @property
    def attributes(self) -> int: ...
    @property
    def crc(self) -> int: ...


class MessageSet:
    """The messages decoded from one message set, compressed wrappers already expanded.

    ``valid_bytes`` is how many input bytes held complete messages; ``partial`` says the input ended with an
    incomplete message (a fetch response cut at ``max_bytes``), which was dropped without error.
    ``messages`` is a list (pure backend) or a lazy sequence that builds each message when iteration
    reaches it (Cython backend; the whole set was validated before the MessageSet was returned).
    """

    __slots__ = ("messages", "valid_bytes", "partial")

    def __init__(self, messages: Sequence[MessageLike], valid_bytes: int, partial: bool) -> None:
        self.messages = messages
        self.valid_bytes = valid_bytes
        self.partial = partial

    def __iter__(self) -> Iterator[MessageLike]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, index: int) -> MessageLike:
        return self.messages[index]

    def __repr__(self) -> str:
        tail = ", partial tail" if self.partial else ""
        return f"MessageSet({len(self.messages)} messages, {self.valid_bytes} valid bytes{tail})"


class MessageColumns:
    """A message set decoded into columns (one entry per message, compressed wrappers expanded).

    ``offsets``/``timestamps`` are ``array('q')`` (timestamp -1 for magic 0), ``magics``/``attributes``/
    ``codecs`` ``array('b')``, ``crc_ok`` ``array('B')`` (0/1).  Keys and values are each one contiguous
    ``bytes`` buffer (``key_data``) with ``array('i')`` boundaries (``key_offsets``, length ``count + 1``:
    message *i* is ``key_data[key_offsets[i]:key_offsets[i+1]]``) and ``array('B')`` null flags
    (``key_null``, 1 = null).  This is Arrow's BinaryArray layout, so :meth:`to_arrow` wraps it without copying
    the payloads.
    """

    __slots__ = (
        "count",
        "offsets",
        "timestamps",
        "magics",
        "attributes",
        "codecs",
        "crc_ok",
        "key_data",
        "key_offsets",
        "key_null",
        "value_data",
        "value_offsets",
        "value_null",
        "valid_bytes",
        "partial",
    )

    count: int
    offsets: "array[int]"
    timestamps: "array[int]"
    magics: "array[int]"
    attributes: "array[int]"
    codecs: "array[int]"
    crc_ok: "array[int]"
    key_data: bytes
    key_offsets: "array[int]"
    key_null: "array[int]"
    value_data: bytes
    value_offsets: "array[int]"
    value_null: "array[int]"
    valid_bytes: int
    partial: bool

    def __init__(self, **columns: Any) -> None:
        for name in self.__slots__:
            setattr(self, name, columns[name])

    def __len__(self) -> int:
        return self.count

    def keys(self) -> List[Any]:
        """The keys as a list of ``bytes``/``None`` (convenience; allocates one object per message)."""
        return _unpack_binary(self.key_data, self.key_offsets, self.key_null)

    def values(self) -> List[Any]:
        """The values as a list of ``bytes``/``None`` (convenience; allocates one object per message)."""
        return _unpack_binary(self.value_data, self.value_offsets, self.value_null)

    def to_arrow(self) -> Any:
        """A ``pyarrow.RecordBatch`` (requires pyarrow): offset, timestamp, magic, attributes, codec, crc_ok, key,
        value.

        The arrays are views of these columns' buffers (no copy), except the booleans and validity bitmaps,
        which Arrow stores as bits."""
        kit = _arrow_kit()
        return kit.pa.RecordBatch.from_arrays(self._arrow_arrays(kit), schema=kit.message_schema)

    def _arrow_arrays(self, kit: "_ArrowKit") -> List[Any]:
        n = self.count
        timestamps = kit.fixed(kit.pa.int64(), n, self.timestamps)
        if b"\x00" in self.magics.tobytes():  # magic 0 has no timestamp: null
            validity = kit.pc.not_equal(kit.fixed(kit.pa.int8(), n, self.magics), kit.zero_i8)
            timestamps = kit.pa.Array.from_buffers(
                kit.pa.int64(), n, [validity.buffers()[1], kit.pa.py_buffer(self.timestamps)]
            )
        return [
            kit.fixed(kit.pa.int64(), n, self.offsets),
            timestamps,
            kit.fixed(kit.pa.int8(), n, self.magics),
            kit.fixed(kit.pa.int8(), n, self.attributes),
            kit.fixed(kit.pa.int8(), n, self.codecs),
            kit.flags(n, self.crc_ok),
            kit.binary(kit.pa.binary(), n, self.key_data, self.key_offsets, self.key_null),
            kit.binary(kit.pa.binary(), n, self.value_data, self.value_offsets, self.value_null),
        ]

    def __repr__(self) -> str:
        tail = ", partial tail" if self.partial else ""
        return f"MessageColumns({self.count} messages, {self.valid_bytes} valid bytes{tail})"


class Batch:
    """The header of one entry of a record stream, and its records.

    For magic 2 the fields are the batch header's, as stored.  A magic 0/1 entry (one message, or one
    compressed wrapper with its inner messages) is shown in the same shape: ``base_offset`` is its first
    record's offset, ``base_timestamp``/``max_timestamp`` the message's timestamp (-1 for magic 0), the
    producer fields -1, ``partition_leader_epoch`` -1.  ``position`` is the byte offset of the entry in the
    decoded buffer; ``control_type`` (0 abort, 1 commit, ...) and ``coordinator_epoch`` are set for control
    batches.  ``records`` is a sequence of records (built on first access by the compiled backend).
    """

    __slots__ = (
        "position",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "control_type",
        "coordinator_epoch",
        "_records",
    )

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    control_type: Optional[int]
    coordinator_epoch: Optional[int]

    def __init__(self, *, records: Union[Sequence[Any], Callable[[], Sequence[Any]]], **fields: Any) -> None:
        self._records: Union[Sequence[Any], Callable[[], Sequence[Any]]]
        for name in self.__slots__[:-1]:
            setattr(self, name, fields[name])
        self._records = records

    @property
    def records(self) -> Sequence[RecordLike]:
        """The batch's records (``Record`` objects of the active backend)."""
        if callable(self._records):
            self._records = self._records()
        records: Sequence[RecordLike] = self._records
        return records

    @property
    def codec(self) -> Optional[str]:
        """The compression codec name (``"gzip"``, ``"snappy"``, ``"lz4"``, ``"zstd"``) or ``None``."""
        from kproto.records.format import codec_name

        return codec_name(self.attributes & 0x07)

    @property
    def timestamp_type(self) -> Optional[int]:
        """0 CreateTime, 1 LogAppendTime; ``None`` for magic 0."""
        return None if self.magic == 0 else (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return self.magic == 2 and bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return self.magic == 2 and bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        """Magic 2: ``base_timestamp`` is the delete horizon set by log compaction."""
        return self.magic == 2 and bool(self.attributes & 0x40)

    @property
    def next_offset(self) -> int:
        """The offset after this batch's last one (where a consumer continues)."""
        return self.base_offset + self.last_offset_delta + 1

    def __repr__(self) -> str:
        return (
            f"Batch(position={self.position}, magic={self.magic}, base_offset={self.base_offset}, "
            f"records_count={self.records_count}, codec={self.codec!r})"
        )


class DecodedRecords:
    """The records of a buffer of any mix of magic 0/1 entries and magic 2 batches.

    Iterating gives every record in order; ``batches`` the entries with their headers.  ``valid_bytes`` is
    how many input bytes held complete entries; ``partial`` says the input ended with an incomplete one (a
    fetch cut at ``max_bytes``, a log segment's torn tail), which was dropped without error.
    """

    __slots__ = ("batches", "valid_bytes", "partial", "_count")

    def __init__(self, batches: List[Batch], valid_bytes: int, partial: bool) -> None:
        self.batches = batches
        self.valid_bytes = valid_bytes
        self.partial = partial
        self._count = sum(b.records_count if b.magic == 2 else len(b.records) for b in batches)

    def __iter__(self) -> Iterator[RecordLike]:
        if len(self.batches) == 1:  # the common case: the batch's own iterator, no chain step per record
            return iter(self.batches[0].records)
        return chain.from_iterable([batch.records for batch in self.batches])

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        tail = ", partial tail" if self.partial else ""
        return (
            f"DecodedRecords({len(self.batches)} batches, {self._count} records, {self.valid_bytes} valid bytes{tail})"
        )


class RecordColumns(MessageColumns):
    """:class:`MessageColumns` for any mix of magics, with the magic 2 columns added.

    ``timestamp_types`` ``array('b')`` (-1 for magic 0), ``producer_ids`` ``array('q')``, ``producer_epochs``
    ``array('h')``, ``sequences`` ``array('i')``, ``transactional``/``control`` ``array('B')``,
    ``batch_offsets`` ``array('q')`` (base offset of the record's magic 2 batch), ``leader_epochs``
    ``array('i')`` (both -1 before magic 2).  Headers: record *i* has headers ``header_starts[i]`` to
    ``header_starts[i+1]``
    (``array('i')``, Arrow's list offsets); header *j*'s key is ``header_key_data[header_key_offsets[j]:
    header_key_offsets[j+1]]`` (UTF-8), its value likewise in ``header_value_*`` with ``header_value_null``.
    """

    __slots__ = (
        "timestamp_types",
        "producer_ids",
        "producer_epochs",
        "sequences",
        "transactional",
        "control",
        "batch_offsets",
        "leader_epochs",
        "header_starts",
        "header_key_data",
        "header_key_offsets",
        "header_value_data",
        "header_value_offsets",
        "header_value_null",
    )

    timestamp_types: "array[int]"
    producer_ids: "array[int]"
    producer_epochs: "array[int]"
    sequences: "array[int]"
    transactional: "array[int]"
    control: "array[int]"
    batch_offsets: "array[int]"
    leader_epochs: "array[int]"
    header_starts: "array[int]"
    header_key_data: bytes
    header_key_offsets: "array[int]"
    header_value_data: bytes
    header_value_offsets: "array[int]"
    header_value_null: "array[int]"

    def __init__(self, **columns: Any) -> None:
        for name in MessageColumns.__slots__ + RecordColumns.__slots__:
            setattr(self, name, columns[name])

    @classmethod
    def from_batches(cls, batches: List[Batch], crc_flags: List[bool], valid: int, partial: bool) -> "RecordColumns":
        """Columns from decoded batches (the pure backend's way; the compiled one fills buffers directly)."""
        from kproto.records.format import codec_id

        rows = [(b, r) for b in batches for r in b.records]
        key_data, key_bounds, key_null = _pack_binary([r.key for _, r in rows])
        value_data, value_bounds, value_null = _pack_binary([r.value for _, r in rows])
        starts = array("i", [0])
        hkeys: List[Optional[bytes]] = []
        hvalues: List[Optional[bytes]] = []
        for _, r in rows:
            for k, v in r.headers:
                hkeys.append(k.encode("utf-8"))
                hvalues.append(v)
            starts.append(len(hkeys))
        hk_data, hk_bounds, _ = _pack_binary(hkeys)
        hv_data, hv_bounds, hv_null = _pack_binary(hvalues)
        return cls(
            count=len(rows),
            offsets=array("q", [r.offset for _, r in rows]),
            timestamps=array("q", [-1 if r.timestamp is None else r.timestamp for _, r in rows]),
            magics=array("b", [r.magic for _, r in rows]),
            attributes=array("b", [_signed8(r.attributes & 0xFF) for _, r in rows]),
            codecs=array("b", [codec_id(r.codec) for _, r in rows]),
            crc_ok=array("B", [1 if ok else 0 for ok in crc_flags]),
            key_data=key_data,
            key_offsets=key_bounds,
            key_null=key_null,
            value_data=value_data,
            value_offsets=value_bounds,
            value_null=value_null,
            valid_bytes=valid,
            partial=partial,
            timestamp_types=array("b", [-1 if r.timestamp_type is None else r.timestamp_type for _, r in rows]),
            producer_ids=array("q", [r.producer_id for _, r in rows]),
            producer_epochs=array("h", [r.producer_epoch for _, r in rows]),
            sequences=array("i", [r.sequence for _, r in rows]),
            transactional=array("B", [r.is_transactional for _, r in rows]),
            control=array("B", [r.is_control for _, r in rows]),
            batch_offsets=array("q", [b.base_offset if b.magic == 2 else -1 for b, _ in rows]),
            leader_epochs=array("i", [b.partition_leader_epoch for b, _ in rows]),
            header_starts=starts,
            header_key_data=hk_data,
            header_key_offsets=hk_bounds,
            header_value_data=hv_data,
            header_value_offsets=hv_bounds,
            header_value_null=hv_null,
        )

    def headers(self) -> List[List[Any]]:
        """Each record's headers as a list of ``(str, bytes | None)`` (convenience; allocates per header)."""
        keys = _unpack_binary(
            self.header_key_data, self.header_key_offsets, array("B", bytes(len(self.header_key_offsets) - 1))
        )
        values = _unpack_binary(self.header_value_data, self.header_value_offsets, self.header_value_null)
        s = self.header_starts
        return [[(keys[j].decode("utf-8"), values[j]) for j in range(s[i], s[i + 1])] for i in range(self.count)]

    def to_arrow(self) -> Any:
        """A ``pyarrow.RecordBatch``: the :class:`MessageColumns` columns, then timestamp_type, producer_id,
        producer_epoch, sequence, is_transactional, is_control, batch_offset, leader_epoch and headers
        (``list<struct<key: string, value: binary>>``), views of these columns' buffers as in
        :meth:`MessageColumns.to_arrow`."""
        kit = _arrow_kit()
        pa = kit.pa
        n = self.count
        n_headers = len(self.header_key_offsets) - 1
        keys = pa.Array.from_buffers(
            pa.string(), n_headers, [None, pa.py_buffer(self.header_key_offsets), pa.py_buffer(self.header_key_data)], 0
        )
        values = kit.binary(
            pa.binary(), n_headers, self.header_value_data, self.header_value_offsets, self.header_value_null
        )
        entries = pa.Array.from_buffers(kit.header_type, n_headers, [None], 0, children=[keys, values])
        headers = pa.Array.from_buffers(
            kit.headers_type, n, [None, pa.py_buffer(self.header_starts)], 0, children=[entries]
        )
        arrays = self._arrow_arrays(kit) + [
            kit.fixed(pa.int8(), n, self.timestamp_types),
            kit.fixed(pa.int64(), n, self.producer_ids),
            kit.fixed(pa.int16(), n, self.producer_epochs),
            kit.fixed(pa.int32(), n, self.sequences),
            kit.flags(n, self.transactional),
            kit.flags(n, self.control),
            kit.fixed(pa.int64(), n, self.batch_offsets),
            kit.fixed(pa.int32(), n, self.leader_epochs),
            headers,
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=kit.record_schema)

    def __repr__(self) -> str:
        tail = ", partial tail" if self.partial else ""
        return f"RecordColumns({self.count} records, {self.valid_bytes} valid bytes{tail})"


def _signed8(value: int) -> int:
    return value - 256 if value > 127 else value


class _ArrowKit:
    """pyarrow, the types, schemas and scalars of the column conversions, and the conversions: built once.

    Fixed-width columns become Arrow arrays over the column's own buffer (``pyarrow.py_buffer`` keeps the
    ``array``/``bytes`` alive; neither can change while exported); 0/1 flag columns become Arrow's bit-packed
    booleans and null flags validity bitmaps through one compute kernel each."""

    def __init__(self) -> None:
        try:
            import pyarrow as pa
            import pyarrow.compute as pc
        except ImportError:
            raise ImportError("arrow=True needs pyarrow: pip install 'kproto[arrow]'") from None
        self.pa = pa
        self.pc = pc
        self.zero_u8 = pa.scalar(0, pa.uint8())
        self.zero_i8 = pa.scalar(0, pa.int8())
        self.header_type = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        self.headers_type = pa.list_(self.header_type)
        message_fields = [
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("magic", pa.int8()),
            ("attributes", pa.int8()),
            ("codec", pa.int8()),
            ("crc_ok", pa.bool_()),
            ("key", pa.binary()),
            ("value", pa.binary()),
        ]
        record_fields = message_fields + [
            ("timestamp_type", pa.int8()),
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int16()),
            ("sequence", pa.int32()),
            ("is_transactional", pa.bool_()),
            ("is_control", pa.bool_()),
            ("batch_offset", pa.int64()),
            ("leader_epoch", pa.int32()),
            ("headers", self.headers_type),
        ]
        self.message_schema = pa.schema(message_fields)
        self.record_schema = pa.schema(record_fields)

    def fixed(self, arrow_type: Any, count: int, column: "array[int]") -> Any:
        return self.pa.Array.from_buffers(arrow_type, count, [None, self.pa.py_buffer(column)], 0)

    def flags(self, count: int, column: "array[int]") -> Any:
        raw = column.tobytes()
        if b"\x00" not in raw:  # all true (crc_ok with check_crc=True, or one transactional batch): no kernel
            bits = b"\xff" * (count // 8) + (bytes([(1 << (count % 8)) - 1]) if count % 8 else b"")
        elif b"\x01" not in raw:
            bits = bytes((count + 7) // 8)
        else:
            return self.pc.not_equal(self.fixed(self.pa.uint8(), count, column), self.zero_u8)
        return self.pa.Array.from_buffers(self.pa.bool_(), count, [None, self.pa.py_buffer(bits)], 0)

    def binary(self, arrow_type: Any, count: int, data: bytes, bounds: "array[int]", nulls: "array[int]") -> Any:
        pa = self.pa
        validity = None
        null_count = 0
        if b"\x01" in nulls.tobytes():  # a byte search; Arrow counts the nulls from the bitmap when asked
            validity = self.pc.equal(self.fixed(pa.uint8(), count, nulls), self.zero_u8).buffers()[1]
            null_count = -1
        return pa.Array.from_buffers(
            arrow_type, count, [validity, pa.py_buffer(bounds), pa.py_buffer(data)], null_count
        )


_ARROW_KIT: Optional[_ArrowKit] = None


def _arrow_kit() -> _ArrowKit:
    global _ARROW_KIT
    if _ARROW_KIT is None:
        _ARROW_KIT = _ArrowKit()
    return _ARROW_KIT


def _pack_binary(items: List[Optional[bytes]]) -> "Tuple[bytes, array[int], array[int]]":
    bounds = array("i", [0])
    total = 0
    for item in items:
        if item is not None:
            total += len(item)
            if total > 2**31 - 1:
                from kproto.errors import LimitExceededError

                raise LimitExceededError("decoded keys or values exceed 2 GiB, more than int32 column offsets hold")
        bounds.append(total)
    data = b"".join([item for item in items if item is not None])
    return data, bounds, array("B", [1 if item is None else 0 for item in items])


def _unpack_binary(data: bytes, bounds: Sequence[int], nulls: Sequence[int]) -> List[Any]:
    return [None if nulls[i] else data[bounds[i] : bounds[i + 1]] for i in range(len(nulls))]
