"""Interop with kafka-python's and aiokafka's legacy (magic 0/1) record builders and readers."""

from __future__ import annotations

import pytest

CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3}
ITEMS = [(None, b"hello", 1000), (b"key", b"", 1001), (b"", None, 1002), (b"k" * 50, b"v" * 3000, 1003)]


def _peers():
    from aiokafka.record import legacy_records as aio_legacy
    from aiokafka.record import memory_records as aio_memory
    from aiokafka.record._crecords import LegacyRecordBatchBuilder as AioCBuilder
    from aiokafka.record._crecords import MemoryRecords as AioCRecords
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpBuilder
    from kafka.record.memory_records import MemoryRecords as KpRecords

    return {
        "kafka-python": (KpBuilder, KpRecords),
        "aiokafka-cython": (AioCBuilder, AioCRecords),
        "aiokafka-pure": (aio_legacy._LegacyRecordBatchBuilderPy, aio_memory._MemoryRecordsPy),
    }


PEERS = _peers()
CASES = [
    (peer, magic, codec)
    for peer in PEERS
    for magic in (0, 1)
    for codec in CODEC_IDS
    if not (peer.startswith("aiokafka") and codec == "lz4" and magic == 0)  # aiokafka refuses it
]


def _require_codec_library(peer: str, codec):
    if peer == "kafka-python" and codec in ("snappy", "lz4"):
        import kafka.codec

        available = kafka.codec.has_snappy() if codec == "snappy" else kafka.codec.has_lz4()
        if not available:
            pytest.fail(f"kafka-python needs its optional {codec} library (python-snappy / lz4) for this interop test")


def peer_encode(peer: str, magic: int, codec) -> bytes:
    builder_cls, _ = PEERS[peer]
    builder = builder_cls(magic, CODEC_IDS[codec], 1 << 24)
    for i, (key, value, ts) in enumerate(ITEMS):
        builder.append(i, ts if magic else None, key, value)
    return bytes(builder.build())


def peer_decode(peer: str, data: bytes):
    _, records_cls = PEERS[peer]
    records = records_cls(data)
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        out.extend((r.offset, r.key, r.value, r.timestamp) for r in batch)


def expected(magic: int):
    return [(i, key, value, ts if magic else None) for i, (key, value, ts) in enumerate(ITEMS)]


@pytest.mark.parametrize("peer, magic, codec", CASES)
def test_peer_sets_decode_in_kproto(records_codec, peer, magic, codec):
    _require_codec_library(peer, codec)
    data = peer_encode(peer, magic, codec)
    decoded = records_codec.decode_message_set(data)
    assert [(m.offset, m.key, m.value, m.timestamp) for m in decoded] == expected(magic)
    assert {m.codec for m in decoded} == {codec}  # the name encoding takes
    assert records_codec.decode_columns(data).values() == [m.value for m in decoded]


@pytest.mark.parametrize("peer, magic, codec", CASES)
def test_kproto_sets_decode_in_peer(records_codec, peer, magic, codec):
    _require_codec_library(peer, codec)
    data = records_codec.encode_message_set(ITEMS, magic=magic, codec=codec)
    assert peer_decode(peer, data) == expected(magic)


@pytest.mark.parametrize("peer", list(PEERS))
@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_bytes_identical(records_codec, peer, magic):
    assert records_codec.encode_message_set(ITEMS, magic=magic) == peer_encode(peer, magic, None)


def test_kafka_python_lz4_magic0_bytes_identical_framing(records_codec):
    _require_codec_library("kafka-python", "lz4")
    ours = records_codec.encode_message_set(ITEMS, codec="lz4")
    theirs = peer_encode("kafka-python", 0, "lz4")
    assert ours[26:33] == theirs[26:33] == bytes.fromhex("04224d1860401a")
