# The CRC routes of _crc.c (interface and contract in _crc.h).  Only kproto._fast._checksums cimports this,
# so only it is linked with _crc.c (setup.py links a .pyx with the C of what it cimports) and the routes and
# their switches exist once; the other compiled modules call them through _checksums.pxd.
from libc.stdint cimport uint32_t

cdef extern from "_crc.h" nogil:
    void kproto_crc_init()
    uint32_t kproto_crc32(const unsigned char* p, size_t n)
    int kproto_crc32_clmul_enabled()
    int kproto_crc32_set_clmul(int enabled)
    uint32_t kproto_crc32c(const unsigned char* p, size_t n)
    int kproto_crc32c_hw_available()
    int kproto_crc32c_set_hw(int enabled)
