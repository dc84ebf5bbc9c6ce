"""How the consumer turns fetched bytes into ConsumerRecords: ``kproto.records.record_rows`` on both
backends (the compiled one fills rows in place, so it is held to the pure one), the skipping of records
below the fetch offset and of control batches, and a modern (record batch, headers) consume end to end.
"""

from __future__ import annotations

import asyncio
import sys
from itertools import chain

import pytest

from kproto.client import Consumer, ConsumerRecord, Producer
from kproto.client.consumer import _Buffer, _decode_fetched
from kproto.records import decode_records, encode_control_batch, encode_record_batch
from kproto.testing import MockBroker

HEADERS = [("h", b"1"), ("empty", None)]


def fetched() -> bytes:
    """A gzip batch of offsets 0-4 (headers on 1), a LogAppendTime batch 5-6, then a commit marker at 7."""
    return b"".join(
        [
            encode_record_batch(
                [
                    (b"k0", b"v0", 1000),
                    (None, b"v1", 1001, HEADERS),
                    (b"k2", None, 1002),
                    (b"", b"", 999),
                    (b"k4", b"v4" * 50, 1004),
                ],
                base_offset=0,
                codec="gzip",
                producer_id=7,
                producer_epoch=0,
                transactional=True,
            ),
            encode_record_batch([(b"k5", b"v5", 5), (b"k6", b"v6", 6)], base_offset=5, timestamp_type=1),
            encode_control_batch(True, producer_id=7, producer_epoch=0, base_offset=7),
        ]
    )


def test_record_rows_is_the_same_on_both_backends(both_codecs) -> None:
    data = fetched()
    results = []
    for codec in both_codecs:
        batches = codec.decode_records(data).batches
        rows = codec.record_rows(chain.from_iterable(b.records for b in batches), ConsumerRecord, "t", 3, start=2)
        assert all(type(row) is ConsumerRecord for row in rows)
        results.append([tuple(row) for row in rows])
    assert results[0] == results[1]
    assert [row[2] for row in results[0]] == [2, 3, 4, 5, 6, 7]
    assert results[0][0] == ("t", 3, 2, 1002, b"k2", None, ())
    # the compiled backend also takes objects that are not its own Record (the pure twin's named tuples)
    cython, python = both_codecs
    pure_records = [r for b in python.decode_records(data).batches for r in b.records]
    assert [tuple(r) for r in cython.record_rows(pure_records, ConsumerRecord, "t", 3)] == [
        tuple(r) for r in python.record_rows(pure_records, ConsumerRecord, "t", 3)
    ]
    with pytest.raises(TypeError, match="tuple subclass"):
        cython.record_rows(pure_records, list, "t", 3)
    # the compiled rows own one reference to each field: none leaked, none missing
    topic = "".join(["to", "pic"])
    before = sys.getrefcount(topic)
    rows = cython.record_rows(pure_records, ConsumerRecord, topic, 3)
    assert sys.getrefcount(topic) == before + len(rows)
    del rows
    assert sys.getrefcount(topic) == before


def test_records_below_the_fetch_offset_and_control_batches_are_skipped() -> None:
    chunks, count, next_offset = _decode_fetched(fetched(), 3)
    assert next_offset == 8  # past the commit marker: the partition is not fetched again from 7
    buffer = _Buffer("t", 0)
    buffer.add(chunks, count, next_offset)
    first = buffer.take(2)
    rest = buffer.take(100)
    assert [r.offset for r in first + rest] == [3, 4, 5, 6] and len(buffer) == 0
    assert rest[-1] == ConsumerRecord("t", 0, 6, rest[-1].timestamp, b"k6", b"v6", ())
    assert rest[-1].timestamp == max(r.timestamp for r in decode_records(fetched()).batches[1].records)
    assert repr(first[0]) == "ConsumerRecord('t', 0, offset=3, key=b'')"
    # a fetch holding only a marker still moves the next fetch offset on
    marker_only = encode_control_batch(False, producer_id=7, producer_epoch=0, base_offset=8)
    assert _decode_fetched(marker_only, 8) == ([], 0, 9)


def test_modern_consume_headers_and_seek_into_a_compressed_batch() -> None:
    async def main() -> None:
        with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers, compression="gzip", linger_ms=50) as producer:
                futures = [
                    await producer.send("t", b"%d" % i, key=b"k%d" % i, headers=[("n", b"%d" % i)]) for i in range(300)
                ]
                await producer.flush()
                assert [(await f).offset for f in futures] == list(range(300))
            async with Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
                consumer.assign([("t", 0)])
                got = []
                while len(got) < 300:
                    got.extend(await consumer.poll(10000, max_records=120))
                assert [r.offset for r in got] == list(range(300))
                assert all(r.headers == (("n", r.value),) and r.key == b"k" + r.value for r in got)
                consumer.seek(("t", 0), 151)  # inside a gzip batch
                again = await consumer.poll(10000, max_records=5)
                assert [r.offset for r in again] == [151, 152, 153, 154, 155]
                assert consumer.position(("t", 0)) == 156

    asyncio.run(asyncio.wait_for(main(), 90))
