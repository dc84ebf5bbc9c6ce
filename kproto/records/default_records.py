"""Record batches (magic 2), and ``decode_records`` over any mix of magics, pure Python: the twin of the
Cython module ``kproto._fast._default_records`` (docs/records.md, "Magic 2").

Both modules expose the same names (``Record``, ``decode_records``, ``record_rows``, ``decode_record_columns``,
``encode_batch``) and must give the same results and raise the same error class at the same offset for the
same input; ``tests/records/test_records_differential.py`` holds them to it.

Magic 2 has two paths each way, because a per-field parse with a call per varint costs several
microseconds a record.  Decoding: :func:`_records_fast` reads the records producers write in one loop,
varints of up to four bytes in line, into columns (one list per field: nothing the cyclic garbage collector
has to walk record by record); on anything unusual it gives up and :func:`_records_into`, the careful
parse, reads the batch again and raises the errors that are the contract.  Every byte is checked when the
batch is decoded; iteration only makes the :class:`Record` objects.  Encoding: :func:`_encode_columns`
encodes plain tuples of one shape a column at a time with C-level loops (``zip``, ``map``, ``b"".join``);
anything else, and every error, goes through :func:`_encode_rows`.
``tests/records/test_records_pure_fast_paths.py`` holds each fast path to its careful one.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Sequence
from functools import partial
from itertools import chain, repeat
from operator import add, itemgetter, sub
from typing import Any, Iterable, Iterator, List, Optional, Tuple

from kproto.errors import DecodeError, EncodeError
from kproto.records.compression import compress_pieces, decompress
from kproto.records.decoded import Batch, DecodedRecords, RecordColumns
from kproto.records.format import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BATCH_CRC_AT,
    BATCH_CRC_FROM,
    BATCH_HEADER_SIZE,
    CODEC_MASK,
    CODEC_LZ4,
    CODEC_NAMES,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    MIN_MESSAGE_SIZE,
    NO_TIMESTAMP,
)
from kproto.records.checksums import crc32c
from kproto.records.legacy_records import (
    _HEAD_KV,
    _I32,
    _I32_MAX,
    _I64_MAX,
    _I64_MIN,
    _TS_KEY,
    LegacyRecord,
    _as_bytes,
    _binary,
    _decode_into,
    _new,
    _timestamp,
)

__all__ = ["Record", "decode_record_columns", "decode_records", "encode_batch", "record_rows"]

_BATCH = struct.Struct(">qiibIHiqqqhii")  # the 61-byte batch header
_BATCH_HEAD_AFTER_CRC = struct.Struct(">Hiqqqhii")  # attributes .. records_count: 40 bytes
_BATCH_PREFIX = struct.Struct(">qiib")  # base_offset, batch_length, partition_leader_epoch, magic
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_I32_MIN = -(2**31)
_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1

_RecordFields = namedtuple(
    "_RecordFields",
    "offset timestamp key value headers magic codec timestamp_type producer_id producer_epoch sequence "
    "is_transactional is_control attributes",
)


class Record(_RecordFields):
    """One decoded record of any magic (the pure twin of the compiled ``Record``).

    ``offset`` (absolute), ``timestamp`` (ms; ``None`` for magic 0), ``timestamp_type`` (0 CreateTime,
    1 LogAppendTime; ``None`` for magic 0), ``key``/``value`` (``bytes`` or ``None``), ``headers`` (tuple of
    ``(str, bytes | None)``; empty before magic 2), ``magic``, ``codec`` (``"gzip"``, ``"snappy"``,
    ``"lz4"``, ``"zstd"`` or ``None``), and for magic 2 ``producer_id``, ``producer_epoch``, ``sequence``
    (base sequence + offset delta, or -1), ``is_transactional``, ``is_control`` (-1/-1/-1/False/False before);
    ``attributes``: the record's own attribute byte (a magic 0/1 message's, 0 in magic 2 records).
    """

    __slots__ = ()


_record_of = partial(_new, Record)  # a Record from a tuple of its fields, called from C by map()


class _BatchRecords(Sequence):  # type: ignore[type-arg]
    """The records of a decoded magic 2 batch, the pure twin of the compiled one: the batch is parsed and
    checked whole when it is decoded; iteration makes each :class:`Record` as it reaches it (in C, through
    ``map`` and ``zip``), indexing makes them all once.  The parse leaves segments: lists of each record's
    fields as a plain tuple (the careful parse), or :class:`_Run` columns (the fast loop).

    Why: a parse that made thousands of tuples, each holding more tuples (the headers), woke the cyclic
    garbage collector many times per batch, at up to half the cost of the parse; columns of bytes and ints
    are nothing it tracks, and a consumer that takes records one at a time and lets them go never holds
    thousands of new ones at once.
    """

    __slots__ = ("_segments", "_count", "_built")

    def __init__(self, segments: List[Any]) -> None:
        self._segments = segments
        self._count = sum(map(len, segments))
        self._built: Optional[List[Record]] = None

    def __iter__(self) -> Iterator[Record]:
        if self._built is not None:
            return iter(self._built)
        if len(self._segments) == 1:
            return _segment_records(self._segments[0])
        return chain.from_iterable(map(_segment_records, self._segments))

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if self._built is None:
            self._built = list(iter(self))
        return self._built[index]

    def __repr__(self) -> str:
        return f"<{self._count} records>"


def _segment_records(segment: Any) -> Iterator[Record]:
    if type(segment) is list:
        return map(_record_of, segment)
    records: Iterator[Record] = segment.records()
    return records


class _Run:
    """The records :func:`_records_fast` read, as columns: one list per field, ``None`` for a field that is
    the same for all (then in ``constants``)."""

    __slots__ = ("offsets", "timestamps", "keys", "values", "headers", "attributes", "sequences", "constants")

    offsets: List[int]
    timestamps: Optional[List[Any]]  # int, or None for a LogAppendTime batch's
    keys: Optional[List[Any]]  # bytes or None
    values: Optional[List[Any]]
    headers: Optional[List[Tuple[Tuple[str, Optional[bytes]], ...]]]
    attributes: Optional[List[int]]
    sequences: Optional[List[int]]
    constants: Tuple[Any, ...]  # timestamp, headers, codec, timestamp type, producer id and
    # epoch, transactional, control, attributes

    def __len__(self) -> int:
        return len(self.offsets)

    def records(self) -> Iterator[Record]:
        n = len(self.offsets)
        timestamp, headers, codec, ts_type, producer_id, producer_epoch, transactional, control, attributes = (
            self.constants
        )
        keys, values = self.keys, self.values
        header_column: Iterable[Any] = repeat(headers, n) if self.headers is None else self.headers
        return map(
            _new,
            repeat(Record, n),
            zip(  # tuple.__new__(Record, fields) straight from map, no partial
                self.offsets,
                repeat(timestamp, n) if self.timestamps is None else self.timestamps,
                repeat(None, n) if keys is None else keys,
                repeat(None, n) if values is None else values,
                header_column,
                repeat(2, n),
                repeat(codec, n),
                repeat(ts_type, n),
                repeat(producer_id, n),
                repeat(producer_epoch, n),
                repeat(-1, n) if self.sequences is None else self.sequences,
                repeat(transactional, n),
                repeat(control, n),
                repeat(attributes, n) if self.attributes is None else self.attributes,
            ),
        )


def _field_run(constants: Tuple[Any, ...], timestamps: bool, sequences: bool) -> _Run:
    """An empty :class:`_Run` for records read field by field."""
    run = _Run()
    run.offsets, run.keys, run.values, run.headers, run.attributes = [], [], [], [], []
    run.timestamps = [] if timestamps else None
    run.sequences = [] if sequences else None
    run.constants = constants
    return run


def _legacy_records(messages: List[LegacyRecord]) -> List[Record]:
    return [
        _new(
            Record,
            (
                m.offset,
                m.timestamp,
                m.key,
                m.value,
                (),
                m.magic,
                m.codec,
                m.timestamp_type,
                -1,
                -1,
                -1,
                False,
                False,
                m.attributes,
            ),
        )
        for m in messages
    ]


def decode_records(data: Any, check_crc: bool, limit: int, check_inner_crc: bool = True) -> DecodedRecords:
    """Decode any concatenation of magic 0, 1 and 2 entries (see :func:`kproto.records.decode_records`)."""
    buf = _as_bytes(data)
    batches: List[Batch] = []
    valid, partial = _walk_entries(buf, check_crc, [limit], batches, check_inner_crc)
    return DecodedRecords(batches, valid, partial)


def _walk_entries(
    buf: bytes, check_crc: bool, budget: List[int], batches: List[Batch], check_inner_crc: bool = True
) -> Tuple[int, bool]:
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos < LOG_OVERHEAD:
            return pos, True
        size = _I32.unpack_from(buf, pos + 8)[0]
        if size < MIN_MESSAGE_SIZE:
            raise DecodeError(f"entry size {size} is below the minimum of {MIN_MESSAGE_SIZE}", pos + 8)
        if n - pos < 17:
            return pos, True
        magic = buf[pos + 16]
        if magic == 2 and size < MIN_BATCH_LENGTH:
            raise DecodeError(f"batch length {size} is below the minimum of {MIN_BATCH_LENGTH}", pos + 8)
        end = pos + LOG_OVERHEAD + size
        if end > n:
            return pos, True
        if magic == 2:
            batches.append(_decode_batch(buf, pos, end, check_crc, budget))
        elif magic < 2:
            batches.append(_legacy_batch(buf, pos, end, check_crc, budget, check_inner_crc))
        else:
            raise DecodeError(f"unsupported record magic {magic}", pos + 16)
        pos = end
    return pos, False


def _legacy_batch(
    buf: bytes, pos: int, end: int, check_crc: bool, budget: List[int], check_inner_crc: bool = True
) -> Batch:
    """One magic 0/1 entry (a message, or a wrapper with its inner messages) as a batch."""
    messages: List[LegacyRecord] = []
    try:
        _decode_into(buf[pos:end], messages, None, check_crc, budget, False, None, check_inner_crc)
    except DecodeError as exc:
        raise type(exc)(exc.reason, (exc.offset or 0) + pos) from None
    return _legacy_batch_of(buf, pos, end, _legacy_records(messages))


def _legacy_batch_of(buf: bytes, pos: int, end: int, records: List[Any]) -> Batch:
    offset, size, crc, magic, attributes = _HEAD_KV.unpack_from(buf, pos)[:5]
    timestamp = _TS_KEY.unpack_from(buf, pos + 18)[0] if magic == 1 else NO_TIMESTAMP
    first = records[0].offset
    return Batch(
        position=pos,
        base_offset=first,
        batch_length=size,
        partition_leader_epoch=-1,
        magic=magic,
        crc=crc,
        attributes=attributes,
        last_offset_delta=records[-1].offset - first,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=len(records),
        control_type=None,
        coordinator_epoch=None,
        records=records,
    )


def _varint(buf: bytes, p: int, stop: int, limit: int, what: str) -> Tuple[int, int]:
    """A zigzag varint (``limit`` 5 bytes) or varlong (10 bytes) at ``p``, ending before ``stop``; return
    (value, next position)."""
    shift = 0
    raw = 0
    start = p
    while True:
        if p >= stop:
            raise DecodeError(f"{what} runs past the end of the record", start)
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if p - start >= limit:
            raise DecodeError(f"{what} is a varint longer than {limit} bytes", start)
    if raw > (0xFFFFFFFF if limit == 5 else 0xFFFFFFFFFFFFFFFF):
        raise DecodeError(f"{what} overflows int{32 if limit == 5 else 64}", start)
    return (raw >> 1) ^ -(raw & 1), p


def _decode_batch(buf: bytes, pos: int, end: int, check_crc: bool, budget: List[int]) -> Batch:
    (
        base_offset,
        length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _BATCH.unpack_from(buf, pos)
    if check_crc:
        computed = crc32c(memoryview(buf)[pos + BATCH_CRC_FROM : end])  # in place: no copy of the batch
        if computed != crc:
            raise DecodeError(f"CRC-32C mismatch: stored 0x{crc:08x}, computed 0x{computed:08x}", pos + BATCH_CRC_AT)
    codec = attributes & CODEC_MASK
    if count < 0:
        raise DecodeError(f"records count {count} is negative", pos + 57)
    body_at = pos + BATCH_HEADER_SIZE
    if codec:
        name = CODEC_NAMES.get(codec)
        if name is None:
            raise DecodeError(f"unknown compression codec {codec}", pos + BATCH_CRC_FROM)
        # an lz4 frame is read in place (its decoder takes any bytes-like; a copy of 1.6 MB costs 0.15 ms)
        payload: Any = memoryview(buf)[body_at:end] if codec == CODEC_LZ4 else buf[body_at:end]
        body = decompress(codec, payload, magic=2, limit=budget[0], position=body_at)  # bytes: fields are sliced
        budget[0] -= len(body)
    else:
        name = None
        body = buf
    p = body_at if not codec else 0
    stop = end if not codec else len(body)
    ts_type = (attributes >> 3) & 1
    transactional = bool(attributes & ATTR_TRANSACTIONAL)
    control = bool(attributes & ATTR_CONTROL)
    log_append_ts = max_ts if ts_type else None
    fast = _records_fast(
        body,
        p,
        stop,
        count,
        base_offset,
        base_ts,
        log_append_ts,
        ts_type,
        name,
        producer_id,
        producer_epoch,
        base_sequence,
        transactional,
        control,
    )
    if fast is not None:
        records = _BatchRecords(fast)
        p = stop
    else:  # something unusual, perhaps an error: the careful parse, whose errors are the contract
        rows: List[Tuple[Any, ...]] = []
        if type(body) is not bytes:
            body = bytes(body)
        try:
            p = _records_into(
                body,
                p,
                stop,
                count,
                rows,
                base_offset,
                base_ts,
                log_append_ts,
                ts_type,
                name,
                producer_id,
                producer_epoch,
                base_sequence,
                transactional,
                control,
            )
        except DecodeError as exc:
            if not codec:
                raise
            raise type(exc)(f"{exc.reason} [decompressed byte {exc.offset} of the {name} batch]", body_at) from None
        records = _BatchRecords([rows])
    if p != stop:
        raise DecodeError(
            f"{stop - p} bytes follow the {count} records the batch header counts", p if not codec else body_at
        )
    control_type = coordinator_epoch = None
    if control:
        control_type, coordinator_epoch = _control_marker(records, pos)
    return Batch(
        position=pos,
        base_offset=base_offset,
        batch_length=length,
        partition_leader_epoch=leader_epoch,
        magic=magic,
        crc=crc,
        attributes=attributes,
        last_offset_delta=last_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=count,
        control_type=control_type,
        coordinator_epoch=coordinator_epoch,
        records=records,
    )


def _control_marker(records: Iterable[Any], pos: int) -> Tuple[Optional[int], Optional[int]]:
    """(type, coordinator epoch) of a control batch; its record keys must be well-formed control keys."""
    kind = epoch = None
    for r in records:
        if r.key is None or len(r.key) < 4:
            raise DecodeError("control record key is null or shorter than its 4 bytes (version, type)", pos)
        version, this = _CONTROL_KEY.unpack_from(r.key)
        if version < 0:
            raise DecodeError(f"control record key version {version} is negative", pos)
        if this in (CONTROL_ABORT, CONTROL_COMMIT):
            if r.value is None or len(r.value) < 6:
                raise DecodeError("transaction marker value is null or shorter than its 6 bytes", pos)
            value_version, this_epoch = _CONTROL_VALUE.unpack_from(r.value)
            if value_version < 0:
                raise DecodeError(f"transaction marker value version {value_version} is negative", pos)
            if epoch is None:
                epoch = this_epoch
        if kind is None:
            kind = this
    return kind, epoch


def _sequence(base_sequence: int, delta: int) -> int:
    """Kafka's producer sequence of the record ``delta`` after the base; it wraps past int32 max to 0."""
    if base_sequence < 0:
        return -1
    if base_sequence > _I32_MAX - delta:
        return delta - (_I32_MAX - base_sequence) - 1
    return base_sequence + delta


