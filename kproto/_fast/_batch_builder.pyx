# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Magic 2 record batches from columns, compiled; ``kproto.records.batch_builder`` is the pure-Python twin
(same functions, same bytes, same errors) and says why columns.

The work is two C loops over the columns: the first checks every record and measures it (varint widths,
key, value, the header section), the second writes the batch into one ``bytes`` made at its final size;
the CRC-32C then runs over it in place (``kproto._fast._checksums``).  Headers are rare on the hot path, so a record's
header section is built as a Python ``bytes`` first, by the twin's own function.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM
from cpython.long cimport PyLong_AsLongLong
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from libc.stdint cimport INT32_MAX, INT64_MAX, INT64_MIN, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kproto._fast._checksums cimport crc32c_of

from kproto.errors import EncodeError
from kproto.records.batch_builder import _header_section  # Python-level work either way: one copy of it
from kproto.records.compression import compress_buffer

__all__ = ["check_columns", "encode_columns", "section"]


cdef enum:
    _HEAD = 61  # the batch header's size
    _CRC_AT = 17  # the CRC-32C's offset; it covers the batch from _CRC_AT + 4 on


cdef inline uint64_t _zz(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline Py_ssize_t _width(uint64_t n) noexcept nogil:
    cdef Py_ssize_t w = 1
    while n > 0x7F:
        n >>= 7
        w += 1
    return w


cdef inline char* _put_varint(char* p, uint64_t n) noexcept nogil:
    while n > 0x7F:
        p[0] = <char>((n & 0x7F) | 0x80)
        p += 1
        n >>= 7
    p[0] = <char>n
    return p + 1


cdef inline char* _put_be(char* p, uint64_t v, int size) noexcept nogil:
    cdef int i
    for i in range(size - 1, -1, -1):
        p[i] = <char>(v & 0xFF)
        v >>= 8
    return p + size


cdef bytes _zigzag(int64_t value):
    cdef char buf[10]
    cdef char* end = _put_varint(buf, _zz(value))
    return PyBytes_FromStringAndSize(buf, end - buf)


def check_columns(keys, values, timestamps, headers):
    """The record count, once the columns are lists of one length."""
    cdef Py_ssize_t count = len(values)
    for name, column in (("keys", keys), ("timestamps", timestamps), ("headers", headers)):
        if column is not None and len(column) != count:
            raise EncodeError(f"{len(column)} {name} for {count} values: the columns must have one length")
    return count


cdef bytes _binary(object field, str name, Py_ssize_t index):
    if field is None:
        return b"\x01"
    if not PyBytes_CheckExact(field):
        raise EncodeError(f"record {index}: the {name} is {type(field).__name__}, not bytes or None")
    return _zigzag(PyBytes_GET_SIZE(field)) + field


cdef int64_t _timestamp(object timestamp, Py_ssize_t index) except? -1:
    if type(timestamp) is not int:
        raise EncodeError(f"record {index}: timestamp {timestamp!r} is not an int64")
    try:
        return PyLong_AsLongLong(timestamp)
    except OverflowError:
        raise EncodeError(f"record {index}: timestamp {timestamp!r} is not an int64") from None


cdef class _Layout:
    """What the first pass learns: every record's body length and timestamp delta, the header sections,
    the section's size and the base and max timestamps."""

    cdef Py_ssize_t count, size
    cdef int64_t base_ts, max_ts
    cdef int64_t* bodies
    cdef int64_t* deltas
    cdef list keys, values, sections

    def __dealloc__(self):
        PyMem_Free(self.bodies)
        PyMem_Free(self.deltas)


cdef inline Py_ssize_t _field_width(PyObject* field) noexcept:
    if field == <PyObject*>None:
        return 1
    cdef Py_ssize_t n = PyBytes_GET_SIZE(<object>field)
    return _width(_zz(n)) + n


cdef _Layout _measure(keys, values, timestamps, headers):
    cdef _Layout lay = _Layout()
    cdef Py_ssize_t count = check_columns(keys, values, timestamps, headers)
    cdef Py_ssize_t i
    cdef int64_t ts, body
    cdef object item
    cdef list stamps = timestamps if type(timestamps) is list else list(timestamps)
    lay.count = count
    lay.values = values if type(values) is list else list(values)
    lay.keys = None if keys is None else (keys if type(keys) is list else list(keys))
    if count == 0:
        lay.base_ts = lay.max_ts = -1
        return lay
    if count > INT32_MAX:
        raise EncodeError(f"{count} records do not fit one batch")
    lay.bodies = <int64_t*>PyMem_Malloc(count * sizeof(int64_t))
    lay.deltas = <int64_t*>PyMem_Malloc(count * sizeof(int64_t))
    if lay.bodies == NULL or lay.deltas == NULL:
        raise MemoryError()
    if headers is not None:
        lay.sections = [_header_section(headers[i], i) for i in range(count)]
    lay.base_ts = lay.max_ts = _timestamp(<object>PyList_GET_ITEM(stamps, 0), 0)
    for i in range(count):
        ts = _timestamp(<object>PyList_GET_ITEM(stamps, i), i)
        if ts > lay.max_ts:
            lay.max_ts = ts
        if (lay.base_ts > 0 and ts < INT64_MIN + lay.base_ts) or (lay.base_ts < 0 and ts > INT64_MAX + lay.base_ts):
            raise EncodeError(
                f"record {i}: timestamp {ts} is too far from the first record's {lay.base_ts} for an int64 delta"
            )
        lay.deltas[i] = ts - lay.base_ts
        item = <object>PyList_GET_ITEM(lay.values, i)
        if item is not None and not PyBytes_CheckExact(item):
            _binary(item, "value", i)  # raises
        body = 1 + _width(_zz(lay.deltas[i])) + _width(_zz(i)) + _field_width(<PyObject*>item)
        if lay.keys is None:
            body += 1
        else:
            item = <object>PyList_GET_ITEM(lay.keys, i)
            if item is not None and not PyBytes_CheckExact(item):
                _binary(item, "key", i)  # raises
            body += _field_width(<PyObject*>item)
        if lay.sections is None:
            body += 1
        else:
            body += PyBytes_GET_SIZE(<object>PyList_GET_ITEM(lay.sections, i))
        if body > INT32_MAX:
            raise EncodeError(f"record {i}: larger than 2 GiB")
        lay.bodies[i] = body
        lay.size += _width(_zz(body)) + body
    return lay


cdef inline char* _put_field(char* p, PyObject* field) noexcept:
    if field == <PyObject*>None:
        p[0] = 1
        return p + 1
    cdef Py_ssize_t n = PyBytes_GET_SIZE(<object>field)
    p = _put_varint(p, _zz(n))
    memcpy(p, PyBytes_AS_STRING(<object>field), n)
    return p + n


cdef void _write(_Layout lay, char* p):
    cdef Py_ssize_t i, n
    cdef object sect
    for i in range(lay.count):
        p = _put_varint(p, _zz(lay.bodies[i]))
        p[0] = 0
        p = _put_varint(p + 1, _zz(lay.deltas[i]))
        p = _put_varint(p, _zz(i))
        if lay.keys is None:
            p[0] = 1
            p += 1
        else:
            p = _put_field(p, PyList_GET_ITEM(lay.keys, i))
        p = _put_field(p, PyList_GET_ITEM(lay.values, i))
        if lay.sections is None:
            p[0] = 0
            p += 1
        else:
            sect = <object>PyList_GET_ITEM(lay.sections, i)
            n = PyBytes_GET_SIZE(sect)
            memcpy(p, PyBytes_AS_STRING(sect), n)
            p += n


def section(keys, values, timestamps, headers):
    """The records section of a batch: (its bytes, the record count, the base and the max timestamp).

    Offset deltas are 0, 1, ...; timestamp deltas are taken from the first record's, as Kafka's producers
    write them."""
    cdef _Layout lay = _measure(keys, values, timestamps, headers)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, lay.size)
    _write(lay, PyBytes_AS_STRING(out))
    return out, lay.count, lay.base_ts, lay.max_ts


