# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled message set codec: the twin of :mod:`kproto.records._pure`.

Same names, same results, same error class and offset for the same input.  ``decode`` validates the whole
set in one pass over the buffer (every length checked against the bytes left before it is used, integers
loaded byte by byte, no unaligned casts, CRC32 on the pointer) and returns a lazy sequence that builds each
:class:`LegacyRecord` when iteration reaches it, so a consumer's loop reuses the memory of the previous message.
``decode_columns`` writes C column buffers with no per-message objects.  Per-wrapper work (decompression)
goes through the shared Python codecs in :mod:`kproto.records.compression`.

Within the records layer this core sits above the modules it calls -- the codecs of
:mod:`kproto.records.compression` and the result classes of :mod:`kproto.records.decoded`, which import
nothing of the core -- and below :mod:`kproto._backend` and the public API of :mod:`kproto.records.codec`.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.bytes cimport _PyBytes_Resize
from cpython cimport array as carray
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

from array import array

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.compression import compress_buffer, decompress_buffer
from kproto.records.decoded import Batch, DecodedRecords, MessageColumns, MessageSet, RecordColumns

from kproto._fast._crc cimport (kproto_crc_init, kproto_crc32, kproto_crc32_set_clmul, kproto_crc32c,
                                kproto_crc32c_hw_available, kproto_crc32c_set_hw)

cdef enum:
    MIN_SIZE = 14
    MIN_SIZE_V1 = 22
    CODEC_MASK = 0x07
    TS_TYPE_BIT = 0x08

cdef int64_t NO_TIMESTAMP = -1
cdef int64_t I32_MAX = 2147483647
cdef dict CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4"}
cdef dict CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
cdef tuple CODEC_NAME_BY_ID = (None, "gzip", "snappy", "lz4", "zstd", None, None, None)


cdef inline int32_t load_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline uint32_t load_u32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int64_t load_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>load_u32(p) << 32) | <uint64_t>load_u32(p + 4))


cdef inline void store_u32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void store_i64(uint8_t* p, int64_t v) noexcept nogil:
    store_u32(p, <uint32_t>(<uint64_t>v >> 32))
    store_u32(p + 4, <uint32_t>(<uint64_t>v & 0xFFFFFFFFu))


# The CRC routes live in _crc.c (CRC-32 through zlib, slicing tables or carry-less multiplication; CRC-32C
# through the CPU's instruction or tables): filled and chosen once, at import.
kproto_crc_init()