def _records_into(
    buf: bytes,
    p: int,
    stop: int,
    count: int,
    out: List[Tuple[Any, ...]],
    base_offset: int,
    base_ts: int,
    log_append_ts: Optional[int],
    ts_type: int,
    codec: Optional[str],
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    control: bool,
) -> int:
    """Parse ``count`` records from ``buf[p:stop]`` into ``out`` (the fields of each as a tuple, in the order of
    :class:`Record`'s); return where they end."""
    append = out.append
    varint = _varint
    for _ in range(count):
        if p >= stop:
            raise DecodeError(f"the batch holds fewer records than its records count {count}", p)
        b = buf[p]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            q = p + 1
        else:
            length, q = varint(buf, p, stop, 5, "record length")
        if length < 6 or length > stop - q:
            raise DecodeError(
                f"record length {length} does not fit the {stop - q} bytes left in the batch "
                "(or is below the 6 bytes of the smallest record)",
                p,
            )
        end = q + length
        attributes = buf[q]
        # attributes (int8, unused; kept unsigned like a message's), then timestamp delta, offset delta, key, value,
        # headers; a record of
        # length >= 6 holds the attributes and the first byte of the timestamp delta
        b = buf[q + 1]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            q += 2
        else:
            ts_delta, q = varint(buf, q + 1, end, 10, "timestamp delta")
        if q < end and buf[q] < 0x80:
            b = buf[q]
            off_delta = (b >> 1) ^ -(b & 1)
            q += 1
        else:
            off_delta, q = varint(buf, q, end, 5, "offset delta")
        offset = base_offset + off_delta
        if not _I64_MIN <= offset <= _I64_MAX:
            raise DecodeError(f"base offset {base_offset} plus offset delta {off_delta} leaves int64", p)
        timestamp = base_ts + ts_delta
        if not _I64_MIN <= timestamp <= _I64_MAX:
            raise DecodeError(f"base timestamp {base_ts} plus timestamp delta {ts_delta} leaves int64", p)
        key, q = _varbytes(buf, q, end, "key")
        value, q = _varbytes(buf, q, end, "value")
        if q < end and buf[q] < 0x80:
            b = buf[q]
            nheaders = (b >> 1) ^ -(b & 1)
            q += 1
        else:
            nheaders, q = varint(buf, q, end, 5, "header count")
        if nheaders < 0 or nheaders > end - q:
            raise DecodeError(f"header count {nheaders} does not fit the {end - q} bytes left in the record", q)
        headers: Tuple[Tuple[str, Optional[bytes]], ...] = ()
        if nheaders:
            pairs: List[Tuple[str, Optional[bytes]]] = []
            for _ in range(nheaders):
                hkey, q = _varbytes(buf, q, end, "header key")
                if hkey is None:
                    raise DecodeError("header key is null", q)
                try:
                    text = hkey.decode("utf-8")
                except UnicodeDecodeError:
                    raise DecodeError("header key is not UTF-8", q - len(hkey)) from None
                hvalue, q = _varbytes(buf, q, end, "header value")
                pairs.append((text, hvalue))
            headers = tuple(pairs)
        if q != end:
            raise DecodeError(f"record fields end {end - q} bytes before its length says", q)
        append(
            (
                offset,
                log_append_ts if ts_type else timestamp,
                key,
                value,
                headers,
                2,
                codec,
                ts_type,
                producer_id,
                producer_epoch,
                _sequence(base_sequence, off_delta) if base_sequence >= 0 else -1,
                transactional,
                control,
                attributes,
            )
        )
        p = end
    return p


