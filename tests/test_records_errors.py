"""Bad input: every failure is a KprotoError naming its offset, limits hold, encode rejects bad values."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import pytest

from kproto.errors import DecodeError, EncodeError, KprotoError, LimitExceededError
from kproto.records.lz4_frame import lz4_frame_encode

HELLO = bytes.fromhex("00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f")


def entry(offset: int, magic: int, attributes: int, key, value, timestamp: int = 0, crc=None) -> bytes:
    """One message set entry built by hand (so tests can write what the encoder never would)."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    crc = zlib.crc32(body) if crc is None else crc
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def with_bytes(data: bytes, at: int, new: bytes, fix_crc: bool = True) -> bytes:
    out = data[:at] + new + data[at + len(new) :]
    if fix_crc:
        out = out[:12] + struct.pack(">I", zlib.crc32(out[16:])) + out[16:]
    return out


def expect(codec_api, data, cls, offset, at_least=False, **options):
    with pytest.raises(cls) as err:
        codec_api.decode_message_set(data, **options)
    with pytest.raises(cls) as err2:  # the message set columns (decode_columns reads magic 2 too)
        codec_api.decode_message_columns(data, **options)
    assert err2.value.offset == err.value.offset
    if at_least:
        assert err.value.offset >= offset, str(err.value)
    else:
        assert err.value.offset == offset, str(err.value)
    return err.value


def test_size_below_minimum(records_codec):
    expect(records_codec, with_bytes(HELLO, 8, struct.pack(">i", 13)), DecodeError, 8)
    expect(records_codec, HELLO[:8] + struct.pack(">i", -5) + b"\0" * 4, DecodeError, 8)


def test_crc_mismatch_and_switch(records_codec):
    bad = HELLO[:-1] + b"O"
    err = expect(records_codec, bad, DecodeError, 12)
    assert "CRC" in str(err) and "12" in str(err)
    assert records_codec.decode_message_set(bad, check_crc=False)[0].value == b"hellO"
    assert list(records_codec.decode_columns(bad + HELLO, check_crc=False).crc_ok) == [0, 1]


def test_bad_magic_and_lengths(records_codec):
    expect(records_codec, with_bytes(HELLO, 16, b"\x02"), DecodeError, 16)
    expect(records_codec, with_bytes(HELLO, 18, struct.pack(">i", 10)), DecodeError, 18)
    expect(records_codec, with_bytes(HELLO, 18, struct.pack(">i", -2)), DecodeError, 18)
    expect(records_codec, with_bytes(HELLO, 22, struct.pack(">i", 4)), DecodeError, 22)
    expect(records_codec, with_bytes(HELLO, 22, struct.pack(">i", -1)), DecodeError, 22)
    expect(records_codec, with_bytes(entry(0, 0, 0, None, b""), 16, b"\x01"), DecodeError, 8)  # magic 1 needs 22 bytes


def test_error_is_at_absolute_offset_of_later_message(records_codec):
    data = HELLO + HELLO[:-1] + b"O"
    expect(records_codec, data, DecodeError, 31 + 12)


def test_codec_problems(records_codec):
    expect(records_codec, entry(0, 0, 5, None, b"x"), DecodeError, 17)
    expect(records_codec, entry(0, 0, 1, None, None), DecodeError, 22)
    expect(records_codec, entry(0, 0, 1, None, b"not gzip"), DecodeError, 26)
    expect(records_codec, entry(0, 0, 2, None, b"\xff\xff\xff\xff\xff\xff"), DecodeError, 26)
    expect(records_codec, entry(0, 0, 3, None, b"\x04\x22\x4d\x18\x60\x40"), DecodeError, 26)
    expect(records_codec, entry(0, 0, 1, None, gzip.compress(b"")), DecodeError, 26)  # holds no messages
    expect(records_codec, entry(0, 0, 1, None, gzip.compress(HELLO[:-3])), DecodeError, 26)  # truncated inner
    expect(records_codec, entry(0, 0, 1, None, gzip.compress(HELLO)[:-5]), DecodeError, 26)  # truncated gzip


def test_nested_compression_is_refused(records_codec):
    inner = entry(0, 0, 1, None, gzip.compress(HELLO))
    err = expect(records_codec, entry(0, 0, 1, None, gzip.compress(inner)), LimitExceededError, 26)
    assert "nested" in str(err)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_decompression_bomb_is_capped(records_codec, codec):
    big = records_codec.encode_message_set([(None, bytes(300_000))] * 4, codec=codec)
    # the offset is that of the payload block where the cap was crossed
    expect(records_codec, big, LimitExceededError, 26, at_least=True, max_decompressed_size=1_000_000)
    assert len(records_codec.decode_message_set(big, max_decompressed_size=1_300_000)) == 4


