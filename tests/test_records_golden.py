"""Golden vectors (docs/records.md, "Worked examples") and the LZ4 header checksum quirk ("Compression")."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from kproto.errors import DecodeError
from kproto.records.lz4_frame import header_checksum, lz4_frame_decode, lz4_frame_encode, xxh32

HELLO_ENTRY = bytes.fromhex(
    "00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f"
)  # the "hello" message, 31 bytes
TRUNCATED_SET = HELLO_ENTRY + bytes.fromhex(
    "0000000000000001000000138bc0cd770000ffff"
)  # a fetch cut inside the 2nd message, 51 bytes
LZ4_ENTRY = bytes.fromhex(  # "hello" in an lz4 wrapper, 67 bytes
    "0000000000000000000000 37a92e826a0003ffffffff00000029 04224d1860401a1a000000160001 00f00513"
    "87a77ab20000ffffffff0000000568656c6c6f00000000".replace(" ", "")
)


def test_hello_message_crc_and_bytes(records_codec):
    assert records_codec.encode_message_set([(None, b"hello")]) == HELLO_ENTRY
    (m,) = records_codec.decode_message_set(HELLO_ENTRY)
    assert (m.offset, m.key, m.value, m.crc, m.magic, m.timestamp) == (0, None, b"hello", 0x87A77AB2, 0, None)


def test_truncated_fetch_tail(records_codec):
    decoded = records_codec.decode_message_set(TRUNCATED_SET)
    assert [m.value for m in decoded] == [b"hello"]
    assert decoded.partial and decoded.valid_bytes == 31
    cols = records_codec.decode_columns(TRUNCATED_SET)
    assert cols.count == 1 and cols.partial and cols.valid_bytes == 31


def test_lz4_wrapper_with_broken_hc(records_codec):
    assert len(LZ4_ENTRY) == 67 and zlib.crc32(LZ4_ENTRY[16:]) == 0xA92E826A
    (m,) = records_codec.decode_message_set(LZ4_ENTRY)
    assert (m.offset, m.value, m.codec, m.crc) == (0, b"hello", "lz4", 0x87A77AB2)
    written = records_codec.encode_message_set([(None, b"hello")], codec="lz4")
    assert written[26:33] == bytes.fromhex("04224d1860401a")  # magic, FLG 0x60, BD 0x40, broken HC 0x1a
    assert records_codec.decode_message_set(written)[0].value == b"hello"


def test_lz4_magic1_writes_correct_hc(records_codec):
    written = records_codec.encode_message_set([(None, b"hello", 1)], magic=1, codec="lz4")
    assert written[34:41] == bytes.fromhex("04224d18604082")


def test_header_checksums_match_the_documented_values():
    header = bytes.fromhex("04224d186040")
    assert xxh32(header) == 0xC8581A3A and xxh32(header[4:]) == 0x301A8268
    assert header_checksum(header, broken=True) == 0x1A and header_checksum(header, broken=False) == 0x82


@given(st.binary(max_size=80), st.integers(min_value=0, max_value=2**32 - 1))
def test_xxh32_matches_xxhash(data, seed):
    assert xxh32(data, seed) == xxhash.xxh32_intdigest(data, seed)


def test_lz4_hc_rules():
    inner = HELLO_ENTRY * 3
    broken = lz4_frame_encode(inner, magic=0)
    correct = lz4_frame_encode(inner, magic=1)
    assert broken[6] == 0x1A and correct[6] == 0x82
    assert lz4_frame_decode(broken, magic=0, limit=1 << 20) == inner
    assert lz4_frame_decode(correct, magic=0, limit=1 << 20) == inner
    assert lz4_frame_decode(correct, magic=1, limit=1 << 20) == inner
    with pytest.raises(DecodeError) as err:
        lz4_frame_decode(broken, magic=1, limit=1 << 20, position=100)
    assert err.value.offset == 106


def test_lz4_frame_with_block_checksums_content_size_and_raw_blocks():
    """Frames other writers produce (python-lz4/liblz4 frame API) decode once their HC is accepted."""
    import lz4.frame as lz4_frame  # python-lz4 (dev dependency) writes the reference frames

    payload = bytes(range(256)) * 600 + bytes(70000)
    frame = lz4_frame.compress(payload, block_linked=False, content_checksum=True, block_checksum=True, store_size=True)
    assert lz4_frame_decode(frame, magic=1, limit=1 << 20) == payload
    incompressible = bytes(cramjam.snappy.compress_raw(payload))[:5000]  # forces a stored (raw) block
    assert (
        lz4_frame_decode(lz4_frame.compress(incompressible, block_linked=False), magic=1, limit=1 << 20)
        == incompressible
    )


def test_lz4_dependent_blocks_rejected():
    linked = bytes(cramjam.lz4.compress(bytes(range(256)) * 600))  # cramjam writes linked blocks
    with pytest.raises(DecodeError, match="dependent blocks"):
        lz4_frame_decode(linked, magic=1, limit=1 << 20)


def _xerial(blocks, version_format=">ii"):
    body = b"".join(struct.pack(">i", len(b)) + b for b in blocks)
    return b"\x82SNAPPY\x00" + struct.pack(version_format, 1, 1) + body


def _wrapper(records_codec, codec_attr: int, payload: bytes) -> bytes:
    body = struct.pack(">bbi", 0, codec_attr, -1) + struct.pack(">i", len(payload)) + payload
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


@pytest.mark.parametrize("version_format", [">ii", "<ii"])
def test_xerial_detected_by_magic_only(records_codec, version_format):
    inner = records_codec.encode_message_set([(None, b"a" * 50), (b"k", b"b" * 50)])
    blocks = [bytes(cramjam.snappy.compress_raw(inner[:40])), bytes(cramjam.snappy.compress_raw(inner[40:]))]
    data = _wrapper(records_codec, 2, _xerial(blocks, version_format))
    assert [m.value for m in records_codec.decode_message_set(data)] == [b"a" * 50, b"b" * 50]


def test_raw_snappy_and_concatenated_gzip_members(records_codec):
    inner = records_codec.encode_message_set([(None, b"x"), (None, b"y")])
    raw = _wrapper(records_codec, 2, bytes(cramjam.snappy.compress_raw(inner)))
    assert [m.value for m in records_codec.decode_message_set(raw)] == [b"x", b"y"]
    gz = bytes(cramjam.gzip.compress(inner[:31])) + bytes(cramjam.gzip.compress(inner[31:]))
    assert [m.value for m in records_codec.decode_message_set(_wrapper(records_codec, 1, gz))] == [b"x", b"y"]