def encode_columns(
    keys,
    values,
    timestamps,
    headers,
    int64_t base_offset,
    int codec,
    int64_t producer_id,
    int producer_epoch,
    int base_sequence,
    int attributes,
    int partition_leader_epoch,
):
    """One magic 2 batch of the records in the columns (``b""`` for none); ``codec`` is the codec's id
    (:func:`kproto.records.format.codec_id`), applied to the records section; ``attributes`` are the
    batch's other attribute bits."""
    cdef _Layout lay = _measure(keys, values, timestamps, headers)
    cdef Py_ssize_t count = lay.count
    cdef const unsigned char[::1] payload
    cdef Py_ssize_t size
    cdef bytes out
    cdef char* p
    cdef uint32_t crc
    if count == 0:
        return b""
    if count - 1 > INT64_MAX - base_offset:
        raise EncodeError(f"offsets from {base_offset} for {count} records do not fit int64")
    if codec:
        records = PyBytes_FromStringAndSize(NULL, lay.size)
        _write(lay, PyBytes_AS_STRING(records))
        compressed = compress_buffer(codec, records, magic=2)
        payload = compressed
        size = payload.shape[0]
    else:
        size = lay.size
    if size + _HEAD - 12 > INT32_MAX:
        raise EncodeError("batch larger than 2 GiB")
    out = PyBytes_FromStringAndSize(NULL, _HEAD + size)
    p = PyBytes_AS_STRING(out)
    if codec:
        if size:
            memcpy(p + _HEAD, &payload[0], size)
    else:
        _write(lay, p + _HEAD)
    p = _put_be(p, <uint64_t>base_offset, 8)
    p = _put_be(p, <uint64_t>(size + _HEAD - 12), 4)
    p = _put_be(p, <uint64_t><int64_t>partition_leader_epoch, 4)
    p[0] = 2
    p += 5  # magic, then the CRC, written last
    p = _put_be(p, <uint64_t>((attributes | codec) & 0xFFFF), 2)
    p = _put_be(p, <uint64_t>(count - 1), 4)
    p = _put_be(p, <uint64_t>lay.base_ts, 8)
    p = _put_be(p, <uint64_t>lay.max_ts, 8)
    p = _put_be(p, <uint64_t>producer_id, 8)
    p = _put_be(p, <uint64_t><int64_t>producer_epoch, 2)
    p = _put_be(p, <uint64_t><int64_t>base_sequence, 4)
    _put_be(p, <uint64_t>count, 4)
    p = PyBytes_AS_STRING(out)
    crc = crc32c_of(<const uint8_t*>p + _CRC_AT + 4, _HEAD + size - _CRC_AT - 4)
    _put_be(p + _CRC_AT, crc, 4)
    return out