def test_magic1_wrapper_offset_rules(records_codec):
    inner = entry(0, 1, 0, None, b"a", 5) + entry(1, 1, 0, None, b"b", 6)
    payload = gzip.compress(inner)
    assert [m.offset for m in records_codec.decode_message_set(entry(41, 1, 1, None, payload, 6))] == [40, 41]
    assert [m.offset for m in records_codec.decode_message_set(entry(0, 1, 1, None, payload, 6))] == [0, 1]
    below_last = entry(3, 1, 1, None, gzip.compress(entry(5, 1, 0, None, b"a") + entry(9, 1, 0, None, b"b")))
    expect(records_codec, HELLO + below_last, DecodeError, 31)


def test_magic0_inner_offsets_are_literal(records_codec):
    inner = entry(100, 0, 0, None, b"a") + entry(101, 0, 0, None, b"b")
    payload = lz4_frame_encode(inner, magic=0)
    assert [m.offset for m in records_codec.decode_message_set(entry(0, 0, 3, None, payload))] == [100, 101]


def test_inner_error_names_wrapper_offset(records_codec):
    payload = bytes(cramjam.snappy.compress_raw(HELLO + HELLO[:-1] + b"O"))
    data = HELLO + entry(1, 0, 2, None, payload)
    err = expect(records_codec, data, DecodeError, 31 + 26)
    assert "decompressed byte 43" in str(err)


def test_check_inner_crc_off_checks_the_wrapper_only(records_codec):
    """check_inner_crc=False skips the CRCs inside a compressed wrapper, never the wrapper's own nor any other check."""
    inner = entry(0, 1, 0, None, b"a", 5) + entry(1, 1, 0, None, b"b", 6, crc=0xDEADBEEF)  # a producer's bad CRC
    wrapper = entry(1, 1, 1, None, gzip.compress(inner), 6)
    data = HELLO + wrapper

    def offset_of_error(decode, data):
        with pytest.raises(DecodeError) as err:
            decode(data, check_inner_crc=False)
        return err.value.offset

    assert "CRC" in str(expect(records_codec, data, DecodeError, 31 + 34))  # default: the inner CRC is checked
    with pytest.raises(DecodeError) as again:
        records_codec.decode_records(data)
    assert again.value.offset == 31 + 34
    for decode in (records_codec.decode_message_set, records_codec.decode_records):
        assert [(m.offset, m.value) for m in decode(data, check_inner_crc=False)] == [
            (0, b"hello"),
            (0, b"a"),
            (1, b"b"),
        ]
        assert offset_of_error(decode, data[:-1] + b"X") == 31 + 12  # compressed bytes damaged: the wrapper's CRC
        assert offset_of_error(decode, HELLO[:-1] + b"O" + wrapper) == 12  # a top-level message: still checked
        assert offset_of_error(decode, entry(1, 1, 1, None, gzip.compress(inner[:-3]), 6)) == 34  # truncated inner
    unchecked = records_codec.decode_message_set(data, check_crc=False, check_inner_crc=True)  # check_crc=False: none
    assert [m.value for m in unchecked] == [b"hello", b"a", b"b"]


def test_not_a_buffer(records_codec):
    with pytest.raises(TypeError):
        records_codec.decode_message_set(12)


@pytest.mark.parametrize(
    "messages, options",
    [
        ([("k", b"v")], {}),
        ([(b"k", 5)], {}),
        ([(b"k",)], {}),
        ([(b"k", b"v", 1.5)], {"magic": 1}),
        ([(b"k", b"v", 2**63)], {"magic": 1}),
        ([object()], {}),
        ([(b"k", b"v")], {"magic": 2}),
        ([(b"k", b"v")], {"codec": "zstd"}),
        ([(b"k", b"v")], {"base_offset": 2**63}),
        ([(b"k", b"v")], {"snappy_framing": "framed"}),
        ([(b"k", b"v")], {"timestamp_type": 1}),
        ([(b"k", b"v")] * 2, {"base_offset": 2**63 - 1}),
        ([(b"k", b"v")] * 2, {"base_offset": 2**63 - 1, "codec": "gzip"}),
    ],
)
def test_encode_rejects(records_codec, messages, options):
    with pytest.raises(EncodeError):
        records_codec.encode_message_set(messages, **options)


def test_every_error_is_a_kproto_error():
    assert issubclass(LimitExceededError, DecodeError) and issubclass(DecodeError, KprotoError)
