"""Real clients against the mock broker: kafka-python and confluent-kafka (librdkafka) in 0.9 mode.

Every wait is bounded (generous deadlines, polled every few milliseconds); nothing asserts on elapsed time.
Session timeouts are lowered below 0.9's 6000 ms floor with the broker's ``min_session_timeout_ms``.
"""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import threading
import time
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Set, Tuple

import pytest

from kproto.records import decode_records
from kproto.testing import MockBroker

from broker_client import kafka_python_knows

import confluent_kafka  # noqa: E402  (dev dependency)
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402

pytestmark = pytest.mark.real_clients

N = 10_000
DEADLINE = 90.0
CK_09 = {"api.version.request": False, "broker.version.fallback": "0.9.0.1", "log_level": 2}
# librdkafka 2.x defaults session.timeout.ms to 45000, above 0.9's group.max.session.timeout.ms (30000):
# a 0.9 broker (and the mock) answers INVALID_SESSION_TIMEOUT, so every librdkafka consumer sets it.
CK_GROUP = {"session.timeout.ms": 10000}
KP_09 = {"api_version": (0, 9)}
SESSION_MS = 3000
FAST_GROUP = {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 300}
CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3}


def wait_for(predicate: Callable[[], bool], timeout: float = DEADLINE, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def shallow_codecs(raw: bytes) -> Set[int]:
    """The codec of every stored record batch (the low bits of its attributes, byte 22)."""
    codecs, pos = set(), 0
    while pos + 12 <= len(raw):
        _, size = struct.unpack_from(">qi", raw, pos)
        codecs.add(raw[pos + 22] & 7)
        pos += 12 + size
    return codecs


def check_log(broker: MockBroker, topic: str, partitions: int, codec: Optional[str]) -> None:
    """Stored offsets are dense; compression was kept through up-conversion to record batches (librdkafka
    may send lone messages plain)."""
    seen = set()
    for p in range(partitions):
        raw = broker.log_bytes(topic, p)
        assert [r.offset for r in decode_records(raw)] == list(range(broker.high_watermark(topic, p)))
        seen |= shallow_codecs(raw)
    assert CODEC_IDS[codec] in seen


def check_consumed(records: List[Tuple[int, int, bytes]], partitions: int) -> None:
    """records are (partition, offset, value=b"key:seq"): all N once, offsets and seqs ascending per partition."""
    seqs = [int(v.split(b":")[1]) for _, _, v in records]
    assert sorted(seqs) == list(range(N)), "lost or duplicated messages"
    by_partition: Dict[int, List[Tuple[int, int]]] = defaultdict(list)
    for (partition, offset, _), seq in zip(records, seqs):
        by_partition[partition].append((offset, seq))
    for partition, entries in by_partition.items():
        assert [o for o, _ in entries] == list(range(len(entries))), f"partition {partition} offsets"
        assert [s for _, s in entries] == sorted(s for _, s in entries), f"partition {partition} order"


def _value(i: int) -> Tuple[bytes, bytes]:
    key = b"k%d" % (i % 17)
    return key, key + b":%d" % i


# ------------------------------------------------------------------------------------------------ produce + consume


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_kafka_python_round_trip(codec: Optional[str]) -> None:
    with MockBroker(topics={"kp": 3}) as broker:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=5, **KP_09
        )
        for i in range(N):
            key, value = _value(i)
            producer.send("kp", key=key, value=value)
        producer.flush(DEADLINE)
        producer.close()
        assert sum(broker.high_watermark("kp", p) for p in range(3)) == N
        check_log(broker, "kp", 3, codec)

        consumer = KafkaConsumer(
            "kp",
            bootstrap_servers=broker.bootstrap_servers,
            group_id="kp-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            **KP_09,
        )
        kafka_python_knows(consumer, "kp")
        records: List[Tuple[int, int, bytes]] = []
        deadline = time.monotonic() + DEADLINE
        while len(records) < N and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=200).items():
                records.extend((tp.partition, m.offset, m.value) for m in batch)
        consumer.commit()
        consumer.close()
        check_consumed(records, 3)
        assert {tp: o for tp, (o, _) in broker.committed("kp-group").items()} == {
            ("kp", p): broker.high_watermark("kp", p) for p in range(3)
        }
        counts = broker.request_counts()
        for key_version in [(3, 0), (0, 1), (10, 0), (11, 0), (14, 0), (9, 1), (1, 1), (8, 2)]:
            assert counts.get(key_version), f"expected api {key_version} from kafka-python"


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_confluent_round_trip(codec: Optional[str]) -> None:
    with MockBroker(topics={"ck": 3}) as broker:
        producer = confluent_kafka.Producer(
            {
                **CK_09,
                "bootstrap.servers": broker.bootstrap_servers,
                "compression.codec": codec or "none",
                "linger.ms": 5,
            }
        )
        for i in range(N):
            key, value = _value(i)
            while True:
                try:
                    producer.produce("ck", key=key, value=value)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(DEADLINE) == 0
        del producer
        assert sum(broker.high_watermark("ck", p) for p in range(3)) == N
        check_log(broker, "ck", 3, codec)

        consumer = confluent_kafka.Consumer(
            {
                **CK_09,
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "ck-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                **CK_GROUP,
            }
        )
        consumer.subscribe(["ck"])
        records: List[Tuple[int, int, bytes]] = []
        deadline = time.monotonic() + DEADLINE
        while len(records) < N and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                assert message.error() is None, message.error()
                records.append((message.partition(), message.offset(), message.value()))
        consumer.commit(asynchronous=False)
        consumer.close()
        check_consumed(records, 3)
        assert {tp: o for tp, (o, _) in broker.committed("ck-group").items()} == {
            ("ck", p): broker.high_watermark("ck", p) for p in range(3) if broker.high_watermark("ck", p)
        }


