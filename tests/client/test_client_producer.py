"""kproto.client.Producer and Connection against the mock broker (0.9 versions, no ApiVersions).

Order is checked on the broker's stored log and on the offsets the futures report; pipelining is made
visible by delaying every Produce at the broker so requests pile up.  The partitioner is checked against
kafka-python's (an independent implementation of the Java rule).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, Awaitable, Callable, List, TypeVar

import pytest

from kproto import ErrorCode, KprotoError
from kproto.client import BufferFullError, Connection, Producer, murmur2, partition_for_key
from kproto.client.connection import CLIENT_VERSIONS, BrokerConnectionError
from kproto.errors import ProtocolError
from kproto.messages import ApiVersionsRequest, MetadataRequest, MetadataResponse, ProduceRequest
from kproto.versions import negotiate, served_versions
from kproto.records import decode_records
from kproto.testing import MockBroker

T = TypeVar("T")
RELEASE = "0.9.0"


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 60))


def values(broker: MockBroker, topic: str, partition: int) -> List[bytes]:
    return [r.value for r in decode_records(broker.log_bytes(topic, partition))]


def test_murmur2_matches_kafka_python() -> None:
    from kafka.partitioner.default import murmur2 as kafka_murmur2

    rng = random.Random(15)
    keys = [b"", b"a", b"ab", b"abc", b"abcd"] + [rng.randbytes(rng.randint(0, 64)) for _ in range(300)]
    for key in keys:
        assert murmur2(key) & 0x7FFFFFFF == kafka_murmur2(key) & 0x7FFFFFFF, key
        for partitions in (1, 3, 7, 64):
            assert partition_for_key(key, partitions) == (kafka_murmur2(key) & 0x7FFFFFFF) % partitions


def test_known_java_partitions() -> None:
    # Values the Java client's Utils.murmur2 gives (the same pairs its own unit test lists).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536


def test_connection_request_and_one_way_produce() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            conn = await Connection.open(broker.host, broker.port, broker_release=RELEASE, max_in_flight=2)
            assert conn.version(0) == 1 and conn.version(3) == 0  # Produce v1, Metadata v0 on 0.9
            broker.inject("Metadata", delay=0.2, times=None)
            pending = [asyncio.ensure_future(conn.request(MetadataRequest(topics=[]))) for _ in range(6)]
            await asyncio.sleep(0.05)
            assert conn.in_flight == 2 and not any(p.done() for p in pending)  # the rest wait, none fail
            broker.faults.clear()
            answers = await asyncio.gather(*pending)
            assert all(isinstance(a, MetadataResponse) and a.topics[0].name == "t" for a in answers)
            with pytest.raises(ProtocolError, match="send_one_way"):
                await conn.request(ProduceRequest(acks=0, timeout_ms=100, topic_data=[]))
            await conn.close()
            with pytest.raises(BrokerConnectionError):
                await conn.request(MetadataRequest(topics=[]))

    run(main)


def test_versions_from_api_versions_and_a_broker_that_lacks_it() -> None:
    async def closes_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # what a 0.9 broker does with an api key it does not know
        writer.close()

    async def main() -> None:
        async with MockBroker() as broker:
            conn = await Connection.open(broker.host, broker.port)
            answer = await conn.request(ApiVersionsRequest(), version=0)
            assert conn.versions == negotiate(answer, CLIENT_VERSIONS)
            assert conn.version(3) == min(CLIENT_VERSIONS[3][1], served_versions(answer)[3][1])
            await conn.close()
        server = await asyncio.start_server(closes_at_once, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(BrokerConnectionError, match="broker_release"):
            await Connection.open("127.0.0.1", port)
        server.close()

    run(main)


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_order_under_five_in_flight(codec: Any) -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            broker.inject("Produce", delay=0.005, times=None)  # answers lag: requests pile up
            async with Producer(
                broker.bootstrap_servers, broker_release=RELEASE, max_in_flight=5, batch_size=400, compression=codec
            ) as producer:
                futures = [await producer.send("t", b"%d" % i, partition=i % 2) for i in range(2000)]
                await producer.flush()
                assert producer.peak_in_flight == 5
            metas = [f.result() for f in futures]
            for partition in (0, 1):
                offsets = [m.offset for m in metas if m.partition == partition]
                assert offsets == list(range(1000))
                assert values(broker, "t", partition) == [b"%d" % i for i in range(partition, 2000, 2)]

    run(main)


def test_leader_change_refreshes_metadata_and_resends_in_order() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(
                broker.bootstrap_servers,
                broker_release=RELEASE,
                max_in_flight=5,
                batch_size=300,
                retries=50,
                retry_backoff_ms=10,
            ) as producer:
                first = [await producer.send("t", b"%d" % i) for i in range(100)]
                await producer.flush()
                metadata_before = broker.request_counts().get((3, 0), 0)
                broker.inject("Produce", error=ErrorCode.NOT_LEADER_FOR_PARTITION, times=None)
                second = [await producer.send("t", b"%d" % i) for i in range(100, 1000)]
                for _ in range(500):  # let several rounds fail and be refreshed
                    await asyncio.sleep(0.01)
                    if broker.request_counts().get((3, 0), 0) >= metadata_before + 3:
                        break
                broker.faults.clear()
                await producer.flush()
                assert broker.request_counts()[(3, 0)] >= metadata_before + 3
            assert [f.result().offset for f in first + second] == list(range(1000))
            assert values(broker, "t", 0) == [b"%d" % i for i in range(1000)]

    run(main)


def test_non_retriable_error_fails_the_records() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            broker.inject("Produce", error=ErrorCode.MESSAGE_TOO_LARGE)
            async with Producer(broker.bootstrap_servers, broker_release=RELEASE) as producer:
                future = await producer.send("t", b"x")
                with pytest.raises(Exception, match="t\\[0\\]") as info:
                    await future
                assert getattr(info.value, "code", None) == ErrorCode.MESSAGE_TOO_LARGE
                assert (await (await producer.send("t", b"y"))).offset == 0

    run(main)


def test_acks_zero_keys_and_unknown_topic_holding() -> None:
    async def main() -> None:
        async with MockBroker(default_partitions=4) as broker:
            async with Producer(broker.bootstrap_servers, broker_release=RELEASE, acks=0, linger_ms=2) as producer:
                # "fresh" is unknown when send() is called: records wait in the topic's holding queue
                futures = [await producer.send("fresh", b"v%d" % i, key=b"key-%d" % (i % 13)) for i in range(400)]
                await producer.flush()
            assert all(f.result().offset == -1 for f in futures)
            for partition in range(4):
                for message in decode_records(broker.log_bytes("fresh", partition)):
                    assert partition_for_key(message.key, 4) == partition
            assert sum(broker.high_watermark("fresh", p) for p in range(4)) == 400

    run(main)


def test_an_unanswered_request_times_out_and_is_retried() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(
                broker.bootstrap_servers, broker_release=RELEASE, request_timeout_ms=100, retry_backoff_ms=10
            ) as producer:
                broker.inject("Produce", delay=5.0)  # the first Produce is answered far too late
                metadata = await (await producer.send("t", b"late"))
                assert metadata.offset >= 0
            assert b"late" in values(broker, "t", 0)

    run(main)


def test_headers_need_a_modern_broker() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers, broker_release=RELEASE) as producer:
                with pytest.raises(Exception, match="headers need Produce v3"):
                    await (await producer.send("t", b"x", headers=[("h", b"1")]))

    run(main)


def test_records_sent_while_metadata_is_pending_keep_their_order() -> None:
    # The first record of an unknown topic waits in the holding queue; the next one is sent the moment
    # the topic's metadata is known, before the send loop has had a turn to move the held record.  It
    # must queue behind the held record, not overtake it (the sync facade's threads hit this window).
    async def main() -> None:
        async with MockBroker(topics={"t%d" % i: 1 for i in range(10)}) as broker:
            async with Producer(broker.bootstrap_servers, broker_release=RELEASE) as producer:
                for i in range(10):
                    topic = "t%d" % i
                    first = await producer.send(topic, b"first")
                    while topic not in producer.cluster.partitions:
                        await asyncio.sleep(0)
                    second = await producer.send(topic, b"second")
                    assert [(await first).offset, (await second).offset] == [0, 1]
                    assert values(broker, topic, 0) == [b"first", b"second"]

    run(main)


def test_records_of_a_topic_without_metadata_fail_after_max_block() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}, auto_create_topics=False) as broker:
            async with Producer(
                broker.bootstrap_servers, broker_release=RELEASE, max_block_ms=300, retry_backoff_ms=20
            ) as producer:
                held = [await producer.send("missing", b"%d" % i) for i in range(3)]
                known = await producer.send("t", b"x")
                for future in held:
                    with pytest.raises(KprotoError, match="no metadata for topic 'missing' within"):
                        await future
                assert (await known).offset == 0
                again = await producer.send("missing", b"later")  # a new holding queue, a new deadline
                with pytest.raises(KprotoError, match="no metadata for topic 'missing'"):
                    await again
            assert broker.high_watermark("t", 0) == 1

    run(main)


def test_sync_producer() -> None:
    from kproto.client import sync

    with MockBroker(topics={"t": 1}) as broker:
        with sync.Producer(broker.bootstrap_servers, broker_release=RELEASE) as producer:
            futures = [producer.send("t", b"%d" % i) for i in range(50)]
            producer.flush()
            assert [f.result(10).offset for f in futures] == list(range(50))
        assert values(broker, "t", 0) == [b"%d" % i for i in range(50)]


def test_idempotent_producer_at_modern_versions_keeps_order_through_leader_errors() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            async with Producer(
                broker.bootstrap_servers,
                acks="all",
                compression="zstd",
                batch_size=500,
                retries=50,
                retry_backoff_ms=10,
            ) as producer:  # versions from ApiVersions
                assert producer.idempotent
                futures = [
                    await producer.send("t", b"%d" % i, partition=i % 2, headers=[("n", b"%d" % i)]) for i in range(200)
                ]
                await producer.flush()
                broker.inject("Produce", error=ErrorCode.NOT_LEADER_FOR_PARTITION, times=3)
                futures += [await producer.send("t", b"%d" % i, partition=i % 2) for i in range(200, 1000)]
                await producer.flush()
            assert [f.result().offset for f in futures if f.result().partition == 0] == list(range(500))
            for partition in (0, 1):
                records = list(decode_records(broker.log_bytes("t", partition)))
                assert [r.value for r in records] == [b"%d" % i for i in range(partition, 1000, 2)]
                assert records[0].producer_id >= 0 and records[0].headers == (("n", b"%d" % partition),)

    run(main)


def test_one_request_waits_while_the_connection_opens() -> None:
    # Tasks waiting for the same opening connection do not resume in the order they were made, and one
    # made just after it opened would write first: a partition's batches would be stored out of order.
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers, broker_release=RELEASE) as producer:
                await (await producer.send("t", b"warm-up"))  # metadata known from here on
                for conn in list(producer.cluster._connections.values()):
                    await conn.close()
                producer.cluster.forget_closed()
                gate = asyncio.Event()
                dial = producer.cluster._dial

                async def gated_dial(*args: Any) -> Any:
                    await gate.wait()
                    return await dial(*args)

                producer.cluster._dial = gated_dial  # type: ignore[method-assign]
                futures = []
                for i in range(30):
                    futures.append(await producer.send("t", b"%d" % i))
                    for _ in range(3):
                        await asyncio.sleep(0)
                    if i == 10:
                        assert list(producer._node_in_flight.values()) == [1]  # the others wait in their queue
                        gate.set()
                await producer.flush()
            assert [f.result().offset for f in futures] == list(range(1, 31))
        assert values(broker, "t", 0) == [b"warm-up"] + [b"%d" % i for i in range(30)]

    run(main)


def test_sync_producer_send_nowait_and_send_batch() -> None:
    from kproto.client import InvalidRecordError, sync

    options = dict(broker_release=RELEASE, max_buffered_records=40, linger_ms=60000, delivery_timeout_ms=200000)
    with MockBroker(topics={"t": 1}) as broker:
        with sync.Producer(broker.bootstrap_servers, **options) as producer:  # nothing leaves before a flush
            futures = [producer.send_nowait("t", b"%d" % i) for i in range(30)]
            sent = producer.send_batch("t", [b"b%d" % i for i in range(5)], keys=[b"k"] * 5)
            with pytest.raises(InvalidRecordError, match="record 1: the value is str"):
                producer.send_batch("t", [b"x", "y"])
            producer.flush()
            assert [f.result(10).offset for f in futures] == list(range(30))
            assert [m.offset for m in sent.result(10)] == list(range(30, 35))
            crowd = [producer.send_nowait("t", b"c%d" % i) for i in range(50)]  # more than the buffer holds
            producer.flush()
            assert [f.result(10).offset for f in crowd[:40]] == list(range(35, 75))
            for future in crowd[40:]:
                with pytest.raises(BufferFullError):
                    future.result(10)
        assert values(broker, "t", 0) == (
            [b"%d" % i for i in range(30)] + [b"b%d" % i for i in range(5)] + [b"c%d" % i for i in range(40)]
        )
