"""Magic 2 record batches against independent implementations: aiokafka (its Cython and its pure
``DefaultRecordBatchBuilder``/``DefaultRecordBatch``) and kafka-python 3.x, both directions, every codec,
on both kproto backends (``records_codec``).

Peer facts these tests lean on: aiokafka's builders write partition leader epoch -1 and kafka-python's 0;
aiokafka's Cython builder always compresses while the others fall back to an uncompressed batch when
compression does not shrink it (the records here compress well, so every builder compresses).
"""

from __future__ import annotations

import struct

import pytest

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000
# headers with a null value, an empty value, a non-ASCII key; keys null/empty; values null/empty/large
ITEMS = [
    (None, b"hello", BASE_TS, [("trace", b"abc"), ("none", None)]),
    (b"key", b"", BASE_TS + 5, []),
    (b"", None, BASE_TS - 3, [("h\u00e9", b"")]),
    (b"k" * 50, b"v" * 3000, BASE_TS + 1000, [("a", b"1"), ("b", b"2"), ("c", None)]),
]


def _builders():
    from aiokafka.record import default_records as aio
    from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioCBuilder
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

    return {
        "aiokafka-cython": AioCBuilder,
        "aiokafka-pure": aio._DefaultRecordBatchBuilderPy,
        "kafka-python": KpBuilder,
    }


def _readers():
    from aiokafka.record import default_records as aio
    from aiokafka.record._crecords import DefaultRecordBatch as AioCBatch
    from kafka.record.default_records import DefaultRecordBatch as KpBatch

    return {"aiokafka-cython": AioCBatch, "aiokafka-pure": aio._DefaultRecordBatchPy, "kafka-python": KpBatch}


BUILDERS = _builders()
READERS = _readers()


def peer_batch(peer: str, codec, *, transactional=False, producer=(-1, -1, -1), base_offset=0) -> bytes:
    builder = BUILDERS[peer](2, CODEC_IDS[codec], int(transactional), *producer, 1 << 24)
    for i, (key, value, ts, headers) in enumerate(ITEMS):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    raw = bytes(builder.build())
    if base_offset:
        raw = struct.pack(">q", base_offset) + raw[8:]  # the base offset is outside the CRC
    return raw


def peer_records(peer: str, data: bytes):
    batch = READERS[peer](data)
    assert batch.validate_crc()
    return batch, [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]


def expected(base_offset=0):
    return [(base_offset + i, ts, k, v, list(h)) for i, (k, v, ts, h) in enumerate(ITEMS)]


def mine(records):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", sorted(BUILDERS))
def test_decode_peer_batches(records_codec, peer, codec):
    data = peer_batch(peer, codec, transactional=True, producer=(4321, 7, 100), base_offset=1000)
    decoded = records_codec.decode_records(data)
    assert (decoded.valid_bytes, decoded.partial) == (len(data), False)
    assert mine(decoded) == expected(1000)
    [batch] = decoded.batches
    assert (batch.codec, batch.is_transactional, batch.is_control, batch.producer_id, batch.producer_epoch) == (
        codec,
        True,
        False,
        4321,
        7,
    )
    assert batch.partition_leader_epoch == (0 if peer == "kafka-python" else -1)
    for i, r in enumerate(decoded):
        assert (r.magic, r.codec, r.producer_id, r.producer_epoch, r.sequence, r.is_transactional) == (
            2,
            codec,
            4321,
            7,
            100 + i,
            True,
        )


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", sorted(READERS))
def test_peers_decode_our_batches(records_codec, peer, codec):
    data = records_codec.encode_record_batch(
        ITEMS, base_offset=77, codec=codec, producer_id=9, producer_epoch=2, base_sequence=5, transactional=True
    )
    batch, records = peer_records(peer, data)
    assert records == expected(77)
    assert (batch.compression_type, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        CODEC_IDS[codec],
        9,
        2,
        5,
    )
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.first_timestamp, batch.max_timestamp) == (BASE_TS, BASE_TS + 1000)


@pytest.mark.parametrize("peer", sorted(BUILDERS))
def test_uncompressed_output_is_byte_identical(records_codec, peer):
    epoch = 0 if peer == "kafka-python" else -1
    ours = records_codec.encode_record_batch(
        ITEMS, producer_id=11, producer_epoch=1, base_sequence=3, partition_leader_epoch=epoch
    )
    assert ours == peer_batch(peer, None, producer=(11, 1, 3))


@pytest.mark.parametrize("peer", sorted(READERS))
def test_control_batches(records_codec, peer):
    commit = records_codec.encode_control_batch(
        True, producer_id=5, producer_epoch=3, coordinator_epoch=17, base_offset=40, timestamp=BASE_TS
    )
    abort = records_codec.encode_control_batch(
        False, producer_id=5, producer_epoch=4, coordinator_epoch=18, base_offset=41, timestamp=BASE_TS
    )
    for data, kind, epoch in ((commit, 1, 17), (abort, 0, 18)):
        batch = READERS[peer](data)
        assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
        decoded = records_codec.decode_records(data)
        [ours] = decoded.batches
        assert (ours.is_control, ours.control_type, ours.coordinator_epoch) == (True, kind, epoch)
        [record] = list(decoded)
        assert record.is_control and record.key == struct.pack(">hh", 0, kind)
    if peer == "kafka-python":  # it parses the marker itself
        from kafka.record.default_records import ControlRecord

        [record] = list(READERS[peer](commit))
        assert isinstance(record, ControlRecord) and record.type == 1


