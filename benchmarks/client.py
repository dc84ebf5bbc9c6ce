"""Client benchmark: produce and consume throughput of kproto.client vs aiokafka, kafka-python and
confluent-kafka (librdkafka) on one broker, and kproto's pipelining under an injected 2 ms broker latency.

Every client runs in a subprocess of its own (``--child``), against a broker in another subprocess (it
must not share the clients' GIL) started afresh for each run, so that the producing process's CPU time
(its rusage, user + system) is the client's alone.  Every client speaks the modern protocol, as
negotiated with ApiVersions (nothing pinned to an old release).  Produce rows, for values of
``--value-size`` bytes and of 1 KB:

* ``defaults``: every client at its own defaults (batching, linger), ``acks`` 1 and ``all`` as the row
  says;
* ``equalised`` and ``equalised+zstd``: linger 5 ms, batches of 1,000,000 B, acks=1, no compression or
  zstd (not 1 MiB: a 1 MiB batch and its header exceed the broker's default message limit, 1 MiB + 12 B).

kproto is measured three ways: ``await send()`` per record, ``send_nowait()`` per record, and
``send_batch()`` with 10,000 records a call.  A row gives records/s and CPU seconds per million records
of the producing process.  Latency: send→acknowledgement p50/p99 at a fixed offered load (half the
slowest client's default records/s at 100 B), acks=1, for ``--latency-seconds``.  Consume: every
client reads the records kproto wrote, from the beginning, without a group, ``--rounds`` times in turn
(the median).  Pipelining: kproto's producer with ``max_in_flight`` 1 and 5 against a broker whose every
Produce is answered 2 ms late, with small batches so that the latency dominates.  The broker is a
parameter (``--broker``): the mock broker by default.

    .venv/bin/python benchmarks/client.py [--records 100000] [--value-size 100] [--rounds 3]
    .venv/bin/python benchmarks/client.py --broker apache-kafka [--json-out PATH] [...]

``--broker apache-kafka`` runs the same comparison against a real Apache Kafka 4.1.1 (one KRaft node,
:class:`kproto.testing.ApacheKafka`) and adds the Java client (``benchmarks/java/ClientBench.java``, run
with ``java`` from jars resolved by :mod:`kproto.testing.jars`) and franz-go (``benchmarks/go``, built
with ``go build``).  Every client runs at its defaults
(nothing pinned: each negotiates its versions with ApiVersions) except ``acks``, which is ``all`` for
every producer, so that each write is acknowledged alike.  Rounds are interleaved: in each round every
client produces N records to a topic of its own, then every client reads the N records kproto wrote,
from the beginning, without a group; the figure is each client's median over the rounds.  Beside
throughput it measures produce latency at acks=all: ``--latency-records`` sends, each awaited before the
next (p50/p99 in ms, so a client's ``linger.ms`` default shows), and kproto's pipelining against the
real broker: ``max_in_flight`` 5 vs 1 with 2000 B batches on topics of 1 and 3 partitions.  The figures,
the targets and the load go to ``benchmarks/results/client-apache-kafka.json`` (``--json-out``), from
which ``benchmarks/render_docs.py`` writes docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from kproto.client import Consumer, Producer
from results import Run, add_json_out

BROKER = """
import sys, time
from kproto.testing import MockBroker
broker = MockBroker(topics={name: 1 for name in sys.argv[2].split(",")})
if sys.argv[1] != "0":
    broker.inject("Produce", delay=float(sys.argv[1]), times=None)
