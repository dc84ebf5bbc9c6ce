# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled record batches (magic 2), and ``decode_records`` over any mix of magics: the twin of
:mod:`kproto.records.default_records` (docs/records.md, "Magic 2").

Same names, same results, same error class and offset for the same input as the twin.  The legacy entries
of a mixed buffer go through ``decode_set`` of :mod:`kproto._fast._legacy_records` on a pointer into the same
buffer; the column buffers are those of :mod:`kproto._fast._columns`, the CRC-32C that of
:mod:`kproto._fast._checksums`.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t* size) except NULL
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy, memset
from cpython.list cimport PyList_GET_ITEM

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.compression import compress_buffer, decompress_buffer
from kproto.records.decoded import Batch, DecodedRecords, RecordColumns

from kproto._fast._bytes cimport (I32_MAX, NO_TIMESTAMP, BytesOut, binary_data, load_i32, load_i64, load_u32,
                                  out_finish, out_reserve, store_i64, store_u32)
from kproto._fast._checksums cimport crc32c_of
from kproto._fast._columns cimport _Columns, data_put
from kproto._fast._legacy_records cimport (CODEC_MASK, MIN_SIZE, Decoding, LegacyRecord, _BufferView,
                                           binary_field, decode_set, expose_slot, timestamp_field)

__all__ = ["Record", "decode_record_columns", "decode_records", "encode_batch", "record_rows"]

cdef dict CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
cdef tuple CODEC_NAME_BY_ID = (None, "gzip", "snappy", "lz4", "zstd", None, None, None)

cdef enum:
    BATCH_HEADER = 61
    MIN_BATCH_LENGTH = 49
    CRC_FROM = 21
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20

cdef tuple NO_HEADERS = ()
cdef enum:
    FLAG_TRANSACTIONAL = 1  # Record._flags
    FLAG_CONTROL = 2
    KEY_CACHE = 8  # header keys per record whose str the next record may reuse (build_headers)


# Reading a zigzag varint: position after it, or one of these (never a valid position).
cdef enum:
    VARINT_PAST_END = -1
    VARINT_TOO_LONG = -2
    VARINT_OVERFLOW = -3


