"""kproto.client through failures: every call ends within its documented bound (docs/client.md).

Two kinds of peer: a broker in a process of its own -- ``kproto broker``, or Apache Kafka 4.1.1's JVM
(:class:`kproto.testing.ApacheKafka`), the same scenarios with the same errors and bounds on both -- which
is frozen (SIGSTOP/SIGCONT), killed and restarted on the same port; and small scripted servers in the
test's own loop, each breaking the conversation in one way (accept and stay silent, answer ApiVersions then
never Metadata, answer with a 2**31 - 1 size prefix, answer with a correlation id never sent).  Bounds are
configured small so the tests are quick; every elapsed time is checked against its bound plus generous
slack only.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, TypeVar

import pytest

from kproto import KprotoError
from kproto.client import (
    BrokerConnectionError,
    ClientTimeoutError,
    Connection,
    Consumer,
    Producer,
    ProducerClosedError,
    RequestTimeoutError,
)
from kproto.client import sync
from kproto.framing import encode_response
from kproto.messages import ApiVersionsResponse, MetadataRequest
from kproto.testing import MockBroker
from kproto.testing.apache_kafka import ApacheKafka, missing_tools

T = TypeVar("T")
#: what every elapsed time may exceed its bound by (a loaded CI machine, a subprocess starting)
SLACK = 10.0
#: small bounds shared by the tests (ms); delivery must be at least linger + request timeout
FAST = dict(request_timeout_ms=800, delivery_timeout_ms=1500, max_block_ms=1500, retry_backoff_ms=50)

RUNNER = (
    "import argparse, sys\n"
    "from kproto.broker import cli_command\n"
    "parser = argparse.ArgumentParser()\n"
    "cli_command.add_arguments(parser)\n"
    "sys.exit(cli_command.run(parser.parse_args(sys.argv[1:])))\n"
)


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 120))


async def elapsed(awaitable: Awaitable[Any]) -> float:
    """Seconds until ``awaitable`` ends, however it ends."""
    start = time.monotonic()
    try:
        await awaitable
    except BaseException:  # noqa: BLE001 - the caller checks the outcome separately
        pass
    return time.monotonic() - start


def send_signal(pid: int, sig: int) -> None:
    """Signal a process; after SIGSTOP, return only once all its threads are stopped (the signal reaches
    a thread running on another CPU a moment later, long enough for a JVM to answer one more request)."""
    os.kill(pid, sig)
    deadline = time.monotonic() + 5
    while sig == signal.SIGSTOP and time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as stat:
                    states.append(stat.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that ended
                pass
        if all(state in "tT" for state in states):
            return
        time.sleep(0.01)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``kproto broker`` in its own process, on a fixed port so that a restart comes back at the same address."""

    #: a restart keeps the log (and the producer ids it knows); ``kproto broker`` starts empty
    keeps_log = False

    def __init__(self, *topics: str) -> None:
        self.port = free_port()
        self.topics = topics
        self.proc: Optional[subprocess.Popen[str]] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [sys.executable, "-c", RUNNER, "--host", "127.0.0.1", "--port", str(self.port)]
        for topic in self.topics:
            args += ["--topic", topic]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert re.fullmatch(rf"listening on 127\.0\.0\.1:{self.port}", line), line

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        send_signal(self.proc.pid, sig)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)


class KafkaNode:
    """One node of an :class:`ApacheKafka` run behind :class:`BrokerProcess`'s interface.  The JVM is shared
    by the module's tests (it takes seconds to start), so each use recreates its topics from scratch."""

    keeps_log = True

    def __init__(self, kafka: ApacheKafka, *topics: str) -> None:
        self.kafka = kafka
        self.node = kafka.node_ids[0]
        self.topics = {name: int(count) for name, count in (t.split(":") for t in topics)}

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap_servers

    def create_topics(self) -> None:
        if not self.kafka.running(self.node):  # the previous test killed it
            self.kafka.start_broker(self.node)
        self.kafka.delete_topics([t for t in self.topics if t in self.kafka.topics()])
        for name, partitions in self.topics.items():
            self.kafka.create_topic(name, partitions)

    def start(self) -> None:
        if not self.kafka.running(self.node):
            self.kafka.start_broker(self.node)
        # A restarted node answers before it leads its partitions again: a record sent then would spend its
        # delivery_timeout_ms waiting for a leader (``kproto broker`` leads them when it listens).
        for name, partitions in self.topics.items():
            self.kafka.wait_for_leaders(name, partitions)

    def signal(self, sig: int) -> None:
        send_signal(self.kafka.pid(self.node), sig)

    def kill(self) -> None:
        self.kafka.stop_broker(self.node, kill=True)

    def stop(self) -> None:
        if self.kafka.running(self.node):
            self.signal(signal.SIGCONT)


