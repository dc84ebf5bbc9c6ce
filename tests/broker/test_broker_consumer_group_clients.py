"""confluent-kafka (librdkafka) at its defaults plus ``group.protocol=consumer`` against the mock broker:
KIP-848 consumer groups over ConsumerGroupHeartbeat.

Two consumers split a topic, then a third joins: after each change every partition is owned by exactly
one member and nothing is lost.  A static member (``group.instance.id``) that closes and restarts gets
its partitions back without the other member noticing.  One consumer runs in a process of its own and
is killed (no leave): it loses its partitions after its session timeout, only those move, and the
survivor resumes from the offsets it committed.  Waits are on events, each bounded by a generous
deadline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Set

import pytest

from kproto.group.consumer_group import ConsumerGroupConfig
from kproto.testing import MockBroker

import confluent_kafka  # noqa: E402  (dev dependency)

pytestmark = pytest.mark.real_clients

if confluent_kafka.libversion()[1] < 0x020C0000:
    pytest.skip(
        f"librdkafka {confluent_kafka.libversion()[0]} predates group.protocol=consumer (2.12); "
        "pyproject.toml asks for confluent-kafka>=2.12",
        allow_module_level=True,
    )

PARTITIONS = 6
N = 600
DEADLINE = 90.0
SESSION_MS = 6000  # the broker's group.consumer.session.timeout.ms, lowered so that expiry is quick


def wait_for(
    predicate: Callable[[], bool], what: str, timeout: float = DEADLINE, missing: Optional[Callable[[], object]] = None
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"; missing {missing()}" if missing else ""))
        time.sleep(0.05)


def consumer_config(broker: MockBroker) -> Dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "kip848",
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
    }


class Member:
    """A consumer polled on a thread; ``assigned`` is its current assignment, ``values`` what it read."""

    def __init__(self, broker: MockBroker, instance: Optional[str] = None) -> None:
        self.assigned: Set[int] = set()
        self.history: List[Set[int]] = []
        self.values: List[int] = []
        self._stop = threading.Event()
        self._errors: List[BaseException] = []
        self._config = consumer_config(broker)
        if instance is not None:
            self._config["group.instance.id"] = instance
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            consumer = confluent_kafka.Consumer(self._config)
            consumer.subscribe(["g"])
            try:
                while not self._stop.is_set():
                    message = consumer.poll(0.05)
                    if message is not None and message.error() is None:
                        self.values.append(int(message.value()))
                    now = {tp.partition for tp in consumer.assignment()}
                    if now != self.assigned:
                        self.assigned = now
                        self.history.append(now)
            finally:
                consumer.close()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self._errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE)
        assert not self._thread.is_alive(), "consumer did not stop"
        if self._errors:
            raise self._errors[0]


_CHILD = """
import json, sys, confluent_kafka
config = json.loads(sys.argv[1])
config["enable.auto.commit"] = False
consumer = confluent_kafka.Consumer(config)
consumer.subscribe(["g"])
assigned = None
while True:
    message = consumer.poll(0.05)
    if message is not None and message.error() is None:
        print(json.dumps({"value": int(message.value())}), flush=True)
        consumer.commit(message, asynchronous=False)
    now = sorted(tp.partition for tp in consumer.assignment())
    if now != assigned:
        assigned = now
        print(json.dumps({"assigned": now}), flush=True)