cdef inline Py_ssize_t read_varint(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, int limit,
                                   int64_t* out) noexcept nogil:
    cdef uint64_t raw = 0
    cdef uint8_t b
    cdef int shift = 0
    cdef Py_ssize_t start = p
    if p < stop and buf[p] < 0x80:
        b = buf[p]
        out[0] = <int64_t>(b >> 1) ^ -<int64_t>(b & 1)
        return p + 1
    if stop - p >= 2 and buf[p + 1] < 0x80 and limit >= 2:  # two bytes (any 14-bit value)
        raw = (buf[p] & 0x7F) | (<uint64_t>buf[p + 1] << 7)
        out[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
        return p + 2
    while True:
        if p >= stop:
            return VARINT_PAST_END
        b = buf[p]
        p += 1
        if shift == 63 and (b & 0x7E):  # the 10th byte may carry one bit only
            return VARINT_OVERFLOW
        raw |= <uint64_t>(b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if p - start >= limit:
            return VARINT_TOO_LONG
    if limit == 5 and raw > 0xFFFFFFFFu:
        return VARINT_OVERFLOW
    out[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
    return p


cdef int varint_error(Py_ssize_t code, str what, int limit, Py_ssize_t at) except -1:
    if code == VARINT_PAST_END:
        raise DecodeError(f"{what} runs past the end of the record", at)
    if code == VARINT_TOO_LONG:
        raise DecodeError(f"{what} is a varint longer than {limit} bytes", at)
    raise DecodeError(f"{what} overflows int{32 if limit == 5 else 64}", at)


cdef inline Py_ssize_t need_varint(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, int limit, int64_t* out,
                                   str what) except? -9:
    cdef Py_ssize_t q = read_varint(buf, p, stop, limit, out)
    if q < 0:
        varint_error(q, what, limit, p)
    return q


cdef inline Py_ssize_t need_varbytes(const uint8_t* buf, Py_ssize_t q, Py_ssize_t end, int64_t* n,
                                     str what, str what_length) except? -9:
    """A varint length (-1: null) and that many bytes inside the record; return the position after them.

    Lengths of one or two bytes that fit are taken here (inlined into the record loop); anything else,
    errors included, goes through varbytes_checked."""
    cdef uint64_t raw
    if end - q >= 2:
        raw = buf[q]
        if raw < 0x80:
            n[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
            if n[0] == -1 or (n[0] >= 0 and n[0] <= end - q - 1):
                return q + 1 + (n[0] if n[0] > 0 else 0)
        elif buf[q + 1] < 0x80:
            raw = (raw & 0x7F) | (<uint64_t>buf[q + 1] << 7)
            n[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
            if n[0] >= 0 and n[0] <= end - q - 2:
                return q + 2 + n[0]
    return varbytes_checked(buf, q, end, n, what, what_length)


cdef Py_ssize_t varbytes_checked(const uint8_t* buf, Py_ssize_t q, Py_ssize_t end, int64_t* n,
                                 str what, str what_length) except? -9:
    """need_varbytes, every case."""
    cdef Py_ssize_t at = q
    q = need_varint(buf, q, end, 5, n, what_length)
    if n[0] == -1:
        return q
    if n[0] < 0 or n[0] > end - q:
        raise DecodeError(f"{what} length {n[0]} does not fit the {end - q} bytes left in the record", at)
    return q + n[0]


cdef inline bint is_ascii(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # the bytes OR-ed together, one test at the end: no branch per byte
    cdef uint64_t word, words = 0
    cdef uint8_t tail = 0
    cdef Py_ssize_t i
    while n >= 8:
        memcpy(&word, p, 8)
        words |= word
        p += 8
        n -= 8
    for i in range(n):
        tail |= p[i]
    return (words & 0x8080808080808080u) == 0 and tail < 0x80


cdef inline int32_t next_sequence(int32_t base_sequence, int64_t delta) noexcept nogil:
    """Kafka's sequence of the record ``delta`` after the base: wraps past int32 max to 0; -1 stays -1."""
    if base_sequence < 0:
        return -1
    if base_sequence > I32_MAX - delta:
        return <int32_t>(delta - (I32_MAX - base_sequence) - 1)
    return <int32_t>(base_sequence + delta)


cdef struct BatchInfo:
    int64_t base_offset
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int32_t base_sequence
    int32_t leader_epoch
    int producer_epoch
    int codec
    int ts_type
    bint transactional
    bint control


cdef Py_ssize_t varint_slow(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, int limit, int64_t* out) noexcept nogil:
    """read_varint out of line, so that quick_varint stays small enough to be inlined everywhere."""
    return read_varint(buf, p, stop, limit, out)


cdef inline Py_ssize_t quick_varint(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, int limit,
                                    int64_t* out) noexcept nogil:
    """read_varint, same results, with the one and two byte cases (values of -8192 to 8191) inline."""
    cdef uint32_t raw
    if p < stop:
        raw = buf[p]
        if raw < 0x80:
            out[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
            return p + 1
        if p + 1 < stop and buf[p + 1] < 0x80:
            raw = (raw & 0x7F) | (<uint32_t>buf[p + 1] << 7)
            out[0] = <int64_t>(raw >> 1) ^ -<int64_t>(raw & 1)
            return p + 2
    return varint_slow(buf, p, stop, limit, out)


cdef inline bint leaves_int64(int64_t base, int64_t delta) noexcept nogil:
    return (delta > 0 and base > INT64_MAX - delta) or (delta < 0 and base < INT64_MIN - delta)


cdef inline Py_ssize_t varbytes_end(const uint8_t* buf, Py_ssize_t q, Py_ssize_t end) noexcept nogil:
    """The end of the varint length (-1: null) and the bytes at ``q``, if they fit before ``end``; else -1."""
    cdef int64_t n
    q = quick_varint(buf, q, end, 5, &n)
    if q < 0 or n < -1 or n > end - q:
        return -1
    return q + n if n > 0 else q


cdef inline Py_ssize_t record_end(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, BatchInfo* info) noexcept nogil:
    """The end of the record at ``p`` if it passes every check of check_records and its header keys are ASCII;
    else -1, and check_records takes the record the long way (which raises its error, or accepts it).

    One record's checks with no Python object and no exception check between them: the object decode's
    validation pass, in the time of a scan."""
    cdef int64_t length, ts_delta, off_delta, nheaders, hk
    cdef Py_ssize_t q, end, h
    q = quick_varint(buf, p, stop, 5, &length)
    if q < 0 or length < 6 or length > stop - q:
        return -1
    end = q + length
    q = quick_varint(buf, q + 1, end, 10, &ts_delta)
    if q < 0 or leaves_int64(info.base_timestamp, ts_delta):
        return -1
    q = quick_varint(buf, q, end, 5, &off_delta)
    if q < 0 or leaves_int64(info.base_offset, off_delta):
        return -1
    q = varbytes_end(buf, q, end)  # key
    if q < 0:
        return -1
    q = varbytes_end(buf, q, end)  # value
    if q < 0:
        return -1
    q = quick_varint(buf, q, end, 5, &nheaders)
    if q < 0 or nheaders < 0 or nheaders > end - q:
        return -1
    for h in range(nheaders):
        q = quick_varint(buf, q, end, 5, &hk)
        if q < 0 or hk < 0 or hk > end - q or not is_ascii(buf + q, hk):
            return -1
        q = varbytes_end(buf, q + hk, end)  # header value
        if q < 0:
            return -1
    return end if q == end else -1


cdef Py_ssize_t check_records(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, int32_t count, BatchInfo* info,
                              _Columns cols, bint crc_ok) except -1:
    """Validate ``count`` records in ``buf[p:stop]`` (and with ``cols``, add them as rows); return their end.

    Same checks, same order, same messages as ``_records_into`` of the pure twin.  Without ``cols`` a record
    that record_end accepts is done; any other is checked below, where its first error is raised."""
    cdef int32_t i
    cdef int64_t length, ts_delta, off_delta, offset, timestamp, klen, vlen, nheaders, hk, hv
    cdef Py_ssize_t q, end, key_end, value_end, h, start
    if cols is not None:
        cols.reserve(count, stop - p)
    for i in range(count):
        if cols is None:
            end = record_end(buf, p, stop, info)
            if end >= 0:
                p = end
                continue
        if p >= stop:
            raise DecodeError(f"the batch holds fewer records than its records count {count}", p)
        q = need_varint(buf, p, stop, 5, &length, "record length")
        if length < 6 or length > stop - q:
            raise DecodeError(f"record length {length} does not fit the {stop - q} bytes left in the batch "
                              "(or is below the 6 bytes of the smallest record)", p)
        end = q + length
        start = q  # the record's attributes byte
        q = need_varint(buf, q + 1, end, 10, &ts_delta, "timestamp delta")
        q = need_varint(buf, q, end, 5, &off_delta, "offset delta")
        if (off_delta > 0 and info.base_offset > INT64_MAX - off_delta) or (
                off_delta < 0 and info.base_offset < INT64_MIN - off_delta):
            raise DecodeError(f"base offset {info.base_offset} plus offset delta {off_delta} leaves int64", p)
        offset = info.base_offset + off_delta
        if (ts_delta > 0 and info.base_timestamp > INT64_MAX - ts_delta) or (
                ts_delta < 0 and info.base_timestamp < INT64_MIN - ts_delta):
            raise DecodeError(f"base timestamp {info.base_timestamp} plus timestamp delta {ts_delta} leaves int64", p)
        timestamp = info.max_timestamp if info.ts_type else info.base_timestamp + ts_delta
        q = key_end = need_varbytes(buf, q, end, &klen, "key", "key length")
        q = value_end = need_varbytes(buf, q, end, &vlen, "value", "value length")
        if cols is not None:
            cols.add_row(offset, timestamp, 2, buf[start], info.codec, crc_ok,
                         buf + key_end - (klen if klen > 0 else 0), klen,
                         buf + value_end - (vlen if vlen > 0 else 0), vlen)
        q = need_varint(buf, q, end, 5, &nheaders, "header count")
        if nheaders < 0 or nheaders > end - q:
            raise DecodeError(f"header count {nheaders} does not fit the {end - q} bytes left in the record", q)
        for h in range(nheaders):
            q = need_varbytes(buf, q, end, &hk, "header key", "header key length")
            if hk == -1:
                raise DecodeError("header key is null", q)
            if not is_ascii(buf + q - hk, hk):
                try:
                    PyBytes_FromStringAndSize(<char*>buf + q - hk, hk).decode("utf-8")
                except UnicodeDecodeError:
                    raise DecodeError("header key is not UTF-8", q - hk) from None
            key_end = q
            q = need_varbytes(buf, q, end, &hv, "header value", "header value length")
            if cols is not None:
                cols.add_header(buf + key_end - hk, hk, buf + q - (hv if hv > 0 else 0), hv)
        if q != end:
            raise DecodeError(f"record fields end {end - q} bytes before its length says", q)
        if cols is not None:
            cols.add_extras(info.ts_type, info.producer_id, info.producer_epoch,
                            next_sequence(info.base_sequence, off_delta), info.transactional, info.control,
                            info.base_offset, info.leader_epoch)
        p = end
    return p


cdef Py_ssize_t add_records(const uint8_t* buf, Py_ssize_t p, Py_ssize_t stop, int32_t count, BatchInfo* info,
                            _Columns cols, bint crc_ok) except -1:
    """check_records for columns, faster: add ``count`` records of ``buf[p:stop]`` as rows; return their end.

    Each record is parsed with the checks of check_records and stored straight into the columns.  A record
    that fails one of them, or has a header key that is not ASCII (check_records owns the UTF-8 check), is
    given to check_records alone, after its half-stored headers are taken back: it raises that record's
    error with its own message and offset, or adds the record.  So every error is check_records's, and this
    loop only stores records check_records accepts, with the values it would store.  The columns that are
    the same for the whole batch are filled once at the end."""
    cdef int32_t i
    cdef int64_t length, ts_delta, off_delta, klen, vlen, nheaders, hk, hv, h
    cdef Py_ssize_t q, end, start, row, row0, key_at, value_at, hkey_at, hkey_mark, hvalue_mark
    cdef int32_t header_mark
    cdef int64_t base_offset = info.base_offset, base_ts = info.base_timestamp
    cdef int64_t* offsets
    cdef int64_t* timestamps
    cdef int8_t* attributes
    cdef int32_t* key_bounds
    cdef uint8_t* key_null
    cdef int32_t* value_bounds
    cdef uint8_t* value_null
    cdef int32_t* sequences
    cdef int32_t* header_starts
    cols.reserve(count, stop - p)
    row0 = cols.count
    i = 0
    while i < count:
        # the row columns, again after check_records or a growth may have moved them
        offsets = cols.offsets
        timestamps = cols.timestamps
        attributes = cols.attributes
        key_bounds = cols.key_bounds
        key_null = cols.key_null
        value_bounds = cols.value_bounds
        value_null = cols.value_null
        sequences = cols.sequences
        header_starts = cols.header_starts
        while i < count:
            if p >= stop:
                raise DecodeError(f"the batch holds fewer records than its records count {count}", p)
            i += 1
            header_mark = cols.header_count
            hkey_mark = cols.hkey_data.size
            hvalue_mark = cols.hvalue_data.size
            row = cols.count
            q = quick_varint(buf, p, stop, 5, &length)
            if q < 0 or length < 6 or length > stop - q or row >= cols.cap:
                break
            end = q + length
            start = q
            q = quick_varint(buf, q + 1, end, 10, &ts_delta)
            if q >= 0:
                q = quick_varint(buf, q, end, 5, &off_delta)
            if q < 0 or (off_delta > 0 and base_offset > INT64_MAX - off_delta) or (
                    off_delta < 0 and base_offset < INT64_MIN - off_delta) or (
                    ts_delta > 0 and base_ts > INT64_MAX - ts_delta) or (ts_delta < 0 and base_ts < INT64_MIN - ts_delta):
                break
            q = quick_varint(buf, q, end, 5, &klen)
            if q < 0 or klen < -1 or klen > end - q:
                break
            key_at = q
            if klen > 0:
                q += klen
            q = quick_varint(buf, q, end, 5, &vlen)
            if q < 0 or vlen < -1 or vlen > end - q:
                break
            value_at = q
            if vlen > 0:
                q += vlen
            q = quick_varint(buf, q, end, 5, &nheaders)
            if q < 0 or nheaders < 0 or nheaders > end - q:
                break
            h = 0
            while h < nheaders:
                q = quick_varint(buf, q, end, 5, &hk)
                if q < 0 or hk < 0 or hk > end - q or not is_ascii(buf + q, hk):
                    break
                hkey_at = q
                q = quick_varint(buf, q + hk, end, 5, &hv)
                if q < 0 or hv < -1 or hv > end - q:
                    break
                cols.add_header(buf + hkey_at, hk, buf + q, hv)
                if hv > 0:
                    q += hv
                h += 1
            if h < nheaders or q != end:
                break
            offsets[row] = base_offset + off_delta
            timestamps[row] = info.max_timestamp if info.ts_type else base_ts + ts_delta
            attributes[row] = <int8_t>buf[start]
            if klen > 0:
                data_put(&cols.key_data, buf + key_at, klen)
            key_bounds[row + 1] = <int32_t>cols.key_data.size
            key_null[row] = klen < 0
            if vlen > 0:
                data_put(&cols.value_data, buf + value_at, vlen)
            value_bounds[row + 1] = <int32_t>cols.value_data.size
            value_null[row] = vlen < 0
            sequences[row] = next_sequence(info.base_sequence, off_delta)
            header_starts[row + 1] = cols.header_count
            cols.count = row + 1
            p = end
        else:
            break
        # the record just counted is check_records's (see above)
        cols.header_count = header_mark
        cols.hkey_data.size = hkey_mark
        cols.hvalue_data.size = hvalue_mark
        if row >= cols.cap:
            cols.grow_rows(row + 1)
        p = check_records(buf, p, stop, 1, info, cols, crc_ok)
    cols.fill_batch(row0, info.codec, crc_ok, info.ts_type, info.producer_id, info.producer_epoch,
                    info.transactional, info.control, base_offset, info.leader_epoch)
    return p


@cython.final
@cython.freelist(512)
@cython.no_gc
cdef class Record:
    """One decoded record of any magic (the compiled twin of :class:`kproto.records.default_records.Record`).

    ``offset`` (absolute), ``timestamp`` (ms; ``None`` for magic 0), ``timestamp_type`` (0 CreateTime,
    1 LogAppendTime; ``None`` for magic 0), ``key``/``value`` (``bytes`` or ``None``), ``headers`` (tuple of
    ``(str, bytes | None)``; empty before magic 2), ``magic``, ``codec`` (``"gzip"``, ``"snappy"``,
    ``"lz4"``, ``"zstd"`` or ``None``), and for magic 2 ``producer_id``, ``producer_epoch``, ``sequence``
    (base sequence + offset delta, or -1), ``is_transactional``, ``is_control`` (-1/-1/-1/False/False before);
    ``attributes``: the record's own attribute byte, unsigned (a magic 0/1 message's, 0 in magic 2 records).
    """

    # only bytes/str/int/None and tuples of them are stored: no cycles, so no_gc.
    # offset, key, value and headers are Python objects made when the record is built and read through
    # plain slots (see expose_slot): nearly every consumer reads them.  Headers are built with the record
    # (build_headers): measured, that costs less than building them on first access, whose getter call
    # and second parse of the record outweigh what a consumer that never reads headers saves.
    cdef readonly object key
    cdef readonly object value
    cdef readonly object offset
    cdef readonly tuple headers
    # The C fields are as narrow as their values allow: at 80 bytes the object is cleared with a few
    # vector stores when allocated; at 96 (int fields throughout) the compiler used a slower `rep stos`.
    cdef int64_t _timestamp
    cdef readonly int64_t producer_id
    cdef readonly int32_t sequence
    cdef readonly int16_t producer_epoch
    cdef readonly int16_t attributes
    cdef readonly int8_t magic
    cdef int8_t _ts_type  # -1: none (magic 0)
    cdef int8_t _codec
    cdef uint8_t _flags  # FLAG_TRANSACTIONAL | FLAG_CONTROL

    def __init__(self, offset=0, timestamp=None, key=None, value=None, headers=(), magic=2, codec=None,
                 timestamp_type=0, producer_id=-1, producer_epoch=-1, sequence=-1, is_transactional=False,
                 is_control=False, attributes=0):
        if (timestamp is None) != (timestamp_type is None):
            raise TypeError("timestamp and timestamp_type are both set or both None (magic 0)")
        cdef int64_t checked_offset = offset
        self.offset = checked_offset
        self._timestamp = 0 if timestamp is None else timestamp
        self._ts_type = -1 if timestamp_type is None else timestamp_type
        self.key = key
        self.value = value
        self.headers = tuple(headers)
        self.magic = magic
        self._codec = CODEC_IDS[codec]
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.sequence = sequence
        self._flags = (FLAG_TRANSACTIONAL if is_transactional else 0) | (FLAG_CONTROL if is_control else 0)
        self.attributes = attributes

    @property
    def timestamp(self):
        """The timestamp in ms (the batch's max timestamp under LogAppendTime); None for magic 0."""
        return None if self._ts_type < 0 else self._timestamp

    @property
    def timestamp_type(self):
        """0 CreateTime / 1 LogAppendTime; None for magic 0."""
        return None if self._ts_type < 0 else self._ts_type

    @property
    def codec(self):
        """The codec name the record travelled with (``"gzip"``, ``"snappy"``, ``"lz4"``, ``"zstd"``) or None."""
        return CODEC_NAME_BY_ID[self._codec]

    @property
    def is_transactional(self):
        """Magic 2: the record is part of a transaction (False before magic 2)."""
        return (self._flags & FLAG_TRANSACTIONAL) != 0

    @property
    def is_control(self):
        """Magic 2: the record is a control record, such as a transaction marker (False before magic 2)."""
        return (self._flags & FLAG_CONTROL) != 0

    def _astuple(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.magic, self.codec,
                self.timestamp_type, self.producer_id, self.producer_epoch, self.sequence, self.is_transactional,
                self.is_control, self.attributes)

    def __eq__(self, other):
        if type(other) is not Record:
            return NotImplemented
        return self._astuple() == (<Record>other)._astuple()

    def __hash__(self):
        return hash(self._astuple())

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r}, magic={self.magic}, codec={self.codec!r})")


cdef int expose_record_slots() except -1:
    cdef Record probe = Record.__new__(Record)
    markers = (object(), object(), object(), ())
    probe.key, probe.value, probe.offset, probe.headers = markers
    expose_slot(Record, probe, markers[0], b"key", b"The key: bytes, or None for a null key.")
    expose_slot(Record, probe, markers[1], b"value", b"The value: bytes, or None for a null value.")
    expose_slot(Record, probe, markers[2], b"offset", b"The absolute offset.")
    expose_slot(Record, probe, markers[3], b"headers",
                b"The headers, a tuple of (str, bytes | None) pairs (empty before magic 2).")
    return 0


expose_record_slots()


cdef Record record_from_message(LegacyRecord m):
    cdef Record r = Record.__new__(Record)
    r.key = m.key
    r.value = m.value
    r.headers = NO_HEADERS
    r.offset = m.offset
    r._timestamp = m._timestamp
    r._ts_type = m._timestamp_type
    r._codec = m._codec
    r.magic = m.magic
    r.attributes = m.attributes
    r.producer_id = -1
    r.producer_epoch = -1
    r.sequence = -1
    return r


cdef inline object new_binary(const uint8_t* buf, Py_ssize_t at, int64_t n):
    return None if n < 0 else PyBytes_FromStringAndSize(<char*>buf + at, <Py_ssize_t>n)


cdef inline bint same_bytes(const uint8_t* a, const uint8_t* b, Py_ssize_t n) noexcept nogil:
    """memcmp(a, b, n) == 0 without a library call for the short header keys producers use."""
    cdef Py_ssize_t i
    if n > 16:
        return memcmp(a, b, n) == 0
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


# A consumer reading records one at a time drops each soon after taking the next; its headers tuple and pairs
# are then held by the batch alone, and build_headers refills them instead of allocating two tuples a record,
# as zip() does with its result tuple (PyTuple_SetItem's rule: a tuple only we hold has no other observer).
# Kept records, headers or pairs raise the count and get fresh tuples.  They hold only str, bytes and None, so
# no cycle: whether the collector still tracks them (it may untrack such tuples) never matters.
cdef extern from *:
    """
    #ifdef Py_GIL_DISABLED
    #define KPROTO_SOLE_REFERENCE(o) 0  /* another thread may be taking a reference as we look */
    #else
    #define KPROTO_SOLE_REFERENCE(o) (Py_REFCNT(o) == 1)
    #endif
    static int kproto_reusable_headers(PyObject *headers, Py_ssize_t n) {
        return headers != Py_None && KPROTO_SOLE_REFERENCE(headers) && PyTuple_GET_SIZE(headers) == n;
    }
    /* headers[h] = (key, value): the pair already there refilled if only headers holds it, else a new one */
    static int kproto_set_header(PyObject *headers, Py_ssize_t h, PyObject *key, PyObject *value) {
        PyObject *pair = PyTuple_GET_ITEM(headers, h), *old;
        if (pair != NULL && KPROTO_SOLE_REFERENCE(pair)) {
            old = PyTuple_GET_ITEM(pair, 0);
            if (old != key) {
                Py_INCREF(key);
                PyTuple_SET_ITEM(pair, 0, key);
                Py_DECREF(old);
            }
            old = PyTuple_GET_ITEM(pair, 1);
            Py_INCREF(value);
            PyTuple_SET_ITEM(pair, 1, value);
            Py_DECREF(old);
            return 0;
        }
        PyObject *fresh = PyTuple_New(2);
        if (fresh == NULL)
            return -1;
        Py_INCREF(key);
        PyTuple_SET_ITEM(fresh, 0, key);
        Py_INCREF(value);
        PyTuple_SET_ITEM(fresh, 1, value);
        PyTuple_SET_ITEM(headers, h, fresh);
        Py_XDECREF(pair);
        return 0;
    }
    """
    bint kproto_reusable_headers(PyObject* headers, Py_ssize_t n)
    int kproto_set_header(object headers, Py_ssize_t h, object key, object value) except -1


cdef tuple build_headers(_BatchRecords batch, const uint8_t* buf, Py_ssize_t q, Py_ssize_t end):
    """The headers at ``q`` (the header count) of a validated record of ``batch`` ending at ``end``.

    A header key with the same bytes as the key at the same place in the batch's previous record with
    headers (producers attach the same keys in the same order) reuses that record's ``str``; the tuples
    are the previous record's, refilled, when nothing else holds them (see above)."""
    cdef int64_t nheaders, hk, hv
    cdef Py_ssize_t h
    cdef tuple headers
    cdef object key
    q = quick_varint(buf, q, end, 5, &nheaders)
    if kproto_reusable_headers(<PyObject*>batch.older_headers, nheaders):
        headers = batch.older_headers
        batch.older_headers = batch.last_headers
        batch.last_headers = headers
    elif kproto_reusable_headers(<PyObject*>batch.last_headers, nheaders):
        headers = batch.last_headers
    else:
        headers = PyTuple_New(nheaders)
        batch.older_headers = batch.last_headers
        batch.last_headers = headers
    for h in range(nheaders):
        q = quick_varint(buf, q, end, 5, &hk)
        if h < KEY_CACHE and batch.key_size[h] == hk + 1 and same_bytes(buf + q, batch.key_at[h], hk):
            key = <object>PyList_GET_ITEM(batch.keys, h)
        else:
            key = PyUnicode_DecodeUTF8(<char*>buf + q, hk, NULL)
            if h < KEY_CACHE:
                if batch.keys is None:
                    batch.keys = [None] * KEY_CACHE
                batch.keys[h] = key
                batch.key_at[h] = buf + q
                batch.key_size[h] = hk + 1
        q += hk
        q = quick_varint(buf, q, end, 5, &hv)
        kproto_set_header(headers, h, key, new_binary(buf, q, hv))
        if hv > 0:
            q += hv
    return headers


cdef Record build_record(_BatchRecords batch, Py_ssize_t* position):
    """The record at ``position[0]`` of the validated ``batch``; advances ``position``."""
    cdef const uint8_t* buf = batch.data
    cdef BatchInfo* info = &batch.info
    cdef Py_ssize_t p = position[0], end, q
    cdef int64_t length, ts_delta, off_delta, klen, vlen
    cdef Record r = Record.__new__(Record)
    p = quick_varint(buf, p, p + 5, 5, &length)
    end = p + length
    r.attributes = buf[p]
    q = quick_varint(buf, p + 1, end, 10, &ts_delta)
    q = quick_varint(buf, q, end, 5, &off_delta)
    q = quick_varint(buf, q, end, 5, &klen)
    r.key = new_binary(buf, q, klen)
    if klen > 0:
        q += klen
    q = quick_varint(buf, q, end, 5, &vlen)
    r.value = new_binary(buf, q, vlen)
    if vlen > 0:
        q += vlen
    r.headers = NO_HEADERS if buf[q] == 0 else build_headers(batch, buf, q, end)  # zigzag 0: no headers
    r.offset = info.base_offset + off_delta
    r._timestamp = info.max_timestamp if info.ts_type else info.base_timestamp + ts_delta
    r._ts_type = info.ts_type
    r._codec = info.codec
    r.magic = 2
    r.producer_id = info.producer_id
    r.producer_epoch = info.producer_epoch
    r.sequence = next_sequence(info.base_sequence, off_delta)
    r._flags = (FLAG_TRANSACTIONAL if info.transactional else 0) | (FLAG_CONTROL if info.control else 0)
    position[0] = end
    return r


@cython.final
cdef class _BatchRecords:
    """The records of a validated magic 2 batch, built one at a time on iteration (indexing builds all)."""

    cdef object owner  # bytes or the decompressed bytearray: keeps data alive, never resized
    cdef const uint8_t* data
    cdef Py_ssize_t start
    cdef int32_t count
    cdef BatchInfo info
    cdef list built
    # header keys of the last record with headers, by position (build_headers): the str, where its bytes
    # are in data and their length + 1 (0: none yet)
    cdef list keys
    cdef const uint8_t* key_at[KEY_CACHE]
    cdef Py_ssize_t key_size[KEY_CACHE]
    # the headers tuples of the last two records build_headers made, refilled when only this holds them (two:
    # `for r in records` still holds the last record while it asks for the next)
    cdef tuple last_headers
    cdef tuple older_headers

    def __iter__(self):
        if self.built is not None:
            return iter(self.built)
        cdef _BatchRecordIterator it = _BatchRecordIterator.__new__(_BatchRecordIterator)
        it.records = self
        it.pos = self.start
        it.left = self.count
        return it

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if self.built is None:
            self.built = list(self)
        return self.built[index]

    def __repr__(self):
        return f"<{self.count} records>"


@cython.final
cdef class _BatchRecordIterator:
    cdef _BatchRecords records
    cdef Py_ssize_t pos
    cdef int32_t left

    def __iter__(self):
        return self

    def __next__(self):
        if self.left <= 0:
            raise StopIteration
        self.left -= 1
        return build_record(self.records, &self.pos)


cdef tuple control_marker(list records, Py_ssize_t pos):
    """(type, coordinator epoch) of a control batch, its keys checked (as ``_control_marker`` in the pure twin)."""
    kind = epoch = None
    for item in records:
        r = <Record>item
        if r.key is None or len(r.key) < 4:
            raise DecodeError("control record key is null or shorter than its 4 bytes (version, type)", pos)
        key = <bytes>r.key
        version = <int16_t>((<uint8_t>key[0] << 8) | <uint8_t>key[1])
        this = <int16_t>((<uint8_t>key[2] << 8) | <uint8_t>key[3])
        if version < 0:
            raise DecodeError(f"control record key version {version} is negative", pos)
        if this == 0 or this == 1:
            if r.value is None or len(r.value) < 6:
                raise DecodeError("transaction marker value is null or shorter than its 6 bytes", pos)
            value = <bytes>r.value
            value_version = <int16_t>((<uint8_t>value[0] << 8) | <uint8_t>value[1])
            if value_version < 0:
                raise DecodeError(f"transaction marker value version {value_version} is negative", pos)
            if epoch is None:
                epoch = load_i32(<const uint8_t*>PyBytes_AS_STRING(value) + 2)
        if kind is None:
            kind = this
    return kind, epoch


cdef object decode_batch(object owner, const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, Decoding* opts,
                         _Columns cols):
    """The magic 2 batch ``buf[pos:end]`` validated (and with ``cols`` added as rows): a Batch."""
    cdef BatchInfo info
    cdef uint32_t crc = load_u32(buf + pos + 17), computed
    cdef int attributes = (buf[pos + 21] << 8) | buf[pos + 22]
    cdef int32_t count = load_i32(buf + pos + 57)
    cdef Py_ssize_t body_at = pos + BATCH_HEADER, p, stop
    cdef const uint8_t* data = buf
    cdef bint crc_ok = True
    cdef _BatchRecords records
    cdef object raw = owner
    info.base_offset = load_i64(buf + pos)
    info.leader_epoch = load_i32(buf + pos + 12)
    info.base_timestamp = load_i64(buf + pos + 27)
    info.max_timestamp = load_i64(buf + pos + 35)
    info.producer_id = load_i64(buf + pos + 43)
    info.producer_epoch = <int16_t>((buf[pos + 51] << 8) | buf[pos + 52])
    info.base_sequence = load_i32(buf + pos + 53)
    info.codec = attributes & CODEC_MASK
    info.ts_type = (attributes >> 3) & 1
    info.transactional = (attributes & ATTR_TRANSACTIONAL) != 0
    info.control = (attributes & ATTR_CONTROL) != 0
    if opts.check_crc or opts.flag_crc:
        computed = crc32c_of(buf + pos + CRC_FROM, end - pos - CRC_FROM)
        crc_ok = computed == crc
        if not crc_ok and opts.check_crc:
            raise DecodeError(f"CRC-32C mismatch: stored 0x{crc:08x}, computed 0x{computed:08x}", pos + 17)
    if count < 0:
        raise DecodeError(f"records count {count} is negative", pos + 57)
    p = body_at
    stop = end
    name = None
    if info.codec:
        name = CODEC_NAME_BY_ID[info.codec]
        if name is None:
            raise DecodeError(f"unknown compression codec {info.codec}", pos + CRC_FROM)
        payload = PyBytes_FromStringAndSize(<char*>buf + body_at, end - body_at)
        raw = decompress_buffer(info.codec, payload, magic=2, limit=opts.limit, position=body_at)
        if type(raw) is bytes:
            data = <const uint8_t*>PyBytes_AS_STRING(raw)
            stop = PyBytes_GET_SIZE(raw)
        else:
            data = <const uint8_t*>PyByteArray_AS_STRING(raw)
            stop = PyByteArray_GET_SIZE(raw)
        opts.limit -= stop
        p = 0
    try:
        if cols is not None:
            p = add_records(data, p, stop, count, &info, cols, crc_ok)
        else:
            p = check_records(data, p, stop, count, &info, cols, crc_ok)
    except DecodeError as exc:
        if not info.codec:
            raise
        raise type(exc)(f"{exc.reason} [decompressed byte {exc.offset} of the {name} batch]", body_at) from None
    if p != stop:
        raise DecodeError(f"{stop - p} bytes follow the {count} records the batch header counts",
                          p if not info.codec else body_at)
    records = _BatchRecords.__new__(_BatchRecords)
    records.owner = raw
    records.data = data
    records.start = 0 if info.codec else body_at
    records.count = count
    records.info = info
    control_type = coordinator_epoch = None
    if info.control:
        control_type, coordinator_epoch = control_marker(list(records), pos)
    if cols is not None:  # rows are in the columns already
        return None
    return Batch(
        position=pos, base_offset=info.base_offset, batch_length=load_i32(buf + pos + 8),
        partition_leader_epoch=info.leader_epoch, magic=2, crc=crc, attributes=attributes,
        last_offset_delta=load_i32(buf + pos + 23), base_timestamp=info.base_timestamp,
        max_timestamp=info.max_timestamp, producer_id=info.producer_id, producer_epoch=info.producer_epoch,
        base_sequence=info.base_sequence, records_count=count, control_type=control_type,
        coordinator_epoch=coordinator_epoch, records=records,
    )


cdef object legacy_batch(const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, Decoding* opts):
    """One magic 0/1 entry decoded by decode_set on a pointer into the same buffer: a Batch."""
    cdef bint partial
    cdef int64_t last = 0
    cdef list found = []
    cdef int magic = buf[pos + 16]
    try:
        decode_set(buf + pos, end - pos, found, None, opts, False, 0, &partial, &last)
    except DecodeError as exc:
        raise type(exc)(exc.reason, (exc.offset or 0) + pos) from None
    records = [record_from_message(<LegacyRecord>m) for m in found]
    first = (<Record>records[0]).offset
    last = (<Record>records[len(records) - 1]).offset
    n = len(records)
    timestamp = load_i64(buf + pos + 18) if magic == 1 else NO_TIMESTAMP
    return Batch(
        position=pos, base_offset=first, batch_length=load_i32(buf + pos + 8), partition_leader_epoch=-1,
        magic=magic, crc=load_u32(buf + pos + 12), attributes=buf[pos + 17], last_offset_delta=last - first,
        base_timestamp=timestamp, max_timestamp=timestamp, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        records_count=n, control_type=None, coordinator_epoch=None, records=records,
    )


cdef Py_ssize_t legacy_run(const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t n, Decoding* opts,
                           _Columns cols) except -1:
    """Columns: the complete magic 0/1 entries from ``pos`` on, decoded by one decode_set call; return their end.

    Column rows need no Batch objects, so a run of messages costs what a message set decode costs."""
    cdef Py_ssize_t row0 = cols.count
    cdef int32_t size
    cdef bint partial
    cdef int64_t last = 0
    cdef Py_ssize_t entries = 1
    while n - end >= 17:  # extend the run over the next complete magic 0/1 entries
        size = load_i32(buf + end + 8)
        if size < MIN_SIZE or buf[end + 16] >= 2 or size > n - end - 12:
            break
        end += 12 + size
        entries += 1
    # an entry is a row (a compressed wrapper's rows are reserved when it is expanded); its value is all but
    # the 26 bytes of the smallest message
    cols.reserve_exact(entries, end - pos - 26 * entries)
    try:
        decode_set(buf + pos, end - pos, None, cols, opts, False, 0, &partial, &last)
    except DecodeError as exc:
        raise type(exc)(exc.reason, (exc.offset or 0) + pos) from None
    cols.add_legacy_extras(row0, -1)
    return end


cdef tuple walk_entries(object owner, const uint8_t* buf, Py_ssize_t n, Decoding* opts, _Columns cols):
    """(batches, valid bytes, partial) of a buffer of any magics (``_walk_entries`` in the pure twin)."""
    cdef Py_ssize_t pos = 0, end
    cdef int32_t size
    cdef int magic
    cdef list batches = []
    while pos < n:
        if n - pos < 12:
            return batches, pos, True
        size = load_i32(buf + pos + 8)
        if size < MIN_SIZE:
            raise DecodeError(f"entry size {size} is below the minimum of {MIN_SIZE}", pos + 8)
        if n - pos < 17:
            return batches, pos, True
        magic = buf[pos + 16]
        if magic == 2 and size < MIN_BATCH_LENGTH:
            raise DecodeError(f"batch length {size} is below the minimum of {MIN_BATCH_LENGTH}", pos + 8)
        if size > n - pos - 12:
            return batches, pos, True
        end = pos + 12 + size
        if magic == 2:
            batches.append(decode_batch(owner, buf, pos, end, opts, cols))
        elif magic < 2 and cols is not None:
            end = legacy_run(buf, pos, end, n, opts, cols)
        elif magic < 2:
            batches.append(legacy_batch(buf, pos, end, opts))
        else:
            raise DecodeError(f"unsupported record magic {magic}", pos + 16)
        pos = end
    return batches, pos, False


cdef void start_decoding(Decoding* opts, bint check_crc, bint flag_crc, Py_ssize_t limit) noexcept:
    opts.check_crc = check_crc
    opts.check_inner_crc = True
    opts.flag_crc = flag_crc
    opts.lazy = False
    opts.count = 0
    opts.limit = limit
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN


def decode_records(data, bint check_crc, Py_ssize_t limit, bint check_inner_crc=True):
    """Decode any concatenation of magic 0, 1 and 2 entries (see :func:`kproto.records.decode_records`)."""
    cdef Decoding opts
    cdef bytes top = data if type(data) is bytes else (<_BufferView>_BufferView(data)).as_bytes()
    start_decoding(&opts, check_crc, False, limit)
    opts.check_inner_crc = check_inner_crc
    batches, valid, partial = walk_entries(top, <const uint8_t*>PyBytes_AS_STRING(top), PyBytes_GET_SIZE(top),
                                           &opts, None)
    return DecodedRecords(batches, valid, partial)


cdef extern from *:
    """
    static PyObject* kproto_alloc_row(PyObject* row_type, Py_ssize_t n) {
        return ((PyTypeObject*)row_type)->tp_alloc((PyTypeObject*)row_type, n);
    }
    """
    object kproto_alloc_row(object row_type, Py_ssize_t n)
    void PyObject_GC_UnTrack(object op)


cdef inline void put_item(object row, Py_ssize_t i, object field):
    Py_INCREF(field)  # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(row, i, field)


def record_rows(records, row_type, topic, partition, int64_t start):
    """The records at or past ``start`` as ``row_type`` rows (see ``record_rows`` in the pure twin).

    A row is allocated as ``row_type`` (a tuple subclass) and filled in place, as ``tuple.__new__`` would
    fill it from a tuple; the fields of a ``Record`` are read from its C struct."""
    cdef list out = []
    cdef Record r
    cdef object row, timestamp, key, value, headers, number
    if not (isinstance(row_type, type) and issubclass(row_type, tuple)):
        raise TypeError(f"row_type must be a tuple subclass, not {row_type!r}")  # tp_alloc below relies on it
    # Rows whose fields are all atoms can be left out of the cyclic collector (see below); a row type with a
    # __dict__ could be made to refer to itself.
    cdef bint untrackable = (row_type.__dictoffset__ == 0 and type(topic) is str and type(partition) is int)
    cdef bint untrack
    for item in records:
        untrack = untrackable and type(item) is Record
        if type(item) is Record:
            r = <Record>item
            number = r.offset
            if number < start:
                continue
            timestamp = None if r._ts_type < 0 else r._timestamp
            key = r.key
            value = r.value
            headers = r.headers
        else:
            number = item.offset
            if number < start:
                continue
            timestamp = item.timestamp
            key = item.key
            value = item.value
            headers = item.headers
        row = kproto_alloc_row(row_type, 7)
        put_item(row, 0, topic)
        put_item(row, 1, partition)
        put_item(row, 2, number)
        put_item(row, 3, timestamp)
        put_item(row, 4, key)
        put_item(row, 5, value)
        put_item(row, 6, headers)
        # A row of a Record holds only str, int, bytes, None and tuples of them and, without a __dict__,
        # cannot be changed to refer to itself: it can never be part of a reference cycle, so the collector
        # need not watch it (CPython stops watching such plain tuples itself, at their first collection,
        # but not tuple subclasses).  Rows live as long as the application keeps them, and would otherwise
        # make every collection walk them and push them into the older generations.
        if untrack:
            PyObject_GC_UnTrack(row)
        out.append(row)
    return out


def decode_record_columns(data, bint check_crc, Py_ssize_t limit):
    """Decode any mix of magics into columns (see :func:`kproto.records.decode_columns`)."""
    cdef Decoding opts
    cdef _Columns cols = _Columns()
    cdef _BufferView held = _BufferView(data)
    start_decoding(&opts, check_crc, not check_crc, limit)
    batches, valid, partial = walk_entries(None, <const uint8_t*>held.view.buf, held.view.len, &opts, cols)
    return cols.build_records(valid, partial)


# --- encoding ----------------------------------------------------------------------------------------------

cdef inline int varint_size(int64_t value) noexcept nogil:
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef int n = 1
    while raw >= 0x80:
        raw >>= 7
        n += 1
    return n


cdef inline Py_ssize_t write_varint(uint8_t* w, int64_t value) noexcept nogil:
    cdef uint64_t raw = (<uint64_t>value << 1) ^ <uint64_t>(value >> 63)
    cdef Py_ssize_t n = 0
    while raw >= 0x80:
        w[n] = <uint8_t>((raw & 0x7F) | 0x80)
        raw >>= 7
        n += 1
    w[n] = <uint8_t>raw
    return n + 1


cdef list normalize_headers(object headers, Py_ssize_t index):
    """Headers as a list of (UTF-8 key bytes, value bytes or None), checked (``_headers`` of the pure twin)."""
    cdef list out = []
    try:
        pairs = [(k, v) for k, v in headers]
    except (TypeError, ValueError):
        raise EncodeError(f"record {index}: headers must be (str, bytes | None) pairs") from None
    for hkey, hvalue in pairs:
        if type(hkey) is str:
            try:
                hkey = (<str>hkey).encode("utf-8")
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
        if hvalue is not None and type(hvalue) is not bytes:
            hvalue = binary_field(hvalue, "header value", index, "record")
        out.append((hkey, hvalue))
    return out


cdef inline const char* header_key_data(object key, Py_ssize_t* length) except NULL:
    """UTF-8 of a checked header key: a str's cached UTF-8 (no copy), or the bytes normalize_headers made."""
    if type(key) is str:
        return PyUnicode_AsUTF8AndSize(key, length)
    length[0] = PyBytes_GET_SIZE(key)
    return PyBytes_AS_STRING(key)


cdef object header_list(object headers, Py_ssize_t index):
    """The headers as they are when they are a list/tuple of (str, bytes | None) tuples whose keys encode
    (the common case: nothing is copied), else normalize_headers' checked copy."""
    cdef Py_ssize_t size
    if type(headers) is list or type(headers) is tuple:
        for pair in headers:
            if type(pair) is not tuple or len(<tuple>pair) != 2 or type((<tuple>pair)[0]) is not str:
                return normalize_headers(headers, index)
            value = (<tuple>pair)[1]
            if value is not None and type(value) is not bytes and type(value) is not bytearray:
                return normalize_headers(headers, index)
            try:
                PyUnicode_AsUTF8AndSize((<tuple>pair)[0], &size)
            except UnicodeEncodeError:
                return normalize_headers(headers, index)
        return headers
    return normalize_headers(headers, index)


cdef enum:
    ENCODE_PRESIZE_MAX = 64 << 20  # the most encode_batch reserves up front from its first record's size


def encode_batch(records, int64_t base_offset, int codec, int64_t producer_id, int producer_epoch,
                 int32_t base_sequence, int attributes, int32_t partition_leader_epoch, int64_t now):
    """One magic 2 batch (see :func:`kproto.records.encode_record_batch`); ``attributes`` without the codec."""
    cdef BytesOut out
    cdef Py_ssize_t index = 0, klen, vlen, hklen, hvlen, length, at, room = 0 if codec else BATCH_HEADER, h, nh
    cdef const char* kptr
    cdef const char* vptr
    cdef const char* hkptr
    cdef const char* hvptr
    cdef int64_t timestamp, base_ts = NO_TIMESTAMP, max_ts = NO_TIMESTAMP, ts_delta
    cdef uint8_t* w
    cdef tuple tup, pair
    cdef object hlist
    out.obj = NULL
    out.size = 0
    out.cap = 0
    try:
        out_reserve(&out, room + 4096)
        out.size = room
        for item in records:
            headers = None
            if type(item) is tuple and 2 <= len(<tuple>item) <= 4:
                tup = <tuple>item
                key = tup[0]
                value = tup[1]
                ts = tup[2] if len(tup) > 2 else None
                if len(tup) == 4:
                    headers = tup[3]
            elif type(item) is tuple:
                raise EncodeError(f"record {index}: a tuple must be (key, value[, timestamp[, headers]])")
            else:
                try:
                    key = item.key
                    value = item.value
                except AttributeError:
                    raise EncodeError(f"record {index}: expected a (key, value[, timestamp[, headers]]) tuple or an "
                                      "object with key and value") from None
                ts = getattr(item, "timestamp", None)
                headers = getattr(item, "headers", None)
            if type(key) is not bytes and key is not None and type(key) is not bytearray:
                key = binary_field(key, "key", index, "record")
            if type(value) is not bytes and value is not None and type(value) is not bytearray:
                value = binary_field(value, "value", index, "record")
            timestamp = now if ts is None else timestamp_field(ts, index, "record")
            if index == 0:
                base_ts = max_ts = timestamp
            elif timestamp > max_ts:
                max_ts = timestamp
            if (base_ts < 0 and timestamp > INT64_MAX + base_ts) or (base_ts > 0 and timestamp < INT64_MIN + base_ts):
                raise EncodeError(f"record {index}: timestamp {timestamp} is too far from the first record's "
                                  f"{base_ts} for an int64 delta")
            ts_delta = timestamp - base_ts
            hlist = header_list(headers, index) if headers else None
            nh = len(hlist) if hlist is not None else 0
            kptr = binary_data(key, &klen)
            vptr = binary_data(value, &vlen)
            if klen > I32_MAX or vlen > I32_MAX:
                raise EncodeError(f"record {index}: key or value longer than 2 GiB")
            length = 1 + varint_size(ts_delta) + varint_size(index) + varint_size(klen) + (klen if klen > 0 else 0)
            length += varint_size(vlen) + (vlen if vlen > 0 else 0) + varint_size(nh)
            for h in range(nh):
                pair = <tuple>hlist[h]
                hkptr = header_key_data(pair[0], &hklen)
                hvptr = binary_data(pair[1], &hvlen)
                length += varint_size(hklen) + hklen + varint_size(hvlen) + (hvlen if hvlen > 0 else 0)
            if length > I32_MAX:
                raise EncodeError(f"record {index}: larger than 2 GiB")
            if index == 0 and (type(records) is list or type(records) is tuple):
                # Producers batch records of one shape: size the buffer for all of them at once, so it is not
                # copied at every doubling on the way (and, past glibc's mmap threshold, fresh pages are not
                # faulted in at each copy). Capped, and only virtual until written: a wrong guess costs
                # nothing but the growth it was meant to save.
                out_reserve(&out, min(len(records) * (5 + length), ENCODE_PRESIZE_MAX))
            w = out_reserve(&out, 5 + length)
            at = write_varint(w, length)
            w[at] = 0
            at += 1
            at += write_varint(w + at, ts_delta)
            at += write_varint(w + at, index)
            at += write_varint(w + at, klen)
            if klen > 0:
                memcpy(w + at, kptr, <size_t>klen)
                at += klen
            at += write_varint(w + at, vlen)
            if vlen > 0:
                memcpy(w + at, vptr, <size_t>vlen)
                at += vlen
            at += write_varint(w + at, nh)
            for h in range(nh):
                pair = <tuple>hlist[h]
                hkptr = header_key_data(pair[0], &hklen)
                hvptr = binary_data(pair[1], &hvlen)
                at += write_varint(w + at, hklen)
                memcpy(w + at, hkptr, <size_t>hklen)
                at += hklen
                at += write_varint(w + at, hvlen)
                if hvlen > 0:
                    memcpy(w + at, hvptr, <size_t>hvlen)
                    at += hvlen
            out.size += at
            index += 1
        if index == 0:
            return b""
        if index - 1 > INT64_MAX - base_offset:
            raise EncodeError(f"offsets from {base_offset} for {index} records do not fit int64")
        if codec:
            body = out_finish(&out)
            body = compress_buffer(codec, body, magic=2)
            blen = len(body)
            out.size = 0
            out.cap = 0  # out_finish handed the records' buffer over: start a new one
            w = out_reserve(&out, BATCH_HEADER + blen)
            memcpy(w + BATCH_HEADER, <char*>body if type(body) is bytes else PyByteArray_AS_STRING(body), blen)
            out.size = BATCH_HEADER + blen
        if out.size - 12 > I32_MAX:
            raise EncodeError("batch larger than 2 GiB")
        w = <uint8_t*>PyBytes_AS_STRING(<object>out.obj)
        store_i64(w, base_offset)
        store_u32(w + 8, <uint32_t>(out.size - 12))
        store_u32(w + 12, <uint32_t>partition_leader_epoch)
        w[16] = 2
        w[21] = <uint8_t>((attributes | codec) >> 8)
        w[22] = <uint8_t>(attributes | codec)
        store_u32(w + 23, <uint32_t>(index - 1))
        store_i64(w + 27, base_ts)
        store_i64(w + 35, max_ts)
        store_i64(w + 43, producer_id)
        w[51] = <uint8_t>(<uint16_t>producer_epoch >> 8)
        w[52] = <uint8_t>producer_epoch
        store_u32(w + 53, <uint32_t>base_sequence)
        store_u32(w + 57, <uint32_t>index)
        store_u32(w + 17, crc32c_of(w + CRC_FROM, out.size - CRC_FROM))
        return out_finish(&out)
    finally:
        Py_XDECREF(out.obj)

