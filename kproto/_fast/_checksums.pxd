# The CRC routes of the compiled record modules.  _checksums is the one extension linked with _crc.c, so
# its routes and their switches (the test hooks _set_clmul, _set_crc32c_hw) exist once; the other modules
# call them through these declarations.
from libc.stdint cimport uint8_t, uint32_t

cdef uint32_t crc_of(const uint8_t* p, Py_ssize_t n) noexcept nogil
cdef uint32_t crc32c_of(const uint8_t* p, Py_ssize_t n) noexcept nogil
