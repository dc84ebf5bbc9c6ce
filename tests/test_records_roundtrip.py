"""Round trips of every magic x codec x null/empty key/value, on both backends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.records import RecordSet
from kproto.records.format import codec_id

CODECS = [None, "gzip", "snappy", "lz4"]
binary = st.one_of(st.none(), st.just(b""), st.binary(max_size=300))
timestamps = st.one_of(st.none(), st.integers(min_value=-1, max_value=2**63 - 1))


def fields(m):
    return (m.offset, m.key, m.value, m.timestamp, m.magic, m.codec, m.timestamp_type)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(st.tuples(binary, binary, timestamps), min_size=1, max_size=20),
    base=st.integers(min_value=0, max_value=2**40),
)
def test_round_trip(records_codec, magic, codec, items, base):
    data = records_codec.encode_message_set(items, magic=magic, codec=codec, base_offset=base)
    decoded = records_codec.decode_message_set(data)
    assert not decoded.partial and decoded.valid_bytes == len(data)
    expected = [
        (
            base + i,
            key,
            value,
            (-1 if ts is None else ts) if magic else None,
            magic,
            codec,
            0 if magic else None,
        )
        for i, (key, value, ts) in enumerate(items)
    ]
    assert [fields(m) for m in decoded] == expected


@pytest.mark.parametrize("magic", [0, 1])
def test_null_and_empty_stay_distinct(records_codec, magic):
    data = records_codec.encode_message_set([(None, None), (b"", b""), (None, b""), (b"", None)], magic=magic)
    assert [(m.key, m.value) for m in records_codec.decode_message_set(data)] == [
        (None, None),
        (b"", b""),
        (None, b""),
        (b"", None),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_message_objects_and_bytes_likes_encode(records_codec, codec):
    first = records_codec.decode_message_set(records_codec.encode_message_set([(b"k", b"v", 5)], magic=1))
    data = records_codec.encode_message_set([first[0], (bytearray(b"a"), memoryview(b"b"))], magic=1, codec=codec)
    assert [(m.key, m.value, m.timestamp) for m in records_codec.decode_message_set(data)] == [
        (b"k", b"v", 5),
        (b"a", b"b", -1),
    ]


def test_raw_snappy_framing(records_codec):
    data = records_codec.encode_message_set([(None, b"x" * 100)] * 3, codec="snappy", snappy_framing="raw")
    assert b"\x82SNAPPY" not in data
    assert [m.value for m in records_codec.decode_message_set(data)] == [b"x" * 100] * 3


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_wrapper_offsets_as_kafka_writes_them(records_codec, codec):
    # magic 0: inner offsets absolute, wrapper = last; magic 1: inner relative 0..n-1, wrapper absolute last
    for magic in (0, 1):
        data = records_codec.encode_message_set([(None, b"a"), (None, b"b")], magic=magic, codec=codec, base_offset=7)
        assert int.from_bytes(data[:8], "big") == 8
        assert [m.offset for m in records_codec.decode_message_set(data)] == [7, 8]


def test_magic1_wrapper_timestamp_is_max_and_log_append_time(records_codec):
    items = [(None, b"a", 10), (None, b"b", 30), (None, b"c", 20)]
    data = records_codec.encode_message_set(items, magic=1, codec="gzip", timestamp_type=1)
    assert int.from_bytes(data[18:26], "big") == 30
    decoded = records_codec.decode_message_set(data)
    assert [(m.timestamp, m.timestamp_type) for m in decoded] == [(30, 1)] * 3
    plain = records_codec.decode_message_set(records_codec.encode_message_set(items, magic=1, timestamp_type=1))
    assert [(m.timestamp, m.timestamp_type) for m in plain] == [(10, 1), (30, 1), (20, 1)]


def test_large_values_cross_lz4_and_xerial_blocks(records_codec):
    big = bytes(range(256)) * 1200  # 300 KiB: several 64 KiB lz4 blocks and 32 KiB xerial blocks
    for codec in CODECS:
        data = records_codec.encode_message_set([(b"k", big), (None, big[:5000])], codec=codec)
        assert [m.value for m in records_codec.decode_message_set(data)] == [big, big[:5000]]


def test_empty_input(records_codec):
    assert records_codec.encode_message_set([], codec="gzip") == b""
    decoded = records_codec.decode_message_set(b"")
    assert len(decoded) == 0 and decoded.valid_bytes == 0 and not decoded.partial


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_columns_match_messages(records_codec, magic, codec):
    items = [(None, b"v1", 3), (b"k2", None, 4), (b"", b"", None)]
    data = records_codec.encode_message_set(items, magic=magic, codec=codec, base_offset=100)
    messages = list(records_codec.decode_message_set(data))
    cols = records_codec.decode_columns(data)
    assert len(cols) == 3 and list(cols.offsets) == [m.offset for m in messages]
    assert cols.keys() == [m.key for m in messages] and cols.values() == [m.value for m in messages]
    assert list(cols.timestamps) == [-1 if m.timestamp is None else m.timestamp for m in messages]
    assert list(cols.codecs) == [codec_id(m.codec) for m in messages] and list(cols.crc_ok) == [1, 1, 1]
    batch = records_codec.decode_columns(data, arrow=True)
    assert batch.column("value").to_pylist() == [m.value for m in messages]
    assert batch.column("key").to_pylist() == [m.key for m in messages]
    assert batch.column("timestamp").to_pylist() == [m.timestamp for m in messages]


def test_record_set_wraps_raw_bytes():
    raw = bytes.fromhex("00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f")
    rs = RecordSet(raw)
    assert rs.raw == raw and bytes(rs) == raw and len(rs) == len(raw)
    assert rs == RecordSet(bytearray(raw)) and rs != RecordSet(b"") and hash(rs) == hash(RecordSet(raw))
    assert [m.value for m in rs] == [b"hello"] and rs.decode(check_crc=False)[0].offset == 0
    assert repr(rs) == "RecordSet(31 bytes)"
    assert RecordSet.from_messages([(None, b"hello")]) == rs
    assert len(RecordSet.from_messages([(None, b"x")], magic=1, codec="lz4", base_offset=3).decode()) == 1