class _Unusual(Exception):
    """Raised inside :func:`_records_fast` when a record leaves its fast path (never escapes it)."""


def _varint_rest(buf: bytes, p: int) -> Tuple[int, int]:
    """The raw (not yet zigzag-decoded) varint at ``p`` whose first two bytes both have the continuation bit:
    (raw, next position), for at most four bytes; longer ones are left to the careful decoder."""
    b = buf[p + 2]
    if b < 0x80:
        return (buf[p] & 0x7F) | (buf[p + 1] & 0x7F) << 7 | b << 14, p + 3
    c = buf[p + 3]
    if c < 0x80:
        return (buf[p] & 0x7F) | (buf[p + 1] & 0x7F) << 7 | (b & 0x7F) << 14 | c << 21, p + 4
    raise _Unusual


def _data_field(buf: bytes, q: int) -> Tuple[Optional[bytes], int]:
    """The length-prefixed data field (key, value, header value) at ``q`` for :func:`_records_fast`:
    (``bytes`` or ``None``, next position); a negative length other than -1 is :class:`_Unusual`."""
    b = buf[q]
    if b == 1:  # -1: null
        return None, q + 1
    if b < 0x80:
        q += 1
    else:
        c = buf[q + 1]
        if c < 0x80:
            b = (b & 0x7F) | c << 7
            q += 2
        elif buf[q + 2] < 0x80:  # up to 1 MiB: values of many kilobytes
            b = (b & 0x7F) | (c & 0x7F) << 7 | buf[q + 2] << 14
            q += 3
        else:
            b, q = _varint_rest(buf, q)
    if b & 1:
        raise _Unusual
    return buf[q : q + (b >> 1)], q + (b >> 1)


