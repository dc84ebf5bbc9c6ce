"""Clients through failures of a three-broker cluster, on the mock or on Apache Kafka, in one shape.

Two scenarios, the same for every client and both engines, each on a topic of its own (three partitions,
three replicas):

* ``produce``: the client at its defaults with idempotence and acks=all sends ``N`` records ``r<seq>`` one
  at a time (1 ms apart) to partition ``seq % 3``; a third of the way the broker leading partition 1 is
  stopped, at two thirds it is started again.  Recovery: from the stop to the first acknowledgement of a
  record sent to partition 1 after it.
* ``consume``: the topic holds ``N`` records; a member of a group reads them, committing after every poll;
  half-way the node coordinating the group is stopped (on the mock its coordinators move to the next
  node, ready at once; on Kafka, the node FindCoordinator names stops and another takes the group).
  Recovery: how long the first commit after the stop took.  Then 30 more records are written and a new
  member of the group must read exactly those: it resumed from the committed offsets.

Every client runs the scenario the same way: at each failure point it calls ``pause(at)`` (``"stop"``,
``"start"``, ``"move"``, ``"resume"``), which injects the failure and returns the time the scenario resumes.
Kafka's Java client and franz-go are programs (``tests/java``, ``tests/go``) that print a ``pause`` line and
wait for a line on stdin; :func:`run_program` answers them.

What a client saw is read from what it logs (Python logging, librdkafka's log and error callbacks, the Java
client's slf4j log, kgo's logger): :func:`errors_seen` lists the Kafka error names met, in any of their
spellings, and whether a connection was refused or lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import time
from collections import defaultdict
import contextlib
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, Sequence

from kproto import ErrorCode
from kproto.messages import FindCoordinatorRequest
from kproto.testing import MockBroker

N = 600  # JavaClientScenarios.CLUSTER_N, tests/go's clusterN
PARTITIONS = 3
RESUMED = 30
DEADLINE = 60.0
RUN_TIMEOUT_S = 300.0
Pause = Callable[[str], float]


class Cluster:
    """A three-node cluster of either engine, as the scenarios drive it."""

    engine = ""

    def __init__(self) -> None:
        self.stopped: List[int] = []

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def create_topic(self, topic: str) -> None:
        raise NotImplementedError

    def leader(self, topic: str, partition: int) -> int:
        raise NotImplementedError

    def stop(self, node: int) -> None:
        raise NotImplementedError

    def start(self, node: int) -> None:
        raise NotImplementedError

    def coordinator(self, group: str) -> int:
        raise NotImplementedError

    def records(self, topic: str) -> List[Any]:
        raise NotImplementedError

    def restore(self) -> None:
        """Start every node a scenario left stopped."""
        for node in list(self.stopped):
            self.start(node)

    def fill(self, topic: str, count: int, start: int = 0) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap_servers})
        for seq in range(start, start + count):
            producer.produce(topic, value=b"r%d" % seq, partition=seq % PARTITIONS)
        assert producer.flush(DEADLINE) == 0


class MockCluster(Cluster):
    engine = "mock"

    def __init__(self, broker: MockBroker) -> None:
        super().__init__()
        self.broker = broker

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def create_topic(self, topic: str) -> None:
        self.broker.create_topic(topic, PARTITIONS)

    def leader(self, topic: str, partition: int) -> int:
        return self.broker.leader(topic, partition)

    def stop(self, node: int) -> None:
        self.broker.stop_broker(node)
        self.stopped.append(node)

    def start(self, node: int) -> None:
        self.broker.start_broker(node)
        self.stopped.remove(node)

    def coordinator(self, group: str) -> int:
        return self.broker.coordinator(group)

    def records(self, topic: str) -> List[Any]:
        return self.broker.records(topic)


class KafkaCluster(Cluster):
    def __init__(self, kafka: Any) -> None:
        super().__init__()
        self.kafka = kafka
        self.engine = f"Apache Kafka {kafka.version}"

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers

    def create_topic(self, topic: str) -> None:
        self.kafka.create_topic(topic, partitions=PARTITIONS, replication_factor=3)

    def leader(self, topic: str, partition: int) -> int:
        return int(self.kafka.leader(topic, partition))

    def stop(self, node: int) -> None:
        self.kafka.stop_broker(node)
        self.stopped.append(node)

    def start(self, node: int) -> None:
        self.kafka.start_broker(node)
        self.stopped.remove(node)

    def coordinator(self, group: str) -> int:
        answer: Any = self.kafka.request(FindCoordinatorRequest(key=group, key_type=0), self.kafka.api_version(10, 3))
        assert answer.error_code == 0, f"FindCoordinator {group!r}: error {answer.error_code}"
        return int(answer.node_id)

    def records(self, topic: str) -> List[Any]:
        return list(self.kafka.records(topic))


def injector(cluster: Cluster, topic: str, group: str) -> Pause:
    """``pause(at)``: what each failure point of the scenarios does to ``cluster``."""
    victim = cluster.leader(topic, 1)

    def pause(at: str) -> float:
        if at == "stop":
            cluster.stop(victim)
        elif at == "start":
            cluster.start(victim)
        elif at == "move":
            cluster.stop(cluster.coordinator(group))
        elif at == "resume":
            cluster.fill(topic, RESUMED, start=N)
        else:
            raise AssertionError(f"unknown failure point {at!r}")
        return time.monotonic()

    return pause


# ------------------------------------------------------------------------------------------ the outcome

_CONNECTION = re.compile(
    r"refused|could not be established|connection reset|broken pipe|disconnect|_transport|connect call failed",
    re.IGNORECASE,
)


def _spellings() -> Dict[str, str]:
    """Each error's names (current, old, as Kafka's clients call it), squashed to letters → its name."""
    out: Dict[str, str] = {}
    for code in ErrorCode:
        info = code.info
        if code <= 0 or info is None:
            continue
        canonical = info.modern_name or info.name
        for name in {info.name, *info.old_names, canonical}:
            if "_" in name:  # a one-word name ("UNKNOWN") would match ordinary prose
                out[name.replace("_", "").lower()] = canonical
    return out


_SPELLINGS = _spellings()


def errors_seen(text: str) -> List[str]:
    """The Kafka errors ``text`` (a client's log) names, however spelled (``NOT_COORDINATOR``,
    ``NotCoordinatorException``, "Broker: Not coordinator"), and ``connection`` when it tells of a refused
    or lost connection."""
    squashed = re.sub(r"[^a-z]", "", text.lower())
    found = {name for spelling, name in _SPELLINGS.items() if spelling in squashed}
    if _CONNECTION.search(text):
        found.add("connection")
    return sorted(found)


def produce_outcome(cluster: Cluster, topic: str) -> Dict[str, Any]:
    """What the log holds after the produce scenario: lost, duplicated, out of order."""
    stored = [r for r in cluster.records(topic) if r.value is not None]
    seqs = [int(r.value[1:]) for r in stored]
    by_partition: Dict[int, List[int]] = defaultdict(list)
    for record, seq in zip(stored, seqs):
        by_partition[record.partition].append(seq)
    return {
        "stored": len(seqs),
        "lost": len(set(range(N)) - set(seqs)),
        "duplicated": len(seqs) - len(set(seqs)),
        "order_kept": all(order == sorted(order) for order in by_partition.values()),
    }


def consume_outcome(consumed: Sequence[int], resumed: Sequence[int]) -> Dict[str, Any]:
    """What the group read through the failover, and whether a new member resumed from the commits."""
    return {
        "consumed": len(consumed),
        "lost": len(set(range(N)) - set(consumed)),
        "duplicated": len(consumed) - len(set(consumed)),
        "resumed": sorted(resumed) == list(range(N, N + RESUMED)),
    }


@contextmanager
def captured_logs(*names: str) -> Iterator[List[str]]:
    """The messages the named loggers emit at INFO and above while inside, with their exceptions."""
    lines: List[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(logging.INFO)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)


# --------------------------------------------------------------------------------- the external programs


def run_program(cmd: List[str], scenario: str, pause: Pause, topic: str) -> Dict[str, Any]:
    """Run one scenario of the Java or Go program, answering its pauses; returns its result lines by step
    and its log (stderr) under ``"log"``."""
    env = {**os.environ, "CLUSTER_TOPIC": topic}
    proc = subprocess.Popen(
        [*cmd, scenario], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    log: List[str] = []
    import threading

    drain = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    steps: Dict[str, Any] = {}
    try:
        for line in proc.stdout:
            entry = json.loads(line)
            if entry["step"] == "pause":
                pause(entry["at"])
                proc.stdin.write("\n")
                proc.stdin.flush()
            else:
                steps[entry["step"]] = entry
        proc.wait(RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    drain.join(10)
    steps["log"] = "".join(log)
    assert proc.returncode == 0, f"{scenario} exited {proc.returncode}:\n{steps['log'][-3000:]}"
    return steps


def program_produce(cmd: List[str], scenario: str, cluster: Cluster, topic: str) -> Dict[str, Any]:
    steps = run_program(cmd, scenario, injector(cluster, topic, ""), topic)
    sent = steps["send"]
    return {
        "errors": errors_seen(steps["log"] + str(sent.get("error", ""))),
        "failed": sent.get("error"),
        "recovery_ms": sent.get("recovery_ms"),
        **produce_outcome(cluster, topic),
    }


def program_consume(cmd: List[str], scenario: str, cluster: Cluster, topic: str, group: str) -> Dict[str, Any]:
    cluster.fill(topic, N)
    steps = run_program(cmd, scenario, injector(cluster, topic, group), topic)
    read, resume = steps["read"], steps["resume"]
    return {
        "errors": errors_seen(steps["log"] + str(read.get("error", "")) + str(resume.get("error", ""))),
        "failed": read.get("error") or resume.get("error"),
        "recovery_ms": read.get("recovery_ms"),
        **consume_outcome(read.get("seqs") or [], resume.get("seqs") or []),
    }


# ------------------------------------------------------------------------------------- the Python clients

Send = Callable[[int], Awaitable[None]]


async def produce_plan(send: Send, pause: Pause) -> float:
    """Send every record 1 ms apart, pausing where the failures go; returns when the stop was over."""
    stopped_at = 0.0
    for seq in range(N):
        await send(seq)
        if seq == N // 3 - 1:
            stopped_at = await asyncio.to_thread(pause, "stop")
        elif seq == 2 * N // 3:
            await asyncio.sleep(0.3)  # some retries happen while it is down
            await asyncio.to_thread(pause, "start")
        await asyncio.sleep(0.001)
    return stopped_at


class AckClock:
    """When the first record sent to partition 1 after the stop was acknowledged."""

    def __init__(self) -> None:
        self.first: Optional[float] = None
        self.failures: List[str] = []

    def ack(self, seq: int, error: Optional[object] = None) -> None:
        if error is not None:
            self.failures.append(repr(error))
        elif seq >= N // 3 and seq % PARTITIONS == 1 and self.first is None:
            self.first = time.monotonic()

    def result(self, stopped_at: float) -> Dict[str, Any]:
        return {
            "failed": self.failures[0] if self.failures else None,
            "recovery_ms": None if self.first is None else round((self.first - stopped_at) * 1000),
        }


async def consume_plan(
    poll: Callable[[], Awaitable[List[int]]],
    commit: Callable[[], Awaitable[None]],
    pause: Optional[Pause],
    want: int,
) -> Dict[str, Any]:
    """Poll and commit after each poll until ``want`` records; with ``pause``, half-way the coordinator fails
    over and the next commit's duration is the recovery."""
    seqs: List[int] = []
    recovery: Optional[float] = None
    deadline = time.monotonic() + DEADLINE
    while len(seqs) < want and time.monotonic() < deadline:
        got = await poll()
        seqs += got
        if got:
            await commit()
        if pause is not None and recovery is None and len(seqs) >= want // 2:
            moved_at = await asyncio.to_thread(pause, "move")
            await commit()
            recovery = round((time.monotonic() - moved_at) * 1000)
    return {"seqs": seqs, "recovery_ms": recovery}