# ------------------------------------------------------------------------------------------------ groups


class KafkaPythonMember(threading.Thread):
    """A kafka-python group consumer polling in its own thread; records what it processes."""

    def __init__(
        self,
        broker: MockBroker,
        topic: str,
        group: str,
        *,
        commit_before_rebalance: bool = False,
        max_records: int = 500,
        pause: float = 0.0,
    ) -> None:
        super().__init__(daemon=True)
        self.broker, self.topic, self.group = broker, topic, group
        self.commit_before_rebalance, self.max_records, self.pause = commit_before_rebalance, max_records, pause
        self.processed: List[Tuple[int, int, bytes]] = []
        self.assigned: Set[int] = set()
        self.stop_event = threading.Event()
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            # commit_before_rebalance: kafka-python commits the consumed positions synchronously when a
            # rebalance starts (and on close) when auto-commit is on, as the Java consumer does; the long
            # interval keeps periodic commits out of the way.  (kafka-python 3.x refuses a blocking
            # commit() inside a plain ConsumerRebalanceListener: listeners run on its IO thread.)
            commit = (
                {"enable_auto_commit": True, "auto_commit_interval_ms": 600_000}
                if self.commit_before_rebalance
                else {"enable_auto_commit": False}
            )
            consumer = KafkaConsumer(
                bootstrap_servers=self.broker.bootstrap_servers,
                group_id=self.group,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=50,
                max_poll_records=self.max_records,
                **commit,
                **FAST_GROUP,
                **KP_09,
            )
            consumer.subscribe([self.topic])
            kafka_python_knows(consumer, self.topic)
            while not self.stop_event.is_set():
                for tp, batch in consumer.poll(timeout_ms=50).items():
                    self.processed.extend((tp.partition, m.offset, m.value) for m in batch)
                self.assigned = {tp.partition for tp in consumer.assignment()}
                if self.pause:
                    time.sleep(self.pause)
            consumer.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def finish(self) -> None:
        self.stop_event.set()
        self.join(DEADLINE)
        assert not self.is_alive()
        assert self.error is None, self.error