broker.start()
print("listening on", broker.bootstrap_servers, flush=True)
sys.stdin.read()
"""

TOPICS = ("bench", "kproto", "pipe1", "pipe5")
PRODUCERS = ("kproto send", "kproto send_nowait", "kproto send_batch", "aiokafka", "kafka-python", "confluent-kafka")
BATCH_CALL = 10_000  # records per send_batch() call
#: the equalised settings: linger 5 ms, batches of 1,000,000 B, acks=1 (compression per row)
LINGER_MS, BATCH_BYTES = 5, 1_000_000


def start_broker(delay: float) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", BROKER, str(delay), ",".join(TOPICS)],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()[-1]


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------- producers
#
# Each takes the settings of its row: ``acks`` (1 or "all"), and ``equalised`` (None: the client's
# defaults; else the compression codec or "none", with linger 5 ms and 1,000,000 B batches).  ``rate``: records
# per second to offer (None: as fast as the client takes them); ``latencies`` collects send→ack seconds.


def produce_kproto(
    servers: str,
    topic: str,
    n: int,
    value: bytes,
    acks: Any = 1,
    equalised: Optional[str] = None,
    mode: str = "send",
    rate: Optional[float] = None,
    latencies: Optional[List[float]] = None,
    **options: Any,
) -> None:
    if equalised is not None:
        options.update(
            linger_ms=LINGER_MS,
            batch_size=BATCH_BYTES,
            max_request_size=2 * BATCH_BYTES,
            compression=None if equalised == "none" else equalised,
        )

    async def main() -> None:
        async with Producer(servers, acks=acks, **options) as producer:
            if mode == "send_batch":
                values = [value] * BATCH_CALL
                outcomes = [
                    await producer.send_batch(topic, values[: min(BATCH_CALL, n - i)]) for i in range(0, n, BATCH_CALL)
                ]
                await producer.flush()
                for outcome in outcomes:
                    outcome.result()
                return
            start = time.perf_counter()
            futures = []
            for i in range(n):
                if rate is not None:
                    ahead = start + i / rate - time.perf_counter()
                    if ahead > 0.001:
                        await asyncio.sleep(ahead)
                if mode == "send_nowait":
                    try:
                        future = producer.send_nowait(topic, value)
                    except Exception:  # BufferFullError: wait as send() would
                        future = await producer.send(topic, value)
                else:
                    future = await producer.send(topic, value)
                if latencies is not None:
                    sent = time.perf_counter()
                    future.add_done_callback(lambda _, sent=sent: latencies.append(time.perf_counter() - sent))
                futures.append(future)
            await producer.flush()
            futures[-1].result()

    asyncio.run(main())


def produce_aiokafka(
    servers: str,
    topic: str,
    n: int,
    value: bytes,
    acks: Any = 1,
    equalised: Optional[str] = None,
    rate: Optional[float] = None,
    latencies: Optional[List[float]] = None,
) -> None:
    import aiokafka

    options: Dict[str, Any] = {}
    if equalised is not None:
        options.update(
            linger_ms=LINGER_MS,
            max_batch_size=BATCH_BYTES,
            max_request_size=2 * BATCH_BYTES,
            compression_type=None if equalised == "none" else equalised,
        )

    async def main() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, acks=acks, **options)
        await producer.start()
        try:
            start = time.perf_counter()
            futures = []
            for i in range(n):
                if rate is not None:
                    ahead = start + i / rate - time.perf_counter()
                    if ahead > 0.001:
                        await asyncio.sleep(ahead)
                future = await producer.send(topic, value)
                if latencies is not None:
                    sent = time.perf_counter()
                    future.add_done_callback(lambda _, sent=sent: latencies.append(time.perf_counter() - sent))
                futures.append(future)
            await producer.flush()
            outcomes = await asyncio.gather(*futures, return_exceptions=True)
            failed = [o for o in outcomes if isinstance(o, BaseException)]
            if failed:
                raise RuntimeError(f"{len(failed)} of {n} records failed ({failed[0]!r})")
        finally:
            await producer.stop()

    asyncio.run(main())


def produce_kafka_python(
    servers: str,
    topic: str,
    n: int,
    value: bytes,
    acks: Any = 1,
    equalised: Optional[str] = None,
    rate: Optional[float] = None,
    latencies: Optional[List[float]] = None,
) -> None:
    from kafka import KafkaProducer

    options: Dict[str, Any] = {}
    if equalised is not None:
        options.update(
            linger_ms=LINGER_MS,
            batch_size=BATCH_BYTES,
            max_request_size=2 * BATCH_BYTES,
            compression_type=None if equalised == "none" else equalised,
        )
    producer = KafkaProducer(bootstrap_servers=servers, acks=acks, **options)
    start = time.perf_counter()
    for i in range(n):
        if rate is not None:
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0.001:
                time.sleep(ahead)
        future = producer.send(topic, value)
        if latencies is not None:
            sent = time.perf_counter()
            future.add_callback(lambda _, sent=sent: latencies.append(time.perf_counter() - sent))
    producer.flush()
    producer.close()


def produce_confluent(
    servers: str,
    topic: str,
    n: int,
    value: bytes,
    acks: Any = 1,
    equalised: Optional[str] = None,
    rate: Optional[float] = None,
    latencies: Optional[List[float]] = None,
) -> None:
    import confluent_kafka

    config: Dict[str, Any] = {"bootstrap.servers": servers, "acks": acks, "log_level": 2}
    if equalised is not None:
        config.update(
            {
                "linger.ms": LINGER_MS,
                "batch.size": BATCH_BYTES,
                "message.max.bytes": 2 * BATCH_BYTES,
                "compression.type": equalised,
            }
        )
    producer = confluent_kafka.Producer(config)
    failed: List[Any] = []

    def delivered(error: Any, _message: Any, sent: Optional[float] = None) -> None:
        if error is not None:
            failed.append(error)
        elif latencies is not None and sent is not None:
            latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    for i in range(n):
        if rate is not None:
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0.001:
                producer.poll(0)
                time.sleep(ahead)
        callback = functools.partial(delivered, sent=time.perf_counter()) if latencies is not None else delivered
        while True:
            try:
                producer.produce(topic, value, on_delivery=callback)
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush(120)
    if failed:
        raise RuntimeError(f"{len(failed)} of {n} records failed ({failed[0]!r})")


def producer_runner(client: str) -> Callable[..., None]:
    """The produce function of one PRODUCERS entry (kproto's three calls are modes of one runner)."""
    if client.startswith("kproto "):
        return functools.partial(produce_kproto, mode=client.split()[1])
    return {"aiokafka": produce_aiokafka, "kafka-python": produce_kafka_python, "confluent-kafka": produce_confluent}[
        client
    ]


def run_child(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Run one producer in a subprocess of its own; its figures (elapsed seconds, CPU seconds, latencies)."""
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, timeout=900
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def child(spec: Dict[str, Any]) -> None:
    latencies: Optional[List[float]] = [] if spec.get("rate") else None
    run = producer_runner(spec["client"])
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    run(
        spec["servers"],
        spec["topic"],
        spec["n"],
        b"x" * spec["value_size"],
        acks=spec["acks"],
        equalised=spec.get("equalised"),
        rate=spec.get("rate"),
        latencies=latencies,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out: Dict[str, Any] = {"seconds": elapsed, "cpu": cpu}
    if latencies:
        latencies.sort()
        out["p50_ms"] = latencies[len(latencies) // 2] * 1000
        out["p99_ms"] = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(json.dumps(out), flush=True)


def produce_on_fresh_broker(spec: Dict[str, Any], delay: float = 0) -> Dict[str, Any]:
    """One producer run against a broker of its own (so that no run pays for another's stored log)."""
    proc, servers = start_broker(delay)
    try:
        return run_child(dict(spec, servers=servers, topic="bench"))
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------- consumers


def consume_kproto(servers: str, topic: str, n: int) -> None:
    async def main() -> None:
        async with Consumer(servers, auto_offset_reset="earliest") as consumer:
            consumer.assign([(topic, 0)])
            got = 0
            while got < n:
                got += len(await consumer.poll(5000, max_records=10000))

    asyncio.run(main())


def consume_aiokafka(servers: str, topic: str, n: int) -> None:
    import aiokafka

    async def main() -> None:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0)])
            got = 0
            while got < n:
                batches = await consumer.getmany(timeout_ms=5000, max_records=10000)
                got += sum(len(records) for records in batches.values())
        finally:
            await consumer.stop()

    asyncio.run(main())


