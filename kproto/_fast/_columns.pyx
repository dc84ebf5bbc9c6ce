# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled columnar decode: the buffers ``decode_columns`` (:mod:`kproto._fast._legacy_records`) and
``decode_record_columns`` (:mod:`kproto._fast._default_records`) fill row by row, with no Python object per
row, and hand out as the columns of :class:`kproto.records.decoded.MessageColumns` and
:class:`~kproto.records.decoded.RecordColumns`.  The pure twins build their columns from lists instead, so
this module has no pure counterpart.
"""

cimport cython
from cpython cimport array as carray
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, _PyBytes_Resize
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.string cimport memcpy, memset

from array import array

from kproto.errors import LimitExceededError
from kproto.records.decoded import MessageColumns, RecordColumns

from kproto._fast._bytes cimport I32_MAX


cdef int data_grow(DataBuf* d, Py_ssize_t need) except -1:
    """Room for ``need`` bytes in all: at least double, never past what int32 Arrow offsets hold."""
    cdef Py_ssize_t cap
    cdef PyObject* obj
    if need > I32_MAX:
        raise LimitExceededError("decoded keys or values exceed 2 GiB, more than int32 column offsets hold")
    cap = d.cap * 2 if d.cap * 2 > need else need
    if cap > I32_MAX:
        cap = I32_MAX
    if cap < 256:
        cap = 256
    if d.obj == NULL:
        fresh = PyBytes_FromStringAndSize(NULL, cap)
        Py_INCREF(fresh)  # the DataBuf's own reference, released by data_finish or _Columns.__dealloc__
        d.obj = <PyObject*>fresh
    else:
        obj = d.obj
        d.obj = NULL
        _PyBytes_Resize(&obj, cap)  # on failure it frees the object and raises
        d.obj = obj
    d.data = PyBytes_AS_STRING(<object>d.obj)
    d.cap = cap
    return 0


cdef object data_finish(DataBuf* d):
    """The column as bytes (the buffer itself, shrunk to its size); the DataBuf is empty afterwards."""
    cdef PyObject* obj = d.obj
    cdef Py_ssize_t size = d.size
    if obj == NULL:
        return b""
    d.obj = NULL
    d.data = NULL
    d.cap = d.size = 0
    _PyBytes_Resize(&obj, size)  # shrinking in place; on failure it frees the object and raises
    result = <object>obj
    Py_XDECREF(obj)  # the reference the DataBuf held is now result's
    return result


cdef carray.array TEMPLATE_Q = array("q")
cdef carray.array TEMPLATE_I = array("i")
cdef carray.array TEMPLATE_H = array("h")
cdef carray.array TEMPLATE_B = array("b")
cdef carray.array TEMPLATE_UB = array("B")


@cython.final
cdef class _Columns:
    """Column buffers filled by the decoder, row by row, with no Python object per row.

    Every column is the ``array``/``bytes`` object the result hands out, written through a C pointer and
    grown in place (rows: all per-row columns together, to ``cap`` rows); :meth:`finish` shrinks them to
    their size, so the result holds the decoder's buffers, not copies."""

    def __cinit__(self):
        self.a_offsets = carray.clone(TEMPLATE_Q, 0, False)
        self.a_timestamps = carray.clone(TEMPLATE_Q, 0, False)
        self.a_magics = carray.clone(TEMPLATE_B, 0, False)
        self.a_attributes = carray.clone(TEMPLATE_B, 0, False)
        self.a_codecs = carray.clone(TEMPLATE_B, 0, False)
        self.a_crc_ok = carray.clone(TEMPLATE_UB, 0, False)
        self.a_key_bounds = carray.clone(TEMPLATE_I, 1, True)  # Arrow offsets start with a 0
        self.a_key_null = carray.clone(TEMPLATE_UB, 0, False)
        self.a_value_bounds = carray.clone(TEMPLATE_I, 1, True)
        self.a_value_null = carray.clone(TEMPLATE_UB, 0, False)
        self.a_ts_types = carray.clone(TEMPLATE_B, 0, False)
        self.a_producer_ids = carray.clone(TEMPLATE_Q, 0, False)
        self.a_producer_epochs = carray.clone(TEMPLATE_H, 0, False)
        self.a_sequences = carray.clone(TEMPLATE_I, 0, False)
        self.a_transactional = carray.clone(TEMPLATE_UB, 0, False)
        self.a_control = carray.clone(TEMPLATE_UB, 0, False)
        self.a_batch_offsets = carray.clone(TEMPLATE_Q, 0, False)
        self.a_leader_epochs = carray.clone(TEMPLATE_I, 0, False)
        self.a_header_starts = carray.clone(TEMPLATE_I, 1, True)
        self.a_hkey_bounds = carray.clone(TEMPLATE_I, 1, True)
        self.a_hvalue_bounds = carray.clone(TEMPLATE_I, 1, True)
        self.a_hvalue_null = carray.clone(TEMPLATE_UB, 0, False)
        self.point_rows()
        self.point_headers()

    def __dealloc__(self):
        Py_XDECREF(self.key_data.obj)
        Py_XDECREF(self.value_data.obj)
        Py_XDECREF(self.hkey_data.obj)
        Py_XDECREF(self.hvalue_data.obj)

    cdef void point_rows(self) noexcept:
        self.offsets = <int64_t*>self.a_offsets.data.as_voidptr
        self.timestamps = <int64_t*>self.a_timestamps.data.as_voidptr
        self.magics = <int8_t*>self.a_magics.data.as_voidptr
        self.attributes = <int8_t*>self.a_attributes.data.as_voidptr
        self.codecs = <int8_t*>self.a_codecs.data.as_voidptr
        self.crc_ok = <uint8_t*>self.a_crc_ok.data.as_voidptr
        self.key_bounds = <int32_t*>self.a_key_bounds.data.as_voidptr
        self.key_null = <uint8_t*>self.a_key_null.data.as_voidptr
        self.value_bounds = <int32_t*>self.a_value_bounds.data.as_voidptr
        self.value_null = <uint8_t*>self.a_value_null.data.as_voidptr
        self.ts_types = <int8_t*>self.a_ts_types.data.as_voidptr
        self.producer_ids = <int64_t*>self.a_producer_ids.data.as_voidptr
        self.producer_epochs = <int16_t*>self.a_producer_epochs.data.as_voidptr
        self.sequences = <int32_t*>self.a_sequences.data.as_voidptr
        self.transactional = <uint8_t*>self.a_transactional.data.as_voidptr
        self.control = <uint8_t*>self.a_control.data.as_voidptr
        self.batch_offsets = <int64_t*>self.a_batch_offsets.data.as_voidptr
        self.leader_epochs = <int32_t*>self.a_leader_epochs.data.as_voidptr
        self.header_starts = <int32_t*>self.a_header_starts.data.as_voidptr

    cdef void point_headers(self) noexcept:
        self.hkey_bounds = <int32_t*>self.a_hkey_bounds.data.as_voidptr
        self.hvalue_bounds = <int32_t*>self.a_hvalue_bounds.data.as_voidptr
        self.hvalue_null = <uint8_t*>self.a_hvalue_null.data.as_voidptr

    cdef int resize_rows(self, Py_ssize_t cap) except -1:
        """Make every per-row column ``cap`` rows long (the offsets columns ``cap + 1``)."""
        carray.resize(self.a_offsets, cap)
        carray.resize(self.a_timestamps, cap)
        carray.resize(self.a_magics, cap)
        carray.resize(self.a_attributes, cap)
        carray.resize(self.a_codecs, cap)
        carray.resize(self.a_crc_ok, cap)
        carray.resize(self.a_key_bounds, cap + 1)
        carray.resize(self.a_key_null, cap)
        carray.resize(self.a_value_bounds, cap + 1)
        carray.resize(self.a_value_null, cap)
        carray.resize(self.a_ts_types, cap)
        carray.resize(self.a_producer_ids, cap)
        carray.resize(self.a_producer_epochs, cap)
        carray.resize(self.a_sequences, cap)
        carray.resize(self.a_transactional, cap)
        carray.resize(self.a_control, cap)
        carray.resize(self.a_batch_offsets, cap)
        carray.resize(self.a_leader_epochs, cap)
        carray.resize(self.a_header_starts, cap + 1)
        self.cap = cap
        self.point_rows()
        return 0

    cdef int grow_rows(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = self.cap * 2
        if cap < need:
            cap = need
        if cap < 64:
            cap = 64
        return self.resize_rows(cap)

    cdef int resize_headers(self, Py_ssize_t cap) except -1:
        carray.resize(self.a_hkey_bounds, cap + 1)
        carray.resize(self.a_hvalue_bounds, cap + 1)
        carray.resize(self.a_hvalue_null, cap)
        self.hcap = cap
        self.point_headers()
        return 0

    cdef int reserve(self, Py_ssize_t rows, Py_ssize_t data) except -1:
        """Room for ``rows`` more rows and ``data`` more value bytes, before a batch of records is added.

        ``rows`` comes from a batch header, so it is trusted no further than ``data`` allows: a magic 2
        record takes at least 7 bytes."""
        if rows > data // 7:
            rows = data // 7
        return self.reserve_exact(rows, data)

    cdef int reserve_exact(self, Py_ssize_t rows, Py_ssize_t data) except -1:
        """Room for ``rows`` more rows (counted, not claimed) and ``data`` more value bytes (a hint: never
        past the 2 GiB a column holds, which data_put enforces as values arrive)."""
        if self.count + rows > self.cap:
            self.grow_rows(self.count + rows)
        if data > I32_MAX - self.value_data.size:
            data = I32_MAX - self.value_data.size
        if data > self.value_data.cap - self.value_data.size:
            data_grow(&self.value_data, self.value_data.size + data)
        return 0

    cdef int add_header(self, const uint8_t* key, Py_ssize_t klen, const uint8_t* value,
                        Py_ssize_t vlen) except -1:
        cdef Py_ssize_t j = self.header_count
        if j >= self.hcap:
            self.resize_headers(2 * self.hcap if 2 * self.hcap > 64 else 64)
        data_put(&self.hkey_data, key, klen)
        self.hkey_bounds[j + 1] = <int32_t>self.hkey_data.size
        if vlen >= 0:
            data_put(&self.hvalue_data, value, vlen)
        self.hvalue_bounds[j + 1] = <int32_t>self.hvalue_data.size
        self.hvalue_null[j] = vlen < 0
        self.header_count = <int32_t>(j + 1)
        return 0

    cdef void add_extras(self, int ts_type, int64_t producer_id, int producer_epoch, int32_t sequence,
                         bint transactional, bint control, int64_t batch_offset,
                         int32_t leader_epoch) noexcept:
        """The magic 2 columns of the row add_row just added (and its headers, added since)."""
        cdef Py_ssize_t i = self.count - 1
        self.ts_types[i] = <int8_t>ts_type
        self.producer_ids[i] = producer_id
        self.producer_epochs[i] = <int16_t>producer_epoch
        self.sequences[i] = sequence
        self.transactional[i] = transactional
        self.control[i] = control
        self.batch_offsets[i] = batch_offset
        self.leader_epochs[i] = leader_epoch
        self.header_starts[i + 1] = self.header_count

    cdef void add_legacy_extras(self, Py_ssize_t row0, int64_t batch_offset) noexcept:
        """The magic 2 columns of message set rows ``row0`` .. ``count - 1``: none of them apply."""
        cdef Py_ssize_t i
        for i in range(row0, self.count):
            self.ts_types[i] = -1 if self.magics[i] == 0 else (self.attributes[i] >> 3) & 1
            self.producer_ids[i] = -1
            self.producer_epochs[i] = -1
            self.sequences[i] = -1
            self.transactional[i] = 0
            self.control[i] = 0
            self.batch_offsets[i] = batch_offset
            self.leader_epochs[i] = -1
            self.header_starts[i + 1] = self.header_count

    cdef void fill_batch(self, Py_ssize_t row0, int codec, bint crc_ok, int ts_type, int64_t producer_id,
                         int producer_epoch, bint transactional, bint control, int64_t batch_offset,
                         int32_t leader_epoch) noexcept:
        """The columns of a magic 2 batch's rows ``row0`` .. ``count - 1`` that are the batch's, not the record's."""
        cdef Py_ssize_t i, n = self.count - row0
        if n <= 0:
            return
        memset(self.magics + row0, 2, <size_t>n)
        memset(self.codecs + row0, codec, <size_t>n)
        memset(self.crc_ok + row0, 1 if crc_ok else 0, <size_t>n)
        memset(self.ts_types + row0, ts_type, <size_t>n)
        memset(self.transactional + row0, 1 if transactional else 0, <size_t>n)
        memset(self.control + row0, 1 if control else 0, <size_t>n)
        for i in range(row0, self.count):
            self.producer_ids[i] = producer_id
            self.producer_epochs[i] = <int16_t>producer_epoch
            self.batch_offsets[i] = batch_offset
            self.leader_epochs[i] = leader_epoch

    cdef int add_row(self, int64_t offset, int64_t timestamp, int magic, int attributes, int codec,
                     bint crc_ok, const uint8_t* key, Py_ssize_t klen, const uint8_t* value,
                     Py_ssize_t vlen) except -1:
        cdef Py_ssize_t i = self.count
        if i >= self.cap:
            self.grow_rows(i + 1)
        self.offsets[i] = offset
        self.timestamps[i] = timestamp
        self.magics[i] = <int8_t>magic
        self.attributes[i] = <int8_t>attributes
        self.codecs[i] = <int8_t>codec
        self.crc_ok[i] = crc_ok
        if klen > 0:
            data_put(&self.key_data, key, klen)
        self.key_bounds[i + 1] = <int32_t>self.key_data.size
        self.key_null[i] = klen < 0
        if vlen > 0:
            data_put(&self.value_data, value, vlen)
        self.value_bounds[i + 1] = <int32_t>self.value_data.size
        self.value_null[i] = vlen < 0
        self.count = i + 1
        return 0

    cdef int finish(self) except -1:
        """Shrink every column to its size (the result takes the objects as they are)."""
        if self.cap != self.count:
            self.resize_rows(self.count)
        if self.hcap != self.header_count:
            self.resize_headers(self.header_count)
        return 0

    cdef dict message_columns(self, Py_ssize_t valid, bint partial):
        """The finished columns every magic has: MessageColumns' arguments, and the first of RecordColumns'."""
        self.finish()
        return dict(
            count=self.count,
            offsets=self.a_offsets,
            timestamps=self.a_timestamps,
            magics=self.a_magics,
            attributes=self.a_attributes,
            codecs=self.a_codecs,
            crc_ok=self.a_crc_ok,
            key_data=data_finish(&self.key_data),
            key_offsets=self.a_key_bounds,
            key_null=self.a_key_null,
            value_data=data_finish(&self.value_data),
            value_offsets=self.a_value_bounds,
            value_null=self.a_value_null,
            valid_bytes=valid,
            partial=partial,
        )

    cdef object build(self, Py_ssize_t valid, bint partial):
        return MessageColumns(**self.message_columns(valid, partial))

    cdef object build_records(self, Py_ssize_t valid, bint partial):
        return RecordColumns(
            **self.message_columns(valid, partial),
            timestamp_types=self.a_ts_types,
            producer_ids=self.a_producer_ids,
            producer_epochs=self.a_producer_epochs,
            sequences=self.a_sequences,
            transactional=self.a_transactional,
            control=self.a_control,
            batch_offsets=self.a_batch_offsets,
            leader_epochs=self.a_leader_epochs,
            header_starts=self.a_header_starts,
            header_key_data=data_finish(&self.hkey_data),
            header_key_offsets=self.a_hkey_bounds,
            header_value_data=data_finish(&self.hvalue_data),
            header_value_offsets=self.a_hvalue_bounds,
            header_value_null=self.a_hvalue_null,
        )