def _assignments_split(
    members: List[KafkaPythonMember], partitions: int, group: Optional[str] = None, broker: Optional[MockBroker] = None
) -> Callable[[], bool]:
    def check() -> bool:
        sets = [m.assigned for m in members]
        covered = set().union(*sets) == set(range(partitions))
        disjoint = sum(len(s) for s in sets) == partitions
        balanced = all(len(s) == partitions // len(members) for s in sets)
        stable = broker is None or (
            broker.group(group) is not None
            and broker.group(group).state.value == "Stable"
            and len(broker.group(group).members) == len(members)
        )
        return covered and disjoint and balanced and stable

    return check


def test_kafka_python_group_split_rebalance_and_member_loss(tmp_path) -> None:
    with MockBroker(topics={"g6": 6}, min_session_timeout_ms=1000) as broker:
        first, second = KafkaPythonMember(broker, "g6", "grp"), KafkaPythonMember(broker, "g6", "grp")
        first.start()
        second.start()
        wait_for(_assignments_split([first, second], 6, "grp", broker), what="two members splitting 6 partitions")

        third = KafkaPythonMember(broker, "g6", "grp")
        third.start()
        wait_for(_assignments_split([first, second, third], 6, "grp", broker), what="three members, 2 partitions each")

        # Kill a member without LeaveGroup: a subprocess, killed with SIGKILL once it holds partitions.
        victim = subprocess.Popen(
            [sys.executable, "-c", VICTIM_SCRIPT, broker.bootstrap_servers, "g6", "grp", str(SESSION_MS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            line = ""
            deadline = time.monotonic() + DEADLINE
            while not line.startswith("assigned [") or line.strip() == "assigned []":
                assert time.monotonic() < deadline, "victim never got partitions"
                line = victim.stdout.readline()
                assert line, "victim exited"
            wait_for(lambda: len(broker.group("grp").members) == 4, what="four members")
        finally:
            victim.send_signal(signal.SIGKILL)
            victim.wait(DEADLINE)
        # After the victim's session times out the survivors own everything again.
        wait_for(_assignments_split([first, second, third], 6, "grp", broker), what="survivors owning all partitions")
        for member in (first, second, third):
            member.finish()


VICTIM_SCRIPT = r"""
import sys, time
from kafka import KafkaConsumer
bootstrap, topic, group, session = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, api_version=(0, 9),
                         session_timeout_ms=session, heartbeat_interval_ms=300, enable_auto_commit=False)
consumer.partitions_for_topic(topic)  # known before the first join: see broker_client.kafka_python_knows
last = None
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    consumer.poll(timeout_ms=50)
    now = sorted(tp.partition for tp in consumer.assignment())
    if now != last:
        print("assigned", now, flush=True)
        last = now
"""


def _produce_plain(broker: MockBroker, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=5, **KP_09)
    for i in range(count):
        key, value = _value(i)
        producer.send(topic, key=key, value=value)
    producer.flush(DEADLINE)
    producer.close()


def test_committed_offsets_survive_a_consumer_restart() -> None:
    with MockBroker(topics={"rs": 4}, min_session_timeout_ms=1000) as broker:
        _produce_plain(broker, "rs", 2000)
        seen: List[Tuple[int, int, bytes]] = []
        for round_ in range(2):
            consumer = KafkaConsumer(
                "rs",
                bootstrap_servers=broker.bootstrap_servers,
                group_id="restart",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                max_poll_records=100,
                fetch_max_wait_ms=50,
                **FAST_GROUP,
                **KP_09,
            )
            kafka_python_knows(consumer, "rs")
            got: List[Tuple[int, int, bytes]] = []
            deadline = time.monotonic() + DEADLINE
            target = 1000 if round_ == 0 else 2000 - len(seen)
            while len(got) < target and time.monotonic() < deadline:
                for tp, batch in consumer.poll(timeout_ms=100, max_records=min(100, target - len(got))).items():
                    got.extend((tp.partition, m.offset, m.value) for m in batch)
            consumer.commit()  # synchronous
            consumer.close()
            seen.extend(got)
        seqs = sorted(int(v.split(b":")[1]) for _, _, v in seen)
        assert seqs == list(range(2000))
        assert sum(o for o, _ in broker.committed("restart").values()) == 2000


def test_sync_commit_before_rebalance_means_nothing_is_processed_twice() -> None:
    count = 3000
    with MockBroker(topics={"once": 6}, min_session_timeout_ms=1000) as broker:
        _produce_plain(broker, "once", count)
        first = KafkaPythonMember(broker, "once", "once-grp", commit_before_rebalance=True, max_records=20, pause=0.01)
        first.start()
        wait_for(lambda: len(first.processed) >= 200, what="first member consuming")
        second = KafkaPythonMember(broker, "once", "once-grp", commit_before_rebalance=True, max_records=20, pause=0.01)
        second.start()
        wait_for(lambda: len(first.processed) + len(second.processed) >= count, what="everything processed")
        first.finish()
        second.finish()
        assert second.processed, "the second member never got partitions"
        seqs = [int(v.split(b":")[1]) for _, _, v in first.processed + second.processed]
        assert len(seqs) == len(set(seqs)) == count


class ConfluentMember(threading.Thread):
    """A confluent-kafka group consumer polling in its own thread."""

    def __init__(self, broker: MockBroker, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.config = {
            **CK_09,
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 300,
            "enable.auto.commit": False,
        }
        self.topic = topic
        self.assigned: Set[int] = set()
        self.stop_event = threading.Event()
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            consumer = confluent_kafka.Consumer(self.config)
            consumer.subscribe([self.topic])
            while not self.stop_event.is_set():
                consumer.poll(0.05)
                self.assigned = {tp.partition for tp in consumer.assignment()}
            consumer.close()
        except BaseException as exc:  # noqa: BLE001
            self.error = exc

    def finish(self) -> None:
        self.stop_event.set()
        self.join(DEADLINE)
        assert self.error is None, self.error


def test_confluent_group_split_and_rebalance() -> None:
    with MockBroker(topics={"cg": 4}, min_session_timeout_ms=1000) as broker:
        members = [ConfluentMember(broker, "cg", "cgrp"), ConfluentMember(broker, "cg", "cgrp")]
        for member in members:
            member.start()
        wait_for(_assignments_split(members, 4, "cgrp", broker), what="two librdkafka members splitting")  # type: ignore[arg-type]
        members[1].finish()  # close(): LeaveGroup, the other takes over at once
        wait_for(lambda: members[0].assigned == {0, 1, 2, 3}, what="the survivor owning everything")
        members[0].finish()