"""


class ChildMember:
    """A consumer in a process of its own, committing each message after reporting it; killed, it never
    says goodbye."""

    def __init__(self, broker: MockBroker) -> None:
        self.assigned: Set[int] = set()
        self.values: List[int] = []
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(consumer_config(broker))], stdout=subprocess.PIPE, text=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assigned = set(event["assigned"])
            else:
                self.values.append(event["value"])

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(DEADLINE)
        self._reader.join(DEADLINE)


def produce(broker: MockBroker, values: range) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in values:
        producer.produce("g", str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(DEADLINE) == 0


def split(*members: object) -> bool:
    """Every partition owned by exactly one member, and every member owning some."""
    sets = [m.assigned for m in members]  # type: ignore[attr-defined]
    return all(sets) and sum(len(s) for s in sets) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))


def test_members_split_partitions_and_a_third_joins() -> None:
    with MockBroker(topics={"g": PARTITIONS}) as broker:
        produce(broker, range(N))
        a, b = Member(broker), Member(broker)
        try:
            wait_for(lambda: split(a, b), "two members to split the partitions")
            c = Member(broker)
            try:
                wait_for(lambda: split(a, b, c), "three members to split the partitions")
                wait_for(lambda: len(set(a.values) | set(b.values) | set(c.values)) == N, "every message")
                snapshot = broker.core.consumer_groups.members("kip848")
                assert {m.state.value for m in snapshot} == {"stable"}
            finally:
                c.stop()
        finally:
            a.stop()
            b.stop()
        assert set(a.values) | set(b.values) | set(c.values) == set(range(N))
        # The members' commits (automatic, and on close) reached the group: each partition read to its end.
        committed = {tp: offset for tp, (offset, _) in broker.core.coordinator.committed("kip848").items()}
        assert committed == {("g", p): N // PARTITIONS for p in range(PARTITIONS)}
        # Partitions changed owner only through revocation: a member's set shrank or grew, never swapped
        # to another member's while that member still held it (checked above by split at each stage).


def test_a_killed_member_loses_only_its_partitions_after_its_session() -> None:
    config = ConsumerGroupConfig(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    with MockBroker(topics={"g": PARTITIONS}, consumer_group=config) as broker:
        survivor = Member(broker)
        child = ChildMember(broker)
        try:
            wait_for(lambda: split(survivor, child), "the two members to split the partitions")
            produce(broker, range(N))  # after the split, so that each member has its share to read
            wait_for(lambda: len(child.values) >= 10, "the child to read and commit")
            mine, theirs = set(survivor.assigned), set(child.assigned)
            history_before = len(survivor.history)
            child.kill()
            committed = broker.core.coordinator.committed("kip848")
            killed_at = time.monotonic()
            wait_for(lambda: survivor.assigned == set(range(PARTITIONS)), "the survivor to take every partition")
            # The dead member's partitions waited for its session to end, well after the kill.
            assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5
            # Only the dead member's partitions moved: the survivor never gave one of its own up.
            assert all(mine <= later for later in survivor.history[history_before - 1 :])
            produce(broker, range(N, N + 60))
            expected = set(range(N + 60))
            wait_for(
                lambda: set(survivor.values) | set(child.values) >= expected,
                "every message",
                missing=lambda: sorted(expected - set(survivor.values) - set(child.values)),
            )
        finally:
            if child.process.poll() is None:
                child.kill()
            survivor.stop()
        # The survivor resumed the dead member's partitions from its commits, not from the beginning.
        assert any(partition in theirs for _, partition in committed), "the dead member committed"
        taken_over = [v for v in survivor.values if v % PARTITIONS in theirs]
        committed_values = {v for v in child.values}
        assert len([v for v in taken_over if v in committed_values]) <= PARTITIONS  # at most the uncommitted tail


def test_a_static_member_restarting_keeps_its_partitions() -> None:
    with MockBroker(topics={"g": PARTITIONS}) as broker:
        a, b = Member(broker, "instance-a"), Member(broker, "instance-b")
        try:
            wait_for(lambda: split(a, b), "two static members to split the partitions")
            before, b_history = set(a.assigned), len(b.history)
            a.stop()  # a static member leaves with epoch -2: its partitions wait for it
            epochs = broker.core.consumer_groups.group_epoch("kip848")
            restarted = Member(broker, "instance-a")
            try:
                wait_for(lambda: restarted.assigned == before, "the restarted member to get its partitions back")
                assert len(b.history) == b_history, "the other member saw a rebalance"
                assert broker.core.consumer_groups.group_epoch("kip848") == epochs
            finally:
                restarted.stop()
        finally:
            b.stop()
