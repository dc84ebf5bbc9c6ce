"""The columnar batch encoder (``kproto._fast._batch_builder`` and its pure twin) against the row encoder:
the same bytes for the same records on every codec, the same errors in both twins, and batches that
kafka-python and aiokafka decode."""

from __future__ import annotations

import importlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto._backend import records_module
from kproto.errors import EncodeError
from kproto.records import decode_records
from kproto.records.codec import ColumnBatchCodec, MessageSetCodec

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def _builder(name: str):
    if name == "python":
        return importlib.import_module("kproto.records.batch_builder")
    try:
        return importlib.import_module("kproto._fast._batch_builder")
    except ImportError:
        if os.environ.get("KPROTO_PURE") == "1":
            pytest.skip("KPROTO_PURE=1 run without the compiled extension")
        raise


@pytest.fixture(scope="module", params=["cython", "python"])
def columns_codec(request: pytest.FixtureRequest) -> ColumnBatchCodec:
    return ColumnBatchCodec(_builder(request.param))


@pytest.fixture(scope="module")
def row_codec() -> MessageSetCodec:
    return MessageSetCodec(records_module(False))


binary = st.one_of(st.none(), st.just(b""), st.binary(max_size=40), st.binary(min_size=120, max_size=300))
headers = st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(["a", "trace", "h\u00e9", ""]), binary), max_size=3))
records = st.lists(st.tuples(binary, binary, st.integers(-(2**61), 2**61), headers), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    items=records,
    codec=st.sampled_from(CODECS),
    base=st.integers(0, 2**40),
    no_keys=st.booleans(),
    no_headers=st.booleans(),
)
def test_same_bytes_as_the_row_encoder(columns_codec, row_codec, items, codec, base, no_keys, no_headers):
    keys = None if no_keys else [k for k, _, _, _ in items]
    values = [v for _, v, _, _ in items]
    stamps = [t for _, _, t, _ in items]
    header_column = None if no_headers else [h for _, _, _, h in items]
    rows = [
        (None if no_keys else k, v, t, () if no_headers or h is None else h) for k, v, t, h in items
    ]  # fmt: skip
    options = dict(base_offset=base, codec=codec, producer_id=5, producer_epoch=1, base_sequence=3)
    got = columns_codec.encode_record_batch_columns(
        values, keys=keys, timestamps=stamps, headers=header_column, **options
    )
    assert got == row_codec.encode_record_batch(rows, **options)
    if items:
        assert [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in decode_records(got)] == [
            (k, v, t, tuple(h)) for k, v, t, h in rows
        ]


@pytest.mark.parametrize("codec", CODECS)
def test_peers_decode_columnar_batches(columns_codec, codec):
    from aiokafka.record._crecords import DefaultRecordBatch as AioCBatch
    from kafka.record.default_records import DefaultRecordBatch as KpBatch

    keys = [None, b"k", b"", b"x" * 40]
    values = [b"v" * 500, None, b"", b"w"]
    stamps = [1_700_000_000_000, 1_700_000_000_005, 1_699_999_999_990, 1_700_000_001_000]
    hdrs = [[("trace", b"t"), ("n", None)], None, [("h\u00e9", b"")], ()]
    data = columns_codec.encode_record_batch_columns(
        values, keys=keys, timestamps=stamps, headers=hdrs, codec=codec, base_offset=7, producer_id=9, producer_epoch=2
    )
    for reader in (AioCBatch, KpBatch):
        batch = reader(data)
        assert batch.validate_crc()
        got = [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]
        assert got == [(7 + i, stamps[i], keys[i], values[i], list(hdrs[i] or ())) for i in range(4)]
        assert (batch.producer_id, batch.producer_epoch, batch.max_timestamp) == (9, 2, stamps[3])


BAD = [
    (dict(values=[b"a", b"b"], keys=[b"k"]), "1 keys for 2 values"),
    (dict(values=[b"a", b"b"], timestamps=[1, 2, 3]), "3 timestamps for 2 values"),
    (dict(values=[b"a", b"b"], headers=[None]), "1 headers for 2 values"),
    (dict(values=[b"a", "b"]), "record 1: the value is str"),
    (dict(values=[b"a", b"b", b"c"], keys=[None, None, bytearray(b"k")]), "record 2: the key is bytearray"),
    (dict(values=[b"a", b"b"], timestamps=[1, 2.0]), "record 1: timestamp 2.0 is not an int64"),
    (dict(values=[b"a", b"b"], timestamps=[1, 2**63]), "record 1: timestamp .* is not an int64"),
    (dict(values=[b"a", b"b"], timestamps=[2**62, -(2**62) - 1]), "record 1: timestamp .* too far"),
    (dict(values=[b"a", b"b"], headers=[None, [("k", "v")]]), "record 1: the header value is str"),
    (dict(values=[b"a", b"b"], headers=[None, [(1, b"v")]]), "record 1: a header key is int"),
    (dict(values=[b"a", b"b"], headers=[[("k",)], None]), "record 0: headers must be"),
    (dict(values=[b"a", b"b"], headers=[None, [(b"\xff", None)]]), "record 1: headers must be"),
]


@pytest.mark.parametrize("columns,message", BAD)
def test_bad_columns_name_the_record(columns_codec, columns, message):
    with pytest.raises(EncodeError, match=message):
        columns_codec.encode_record_batch_columns(**columns)


def test_empty_columns_and_default_timestamps(columns_codec):
    assert columns_codec.encode_record_batch_columns([]) == b""
    [record] = decode_records(columns_codec.encode_record_batch_columns([b"v"]))
    assert record.value == b"v" and record.timestamp > 1_600_000_000_000


def test_active_backend_is_dispatched():
    import kproto._backend as backend
    from kproto.records import encode_record_batch_columns

    expected = "kproto._fast._batch_builder" if backend.BACKEND == "cython" else "kproto.records.batch_builder"
    assert backend.batch_builder_impl.__name__ == expected
    data = encode_record_batch_columns([b"a", b"b"], keys=[b"k", None], timestamps=[5, 6])
    assert [(r.key, r.value, r.timestamp) for r in decode_records(data)] == [(b"k", b"a", 5), (None, b"b", 6)]
