"""kproto.client.Consumer against the mock broker (0.9 versions): group behaviour and fetching.

Session timeouts are lowered with the broker's ``min_session_timeout_ms``; every wait is bounded by a
generous deadline and nothing asserts on elapsed time, only on the order of events.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import textwrap
from typing import Awaitable, Callable, Dict, List, Set, Tuple, TypeVar

import pytest

from kproto import ErrorCode
from kproto.client import Consumer, Producer, sync
from kproto.records import encode_message_set
from kproto.testing import MockBroker

T = TypeVar("T")
RELEASE = "0.9.0"
FAST = {"session_timeout_ms": 1500, "heartbeat_interval_ms": 100, "broker_release": RELEASE}
TP = Tuple[str, int]


def run(main: Callable[[], Awaitable[T]], timeout: float = 90) -> T:
    return asyncio.run(asyncio.wait_for(main(), timeout))


async def produce(broker: MockBroker, topic: str, count: int, start: int = 0, **options: object) -> None:
    async with Producer(broker.bootstrap_servers, broker_release=RELEASE, linger_ms=1, **options) as producer:
        for i in range(start, start + count):
            await producer.send(topic, b"%d" % i, key=b"%d" % i)
        await producer.flush()


async def until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class Recorder:
    """A rebalance listener that logs what it is told, in order, into a shared event list."""

    def __init__(self, name: str, events: List[Tuple[str, str, List[TP]]]) -> None:
        self.name, self.events = name, events

    def on_partitions_revoked(self, partitions: List[TP]) -> None:
        self.events.append((self.name, "revoked", partitions))

    async def on_partitions_assigned(self, partitions: List[TP]) -> None:
        self.events.append((self.name, "assigned", partitions))


def test_group_consume_commit_seek_pause_and_skip_inside_a_compressed_batch() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 2}, min_session_timeout_ms=100) as broker:
            await produce(broker, "t", 400, compression="gzip")
            async with Consumer(
                broker.bootstrap_servers,
                group_id="g",
                topics=["t"],
                auto_commit=False,
                auto_offset_reset="earliest",
                **FAST,
            ) as consumer:
                seen: Dict[int, List[int]] = {0: [], 1: []}
                while sum(map(len, seen.values())) < 400:
                    for r in await consumer.poll(5000):
                        seen[r.partition].append(r.offset)
                assert all(offsets == list(range(len(offsets))) for offsets in seen.values())
                await consumer.commit({("t", 0): 7, ("t", 1): 3})
                assert broker.committed("g") == {("t", 0): (7, ""), ("t", 1): (3, "")}
                # seek into the middle of a compressed message set: the records below are skipped
                consumer.seek(("t", 0), 5)
                consumer.pause(("t", 1))
                first = await consumer.poll(5000, max_records=3)
                assert [(r.partition, r.offset) for r in first] == [(0, 5), (0, 6), (0, 7)]
                consumer.seek(("t", 1), 0)
                rest = await consumer.poll(200)
                assert all(r.partition == 0 for r in rest)
                consumer.resume(("t", 1))
                back = await consumer.poll(5000)
                assert any(r.partition == 1 and r.offset == 0 for r in back)
            # a new member of the group starts from the committed offsets
            async with Consumer(broker.bootstrap_servers, group_id="g", topics=["t"], **FAST) as again:
                records = await again.poll(5000)
                assert min(r.offset for r in records if r.partition == 0) == 7 or all(r.partition == 1 for r in records)
                assert again.position(("t", 1)) is not None and again.position(("t", 1)) >= 3

    run(main)


def test_compressed_wrapper_below_the_fetch_position_without_group() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            # one gzip wrapper holding offsets 0..9, written as it is
            wrapped = encode_message_set([(None, b"%d" % i) for i in range(10)], codec="gzip")
            from kproto.messages import ProduceRequest
            from kproto.records import RecordSet
            from kproto.client import Connection

            conn = await Connection.open(broker.host, broker.port, broker_release=RELEASE)
            Topic = ProduceRequest.TopicProduceData
            await conn.request(
                ProduceRequest(
                    acks=1,
                    timeout_ms=1000,
                    topic_data=[
                        Topic(
                            name="t", partition_data=[Topic.PartitionProduceData(index=0, records=RecordSet(wrapped))]
                        )
                    ],
                )
            )
            await conn.close()
            async with Consumer(broker.bootstrap_servers) as consumer:  # versions from ApiVersions
                consumer.assign([("t", 0)])
                consumer.seek(("t", 0), 6)
                records = await consumer.poll(5000)
                assert [r.value for r in records] == [b"6", b"7", b"8", b"9"]

    run(main)


def test_fetch_from_a_former_leader_refreshes_metadata_and_loses_nothing() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            await produce(broker, "t", 200)
            metadata_before = broker.request_counts().get((3, 0), 0)
            broker.inject("Fetch", error=ErrorCode.NOT_LEADER_FOR_PARTITION, times=3)
            async with Consumer(
                broker.bootstrap_servers, broker_release=RELEASE, auto_offset_reset="earliest", retry_backoff_ms=10
            ) as consumer:
                consumer.assign([("t", 0), ("t", 1)])
                got: List[Tuple[int, int]] = []
                while len(got) < 200:
                    records = await consumer.poll(5000)
                    assert records, "no records after the leader errors"
                    got.extend((r.partition, r.offset) for r in records)
            assert len(set(got)) == 200
            assert broker.request_counts()[(3, 0)] >= metadata_before + 3  # one refresh per NOT_LEADER answer

    run(main)


def test_a_slow_member_delays_the_new_generation_until_it_polls() -> None:
    async def main() -> None:
        events: List[Tuple[str, str, List[TP]]] = []
        async with MockBroker(topics={"t": 4}, min_session_timeout_ms=100) as broker:
            slow_options = dict(FAST, session_timeout_ms=20000)
            a = Consumer(
                broker.bootstrap_servers, group_id="g", topics=["t"], listener=Recorder("a", events), **slow_options
            )
            await a.start()
            await until(lambda: len(a.assignment()) == 4, "a to own all four partitions")
            b = Consumer(
                broker.bootstrap_servers, group_id="g", topics=["t"], listener=Recorder("b", events), **slow_options
            )
            await b.start()
            # a heartbeats (its own task) but does not poll: the coordinator holds b's JoinGroup
            await until(lambda: a._parked is not None, "a to learn of the rebalance")
            for _ in range(10):
                await asyncio.sleep(0.05)
                assert not any(who == "b" and what == "assigned" for who, what, _ in events)
            events.append(("a", "polls", []))
            await a.poll(100)
            await until(lambda: any(e[:2] == ("b", "assigned") for e in events), "b's assignment")
            order = [e[:2] for e in events]
            polled = order.index(("a", "polls"))
            assert ("b", "assigned") not in order[:polled]
            assert ("a", "revoked") in order[polled:]
            assert order.index(("a", "revoked"), polled) < order.index(("b", "assigned"))
            assert sorted(a.assignment() + b.assignment()) == [("t", p) for p in range(4)]
            await b.close()
            await a.close()

    run(main)


def test_auto_commit_before_rejoin_processes_nothing_twice_when_a_third_member_joins() -> None:
    async def main() -> None:
        total = 3000
        async with MockBroker(topics={"t": 6}, min_session_timeout_ms=100) as broker:
            processed: List[Tuple[int, int]] = []
            by_member: Dict[str, int] = {"a": 0, "b": 0, "c": 0}
            stop = asyncio.Event()

            async def member(name: str) -> None:
                async with Consumer(
                    broker.bootstrap_servers,
                    group_id="g",
                    topics=["t"],
                    auto_commit=True,
                    auto_commit_interval_ms=60000,
                    auto_offset_reset="earliest",
                    **FAST,
                ) as consumer:
                    while not stop.is_set():
                        for r in await consumer.poll(100, max_records=50):
                            processed.append((r.partition, r.offset))
                            by_member[name] += 1
                        await asyncio.sleep(0.002)  # processing time: the stream stays in mid-flow

            async def trickle() -> None:  # records keep arriving while the group rebalances
                for chunk in range(30):
                    await produce(broker, "t", total // 30, start=chunk * (total // 30))
                    await asyncio.sleep(0.03)

            producing = asyncio.ensure_future(trickle())
            first = [asyncio.ensure_future(member("a")), asyncio.ensure_future(member("b"))]
            await until(lambda: len(processed) > 300, "the first two members to consume")
            third = asyncio.ensure_future(member("c"))
            await until(
                lambda: (
                    broker.group("g") is not None and len(broker.group("g").members) == 3 and len(processed) >= total
                ),
                "all records after the third member joined",
            )
            await producing
            stop.set()
            await asyncio.gather(*first, third)
            assert len(processed) == len(set(processed)) == total
            assert by_member["c"] > 0 and not producing.exception()

    run(main, 120)


def test_a_member_that_stops_polling_leaves_after_max_poll_interval_and_rejoins_when_it_polls() -> None:
    # modern versions (JoinGroup v1+ carries the interval); sessions of 30 s, so only the poll interval
    # can move the partitions within the waits below
    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            events: List[Tuple[str, str, List[TP]]] = []
            options = dict(
                group_id="g",
                topics=["t"],
                session_timeout_ms=30000,
                heartbeat_interval_ms=200,
                max_poll_interval_ms=800,
            )
            a = Consumer(broker.bootstrap_servers, listener=Recorder("a", events), **options)  # type: ignore[arg-type]
            b = Consumer(broker.bootstrap_servers, **options)  # type: ignore[arg-type]
            await a.start()
            await b.start()

            async def poll_until(members: List[Consumer], predicate: Callable[[], bool], what: str) -> None:
                for _ in range(200):
                    if predicate():
                        return
                    await asyncio.gather(*(m.poll(100) for m in members))
                raise AssertionError(f"timed out waiting for {what}")

            try:
                await poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 1, "a split")
                member_a = a.member.member_id  # type: ignore[union-attr]
                await poll_until([b], lambda: len(b.assignment()) == 2, "b to take a's partition")  # a is idle
                assert a.member.state.name == "LEFT" and a.assignment() == []  # type: ignore[union-attr]
                assert member_a not in broker.group("g").members  # type: ignore[union-attr]  # it left
                assert events[-1][:2] == ("a", "revoked")
                assert await a.poll(0) == []  # rejoining, not stable yet: nothing returned
                await poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 1, "a to rejoin")
                assert a.member.member_id != member_a  # type: ignore[union-attr]  # a new member id
            finally:
                await a.close()
                await b.close()

    run(main)


KILLED_MEMBER = textwrap.dedent("""
    import asyncio, sys
    from kproto.client import Consumer

    async def main():
        consumer = Consumer(sys.argv[1], group_id="g", topics=["t"], broker_release="0.9.0",
                            session_timeout_ms=1000, heartbeat_interval_ms=100)
        await consumer.start()
        while True:
            await consumer.poll(200)
            if consumer.assignment():
                print("assigned", flush=True)

    asyncio.run(main())
