"""kproto.client with real clients on one mock broker: what one writes the others read, a shared group,
and keyed records on the same partitions as kafka-python's.

kafka-python and librdkafka speak 0.9; aiokafka (it has no 0.9 mode) and kproto in the aiokafka test
negotiate with ApiVersions, so that test runs at the broker's modern versions (record batches, headers,
the modern group APIs).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Dict, List, Set, Tuple

import pytest

from kproto.client import Consumer, Producer, sync
from kproto.testing import MockBroker

import confluent_kafka  # noqa: E402  (dev dependency)
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402

pytestmark = pytest.mark.real_clients

RELEASE = "0.9.0"
N = 300
KP_09 = {"api_version": (0, 9)}
CK_09 = {"api.version.request": False, "broker.version.fallback": "0.9.0.1", "log_level": 2, "session.timeout.ms": 6000}
DEADLINE = 60.0


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def kproto_produce(broker: MockBroker, topic: str, **options: object) -> None:
    with sync.Producer(broker.bootstrap_servers, broker_release=RELEASE, **options) as producer:
        for i in range(N):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i)
        producer.flush()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_kafka_python_and_librdkafka_read_what_kproto_writes(codec: object) -> None:
    with MockBroker(topics={"t": 3}, min_session_timeout_ms=100) as broker:
        kproto_produce(broker, "t", compression=codec)
        kp = KafkaConsumer(
            "t",
            bootstrap_servers=broker.bootstrap_servers,
            auto_offset_reset="earliest",
            consumer_timeout_ms=1000,
            **KP_09,
        )
        got = {(m.key, m.value) for m in kp}
        kp.close()
        assert got == {(b"k%d" % i, b"v%d" % i) for i in range(N)}
        ck = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "ck", "auto.offset.reset": "earliest", **CK_09}
        )
        ck.subscribe(["t"])
        seen: Set[bytes] = set()
        deadline = time.monotonic() + DEADLINE
        while len(seen) < N and time.monotonic() < deadline:
            message = ck.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
        ck.close()
        assert seen == {b"v%d" % i for i in range(N)}


def test_aiokafka_and_kproto_read_each_other_at_modern_versions() -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            async with Producer(broker.bootstrap_servers) as producer:  # versions from ApiVersions
                for i in range(N):
                    await producer.send("t", b"v%d" % i, key=b"k%d" % i)
                await producer.flush()
            consumer = aiokafka.AIOKafkaConsumer(
                "t", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest", group_id=None
            )
            await consumer.start()
            seen: Set[bytes] = set()
            try:
                for _ in range(200):
                    batches = await consumer.getmany(timeout_ms=200)
                    seen.update(m.value for ms in batches.values() for m in ms)
                    if len(seen) == N:
                        break
            finally:
                await consumer.stop()
            assert seen == {b"v%d" % i for i in range(N)}
            producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            await producer.start()
            try:
                for i in range(N):
                    await producer.send("t", b"aio%d" % i, headers=[("h", b"1")])
                await producer.flush()
            finally:
                await producer.stop()
            async with Consumer(
                broker.bootstrap_servers,
                group_id="kp",
                topics=["t"],
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            ) as ours:
                read: Set[bytes] = set()
                while len(read) < 2 * N:
                    records = await ours.poll(5000)
                    assert records, "kproto stopped reading"
                    read.update(r.value for r in records if r.value is not None)
                    assert all(r.headers == (("h", b"1"),) for r in records if r.value.startswith(b"aio"))
            assert read == {b"v%d" % i for i in range(N)} | {b"aio%d" % i for i in range(N)}

    asyncio.run(asyncio.wait_for(main(), DEADLINE))


def test_kproto_reads_what_kafka_python_and_librdkafka_write() -> None:
    with MockBroker(topics={"t": 3}, min_session_timeout_ms=100) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type="gzip", **KP_09)
        for i in range(N):
            producer.send("t", key=b"k%d" % i, value=b"kp%d" % i)
        producer.flush()
        producer.close()
        ck = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "compression.codec": "lz4",
                **{k: v for k, v in CK_09.items() if k != "session.timeout.ms"},
            }
        )
        for i in range(N):
            ck.produce("t", key=b"k%d" % i, value=b"ck%d" % i)
        ck.flush(30)
        seen: Set[bytes] = set()
        with sync.Consumer(
            broker.bootstrap_servers,
            broker_release=RELEASE,
            group_id="kproto",
            topics=["t"],
            auto_offset_reset="earliest",
            session_timeout_ms=2000,
            heartbeat_interval_ms=200,
        ) as consumer:
            deadline = time.monotonic() + DEADLINE
            while len(seen) < 2 * N and time.monotonic() < deadline:
                seen.update(r.value for r in consumer.poll(500) if r.value is not None)
        assert seen == {b"kp%d" % i for i in range(N)} | {b"ck%d" % i for i in range(N)}


def test_keys_land_on_the_partitions_kafka_python_picks() -> None:
    with MockBroker(topics={"a": 7, "b": 7}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **KP_09)
        sent = [producer.send("a", key=b"k%d" % i, value=b"x") for i in range(N)]
        theirs = {b"k%d" % i: f.get(30).partition for i, f in enumerate(sent)}
        producer.close()
        with sync.Producer(broker.bootstrap_servers, broker_release=RELEASE) as ours_producer:
            futures = [ours_producer.send("b", b"x", key=b"k%d" % i) for i in range(N)]
            ours = {b"k%d" % i: f.result(30).partition for i, f in enumerate(futures)}
        assert ours == theirs
        assert len(set(ours.values())) == 7


def test_kproto_and_kafka_python_share_a_group() -> None:
    with MockBroker(topics={"t": 4}, min_session_timeout_ms=100) as broker:
        theirs: List[Tuple[int, int]] = []
        stop = threading.Event()

        def kafka_python_member() -> None:
            consumer = KafkaConsumer(
                "t",
                bootstrap_servers=broker.bootstrap_servers,
                group_id="shared",
                auto_offset_reset="earliest",
                session_timeout_ms=3000,
                heartbeat_interval_ms=300,
                **KP_09,
            )
            while not stop.is_set():
                for records in consumer.poll(200).values():
                    theirs.extend((r.partition, r.offset) for r in records)
            consumer.close()

        thread = threading.Thread(target=kafka_python_member, daemon=True)
        thread.start()
        wait_for(
            lambda: broker.group("shared") is not None and len(broker.group("shared").members) == 1,
            "kafka-python to join",
        )
        ours: List[Tuple[int, int]] = []
        owned: Dict[str, List[Tuple[str, int]]] = {}
        with sync.Consumer(
            broker.bootstrap_servers,
            broker_release=RELEASE,
            group_id="shared",
            topics=["t"],
            auto_offset_reset="earliest",
            session_timeout_ms=3000,
            heartbeat_interval_ms=300,
        ) as consumer:
            deadline = time.monotonic() + DEADLINE
            while not (len(broker.group("shared").members) == 2 and consumer.assignment()):
                assert time.monotonic() < deadline, "the shared group did not settle"
                consumer.poll(100)
            owned["kproto"] = consumer.assignment()
            kproto_produce(broker, "t")
            while len(ours) + len(theirs) < N and time.monotonic() < deadline:
                ours.extend((r.partition, r.offset) for r in consumer.poll(200))
            time.sleep(0.5)  # anything read twice would show up now
            stop.set()
            thread.join(30)
        assert owned.get("kproto") and len(owned["kproto"]) == 2  # range over 4 partitions, 2 members
        assert {p for p, _ in ours} == {p for _, p in owned["kproto"]}
        assert theirs and {p for p, _ in theirs}.isdisjoint({p for p, _ in ours})
        assert len(ours) + len(theirs) == len(set(ours) | set(theirs)) == N
