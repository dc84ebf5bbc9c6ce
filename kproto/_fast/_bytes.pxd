# Inline byte helpers shared by the compiled record modules (_columns, _legacy_records, _default_records):
# big-endian loads and stores that read byte by byte (no unaligned casts), and the output buffer the
# encoders write into.  Inline, so each module gets its own copy compiled into its loops.
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE, _PyBytes_Resize
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef enum:
    NO_TIMESTAMP = -1
    I32_MAX = 2147483647


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


cdef inline int out_grow(BytesOut* b, Py_ssize_t extra) except -1:
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


cdef inline object out_finish(BytesOut* b):
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

