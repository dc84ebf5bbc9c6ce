# What the record batch (magic 2) module takes from the message set (magic 0/1) module: the message class
# it converts, the decode state and the walk over a run of legacy messages, and the shared field checks.
cimport cython
from libc.stdint cimport int64_t, uint8_t, uint32_t

from kproto._fast._columns cimport _Columns

cdef enum:
    MIN_SIZE = 14
    MIN_SIZE_V1 = 22
    CODEC_MASK = 0x07
    TS_TYPE_BIT = 0x08


cdef struct Decoding:
    bint check_crc
    bint check_inner_crc  # with check_crc: also the messages inside compressed wrappers (magic 0/1)
    bint flag_crc      # columns: compute every CRC and record it instead of raising
    bint lazy          # validate only; messages are built later by _MessageIterator
    Py_ssize_t limit   # decompressed bytes this call may still produce (the cap covers the whole set)
    Py_ssize_t count   # messages seen (lazy mode)
    int inner_magics   # bit per magic seen among the current wrapper's inner messages
    int64_t inner_max_offset  # largest inner offset of the current wrapper


@cython.final
cdef class LegacyRecord:
    cdef readonly object key
    cdef readonly object value
    cdef readonly object offset
    cdef int64_t _timestamp
    cdef readonly int magic
    cdef readonly int attributes
    cdef int _codec
    cdef int _timestamp_type  # -1: none (magic 0)
    cdef readonly uint32_t crc


cdef class _BufferView:
    cdef Py_buffer view
    cdef bint held

    cdef bytes as_bytes(self)


cdef int expose_slot(type cls, object probe, object marker, const char* name, const char* doc) except -1
cdef Py_ssize_t decode_set(const uint8_t* buf, Py_ssize_t n, list out, _Columns cols, Decoding* opts,
                           bint inner, int carrier_codec, bint* partial, int64_t* last_offset) except -1
cdef object binary_field(object field, str name, Py_ssize_t index, str noun=*)
cdef int64_t timestamp_field(object timestamp, Py_ssize_t index, str noun=*) except? -2
