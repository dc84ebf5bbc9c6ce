# The source of kproto/_generated/_c_wire.pxd: `python -m kproto.codegen` writes its "Generated" line and
# everything below this paragraph there, and the drift test (tests/test_schema_loader.py) holds the copy to
# this file.  Edit here, then regenerate.
#
# The big-endian C readers and writers every generated module's ``cython.compiled`` branches call.  They
# exist only as inline C (each module's .pxd cimports them), so the pure-Python modules never see these
# names: their other branch uses struct and kproto.wire instead.  ``_grow`` extends the output bytearray
# and returns a pointer to the new bytes; converting a Python value to a ``_put_*`` argument raises
# OverflowError/TypeError as struct.pack does.

# C readers and writers shared by the compiled branches of the generated codecs (cimported by each .pxd).
# The pure-Python build never uses these names: its branches use struct and kproto.wire.

from cpython.bytearray cimport PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_DecodeUTF8, PyUnicode_GET_LENGTH
from libc.string cimport memcpy


cdef extern from "Python.h":
    # The fields of CPython's bytearray that _grow reads (see there).
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc
        char* ob_bytes
        char* ob_start
        Py_ssize_t ob_exports
    Py_ssize_t Py_SIZE(object o)
    void Py_SET_SIZE(object o, Py_ssize_t size)
    bint PyUnicode_IS_COMPACT_ASCII(object o)

cdef extern from *:
    '''
    #ifdef Py_GIL_DISABLED
    #define KPROTO_KEEPS_ENCODE_BUFFER 0  /* without the GIL, two threads could take the one kept buffer */
    #else
    #define KPROTO_KEEPS_ENCODE_BUFFER 1
    #endif
    '''
    bint KPROTO_KEEPS_ENCODE_BUFFER


cdef inline object _read_str(bytes buf, Py_ssize_t pos, Py_ssize_t size):
    # The text of buf[pos:pos + size] (bounds checked by the caller), or None when it is not valid UTF-8
    # (kproto.wire.bad_utf8_at then re-reads it to say where).  One C call: no slice, no method lookup.
    cdef const char* p = buf
    try:
        return PyUnicode_DecodeUTF8(p + pos, size, NULL)
    except UnicodeDecodeError:
        return None


cdef inline signed char _read_b(bytes buf, Py_ssize_t pos) noexcept:
    cdef const unsigned char* p = buf
    return <signed char>p[pos]


cdef inline short _read_h(bytes buf, Py_ssize_t pos) noexcept:
    cdef const unsigned char* p = buf
    return <short>((p[pos] << 8) | p[pos + 1])


cdef inline unsigned short _read_H(bytes buf, Py_ssize_t pos) noexcept:
    cdef const unsigned char* p = buf
    return <unsigned short>((p[pos] << 8) | p[pos + 1])


cdef inline int _read_i(bytes buf, Py_ssize_t pos) noexcept:
    cdef const unsigned char* p = buf
    return <int>((<unsigned int>p[pos] << 24) | (<unsigned int>p[pos + 1] << 16)
                 | (<unsigned int>p[pos + 2] << 8) | <unsigned int>p[pos + 3])


cdef inline long long _read_q(bytes buf, Py_ssize_t pos) noexcept:
    return <long long>((<unsigned long long>_read_i(buf, pos) << 32)
                       | <unsigned long long><unsigned int>_read_i(buf, pos + 4))


cdef inline double _read_d(bytes buf, Py_ssize_t pos) noexcept:
    cdef unsigned long long bits = <unsigned long long>_read_q(buf, pos)
    cdef double value
    memcpy(&value, &bits, 8)
    return value


cdef inline long long _read_uvarint(bytes buf, Py_ssize_t pos, Py_ssize_t end) noexcept:
    # An unsigned varint at pos: (value << 4) | bytes used, or -1 when it is truncated, longer than
    # 5 bytes, above 2**32 - 1 or not minimally encoded (kproto.wire.bad_uvarint then says which).
    cdef const unsigned char* p = buf
    cdef unsigned long long value = 0
    cdef int shift = 0
    cdef Py_ssize_t i = pos
    cdef unsigned char b
    while i < end and shift < 35:
        b = p[i]
        value |= <unsigned long long>(b & 0x7F) << shift
        i += 1
        if b < 0x80:
            if value > 0xFFFFFFFFULL or (b == 0 and i - pos > 1):
                return -1
            return <long long>((value << 4) | <unsigned long long>(i - pos))
        shift += 7
    return -1


