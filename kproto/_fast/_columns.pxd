# The columnar decode buffers shared by the message set (magic 0/1) and record batch (magic 2) decoders.
cimport cython
from cpython cimport array as carray
from cpython.object cimport PyObject
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy

cdef struct DataBuf:
    # A bytes object grown in place (refcount 1, never exposed before _Columns.finish): its data is the
    # column, so finishing the column is one shrinking realloc, not a copy.
    PyObject* obj
    char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int data_grow(DataBuf* d, Py_ssize_t need) except -1


cdef inline int data_put(DataBuf* d, const uint8_t* p, Py_ssize_t n) except -1:
    if n > d.cap - d.size:
        data_grow(d, d.size + n)
    memcpy(d.data + d.size, p, <size_t>n)
    d.size += n
    return 0


@cython.final
cdef class _Columns:
    cdef carray.array a_offsets, a_timestamps, a_magics, a_attributes, a_codecs, a_crc_ok
    cdef carray.array a_key_bounds, a_key_null, a_value_bounds, a_value_null
    cdef carray.array a_ts_types, a_producer_ids, a_producer_epochs, a_sequences, a_transactional, a_control
    cdef carray.array a_batch_offsets, a_leader_epochs, a_header_starts
    cdef carray.array a_hkey_bounds, a_hvalue_bounds, a_hvalue_null
    cdef int64_t* offsets
    cdef int64_t* timestamps
    cdef int8_t* magics
    cdef int8_t* attributes
    cdef int8_t* codecs
    cdef uint8_t* crc_ok
    cdef int32_t* key_bounds
    cdef uint8_t* key_null
    cdef int32_t* value_bounds
    cdef uint8_t* value_null
    cdef int8_t* ts_types
    cdef int64_t* producer_ids
    cdef int16_t* producer_epochs
    cdef int32_t* sequences
    cdef uint8_t* transactional
    cdef uint8_t* control
    cdef int64_t* batch_offsets
    cdef int32_t* leader_epochs
    cdef int32_t* header_starts
    cdef int32_t* hkey_bounds
    cdef int32_t* hvalue_bounds
    cdef uint8_t* hvalue_null
    cdef DataBuf key_data, value_data, hkey_data, hvalue_data
    cdef Py_ssize_t count, cap, hcap
    cdef int32_t header_count

    cdef void point_rows(self) noexcept
    cdef void point_headers(self) noexcept
    cdef int resize_rows(self, Py_ssize_t cap) except -1
    cdef int grow_rows(self, Py_ssize_t need) except -1
    cdef int resize_headers(self, Py_ssize_t cap) except -1
    cdef int reserve(self, Py_ssize_t rows, Py_ssize_t data) except -1
    cdef int reserve_exact(self, Py_ssize_t rows, Py_ssize_t data) except -1
    cdef int add_header(self, const uint8_t* key, Py_ssize_t klen, const uint8_t* value,
                        Py_ssize_t vlen) except -1
    cdef void add_extras(self, int ts_type, int64_t producer_id, int producer_epoch, int32_t sequence,
                         bint transactional, bint control, int64_t batch_offset,
                         int32_t leader_epoch) noexcept
    cdef void add_legacy_extras(self, Py_ssize_t row0, int64_t batch_offset) noexcept
    cdef void fill_batch(self, Py_ssize_t row0, int codec, bint crc_ok, int ts_type, int64_t producer_id,
                         int producer_epoch, bint transactional, bint control, int64_t batch_offset,
                         int32_t leader_epoch) noexcept
    cdef int add_row(self, int64_t offset, int64_t timestamp, int magic, int attributes, int codec,
                     bint crc_ok, const uint8_t* key, Py_ssize_t klen, const uint8_t* value,
                     Py_ssize_t vlen) except -1
    cdef int finish(self) except -1
    cdef dict message_columns(self, Py_ssize_t valid, bint partial)
    cdef object build(self, Py_ssize_t valid, bint partial)
    cdef object build_records(self, Py_ssize_t valid, bint partial)
