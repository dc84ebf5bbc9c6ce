# Compiled, RecordSet is an extension type: building one per decoded ``records`` field costs a C
# allocation instead of a Python-level ``__init__`` call.  ``_raw`` stays readable by name (readonly), as
# the pure class's slot is, so other instances' bytes can be compared in ``__eq__``.
cdef class RecordSet:
    cdef readonly bytes _raw
