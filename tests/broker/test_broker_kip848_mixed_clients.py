"""Four clients in one KIP-848 consumer group on the mock broker: kproto's consumer
(``group_protocol="consumer"``), confluent-kafka (``group.protocol=consumer``) and, one test each, Apache
Kafka's Java client (``group.protocol=consumer``) or franz-go (``kgo.ServerSideBalancer``).

The foreign client runs as a process of its own (``tests/java/Kip848Member.java``, ``tests/go`` with
``kip848-member``) that prints what it reads and owns and commits after every poll.  After each change
(the third member joins; it leaves) every partition is owned by exactly one member, in the clients' own
views and in the coordinator's; every record is read exactly once; and the group's committed offsets end
at each partition's end (the leaving member's commits are where the others resume).  Waits are on
events, each bounded by a generous deadline.  Without java/javac/mvn or go a test is skipped with one
line naming what is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional, Set

import pytest

from kproto.client import sync
from kproto.group.consumer_group import ConsumerGroupConfig
from kproto.testing import MockBroker, jars

import confluent_kafka  # noqa: E402  (dev dependency)

pytestmark = pytest.mark.real_clients

if confluent_kafka.libversion()[1] < 0x020C0000:
    pytest.skip(
        f"librdkafka {confluent_kafka.libversion()[0]} predates group.protocol=consumer (2.12); "
        "pyproject.toml asks for confluent-kafka>=2.12",
        allow_module_level=True,
    )

TESTS = Path(__file__).resolve().parents[1]
TOPIC, GROUP = "mx", "mixed848"
PARTITIONS = 6
N = 300  # records per round
DEADLINE = 90.0
BUILD_TIMEOUT_S = 900.0


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Member:
    """What every member shows the test: the partitions it owns, the values it read, its first error."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.assigned: Set[int] = set()
        self.history: List[Set[int]] = []
        self.values: List[str] = []
        self.errors: List[BaseException] = []

    def _saw(self, now: Set[int]) -> None:
        if now != self.assigned:
            self.assigned = now
            self.history.append(now)


class ThreadMember(Member):
    """kproto's or confluent-kafka's consumer polled on a thread, committing after every poll that read."""

    def __init__(self, name: str, broker: MockBroker) -> None:
        super().__init__(name)
        self._stop = threading.Event()
        self._broker = broker
        self._thread = threading.Thread(target=self._guarded, daemon=True)
        self._thread.start()

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.errors.append(exc)

    def _run(self) -> None:
        if self.name == "kproto":
            consumer = sync.Consumer(
                self._broker.bootstrap_servers,
                group_id=GROUP,
                topics=[TOPIC],
                group_protocol="consumer",
                auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
            )
            try:
                while not self._stop.is_set():
                    records = consumer.poll(100)
                    self.values += [r.value.decode() for r in records]
                    if records:
                        consumer.commit()
                    self._saw({p for _, p in consumer.assignment()})
            finally:
                consumer.close()
            return
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self._broker.bootstrap_servers,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not self._stop.is_set():
                messages = [m for m in consumer.consume(100, 0.1) if m.error() is None]
                self.values += [m.value().decode() for m in messages]
                if messages:
                    consumer.commit(asynchronous=False)
                self._saw({tp.partition for tp in consumer.assignment()})
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        if self.errors:
            raise self.errors[0]


class ProcessMember(Member):
    """A member in a process of its own speaking JSON lines; told to leave by "stop" on its input."""

    def __init__(self, name: str, argv: List[str]) -> None:
        super().__init__(name)
        self.closed = False
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue  # a client's own log line
            event = json.loads(line)
            if "assigned" in event:
                self._saw(set(event["assigned"]))
            elif "value" in event:
                self.values.append(event["value"])
            elif event.get("closed"):
                self.closed = True

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.close()
        try:
            self.process.wait(DEADLINE)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        self._reader.join(DEADLINE)
        stderr = self.process.stderr.read() if self.process.stderr else ""
        assert self.process.returncode == 0 and self.closed, f"{self.name} ended badly:\n{stderr[-3000:]}"


