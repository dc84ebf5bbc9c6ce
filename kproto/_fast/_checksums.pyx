# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled checksums of the record layer: the twin of :mod:`kproto.records.checksums`.

CRC-32 (IEEE, as ``zlib.crc32``) guards magic 0/1 messages, CRC-32C magic 2 batches.  The routes live in
``_crc.c`` (CRC-32 through zlib, slicing tables or carry-less multiplication; CRC-32C through the CPU's
instruction or tables), chosen once, at import.  This is the only extension linked with ``_crc.c``: the
other compiled record modules cimport :func:`crc_of` and :func:`crc32c_of` from here (``_checksums.pxd``),
so the switches the tests flip reach every caller.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint8_t, uint32_t

from kproto._fast._crc cimport (kproto_crc_init, kproto_crc32, kproto_crc32_set_clmul, kproto_crc32c,
                                kproto_crc32c_hw_available, kproto_crc32c_set_hw)

__all__ = ["crc32c"]

kproto_crc_init()


cdef uint32_t crc_of(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return kproto_crc32(p, <size_t>n)


cdef uint32_t crc32c_of(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return kproto_crc32c(p, <size_t>n)


cdef uint32_t buffer_crc(object data, bint castagnoli) except? 0:
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if castagnoli:
            return crc32c_of(<const uint8_t*>view.buf, view.len)
        return crc_of(<const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def _set_clmul(bint enabled) -> bool:
    """Turn the carry-less multiply CRC on/off (tests compare both routes); return the previous setting."""
    return kproto_crc32_set_clmul(enabled) != 0


def crc32(data) -> int:
    """CRC32 (IEEE, as zlib.crc32) of a bytes-like object with the decoder's own routine (for tests)."""
    return buffer_crc(data, False)


def crc32c_hardware() -> bool:
    """Whether this CPU computes CRC-32C in hardware (the route the decoder takes unless tests turn it off)."""
    return kproto_crc32c_hw_available() != 0


def _set_crc32c_hw(bint enabled) -> bool:
    """Turn the hardware CRC-32C route on/off (tests compare both); return the previous setting."""
    return kproto_crc32c_set_hw(enabled) != 0


def crc32c(data) -> int:
    """CRC-32C of a bytes-like object with the decoder's own routine."""
    return buffer_crc(data, True)
