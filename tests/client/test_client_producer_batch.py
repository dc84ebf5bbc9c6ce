"""Producer.send_nowait and Producer.send_batch against the mock broker, on both record encoders.

The producer's batches are encoded with the compiled core or the pure twin (the ``records_codec`` fixture);
what is checked is what the broker stored: per-partition order, offsets the futures report, idempotent
sequences that run on without a gap, and that bad input is refused before anything of the call is queued.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, TypeVar

import pytest

import kproto.client.producer as producer_module
from kproto.client import (
    BufferFullError,
    InvalidRecordError,
    Producer,
    ProducerClosedError,
    RecordTooLargeError,
)
from kproto.records import decode_records
from kproto.testing import MockBroker

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 60))


@pytest.fixture
def encoder(records_codec: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The producer's batch encoders (columns, and rows for what the columns refuse) bound to one backend
    for the test."""
    import importlib

    from kproto.records.codec import ColumnBatchCodec

    compiled = records_codec.impl.__name__.startswith("kproto._fast")
    builder = importlib.import_module("kproto._fast._batch_builder" if compiled else "kproto.records.batch_builder")
    monkeypatch.setattr(producer_module, "encode_record_batch", records_codec.encode_record_batch)
    monkeypatch.setattr(
        producer_module, "encode_record_batch_columns", ColumnBatchCodec(builder).encode_record_batch_columns
    )
    return records_codec


def stored(broker: MockBroker, topic: str, partition: int) -> List[Any]:
    return list(decode_records(broker.log_bytes(topic, partition)))


def test_send_nowait_and_send_batch_keep_order_and_sequences(encoder: Any) -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            broker.inject("Produce", delay=0.003, times=None)  # requests pile up: five in flight
            async with Producer(
                broker.bootstrap_servers, acks="all", compression="zstd", batch_size=600, max_in_flight=5
            ) as producer:
                assert producer.idempotent
                futures = [producer.send_nowait("t", b"%d" % i, partition=i % 2) for i in range(300)]
                batch_futures = []
                for start in range(300, 1000, 100):
                    for partition in (0, 1):
                        chunk = [b"%d" % i for i in range(start + partition, start + 100, 2)]
                        batch_futures.append(
                            await producer.send_batch(
                                "t",
                                chunk,
                                keys=[b"k"] * len(chunk),
                                headers=[[("h", v)] for v in chunk],
                                partition=partition,
                            )
                        )
                await producer.flush()
                assert producer.peak_in_flight > 1
            metas = [f.result() for f in futures] + [m for f in batch_futures for m in f.result()]
            for partition in (0, 1):
                expected = [b"%d" % i for i in range(partition, 300, 2)]
                for start in range(300, 1000, 100):
                    expected += [b"%d" % i for i in range(start + partition, start + 100, 2)]
                records = stored(broker, "t", partition)
                assert [r.value for r in records] == expected
                assert sorted(m.offset for m in metas if m.partition == partition) == list(range(500))
                assert all(r.headers == (("h", r.value),) and r.key == b"k" for r in records[150:])
            for partition in (0, 1):
                batches = decode_records(broker.log_bytes("t", partition)).batches
                sequence = 0
                for batch in batches:  # one producer id, sequences from 0 without a gap
                    assert batch.producer_id == batches[0].producer_id >= 0
                    assert batch.base_sequence == sequence
                    sequence += batch.records_count
                assert sequence == 500

    run(main)


def test_send_batch_from_numpy_and_pyarrow_columns(encoder: Any) -> None:
    np = pytest.importorskip("numpy", reason="numpy is a dev dependency (pyproject's dev extra)")
    pa = pytest.importorskip("pyarrow", reason="pyarrow is a dev dependency (pyproject's dev extra)")

    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers) as producer:
                first = await producer.send_batch("t", np.array([b"a", b"b", None], dtype=object))
                second = await producer.send_batch(
                    "t", pa.array([b"c", None], pa.binary()), keys=pa.chunked_array([[b"x"], [b"y"]], pa.binary())
                )
                sent = await first
                assert [m.offset for m in sent] == [0, 1, 2] and len(sent) == 3
                assert sent[-1].offset == 2 and [m.offset for m in sent[1:]] == [1, 2]
                assert [m.offset for m in await second] == [3, 4]
            records = stored(broker, "t", 0)
            assert [(r.key, r.value) for r in records] == [
                (None, b"a"),
                (None, b"b"),
                (None, None),
                (b"x", b"c"),
                (b"y", None),
            ]

    run(main)