#: The fast path does not range-check offsets and timestamps per record: it takes only batches whose base
#: offset and base timestamp are this far inside int64, and varints of at most four bytes (|delta| < 2**27).
_FAST_BASE_LIMIT = 2**62


def _records_fast(
    buf: Any,
    p: int,
    stop: int,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_ts: Optional[int],
    ts_type: int,
    codec: Optional[str],
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    control: bool,
) -> Optional[List[Any]]:
    """:func:`_records_into` for the records producers write, or ``None`` when anything is unusual; ``buf``
    is ``bytes``.

    One loop with no call per field: varints of one and two bytes are read in line (longer ones, up to four
    bytes, by :func:`_varint_rest`) and zigzag decoded in line.  It never raises and checks little on the way:
    positions only grow, so a record whose fields end exactly where its length says, in a batch whose
    records end exactly at its end, read no byte outside either; lengths are checked for sign.  On anything
    it does not take (a varint beyond four bytes, a negative or misplaced length, a header key that is not
    UTF-8, a base offset or timestamp near the int64 edge, records that do not fill the batch) it gives up
    and the caller parses the batch again with :func:`_records_into`, whose errors are the contract; what it
    returns (segments for :class:`_BatchRecords`) holds what :func:`_records_into` builds, row for row.
    """
    if not (-_FAST_BASE_LIMIT < base_offset < _FAST_BASE_LIMIT and -_FAST_BASE_LIMIT < base_ts < _FAST_BASE_LIMIT):
        return None
    segments: List[Any] = []
    track_sequence = base_sequence >= 0
    constants = (log_append_ts, (), codec, ts_type, producer_id, producer_epoch, transactional, control, 0)
    fields = _field_run(constants, not ts_type, track_sequence)
    add_offset, add_key, add_value = fields.offsets.append, fields.keys.append, fields.values.append  # type: ignore[union-attr]
    add_headers, add_attributes = fields.headers.append, fields.attributes.append  # type: ignore[union-attr]
    add_timestamp = fields.timestamps.append if fields.timestamps is not None else None
    add_sequence = fields.sequences.append if fields.sequences is not None else None
    rest, data_field = _varint_rest, _data_field
    timestamp = log_append_ts
    try:
        for _ in range(count):
            b = buf[p]  # record length
            if b < 0x80:
                q = p + 1
            else:
                c = buf[p + 1]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    q = p + 2
                elif buf[p + 2] < 0x80:  # records of many kilobytes
                    b = (b & 0x7F) | (c & 0x7F) << 7 | buf[p + 2] << 14
                    q = p + 3
                else:
                    b, q = rest(buf, p)
            if b & 1:
                return None
            p = q + (b >> 1)  # where the record ends
            attributes = buf[q]
            b = buf[q + 1]  # timestamp delta
            if b < 0x80:
                q += 2
            else:
                c = buf[q + 2]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    q += 3
                else:
                    b, q = rest(buf, q + 1)
            if not ts_type:
                timestamp = base_ts + ((b >> 1) ^ -(b & 1))
            b = buf[q]  # offset delta
            if b < 0x80:
                q += 1
            else:
                c = buf[q + 1]
                if c < 0x80:
                    b = (b & 0x7F) | c << 7
                    q += 2
                else:
                    b, q = rest(buf, q)
            delta = (b >> 1) ^ -(b & 1)
            if buf[q] == 1:  # a null key, the usual case: no call
                key = None
                q += 1
            else:
                key, q = data_field(buf, q)
            value, q = data_field(buf, q)
            b = buf[q]  # header count
            q += 1
            if b == 0:
                headers: Tuple[Tuple[str, Optional[bytes]], ...] = ()
            elif b & 0x81:  # negative, or more than 63 headers: leave it to the careful parse
                return None
            elif b == 2:  # one header, the usual case: no list, no loop
                b = buf[q]  # header key length: a short one, not null
                if b & 0x81:
                    return None
                hkey = buf[q + 1 : q + 1 + (b >> 1)].decode()
                q += 1 + (b >> 1)
                b = buf[q]  # header value length
                if b < 0x80 and not b & 1:  # a short value, not null: no call
                    hvalue = buf[q + 1 : q + 1 + (b >> 1)]
                    q += 1 + (b >> 1)
                else:
                    hvalue, q = data_field(buf, q)
                headers = ((hkey, hvalue),)
            else:
                pairs: List[Tuple[str, Optional[bytes]]] = []
                for _ in range(b >> 1):
                    b = buf[q]  # header key length: a short one, not null
                    if b & 0x81:
                        return None
                    q += 1
                    hkey = buf[q : q + (b >> 1)].decode()
                    hvalue, q = data_field(buf, q + (b >> 1))
                    pairs.append((hkey, hvalue))
                headers = tuple(pairs)
            if q != p:
                return None
            # the fields go to columns, not a tuple per record: nothing the cyclic GC tracks, but the headers
            add_offset(base_offset + delta)
            if add_timestamp is not None:
                add_timestamp(timestamp)
            add_key(key)
            add_value(value)
            add_headers(headers)
            add_attributes(attributes)
            if add_sequence is not None:
                sequence = base_sequence + delta
                add_sequence(sequence - 0x80000000 if sequence > _I32_MAX else sequence)  # wraps past int32 max
    except (IndexError, UnicodeDecodeError, _Unusual, struct.error, DecodeError):
        return None
    if p != stop:
        return None
    segments.append(fields)
    segments = [segment for segment in segments if len(segment)] or [fields]
    return segments


