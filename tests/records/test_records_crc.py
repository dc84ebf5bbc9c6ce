"""The compiled decoder's CRC32 routine equals zlib.crc32 on every route: carry-less multiply (PCLMULQDQ, when
the CPU has it) for 64 bytes and more, slicing-by-16 tables for the rest (then steps of 8 and 4 bytes for the
tail), zlib above 4 KiB without PCLMULQDQ."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture(scope="module", params=["clmul", "tables"])
def fast_crc32(request):
    from kproto._fast import _checksums

    previous = _checksums._set_clmul(request.param == "clmul")
    yield _checksums.crc32
    _checksums._set_clmul(previous)


@given(st.binary(max_size=300))
def test_short_inputs(fast_crc32, data):
    assert fast_crc32(data) == zlib.crc32(data)


@pytest.mark.parametrize(
    "size",
    [
        0,
        1,
        15,
        16,
        17,
        20,
        24,
        28,
        31,
        32,
        63,
        64,
        65,
        68,
        72,
        76,
        79,
        80,
        110,
        118,
        127,
        128,
        129,
        191,
        4095,
        4096,
        4097,
        100_000,
        1_000_003,
    ],
)
def test_boundaries(fast_crc32, size):
    data = bytes((i * 131 + 7) % 256 for i in range(size))
    assert fast_crc32(data) == zlib.crc32(data)
    assert fast_crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])


def test_decoder_uses_the_same_crc(records_codec):
    from kproto._fast import _checksums

    previous = _checksums._set_clmul(True)
    try:
        messages = [(None, bytes(range(n % 256)) * (1 + n // 50)) for n in range(0, 400, 7)]
        data = records_codec.encode_message_set(messages)
        assert [m.value for m in records_codec.decode_message_set(data)] == [v for _, v in messages]
        damaged = bytearray(data)
        damaged[-1] ^= 1
        with pytest.raises(Exception, match="CRC"):
            records_codec.decode_message_set(bytes(damaged))
    finally:
        _checksums._set_clmul(previous)


def test_one_extension_holds_the_crc_routes():
    """setup.py links _crc.c into each .pyx that cimports kproto._fast._crc: only _checksums may, so that the
    route switches (_set_clmul, _set_crc32c_hw) reach the one copy every compiled module calls."""
    import glob
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    linking = [
        os.path.basename(path)
        for path in sorted(glob.glob(os.path.join(root, "kproto", "_fast", "*.pyx")))
        if "kproto._fast._crc cimport" in open(path, encoding="utf-8").read()
    ]
    assert linking == ["_checksums.pyx"]