def split(broker: MockBroker, members: List[Member]) -> bool:
    """Every partition owned by exactly one member and every member owning some, as the clients see it and
    as the coordinator holds it."""
    sets = [m.assigned for m in members]
    if not all(sets) or sum(len(s) for s in sets) != PARTITIONS or set().union(*sets) != set(range(PARTITIONS)):
        return False
    held = broker.core.consumer_groups.members(GROUP)
    coordinator = sorted(sorted(p for ps in m.assigned.values() for p in ps) for m in held)
    pending = [m for m in held if m.pending_revocation]
    return not pending and coordinator == sorted(sorted(s) for s in sets)


def produce(broker: MockBroker, tag: str) -> List[str]:
    values = [f"{tag}{i}" for i in range(N)]
    with sync.Producer(broker.bootstrap_servers, acks="all") as producer:
        for i, value in enumerate(values):
            producer.send(TOPIC, value.encode(), partition=i % PARTITIONS)
        producer.flush()
    return values


def read_once(members: List[Member], expected: List[str]) -> None:
    def values() -> List[str]:
        return [v for m in members for v in m.values]

    wait_for(lambda: set(expected) <= set(values()), f"{len(expected)} records read")
    seen = values()
    assert len(seen) == len(set(seen)), "a record was read twice: a commit was not respected"


def run_mixed_group(foreign_argv: List[str], name: str) -> None:
    config = ConsumerGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=300)
    with MockBroker(topics={TOPIC: PARTITIONS}, consumer_group=config) as broker:
        ours: List[ThreadMember] = []
        foreign: Optional[ProcessMember] = None
        try:
            ours = [ThreadMember("kproto", broker), ThreadMember("confluent", broker)]
            wait_for(lambda: split(broker, list(ours)), "kproto's and confluent-kafka's consumers splitting")
            foreign = ProcessMember(name, [a.replace("{bootstrap}", broker.bootstrap_servers) for a in foreign_argv])
            everyone: List[Member] = [*ours, foreign]
            wait_for(lambda: split(broker, everyone), f"{name} joining and the three splitting")
            first = produce(broker, "a")
            read_once(everyone, first)
            assert all(m.values for m in everyone), "every member read its share"
            before = {m.name: set(m.assigned) for m in ours}
            history = {m.name: len(m.history) for m in ours}
            foreign.stop()  # it leaves: only its partitions move
            wait_for(lambda: split(broker, list(ours)), f"the others taking {name}'s partitions")
            for m in ours:
                assert all(before[m.name] <= later for later in m.history[history[m.name] :]), m.name
            second = produce(broker, "b")
            read_once(everyone, first + second)
        finally:
            if foreign is not None and foreign.process.poll() is None:
                foreign.process.kill()
            for m in ours:
                m.stop()
        committed = {tp: offset for tp, (offset, _) in broker.core.coordinator.committed(GROUP).items()}
        assert committed == {(TOPIC, p): 2 * N // PARTITIONS for p in range(PARTITIONS)}


def test_java_client_in_a_mixed_group(tmp_path: Path) -> None:
    try:
        java, javac, _ = (jars.require_tool(tool) for tool in ("java", "javac", "mvn"))
    except jars.JavaToolMissingError as exc:
        pytest.skip(f"the Java client's member needs a JDK and Maven: {exc}")
    lib = jars.resolve(["org.apache.kafka:kafka-clients:4.1.1"])
    source = TESTS / "java" / "Kip848Member.java"
    built = subprocess.run(
        [javac, "-nowarn", "-d", str(tmp_path), "-cp", f"{lib}/*", str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert built.returncode == 0, f"javac failed:\n{built.stdout[-4000:]}"
    run_mixed_group([java, "-cp", f"{tmp_path}:{lib}/*", "Kip848Member", "{bootstrap}", GROUP, TOPIC], "java")


def test_franz_go_in_a_mixed_group(tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the franz-go member needs the Go toolchain (1.26+) on PATH: https://go.dev/dl/")
    binary = tmp_path / "peers"
    done = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=TESTS / "go",
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert done.returncode == 0, f"go build failed:\n{done.stdout[-4000:]}"
    run_mixed_group([str(binary), "{bootstrap}", "kip848-member", GROUP, TOPIC], "franz-go")
