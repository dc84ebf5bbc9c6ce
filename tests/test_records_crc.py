"""The compiled decoder's CRC32 routine (table-driven below 4 KiB, zlib above) equals zlib.crc32."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def fast_crc32():
    from kproto._fast._records import crc32

    return crc32


@given(st.binary(max_size=300))
def test_short_inputs(fast_crc32, data):
    assert fast_crc32(data) == zlib.crc32(data)


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 31, 32, 4095, 4096, 4097, 100_000])
def test_boundaries(fast_crc32, size):
    data = bytes((i * 131 + 7) % 256 for i in range(size))
    assert fast_crc32(data) == zlib.crc32(data)
    assert fast_crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])