def _varbytes(buf: bytes, q: int, end: int, what: str) -> Tuple[Optional[bytes], int]:
    """A varint length (-1: null) and that many bytes, inside the record ending at ``end``."""
    at = q
    if q < end and buf[q] < 0x80:
        b = buf[q]
        n = (b >> 1) ^ -(b & 1)
        q += 1
    else:
        n, q = _varint(buf, q, end, 5, f"{what} length")
    if n == -1:
        return None, q
    if n < 0 or n > end - q:
        raise DecodeError(f"{what} length {n} does not fit the {end - q} bytes left in the record", at)
    return buf[q : q + n], q + n


def record_rows(records: Iterable[Any], row_type: Any, topic: Any, partition: Any, start: int) -> List[Any]:
    """The records (``Record`` objects, or anything with their attributes) at or past offset ``start``, in
    order, as ``row_type`` rows ``(topic, partition, offset, timestamp, key, value, headers)``: the row a
    consumer hands out.  ``row_type`` is a tuple subclass of seven fields (a named tuple); each row is built
    as ``tuple.__new__(row_type, fields)`` builds it, without calling ``row_type.__new__``."""
    new = _new
    return [
        new(row_type, (topic, partition, r.offset, r.timestamp, r.key, r.value, r.headers))
        for r in records
        if r.offset >= start
    ]


def decode_record_columns(data: Any, check_crc: bool, limit: int) -> RecordColumns:
    """Decode any mix of magics into columns (see :func:`kproto.records.decode_columns`)."""
    buf = _as_bytes(data)
    batches: List[Batch] = []
    crc_flags: List[bool] = []
    valid, partial = _walk_columns(buf, check_crc, [limit], batches, crc_flags)
    return RecordColumns.from_batches(batches, crc_flags, valid, partial)


def _walk_columns(
    buf: bytes, check_crc: bool, budget: List[int], batches: List[Batch], crc_flags: List[bool]
) -> Tuple[int, bool]:
    """The columns' walk: with ``check_crc`` off, every CRC is still computed and its outcome recorded."""
    valid, partial = _walk_entries(buf, check_crc, budget, batches)
    for batch in batches:
        if check_crc:
            crc_flags.extend([True] * len(batch.records))
        elif batch.magic == 2:
            crc_flags.extend([_entry_crc_ok(buf, batch)] * len(batch.records))
        else:
            crc_flags.extend(_legacy_crc_flags(buf, batch))
    return valid, partial


def _entry_crc_ok(buf: bytes, batch: Batch) -> bool:
    end = batch.position + LOG_OVERHEAD + batch.batch_length
    return crc32c(memoryview(buf)[batch.position + BATCH_CRC_FROM : end]) == batch.crc


def _legacy_crc_flags(buf: bytes, batch: Batch) -> List[bool]:
    end = batch.position + LOG_OVERHEAD + batch.batch_length
    flags: List[bool] = []
    _decode_into(buf[batch.position : end], [], flags, False, [2**62], False, None)
    return flags


# --- encoding ----------------------------------------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    if raw < 0x80:
        return _SMALL_VARINTS[raw]
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


def encode_batch_records(
    records: Iterable[Any], now: int, few_pieces: bool = False
) -> Tuple[List[bytes], int, int, int, int]:
    """The record section of a batch: (its pieces, to be joined, their total size, count, base timestamp,
    max timestamp).

    Deltas are taken from the first record's timestamp, as Kafka's producers write them.  The records are
    encoded a column at a time (:func:`_encode_columns`) when they are all plain tuples of one shape, else
    one at a time (:func:`_encode_rows`), which also gives every error; both write the same bytes.
    ``few_pieces``: for a consumer that pays a call per piece (a streaming compressor, the CRC), the small pieces are
    joined first (see :func:`_encode_columns`); else they are left for the caller's one join.
    """
    items = records if type(records) is list else list(records)
    try:
        fast = _encode_columns(items, now, few_pieces)
    except Exception:  # whatever stopped it, the row encoder meets too, and reports
        fast = None
    return fast or _encode_rows(items, now)


#: With ``few_pieces``: records whose key and value are shorter than this together are encoded into one
#: ``bytes`` (the record section); from this size on, keys and values stay pieces of their own (see
#: :func:`_pieces_between`).
_JOIN_RECORDS_BELOW = 2048

_NONE_TYPE, _BYTES_TYPE, _TUPLE_TYPE, _INT_TYPE, _STR_TYPE = {type(None)}, {bytes}, {tuple}, {int}, {str}
_BYTES_OR_NONE = {bytes, type(None)}
_INT_NONE_TYPES = {int, type(None)}
_HEADER_LISTS = {list, tuple}


