"""Current clients at their defaults against the mock broker: kafka-python 3, confluent-kafka (librdkafka 2)
and aiokafka, with no api_version pinning (each negotiates through ApiVersions).

Every library produces 10,000 messages per codec with an idempotent producer and consumes them back in a
group: nothing lost, duplicated or reordered per partition.  Groups split partitions and rebalance when a
third consumer joins; a static member (``group.instance.id``) that restarts keeps its partitions; a
consumer pinned to 0.9 reads what a modern producer wrote, and the reverse.

Waits are on events (a message count, an assignment), each bounded by a generous deadline; nothing
asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Set, Tuple

import pytest

from kproto.testing import MockBroker

from broker_client import kafka_python_knows

import confluent_kafka  # noqa: E402  (dev dependency)
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402

pytestmark = pytest.mark.real_clients

N = 10_000
PARTITIONS = 3
DEADLINE = 120.0
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
GROUP_PARTITIONS = 6
Consumed = List[Tuple[int, int, bytes]]  # (partition, offset, value)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def payload(seq: int) -> Tuple[bytes, bytes]:
    return f"k{seq % 97}".encode(), f"{seq % 97}:{seq}".encode()


def check_consumed(records: Consumed, broker: MockBroker, topic: str) -> None:
    """All N sequence numbers once; per partition, offsets as stored and each key's sequence ascending."""
    seqs = [int(v.split(b":")[1]) for _, _, v in records]
    assert sorted(seqs) == list(range(N)), "lost or duplicated messages"
    by_partition: Dict[int, List[Tuple[int, bytes]]] = defaultdict(list)
    for partition, offset, value in records:
        by_partition[partition].append((offset, value))
    for partition, entries in by_partition.items():
        stored = broker.records(topic, partition)
        assert [o for o, _ in entries] == [r.offset for r in stored], f"partition {partition} offsets"
        by_key: Dict[bytes, List[int]] = defaultdict(list)
        for _, value in entries:
            key, seq = value.split(b":")
            by_key[key].append(int(seq))
        assert all(s == sorted(s) for s in by_key.values()), f"partition {partition} reordered"


@pytest.fixture
def broker():
    with MockBroker(topics={"t": PARTITIONS, "g": GROUP_PARTITIONS}) as b:
        yield b


# ------------------------------------------------------------------------------------------------ kafka-python


def kp_consume(broker: MockBroker, topic: str, group: str, **options: object) -> Consumed:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest", **options
    )
    kafka_python_knows(consumer, topic)
    out: Consumed = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(out) < N and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                out += [(tp.partition, r.offset, r.value) for r in records]
        consumer.commit()
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_at_defaults(broker, codec: Optional[str]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, compression_type=codec, enable_idempotence=True
    )
    for seq in range(N):
        key, value = payload(seq)
        producer.send("t", key=key, value=value)
    producer.flush()
    producer.close()
    check_consumed(kp_consume(broker, "t", "kp"), broker, "t")
    assert sum(o for (_, _), (o, _) in broker.committed("kp").items()) == N
    batches = [b for p in range(PARTITIONS) for b in _batches(broker, "t", p)]
    assert all(b.producer_id >= 0 for b in batches), "the default producer is idempotent"


def _batches(broker: MockBroker, topic: str, partition: int) -> list:
    from kproto.records import decode_records

    return list(decode_records(broker.log_bytes(topic, partition)).batches)


# ------------------------------------------------------------------------------------------------ confluent-kafka


def ck_consume(broker: MockBroker, topic: str, group: str, extra: Optional[dict] = None) -> Consumed:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            **(extra or {}),
        }
    )
    consumer.subscribe([topic])
    out: Consumed = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(out) < N and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                assert m.error() is None, m.error()
                out.append((m.partition(), m.offset(), m.value()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_at_defaults(broker, codec: Optional[str]) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec or "none", "enable.idempotence": True}
    )
    failures: List[object] = []
    for seq in range(N):
        key, value = payload(seq)
        producer.produce("t", key=key, value=value, on_delivery=lambda err, _: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(DEADLINE) == 0 and not failures
    check_consumed(ck_consume(broker, "t", "ck"), broker, "t")
    batches = [b for p in range(PARTITIONS) for b in _batches(broker, "t", p)]
    assert all(b.producer_id >= 0 for b in batches)
    if codec is not None:
        assert any(b.codec == codec for b in batches)


# ------------------------------------------------------------------------------------------------ aiokafka


async def aio_produce(broker: MockBroker, topic: str, codec: Optional[str]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, compression_type=codec, enable_idempotence=True
    )
    await producer.start()
    try:
        futures = []
        for seq in range(N):
            key, value = payload(seq)
            futures.append(await producer.send(topic, key=key, value=value))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def aio_consume(broker: MockBroker, topic: str, group: str) -> Consumed:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest"
    )
    await consumer.start()
    out: Consumed = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(out) < N and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                out += [(tp.partition, r.offset, r.value) for r in records]
        await consumer.commit()
    finally:
        await consumer.stop()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_at_defaults(broker, codec: Optional[str]) -> None:
    async def run() -> Consumed:
        await aio_produce(broker, "t", codec)
        return await aio_consume(broker, "t", "aio")

    check_consumed(asyncio.run(run()), broker, "t")
    assert all(b.producer_id >= 0 for p in range(PARTITIONS) for b in _batches(broker, "t", p))


# ------------------------------------------------------------------------------------------------ groups


class PollingMember:
    """A consumer polled on a thread of its own; ``assigned`` is its latest assignment."""

    def __init__(
        self, make: Callable[[], object], poll: Callable[[object], Set[int]], close: Callable[[object], None]
    ) -> None:
        self.assigned: Set[int] = set()
        self._stop = threading.Event()
        self._error: List[BaseException] = []
        self._make, self._poll, self._close = make, poll, close
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            consumer = self._make()
            try:
                while not self._stop.is_set():
                    self.assigned = self._poll(consumer)
            finally:
                self._close(consumer)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self._error.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE)
        assert not self._thread.is_alive(), "consumer did not stop"
        if self._error:
            raise self._error[0]