def seq_of(value: bytes) -> int:
    return int(value[1:])


def _with_logs(names: Sequence[str], body: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    with captured_logs(*names) as lines:
        result = body()
    result["errors"] = errors_seen("\n".join(lines) + str(result.get("failed") or ""))
    return result


def kproto_produce(cluster: Cluster, topic: str) -> Dict[str, Any]:
    from kproto.client import Producer

    async def main() -> Dict[str, Any]:
        clock = AckClock()
        async with Producer(cluster.bootstrap_servers, acks="all", idempotence=True) as producer:

            async def send(seq: int) -> None:
                future = await producer.send(topic, b"r%d" % seq, partition=seq % PARTITIONS)
                future.add_done_callback(lambda f: clock.ack(seq, f.exception()))

            stopped_at = await produce_plan(send, injector(cluster, topic, ""))
            await asyncio.wait_for(producer.flush(), DEADLINE)
        return clock.result(stopped_at)

    return {**_with_logs(["kproto"], lambda: asyncio.run(main())), **produce_outcome(cluster, topic)}


def kafka_python_produce(cluster: Cluster, topic: str) -> Dict[str, Any]:
    from kafka import KafkaProducer

    def main() -> Dict[str, Any]:
        clock = AckClock()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, acks="all")

        async def send(seq: int) -> None:
            future = producer.send(topic, value=b"r%d" % seq, partition=seq % PARTITIONS)
            future.add_callback(lambda _: clock.ack(seq)).add_errback(lambda e: clock.ack(seq, e))

        stopped_at = asyncio.run(produce_plan(send, injector(cluster, topic, "")))
        producer.flush(DEADLINE)
        producer.close()
        return clock.result(stopped_at)

    return {**_with_logs(["kafka"], main), **produce_outcome(cluster, topic)}