cdef inline char* _grow(bytearray out, Py_ssize_t size) except NULL:
    # Room for ``size`` more bytes at the end of ``out``, returned for writing.  When the buffer is full it
    # grows by half again: CPython's own resize allocates the exact size for any step above an eighth, so an
    # encoder appending field by field reallocated (and copied) its whole output at nearly every field.
    # Bytes past the size stay allocated but unused, as in every bytearray; a bytearray with exported
    # buffers goes through PyByteArray_Resize, which refuses it as ``out += ...`` would.
    cdef PyByteArrayObject* o = <PyByteArrayObject*>out
    cdef Py_ssize_t start = Py_SIZE(out)
    cdef Py_ssize_t need = start + size
    if o.ob_exports > 0 or need + (o.ob_start - o.ob_bytes) >= o.ob_alloc:
        PyByteArray_Resize(out, need + (need >> 1) + 16)
    Py_SET_SIZE(out, need)
    o.ob_start[need] = 0  # bytearray keeps a NUL after its last byte
    return o.ob_start + start


cdef inline int _put_bytes(bytearray out, object data) except -1:
    # ``out += data`` for the encoders' string, bytes and records values: one copy into _grow's buffer for
    # bytes, bytearray's own concatenation for any other buffer.
    cdef Py_ssize_t n
    if type(data) is bytes:
        n = PyBytes_GET_SIZE(data)
        memcpy(_grow(out, n), PyBytes_AS_STRING(data), n)
    else:
        out += data
    return 0


cdef inline object _utf8(object text):
    # What a string field writes: a str of ASCII characters as it is (its characters are its UTF-8 bytes,
    # which _put_text copies straight out of the str: no bytes object per string), anything else through
    # ``text.encode("utf-8")``, which refuses a non-str or a lone surrogate exactly as the pure branch does.
    if type(text) is str and PyUnicode_IS_COMPACT_ASCII(text):
        return text
    return text.encode("utf-8")


cdef inline int _put_text(bytearray out, object data) except -1:
    # _put_bytes for a value from _utf8: an ASCII str (one byte per character) or UTF-8 bytes.
    cdef Py_ssize_t n
    if type(data) is str:
        n = PyUnicode_GET_LENGTH(data)
        memcpy(_grow(out, n), PyUnicode_DATA(data), n)
        return 0
    return _put_bytes(out, data)


cdef inline bint _reusable(bytearray out, Py_ssize_t limit) noexcept:
    # Whether ``out`` may be emptied and encoded into again (kproto.message_base keeps one such buffer):
    # nothing holds a view of its memory, and that memory is at most ``limit`` bytes.
    cdef PyByteArrayObject* o = <PyByteArrayObject*>out
    return KPROTO_KEEPS_ENCODE_BUFFER and o.ob_exports == 0 and o.ob_alloc <= limit


cdef inline void _empty(bytearray out) noexcept:
    # Size 0 with the memory kept (a resize to 0 would free it); only for a buffer _reusable allows.
    Py_SET_SIZE(out, 0)
    (<PyByteArrayObject*>out).ob_start[0] = 0


cdef inline void _put_b(char* p, Py_ssize_t at, signed char value) noexcept:
    p[at] = <char>value


cdef inline void _put_h(char* p, Py_ssize_t at, short value) noexcept:
    p[at] = <char>(value >> 8)
    p[at + 1] = <char>value


cdef inline void _put_H(char* p, Py_ssize_t at, unsigned short value) noexcept:
    p[at] = <char>(value >> 8)
    p[at + 1] = <char>value


cdef inline void _put_i(char* p, Py_ssize_t at, int value) noexcept:
    p[at] = <char>(value >> 24)
    p[at + 1] = <char>(value >> 16)
    p[at + 2] = <char>(value >> 8)
    p[at + 3] = <char>value


cdef inline void _put_q(char* p, Py_ssize_t at, long long value) noexcept:
    _put_i(p, at, <int>(value >> 32))
    _put_i(p, at + 4, <int>value)


cdef inline void _put_d(char* p, Py_ssize_t at, double value) noexcept:
    cdef long long bits
    memcpy(&bits, &value, 8)
    _put_q(p, at, bits)


cdef inline int _put_uvarint(bytearray out, unsigned int value) except -1:
    cdef Py_ssize_t size = 1
    cdef unsigned int rest = value >> 7
    while rest:
        size += 1
        rest >>= 7
    cdef char* p = _grow(out, size)
    cdef Py_ssize_t i = 0
    while value >= 0x80:
        p[i] = <char>((value & 0x7F) | 0x80)
        value >>= 7
        i += 1
    p[i] = <char>value
    return 0
