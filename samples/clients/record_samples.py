"""Record real client traffic against kproto's mock broker into small pcaps (one scenario per file).

    .venv/bin/python samples/clients/record_samples.py [--out samples/clients]

Scenarios: kafka-python and confluent-kafka (librdkafka), both in 0.9 mode, producing with every codec
they support; and group consumers of each joining a group, a third member joining (rebalance) and one
leaving.  The broker's port is written as 9092 in the files, so ``tshark -r FILE -d tcp.port==9092,kafka``
and ``kproto.capture.decode_capture(FILE)`` read them with their defaults.  Each file stays well under
300 KB.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, List

from kproto.testing import MockBroker

CK_09 = {"api.version.request": False, "broker.version.fallback": "0.9.0.1", "log_level": 2}
MESSAGES = 200
CODECS = [None, "gzip", "snappy", "lz4"]


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.02)


def recording_broker(path: Path, **options: object) -> MockBroker:
    return MockBroker(record_pcap=path, record_server_port=9092, min_session_timeout_ms=1000, **options)


def kafka_python_produce(path: Path, codec: object) -> None:
    from kafka import KafkaProducer

    with recording_broker(path, topics={"samples": 2}) as broker:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers,
            api_version=(0, 9),
            compression_type=codec,
            linger_ms=20,
            client_id="kafka-python-sample",
        )
        for i in range(MESSAGES):
            producer.send("samples", key=b"key-%d" % (i % 5), value=b"message %d from kafka-python" % i)
        producer.flush(60)
        producer.close()


def confluent_produce(path: Path, codec: object) -> None:
    import confluent_kafka

    with recording_broker(path, topics={"samples": 2}) as broker:
        producer = confluent_kafka.Producer(
            {
                **CK_09,
                "bootstrap.servers": broker.bootstrap_servers,
                "compression.codec": codec or "none",
                "linger.ms": 20,
                "client.id": "librdkafka-sample",
            }
        )
        for i in range(MESSAGES):
            producer.produce("samples", key=b"key-%d" % (i % 5), value=b"message %d from librdkafka" % i)
        producer.flush(60)
        del producer


class Member(threading.Thread):
    """A group consumer polling in a thread until told to stop (then it leaves the group)."""

    def __init__(self, make: Callable[[], object], poll: Callable[[object], None], assigned: Callable[[object], set]):
        super().__init__(daemon=True)
        self.make, self.poll, self.assigned_of = make, poll, assigned
        self.assigned: set = set()
        self.stop_event = threading.Event()

    def run(self) -> None:
        consumer = self.make()
        while not self.stop_event.is_set():
            self.poll(consumer)
            self.assigned = self.assigned_of(consumer)
        consumer.close()

    def finish(self) -> None:
        self.stop_event.set()
        self.join(60)


def group_scenario(
    path: Path, make_member: Callable[[MockBroker], Member], produce: Callable[[MockBroker], None]
) -> None:
    with recording_broker(path, topics={"samples": 6}) as broker:
        produce(broker)
        members: List[Member] = [make_member(broker), make_member(broker)]
        for member in members:
            member.start()
        wait_for(lambda: sorted(len(m.assigned) for m in members) == [3, 3])
        members.append(make_member(broker))
        members[-1].start()
        wait_for(lambda: sorted(len(m.assigned) for m in members) == [2, 2, 2])
        members[0].finish()  # leaves the group: the other two take over
        wait_for(lambda: sorted(len(m.assigned) for m in members[1:]) == [3, 3])
        for member in members[1:]:
            member.finish()


def kafka_python_group(path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    def produce(broker: MockBroker) -> None:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=(0, 9))
        for i in range(60):
            producer.send("samples", value=b"event %d" % i)
        producer.flush(60)
        producer.close()

    def make_member(broker: MockBroker) -> Member:
        return Member(
            lambda: _subscribed(
                KafkaConsumer(
                    bootstrap_servers=broker.bootstrap_servers,
                    api_version=(0, 9),
                    group_id="sample-group",
                    client_id="kafka-python-member",
                    auto_offset_reset="earliest",
                    session_timeout_ms=3000,
                    heartbeat_interval_ms=500,
                    fetch_max_wait_ms=200,
                ),
                ["samples"],
            ),
            lambda c: c.poll(timeout_ms=100),
            lambda c: {tp.partition for tp in c.assignment()},
        )

    group_scenario(path, make_member, produce)


def confluent_group(path: Path) -> None:
    import confluent_kafka

    def produce(broker: MockBroker) -> None:
        producer = confluent_kafka.Producer({**CK_09, "bootstrap.servers": broker.bootstrap_servers})
        for i in range(60):
            producer.produce("samples", value=b"event %d" % i)
        producer.flush(60)

    def make_member(broker: MockBroker) -> Member:
        config = {
            **CK_09,
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "sample-group",
            "client.id": "librdkafka-member",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 200,
        }
        return Member(
            lambda: _subscribed(confluent_kafka.Consumer(config), ["samples"]),
            lambda c: c.poll(0.1),
            lambda c: {tp.partition for tp in c.assignment()},
        )

    group_scenario(path, make_member, produce)


def _subscribed(consumer: object, topics: List[str]) -> object:
    consumer.subscribe(topics)  # type: ignore[attr-defined]
    return consumer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for codec in CODECS:
        name = codec or "none"
        jobs.append((f"kafka-python-produce-{name}.pcap", lambda p, c=codec: kafka_python_produce(p, c)))
        jobs.append((f"librdkafka-produce-{name}.pcap", lambda p, c=codec: confluent_produce(p, c)))
    jobs.append(("kafka-python-group-rebalance.pcap", kafka_python_group))
    jobs.append(("librdkafka-group-rebalance.pcap", confluent_group))
    for name, job in jobs:
        path = args.out / name
        job(path)
        size = os.path.getsize(path)
        print(f"{name:40s} {size:8d} bytes")
        if size >= 300_000:
            print(f"  warning: {name} is over 300 KB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
