"""CRC-32C against the ``crc32c`` package: the compiled routine on both routes (the SSE4.2 / ARMv8 CRC
instruction when the CPU has it, the slicing-by-8 table otherwise) and the pure twin's table, at every length
around the routes' step sizes (1, 8 bytes, runs of 3 x 1024) and on unaligned starts."""

from __future__ import annotations

import os

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproto.records import checksums

DATA = os.urandom(70_000)
LENGTHS = list(range(0, 40)) + [
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    767,
    768,
    769,
    4095,
    4096,
    4097,
    12_287,
    12_288,
    12_289,
    65_535,
    65_536,
    65_537,
]
# the hardware route computes three blocks side by side (3 x 4096, then 3 x 256 bytes): lengths around
# one and two runs of each, and around the places where the long runs hand over to the short ones
RUNS = [
    3 * block * runs + extra for block in (256, 4096) for runs in (1, 2) for extra in (-9, -8, -1, 0, 1, 7, 8, block)
]
LENGTHS = sorted(set(LENGTHS + RUNS))


@pytest.fixture(scope="module", params=["hardware", "table"])
def compiled_crc32c(request):
    fast = pytest.importorskip("kproto._fast._checksums", reason="compiled extension not built")
    previous = fast._set_crc32c_hw(request.param == "hardware")
    yield fast.crc32c
    fast._set_crc32c_hw(previous)


@pytest.mark.compiled_only
@pytest.mark.parametrize("start", [0, 1, 3, 7])
def test_compiled_boundaries(compiled_crc32c, start):
    for n in LENGTHS:
        chunk = DATA[start : start + n]
        assert compiled_crc32c(chunk) == crc32c.crc32c(chunk), n


@pytest.mark.compiled_only
@given(st.binary(max_size=300))
def test_compiled_random(compiled_crc32c, data):
    assert compiled_crc32c(data) == crc32c.crc32c(data)


def test_pure_table_boundaries():
    for n in LENGTHS[:-3]:
        assert checksums.crc32c_table(DATA[1 : 1 + n]) == crc32c.crc32c(DATA[1 : 1 + n]), n
    assert checksums.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


@pytest.mark.compiled_only
def test_hardware_route_is_taken_where_the_cpu_has_it():
    fast = pytest.importorskip("kproto._fast._checksums", reason="compiled extension not built")
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if " sse4_2" in flags or " crc32" in flags:
        assert fast.crc32c_hardware()