class _Parts:
    """The pieces of a batch's records after each record's length varint, a part at a time in record order,
    as :func:`_encode_columns` collects them.

    A part is a ``bytes`` every record has (consecutive ones are joined into one: a piece fewer per record
    in the batch's join) or a list with one piece per record.  ``fixed`` is the width of what is the same
    width in every record; ``widths`` the lists of widths that are not (``fixed`` and their sums are the
    records' lengths); ``largest`` a bound of the largest record; ``apart`` the indices of the parts that
    stay pieces of their own in a batch of large records."""

    __slots__ = ("parts", "fixed", "widths", "largest", "apart")

    def __init__(self) -> None:
        self.parts: List[Any] = []
        self.fixed = 0
        self.widths: List[Iterable[int]] = []
        self.largest = 0
        self.apart: List[int] = []

    def same(self, piece: bytes) -> None:
        """A piece every record has."""
        parts = self.parts
        if parts and type(parts[-1]) is bytes:
            parts[-1] += piece
        else:
            parts.append(piece)
        self.fixed += len(piece)
        self.largest += len(piece)

    def each(self, pieces: Sequence[bytes], widths: Any, largest: int) -> None:
        """One piece per record; ``widths`` their widths (an int when they have one; ``None`` when the next
        part's widths include them), ``largest`` the widest."""
        self.parts.append(pieces)
        if type(widths) is int:
            self.fixed += widths
        elif widths is not None:
            self.widths.append(widths)
        self.largest += largest


def _encode_columns(
    items: List[Any], now: int, few_pieces: bool = False
) -> Optional[Tuple[List[bytes], int, int, int, int]]:
    """:func:`_encode_rows` for a list of ``(key, value[, timestamp[, headers]])`` tuples of one length with
    ``bytes``/``None`` keys and values, ``int``/``None`` timestamps and headers of ``(str, bytes | None)``
    pairs; ``None`` for anything else (or anything it does not take), which is left to :func:`_encode_rows`
    and its errors.

    Why columns: the loops run in C.  A column is taken out of the records by ``itemgetter`` (not
    ``zip(*items)``, which makes an iterator per record: thousands of objects the cyclic garbage collector
    tracks, each a step towards a collection of everything young) and checked by the set of its types;
    lengths come from ``map(len, ...)``, varints and their widths from tables, and a column of one length
    (a null key, values of one size, a batch's one header name) is a single piece every record shares.
    Each record's length is a sum of the widths that differ between records (``map(add, ...)``).  A batch
    of small records is then ONE ``b"".join`` of all its pieces, taken record by record from the columns
    (:func:`_interleave`); a join per record would cost more than its pieces.  Without ``few_pieces``,
    that list is the section, for a caller that joins it with the rest of the batch at once.  With
    ``few_pieces`` (a consumer that pays a call per piece: a compressor, the batch's CRC-32C), a batch of
    small records is joined into one ``bytes`` and one of large records keeps its keys and values as pieces
    (see :func:`_pieces_between`).  A few dozen lines run per
    batch, none per record; every pass over the records costs ~20 ns a record, so passes are what is
    counted here.  The bytes are those :func:`_encode_rows` writes.
    """
    count = len(items)
    if not count or set(map(type, items)) != _TUPLE_TYPE:
        return None
    shapes = set(map(len, items))
    if len(shapes) != 1:
        return None
    shape = shapes.pop()
    if not 2 <= shape <= 4:
        return None
    keys: List[Any] = list(map(itemgetter(0), items))
    values: List[Any] = list(map(itemgetter(1), items))
    table, widths = _zigzag_tables()
    top = len(table)
    # each record: length, attributes, timestamp delta, offset delta, key, value, header count and headers
    parts = _Parts()
    parts.same(b"\x00")  # attributes
    if shape == 2:
        base_ts = max_ts = now
        parts.same(b"\x00")
    else:
        timestamps: List[Any] = list(map(itemgetter(2), items))
        types = set(map(type, timestamps))
        if types <= _INT_NONE_TYPES and type(None) in types:  # records without one get the current time
            timestamps = [now if t is None else t for t in timestamps]
        elif types != _INT_TYPE:
            return None
        base_ts, low, max_ts = timestamps[0], min(timestamps), max(timestamps)
        if low < _I64_MIN or max_ts > _I64_MAX or max_ts - base_ts > _I64_MAX or low - base_ts < _I64_MIN:
            return None
        if low == max_ts:  # one timestamp: every delta 0
            parts.same(b"\x00")
        else:
            deltas = list(map(sub, timestamps, repeat(base_ts)))
            if low >= base_ts and max_ts - base_ts < top:
                parts.each(
                    list(map(table.__getitem__, deltas)), map(widths.__getitem__, deltas), widths[max_ts - base_ts]
                )
            else:
                varints = list(map(_zigzag, deltas))
                parts.each(varints, map(len, varints), 10)
    if count <= top:
        parts.each(table[:count], widths[:count], widths[count - 1])
    else:
        varints = list(chain(table, map(_zigzag, range(top, count))))
        parts.each(varints, map(len, varints), len(varints[-1]))
    largest_key = _binary_part(keys, count, table, widths, parts, True)
    largest_value = _binary_part(values, count, table, widths, parts, True)
    if largest_key is None or largest_value is None:
        return None
    if shape < 4:
        parts.same(b"\x00")
    else:
        headers: List[Any] = list(map(itemgetter(3), items))
        if not any(headers):
            parts.same(b"\x00")
        elif not _header_parts(headers, count, table, widths, parts):
            return None
    lengths = _record_lengths(parts, count)
    largest = parts.largest
    if largest >= top:  # the bound: the records themselves may still be small
        largest = max(lengths)
        if largest > _I32_MAX:
            return None
    prefixes = list(map(table.__getitem__, lengths) if largest < top else map(_zigzag, lengths))
    columns = [prefixes, *parts.parts]
    if not few_pieces:
        return _interleave(columns, count), sum(lengths) + sum(map(len, prefixes)), count, base_ts, max_ts
    if largest_key + largest_value < _JOIN_RECORDS_BELOW:
        joined = b"".join(_interleave(columns, count))
        return [joined], len(joined), count, base_ts, max_ts
    pieces = _pieces_between(columns, [i + 1 for i in parts.apart], count)
    return pieces, sum(map(len, pieces)), count, base_ts, max_ts


def _record_lengths(parts: _Parts, count: int) -> List[int]:
    """Each record's length: the widths that differ between records summed, and those that do not."""
    if not parts.widths:
        return [parts.fixed] * count
    lengths: Iterable[int] = map(add, parts.widths[0], repeat(parts.fixed)) if parts.fixed else parts.widths[0]
    for widths in parts.widths[1:]:
        lengths = map(add, lengths, widths)
    return list(lengths)


