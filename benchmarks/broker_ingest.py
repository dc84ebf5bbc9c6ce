"""Broker ingest benchmark: messages per second one pipelined client gets appended by the mock broker.

The broker (``kproto.broker.run_broker``) runs in a subprocess, so it does not share the client's GIL;
the client is :class:`kproto.connection.ClientConnection` over a blocking socket, keeping ``--in-flight``
Produce requests outstanding, each one magic 2 record batch of ``--batch`` messages (encoded once: the
client's cost is framing only).  ``--idempotent`` gives every batch a producer id and a fresh sequence,
so the broker's sequence checks run too.  Prints requests/s, messages/s and ``uptime`` (the machine's
load, which the figure depends on).  Also times the append path alone, in process, without sockets.

    .venv/bin/python benchmarks/broker_ingest.py [--requests 5000] [--batch 100] [--in-flight 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from typing import Iterator, Tuple

from results import Run, add_json_out

from kproto.broker.config import BrokerConfig
from kproto.broker.data_plane import DataPlane
from kproto.broker.cluster import Cluster
from kproto.connection import ClientConnection, Response
from kproto.messages import InitProducerIdRequest, ProduceRequest
from kproto.records import encode_record_batch


def start_broker(profile: str = "") -> Tuple[subprocess.Popen, Tuple[str, int]]:
    code = "from kproto.broker import run_broker; run_broker('127.0.0.1', 0, topics=['bench:1'])"
    if profile:  # run_broker returns on SIGTERM, so the profile is written
        code = f"import cProfile; cProfile.run({code.split('; ', 1)[1]!r}, {profile!r})".replace(
            "cProfile.run(", "from kproto.broker import run_broker; cProfile.run("
        )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()  # "listening on HOST:PORT"
    host, port = line.rsplit(" ", 1)[1].rsplit(":", 1)
    return proc, (host, int(port))


def batches(count: int, size: int, value_size: int, producer_id: int) -> Iterator[bytes]:
    """Batches of ``size`` records; with a producer id, each with the next sequence (base offset 0)."""
    records = [(None, b"x" * value_size, 1_700_000_000_000 + i) for i in range(size)]
    for n in range(count):
        if producer_id < 0:
            yield encode_record_batch(records)
        else:
            yield encode_record_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=n * size)


def produce(records: bytes) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[T(name="bench", partition_data=[T.PartitionProduceData(index=0, records=records)])],
    )


def producer_id(address: Tuple[str, int]) -> int:
    with socket.create_connection(address) as sock:
        conn = ClientConnection()
        sock.sendall(conn.send(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1).frame)
        while True:
            for event in conn.receive_data(sock.recv(1 << 16)):
                assert isinstance(event, Response) and event.message.error_code == 0, event
                return int(event.message.producer_id)


def run(address: Tuple[str, int], frames: list, window: int, version: int) -> float:
    """Send every frame keeping up to ``window`` in flight; returns requests per second."""
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = ClientConnection(max_in_flight=window)
    requests = [produce(f) for f in frames]
    sent = done = 0
    start = time.perf_counter()
    while done < len(requests):
        while sent < len(requests) and conn.in_flight < window:
            sock.sendall(conn.send(requests[sent], version).frame)
            sent += 1
        for event in conn.receive_data(sock.recv(1 << 20)):
            assert isinstance(event, Response)
            code = event.message.responses[0].partition_responses[0].error_code
            assert code == 0, f"produce failed with error {code}"
            done += 1
    elapsed = time.perf_counter() - start
    sock.close()
    return len(requests) / elapsed


def append_only(count: int, size: int, value_size: int) -> float:
    """Appends per second through DataPlane._append's v3+ path, in process (no sockets, no codecs)."""
    config = BrokerConfig()
    plane = DataPlane(config, Cluster())
    log = plane.cluster.create_topic("bench", 1)
    frames = list(batches(count, size, value_size, -1))

    class Part:
        index = 0

        def __init__(self, raw: bytes) -> None:
            self.records = type("R", (), {"raw": raw})()

    from kproto.broker.append import DecompressionBudget

    async def go() -> float:
        budget = DecompressionBudget(1)
        request = produce(b"")  # acks=1, no transactional id: what _append reads of the request
        parts = [Part(f) for f in frames]
        start = time.perf_counter()
        for part in parts:
            code, _, _ = await plane._append(9, request, "bench", log, part, budget)
            assert code == 0
        return count / (time.perf_counter() - start)

    return asyncio.run(go())


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=100, help="messages per produce request")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=5)
    parser.add_argument("--version", type=int, default=9, help="Produce version (3-11)")
    parser.add_argument("--idempotent", action="store_true", help="sequence-numbered batches of one producer id")
    parser.add_argument("--profile", default="", help="write the broker's cProfile statistics to this file")
    add_json_out(parser)
    args = parser.parse_args()
    record = Run("broker_ingest")
    record.settings = {
        "batch": args.batch,
        "value_size": args.value_size,
        "in_flight": args.in_flight,
        "produce_version": args.version,
        "idempotent": args.idempotent,
    }

    appends = append_only(args.requests, args.batch, args.value_size)
    print(
        f"append path alone: {appends:9.0f} batches/s  {appends * args.batch:11.0f} msgs/s  "
        f"({1e6 / appends:.1f} us per {args.batch}-message batch)"
    )
    record.add(path="append path alone", messages_per_s=appends * args.batch, broker_us_per_request=1e6 / appends)
    proc, address = start_broker(args.profile)
    try:
        pid = producer_id(address) if args.idempotent else -1
        warm = list(batches(200, args.batch, args.value_size, -1))
        run(address, warm, args.in_flight, args.version)
        frames = list(batches(args.requests, args.batch, args.value_size, pid))
        cpu = cpu_seconds(proc.pid)
        rate = run(address, frames, args.in_flight, args.version)
        per_request = (cpu_seconds(proc.pid) - cpu) / args.requests
        print(
            f"over a socket, {args.in_flight} in flight, Produce v{args.version}"
            f"{', idempotent' if args.idempotent else ''}: {rate:9.0f} requests/s  "
            f"{rate * args.batch:11.0f} msgs/s"
        )
        # What the broker process spent per request: the rate it sustains with a core of its own.
        if per_request > 0:
            print(
                f"broker CPU per request: {per_request * 1e6:.0f} us  -> {args.batch / per_request:11.0f} msgs/s "
                f"per broker core"
            )
        record.add(
            path=f"over a socket, {args.in_flight} in flight",
            messages_per_s=rate * args.batch,
            broker_us_per_request=per_request * 1e6 if per_request > 0 else None,
        )
        record.save(args.json_out)
        print(f"uptime: {uptime()}")
    finally:
        proc.terminate()
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
