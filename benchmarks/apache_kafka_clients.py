"""``benchmarks/client.py --broker apache-kafka``: the clients against a real Apache Kafka (see client.py).

Every Python client runs in this process, one at a time; the Java client in a JVM of its own
(``benchmarks/java/ClientBench.java``) and franz-go in a program of its own (``benchmarks/go``), each
timed inside its process from the creation of its producer or consumer, as the Python figures are timed
from theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import kproto
from kproto.client import Consumer, Producer
from kproto.testing import jars
from kproto.testing.apache_kafka import ApacheKafka
from results import Run

KAFKA = "4.1.1"
ACKS = "all"
JAVA_BENCH = Path(__file__).parent / "java" / "ClientBench.java"
GO_BENCH = Path(__file__).parent / "go"
CLIENTS = ("kproto", "aiokafka", "kafka-python", "confluent-kafka", "java", "franz-go")
# The targets the README states for kproto against the real broker (ratios of medians of one run).
TARGETS = {
    ("produce", "aiokafka"): 3.0,
    ("consume", "aiokafka"): 3.0,
    ("produce", "confluent-kafka"): 0.8,
    ("consume", "confluent-kafka"): 1.2,
}


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Probe:
    """The compiled clients' probes, one process per call printing one JSON line: the Java client
    (``java -cp`` kafka-clients' jars, the single-file ``ClientBench.java``) and franz-go (``benchmarks/go``,
    built once into a temporary directory; ``go build`` fetches its modules through the Go proxy)."""

    def __init__(self, workdir: str) -> None:
        self.java = jars.require_tool("java")
        self.classpath = jars.classpath([f"org.apache.kafka:kafka-clients:{KAFKA}"])
        go = shutil.which("go")
        if go is None:
            raise SystemExit("franz-go's probe needs Go on PATH (https://go.dev/dl/)")
        self.franz_go = os.path.join(workdir, "franz-go-bench")
        subprocess.run([go, "build", "-o", self.franz_go, "."], cwd=GO_BENCH, check=True, timeout=600)

    def run(self, client: str, *args: object) -> Dict[str, Any]:
        if client == "java":
            cmd = [self.java, "-cp", self.classpath, str(JAVA_BENCH), *map(str, args)]
        else:
            cmd = [self.franz_go, *map(str, args)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{client} {args[0]} failed (exit {done.returncode}): {done.stderr[-2000:]}")
        result: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


# ---------------------------------------------------------------- produce N records, acks=all


def produce(client: str, servers: str, topic: str, n: int, value: bytes, java: Probe, **kproto_options: Any) -> float:
    """Seconds to create a producer, write ``n`` records and have them all acknowledged."""
    if client == "java":
        return float(java.run(client, "produce", servers, topic, n, len(value), ACKS)["seconds"])
    if client == "franz-go":  # acks=all is its default
        return float(java.run(client, "produce", servers, topic, n, len(value))["seconds"])
    if client == "kproto":

        async def kproto_main() -> None:
            async with Producer(servers, acks=ACKS, **kproto_options) as producer:
                for _ in range(n):
                    await producer.send(topic, value)
                await producer.flush()

        return timed(lambda: asyncio.run(kproto_main()))
    if client == "aiokafka":
        import aiokafka

        async def aiokafka_main() -> None:
            producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, acks=ACKS)
            await producer.start()
            try:
                futures = [await producer.send(topic, value) for _ in range(n)]
                await producer.flush()
                await asyncio.gather(*futures)
            finally:
                await producer.stop()

        return timed(lambda: asyncio.run(aiokafka_main()))
    if client == "kafka-python":
        from kafka import KafkaProducer

        def kafka_python_main() -> None:
            producer = KafkaProducer(bootstrap_servers=servers, acks=ACKS)
            for _ in range(n):
                producer.send(topic, value)
            producer.flush()
            producer.close()

        return timed(kafka_python_main)
    if client == "confluent-kafka":
        import confluent_kafka

        def confluent_main() -> None:
            producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": ACKS, "log_level": 2})
            for _ in range(n):
                while True:
                    try:
                        producer.produce(topic, value)
                        break
                    except BufferError:
                        producer.poll(0.001)
            if producer.flush(120) != 0:
                raise RuntimeError("confluent-kafka: records left unacknowledged")

        return timed(confluent_main)
    raise ValueError(client)


# ---------------------------------------------------------------- consume N records of partition 0


def consume(client: str, servers: str, topic: str, n: int, java: Probe) -> float:
    """Seconds to create a consumer and read the first ``n`` records of partition 0, without a group."""
    if client in ("java", "franz-go"):
        return float(java.run(client, "consume", servers, topic, n)["seconds"])
    if client == "kproto":

        async def kproto_main() -> None:
            async with Consumer(servers, auto_offset_reset="earliest") as consumer:
                consumer.assign([(topic, 0)])
                got = 0
                while got < n:
                    got += len(await consumer.poll(5000, max_records=10000))

        return timed(lambda: asyncio.run(kproto_main()))
    if client == "aiokafka":
        import aiokafka

        async def aiokafka_main() -> None:
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

        return timed(lambda: asyncio.run(aiokafka_main()))
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        def kafka_python_main() -> None:
            consumer = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest")
            consumer.assign([TopicPartition(topic, 0)])
            got = 0
            while got < n:
                got += sum(len(records) for records in consumer.poll(5000, max_records=10000).values())
            consumer.close()

        return timed(kafka_python_main)
    if client == "confluent-kafka":
        import confluent_kafka

        def confluent_main() -> None:
            # librdkafka wants a group id even to assign partitions by hand; nothing is committed
            consumer = confluent_kafka.Consumer(
                {"bootstrap.servers": servers, "group.id": "bench", "enable.auto.commit": False, "log_level": 2}
            )
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
            got = 0
            while got < n:
                # consume() waits for as many messages as asked: never ask for more than remain
                got += sum(1 for m in consumer.consume(min(10000, n - got), 5.0) if m.error() is None)
            consumer.close()

        return timed(confluent_main)
    raise ValueError(client)


# ---------------------------------------------------------------- latency: one send at a time, acks=all


def latencies(client: str, servers: str, topic: str, n: int, value: bytes, java: Probe) -> List[float]:
    """Milliseconds from send to acknowledgement of ``n`` records, each awaited before the next."""
    if client in ("java", "franz-go"):
        return [float(x) for x in java.run(client, "latency", servers, topic, n, len(value))["latencies_ms"]]
    out: List[float] = []
    if client == "kproto":

        async def kproto_main() -> None:
            async with Producer(servers, acks=ACKS) as producer:
                for _ in range(n):
                    start = time.perf_counter()
                    await (await producer.send(topic, value))
                    out.append((time.perf_counter() - start) * 1e3)

        asyncio.run(kproto_main())
    elif client == "aiokafka":
        import aiokafka

        async def aiokafka_main() -> None:
            producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, acks=ACKS)
            await producer.start()
            try:
                for _ in range(n):
                    start = time.perf_counter()
                    await (await producer.send(topic, value))
                    out.append((time.perf_counter() - start) * 1e3)
            finally:
                await producer.stop()

        asyncio.run(aiokafka_main())
    elif client == "kafka-python":
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=servers, acks=ACKS)
        for _ in range(n):
            start = time.perf_counter()
            producer.send(topic, value).get(30)
            out.append((time.perf_counter() - start) * 1e3)
        producer.close()
    elif client == "confluent-kafka":
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": ACKS, "log_level": 2})
        for _ in range(n):
            start = time.perf_counter()
            producer.produce(topic, value)
            if producer.flush(30) != 0:
                raise RuntimeError("confluent-kafka: a record was not acknowledged")
            out.append((time.perf_counter() - start) * 1e3)
    else:
        raise ValueError(client)
    return out


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def environment() -> Dict[str, Any]:
    import confluent_kafka

    from kproto._backend import BACKEND

    version = importlib.metadata.version

    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "kproto": kproto.__version__,
        "kproto_backend": BACKEND,
        "aiokafka": version("aiokafka"),
        "kafka-python": version("kafka-python"),
        "confluent-kafka": version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka-clients (Java)": KAFKA,
        "franz-go": _go_module_version("github.com/twmb/franz-go"),
        "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "broker": f"Apache Kafka {KAFKA}, one KRaft node (broker and controller), loopback",
    }


def _go_module_version(module: str) -> Optional[str]:
    """The version ``benchmarks/go/go.mod`` requires of ``module``."""
    for line in (GO_BENCH / "go.mod").read_text().splitlines():
        words = line.replace("require", "").split()
        if len(words) == 2 and words[0] == module:
            return words[1]
    return None


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_apache_kafka(args: argparse.Namespace) -> None:
    n, value, rounds = args.records, b"x" * args.value_size, args.rounds
    record = Run("client-apache-kafka")
    load_before = uptime()
    workdir = tempfile.mkdtemp(prefix="kproto-client-bench-")
    java = Probe(workdir)
    produce_s: Dict[str, List[float]] = {c: [] for c in CLIENTS}
    consume_s: Dict[str, List[float]] = {c: [] for c in CLIENTS}
    pipe_s: Dict[Tuple[int, int], List[float]] = {(p, f): [] for p in (1, 3) for f in (1, 5)}
    latency: Dict[str, List[float]] = {}
    with ApacheKafka(version=KAFKA) as kafka, contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, workdir, True)
        servers = kafka.bootstrap_servers
        for r in range(rounds):
            for client in CLIENTS:
                topic = f"produce-{client}-{r}"
                kafka.create_topic(topic, 1)
                produce_s[client].append(produce(client, servers, topic, n, value, java))
            for client in CLIENTS:  # everyone reads what kproto wrote this round
                consume_s[client].append(consume(client, servers, f"produce-kproto-{r}", n, java))
            for partitions, in_flight in pipe_s:
                topic = f"pipe-{partitions}-{in_flight}-{r}"
                kafka.create_topic(topic, partitions)
                pipe_s[partitions, in_flight].append(
                    produce(
                        "kproto",
                        servers,
                        topic,
                        args.pipeline_records,
                        value,
                        java,
                        max_in_flight=in_flight,
                        batch_size=2000,
                    )
                )
        for client in CLIENTS:
            topic = f"latency-{client}"
            kafka.create_topic(topic, 1)
            latency[client] = latencies(client, servers, topic, args.latency_records, value, java)
    produce_rate = {c: n / statistics.median(s) for c, s in produce_s.items()}
    consume_rate = {c: n / statistics.median(s) for c, s in consume_s.items()}
    pipe_rate = {k: args.pipeline_records / statistics.median(s) for k, s in pipe_s.items()}
    record.settings = {
        "broker": f"Apache Kafka {KAFKA}, one KRaft node, loopback",
        "records": n,
        "value_size": args.value_size,
        "rounds": rounds,
        "acks": ACKS,
        "latency_records": args.latency_records,
        "pipeline_records": args.pipeline_records,
        "uptime_before": load_before,
        "uptime_after": uptime(),
        "versions": environment(),
    }
    for client in CLIENTS:
        record.add(
            client=client,
            acks=ACKS,
            **{
                "produce records/s": produce_rate[client],
                "consume records/s": consume_rate[client],
                "produce p50 ms": percentile(latency[client], 0.50),
                "produce p99 ms": percentile(latency[client], 0.99),
                "produce s (rounds)": " ".join(f"{x:.3f}" for x in produce_s[client]),
                "consume s (rounds)": " ".join(f"{x:.3f}" for x in consume_s[client]),
            },
        )
    record.note(
        f"{n:,} records of {args.value_size} B; every client at its defaults but acks={ACKS}, nothing "
        f"pinned; records/s are medians of {rounds} interleaved rounds, each client timed from the "
        f"creation of its producer or consumer; consumers read partition 0 from the start without a "
        f"group; latency: {args.latency_records:,} sends, each awaited before the next."
    )
    record.note(
        "The Java client runs in a fresh JVM per measurement (its figures include the JIT's warm-up); "
        "its p50 near 5 ms is its linger.ms default."
    )
    for (kind, other), target in TARGETS.items():
        rates = produce_rate if kind == "produce" else consume_rate
        ratio = rates["kproto"] / rates[other]
        record.note(
            f"{kind}: kproto {ratio:.2f}× {other} (target {target}×: {'met' if ratio >= target else 'missed'})."
        )
    for partitions in (1, 3):
        one, five = pipe_rate[partitions, 1], pipe_rate[partitions, 5]
        record.note(
            f"kproto's producer, {partitions} partition(s), {args.pipeline_records:,} records in 2000 B "
            f"batches: 1 request in flight {one:,.0f}/s, 5 in flight {five:,.0f}/s ({five / one:.2f}×)."
        )
    print(
        f"{n} records of {args.value_size} B, acks={ACKS}, Apache Kafka {KAFKA} (one node), clients at their "
        f"defaults; records/s, median of {rounds} interleaved rounds; latency: {args.latency_records} sends "
        f"one at a time"
    )
    print(f"{'client':16} {'produce':>10} {'consume':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for row in record.rows:
        print(
            f"{row['client']:16} {row['produce records/s']:10.0f} {row['consume records/s']:10.0f} "
            f"{row['produce p50 ms']:8.2f} {row['produce p99 ms']:8.2f}"
        )
    for note in record.notes[2:]:
        print(note)
    print("uptime before:", load_before)
    print("uptime after: ", record.settings["uptime_after"])
    record.save(args.json_out)
