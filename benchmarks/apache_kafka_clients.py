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
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import kproto
from kproto.client import Consumer, Producer
from kproto.testing import jars
from kproto.testing.apache_kafka import ApacheKafka

KAFKA = "4.1.1"
ACKS = "all"
JAVA_BENCH = Path(__file__).parent / "java" / "ClientBench.java"
GO_BENCH = Path(__file__).parent / "go"
CLIENTS = ("kproto", "aiokafka", "kafka-python", "confluent-kafka", "java", "franz-go")
# The targets the README states for kproto against the real broker (ratios of medians of one run).
TARGETS = {("produce", "aiokafka"): 3.0, ("consume", "aiokafka"): 3.0,
           ("produce", "confluent-kafka"): 0.8, ("consume", "confluent-kafka"): 1.2}


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
            consumer = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": "bench",
                                                 "enable.auto.commit": False, "log_level": 2})
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
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = uptime()
    workdir = tempfile.mkdtemp(prefix="kproto-client-bench-")
    java = Probe(workdir)
    produce_s: Dict[str, List[float]] = {c: [] for c in CLIENTS}
    consume_s: Dict[str, List[float]] = {c: [] for c in CLIENTS}
    pipe_s: Dict[str, List[float]] = {f"{p}p-{f}": [] for p in (1, 3) for f in (1, 5)}
    latency: Dict[str, Dict[str, float]] = {}
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
            for partitions in (1, 3):
                for in_flight in (1, 5):
                    topic = f"pipe-{partitions}-{in_flight}-{r}"
                    kafka.create_topic(topic, partitions)
                    pipe_s[f"{partitions}p-{in_flight}"].append(
                        produce("kproto", servers, topic, args.pipeline_records, value, java,
                                max_in_flight=in_flight, batch_size=2000))
        for client in CLIENTS:
            topic = f"latency-{client}"
            kafka.create_topic(topic, 1)
            ms = latencies(client, servers, topic, args.latency_records, value, java)
            latency[client] = {"p50": percentile(ms, 0.50), "p99": percentile(ms, 0.99), "n": len(ms)}
    produce_rate = {c: n / statistics.median(s) for c, s in produce_s.items()}
    consume_rate = {c: n / statistics.median(s) for c, s in consume_s.items()}
    pipe_rate = {k: args.pipeline_records / statistics.median(s) for k, s in pipe_s.items()}
    ratios = {f"{kind} kproto/{other}": (rates["kproto"] / rates[other])
              for kind, rates in (("produce", produce_rate), ("consume", consume_rate))
              for other in CLIENTS if other != "kproto"}
    targets = [{"what": f"{kind} kproto/{other}", "target": target, "measured": ratios[f"{kind} kproto/{other}"],
                "met": ratios[f"{kind} kproto/{other}"] >= target} for (kind, other), target in TARGETS.items()]
    result = {
        "benchmark": "client", "broker": "apache-kafka", "command": " ".join([sys.executable, *sys.argv]),
        "date": started.isoformat(timespec="seconds"), "environment": environment(),
        "uptime_before": load_before, "uptime_after": uptime(), "loadavg_after": list(os.getloadavg()),
        "records": n, "value_size": args.value_size, "rounds": rounds, "acks": ACKS,
        "settings": "every client at its defaults but acks; nothing pinned (versions negotiated)",
        "produce_records_per_s": produce_rate, "consume_records_per_s": consume_rate,
        "produce_seconds": produce_s, "consume_seconds": consume_s,
        "produce_latency_ms": latency, "latency_records": args.latency_records,
        "pipelining": {"records": args.pipeline_records, "batch_size": 2000, "records_per_s": pipe_rate,
                       "ratio_5_over_1": {f"{p} partition(s)": pipe_rate[f"{p}p-5"] / pipe_rate[f"{p}p-1"]
                                          for p in (1, 3)}},
        "ratios": ratios, "targets": targets,
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    print(f"{n} records of {args.value_size} B, acks={ACKS}, Apache Kafka {KAFKA} (one node), clients at their "
          f"defaults; records/s, median of {rounds} interleaved rounds; latency: {args.latency_records} sends "
          f"one at a time")
    print(f"{'client':16} {'produce':>10} {'consume':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for client in CLIENTS:
        print(f"{client:16} {produce_rate[client]:10.0f} {consume_rate[client]:10.0f} "
              f"{latency[client]['p50']:8.2f} {latency[client]['p99']:8.2f}")
    for t in targets:
        print(f"{t['what']:32} {t['measured']:5.2f}x  (target {t['target']}x: {'met' if t['met'] else 'MISSED'})")
    for p in (1, 3):
        print(f"kproto pipelining, {p} partition(s), {args.pipeline_records} records, 2000 B batches: "
              f"1 in flight {pipe_rate[f'{p}p-1']:.0f}/s, 5 in flight {pipe_rate[f'{p}p-5']:.0f}/s, "
              f"ratio {pipe_rate[f'{p}p-5'] / pipe_rate[f'{p}p-1']:.2f}x")
    print("uptime before:", load_before)
    print("uptime after: ", result["uptime_after"])
