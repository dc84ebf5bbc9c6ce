"""kproto.client against Apache Kafka 4.1 and, with the same scenarios, against the mock broker.

Every test takes the ``kafka_broker`` fixture on both engines: the mock (a fresh broker per test) and a
real Apache Kafka 4.1.1 shared by the session (each test's topics are deleted after it; group ids are
unique per test).  What is checked is what a client sees: the records read back, their offsets, headers
and commits, also across a broker restart.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from typing import Callable, Dict, List, Tuple

import pytest

from kproto.client import sync

ENGINES = [
    pytest.param("mock", marks=pytest.mark.kafka_broker(engine="mock"), id="mock"),
    pytest.param(
        "apache-kafka",
        id="kafka-4.1.1",
        marks=[pytest.mark.kafka_broker(engine="apache-kafka", version="4.1.1"), pytest.mark.apache_kafka],
    ),
]

pytestmark = [pytest.mark.real_clients, pytest.mark.parametrize("engine", ENGINES)]

DEADLINE = 60.0
# Kafka's smallest session timeout is 6 s; heartbeats every 0.3 s make rebalances show up quickly.
GROUP = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 300,
    "auto_commit": False,
    "auto_offset_reset": "earliest",
    "fetch_max_wait_ms": 100,
}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def rows(kafka_broker, topic: str) -> List[Tuple[int, int, bytes, bytes, tuple]]:
    return [(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in kafka_broker.messages(topic)]


def test_produce_every_acks_codec_and_idempotence(kafka_broker, engine: str) -> None:
    cases = [{"acks": acks} for acks in (0, 1, "all")]
    cases += [{"acks": 1, "compression": codec} for codec in ("gzip", "snappy", "lz4", "zstd")]
    cases += [{"acks": "all", "idempotence": True, "compression": "zstd"}]
    for options in cases:
        topic = unique("produce")
        kafka_broker.create_topic(topic, 1)
        sent = [(0, i, b"k%d" % i, b"value-%d" % i * 3, (("h", b"%d" % i), ("empty", None))) for i in range(40)]
        with sync.Producer(kafka_broker.bootstrap_servers, linger_ms=5, **options) as producer:
            futures = [
                producer.send(topic, value, key=key, headers=list(headers)) for _, _, key, value, headers in sent
            ]
            producer.flush()
            offsets = [f.result(DEADLINE).offset for f in futures]
        if options["acks"] != 0:  # acks=0 has no answer: the offsets are unknown to the producer
            assert offsets == list(range(40)), options
        wait_for(lambda: len(kafka_broker.messages(topic)) >= 40, f"40 records with {options}")
        assert rows(kafka_broker, topic) == sent, options


def _drain(consumers: Dict[str, sync.Consumer], seen: Dict[Tuple[int, int], str], want: int) -> None:
    """Poll every consumer in turn, committing what each poll returned, until ``want`` records were seen."""
    deadline = time.monotonic() + DEADLINE
    for name in itertools.cycle(list(consumers)):
        records = consumers[name].poll(200)
        for record in records:
            key = (record.partition, record.offset)
            assert key not in seen, f"{key} consumed by {seen.get(key)} and again by {name}"
            seen[key] = name
        if records:
            consumers[name].commit()
        if len(seen) >= want:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(seen)} of {want} records consumed")


def _settle(consumers: Dict[str, sync.Consumer], topic: str, partitions: int) -> None:
    """Poll (nothing is there to read) until every member owns a share and together they own every
    partition: records produced after this are consumed without a rebalance in between."""

    def settled() -> bool:
        for consumer in consumers.values():
            assert consumer.poll(50) == []
        owned = [tp for c in consumers.values() for tp in c.assignment()]
        return all(c.assignment() for c in consumers.values()) and sorted(owned) == sorted(
            (topic, p) for p in range(partitions)
        )

    wait_for(settled, f"{len(consumers)} members sharing {partitions} partitions")


def _produce(kafka_broker, topic: str, numbers: range) -> None:
    with sync.Producer(kafka_broker.bootstrap_servers, acks="all") as producer:
        for i in numbers:
            producer.send(topic, b"a%d" % i, partition=i % 6)
        producer.flush()


def test_a_group_of_three_consumes_each_record_once_across_a_member_leaving(kafka_broker, engine: str) -> None:
    topic, group = unique("group"), unique("g")
    kafka_broker.create_topic(topic, 6)
    consumers = {
        name: sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **GROUP)
        for name in ("c1", "c2", "c3")
    }
    seen: Dict[Tuple[int, int], str] = {}
    try:
        _settle(consumers, topic, 6)
        _produce(kafka_broker, topic, range(60))
        _drain(consumers, seen, 60)
        assert {name for name in seen.values()} == {"c1", "c2", "c3"}
        consumers.pop("c3").close()  # leaves the group: its partitions move to the others
        _settle(consumers, topic, 6)
        _produce(kafka_broker, topic, range(60, 90))
        _drain(consumers, seen, 90)
        assert sorted(seen) == sorted((p, o) for p in range(6) for o in range(15))
        committed = kafka_broker.committed(group)
        assert {tp: offset for tp, (offset, _) in committed.items()} == {(topic, p): 15 for p in range(6)}
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_a_restart_mid_produce_loses_and_duplicates_nothing(kafka_broker, engine: str) -> None:
    topic = unique("restart")
    kafka_broker.create_topic(topic, 2)
    n = 400
    with sync.Producer(
        kafka_broker.bootstrap_servers,
        acks="all",
        idempotence=True,
        linger_ms=2,
        retries=100,
        retry_backoff_ms=200,
        max_in_flight=5,
    ) as producer:
        futures = []
        halfway = threading.Event()

        def restart() -> None:
            halfway.wait(DEADLINE)
            kafka_broker.restart()

        restarter = threading.Thread(target=restart)
        restarter.start()
        for i in range(n):
            futures.append(producer.send(topic, b"r%d" % i, key=b"%d" % (i % 7)))
            if i == n // 4:
                halfway.set()
            time.sleep(0.005)
        restarter.join(DEADLINE)
        producer.flush()
        metadata = [f.result(DEADLINE) for f in futures]
    stored = kafka_broker.messages(topic)
    assert sorted(r.value for r in stored) == sorted(b"r%d" % i for i in range(n))  # no loss, no duplicate
    assert sorted((m.partition, m.offset) for m in metadata) == sorted((r.partition, r.offset) for r in stored)
    for partition in (0, 1):  # each partition holds its records in the order they were sent
        values = [int(r.value[1:]) for r in stored if r.partition == partition]
        assert values == sorted(values)


def test_a_consumer_resumes_from_its_commits_after_a_restart(kafka_broker, engine: str) -> None:
    topic, group = unique("resume"), unique("g")
    kafka_broker.create_topic(topic, 1)
    with sync.Producer(kafka_broker.bootstrap_servers, acks="all") as producer:
        for i in range(20):
            producer.send(topic, b"m%d" % i)
        producer.flush()
    got: List[bytes] = []
    with sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **GROUP) as consumer:
        wait_for(lambda: bool(got.extend(r.value for r in consumer.poll(200))) or len(got) >= 20, "20 records")
        consumer.commit({(topic, 0): 12})
    kafka_broker.restart()
    assert kafka_broker.committed(group)[(topic, 0)][0] == 12
    again: List[bytes] = []
    with sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **GROUP) as consumer:
        wait_for(
            lambda: bool(again.extend(r.value for r in consumer.poll(200))) or len(again) >= 8,
            "8 records after the restart",
        )
    assert again == [b"m%d" % i for i in range(12, 20)]
