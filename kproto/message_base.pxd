# The generated classes become extension types when compiled; their bases must be too.
cdef class Struct:
    pass

cdef class Message(Struct):
    pass