Peer = Any  # BrokerProcess or KafkaNode


@pytest.fixture(scope="module")
def apache_kafka() -> Iterator[ApacheKafka]:
    reason = missing_tools()
    if reason is not None:
        pytest.skip(f"Apache Kafka: {reason}")
    with ApacheKafka("4.1.1", heap="384m") as kafka:
        yield kafka


#: the engines a broker-process scenario runs on (the test takes ``broker_process`` indirectly)
ENGINES = [
    pytest.param("kproto", marks=pytest.mark.cli_process),
    pytest.param("apache-kafka", marks=[pytest.mark.real_clients, pytest.mark.apache_kafka]),
]


@pytest.fixture
def broker_process(request: pytest.FixtureRequest) -> Iterator[Callable[..., Peer]]:
    started: List[Peer] = []
    engine = getattr(request, "param", "kproto")

    def make(*topics: str) -> Peer:
        broker: Peer
        if engine == "apache-kafka":
            broker = KafkaNode(request.getfixturevalue("apache_kafka"), *topics)
            broker.create_topics()
        else:
            broker = BrokerProcess(*topics)
            broker.start()
        started.append(broker)
        return broker

    yield make
    for broker in started:
        broker.stop()


async def read_back(bootstrap: str, topic: str, last: bytes) -> List[bytes]:
    """The values in partition 0 of ``topic`` from the start of its log up to the record ``last``."""
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        values: List[bytes] = []
        deadline = time.monotonic() + 30
        while last not in values and time.monotonic() < deadline:
            values += [r.value for r in await consumer.poll(1000)]
        return values


# ---------------------------------------------------------------- scripted servers


