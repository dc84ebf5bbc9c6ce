"""kproto.client's consumer with ``group_protocol="consumer"`` (KIP-848) against Apache Kafka 4.1 (whose
coordinator serves it by default) and, with the same scenarios, against the mock broker.

What a client sees is checked: after every change each partition is owned by exactly one member, every
record is consumed once (each poll's records are committed before the next poll), a member leaving moves
only its own partitions, and a restarted consumer resumes from the group's commits.
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Callable, Dict, List, Set, Tuple

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
GROUP = {"group_protocol": "consumer", "auto_commit": False, "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100}
TP = Tuple[str, int]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Tracker:
    """A rebalance listener that keeps what the member owns, checking revocations name owned partitions."""

    def __init__(self) -> None:
        self.owned: Set[TP] = set()
        self.revoked: List[TP] = []

    def on_partitions_assigned(self, partitions: List[TP]) -> None:
        assert not self.owned & set(partitions), f"{partitions} assigned twice"
        self.owned.update(partitions)

    def on_partitions_revoked(self, partitions: List[TP]) -> None:
        assert set(partitions) <= self.owned, f"{partitions} revoked but not owned"
        self.owned.difference_update(partitions)
        self.revoked.extend(partitions)


def _settle(consumers: Dict[str, sync.Consumer], topic: str, partitions: int) -> None:
    """Poll until every member owns a share and each partition is owned by exactly one member."""

    def settled() -> bool:
        for consumer in consumers.values():
            assert consumer.poll(50) == []
        owned = [tp for c in consumers.values() for tp in c.assignment()]
        return all(c.assignment() for c in consumers.values()) and sorted(owned) == sorted(
            (topic, p) for p in range(partitions)
        )

    wait_for(settled, f"{len(consumers)} members sharing {partitions} partitions")


def _drain(consumers: Dict[str, sync.Consumer], seen: Dict[Tuple[int, int], str], want: int) -> None:
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


def _produce(kafka_broker, topic: str, numbers: range) -> None:
    with sync.Producer(kafka_broker.bootstrap_servers, acks="all") as producer:
        for i in numbers:
            producer.send(topic, b"a%d" % i, partition=i % 6)
        producer.flush()


def test_three_members_share_partitions_and_a_leaving_member_moves_only_its_own(kafka_broker, engine: str) -> None:
    topic, group = unique("kip848"), unique("g")
    kafka_broker.create_topic(topic, 6)
    trackers = {name: Tracker() for name in ("c1", "c2", "c3")}
    consumers: Dict[str, sync.Consumer] = {}
    seen: Dict[Tuple[int, int], str] = {}
    try:
        for name in ("c1", "c2", "c3"):  # one at a time: each join moves partitions from those already in
            consumers[name] = sync.Consumer(
                kafka_broker.bootstrap_servers, group_id=group, topics=[topic], listener=trackers[name], **GROUP
            )
            _settle(consumers, topic, 6)

        def listeners_told() -> bool:
            # Against a real coordinator the last reconciliation can still be on its way when the
            # ownership first looks complete; the listener hears of it at the member's next poll.
            for consumer in consumers.values():
                assert consumer.poll(50) == []
            return all(set(c.assignment()) == trackers[name].owned for name, c in consumers.items())

        wait_for(listeners_told, "each member's assignment matching what its listener was told")
        _produce(kafka_broker, topic, range(60))
        _drain(consumers, seen, 60)
        assert set(seen.values()) == {"c1", "c2", "c3"}
        before = {name: set(c.assignment()) for name, c in consumers.items()}
        revoked_before = {name: len(t.revoked) for name, t in trackers.items()}
        consumers.pop("c3").close()  # leaves with epoch -1: its partitions go to the others
        _settle(consumers, topic, 6)
        for name in ("c1", "c2"):
            assert len(trackers[name].revoked) == revoked_before[name], f"{name} lost a partition it kept"
            assert before[name] <= set(consumers[name].assignment())
        now_owned = set(consumers["c1"].assignment()) | set(consumers["c2"].assignment())
        assert now_owned == before["c1"] | before["c2"] | before["c3"]
        _produce(kafka_broker, topic, range(60, 90))
        _drain(consumers, seen, 90)
        assert sorted(seen) == sorted((p, o) for p in range(6) for o in range(15))
        committed = kafka_broker.committed(group)
        assert {tp: offset for tp, (offset, _) in committed.items()} == {(topic, p): 15 for p in range(6)}
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_a_consumer_resumes_from_its_commits(kafka_broker, engine: str) -> None:
    topic, group = unique("resume848"), unique("g")
    kafka_broker.create_topic(topic, 1)
    with sync.Producer(kafka_broker.bootstrap_servers, acks="all") as producer:
        for i in range(20):
            producer.send(topic, b"m%d" % i)
        producer.flush()
    got: List[bytes] = []
    with sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **GROUP) as consumer:
        wait_for(lambda: bool(got.extend(r.value for r in consumer.poll(200))) or len(got) >= 20, "20 records")
        consumer.commit({(topic, 0): 12})
    assert got == [b"m%d" % i for i in range(20)]
    assert kafka_broker.committed(group)[(topic, 0)][0] == 12
    again: List[bytes] = []
    with sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **GROUP) as consumer:
        wait_for(
            lambda: bool(again.extend(r.value for r in consumer.poll(200))) or len(again) >= 8,
            "8 records after the restart",
        )
    assert again == [b"m%d" % i for i in range(12, 20)]


def test_a_group_shared_with_a_librdkafka_consumer(kafka_broker, engine: str) -> None:
    """confluent-kafka (librdkafka) at ``group.protocol=consumer`` and kproto in one group: the coordinator
    splits the partitions between them and every record is consumed once."""
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka (a dev dependency) is needed")
    if confluent_kafka.libversion()[1] < 0x020C0000:
        pytest.skip(f"librdkafka {confluent_kafka.libversion()[0]} predates group.protocol=consumer (2.12)")
    topic, group = unique("mixed848"), unique("g")
    kafka_broker.create_topic(topic, 6)
    theirs = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    ours = sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **GROUP)
    seen: Dict[Tuple[int, int], str] = {}
    try:
        theirs.subscribe([topic])

        def take(timeout: float) -> int:
            got = 0
            for record in ours.poll(int(timeout * 1000)):
                assert (record.partition, record.offset) not in seen, f"{record} consumed twice"
                seen[(record.partition, record.offset)] = "kproto"
                got += 1
            if got:
                ours.commit()
            batch = theirs.consume(100, timeout)
            for message in batch:
                assert message.error() is None, message.error()
                key = (message.partition(), message.offset())
                assert key not in seen, f"{key} consumed by {seen.get(key)} and again by librdkafka"
                seen[key] = "librdkafka"
            if batch:
                theirs.commit(asynchronous=False)
            return got + len(batch)

        def split() -> bool:
            take(0.05)
            mine = set(ours.assignment())
            other = {(tp.topic, tp.partition) for tp in theirs.assignment()}
            return bool(mine) and bool(other) and not mine & other and mine | other == {(topic, p) for p in range(6)}

        wait_for(split, "kproto and librdkafka sharing 6 partitions")
        _produce(kafka_broker, topic, range(60))
        wait_for(lambda: take(0.2) >= 0 and len(seen) >= 60, "60 records")
        assert sorted(seen) == sorted((p, o) for p in range(6) for o in range(10))
        assert set(seen.values()) == {"kproto", "librdkafka"}
    finally:
        ours.close()
        theirs.close()


def test_a_member_that_stops_polling_leaves_and_rejoins_when_it_polls_again(kafka_broker, engine: str) -> None:
    topic, group = unique("stall848"), unique("g")
    kafka_broker.create_topic(topic, 4)
    consumers = {
        name: sync.Consumer(
            kafka_broker.bootstrap_servers, group_id=group, topics=[topic], max_poll_interval_ms=3000, **GROUP
        )
        for name in ("busy", "stalled")
    }
    try:
        _settle(consumers, topic, 4)
        # only "busy" polls: after max_poll_interval_ms "stalled" leaves and its partitions move to "busy"
        wait_for(
            lambda: consumers["busy"].poll(100) == [] and len(consumers["busy"].assignment()) == 4,
            "the polling member owning every partition",
        )
        assert consumers["stalled"].assignment() == []
        _settle(consumers, topic, 4)  # polling again joins again
        assert consumers["busy"].assignment() and consumers["stalled"].assignment()
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_a_static_member_restarting_gets_its_partitions_back_unnoticed(kafka_broker, engine: str) -> None:
    """A static member closes with epoch -2: the coordinator keeps its partitions for its instance id, and a
    new process with that id gets them back without the other member seeing a change."""
    topic, group = unique("static848"), unique("g")
    kafka_broker.create_topic(topic, 4)
    other_tracker = Tracker()
    consumers = {
        "static": sync.Consumer(
            kafka_broker.bootstrap_servers, group_id=group, topics=[topic], group_instance_id="instance-1", **GROUP
        ),
        "other": sync.Consumer(
            kafka_broker.bootstrap_servers, group_id=group, topics=[topic], listener=other_tracker, **GROUP
        ),
    }
    try:
        _settle(consumers, topic, 4)
        before = set(consumers["static"].assignment())
        owned_before, revoked_before = set(other_tracker.owned), len(other_tracker.revoked)
        consumers.pop("static").close()
        consumers["static"] = sync.Consumer(
            kafka_broker.bootstrap_servers, group_id=group, topics=[topic], group_instance_id="instance-1", **GROUP
        )
        _settle(consumers, topic, 4)
        assert set(consumers["static"].assignment()) == before
        assert other_tracker.owned == owned_before and len(other_tracker.revoked) == revoked_before
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_auto_commit_commits_revoked_partitions_before_they_move(kafka_broker, engine: str) -> None:
    """With auto-commit, what a member read of a partition taken from it is committed before the
    coordinator hands the partition on: the new owner starts past it, nothing is read twice."""
    topic, group = unique("autocommit848"), unique("g")
    kafka_broker.create_topic(topic, 6)
    options = dict(GROUP, auto_commit=True, auto_commit_interval_ms=600_000)  # only the pre-revoke commit
    consumers = {"first": sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **options)}
    seen: Dict[Tuple[int, int], str] = {}
    try:
        _settle(consumers, topic, 6)
        _produce(kafka_broker, topic, range(60))

        def read(name: str) -> None:
            for record in consumers[name].poll(100):
                key = (record.partition, record.offset)
                assert key not in seen, f"{key} read by {seen.get(key)} and again by {name}"
                seen[key] = name

        wait_for(lambda: read("first") or len(seen) >= 60, "the first member reading 60 records")
        consumers["second"] = sync.Consumer(kafka_broker.bootstrap_servers, group_id=group, topics=[topic], **options)
        _settle(consumers, topic, 6)
        moved = set(consumers["second"].assignment())
        committed = kafka_broker.committed(group)
        assert {tp: committed[tp][0] for tp in moved} == {tp: 10 for tp in moved}
        _produce(kafka_broker, topic, range(60, 120))
        wait_for(lambda: read("first") or read("second") or len(seen) >= 120, "120 records")
        assert sorted(seen) == sorted((p, o) for p in range(6) for o in range(20))
        assert {p for (p, o), name in seen.items() if name == "second"} == {p for _, p in moved}
    finally:
        for consumer in consumers.values():
            consumer.close()