def confluent_produce(cluster: Cluster, topic: str) -> Dict[str, Any]:
    import confluent_kafka

    def main() -> Dict[str, Any]:
        clock = AckClock()
        log = logging.getLogger("librdkafka")
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "logger": log,
                "error_cb": lambda err: log.warning("error_cb: %s", err),
            }
        )

        async def send(seq: int) -> None:
            producer.produce(
                topic, value=b"r%d" % seq, partition=seq % PARTITIONS, on_delivery=lambda err, _: clock.ack(seq, err)
            )
            producer.poll(0)

        stopped_at = asyncio.run(produce_plan(send, injector(cluster, topic, "")))
        assert producer.flush(DEADLINE) == 0
        return clock.result(stopped_at)

    return {**_with_logs(["librdkafka"], main), **produce_outcome(cluster, topic)}


def aiokafka_produce(cluster: Cluster, topic: str) -> Dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    async def main() -> Dict[str, Any]:
        clock = AckClock()
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, acks="all")
        await producer.start()
        try:

            async def send(seq: int) -> None:
                future = await producer.send(topic, value=b"r%d" % seq, partition=seq % PARTITIONS)
                future.add_done_callback(lambda f: clock.ack(seq, f.exception()))

            stopped_at = await produce_plan(send, injector(cluster, topic, ""))
            await asyncio.wait_for(producer.flush(), DEADLINE)
        finally:
            await producer.stop()
        return clock.result(stopped_at)

    return {**_with_logs(["aiokafka"], lambda: asyncio.run(main())), **produce_outcome(cluster, topic)}


