"""The mock broker's budgets against hostile clients (docs/reliability.md, findings F1-F8).

Each test rebuilds one abuse scenario at a scale that runs in a second or two and asserts on what the
budget promises -- response bytes, bytes held, connections refused, requests answered -- never on
wall-clock time.  benchmarks/abuse.py runs the same scenarios at full scale and prints RSS and latency.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from broker_client import SocketClient, first_partition, metadata_request, produce_request
from kproto import ErrorCode
from kproto.broker.append import DecompressionBudget, has_compressed_entries, prepare_append
from kproto.broker.memory_budget import ByteBudget
from kproto.capture.conversation import Exchange, decode_capture
from kproto.messages import FetchRequest
from kproto.records import encode_message_set
from kproto.testing import MockBroker

MiB = 1024 * 1024


def _fill(broker: MockBroker, topic: str, size: int) -> None:
    """Produce about ``size`` bytes of uncompressed messages to partition 0."""
    value = b"v" * 10_000
    with SocketClient((broker.host, broker.port)) as client:
        for _ in range(max(size // 10_000 // 50, 1)):
            records = encode_message_set([(None, value)] * 50)
            assert first_partition(client.request(produce_request(topic, 0, records), 1)).error_code == 0


# ------------------------------------------------------------------------------------------------ F1 Fetch


def test_fetch_naming_one_partition_many_times_is_answered_once() -> None:
    with MockBroker(topics={"big": 1}) as broker:
        _fill(broker, "big", 2 * MiB)
        T = FetchRequest.FetchTopic
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            topics=[
                T(
                    topic="big",
                    partitions=[
                        T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=4 * MiB) for _ in range(100)
                    ],
                )
            ],
        )
        with SocketClient((broker.host, broker.port)) as client:
            response = client.request(request, 1)
        parts = [p for t in response.responses for p in t.partitions]
        assert len(parts) == 1
        assert len(parts[0].records.raw) <= 4 * MiB


def test_fetch_response_stays_within_fetch_max_bytes_across_partitions() -> None:
    with MockBroker(topics={"a": 1, "b": 1, "c": 1}, fetch_max_bytes=1 * MiB) as broker:
        for topic in "abc":
            _fill(broker, topic, 1 * MiB)
        T = FetchRequest.FetchTopic
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            topics=[
                T(topic=t, partitions=[T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=8 * MiB)])
                for t in "abc"
            ],
        )
        with SocketClient((broker.host, broker.port)) as client:
            response = client.request(request, 1)
        sizes = [len(p.records.raw) for t in response.responses for p in t.partitions]
        assert sum(sizes) <= 1 * MiB
        assert sizes[0] > 0  # the budget is spent in request order


# ------------------------------------------------------------------------------------------------ F2 Metadata


def test_metadata_naming_one_topic_many_times_lists_it_once() -> None:
    with MockBroker(topics={"t": 3}) as broker, SocketClient((broker.host, broker.port)) as client:
        response = client.request(metadata_request(*(["t"] * 50_000)), 0)
        assert [t.name for t in response.topics] == ["t"]


def test_requests_other_than_produce_are_refused_past_max_request_bytes() -> None:
    with MockBroker(topics={"t": 1}, max_request_bytes=64 * 1024) as broker:
        with SocketClient((broker.host, broker.port)) as attacker:
            attacker.send(metadata_request(*(["t"] * 30_000)), 0)  # ~90 KB of topic names
            assert attacker.closed_by_peer()
        with SocketClient((broker.host, broker.port)) as client:
            big = encode_message_set([(None, bytes(200_000))])  # a Produce may still be large
            assert first_partition(client.request(produce_request("t", 0, big), 1)).error_code == 0
            assert client.request(metadata_request("t"), 0).topics[0].name == "t"


def test_auto_created_topics_are_capped() -> None:
    with MockBroker(max_topics=5) as broker, SocketClient((broker.host, broker.port)) as client:
        response = client.request(metadata_request(*[f"new{i}" for i in range(20)]), 0)
        codes = [t.error_code for t in response.topics]
        assert codes[:5] == [0] * 5
        assert set(codes[5:]) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert len(broker.topics()) == 5


# ------------------------------------------------------------------------------------------------ F5 Produce


def _gzip_bomb(uncompressed: int, messages: int = 1) -> bytes:
    """A gzip wrapper whose inner messages decompress to about ``uncompressed`` bytes of zeros."""
    return encode_message_set([(None, bytes(uncompressed // messages))] * messages, codec="gzip")


def test_produce_decompression_budget_covers_the_whole_request() -> None:
    budget = DecompressionBudget(3 * MiB)
    wrapper = _gzip_bomb(1 * MiB)
    assert has_compressed_entries(wrapper) and not has_compressed_entries(encode_message_set([(None, b"x")]))
    results = [prepare_append(wrapper, 0, budget=budget) for _ in range(5)]
    accepted = [r for r in results if not isinstance(r, ErrorCode)]
    assert len(accepted) == 2  # the third wrapper would cross 3 MiB
    assert all(r is ErrorCode.MESSAGE_TOO_LARGE for r in results[2:])
    assert budget.used <= 3 * MiB


def test_compressed_produce_beyond_the_budget_is_refused_and_others_are_served() -> None:
    with MockBroker(topics={"t": 4}, produce_decompression_budget=2 * MiB) as broker:
        from kproto.messages import ProduceRequest

        T = ProduceRequest.TopicProduceData
        request = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            topic_data=[
                T(
                    name="t",
                    partition_data=[T.PartitionProduceData(index=i, records=_gzip_bomb(1 * MiB)) for i in range(4)],
                )
            ],
        )
        with SocketClient((broker.host, broker.port)) as client:
            response = client.request(request, 1)
            codes = [p.error_code for t in response.responses for p in t.partition_responses]
            assert codes[:1] == [0]
            assert ErrorCode.MESSAGE_TOO_LARGE in codes
            assert broker.core.produce_decompressed_bytes <= 2 * MiB
            # Nothing partial was stored for the refused partitions.
            for index, code in enumerate(codes):
                assert (broker.high_watermark("t", index) > 0) == (code == 0)
            assert client.request(metadata_request("t"), 0).topics[0].error_code == 0


def test_compressed_appends_run_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # The compressed append is held on its worker thread until another client's Metadata request has
    # been answered.  Were appends run on the event loop, that answer could never come and the append
    # would give up waiting: the test fails instead of hanging.
    import kproto.broker.data_plane as data_plane

    other_answered = threading.Event()
    waited: list = []

    def held_prepare(*args: object, **kwargs: object) -> object:
        waited.append(other_answered.wait(20))
        return prepare_append(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(data_plane, "prepare_append", held_prepare)
    with MockBroker(topics={"t": 1}) as broker:
        results: list = []

        def producer() -> None:
            with SocketClient((broker.host, broker.port)) as client:
                results.append(first_partition(client.request(produce_request("t", 0, _gzip_bomb(MiB, 10)), 1)))

        thread = threading.Thread(target=producer)
        thread.start()
        with SocketClient((broker.host, broker.port)) as other:
            while not waited and thread.is_alive() and broker.request_counts().get((0, 1), 0) == 0:
                time.sleep(0.001)
            assert other.request(metadata_request("t"), 0).topics[0].error_code == 0
            other_answered.set()
        thread.join(30)
    assert waited == [True]
    assert results[0].error_code == 0


def _wait_until(condition: "object", timeout: float = 10.0) -> bool:
    """Poll ``condition()`` until it holds (the broker updates its counters on its own thread)."""
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# ------------------------------------------------------------------------------------------------ F6 connections


def test_connections_beyond_max_connections_are_refused_cleanly() -> None:
    with MockBroker(max_connections=3) as broker:
        clients = [SocketClient((broker.host, broker.port)) for _ in range(3)]
        try:
            for c in clients:
                c.request(metadata_request(), 0)
            extra = socket.create_connection((broker.host, broker.port), timeout=5)
            try:
                assert extra.recv(1) == b""
            except ConnectionResetError:
                pass
            extra.close()
            assert broker.server.connections_refused == 1
            assert clients[0].request(metadata_request(), 0) is not None  # the others are still served
        finally:
            for c in clients:
                c.close()


def test_accept_failures_are_summarised_not_logged_per_attempt(caplog: pytest.LogCaptureFixture) -> None:
    with MockBroker() as broker:
        server = broker.server
        loop = broker._loop
        assert loop is not None
        context = {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many open files")}
        done = threading.Event()

        def report() -> None:
            for _ in range(1000):
                loop.call_exception_handler(context)
            done.set()

        loop.call_soon_threadsafe(report)
        assert done.wait(10)
        assert server.rate_limited_log.occurrences == 1000
        assert server.rate_limited_log.lines == 1


# ------------------------------------------------------------------------------------------------ F7 buffers, timers


def test_byte_budget_reserves_in_order_and_never_deadlocks() -> None:
    import asyncio

    async def scenario() -> None:
        budget = ByteBudget(100)
        await budget.reserve(80)
        second = asyncio.ensure_future(budget.reserve(80))
        third = asyncio.ensure_future(budget.reserve(10))  # fits, but waits behind the second: no starvation
        await asyncio.sleep(0)
        assert not second.done() and not third.done()
        budget.release(80)
        await asyncio.sleep(0)
        assert second.done() and third.done()
        assert budget.used == 90 and budget.peak == 90 and budget.waits == 2
        alone = asyncio.ensure_future(budget.reserve(500))  # larger than the budget: granted once alone
        budget.release(90)
        await asyncio.sleep(0)
        assert alone.done() and budget.used == 500

    asyncio.run(scenario())


def test_partial_frames_of_many_clients_stay_within_the_buffer_budget() -> None:
    budget = 4 * MiB
    with MockBroker(max_buffered_bytes=budget, request_receive_timeout_ms=60_000) as broker:
        hogs = []
        for _ in range(10):
            sock = socket.create_connection((broker.host, broker.port))
            sock.setblocking(False)
            hogs.append(sock)
            sock.send(struct.pack(">i", 3 * MiB - 1))
        # Each hog pushes as much of its frame as the broker will take.
        chunk = bytes(64 * 1024)
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            for sock in hogs:
                try:
                    sock.send(chunk)
                except (BlockingIOError, OSError):
                    pass
        used = broker.server.budget
        assert used.peak <= budget + 3 * MiB  # a request larger than what is left waits for the whole budget
        assert used.waits >= 1
        with SocketClient((broker.host, broker.port)) as client:  # a well-behaved client is still served
            assert client.request(metadata_request(), 0).brokers
        for sock in hogs:
            sock.close()


def test_slow_and_idle_connections_are_closed_by_their_timers() -> None:
    with MockBroker(request_receive_timeout_ms=200, connections_max_idle_ms=300) as broker:
        slow = socket.create_connection((broker.host, broker.port), timeout=10)
        slow.sendall(struct.pack(">i", 100) + b"\x00\x03")  # a request that never finishes arriving
        idle = socket.create_connection((broker.host, broker.port), timeout=10)
        assert slow.recv(1) == b""
        assert idle.recv(1) == b""
        assert broker.server.connections_timed_out == 2
        slow.close()
        idle.close()
        assert _wait_until(lambda: broker.server.budget.used == 0)


# ------------------------------------------------------------------------------------------------ F8 --record


def test_recording_streams_to_disk_while_the_broker_runs(tmp_path: Path) -> None:
    path = tmp_path / "traffic.pcap"
    with MockBroker(topics={"t": 1}, record_pcap=path) as broker:
        with SocketClient((broker.host, broker.port)) as client:
            client.request(metadata_request("t"), 0)
            client.request(produce_request("t", 0, encode_message_set([(b"k", b"v")])), 1)
        size_while_running = path.stat().st_size
        records = list(decode_capture(path.read_bytes(), ports=[broker.port]))
    assert size_while_running > 24  # written as it happened, not at exit
    exchanges = [r for r in records if isinstance(r, Exchange)]
    assert [e.api_key for e in exchanges] == [3, 0]


def test_recording_path_is_checked_at_start_and_symlinks_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        with MockBroker(record_pcap=tmp_path / "missing-dir" / "x.pcap"):
            pass
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "link.pcap"
    link.symlink_to(target)
    with pytest.raises(OSError):
        with MockBroker(record_pcap=link):
            pass
    assert target.read_text() == "keep me"
    with MockBroker(record_pcap=link, record_follow_symlinks=True):
        pass
    assert target.read_bytes()[:4] == struct.pack("<I", 0xA1B2C3D4)


def test_recording_holds_no_traffic_in_memory(tmp_path: Path) -> None:
    with MockBroker(topics={"t": 1}, record_pcap=tmp_path / "r.pcap") as broker:
        with SocketClient((broker.host, broker.port)) as client:
            value = os.urandom(100_000)
            for _ in range(20):
                client.request(produce_request("t", 0, encode_message_set([(None, value)])), 1)
        recorder = broker.recorder
        assert recorder is not None
        assert not any(isinstance(v, (bytes, bytearray, list)) and len(v) > 1000 for v in vars(recorder).values())
        assert recorder.packets > 20 * 100_000 // 1460


def test_cli_broker_refuses_an_unwritable_record_path(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("kproto")),
            "broker",
            "--port",
            "0",
            "--record",
            str(tmp_path / "no" / "such" / "dir.pcap"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "listening" not in result.stdout
    assert "No such file" in result.stderr