class ScriptedServer:
    """A listener on loopback that breaks the conversation in one way (``mode``):

    * ``silent`` -- accepts and never answers;
    * ``metadata-silent`` -- answers ApiVersions (Produce, Metadata, ApiVersions at v0), never Metadata;
    * ``huge-frame`` -- answers ApiVersions, then a Metadata answer's size prefix is 2**31 - 1;
    * ``wrong-correlation`` -- answers ApiVersions, then a Metadata answer carries a correlation id never sent.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.requests: Dict[int, int] = {}  # api key -> how many came
        self.server: Optional[asyncio.AbstractServer] = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> "ScriptedServer":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                body = await reader.readexactly(size)
                api_key, _, correlation_id = struct.unpack(">hhi", body[:8])
                self.requests[api_key] = self.requests.get(api_key, 0) + 1
                if self.mode == "silent":
                    continue
                if api_key == 18:
                    K = ApiVersionsResponse.ApiVersion
                    answer = ApiVersionsResponse(
                        error_code=0, api_keys=[K(api_key=k, min_version=0, max_version=0) for k in (0, 3, 18)]
                    )
                    writer.write(encode_response(answer, 0, correlation_id))
                elif self.mode == "huge-frame":
                    writer.write(struct.pack(">ii", 2**31 - 1, correlation_id) + b"\0" * 64)
                elif self.mode == "wrong-correlation":
                    writer.write(struct.pack(">iii", 8, correlation_id + 1000, 0))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def test_start_against_a_silent_listener_fails_within_the_request_timeout() -> None:
    async def main() -> None:
        async with ScriptedServer("silent") as server:
            for make in (
                lambda: Producer(server.bootstrap, request_timeout_ms=500),
                lambda: Consumer(server.bootstrap, group_id="g", topics=["t"], request_timeout_ms=500),
            ):
                client = make()
                start = time.monotonic()
                with pytest.raises(RequestTimeoutError, match=r"did not answer ApiVersions v0 within 500 ms"):
                    await client.start()
                assert time.monotonic() - start < 0.5 + SLACK
            assert server.requests == {18: 2}
            # the sync facade raises the same error from its constructor (this loop is blocked meanwhile:
            # the connection waits in the listener's backlog, which is silence all the same)
            with pytest.raises(RequestTimeoutError):
                sync.Producer(server.bootstrap, request_timeout_ms=500)

    run(main)


@pytest.mark.parametrize("mode", ["metadata-silent", "huge-frame", "wrong-correlation"])
def test_records_fail_within_max_block_when_metadata_never_comes(mode: str) -> None:
    async def main() -> None:
        async with ScriptedServer(mode) as server:
            start = time.monotonic()
            async with Producer(server.bootstrap, **FAST) as producer:
                future = await producer.send("t", b"x")
                assert await elapsed(producer.flush()) < 1.5 + SLACK
                assert future.done()
                with pytest.raises(ClientTimeoutError, match=r"no metadata for topic 't' within 1500 ms"):
                    future.result()
            assert time.monotonic() - start < 1.5 + SLACK  # close() included
            assert server.requests[3] >= 1

    run(main)


def test_a_bad_answer_fails_the_request_with_a_typed_error() -> None:
    async def main() -> None:
        for mode in ("huge-frame", "wrong-correlation"):
            async with ScriptedServer(mode) as server:
                conn = await Connection.open("127.0.0.1", server.port, request_timeout=5.0)
                start = time.monotonic()
                with pytest.raises(BrokerConnectionError, match="broke the protocol") as info:
                    await conn.request(MetadataRequest(topics=[]))
                assert isinstance(info.value.__cause__, KprotoError)
                assert time.monotonic() - start < SLACK  # at once, not at the request timeout
                await conn.close()

    run(main)


def test_send_flush_and_close_keep_their_own_bounds_while_a_produce_is_slow() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            producer = Producer(
                broker.bootstrap_servers,
                max_buffered_records=1,
                max_block_ms=300,
                request_timeout_ms=20000,
                delivery_timeout_ms=30000,
            )
            await producer.start()
            broker.inject("Produce", delay=20.0)
            slow = await producer.send("t", b"slow")
            start = time.monotonic()
            with pytest.raises(ClientTimeoutError, match=r"no room within 300 ms \(max_block_ms\)"):
                await producer.send("t", b"no room")  # back-pressure: one record buffered already
            with pytest.raises(ClientTimeoutError, match=r"1 record\(s\) still unacknowledged after 0.2 s"):
                await producer.flush(timeout=0.2)
            await producer.close(timeout=0.2)
            with pytest.raises(ProducerClosedError, match=r"close\(\) timeout of 0.2 s passed"):
                slow.result()
            assert time.monotonic() - start < 0.7 + SLACK

    run(main)


# ---------------------------------------------------------------- seek
# (before the scenarios below, which leave Kafka's shared node killed: a restart costs seconds)


def _fill(bootstrap: str, count: int) -> None:
    with sync.Producer(bootstrap) as producer:
        for i in range(count):
            producer.send("f", b"%d" % i, partition=0)
        producer.flush(30)


@pytest.mark.parametrize("broker_process", ENGINES, indirect=True)
def test_sync_consumer_seek_before_and_after_the_first_poll(broker_process: Callable[..., Peer]) -> None:
    broker = broker_process("f:1")
    _fill(broker.bootstrap, 6)
    with sync.Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("f", 0)])
        consumer.seek(("f", 0), 3)
        assert [r.offset for r in consumer.poll(5000)] == [3, 4, 5]
        consumer.seek(("f", 0), 1)
        assert [r.offset for r in consumer.poll(5000)][:1] == [1]


def test_async_consumer_seek_while_the_reset_offset_is_looked_up() -> None:
    async def main() -> None:
        async with MockBroker(topics={"f": 1}) as broker:
            async with Producer(broker.bootstrap_servers) as producer:
                for i in range(6):
                    await producer.send("f", b"%d" % i)
            async with Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
                consumer.assign([("f", 0)])
                await asyncio.sleep(0)  # the position lookup (ListOffsets) is out
                consumer.seek(("f", 0), 4)
                assert [r.offset for r in await consumer.poll(5000)] == [4, 5]

    run(main)


# ---------------------------------------------------------------- a broker in its own process


@pytest.mark.parametrize("broker_process", ENGINES, indirect=True)
def test_idempotent_producer_through_freeze_kill_and_restart(broker_process: Callable[..., Peer]) -> None:
    broker = broker_process("f:1")

    async def main() -> None:
        producer = Producer(broker.bootstrap, acks="all", idempotence=True, **FAST)
        await producer.start()
        assert (await (await producer.send("f", b"r0"))).offset == 0

        # Frozen: the Produce goes out with a sequence, is not answered, and the record fails by
        # delivery_timeout_ms; flush() returns within the same bound.
        broker.signal(signal.SIGSTOP)
        frozen = await producer.send("f", b"r1")
        assert await elapsed(producer.flush()) < 1.5 + SLACK
        with pytest.raises(ClientTimeoutError, match=r"f\[0\] expired: .*delivery_timeout_ms is 1500"):
            frozen.result()
        broker.signal(signal.SIGCONT)
        # The failed batch's sequences left the producer and the broker out of step: the producer takes a new
        # producer id (or epoch) and later records are written, not refused as out of order.
        assert (await asyncio.wait_for(await producer.send("f", b"r2"), 1.5 + SLACK)).offset >= 1
        assert producer.producer_id_resets == 1

        # Killed: a record fails within delivery_timeout_ms.
        broker.kill()
        lost = await producer.send("f", b"r3")
        assert await elapsed(lost) < 1.5 + SLACK
        with pytest.raises(ClientTimeoutError, match="delivery_timeout_ms"):
            lost.result()
        # Restarted.  ``kproto broker`` comes back empty and knows no producer id any more: the producer starts
        # over under a new id.  Kafka's JVM takes seconds to come back, with its log and producer state.
        await asyncio.to_thread(broker.start)
        r4 = await asyncio.wait_for(await producer.send("f", b"r4"), 5 + SLACK)
        assert r4.offset >= 2 if broker.keeps_log else r4.offset == 0
        assert producer.producer_id_resets == 2
        # What the log holds: every acknowledged record once, the expired r3 never.  The frozen r1 waited in
        # the broker's socket buffer and may have been written once thawed (its answer came too late).
        values = await read_back(broker.bootstrap, "f", b"r4")
        assert values.count(b"r1") <= 1, values
        assert sorted(v for v in values if v != b"r1") == ([b"r0", b"r2", b"r4"] if broker.keeps_log else [b"r4"])

        # close(timeout) with the broker gone: returns by its timeout, unsent records fail.
        broker.kill()
        unsent = await producer.send("f", b"r5")
        assert await elapsed(producer.close(timeout=0.2)) < 0.2 + SLACK
        with pytest.raises(KprotoError, match="close"):
            unsent.result()

    run(main)


@pytest.mark.parametrize("broker_process", ENGINES, indirect=True)
def test_sync_producer_and_consumer_on_a_killed_broker(broker_process: Callable[..., Peer]) -> None:
    broker = broker_process("f:1")
    producer = sync.Producer(broker.bootstrap, **FAST)
    producer.send("f", b"first").result(30)
    consumer = sync.Consumer(
        broker.bootstrap,
        group_id="g",
        topics=["f"],
        auto_offset_reset="earliest",
        request_timeout_ms=800,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    try:
        deadline = time.monotonic() + 30
        while not consumer.poll(200) and time.monotonic() < deadline:
            pass
        consumer.commit()

        broker.signal(signal.SIGSTOP)  # frozen: commit fails by the request timeout
        start = time.monotonic()
        with pytest.raises(ClientTimeoutError):
            consumer.commit()
        assert time.monotonic() - start < 0.8 + SLACK
        assert consumer.poll(100) == []

        broker.kill()
        start = time.monotonic()
        future = producer.send("f", b"later")
        with pytest.raises(ClientTimeoutError, match="delivery_timeout_ms"):
            future.result(1.5 + SLACK)
        producer.flush(1.5 + SLACK)
        with pytest.raises(KprotoError):
            consumer.commit()
        assert time.monotonic() - start < 1.5 + 0.8 + SLACK
    finally:
        start = time.monotonic()
        producer.close()
        consumer.close()
        assert time.monotonic() - start < 2 * (0.8 + SLACK)
