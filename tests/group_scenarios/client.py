"""One consumer of a scripted group scenario, run as its own process so that it can be SIGKILLed.

    python client.py LIB BOOTSTRAP GROUP CLIENT_ID EVENTS_FILE [--options JSON]

``LIB`` is kafka-python, confluent-kafka or aiokafka, each at its defaults except what ``--options``
names (session timeout, max poll interval, group instance id, a pause).  The consumer writes its own
account of the group to EVENTS_FILE, one JSON object a line, flushed as it goes: ``assigned`` and
``revoked`` (partitions, from the client's rebalance callbacks), ``consumed`` (the partitions a poll
returned records of), ``pause``/``resume`` (it stopped/started polling on purpose) and ``closed``.
It stops when the file ``EVENTS_FILE + ".stop"`` appears, closing cleanly (a LeaveGroup for dynamic
members).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any, Callable, Dict, Iterable, List

TOPIC = "scenario"


class Journal:
    def __init__(self, path: str) -> None:
        self.out = open(path, "a", encoding="utf-8")

    def __call__(self, event: str, **facts: Any) -> None:
        self.out.write(json.dumps({"t": time.time(), "event": event, **facts}) + "\n")
        self.out.flush()


def paused(opts: Dict[str, Any], note: Journal, assigned: Callable[[], bool], state: Dict[str, Any]) -> None:
    """Stop polling once, ``pause_s`` seconds, ``pause_after_s`` after the first assignment."""
    if "pause_s" not in opts or state.get("paused") or not assigned():
        return
    state.setdefault("assigned_at", time.monotonic())
    if time.monotonic() - state["assigned_at"] >= opts.get("pause_after_s", 0):
        state["paused"] = True
        note("pause")
        time.sleep(opts["pause_s"])
        note("resume")


def kafka_python(args: argparse.Namespace, opts: Dict[str, Any], note: Journal) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            note("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
            note("assigned", partitions=sorted(tp.partition for tp in assigned))

    extra: Dict[str, Any] = {}
    if "session_ms" in opts:
        extra["session_timeout_ms"] = opts["session_ms"]
        extra["heartbeat_interval_ms"] = opts["session_ms"] // 3
    if "max_poll_ms" in opts:
        extra["max_poll_interval_ms"] = opts["max_poll_ms"]
    if "instance_id" in opts:
        extra["group_instance_id"] = opts["instance_id"]
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.client_id,
        auto_offset_reset="earliest",
        **extra,
    )
    consumer.subscribe([TOPIC], listener=Listener())
    state: Dict[str, Any] = {}
    while not os.path.exists(args.events + ".stop"):
        batches = consumer.poll(100)
        if batches:
            note("consumed", partitions=sorted(tp.partition for tp in batches))
        paused(opts, note, lambda: bool(consumer.assignment()), state)
    consumer.close()
    note("closed")


def confluent(args: argparse.Namespace, opts: Dict[str, Any], note: Journal) -> None:
    import confluent_kafka

    config: Dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
        "log_level": 2,
    }
    if "session_ms" in opts:
        config["session.timeout.ms"] = opts["session_ms"]
        config["heartbeat.interval.ms"] = opts["session_ms"] // 3
    if "max_poll_ms" in opts:
        config["max.poll.interval.ms"] = opts["max_poll_ms"]
    if "instance_id" in opts:
        config["group.instance.id"] = opts["instance_id"]
    consumer = confluent_kafka.Consumer(config)
    owned: List[int] = []

    def on_assign(c: Any, parts: List[Any]) -> None:
        owned[:] = sorted(tp.partition for tp in parts)
        note("assigned", partitions=list(owned))

    def on_revoke(c: Any, parts: List[Any]) -> None:
        owned[:] = []
        note("revoked", partitions=sorted(tp.partition for tp in parts))

    consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    state: Dict[str, Any] = {}
    while not os.path.exists(args.events + ".stop"):
        messages = consumer.consume(100, 0.1)
        got = sorted({m.partition() for m in messages if m.error() is None})
        if got:
            note("consumed", partitions=got)
        paused(opts, note, lambda: bool(owned), state)
    consumer.close()
    note("closed")


def aiokafka(args: argparse.Namespace, opts: Dict[str, Any], note: Journal) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            note("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
            note("assigned", partitions=sorted(tp.partition for tp in assigned))

    extra: Dict[str, Any] = {}
    if "session_ms" in opts:
        extra["session_timeout_ms"] = opts["session_ms"]
        extra["heartbeat_interval_ms"] = opts["session_ms"] // 3
    if "max_poll_ms" in opts:
        extra["max_poll_interval_ms"] = opts["max_poll_ms"]

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            client_id=args.client_id,
            auto_offset_reset="earliest",
            **extra,
        )
        consumer.subscribe([TOPIC], listener=Listener())
        await consumer.start()
        while not os.path.exists(args.events + ".stop"):
            batches = await consumer.getmany(timeout_ms=100)
            if batches:
                note("consumed", partitions=sorted(tp.partition for tp in batches))
        await consumer.stop()
        note("closed")

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("lib", "bootstrap", "group", "client_id", "events"):
        parser.add_argument(name)
    parser.add_argument("--options", default="{}")
    args = parser.parse_args()
    note = Journal(args.events)
    note("start", pid=os.getpid())
    runner = {"kafka-python": kafka_python, "confluent-kafka": confluent, "aiokafka": aiokafka}[args.lib]
    runner(args, json.loads(args.options), note)


if __name__ == "__main__":
    main()