def test_send_batch_refuses_bad_input_naming_the_record(encoder: Any) -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers, max_request_size=1000) as producer:
                values = [b"0", b"1", b"2"]
                with pytest.raises(InvalidRecordError, match="2 keys for 3 values") as info:
                    await producer.send_batch("t", values, keys=[b"a", b"b"])
                assert info.value.index == 2
                with pytest.raises(InvalidRecordError, match="record 1: the value is str") as info:
                    await producer.send_batch("t", [b"0", "1", b"2"])
                assert info.value.index == 1
                with pytest.raises(InvalidRecordError, match="record 2: the key is int"):
                    await producer.send_batch("t", values, keys=[b"a", None, 7])
                with pytest.raises(InvalidRecordError, match=r"record 0: a header must be a \(str, bytes"):
                    await producer.send_batch("t", values, headers=[[("h", "text")], [], []])
                with pytest.raises(InvalidRecordError, match="2 headers for 3 values"):
                    await producer.send_batch("t", values, headers=[[], []])
                with pytest.raises(RecordTooLargeError, match="record 1 of 2000 bytes") as info:
                    await producer.send_batch("t", [b"0", b"x" * 2000, b"2"])
                assert info.value.index == 1 and isinstance(info.value, InvalidRecordError)
                with pytest.raises(InvalidRecordError, match="values must be a column"):
                    await producer.send_batch("t", b"not a column")
                with pytest.raises(RecordTooLargeError, match="2000 bytes"):
                    producer.send_nowait("t", b"x" * 2000)
                with pytest.raises(RecordTooLargeError):
                    await producer.send("t", b"x" * 2000)
                assert producer._buffered == 0  # nothing of a refused call was queued
                await (await producer.send_batch("t", values))
            assert [r.value for r in stored(broker, "t", 0)] == values  # only the good call was written

    run(main)


def test_send_nowait_refuses_when_the_buffer_is_full(encoder: Any) -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            broker.inject("Produce", delay=0.2, times=1)
            async with Producer(broker.bootstrap_servers, max_buffered_records=10) as producer:
                futures = [producer.send_nowait("t", b"%d" % i) for i in range(10)]
                with pytest.raises(BufferFullError, match="10 records buffered"):
                    producer.send_nowait("t", b"10")
                await futures[-1]
                futures.append(producer.send_nowait("t", b"10"))  # room again once acknowledged
                await producer.flush()
            assert [f.result().offset for f in futures] == list(range(11))
            with pytest.raises(ProducerClosedError):
                producer.send_nowait("t", b"late")
            with pytest.raises(ProducerClosedError):
                await producer.send_batch("t", [b"late"])

    run(main)


def test_send_batch_waits_behind_records_held_for_metadata(encoder: Any) -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 3}) as broker:
            async with Producer(broker.bootstrap_servers) as producer:
                assert "t" not in producer.cluster.partitions  # so the first records are held
                singles = [producer.send_nowait("t", b"%d" % i) for i in range(5)]
                outcome = await producer.send_batch("t", [b"%d" % i for i in range(5, 10)])
                partition = (await singles[0]).partition
                assert {(await f).partition for f in singles} == {partition}
                assert {m.partition for m in await outcome} == {partition}
            assert [r.value for r in stored(broker, "t", partition)] == [b"%d" % i for i in range(10)]

    run(main)


def test_send_batch_fills_batches_up_to_the_request_size(encoder: Any) -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers, batch_size=1000, bulk_batch_size=20_000) as producer:
                outcome = await producer.send_batch("t", [b"v" * 100] * 300)
                await producer.flush()
                assert [m.offset for m in outcome.result()] == list(range(300))
            # the caller's records are already a batch: about 12 KB a batch here, not batch_size's 1000 B
            counts = [b.records_count for b in decode_records(broker.log_bytes("t", 0)).batches]
            assert sum(counts) == 300 and len(counts) == 2 and all(len(b"v" * 100) * c < 20_000 for c in counts)

    run(main)


def test_bytes_like_values_and_mixed_keys_in_one_batch(encoder: Any) -> None:
    # The columns take bytes; a batch holding another bytes-like value goes through the row encoder, and a
    # batch whose records gain keys and headers part way keeps its columns aligned.
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers, linger_ms=50) as producer:
                futures = [
                    producer.send_nowait("t", b"plain"),
                    producer.send_nowait("t", bytearray(b"array"), key=b"k"),
                    producer.send_nowait("t", memoryview(b"view"), headers=[("h", b"1")]),
                    producer.send_nowait("t", None),
                ]
                await producer.flush()
                assert [f.result().offset for f in futures] == [0, 1, 2, 3]
            assert [(r.key, r.value, tuple(r.headers)) for r in stored(broker, "t", 0)] == [
                (None, b"plain", ()),
                (b"k", b"array", ()),
                (None, b"view", (("h", b"1"),)),
                (None, None, ()),
            ]

    run(main)