def _consume_result(first: Dict[str, Any], resumed: Dict[str, Any]) -> Dict[str, Any]:
    return {"failed": None, "recovery_ms": first["recovery_ms"], **consume_outcome(first["seqs"], resumed["seqs"])}


def _run_consumer(cluster: Cluster, topic: str, group: str, one: Callable[[Optional[Pause], int], Dict[str, Any]]):
    """The consume scenario around ``one(pause, want)``, which runs one member of the group to the end."""
    cluster.fill(topic, N)
    pause = injector(cluster, topic, group)
    first = one(pause, N)
    pause("resume")
    return _consume_result(first, one(None, RESUMED))


def kproto_consume(cluster: Cluster, topic: str, group: str) -> Dict[str, Any]:
    from kproto.client import Consumer

    async def member(pause: Optional[Pause], want: int) -> Dict[str, Any]:
        async with Consumer(
            cluster.bootstrap_servers, topics=[topic], group_id=group, auto_commit=False, auto_offset_reset="earliest"
        ) as consumer:

            async def poll() -> List[int]:
                return [seq_of(r.value) for r in await consumer.poll(200)]

            return await consume_plan(poll, consumer.commit, pause, want)

    return _with_logs(["kproto"], lambda: _run_consumer(cluster, topic, group, lambda p, w: asyncio.run(member(p, w))))