def _kp_member(broker: MockBroker, instance: Optional[str] = None) -> PollingMember:
    def make() -> object:
        consumer = KafkaConsumer(
            "g",
            bootstrap_servers=broker.bootstrap_servers,
            group_id="grp",
            group_instance_id=instance,
            auto_offset_reset="earliest",
        )
        kafka_python_knows(consumer, "g")
        return consumer

    def poll(c: object) -> Set[int]:
        c.poll(timeout_ms=50)  # type: ignore[attr-defined]
        return {tp.partition for tp in c.assignment()}  # type: ignore[attr-defined]

    return PollingMember(make, poll, lambda c: c.close())  # type: ignore[attr-defined]


def _ck_member(broker: MockBroker, instance: Optional[str] = None) -> PollingMember:
    def make() -> object:
        config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "grp", "auto.offset.reset": "earliest"}
        if instance:
            config["group.instance.id"] = instance
        consumer = confluent_kafka.Consumer(config)
        consumer.subscribe(["g"])
        return consumer

    def poll(c: object) -> Set[int]:
        c.poll(0.05)  # type: ignore[attr-defined]
        return {tp.partition for tp in c.assignment()}  # type: ignore[attr-defined]

    return PollingMember(make, poll, lambda c: c.close())  # type: ignore[attr-defined]


def _aio_member(broker: MockBroker, instance: Optional[str] = None) -> PollingMember:
    loop = asyncio.new_event_loop()

    async def start() -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            "g",
            bootstrap_servers=broker.bootstrap_servers,
            group_id="grp",
            group_instance_id=instance,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        return consumer

    def make() -> object:
        return loop.run_until_complete(start())

    def poll(c: object) -> Set[int]:
        loop.run_until_complete(c.getmany(timeout_ms=50))  # type: ignore[attr-defined]
        return {tp.partition for tp in c.assignment()}  # type: ignore[attr-defined]

    def close(c: object) -> None:
        loop.run_until_complete(c.stop())  # type: ignore[attr-defined]
        loop.close()

    return PollingMember(make, poll, close)


MEMBERS = {"kafka-python": _kp_member, "confluent": _ck_member, "aiokafka": _aio_member}


def _split(members: List[PollingMember]) -> bool:
    sets = [m.assigned for m in members]
    return (
        all(sets)
        and sum(len(s) for s in sets) == GROUP_PARTITIONS
        and set().union(*sets) == set(range(GROUP_PARTITIONS))
    )


@pytest.mark.parametrize("library", sorted(MEMBERS))
def test_two_consumers_split_partitions_and_a_third_joins(broker, library: str) -> None:
    make = MEMBERS[library]
    members = [make(broker), make(broker)]
    try:
        wait_for(lambda: _split(members), "two members to split the partitions")
        members.append(make(broker))
        wait_for(lambda: _split(members), "three members to split the partitions")
    finally:
        for member in members:
            member.stop()


@pytest.mark.parametrize("library", sorted(MEMBERS))
def test_a_static_member_restarting_keeps_its_assignment(broker, library: str) -> None:
    make = MEMBERS[library]
    first, other = make(broker, "static-a"), make(broker, "static-b")
    try:
        wait_for(lambda: _split([first, other]), "two static members to split the partitions")
        kept, generation = set(first.assigned), broker.group("grp").generation_id  # type: ignore[union-attr]
        first.stop()
        first = make(broker, "static-a")
        wait_for(lambda: first.assigned == kept, "the restarted static member to get its partitions back")
        assert other.assigned == set(range(GROUP_PARTITIONS)) - kept
        assert broker.group("grp").generation_id == generation  # type: ignore[union-attr]  # no rebalance
    finally:
        first.stop()
        other.stop()


# ------------------------------------------------------------------------------------------------ 0.9 and modern


def test_a_09_consumer_reads_what_a_modern_producer_wrote_and_the_reverse(broker) -> None:
    modern = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": "lz4"})
    for seq in range(N):
        key, value = payload(seq)
        modern.produce("t", key=key, value=value)
        modern.poll(0)
    assert modern.flush(DEADLINE) == 0
    check_consumed(kp_consume(broker, "t", "old", api_version=(0, 9), session_timeout_ms=10000), broker, "t")

    old = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=(0, 9), compression_type="gzip")
    for seq in range(N):
        key, value = payload(seq)
        old.send("g", key=key, value=value)
    old.flush()
    old.close()
    check_consumed(ck_consume(broker, "g", "new"), broker, "g")


# ------------------------------------------------------------------------------------------------ SASL PLAIN


def test_sasl_plain_login_at_defaults() -> None:
    users = {"alice": "s3cret"}
    with MockBroker(topics={"t": 1}, sasl_plain_users=users) as broker:
        kp = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="s3cret",
        )
        kp.send("t", b"from kafka-python").get(timeout=DEADLINE)
        kp.close()
        ck = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "s3cret",
            }
        )
        ck.produce("t", b"from librdkafka")
        assert ck.flush(DEADLINE) == 0
        assert [r.value for r in broker.records("t")] == [b"from kafka-python", b"from librdkafka"]
        errors: List[object] = []
        wrong = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "nope",
                "error_cb": errors.append,
            }
        )
        wrong.produce("t", b"never stored")
        wait_for(lambda: wrong.poll(0.05) is not None and bool(errors), "librdkafka to report the failed login")
        assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors)
        wrong.purge()
        assert len(broker.records("t")) == 2
