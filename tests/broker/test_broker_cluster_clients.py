"""Clients through broker failures on the 3-broker mock cluster, each at its defaults with idempotence
and acks=all: kproto.client, kafka-python, confluent-kafka (librdkafka), aiokafka, and Kafka's Java
client and franz-go (their programs in tests/java and tests/go, driven by :mod:`cluster_failover`, where the
group's coordinator fails over by its node stopping).

* A broker that leads a partition is stopped while records are in flight and started again later: every
  record is stored exactly once, and each partition holds its records in the order they were sent.
* A group's coordinator fails over (NOT_COORDINATOR from the old node, COORDINATOR_LOAD_IN_PROGRESS
  from the new one for a while) in the middle of consuming: every record is consumed once, and a new
  member of the group resumes from the offsets committed before and after the move.
* A transactional id's coordinator moves between transactions (confluent-kafka): every transaction commits.
* Every broker stopped: kproto's producer ends on its own bounds.

Scenarios are short (a few hundred records); waits are bounded by generous deadlines, never asserted.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Callable, Dict, List

import pytest

from cluster_failover import MockCluster, kproto_consume, program_consume, program_produce
from kproto.client import Consumer, Producer
from kproto.testing import MockBroker

import confluent_kafka  # noqa: E402  (dev dependency)
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.real_clients

N = 600
PARTITIONS = 3
DEADLINE = 60.0
VICTIM = 1  # the broker stopped mid-produce: it leads partition 1 and follows the others


def value(seq: int) -> bytes:
    return f"r{seq}".encode()


def check_stored(broker: MockBroker) -> None:
    """Every record once; per partition, in the order sent."""
    stored = broker.records("t")
    seqs = [int(r.value[1:]) for r in stored if r.value is not None]
    dups = sorted(s for s in set(seqs) if seqs.count(s) > 1)
    assert not dups, f"duplicated in the log: {dups[:10]}"
    assert sorted(seqs) == list(range(N)), f"lost: {sorted(set(range(N)) - set(seqs))[:10]}"
    by_partition: Dict[int, List[int]] = defaultdict(list)
    for record in stored:
        by_partition[record.partition].append(int(record.value[1:]))  # type: ignore[index]
    for partition, order in by_partition.items():
        assert order == sorted(order), f"partition {partition} out of order"


def failover_at(broker: MockBroker) -> Callable[[int], None]:
    """Called with each sequence number sent: stops the victim a third of the way, restarts it at two
    thirds."""

    def step(seq: int) -> None:
        if seq == N // 3:
            broker.stop_broker(VICTIM)
        elif seq == 2 * N // 3:
            time.sleep(0.3)  # some retries happen while it is down
            broker.start_broker(VICTIM)

    return step


@pytest.fixture
def broker() -> MockBroker:
    with MockBroker(brokers=3, topics={"t": PARTITIONS}, min_session_timeout_ms=1000) as cluster:
        assert cluster.leader("t", 1) == VICTIM
        yield cluster


def test_kproto_producer_through_a_broker_restart(broker: MockBroker) -> None:
    async def main() -> None:
        step = failover_at(broker)
        async with Producer(broker.bootstrap_servers, acks="all", idempotence=True, linger_ms=2) as producer:
            futures = []
            for seq in range(N):
                futures.append(
                    await producer.send("t", value(seq), key=str(seq % 7).encode(), partition=seq % PARTITIONS)
                )
                step(seq)
                await asyncio.sleep(0.001)
            await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)

    asyncio.run(main())
    check_stored(broker)
    assert any(e.__class__.__name__ == "LeaderMoved" for e in broker.events)


def test_kafka_python_producer_through_a_broker_restart(broker: MockBroker) -> None:
    step = failover_at(broker)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True, acks="all", linger_ms=2
    )
    futures = []
    for seq in range(N):
        futures.append(producer.send("t", value=value(seq), partition=seq % PARTITIONS))
        step(seq)
        time.sleep(0.001)
    producer.flush(DEADLINE)
    producer.close()
    for future in futures:
        future.get(0)
    check_stored(broker)


def test_confluent_producer_through_a_broker_restart(broker: MockBroker) -> None:
    step = failover_at(broker)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "acks": "all", "linger.ms": 2}
    )
    failures: List[object] = []
    for seq in range(N):
        producer.produce(
            "t", value=value(seq), partition=seq % PARTITIONS, on_delivery=lambda err, _: err and failures.append(err)
        )
        producer.poll(0)
        step(seq)
        time.sleep(0.001)
    assert producer.flush(DEADLINE) == 0 and not failures
    check_stored(broker)


def test_aiokafka_producer_through_a_broker_restart(broker: MockBroker) -> None:
    async def main() -> None:
        step = failover_at(broker)
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True, acks="all", linger_ms=2
        )
        await producer.start()
        try:
            futures = []
            for seq in range(N):
                futures.append(await producer.send("t", value=value(seq), partition=seq % PARTITIONS))
                step(seq)
                await asyncio.sleep(0.001)
            await asyncio.wait_for(asyncio.gather(*futures), DEADLINE)
        finally:
            await producer.stop()

    asyncio.run(main())
    check_stored(broker)


def java_command(java_scenarios, broker: MockBroker) -> List[str]:  # type: ignore[no-untyped-def]
    java, classpath = java_scenarios
    return [java, "-cp", classpath, "JavaClientScenarios", broker.bootstrap_servers]


def check_program_produced(result: dict) -> None:
    assert result["failed"] is None, result["failed"]
    assert (result["lost"], result["duplicated"], result["order_kept"]) == (0, 0, True), result


def test_java_producer_through_a_broker_restart(broker: MockBroker, java_scenarios) -> None:  # type: ignore[no-untyped-def]
    result = program_produce(java_command(java_scenarios, broker), "cluster-produce", MockCluster(broker), "t")
    check_program_produced(result)
    assert "NOT_LEADER_OR_FOLLOWER" in result["errors"] or "connection" in result["errors"], result["errors"]


def test_franz_go_producer_through_a_broker_restart(broker: MockBroker, go_peers: str) -> None:
    result = program_produce([go_peers, broker.bootstrap_servers], "kgo-cluster-produce", MockCluster(broker), "t")
    check_program_produced(result)


# ------------------------------------------------------------------------------------------------ coordinator


def fill(broker: MockBroker, count: int, start: int = 0) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for seq in range(start, start + count):
        producer.produce("t", value=value(seq), partition=seq % PARTITIONS)
    assert producer.flush(DEADLINE) == 0


def move_coordinator_away(broker: MockBroker, group: str) -> None:
    old = broker.coordinator(group)
    broker.move_coordinator(group, next(n for n in broker.node_ids if n != old), loading_ms=500)


def check_resumes(
    broker: MockBroker, group: str, consumed: List[int], consume_more: Callable[[int], List[int]]
) -> None:
    assert sorted(consumed) == list(range(N)), "lost or duplicated while the coordinator moved"
    assert sum(offset for offset, _ in broker.committed(group).values()) == N
    fill(broker, 30, start=N)
    assert sorted(consume_more(30)) == list(range(N, N + 30)), "a new member did not resume from the commits"


def test_kproto_consumer_through_a_coordinator_failover(broker: MockBroker) -> None:
    fill(broker, N)

    async def consume(count: int, move: bool) -> List[int]:
        out: List[int] = []
        async with Consumer(
            broker.bootstrap_servers,
            topics=["t"],
            group_id="kg",
            auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=200,
        ) as consumer:
            deadline = time.monotonic() + DEADLINE
            moved = not move
            while len(out) < count and time.monotonic() < deadline:
                records = await consumer.poll(200, max_records=50)
                out += [int(r.value[1:]) for r in records]
                if records:
                    await consumer.commit()
                if not moved and len(out) >= count // 2:
                    move_coordinator_away(broker, "kg")
                    moved = True
        return out

    consumed = asyncio.run(consume(N, move=True))
    check_resumes(broker, "kg", consumed, lambda n: asyncio.run(consume(n, move=False)))


def test_kafka_python_consumer_through_a_coordinator_failover(broker: MockBroker) -> None:
    fill(broker, N)

    def consume(count: int, move: bool) -> List[int]:
        consumer = KafkaConsumer(
            "t",
            bootstrap_servers=broker.bootstrap_servers,
            group_id="pg",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.partitions_for_topic("t")  # see docs/broker.md: the first assignment then completes
        out: List[int] = []
        moved = not move
        try:
            deadline = time.monotonic() + DEADLINE
            while len(out) < count and time.monotonic() < deadline:
                batches = consumer.poll(200, max_records=50)
                out += [int(m.value[1:]) for ms in batches.values() for m in ms]
                if batches:
                    consumer.commit()
                if not moved and len(out) >= count // 2:
                    move_coordinator_away(broker, "pg")
                    moved = True
        finally:
            consumer.close(autocommit=False)
        return out

    check_resumes(broker, "pg", consume(N, True), lambda n: consume(n, False))


def test_kafka_python_consumer_reads_on_after_its_partitions_leader_stops(broker: MockBroker) -> None:
    """The leader's stop gives the partition a new leader epoch; kafka-python then validates its position
    with OffsetForLeaderEpoch (KIP-320) before fetching again, whatever ApiVersions advertised.  The
    records come in many small fetches, so some are still unread when the leader stops."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for seq in range(N // PARTITIONS):
        producer.produce("t", value=value(seq), partition=VICTIM)
        if seq % 10 == 9:
            assert producer.flush(DEADLINE) == 0  # one batch per ten records
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, max_partition_fetch_bytes=1)
    consumer.assign([TopicPartition("t", VICTIM)])
    consumer.seek_to_beginning()
    read: List[int] = []
    try:
        deadline = time.monotonic() + DEADLINE
        while len(read) < N // PARTITIONS and time.monotonic() < deadline:
            batches = consumer.poll(200, max_records=10)
            read += [int(m.value[1:]) for ms in batches.values() for m in ms]
            if VICTIM in broker.running() and len(read) >= 30:
                broker.stop_broker(VICTIM)
    finally:
        consumer.close()
    assert VICTIM not in broker.running() and broker.leader_epoch("t", VICTIM) == 1
    assert read == list(range(N // PARTITIONS)), f"read {len(read)} records, the last {read[-1:]}"
    assert any(key == 23 for key, _ in broker.core.request_counts), "the position was never validated"


def test_confluent_consumer_through_a_coordinator_failover(broker: MockBroker) -> None:
    fill(broker, N)

    def consume(count: int, move: bool) -> List[int]:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "cg",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["t"])
        out: List[int] = []
        moved = not move
        try:
            deadline = time.monotonic() + DEADLINE
            while len(out) < count and time.monotonic() < deadline:
                messages = consumer.consume(num_messages=50, timeout=0.2)
                for m in messages:
                    assert m.error() is None, m.error()
                    out.append(int(m.value()[1:]))
                if messages:
                    consumer.commit(asynchronous=False)
                if not moved and len(out) >= count // 2:
                    move_coordinator_away(broker, "cg")
                    moved = True
        finally:
            consumer.close()
        return out

    check_resumes(broker, "cg", consume(N, True), lambda n: consume(n, False))


def test_aiokafka_consumer_through_a_coordinator_failover(broker: MockBroker) -> None:
    fill(broker, N)

    async def consume(count: int, move: bool) -> List[int]:
        consumer = AIOKafkaConsumer(
            "t",
            bootstrap_servers=broker.bootstrap_servers,
            group_id="ag",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        out: List[int] = []
        moved = not move
        try:
            deadline = time.monotonic() + DEADLINE
            while len(out) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200, max_records=50)
                out += [int(m.value[1:]) for ms in batches.values() for m in ms]
                if batches:
                    await consumer.commit()
                if not moved and len(out) >= count // 2:
                    move_coordinator_away(broker, "ag")
                    moved = True
        finally:
            await consumer.stop()
        return out

    consumed = asyncio.run(consume(N, True))
    check_resumes(broker, "ag", consumed, lambda n: asyncio.run(consume(n, False)))


def test_every_broker_stopped_ends_in_the_clients_own_timeout(broker: MockBroker) -> None:
    from kproto.client import BrokerConnectionError, ClientTimeoutError

    async def main() -> None:
        async with Producer(
            broker.bootstrap_servers,
            acks="all",
            idempotence=True,
            max_block_ms=1000,
            request_timeout_ms=500,
            delivery_timeout_ms=1000,
            connect_timeout_ms=500,
        ) as producer:
            await asyncio.wait_for(await producer.send("t", b"before", partition=0), DEADLINE)
            for node in broker.node_ids:
                broker.stop_broker(node)
            pending = await producer.send("t", b"after", partition=0)
            start = time.monotonic()
            with pytest.raises(ClientTimeoutError, match="delivery_timeout_ms is 1000"):
                await asyncio.wait_for(pending, DEADLINE)  # the client's bound, not this one, ends it
            assert time.monotonic() - start < 1.0 + 10  # its bound plus generous slack
            with pytest.raises(BrokerConnectionError, match="Connect call failed|refused"):
                await Producer(broker.bootstrap_servers, connect_timeout_ms=500).start()

    asyncio.run(main())
    assert [r.value for r in broker.records("t", 0)] == [b"before"]


def test_kproto_metadata_survives_the_broker_it_bootstrapped_from_stopping() -> None:
    with MockBroker(brokers=3, topics={"one": 1}) as cluster:
        first = cluster.bootstrap_servers.split(",")[0]  # node 0, which leads "one"
        assert cluster.leader("one", 0) == 0

        async def main() -> None:
            async with Producer(
                first, acks="all", idempotence=True, delivery_timeout_ms=10000, request_timeout_ms=3000
            ) as producer:
                await asyncio.wait_for(await producer.send("one", b"before"), DEADLINE)
                cluster.stop_broker(0)  # the only broker this client has a connection to
                await asyncio.wait_for(await producer.send("one", b"after"), DEADLINE)

        asyncio.run(main())
        assert [r.value for r in cluster.records("one", 0)] == [b"before", b"after"]


def test_confluent_transactions_through_a_transaction_coordinator_move(broker: MockBroker) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx-1"})
    producer.init_transactions(DEADLINE)
    for round in range(3):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("t", value=b"%d-%d" % (round, i), partition=i % PARTITIONS)
        if round == 1:  # EndTxn meets NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS, then commits
            old = broker.transaction_coordinator("tx-1")
            broker.move_transaction_coordinator("tx-1", next(n for n in broker.node_ids if n != old), loading_ms=500)
        producer.commit_transaction(DEADLINE)
    stored = sorted(r.value for r in broker.records("t") if r.value is not None)
    assert stored == sorted(b"%d-%d" % (r, i) for r in range(3) for i in range(10))
    from kproto.records import decode_records

    markers = [b for p in range(PARTITIONS) for b in decode_records(broker.log_bytes("t", p)).batches if b.is_control]
    assert len(markers) == 3 * PARTITIONS  # every transaction committed on every partition


def check_program_resumed(result: dict) -> None:
    assert result["failed"] is None, result["failed"]
    assert (result["lost"], result["duplicated"]) == (0, 0), "lost or duplicated while the coordinator moved"
    assert result["resumed"], "a new member did not resume from the commits"


def test_java_consumer_through_a_coordinator_failover(broker: MockBroker, java_scenarios) -> None:  # type: ignore[no-untyped-def]
    cluster = MockCluster(broker)
    check_program_resumed(program_consume(java_command(java_scenarios, broker), "cluster-consume", cluster, "t", "jcg"))
    assert sum(offset for offset, _ in broker.committed("jcg").values()) == N + 30


def test_franz_go_consumer_through_a_coordinator_failover(broker: MockBroker, go_peers: str) -> None:
    cluster = MockCluster(broker)
    check_program_resumed(
        program_consume([go_peers, broker.bootstrap_servers], "kgo-cluster-consume", cluster, "t", "gcg")
    )
    assert sum(offset for offset, _ in broker.committed("gcg").values()) == N + 30


def test_kproto_consumer_through_its_coordinators_node_stopping(broker: MockBroker) -> None:
    """The commit meets a refused connection, not NOT_COORDINATOR: the member finds the coordinator again.
    The group's coordinator is node 0, the first broker the client knows: FindCoordinator, which any broker
    answers, must skip it while it is stopped."""
    cluster = MockCluster(broker)
    assert broker.coordinator("kstop") == 0
    result = kproto_consume(cluster, "t", "kstop")
    check_program_resumed(result)
    assert cluster.stopped == [0] and broker.coordinator("kstop") != 0