def kafka_python_consume(cluster: Cluster, topic: str, group: str) -> Dict[str, Any]:
    from kafka import KafkaConsumer

    def member(pause: Optional[Pause], want: int) -> Dict[str, Any]:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.partitions_for_topic(topic)  # see docs/broker.md: the first assignment then completes

        async def poll() -> List[int]:
            return [seq_of(m.value) for ms in consumer.poll(200).values() for m in ms]

        async def commit() -> None:
            consumer.commit()

        try:
            return asyncio.run(consume_plan(poll, commit, pause, want))
        finally:
            consumer.close(autocommit=False)

    return _with_logs(["kafka"], lambda: _run_consumer(cluster, topic, group, member))


def confluent_consume(cluster: Cluster, topic: str, group: str) -> Dict[str, Any]:
    import confluent_kafka

    def member(pause: Optional[Pause], want: int) -> Dict[str, Any]:
        log = logging.getLogger("librdkafka")
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "logger": log,
                "error_cb": lambda err: log.warning("error_cb: %s", err),
            }
        )
        consumer.subscribe([topic])

        async def poll() -> List[int]:
            messages = consumer.consume(num_messages=500, timeout=0.2)
            for m in messages:
                if m.error() is not None:
                    log.warning("message error: %s", m.error())
            return [seq_of(m.value()) for m in messages if m.error() is None]

        async def commit() -> None:
            # The positions, named: with no new offset librdkafka's commit() sends nothing (_NO_OFFSET).
            consumer.commit(offsets=consumer.position(consumer.assignment()), asynchronous=False)

        try:
            return asyncio.run(consume_plan(poll, commit, pause, want))
        finally:
            consumer.close()

    return _with_logs(["librdkafka"], lambda: _run_consumer(cluster, topic, group, member))


def aiokafka_consume(cluster: Cluster, topic: str, group: str) -> Dict[str, Any]:
    from aiokafka import AIOKafkaConsumer

    async def member(pause: Optional[Pause], want: int) -> Dict[str, Any]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()

        async def poll() -> List[int]:
            batches = await consumer.getmany(timeout_ms=200)
            return [seq_of(m.value) for ms in batches.values() for m in ms]

        try:
            return await consume_plan(poll, consumer.commit, pause, want)
        finally:
            # aiokafka's stop() can re-raise the cancellation of its own fetch task when it was backing off
            # from the stopped node: that ends the task the scenario meant to end, nothing more
            with contextlib.suppress(asyncio.CancelledError):
                await consumer.stop()

    return _with_logs(
        ["aiokafka"], lambda: _run_consumer(cluster, topic, group, lambda p, w: asyncio.run(member(p, w)))
    )


#: client → (produce scenario, consume scenario) for the Python clients; the programs' are built by tests.
PYTHON_CLIENTS: Dict[str, Any] = {
    "kproto": (kproto_produce, kproto_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "confluent-kafka": (confluent_produce, confluent_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}
