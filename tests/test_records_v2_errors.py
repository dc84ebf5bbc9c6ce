"""Bad magic 2 input: each case of the records issue is a DecodeError (or LimitExceededError) at the
absolute offset named here, on both backends, from decode_records and decode_columns alike."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest

from kproto.errors import DecodeError, EncodeError, LimitExceededError

PREFIX = b"\x00" * 40  # a magic 0 message before the batch would do too; plain bytes keep offsets simple


def batch(
    records: bytes, count: int, *, attributes: int = 0, base_offset: int = 100, base_ts: int = 1000, crc=None
) -> bytes:
    tail = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), base_ts, base_ts, -1, -1, -1, count) + records
    crc = crc32c.crc32c(tail) if crc is None else crc
    return struct.pack(">qiib", base_offset, len(tail) + 9, -1, 2) + struct.pack(">I", crc) + tail


def zz(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record(key=b"k", value=b"v", *, ts_delta=b"\x00", off_delta=b"\x00", headers=b"\x00", length=None) -> bytes:
    body = b"\x00" + ts_delta + off_delta
    body += zz(-1) if key is None else zz(len(key)) + key
    body += zz(-1) if value is None else zz(len(value)) + value
    body += headers
    return zz(len(body) if length is None else length) + body


def expect(api, data, offset, cls=DecodeError, **options):
    with pytest.raises(cls) as err:
        api.decode_records(data, **options)
    with pytest.raises(cls) as err2:
        api.decode_columns(data, **options)
    assert err.value.offset == err2.value.offset == offset, str(err.value)
    return err.value


def test_good_reference(records_codec):
    data = batch(record() + record(off_delta=b"\x02"), 2)
    assert [(r.offset, r.key) for r in records_codec.decode_records(data)] == [(100, b"k"), (101, b"k")]


def test_crc32c_mismatch(records_codec):
    data = batch(record(), 1, crc=0x12345678)
    err = expect(records_codec, data, 17)
    assert "CRC-32C" in str(err)
    assert len(records_codec.decode_records(data, check_crc=False)) == 1
    assert list(records_codec.decode_columns(data + batch(record(), 1), check_crc=False).crc_ok) == [0, 1]


def test_batch_length_below_header(records_codec):
    data = batch(record(), 1)
    expect(records_codec, data[:8] + struct.pack(">i", 30) + data[12:], 8)


def test_batch_length_beyond_the_data_is_a_partial_tail_only_at_the_end(records_codec):
    data = batch(record(), 1)
    result = records_codec.decode_records(data + data[:-3])
    assert (result.valid_bytes, result.partial, len(result)) == (len(data), True, 1)


def test_records_count_disagrees(records_codec):
    expect(records_codec, batch(record(), 2), 61 + len(record()))  # fewer records than counted
    expect(records_codec, batch(record() + record(), 1), 61 + len(record()))  # bytes left over
    expect(records_codec, batch(record(), -1), 57)


def test_varints(records_codec):
    # record: length at 61, attributes 62, timestamp delta 63, offset delta after it
    expect(records_codec, batch(record(off_delta=b"\xff\xff\xff\xff\xff\x01"), 1), 64)  # 6-byte varint
    expect(records_codec, batch(record(off_delta=b"\xff\xff\xff\xff\x7f"), 1), 64)  # overflows int32
    expect(records_codec, batch(record(ts_delta=b"\xff" * 10 + b"\x01"), 1), 63)  # 11-byte varlong
    expect(records_codec, batch(record(ts_delta=b"\xff" * 9 + b"\x7f"), 1), 63)  # overflows int64
    expect(records_codec, batch(b"\x80", 1), 61)  # runs past the end


def test_negative_lengths(records_codec):
    good = record()
    # key length at 65, key 66, value length 67, value 68, header count 69, first header key length 70
    expect(records_codec, batch(good[:4] + zz(-2) + good[5:], 1), 65)  # key length -2
    expect(records_codec, batch(record(headers=zz(1) + zz(-1)), 1), 71)  # null header key (after its length)
    expect(records_codec, batch(record(headers=zz(1) + zz(1) + b"a" + zz(-3)), 1), 72)  # header value -3
    expect(records_codec, batch(record(headers=zz(1) + zz(1) + b"\xff" + zz(-1)), 1), 71)  # key not UTF-8
    assert list(records_codec.decode_records(batch(record(headers=zz(1) + zz(1) + b"a" + zz(-1)), 1)))[0].headers == (
        ("a", None),
    )


def test_record_length_disagrees(records_codec):
    expect(records_codec, batch(record(length=3), 1), 61)  # below the smallest record
    expect(records_codec, batch(record(length=9) + b"\x00", 1), 70)  # fields end a byte early


def test_offset_delta_leaves_int64(records_codec):
    expect(records_codec, batch(record(off_delta=zz(10)), 1, base_offset=2**63 - 5), 61)
    expect(records_codec, batch(record(ts_delta=zz(-10)), 1, base_ts=-(2**63) + 5), 61)


def test_control_batch_with_malformed_key(records_codec):
    control = 0x30  # transactional + control
    expect(records_codec, batch(record(key=b"\x00\x00\x00"), 1, attributes=control), 0)
    expect(records_codec, batch(record(key=None), 1, attributes=control), 0)
    expect(records_codec, batch(record(key=b"\xff\xff\x00\x01", value=b"\x00" * 6), 1, attributes=control), 0)
    expect(records_codec, batch(record(key=b"\x00\x00\x00\x01", value=b"\x00"), 1, attributes=control), 0)
    ok = records_codec.decode_records(batch(record(key=b"\x00\x00\x00\x05", value=None), 1, attributes=control))
    assert ok.batches[0].control_type == 5  # a control type kproto does not know passes with its number


def test_frames_that_lie_about_sizes(records_codec):
    body = record() * 3
    lying = bytearray(cramjam.zstd.compress(body))
    assert lying[4] & 0x20  # single segment: the one-byte content size follows the descriptor
    lying[5] += 1
    expect(records_codec, batch(bytes(lying), 3, attributes=4), 61)
    short = bytearray(cramjam.zstd.compress(body))
    short[5] -= 1
    expect(records_codec, batch(bytes(short), 3, attributes=4), 61)
    frame = bytearray(b"\x04\x22\x4d\x18\x68\x40" + struct.pack("<Q", len(body) + 5))
    from kproto.records.lz4_frame import header_checksum

    frame.append(header_checksum(bytes(frame), broken=False))
    frame += struct.pack("<I", len(body) | 0x80000000) + body + b"\x00\x00\x00\x00"
    expect(records_codec, batch(bytes(frame), 3, attributes=3), 61 + 6)  # at the content size field


def test_decompression_budget(records_codec):
    body = record(value=b"x" * 5000) * 40
    data = batch(cramjam.zstd.compress(body), 40, attributes=4)
    assert len(records_codec.decode_records(data)) == 40
    expect(records_codec, data, 61, LimitExceededError, max_decompressed_size=len(body) - 1)
    # the cap covers the whole call, not each batch
    expect(records_codec, data + data, 61 + len(data), LimitExceededError, max_decompressed_size=len(body) + 10)


def test_unknown_codec_and_magic(records_codec):
    expect(records_codec, batch(record(), 1, attributes=5), 21)
    data = bytearray(batch(record(), 1))
    data[16] = 3
    expect(records_codec, bytes(data), 16)


def test_encode_rejects_bad_values(records_codec):
    with pytest.raises(EncodeError):
        records_codec.encode_record_batch([(b"k", b"v", 0, [(1, b"x")])])
    with pytest.raises(EncodeError):
        records_codec.encode_record_batch([(b"k", 5)])
    with pytest.raises(EncodeError):
        records_codec.encode_record_batch([(b"k", b"v", -(2**63)), (b"k", b"v", 2**63 - 1)])
    with pytest.raises(EncodeError):
        records_codec.encode_record_batch([(b"k", b"v")], codec="brotli")
    with pytest.raises(EncodeError):
        records_codec.encode_record_batch([(b"k", b"v")], producer_epoch=2**15)
    with pytest.raises(EncodeError):
        records_codec.encode_message_set([(b"k", b"v")], magic=1, codec="zstd")
    assert records_codec.encode_record_batch([]) == b""
