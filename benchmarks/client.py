"""Client benchmark: produce and consume throughput of kproto.client vs aiokafka, kafka-python and
confluent-kafka on one mock broker, and kproto's pipelining under an injected 2 ms broker latency.

The broker runs in a subprocess (it must not share the clients' GIL).  Every client writes N records of
``--value-size`` bytes (no key, acks=1, no compression) to a topic of its own, then reads N records of the
topic kproto wrote, from the beginning, without a group, ``--rounds`` times in turn (the figure is each
client's median: on a shared machine one run of one client can land on a busy moment).  kafka-python and
librdkafka speak 0.9 (the broker's record versions); kproto and aiokafka negotiate with ApiVersions.  aiokafka (0.14 ignores
``api_version``) picks its record format from the Metadata version: a broker that advertises Metadata v5+
but Produce only up to v2 gets magic 2 batches it refuses, and aiokafka's produce figure is then reported
as failed rather than measured.  The pipelining figure is
kproto's producer with ``max_in_flight`` 1 and 5 against a second broker whose every Produce is answered
2 ms late (a latency: pipelined requests wait it out together), with small batches so that the latency
dominates.  Prints figures, the ratios the README quotes, and ``uptime``.

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
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Tuple

from kproto.client import Consumer, Producer
from results import Run, add_json_out

BROKER = """
import sys, time
from kproto.testing import MockBroker
broker = MockBroker(topics={"kproto": 1, "aiokafka": 1, "kafka-python": 1, "confluent-kafka": 1, "pipe1": 1,
                            "pipe5": 1})
if sys.argv[1] != "0":
    broker.inject("Produce", delay=float(sys.argv[1]), times=None)
broker.start()
print("listening on", broker.bootstrap_servers, flush=True)
sys.stdin.read()
"""


def start_broker(delay: float) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", BROKER, str(delay)], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()[-1]


def timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------- producers


def produce_kproto(servers: str, topic: str, n: int, value: bytes, **options: object) -> None:
    async def main() -> None:
        async with Producer(servers, acks=1, **options) as producer:  # type: ignore[arg-type]
            for _ in range(n):
                await producer.send(topic, value)
            await producer.flush()
    asyncio.run(main())


def produce_aiokafka(servers: str, topic: str, n: int, value: bytes) -> None:
    import aiokafka

    async def main() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, acks=1)
        await producer.start()
        try:
            futures = [await producer.send(topic, value) for _ in range(n)]
            await producer.flush()
            outcomes = await asyncio.gather(*futures, return_exceptions=True)
            failed = [o for o in outcomes if isinstance(o, BaseException)]
            if failed:
                raise RuntimeError(f"{len(failed)} of {n} records failed ({failed[0]!r})")
        finally:
            await producer.stop()
    asyncio.run(main())


def produce_kafka_python(servers: str, topic: str, n: int, value: bytes) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, acks=1, api_version=(0, 9))
    for _ in range(n):
        producer.send(topic, value)
    producer.flush()
    producer.close()


def produce_confluent(servers: str, topic: str, n: int, value: bytes) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": 1, "api.version.request": False,
                                         "broker.version.fallback": "0.9.0.1", "log_level": 2})
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush(120)


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

    consumer = KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest", api_version=(0, 9))
    consumer.assign([TopicPartition(topic, 0)])
    got = 0
    while got < n:
        got += sum(len(records) for records in consumer.poll(5000, max_records=10000).values())
    consumer.close()


def consume_confluent(servers: str, topic: str, n: int) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": "bench",
                                         "api.version.request": False, "broker.version.fallback": "0.9.0.1",
                                         "enable.auto.commit": False, "log_level": 2})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = 0
    while got < n:
        got += sum(1 for m in consumer.consume(10000, 5.0) if m.error() is None)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=("mock", "apache-kafka"), default="mock",
                        help="kproto's mock broker in a subprocess (default) or a real Apache Kafka 4.1.1")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--pipeline-records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="consume rounds; each client's median is shown")
    parser.add_argument("--latency-records", type=int, default=1000,
                        help="apache-kafka: sends per client for the p50/p99 produce latency")
    add_json_out(parser)
    args = parser.parse_args()
    if args.broker == "apache-kafka":
        from apache_kafka_clients import run_apache_kafka  # benchmarks/ is the script's directory

        run_apache_kafka(args)
        return
    n, value = args.records, b"x" * args.value_size

    proc, servers = start_broker(0)
    produce: Dict[str, float] = {}
    consume: Dict[str, float] = {}
    try:
        produce["kproto"] = n / timed(lambda: produce_kproto(servers, "kproto", n, value))
        try:
            produce["aiokafka"] = n / timed(lambda: produce_aiokafka(servers, "aiokafka", n, value))
        except RuntimeError as exc:  # a broker whose Produce versions lag its Metadata ones (see the docstring)
            print("aiokafka produce failed:", exc)
        produce["kafka-python"] = n / timed(lambda: produce_kafka_python(servers, "kafka-python", n, value))
        produce["confluent-kafka"] = n / timed(lambda: produce_confluent(servers, "confluent-kafka", n, value))
        consumers = {"kproto": consume_kproto, "aiokafka": consume_aiokafka, "kafka-python": consume_kafka_python,
                     "confluent-kafka": consume_confluent}
        rates: Dict[str, List[float]] = {client: [] for client in consumers}
        for _ in range(args.rounds):
            for client, consume_one in consumers.items():
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
            pipe[in_flight] = m / timed(lambda: produce_kproto(servers, f"pipe{in_flight}", m, value,
                                                               max_in_flight=in_flight, batch_size=2000))
    finally:
        proc.kill()
        proc.wait()

    print(f"{n} records of {args.value_size} B, records/s (one mock broker in a subprocess; consume: median of "
          f"{args.rounds} rounds)")
    print(f"{'client':16} {'produce':>10} {'consume':>10}")
    for client in consume:
        print(f"{client:16} {produce.get(client, float('nan')):10.0f} {consume[client]:10.0f}")
    for other in ("aiokafka", "kafka-python", "confluent-kafka"):
        print(f"kproto / {other:16} produce {produce['kproto'] / produce.get(other, float('nan')):5.2f}x   "
              f"consume {consume['kproto'] / consume[other]:5.2f}x")
    print(f"pipelining, 2 ms broker latency, {args.pipeline_records} records, 2000 B batches: "
          f"1 in flight {pipe[1]:.0f}/s, 5 in flight {pipe[5]:.0f}/s, ratio {pipe[5] / pipe[1]:.2f}x")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())

    record = Run("client")
    record.settings = {"broker": "kproto mock broker in a subprocess", "records": n, "value_size": args.value_size,
                       "rounds": args.rounds, "acks": 1, "pipeline_records": args.pipeline_records}
    for client in consume:
        record.add(client=client, **{"produce records/s": produce.get(client), "consume records/s": consume[client]})
    record.note(f"{n:,} records of {args.value_size} B, acks=1; kafka-python and librdkafka pinned to 0.9; "
                f"produce once per client, consume the median of {args.rounds} alternated rounds.")
    record.note(f"kproto's producer against a broker answering every Produce 2 ms late, {args.pipeline_records:,} "
                f"records in 2000 B batches: 1 request in flight {pipe[1]:,.0f}/s, 5 in flight {pipe[5]:,.0f}/s "
                f"({pipe[5] / pipe[1]:.2f}×).")
    record.save(args.json_out)


if __name__ == "__main__":
    main()