def test_log_append_time(records_codec):
    data = records_codec.encode_record_batch(ITEMS, timestamp_type=1)
    max_ts = max(ts for _, _, ts, _ in ITEMS)
    for peer in READERS:
        batch = READERS[peer](data)
        assert batch.timestamp_type == 1
        assert {r.timestamp for r in batch} == {max_ts}
    decoded = records_codec.decode_records(data)
    assert {(r.timestamp, r.timestamp_type) for r in decoded} == {(max_ts, 1)}


def test_mixed_magics_and_truncated_tails(records_codec):
    """A fetch after an upgrade: magic 0, magic 1 (compressed) and magic 2 entries in one buffer."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    legacy = []
    for magic, codec in ((0, 0), (1, 1)):
        builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
        builder.append(0, BASE_TS if magic else None, b"old", b"value")
        legacy.append(bytes(builder.build()))
    v2 = peer_batch("kafka-python", "lz4", base_offset=10)
    data = legacy[0] + legacy[1] + v2 + peer_batch("aiokafka-pure", None, base_offset=14)
    decoded = records_codec.decode_records(data)
    assert [b.magic for b in decoded.batches] == [0, 1, 2, 2]
    assert [r.magic for r in decoded] == [0, 1] + [2] * 8
    assert [r.codec for r in decoded][:3] == [None, "gzip", "lz4"]
    assert list(decoded)[0].headers == () and list(decoded)[0].timestamp is None
    assert decoded.valid_bytes == len(data) and not decoded.partial
    # every cut inside the last batch is a partial tail, never an error
    last = len(data) - len(peer_batch("aiokafka-pure", None))
    for cut in range(last, len(data), 7):
        cut_result = records_codec.decode_records(data[:cut])
        assert (cut_result.valid_bytes, cut_result.partial) == (last, cut > last)
        assert len(list(cut_result)) == 6


def test_columns_match_records(records_codec):
    data = (
        peer_batch("aiokafka-pure", "zstd", producer=(3, 1, 0))
        + records_codec.encode_control_batch(False, producer_id=3, producer_epoch=1, base_offset=4)
        + records_codec.encode_message_set([(b"k", b"v", 5)], magic=1, codec="snappy")
    )
    columns = records_codec.decode_columns(data)
    records = list(records_codec.decode_records(data))
    assert columns.count == len(records) == 6
    assert list(columns.offsets) == [r.offset for r in records]
    assert columns.keys() == [r.key for r in records] and columns.values() == [r.value for r in records]
    assert columns.headers() == [list(r.headers) for r in records]
    assert list(columns.sequences) == [r.sequence for r in records]
    assert list(columns.control) == [r.is_control for r in records]
    assert list(columns.timestamp_types) == [r.timestamp_type for r in records]


def test_columns_arrow_schema(records_codec):
    pytest.importorskip("pyarrow")
    table = records_codec.decode_columns(peer_batch("kafka-python", None), arrow=True)
    assert str(table.schema.field("headers").type) == "list<item: struct<key: string, value: binary>>"
    assert table.column("headers").to_pylist()[0] == [{"key": "trace", "value": b"abc"}, {"key": "none", "value": None}]
    assert table.column("producer_id").to_pylist() == [-1] * 4


def test_header_keys_repeated_and_changed_between_records(records_codec):
    # The compiled decoder reuses a header key's str when the previous record had the same key bytes at the
    # same place (for the first 8 places): here keys repeat, change to another key of the same length, move
    # to other places, and records carry 10 headers, past what it caches; aiokafka's builder writes them.
    keys = ["trace", "span", "k1", "k2", "h\u00e9", "tenant", "a", "b", "c", "d"]
    rows = []
    for i in range(12):
        count = (0, 1, 3, 10)[i % 4]
        names = keys[i % 3 :] + keys[: i % 3] if i % 5 else keys[::-1]
        headers = [
            (names[j] if not (i == 7 and j == 2) else "k9", b"%d.%d" % (i, j) if j % 4 else None) for j in range(count)
        ]
        rows.append((None, b"v%d" % i, BASE_TS + i, headers))
    builder = BUILDERS["aiokafka-cython"](2, 0, 0, -1, -1, -1, 1 << 24)
    for i, (key, value, ts, headers) in enumerate(rows):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    decoded = records_codec.decode_records(bytes(builder.build()))
    assert [list(r.headers) for r in decoded] == [headers for _, _, _, headers in rows]
    assert [list(r.headers) for r in decoded.batches[0].records] == [headers for _, _, _, headers in rows]