""")


def test_a_sigkilled_member_loses_its_partitions_after_the_session_timeout() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 4}, min_session_timeout_ms=100) as broker:
            a = Consumer(broker.bootstrap_servers, group_id="g", topics=["t"], **FAST)
            await a.start()
            await a.poll(2000)
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                KILLED_MEMBER,
                broker.bootstrap_servers,
                stdout=asyncio.subprocess.PIPE,
                env=dict(os.environ),
            )
            try:
                assert child.stdout is not None
                while True:  # a must poll so that it rejoins and the child gets partitions
                    await a.poll(50)
                    try:
                        line = await asyncio.wait_for(child.stdout.readline(), 0.05)
                    except asyncio.TimeoutError:
                        continue
                    if line.startswith(b"assigned"):
                        break
                    assert line, "the child member exited"
                await until(
                    lambda: broker.group("g") is not None and len(broker.group("g").members) == 2, "two members"
                )
                owned_before = set(a.assignment())
                assert 0 < len(owned_before) < 4
            finally:
                child.send_signal(signal.SIGKILL)
                await child.wait()
            for _ in range(3000):
                await a.poll(20)
                if len(a.assignment()) == 4:
                    break
            assert sorted(a.assignment()) == [("t", p) for p in range(4)]
            assert len(broker.group("g").members) == 1
            await a.close()

    run(main)


def test_sync_consumer_close_ends_the_fetch_it_has_out(caplog: pytest.LogCaptureFixture) -> None:
    """A Fetch the broker holds (nothing to read) is still out when close() runs: close() must end it
    before the loop thread stops, or the loop is closed with the task pending and asyncio reports "Task
    was destroyed but it is pending!" once the consumer is collected."""
    with MockBroker(topics={"t": 1}) as broker:
        consumer = sync.Consumer(broker.bootstrap_servers, broker_release=RELEASE, fetch_max_wait_ms=5000)
        consumer.assign([("t", 0)])
        assert consumer.poll(300) == []
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            consumer.close()
            del consumer
            gc.collect()
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]


def test_sync_consumer() -> None:
    with MockBroker(topics={"t": 1}, min_session_timeout_ms=100) as broker:
        with sync.Producer(broker.bootstrap_servers, broker_release=RELEASE) as producer:
            for i in range(20):
                producer.send("t", b"%d" % i)
        seen: Set[bytes] = set()
        with sync.Consumer(
            broker.bootstrap_servers, group_id="s", topics=["t"], auto_offset_reset="earliest", **FAST
        ) as consumer:
            for _ in range(100):
                seen.update(r.value for r in consumer.poll(1000) if r.value is not None)
                if len(seen) == 20:
                    break
            consumer.commit()
        assert seen == {b"%d" % i for i in range(20)}
        assert broker.committed("s") == {("t", 0): (20, "")}
