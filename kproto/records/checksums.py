"""Checksums of the record layer, pure Python: the twin of the Cython module ``kproto._fast._checksums``.

CRC-32C (Castagnoli) covers a magic 2 batch; CRC-32 (IEEE), which covers a magic 0/1 message, is
:func:`zlib.crc32` here.  The compiled twin also exposes its CRC-32 route and its route switches, for the
tests that compare routes.
"""

from __future__ import annotations

from typing import Any, List

__all__ = ["crc32c"]


def _crc32c_table() -> List[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c_table(data: Any, value: int = 0) -> int:
    """CRC-32C by the byte-wise table: the pure fallback when the ``crc32c`` package is not installed.
    ``value``: the CRC of the bytes before ``data``, to continue it."""
    crc = value ^ 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # the C implementation kafka-python's pure reader uses too; optional (the `pure` extra)
    from crc32c import crc32c as _crc32c_c
except ImportError:  # pragma: no cover - depends on the environment
    _crc32c_c = None  # type: ignore[assignment]  # the table loop below serves instead


def crc32c(data: Any, value: int = 0) -> int:
    """CRC-32C of a bytes-like object (the ``crc32c`` package when installed, else :func:`crc32c_table`);
    ``value``: the CRC of the bytes before ``data``, to continue it."""
    if _crc32c_c is not None:
        return _crc32c_c(data, value)
    return crc32c_table(data, value)