def _interleave(columns: List[Any], count: int) -> List[bytes]:
    """The pieces of ``count`` records, record by record, from their columns in record order (a ``bytes``
    column: the same piece in every record)."""
    return list(chain.from_iterable(zip(*_column_iterables(columns, count))))


def _column_iterables(columns: List[Any], count: int) -> List[Any]:
    """``columns`` with each ``bytes`` (a piece every record has) repeated ``count`` times."""
    return [repeat(column, count) if type(column) is bytes else column for column in columns]


#: A key or value column whose largest item has this many bytes stays pieces of its own in a batch of large
#: records (see :func:`_pieces_between`).
_OWN_PIECE = 1024


def _pieces_between(columns: List[Any], apart: List[int], count: int) -> List[bytes]:
    """The pieces of a batch of large records: the columns at ``apart`` (keys, values) as they are, and
    each run of small pieces between two of them joined, across records too: the end of a record (its
    headers) with the start of the next (length, attributes, deltas, key and value lengths).

    Why: a streaming compressor takes the pieces a call each (~0.1-0.25 us a call), so a dozen pieces a
    record would add microseconds a record, and joining the whole section first would cost a copy of
    megabytes.  Joined runs leave two pieces a record for one large column (value), four for two
    (key and value); the batch's CRC-32C takes them a call each too (see :func:`_joined_with_crc`)."""
    pieces: List[bytes] = []
    small: List[bytes] = []  # the small pieces since the last large one, joined when the next comes
    for record in zip(*_column_iterables(columns, count)):
        start = 0
        for index in apart:
            small.extend(record[start:index])
            pieces.append(b"".join(small))
            pieces.append(record[index])
            small = []
            start = index + 1
        small.extend(record[start:])
    pieces.append(b"".join(small))
    return pieces


def _binary_part(
    column: List[Any], count: int, table: List[bytes], widths: List[int], parts: _Parts, own: bool = False
) -> Optional[int]:
    """Add the pieces (length varint, bytes) of a column of ``bytes``/``None`` (null: length -1, no bytes)
    to ``parts``; return the largest length (0 if all are null), ``None`` if the column holds anything
    else.  ``own``: a column that may stay pieces of its own in a batch of large records."""
    if column[0] is None and column.count(None) == count:  # all null (a count by identity: no type pass)
        parts.same(b"\x01")
        return 0
    types = set(map(type, column))
    if types == _BYTES_TYPE:
        lengths = list(map(len, column))
        largest = first = lengths[0]
        if lengths.count(first) == count:  # one length: one varint, the same in every record
            parts.same(table[first] if first < len(table) else _zigzag(first))
            width: Any = first
        else:
            largest = max(lengths)
            if largest < len(table):  # the varint and the bytes together: one list of widths
                parts.each(list(map(table.__getitem__, lengths)), None, widths[largest])
                width = map(_zigzag_tables_spans().__getitem__, lengths)
            else:
                varints = list(map(_zigzag, lengths))
                parts.each(varints, map(len, varints), len(_zigzag(largest)))
                width = lengths
        if own and largest >= _OWN_PIECE:
            parts.apart.append(len(parts.parts))
        parts.each(column, width, largest)
        return largest
    if types == _BYTES_OR_NONE:
        varints = [b"\x01" if v is None else _zigzag(len(v)) for v in column]
        lengths = [0 if v is None else len(v) for v in column]
        largest = max(lengths)
        parts.each(varints, map(len, varints), len(_zigzag(largest)))
        if own and largest >= _OWN_PIECE:
            parts.apart.append(len(parts.parts))
        parts.each([v or b"" for v in column], lengths, largest)
        return largest
    return None


def _header_parts(headers: List[Any], count: int, table: List[bytes], widths: List[int], parts: _Parts) -> bool:
    """Add the records' header sections to ``parts``: as columns when every record has exactly one
    ``(str, bytes | None)`` header (the usual trace or type header), else one piece per record; False when a
    header is not of that kind."""
    pairs: Optional[List[Any]] = None
    if set(map(type, headers)) <= _HEADER_LISTS:
        try:  # one pass that both takes the header and checks that there is exactly one
            pairs = [pair for (pair,) in headers]
        except ValueError:
            pairs = None
    if pairs is not None and set(map(type, pairs)) == _TUPLE_TYPE:
        first = pairs[0][0] if len(pairs[0]) == 2 else None
        try:  # one pass that checks that each is a pair and takes the values of those named by ``first``
            values = [value for name, value in pairs if name is first]
        except ValueError:
            return False
        if len(values) == count and type(first) is str:
            # every name is that one object (a literal, or a string the producer keeps): one type to check
            names: Sequence[str] = (first,)
        else:
            names = [name for name, _ in pairs]
            if set(map(type, names)) != _STR_TYPE:
                return False
            values = list(map(itemgetter(1), pairs))
        prefixed = {}
        for name in set(names):
            try:
                raw = name.encode("utf-8")
            except UnicodeEncodeError:
                return False
            prefixed[name] = b"\x02" + _zigzag(len(raw)) + raw  # header count 1, key length, key
        if len(prefixed) == 1:
            parts.same(prefixed[names[0]])
        else:
            sections = list(map(prefixed.__getitem__, names))
            parts.each(sections, list(map(len, sections)), max(map(len, prefixed.values())))
        return _binary_part(values, count, table, widths, parts) is not None
    try:
        sections = [_header_section(h, index) for index, h in enumerate(headers)]
    except EncodeError:
        return False
    lengths = list(map(len, sections))
    parts.each(sections, lengths, max(lengths))
    return True


def _header_section(headers: Any, index: int) -> bytes:
    """A record's header count and headers, as :func:`_encode_rows` writes them."""
    zz = _zigzag
    pairs = _headers(headers, index)
    out = [zz(len(pairs))]
    for hkey, hvalue in pairs:
        out.append(zz(len(hkey)))
        out.append(hkey)
        if hvalue is None:
            out.append(b"\x01")
        else:
            out.append(zz(len(hvalue)))
            out.append(hvalue)
    return b"".join(out)


_ZIGZAG_TABLES: List[List[Any]] = []


def _zigzag_tables() -> Tuple[List[bytes], List[int]]:
    """The zigzag varints of 0 .. 16383 (offset deltas, lengths, timestamp deltas) and their widths, built
    on first use."""
    if not _ZIGZAG_TABLES:
        table = list(map(_zigzag, range(1 << 14)))
        widths = list(map(len, table))
        _ZIGZAG_TABLES.extend((table, widths, list(map(add, widths, range(1 << 14)))))
    return _ZIGZAG_TABLES[0], _ZIGZAG_TABLES[1]