cdef inline uint32_t crc_of(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return kproto_crc32(p, <size_t>n)


def _set_clmul(bint enabled) -> bool:
    """Turn the carry-less multiply CRC on/off (tests compare both routes); return the previous setting."""
    return kproto_crc32_set_clmul(enabled) != 0


def crc32(data) -> int:
    """CRC32 (IEEE, as zlib.crc32) of a bytes-like object with the decoder's own routine (for tests)."""
    cdef _BufferView held = _BufferView(data)
    return crc_of(<const uint8_t*>held.view.buf, held.view.len)


# --- plain slots for the attributes every consumer reads -----------------------------------------------------
#
# Cython exposes a ``cdef readonly object`` attribute through a getter function (a getset descriptor).
# CPython's specializing interpreter (3.11+) cannot inline those: every ``record.value`` in a consumer's
# loop goes the generic way (type lookup, descriptor call), about as much time per read as building the
# record.  A member descriptor of type T_OBJECT_EX (what ``__slots__`` makes) is read inline
# (LOAD_ATTR_SLOT).  So, once at import, the object fields read on every record (offset, key, value,
# headers) are re-exposed as read-only member descriptors over the same struct fields: same names, same
# values, still read-only; only the lookup is cheaper.  Cython does not tell where a field sits in the
# object, so a probe instance whose field holds a marker object is searched for that pointer.
cdef extern from *:
    """
    #include <structmember.h>
    static int kproto_member_slot(PyObject *type, const char *name, Py_ssize_t offset, const char *doc) {
        /* The definition must outlive the type (the descriptor points to it): allocated once, never freed. */
        PyMemberDef *def = (PyMemberDef *)PyMem_Calloc(1, sizeof(PyMemberDef));
        PyObject *descr;
        int rc;
        if (def == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        def->name = name;
        def->type = T_OBJECT_EX;
        def->offset = offset;
        def->flags = READONLY;
        def->doc = doc;
        descr = PyDescr_NewMember((PyTypeObject *)type, def);
        if (descr == NULL)
            return -1;
        rc = PyDict_SetItemString(((PyTypeObject *)type)->tp_dict, name, descr);
        Py_DECREF(descr);
        PyType_Modified((PyTypeObject *)type);
        return rc;
    }
    static Py_ssize_t kproto_field_offset(PyObject *probe, PyObject *marker) {
        /* Where in probe's struct the object field now holding marker lives; -1 if none does. */
        Py_ssize_t at;
        for (at = sizeof(PyObject); at + (Py_ssize_t)sizeof(PyObject *) <= Py_TYPE(probe)->tp_basicsize;
             at += sizeof(PyObject *)) {
            if (*(PyObject **)((char *)probe + at) == marker)
                return at;
        }
        return -1;
    }
    """
    int kproto_member_slot(object type, const char* name, Py_ssize_t offset, const char* doc) except -1
    Py_ssize_t kproto_field_offset(object probe, object marker)


cdef int expose_slot(type cls, object probe, object marker, const char* name, const char* doc) except -1:
    """Re-expose the object field of ``cls`` that ``probe`` has set to ``marker`` as the slot ``name``."""
    cdef Py_ssize_t at = kproto_field_offset(probe, marker)
    if at < 0:
        raise SystemError(f"{cls.__name__}.{name.decode()}: field not found in the object struct")
    return kproto_member_slot(cls, name, at, doc)


@cython.final
@cython.freelist(512)
@cython.no_gc
cdef class LegacyRecord:
    """One decoded message (the compiled twin of :class:`kproto.records._pure.LegacyRecord`).

    ``key``/``value``: ``bytes`` or ``None`` (null and empty stay distinct); ``timestamp``: int for magic 1,
    ``None`` for magic 0; ``offset``: absolute; ``magic``; ``attributes``: the message's own attribute byte;
    ``codec``: the name of the codec it travelled with (the wrapper's, for messages expanded from a compressed
    wrapper: ``"gzip"``, ``"snappy"``, ``"lz4"``; ``None`` uncompressed), as encoding takes it;
    ``timestamp_type``: 0 CreateTime / 1 LogAppendTime for magic 1, ``None`` for magic 0; ``crc``: as stored.
    """

    # Only bytes/int/None are ever stored, so instances cannot form cycles: no_gc keeps them out of the
    # collector, which would otherwise rescan every message of a large fetch.
    # Fields read by nearly every consumer are stored as Python objects (one incref on access); the rest
    # stay C values and become objects only when asked for, which keeps the decode loop short.
    cdef readonly object key
    cdef readonly object value
    cdef readonly object offset
    cdef int64_t _timestamp
    cdef readonly int magic
    cdef readonly int attributes
    cdef int _codec
    cdef int _timestamp_type  # -1: none (magic 0)
    cdef readonly uint32_t crc

    @property
    def timestamp(self):
        """The timestamp (ms) for magic 1, None for magic 0."""
        return None if self._timestamp_type < 0 else self._timestamp

    @property
    def timestamp_type(self):
        """0 CreateTime / 1 LogAppendTime for magic 1, None for magic 0."""
        return None if self._timestamp_type < 0 else self._timestamp_type

    @property
    def codec(self):
        """The codec name it travelled with (``"gzip"``, ``"snappy"``, ``"lz4"``) or None, as encoding takes it."""
        return CODEC_NAME_BY_ID[self._codec]

    def __init__(self, key=None, value=None, timestamp=None, offset=0, magic=0, attributes=0, codec=None,
                 timestamp_type=None, crc=0):
        if key is not None and type(key) is not bytes:
            raise TypeError("key must be bytes or None")
        if value is not None and type(value) is not bytes:
            raise TypeError("value must be bytes or None")
        if (timestamp is None) != (timestamp_type is None):
            raise TypeError("timestamp and timestamp_type are both set (magic 1) or both None (magic 0)")
        self.key = key
        self.value = value
        self.offset = int(offset)
        self._timestamp = 0 if timestamp is None else timestamp
        self._timestamp_type = -1 if timestamp_type is None else timestamp_type
        self.magic = magic
        self.attributes = attributes
        self._codec = CODEC_IDS[codec]
        self.crc = crc

    def _astuple(self):
        return (self.key, self.value, self.timestamp, self.offset, self.magic, self.attributes, self.codec,
                self.timestamp_type, self.crc)

    def __eq__(self, other):
        if type(other) is not LegacyRecord:
            return NotImplemented
        return self._astuple() == (<LegacyRecord>other)._astuple()

    def __hash__(self):
        return hash(self._astuple())

    def __repr__(self):
        return (f"LegacyRecord(offset={self.offset!r}, key={self.key!r}, value={self.value!r}, "
                f"timestamp={self.timestamp!r}, magic={self.magic}, codec={self.codec!r})")


cdef int expose_message_slots() except -1:
    cdef LegacyRecord probe = LegacyRecord.__new__(LegacyRecord)
    markers = (object(), object(), object())
    probe.key, probe.value, probe.offset = markers
    expose_slot(LegacyRecord, probe, markers[0], b"key", b"The key: bytes, or None for a null key.")
    expose_slot(LegacyRecord, probe, markers[1], b"value", b"The value: bytes, or None for a null value.")
    expose_slot(LegacyRecord, probe, markers[2], b"offset", b"The absolute offset.")
    return 0


expose_message_slots()


cdef struct DataBuf:
    # A bytes object grown in place (refcount 1, never exposed before _Columns.finish): its data is the
    # column, so finishing the column is one shrinking realloc, not a copy.
    PyObject* obj
    char* data
    Py_ssize_t size
    Py_ssize_t cap


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


cdef inline int data_put(DataBuf* d, const uint8_t* p, Py_ssize_t n) except -1:
    if n > d.cap - d.size:
        data_grow(d, d.size + n)
    memcpy(d.data + d.size, p, <size_t>n)
    d.size += n
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

    cdef inline int add_header(self, const uint8_t* key, Py_ssize_t klen, const uint8_t* value,
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

    cdef inline void add_extras(self, int ts_type, int64_t producer_id, int producer_epoch, int32_t sequence,
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

    cdef inline int add_row(self, int64_t offset, int64_t timestamp, int magic, int attributes, int codec,
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


cdef struct Decoding:
    bint check_crc
    bint check_inner_crc  # with check_crc: also the messages inside compressed wrappers (magic 0/1)
    bint flag_crc      # columns: compute every CRC and record it instead of raising
    bint lazy          # validate only; messages are built later by _MessageIterator
    Py_ssize_t limit   # decompressed bytes this call may still produce (the cap covers the whole set)
    Py_ssize_t count   # messages seen (lazy mode)
    int inner_magics   # bit per magic seen among the current wrapper's inner messages
    int64_t inner_max_offset  # largest inner offset of the current wrapper


cdef inline LegacyRecord new_message(object key, object value, int64_t timestamp, int64_t offset, int magic,
                                int attributes, int codec, int timestamp_type, uint32_t crc):
    cdef LegacyRecord m = LegacyRecord.__new__(LegacyRecord)
    m.key = key
    m.value = value
    m.offset = offset
    m._timestamp = timestamp
    m.magic = magic
    m.attributes = attributes
    m._codec = codec
    m._timestamp_type = timestamp_type
    m.crc = crc
    return m


cdef Py_ssize_t decode_set(const uint8_t* buf, Py_ssize_t n, list out, _Columns cols, Decoding* opts,
                           bint inner, int carrier_codec, bint* partial, int64_t* last_offset) except -1:
    """Decode ``buf`` into ``out`` (objects) or ``cols`` (columns); return the valid byte count."""
    cdef Py_ssize_t pos = 0, start, end, p, left
    cdef int64_t offset, timestamp
    cdef int32_t size, klen, vlen
    cdef uint32_t crc
    cdef int magic, attributes, codec
    cdef bint crc_ok
    cdef Py_ssize_t key_at
    cdef object key, value
    partial[0] = False
    while pos < n:
        left = n - pos
        if left < 12:
            partial[0] = True
            return pos
        size = load_i32(buf + pos + 8)
        if size < MIN_SIZE:
            raise DecodeError(f"message size {size} is below the minimum of {MIN_SIZE}", pos + 8)
        if left < 18 or size > left - 12:
            partial[0] = True
            return pos
        offset = load_i64(buf + pos)
        start = pos + 12
        end = start + size
        crc = load_u32(buf + start)
        magic = <int8_t>buf[start + 4]
        attributes = <int8_t>buf[start + 5]
        crc_ok = True
        if (opts.check_crc and (opts.check_inner_crc or not inner)) or opts.flag_crc:
            crc_ok = crc_of(buf + start + 4, size - 4) == crc
            if not crc_ok and opts.check_crc:
                raise DecodeError(
                    f"CRC mismatch: stored 0x{crc:08x}, computed 0x{crc_of(buf + start + 4, size - 4):08x}", start)
        if magic == 0:
            timestamp = NO_TIMESTAMP
            p = start + 6
        elif magic == 1:
            if size < MIN_SIZE_V1:
                raise DecodeError(f"message size {size} is below the magic 1 minimum of {MIN_SIZE_V1}", pos + 8)
            timestamp = load_i64(buf + start + 6)
            p = start + 14
        else:
            raise DecodeError(f"unsupported message magic {magic}", start + 4)
        klen = load_i32(buf + p)
        p += 4
        if klen < -1 or klen > end - p - 4:
            raise DecodeError(f"key length {klen} does not fit the {end - p - 4} bytes left in the message", p - 4)
        key_at = p
        if klen > 0:
            p += klen
        vlen = load_i32(buf + p)
        p += 4
        if not (vlen == -1 and p == end) and vlen != end - p:
            raise DecodeError(f"value length {vlen} does not match the {end - p} bytes left in the message", p - 4)
        codec = attributes & CODEC_MASK
        if inner:
            opts.inner_magics |= 1 << magic
            if offset > opts.inner_max_offset:
                opts.inner_max_offset = offset
        if codec:
            expand_wrapper(buf, out, cols, opts, inner, pos, p, offset, magic, attributes, timestamp, vlen, crc_ok)
        elif opts.lazy:
            opts.count += 1
            last_offset[0] = offset
        elif cols is not None:
            cols.add_row(offset, timestamp, magic, attributes, carrier_codec, crc_ok, buf + key_at, klen, buf + p, vlen)
            last_offset[0] = offset
        else:
            key = None if klen == -1 else PyBytes_FromStringAndSize(<char*>buf + key_at, klen)
            value = None if vlen == -1 else PyBytes_FromStringAndSize(<char*>buf + p, vlen)
            out.append(new_message(key, value, timestamp, offset, magic, attributes & 0xFF, carrier_codec,
                                   -1 if magic == 0 else (attributes >> 3) & 1, crc))
            last_offset[0] = offset
        pos = end
    return pos


cdef int expand_wrapper(const uint8_t* buf, list out, _Columns cols, Decoding* opts, bint inner, Py_ssize_t entry,
                        Py_ssize_t value_pos, int64_t offset, int magic, int attributes, int64_t timestamp,
                        int32_t vlen, bint crc_ok) except -1:
    """Decompress a wrapper's inner set and add its messages with absolute offsets."""
    cdef int codec = attributes & CODEC_MASK
    cdef Py_ssize_t row0 = 0, valid, i
    cdef bint partial
    cdef int64_t last = 0, delta
    cdef list found = None
    cdef bint log_append
    cdef object raw
    cdef const uint8_t* raw_data
    cdef Py_ssize_t raw_size
    cdef LegacyRecord m
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise DecodeError(f"unknown compression codec {codec}", entry + 17)
    if inner:
        raise LimitExceededError("a compressed message inside a compressed message set (nested compression)", entry + 17)
    if vlen == -1:
        raise DecodeError(f"{name} wrapper message has a null value", value_pos - 4)
    payload = PyBytes_FromStringAndSize(<char*>buf + value_pos, vlen)
    # bytes, or the bytearray the codec decompressed into (never resized or exposed afterwards)
    raw = decompress_buffer(codec, payload, magic=magic, limit=opts.limit, position=value_pos,
                            allocate=_unfilled_bytearray)
    if type(raw) is bytes:
        raw_data = <const uint8_t*>PyBytes_AS_STRING(raw)
        raw_size = PyBytes_GET_SIZE(raw)
    else:
        raw_data = <const uint8_t*>PyByteArray_AS_STRING(raw)
        raw_size = PyByteArray_GET_SIZE(raw)
    opts.limit -= raw_size  # what the next wrappers of this call may still decompress
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN
    if cols is not None:
        cols.reserve_exact(0, raw_size)
        row0 = cols.count
    elif not opts.lazy:
        found = []
    row0 = opts.count if opts.lazy else row0
    try:
        valid = decode_set(raw_data, raw_size, found, cols, opts, True, codec, &partial, &last)
    except DecodeError as exc:
        raise type(exc)(f"{exc.reason} [decompressed byte {exc.offset} of the {name} wrapper]", value_pos) from None
    if partial:
        raise DecodeError(f"the {name} wrapper's inner message set is truncated at decompressed byte {valid}", value_pos)
    if (cols is not None and cols.count == row0) or (opts.lazy and opts.count == row0) or (found is not None and not found):
        raise DecodeError(f"the {name} wrapper holds no messages", value_pos)
    if opts.inner_magics & ~(1 << magic):
        raise DecodeError(f"the {name} wrapper (magic {magic}) holds messages of another magic", value_pos)
    delta = 0
    if magic == 1 and offset != 0:  # offset 0: older librdkafka left it unset, inner offsets are used as they are
        if offset < last:
            raise DecodeError(f"wrapper offset {offset} is below its last inner offset {last}", entry)
        if last < 0 and offset > INT64_MAX + last:
            raise DecodeError(f"wrapper offset {offset} minus last inner offset {last} does not fit int64", entry)
        delta = offset - last
        if opts.inner_max_offset > INT64_MAX - delta:
            raise DecodeError(f"inner offsets of the wrapper at offset {offset} do not fit int64 once made absolute",
                              entry)
    log_append = magic == 1 and (attributes & TS_TYPE_BIT)
    if opts.lazy:
        out.append(_InnerSet.new(raw, raw_data, raw_size, codec, delta, log_append, timestamp))
    elif cols is None:
        if delta or log_append:
            for item in found:
                m = <LegacyRecord>item
                m.offset = m.offset + delta
                if log_append:
                    m._timestamp = timestamp
                    m._timestamp_type = 1
        out.extend(found)
    else:
        fix_rows(cols, row0, delta, log_append, timestamp, crc_ok)
    return 0


cdef void fix_rows(_Columns cols, Py_ssize_t row0, int64_t delta, bint log_append, int64_t timestamp,
                   bint crc_ok) noexcept:
    cdef Py_ssize_t i
    for i in range(row0, cols.count):
        if delta:
            cols.offsets[i] += delta
        if log_append:
            cols.timestamps[i] = timestamp
        if not crc_ok:
            cols.crc_ok[i] = 0


def _unfilled_bytearray(Py_ssize_t size):
    """A bytearray of ``size`` bytes left as allocated (not zeroed): the ``allocate`` of
    :func:`kproto.records.compression.decompress_buffer`, whose one-copy paths keep a buffer only once the codec
    has written every byte of it."""
    return PyByteArray_FromStringAndSize(NULL, size)


cdef class _BufferView:
    """Holds a Py_buffer for the duration of a decode."""

    cdef Py_buffer view
    cdef bint held

    def __cinit__(self, data):
        PyObject_GetBuffer(data, &self.view, PyBUF_SIMPLE)
        self.held = True

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef bytes as_bytes(self):
        return PyBytes_FromStringAndSize(<char*>self.view.buf, self.view.len)


@cython.final
cdef class _InnerSet:
    """A decompressed, already validated inner message set and how its messages are adjusted."""

    cdef object raw  # bytes or bytearray, owned here and never resized: data stays valid
    cdef const uint8_t* data
    cdef Py_ssize_t size
    cdef int codec
    cdef int64_t delta
    cdef bint log_append
    cdef int64_t timestamp

    @staticmethod
    cdef _InnerSet new(object raw, const uint8_t* data, Py_ssize_t size, int codec, int64_t delta, bint log_append,
                       int64_t timestamp):
        cdef _InnerSet s = _InnerSet.__new__(_InnerSet)
        s.raw = raw
        s.data = data
        s.size = size
        s.codec = codec
        s.delta = delta
        s.log_append = log_append
        s.timestamp = timestamp
        return s


cdef inline LegacyRecord message_at(const uint8_t* buf, Py_ssize_t pos, int carrier_codec, int64_t delta):
    """Build the message at ``pos`` of a buffer that decode_set has validated (so no checks here), its offset
    moved by ``delta`` (which decode_set has checked to fit)."""
    cdef Py_ssize_t start = pos + 12, p
    cdef int32_t klen, vlen
    cdef int magic = <int8_t>buf[start + 4]
    cdef int attributes = <int8_t>buf[start + 5]
    cdef int64_t timestamp = NO_TIMESTAMP
    p = start + 6
    if magic == 1:
        timestamp = load_i64(buf + p)
        p += 8
    klen = load_i32(buf + p)
    p += 4
    key = None if klen == -1 else PyBytes_FromStringAndSize(<char*>buf + p, klen)
    if klen > 0:
        p += klen
    vlen = load_i32(buf + p)
    p += 4
    value = None if vlen == -1 else PyBytes_FromStringAndSize(<char*>buf + p, vlen)
    return new_message(key, value, timestamp, load_i64(buf + pos) + delta, magic, attributes & 0xFF, carrier_codec,
                       -1 if magic == 0 else (attributes >> 3) & 1, load_u32(buf + start))


@cython.final
cdef class _MessageIterator:
    """Walks a validated message set, building each LegacyRecord only when it is reached."""

    cdef bytes top
    cdef Py_ssize_t pos, end
    cdef list inner_sets
    cdef Py_ssize_t next_inner
    cdef _InnerSet current
    cdef Py_ssize_t inner_pos

    def __iter__(self):
        return self

    def __next__(self):
        cdef const uint8_t* buf
        cdef LegacyRecord m
        cdef int32_t size
        while True:
            if self.current is not None:
                buf = self.current.data
                if self.inner_pos < self.current.size:
                    m = message_at(buf, self.inner_pos, self.current.codec, self.current.delta)
                    self.inner_pos += 12 + load_i32(buf + self.inner_pos + 8)
                    if self.current.log_append:
                        m._timestamp = self.current.timestamp
                        m._timestamp_type = 1
                    return m
                self.current = None
            if self.pos >= self.end:
                raise StopIteration
            buf = <const uint8_t*>PyBytes_AS_STRING(self.top)
            size = load_i32(buf + self.pos + 8)
            if buf[self.pos + 17] & CODEC_MASK:
                self.current = <_InnerSet>self.inner_sets[self.next_inner]
                self.next_inner += 1
                self.inner_pos = 0
                self.pos += 12 + size
                continue
            m = message_at(buf, self.pos, 0, 0)
            self.pos += 12 + size
            return m


@cython.final
cdef class LazyMessages:
    """The messages of a validated message set, built one at a time on iteration.

    Iterating creates each :class:`LegacyRecord` only when reached, so a consumer that handles messages one by one
    never holds the whole set as objects.  Indexing builds (and keeps) the full list once.
    """

    cdef bytes top
    cdef Py_ssize_t end
    cdef list inner_sets
    cdef Py_ssize_t count
    cdef list built

    def __iter__(self):
        if self.built is not None:
            return iter(self.built)
        cdef _MessageIterator it = _MessageIterator.__new__(_MessageIterator)
        it.top = self.top
        it.end = self.end
        it.inner_sets = self.inner_sets
        return it

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if self.built is None:
            self.built = list(self)
        return self.built[index]

    def __repr__(self):
        return f"LazyMessages({self.count} messages)"


def decode(data, bint check_crc, Py_ssize_t limit, bint check_inner_crc=True):
    """Validate a message set now, build its :class:`LegacyRecord` objects on iteration
    (see :func:`kproto.records.decode_message_set`)."""
    cdef Decoding opts
    cdef bint partial
    cdef int64_t last
    cdef list inner_sets = []
    cdef Py_ssize_t valid
    cdef bytes top = data if type(data) is bytes else (<_BufferView>_BufferView(data)).as_bytes()
    opts.check_crc = check_crc
    opts.check_inner_crc = check_inner_crc
    opts.flag_crc = False
    opts.lazy = True
    opts.count = 0
    opts.limit = limit
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN
    valid = decode_set(<const uint8_t*>PyBytes_AS_STRING(top), PyBytes_GET_SIZE(top), inner_sets, None, &opts,
                       False, 0, &partial, &last)
    cdef LazyMessages messages = LazyMessages.__new__(LazyMessages)
    messages.top = top
    messages.end = valid
    messages.inner_sets = inner_sets
    messages.count = opts.count
    return MessageSet(messages, valid, partial)


def decode_columns(data, bint check_crc, Py_ssize_t limit):
    """Decode a message set into columns (see :func:`kproto.records.decode_columns`)."""
    cdef Decoding opts
    cdef bint partial
    cdef int64_t last
    cdef _Columns cols = _Columns()
    cdef _BufferView held = _BufferView(data)
    opts.check_crc = check_crc
    opts.check_inner_crc = True
    opts.flag_crc = not check_crc
    opts.lazy = False
    opts.count = 0
    opts.limit = limit
    opts.inner_magics = 0
    opts.inner_max_offset = INT64_MIN
    valid = decode_set(<const uint8_t*>held.view.buf, held.view.len, None, cols, &opts, False, 0, &partial, &last)
    return cols.build(valid, partial)


cdef object binary_field(object field, str name, Py_ssize_t index, str noun="message"):
    if field is None or type(field) is bytes:
        return field
    if isinstance(field, (bytes, bytearray, memoryview)):
        return memoryview(field).tobytes()
    raise EncodeError(f"{noun} {index}: {name} must be bytes-like or None, not {type(field).__name__}")


cdef int64_t timestamp_field(object timestamp, Py_ssize_t index, str noun="message") except? -2:
    if timestamp is None:
        return NO_TIMESTAMP
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise EncodeError(f"{noun} {index}: timestamp must be an int or None, not {type(timestamp).__name__}")
    if not (-(2**63) <= timestamp <= 2**63 - 1):
        raise EncodeError(f"{noun} {index}: timestamp {timestamp} does not fit int64")
    return timestamp


cdef struct BytesOut:
    # The encoder writes straight into a bytes object it owns (grown with _PyBytes_Resize, which reallocs
    # in place or by remapping), so the finished set is returned without a final copy.
    PyObject* obj
    Py_ssize_t size
    Py_ssize_t cap


cdef inline uint8_t* out_reserve(BytesOut* b, Py_ssize_t extra) except NULL:
    """Room for ``extra`` more bytes; return where they go."""
    if b.size + extra > b.cap:
        out_grow(b, extra)
    return <uint8_t*>PyBytes_AS_STRING(<object>b.obj) + b.size


cdef int out_grow(BytesOut* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap = b.cap * 2 if b.cap else 256
    cdef object fresh
    if cap < b.size + extra:
        cap = b.size + extra
    if b.obj == NULL:
        fresh = PyBytes_FromStringAndSize(NULL, cap)
        b.obj = <PyObject*>fresh
        Py_INCREF(fresh)  # the reference b.obj owns
    else:
        _PyBytes_Resize(&b.obj, cap)  # on failure it clears b.obj and raises MemoryError
    b.cap = cap
    return 0


cdef object out_finish(BytesOut* b):
    """The bytes written so far (ownership passes to the caller)."""
    cdef object result
    if b.obj == NULL:
        return b""
    if b.size != b.cap:
        _PyBytes_Resize(&b.obj, b.size)
    result = <object>b.obj
    Py_XDECREF(b.obj)
    b.obj = NULL
    return result


cdef inline const char* binary_data(object field, Py_ssize_t* length):
    """Pointer and length of a bytes or bytearray field (length -1: None)."""
    if field is None:
        length[0] = -1
        return NULL
    if type(field) is bytes:
        length[0] = PyBytes_GET_SIZE(field)
        return PyBytes_AS_STRING(field)
    length[0] = PyByteArray_GET_SIZE(field)
    return PyByteArray_AS_STRING(field)


def encode_plain(messages, int magic, object base_offset, int attributes):
    """Encode uncompressed messages at offsets ``base_offset``, +1, ...; return (bytes, count, max timestamp)."""
    cdef BytesOut out
    cdef Py_ssize_t index = 0, klen, vlen, size, at
    cdef const char* kptr
    cdef const char* vptr
    cdef int64_t offset = base_offset, timestamp, max_timestamp = NO_TIMESTAMP
    cdef bint offset_overflow = False
    cdef uint8_t* w
    cdef tuple tup
    out.obj = NULL
    out.size = 0
    out.cap = 0
    try:
        for item in messages:
            if type(item) is tuple:
                tup = <tuple>item
                if len(tup) == 2:
                    key = tup[0]
                    value = tup[1]
                    ts = None
                elif len(tup) == 3:
                    key = tup[0]
                    value = tup[1]
                    ts = tup[2]
                else:
                    raise EncodeError(f"message {index}: a tuple must be (key, value) or (key, value, timestamp)")
            else:
                try:
                    key = item.key
                    value = item.value
                except AttributeError:
                    raise EncodeError(
                        f"message {index}: expected a (key, value[, timestamp]) tuple or an object with key and value"
                    ) from None
                ts = getattr(item, "timestamp", None)
            # bytes and bytearray are read in place (nothing runs Python code while they are copied)
            if type(key) is not bytes and key is not None and type(key) is not bytearray:
                key = binary_field(key, "key", index)
            if type(value) is not bytes and value is not None and type(value) is not bytearray:
                value = binary_field(value, "value", index)
            timestamp = timestamp_field(ts, index)
            kptr = binary_data(key, &klen)
            vptr = binary_data(value, &vlen)
            if klen > I32_MAX or vlen > I32_MAX:
                raise EncodeError(f"message {index}: key or value longer than 2 GiB")
            if offset_overflow:
                raise EncodeError(f"message {index}: offset {base_offset + index} does not fit int64")
            size = 14 + (8 if magic == 1 else 0) + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
            if size > I32_MAX:
                raise EncodeError(f"message {index}: larger than 2 GiB")
            w = out_reserve(&out, 12 + size)
            store_i64(w, offset)
            store_u32(w + 8, <uint32_t>size)
            w[16] = <uint8_t>magic
            w[17] = <uint8_t>attributes
            at = 18
            if magic == 1:
                if ts is not None and timestamp > max_timestamp:
                    max_timestamp = timestamp
                store_i64(w + at, timestamp)
                at += 8
            store_u32(w + at, <uint32_t><int32_t>klen)
            at += 4
            if klen > 0:
                memcpy(w + at, kptr, <size_t>klen)
                at += klen
            store_u32(w + at, <uint32_t><int32_t>vlen)
            at += 4
            if vlen > 0:
                memcpy(w + at, vptr, <size_t>vlen)
            store_u32(w + 12, crc_of(w + 16, size - 4))
            out.size += 12 + size
            if offset == 9223372036854775807:
                offset_overflow = True
            else:
                offset += 1
            index += 1
        return out_finish(&out), index, max_timestamp
    finally:
        Py_XDECREF(out.obj)


# ---------------------------------------------------------------------------------------------------------
# Magic 2 record batches, and decode_records over any mix of magics (docs/records.md, "Magic 2").
# The legacy entries of a mixed buffer go through decode_set above on a pointer into the same buffer.

def crc32c_hardware() -> bool:
    """Whether this CPU computes CRC-32C in hardware (the route the decoder takes unless tests turn it off)."""
    return kproto_crc32c_hw_available() != 0


def _set_crc32c_hw(bint enabled) -> bool:
    """Turn the hardware CRC-32C route on/off (tests compare both); return the previous setting."""
    return kproto_crc32c_set_hw(enabled) != 0


cdef inline uint32_t crc32c_of(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return kproto_crc32c(p, <size_t>n)


def crc32c(data) -> int:
    """CRC-32C of a bytes-like object with the decoder's own routine."""
    cdef _BufferView held = _BufferView(data)
    return crc32c_of(<const uint8_t*>held.view.buf, held.view.len)


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
    """One decoded record of any magic (the compiled twin of :class:`kproto.records._pure.Record`).

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
