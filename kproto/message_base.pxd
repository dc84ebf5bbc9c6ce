from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_FromStringAndSize

from kproto._generated._c_wire cimport _empty, _reusable

# The generated classes become extension types when compiled; their bases must be too.
cdef class Cursor:
    cdef public Py_ssize_t pos

cdef class Struct:
    pass

cdef class Message(Struct):
    pass

# The encode buffer kept between calls (see there); cimported by kproto.framing.
cdef object _spare
cdef Py_ssize_t _SPARE_MAX
cdef bytearray _take_buffer()
cdef bytes _buffer_bytes(bytearray out)