def _zigzag_tables_spans() -> List[int]:
    """For n in 0 .. 16383, the bytes a length-prefixed field of n bytes takes: its varint and the n bytes."""
    _zigzag_tables()
    return _ZIGZAG_TABLES[2]


def build_tables() -> None:
    """Build now the zigzag varint tables the magic 2 encoder otherwise builds on first use (~1 MB):
    for callers that measure per-call memory or latency and must not see this one-time cost in one call."""
    _zigzag_tables()


def _encode_rows(records: List[Any], now: int) -> Tuple[List[bytes], int, int, int, int]:
    """:func:`encode_batch_records` one record at a time: any record shape, every check."""
    parts: List[bytes] = []
    add = parts.append
    zz = _zigzag
    base_ts = max_ts = NO_TIMESTAMP
    index = -1
    for index, item in enumerate(records):
        key, value, timestamp, headers = _record_fields(item, index)
        if timestamp is None:
            timestamp = now
        if index == 0:
            base_ts = max_ts = timestamp
        elif timestamp > max_ts:
            max_ts = timestamp
        if not _I64_MIN <= timestamp - base_ts <= _I64_MAX:
            raise EncodeError(
                f"record {index}: timestamp {timestamp} is too far from the first record's {base_ts} for an int64 delta"
            )
        body = [b"\x00", zz(timestamp - base_ts), zz(index)]
        if key is None:
            body.append(b"\x01")
        else:
            body.append(zz(len(key)))
            body.append(key)
        if value is None:
            body.append(b"\x01")
        else:
            body.append(zz(len(value)))
            body.append(value)
        body.append(zz(len(headers)))
        for hkey, hvalue in headers:
            body.append(zz(len(hkey)))
            body.append(hkey)
            if hvalue is None:
                body.append(b"\x01")
            else:
                body.append(zz(len(hvalue)))
                body.append(hvalue)
        record = b"".join(body)
        if len(record) > _I32_MAX:
            raise EncodeError(f"record {index}: larger than 2 GiB")
        add(zz(len(record)))
        add(record)
    return parts, sum(map(len, parts)), index + 1, base_ts, max_ts


def _record_fields(
    item: Any, index: int
) -> Tuple[Optional[bytes], Optional[bytes], Optional[int], List[Tuple[bytes, Optional[bytes]]]]:
    headers: Any = ()
    if type(item) is tuple:
        if len(item) == 2:
            key, value = item
            timestamp = None
        elif len(item) == 3:
            key, value, timestamp = item
        elif len(item) == 4:
            key, value, timestamp, headers = item
        else:
            raise EncodeError(f"record {index}: a tuple must be (key, value[, timestamp[, headers]])")
    else:
        try:
            key, value = item.key, item.value
        except AttributeError:
            raise EncodeError(
                f"record {index}: expected a (key, value[, timestamp[, headers]]) tuple or an object with key and value"
            ) from None
        timestamp = getattr(item, "timestamp", None)
        headers = getattr(item, "headers", ())
    return (
        _binary(key, "key", index, "record"),
        _binary(value, "value", index, "record"),
        _timestamp(timestamp, index, "record"),
        _headers(headers, index),
    )


def _headers(headers: Any, index: int) -> List[Tuple[bytes, Optional[bytes]]]:
    if not headers:
        return []
    out = []
    try:
        pairs = [(k, v) for k, v in headers]
    except (TypeError, ValueError):
        raise EncodeError(f"record {index}: headers must be (str, bytes | None) pairs") from None
    for hkey, hvalue in pairs:
        if type(hkey) is str:
            try:
                hkey = hkey.encode("utf-8")
            except UnicodeEncodeError:
                raise EncodeError(f"record {index}: header key {hkey!r} is not encodable as UTF-8") from None
        elif isinstance(hkey, (bytes, bytearray, memoryview)):
            hkey = bytes(hkey)
            try:
                hkey.decode("utf-8")
            except UnicodeDecodeError:
                raise EncodeError(f"record {index}: header key {hkey!r} is not UTF-8") from None
        else:
            raise EncodeError(f"record {index}: header key must be str, not {type(hkey).__name__}")
        out.append((hkey, _binary(hvalue, "header value", index, "record")))
    return out


def encode_batch(
    records: Iterable[Any],
    base_offset: int,
    codec: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    attributes: int,
    partition_leader_epoch: int,
    now: int,
) -> bytes:
    """One magic 2 batch (see :func:`kproto.records.encode_record_batch`); ``attributes`` without the codec."""
    # few pieces: a compressor and the CRC-32C each take them a call a piece
    pieces, size, count, base_ts, max_ts = encode_batch_records(records, now, few_pieces=True)
    if not count:
        return b""
    if count - 1 > _I64_MAX - base_offset:
        raise EncodeError(f"offsets from {base_offset} for {count} records do not fit int64")
    head = _BATCH_HEAD_AFTER_CRC.pack(
        attributes | codec, count - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count
    )
    parts: List[Any] = pieces
    if codec:
        parts = [compress_pieces(codec, pieces, size, magic=2)]  # bytes or bytearray: the join takes either
        size = len(parts[0])
    if size + len(head) + 9 > _I32_MAX:
        raise EncodeError("batch larger than 2 GiB")
    parts[:0] = (_BATCH_PREFIX.pack(base_offset, size + len(head) + 9, partition_leader_epoch, 2), _NO_CRC, head)
    return _joined_with_crc(parts)


_NO_CRC = bytes(4)


def _joined_with_crc(pieces: List[Any]) -> bytes:
    """The batch ``b"".join(pieces)`` with its CRC-32C in the 4 bytes at :data:`BATCH_CRC_AT` (which the
    pieces leave for it: ``pieces[1]``); the CRC covers the batch from :data:`BATCH_CRC_FROM` on.

    The CRC is continued from piece to piece, so the batch is joined once: joining what the CRC covers
    first, then the whole batch, copied megabytes twice (each copy into freshly allocated memory)."""
    crc = 0
    for piece in pieces[2:]:
        crc = crc32c(piece, crc)
    pieces[1] = _U32.pack(crc)
    return b"".join(pieces)


_U32 = struct.Struct(">I")
