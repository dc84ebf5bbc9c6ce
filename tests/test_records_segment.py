"""read_segment over a log segment of every era, with a torn tail, in chunks smaller than its entries."""

from __future__ import annotations

import io

import pytest

from kproto.errors import DecodeError
from kproto.records import read_segment
from kproto.records import segment as segment_module


def segment_bytes(codec_api) -> bytes:
    entries = [
        codec_api.encode_message_set([(None, b"v0-%d" % i) for i in range(3)], magic=0),
        codec_api.encode_message_set([(b"k", b"v1", 1000)], magic=1, codec="gzip", base_offset=3),
        codec_api.encode_record_batch([(b"k", b"x" * 5000, 2000, [("h", None)])] * 4, base_offset=4, codec="zstd"),
        codec_api.encode_control_batch(True, producer_id=1, producer_epoch=0, base_offset=8, timestamp=3000),
        codec_api.encode_record_batch([(None, b"y" * 20000, 4000)], base_offset=9),
    ]
    return b"".join(entries)


@pytest.mark.parametrize("chunk", [64, 4096, 1 << 20])
def test_every_era_and_a_torn_tail(records_codec, tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(segment_module, "CHUNK_SIZE", chunk)
    data = segment_bytes(records_codec)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data + data[:25])
    seg = read_segment(str(path))
    batches = list(segment_module.Segment(path, chunk_size=chunk))
    assert [(b.magic, b.base_offset, len(b.records)) for b in batches] == [
        (0, 0, 1),
        (0, 1, 1),
        (0, 2, 1),
        (1, 3, 1),
        (2, 4, 4),
        (2, 8, 1),
        (2, 9, 1),
    ]
    assert batches[5].control_type == 1
    assert [b.position for b in batches] == sorted(b.position for b in batches) and batches[0].position == 0
    list(seg)
    assert (seg.valid_bytes, seg.torn_tail) == (len(data), len(data))
    clean = read_segment(io.BytesIO(data))
    assert sum(len(b.records) for b in clean) == 10 and clean.torn_tail is None


def test_damage_reports_the_file_offset(records_codec, tmp_path):
    data = bytearray(segment_bytes(records_codec))
    last = len(data) - 20012  # inside the last batch's value: its CRC-32C no longer matches
    data[last] ^= 1
    with pytest.raises(DecodeError) as err:
        list(segment_module.Segment(io.BytesIO(bytes(data)), chunk_size=100))
    assert err.value.offset == len(data) - len(records_codec.encode_record_batch([(None, b"y" * 20000, 4000)])) + 17


def test_record_set_decodes_any_magic(records_codec):
    from kproto.records import RecordSet

    data = segment_bytes(records_codec)
    rs = RecordSet(data)
    assert bytes(rs) == data and len(rs.records()) == 10
    assert [r.magic for r in rs.records()][:5] == [0, 0, 0, 1, 2]
    built = RecordSet.from_records([(b"k", b"v", 5, [("h", b"1")])], base_offset=3)
    assert [(r.offset, r.headers) for r in built.records()] == [(3, (("h", b"1"),))]