def consume_kafka_python(servers: str, topic: str, n: int) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    got = 0
    while got < n:
        got += sum(len(records) for records in consumer.poll(5000, max_records=10000).values())
    consumer.close()


def consume_confluent(servers: str, topic: str, n: int) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": servers, "group.id": "bench", "enable.auto.commit": False, "log_level": 2}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = 0
    while got < n:
        got += sum(1 for m in consumer.consume(10000, 5.0) if m.error() is None)
    consumer.close()


CONSUMERS = {
    "kproto": consume_kproto,
    "aiokafka": consume_aiokafka,
    "kafka-python": consume_kafka_python,
    "confluent-kafka": consume_confluent,
}


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--broker",
        choices=("mock", "apache-kafka"),
        default="mock",
        help="kproto's mock broker in a subprocess (default) or a real Apache Kafka 4.1.1",
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--large-value-size", type=int, default=1000, help="the second value size of the produce rows")
    parser.add_argument("--pipeline-records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="consume rounds; each client's median is shown")
    parser.add_argument("--latency-seconds", type=float, default=3.0, help="mock: how long the latency runs offer load")
    parser.add_argument(
        "--latency-records",
        type=int,
        default=1000,
        help="apache-kafka: sends per client for the p50/p99 produce latency",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    add_json_out(parser)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    if args.broker == "apache-kafka":
        from apache_kafka_clients import run_apache_kafka  # benchmarks/ is the script's directory

        run_apache_kafka(args)
        return
    run_mock(args)


def run_mock(args: argparse.Namespace) -> None:
    n = args.records
    rows: List[Dict[str, Any]] = []
    cases: List[Tuple[str, Any, Optional[str], int]] = []  # (settings, acks, equalised, value size)
    for size in (args.value_size, args.large_value_size):
        cases += [
            ("defaults", 1, None, size),
            ("defaults", "all", None, size),
            ("equalised", 1, "none", size),
            ("equalised+zstd", 1, "zstd", size),
        ]
    for settings, acks, equalised, size in cases:
        for client in PRODUCERS:
            got = produce_on_fresh_broker(
                {"client": client, "n": n, "value_size": size, "acks": acks, "equalised": equalised}
            )
            row: Dict[str, Any] = {"client": client, "settings": settings, "acks": str(acks), "value B": size}
            if "error" in got:
                row["error"] = got["error"]
                print(f"{client} {settings} acks={acks} {size} B failed: {got['error']}")
            else:
                row["produce records/s"] = n / got["seconds"]
                row["CPU s per M records"] = got["cpu"] * 1e6 / n
            rows.append(row)
            print(row, flush=True)

    def rate(client: str, settings: str = "defaults", acks: str = "1", size: int = args.value_size) -> Optional[float]:
        for row in rows:
            if (row["client"], row["settings"], row["acks"], row["value B"]) == (client, settings, acks, size):
                return row.get("produce records/s")
        return None

    defaults = [r for c in PRODUCERS if (r := rate(c)) is not None]
    offered = 0.5 * min(defaults)
    latency: Dict[str, Dict[str, Any]] = {}
    for client in ("kproto send", "aiokafka", "kafka-python", "confluent-kafka"):
        m = max(int(offered * args.latency_seconds), 100)
        latency[client] = produce_on_fresh_broker(
            {"client": client, "n": m, "value_size": args.value_size, "acks": 1, "rate": offered}
        )
        print(client, "latency", latency[client], flush=True)

    proc, servers = start_broker(0)
    try:
        produce_kproto(servers, "kproto", n, b"x" * args.value_size)
        rates: Dict[str, List[float]] = {client: [] for client in CONSUMERS}
        for _ in range(args.rounds):
            for client, consume_one in CONSUMERS.items():
                rates[client].append(n / timed(functools.partial(consume_one, servers, "kproto", n)))
        consume = {client: statistics.median(figures) for client, figures in rates.items()}
    finally:
        proc.kill()
        proc.wait()

    proc, servers = start_broker(0.002)
    pipe: Dict[int, float] = {}
    try:
        m = args.pipeline_records
        for in_flight in (1, 5):
            pipe[in_flight] = m / timed(
                lambda: produce_kproto(
                    servers, f"pipe{in_flight}", m, b"x" * args.value_size, max_in_flight=in_flight, batch_size=2000
                )
            )
    finally:
        proc.kill()
        proc.wait()

    print(
        f"{n} records, records/s and CPU s per million records of the producing process (a fresh mock broker "
        f"per run); consume: median of {args.rounds} rounds"
    )
    for row in rows:
        print(
            f"{row['client']:20} {row['settings']:15} acks={row['acks']:4} {row['value B']:5} B "
            f"{row.get('produce records/s', float('nan')):10.0f}/s "
            f"{row.get('CPU s per M records', float('nan')):7.2f}"
        )
    for client, figures in latency.items():
        print(
            f"latency {client:20} p50 {figures.get('p50_ms', float('nan')):.2f} ms  "
            f"p99 {figures.get('p99_ms', float('nan')):.2f} ms at {offered:,.0f} records/s"
        )
    for client, figure in consume.items():
        print(f"consume {client:16} {figure:10.0f}/s")
    targets = []
    for acks in ("1", "all"):
        confluent = rate("confluent-kafka", acks=acks)
        for call, goal in (("send", 0.5), ("send_nowait", 0.8), ("send_batch", 1.5)):
            targets.append(
                (
                    f"kproto {call}() / confluent-kafka produce(), acks={acks}, 100 B",
                    goal,
                    _ratio(rate(f"kproto {call}", acks=acks), confluent),
                )
            )
    for settings, acks, _, size in cases:
        worst = min((x for c in PRODUCERS[:3] if (x := rate(c, settings, str(acks), size)) is not None), default=None)
        targets.append(
            (
                f"kproto slowest call / aiokafka, {settings} acks={acks} {size} B",
                3.0,
                _ratio(worst, rate("aiokafka", settings, str(acks), size)),
            )
        )
    targets.append(
        ("kproto consume / confluent-kafka consume", 1.2, _ratio(consume["kproto"], consume["confluent-kafka"]))
    )
    targets.append(("5 in flight / 1 in flight, 2 ms latency", 3.5, _ratio(pipe[5], pipe[1])))
    for name, goal, got in targets:
        verdict = "n/a" if got is None else ("met" if got >= goal else "missed")
        print(f"{name:60} {'–' if got is None else f'{got:.2f}'}x (target {goal}x) {verdict}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())

    record = Run("client")
    record.settings = {
        "broker": "kproto mock broker in a subprocess, a fresh one per produce run",
        "records": n,
        "value_sizes": [args.value_size, args.large_value_size],
        "rounds": args.rounds,
        "offered_load": offered,
        "pipeline_records": args.pipeline_records,
    }
    for row in rows:
        record.add(**row)
    for client, figures in latency.items():
        record.add(
            client=client,
            settings=f"latency at {offered:,.0f} records/s",
            acks="1",
            **{"value B": args.value_size, "p50 ms": figures.get("p50_ms"), "p99 ms": figures.get("p99_ms")},
        )
    for client, figure in consume.items():
        record.add(
            client=client, settings="consume, defaults", **{"value B": args.value_size, "consume records/s": figure}
        )
    record.note(
        f"{n:,} records a run; every client at the modern protocol. equalised: linger {LINGER_MS} ms, "
        f"{BATCH_BYTES:,} B batches, acks=1. CPU: user+system seconds of the producing process per "
        f"million records. kproto send_batch(): {BATCH_CALL:,} records a call."
    )
    for name, goal, got in targets:
        record.note(
            f"{name}: {'–' if got is None else f'{got:.2f}'}× (target {goal}×, "
            f"{'n/a' if got is None else 'met' if got >= goal else 'missed'})."
        )
    record.note(
        f"kproto's producer against a broker answering every Produce 2 ms late, {args.pipeline_records:,} "
        f"records in 2000 B batches: 1 request in flight {pipe[1]:,.0f}/s, 5 in flight {pipe[5]:,.0f}/s "
        f"({pipe[5] / pipe[1]:.2f}×)."
    )
    record.save(args.json_out)


if __name__ == "__main__":
    main()
