# The generated classes become extension types when compiled; their bases must be too.
cdef class Cursor:
    cdef public Py_ssize_t pos

cdef class Struct:
    pass

cdef class Message(Struct):
    pass
