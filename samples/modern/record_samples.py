"""Record today's clients, at their defaults, against kproto's mock broker into small pcaps.

    .venv/bin/python samples/modern/record_samples.py [--out samples/modern]

No client is pinned to an old protocol: each negotiates its versions through ApiVersions as it would
against a current cluster.  Scenarios (one file each):

* ``<client>-produce-consume.pcap`` for kafka-python 3, confluent-kafka (librdkafka 2) and aiokafka: an
  idempotent producer (the default of all three today) writes 30 keyed messages with a record header to
  topic ``modern`` (2 partitions), then a group consumer (group ``modern-group``) reads them back and
  commits;
* ``<client>-sasl-plain.pcap``: the same producer logging in with SASL PLAIN (user ``alice``) first;
  ``kafka-python-sasl-plain-v0.pcap`` pins kafka-python to 0.10.0 so that the login uses SaslHandshake
  v0 and raw tokens;
* ``kafka-python-slow-member.pcap``: a rebalance held up by a slow member.  Two kafka-python consumers at
  their defaults share group ``slow-group``: ``slow-consumer`` joins alone, is assigned both partitions,
  then stops polling for 3 s (an application busy with a batch); ``fast-consumer`` joins meanwhile.
  kafka-python rejoins only from ``poll()``, so the coordinator holds the new generation until
  ``slow-consumer`` polls again: the capture shows a rebalance of about 3 s that waited for it;
* ``kip848-session-expiry.pcap``: both group protocols in one capture.  Group ``kip848-group`` uses the
  KIP-848 protocol (ConsumerGroupHeartbeat; the broker's session timeout lowered to 3 s): a kproto
  consumer (``kproto-consumer``, in a process of its own, committing every 2 s) owns the four partitions
  of ``orders`` while a producer writes to them; a confluent-kafka consumer (``librdkafka-consumer``,
  ``group.protocol=consumer``) joins and two partitions move to it; then the kproto consumer's process
  is stopped (SIGSTOP, as a stalled process: no leave, no heartbeat) a second after a commit, its
  session expires, its partitions move to the librdkafka consumer, which reads again what the stalled
  member had fetched past its last commit.  An admin client describes the group (ConsumerGroupDescribe)
  while the join is being reconciled and after the expiry.  Meanwhile a classic-protocol consumer
  (``classic-consumer``, group ``classic-group``) reads the same topic;
* ``tls-loopback.pcap``: a TLS 1.3 handshake and a few encrypted records between Python ``ssl`` sockets
  in memory (a self-signed certificate made with ``openssl`` at run time, server name
  ``kafka-1.example.test``), written as a connection to port 9092 -- what a TLS listener looks like in a
  capture.

The broker's port is written as 9092, so ``tshark -r FILE -d tcp.port==9092,kafka`` and ``kproto pcap FILE``
read them with their defaults.  Timing, client ids and nonces differ from run to run, so the files are
regenerated on purpose, not checked for drift; every file stays well under 1 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Tuple

import kproto
from kproto.pcap.writer import Side, TcpConversation, write_capture
from kproto.testing import MockBroker

TOPIC = "modern"
GROUP = "modern-group"
MESSAGES = 30
USERS = {"alice": "alice-secret"}
SERVER_NAME = "kafka-1.example.test"


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def recording_broker(path: Path, **options: object) -> MockBroker:
    return MockBroker(record_pcap=path, record_server_port=9092, topics={TOPIC: 2}, **options)


def message(i: int) -> Tuple[bytes, bytes, List[Tuple[str, bytes]]]:
    return f"key-{i % 5}".encode(), f"order {i}".encode(), [("trace-id", f"t-{i:04d}".encode())]


# --- kafka-python -----------------------------------------------------------------------------------------


def kafka_python(path: Path, sasl: bool = False, api_version: object = None) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    login = (
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": USERS["alice"],
        }
        if sasl
        else {}
    )
    pinned = {"api_version": api_version} if api_version is not None else {}
    with recording_broker(path, **({"sasl_plain_users": USERS} if sasl else {})) as broker:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, client_id="kafka-python-producer", **login, **pinned
        )
        for i in range(MESSAGES):
            key, value, headers = message(i)
            producer.send(TOPIC, key=key, value=value, headers=None if api_version else headers)
        producer.flush(30)
        producer.close()
        if sasl:
            return
        consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=broker.bootstrap_servers,
            group_id=GROUP,
            client_id="kafka-python-consumer",
            auto_offset_reset="earliest",
        )
        seen: List[object] = []
        wait_for(
            lambda: bool(seen.extend(r for rs in consumer.poll(200).values() for r in rs)) or len(seen) >= MESSAGES,
            "kafka-python to consume",
        )
        consumer.commit()
        consumer.close()


SLOW_GROUP = "slow-group"
SLOW_SECONDS = 3.0


def kafka_python_slow_member(path: Path) -> None:
    import threading

    from kafka import KafkaConsumer, KafkaProducer

    with recording_broker(path) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="kafka-python-producer")
        for i in range(MESSAGES):
            key, value, _ = message(i)
            producer.send(TOPIC, key=key, value=value)
        producer.flush(30)
        producer.close()

        def consumer(client_id: str) -> "KafkaConsumer":
            return KafkaConsumer(
                TOPIC,
                bootstrap_servers=broker.bootstrap_servers,
                group_id=SLOW_GROUP,
                client_id=client_id,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )

        slow = consumer("slow-consumer")
        wait_for(lambda: bool(slow.poll(200)) and len(slow.assignment()) == 2, "slow-consumer to own both partitions")
        # slow-consumer now "processes" for SLOW_SECONDS without polling; fast-consumer joins from its own
        # thread (its poll() blocks until the coordinator completes the new generation)
        fast = consumer("fast-consumer")
        fast_assigned = threading.Event()

        def run_fast() -> None:
            deadline = time.monotonic() + 60
            while not fast.assignment() and time.monotonic() < deadline:
                fast.poll(200)
            fast_assigned.set()

        thread = threading.Thread(target=run_fast)
        thread.start()
        time.sleep(SLOW_SECONDS)
        if fast_assigned.is_set():
            raise RuntimeError("the rebalance finished without waiting for slow-consumer")
        wait_for(lambda: bool(slow.poll(200) is not None) and len(slow.assignment()) == 1, "slow-consumer to rejoin")
        thread.join(60)
        if not fast.assignment():
            raise RuntimeError("fast-consumer was never assigned a partition")
        fast.close()
        slow.close()


# --- confluent-kafka (librdkafka) -------------------------------------------------------------------------


def librdkafka(path: Path, sasl: bool = False) -> None:
    import confluent_kafka

    login = (
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": USERS["alice"],
        }
        if sasl
        else {}
    )
    with recording_broker(path, **({"sasl_plain_users": USERS} if sasl else {})) as broker:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "client.id": "librdkafka-producer", "log_level": 2, **login}
        )
        for i in range(MESSAGES):
            key, value, headers = message(i)
            producer.produce(TOPIC, key=key, value=value, headers=headers)
        producer.flush(30)
        del producer
        if sasl:
            return
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": GROUP,
                "client.id": "librdkafka-consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 2,
            }
        )
        consumer.subscribe([TOPIC])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < MESSAGES and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen += 1
        if seen < MESSAGES:
            raise RuntimeError("librdkafka did not consume every message")
        consumer.commit(asynchronous=False)
        consumer.close()


# --- KIP-848 and classic groups in one capture --------------------------------------------------------------

KIP848_TOPIC = "orders"
KIP848_GROUP = "kip848-group"
KIP848_PARTITIONS = 4
KIP848_SESSION_MS = 3000

#: The stalling member: kproto's consumer in a process of its own (so that SIGSTOP freezes it, heartbeats
#: included), reporting its assignment and each commit on stdout.
_KPROTO_MEMBER = """
import json, sys, time
from kproto.client import sync
consumer = sync.Consumer(sys.argv[1], group_id=sys.argv[2], topics=[sys.argv[3]], client_id="kproto-consumer",
                         group_protocol="consumer", auto_commit=False, auto_offset_reset="earliest")
assigned, committed = None, time.monotonic()
while True:
    records = consumer.poll(200)
    if records and time.monotonic() - committed >= 2.0:
        consumer.commit()
        committed = time.monotonic()
        print(json.dumps({"committed": True}), flush=True)
    now = sorted(partition for _, partition in consumer.assignment())
    if now != assigned:
        assigned = now
        print(json.dumps({"assigned": now}), flush=True)
"""


class _KprotoMember:
    def __init__(self, bootstrap: str) -> None:
        import threading

        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        self.process = subprocess.Popen(
            [sys.executable, "-c", _KPROTO_MEMBER, bootstrap, KIP848_GROUP, KIP848_TOPIC],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.assigned: List[int] = []
        self.commits = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        import json

        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assigned = event["assigned"]
            else:
                self.commits += 1


def kip848_session_expiry(path: Path) -> None:
    import signal
    import threading

    import confluent_kafka
    import confluent_kafka.admin

    from kproto.group.consumer_group import ConsumerGroupConfig

    if confluent_kafka.libversion()[1] < 0x020C0000:
        raise RuntimeError(f"librdkafka {confluent_kafka.libversion()[0]} predates group.protocol=consumer (2.12)")
    config = ConsumerGroupConfig(session_timeout_ms=KIP848_SESSION_MS, heartbeat_interval_ms=1000)
    stop = threading.Event()
    with MockBroker(
        record_pcap=path, record_server_port=9092, topics={KIP848_TOPIC: KIP848_PARTITIONS}, consumer_group=config
    ) as broker:
        bootstrap = broker.bootstrap_servers

        def produce() -> None:
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": bootstrap, "client.id": "librdkafka-producer", "linger.ms": 50, "log_level": 2}
            )
            i = 0
            while not stop.is_set():
                producer.produce(KIP848_TOPIC, key=f"key-{i % 8}".encode(), value=f"order {i}".encode())
                producer.poll(0)
                i += 1
                time.sleep(0.1)
            producer.flush(30)

        def classic() -> None:
            consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "classic-group",
                    "client.id": "classic-consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "log_level": 2,
                }
            )
            consumer.subscribe([KIP848_TOPIC])
            deadline = time.monotonic() + 6
            while time.monotonic() < deadline:
                consumer.poll(0.2)
            consumer.commit(asynchronous=False)
            consumer.close()

        rdkafka_assigned: List[int] = []

        def rdkafka_member() -> None:
            consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": KIP848_GROUP,
                    "group.protocol": "consumer",
                    "client.id": "librdkafka-consumer",
                    "auto.offset.reset": "earliest",
                    "log_level": 2,
                }
            )
            consumer.subscribe([KIP848_TOPIC])
            while not stop.is_set():
                consumer.poll(0.1)
                rdkafka_assigned[:] = sorted(tp.partition for tp in consumer.assignment())
            consumer.close()

        admin = confluent_kafka.admin.AdminClient(
            {"bootstrap.servers": bootstrap, "client.id": "librdkafka-admin", "log_level": 2}
        )

        def describe() -> None:  # ConsumerGroupDescribe: the coordinator's own account of the group
            for future in admin.describe_consumer_groups([KIP848_GROUP]).values():
                future.result(30)

        threads = [threading.Thread(target=produce), threading.Thread(target=classic)]
        for thread in threads:
            thread.start()
        kproto_member = _KprotoMember(bootstrap)
        try:
            wait_for(
                lambda: len(kproto_member.assigned) == KIP848_PARTITIONS or kproto_member.process.poll() is not None,
                "kproto-consumer to own every partition",
            )
            if kproto_member.process.poll() is not None:
                raise RuntimeError("kproto-consumer's process ended")
            wait_for(lambda: kproto_member.commits >= 1, "kproto-consumer to commit")
            joiner = threading.Thread(target=rdkafka_member)
            joiner.start()
            threads.append(joiner)
            wait_for(lambda: len(broker.core.consumer_groups.members(KIP848_GROUP)) == 2, "the second member")
            describe()  # the kproto member has not yet heard of the new epoch: the joiner's target is ahead
            wait_for(lambda: len(rdkafka_assigned) == 2 and len(kproto_member.assigned) == 2, "the split")
            commits = kproto_member.commits
            wait_for(lambda: kproto_member.commits > commits + 1, "two more commits of kproto-consumer")
            time.sleep(1.0)
            kproto_member.process.send_signal(signal.SIGSTOP)
            wait_for(lambda: len(rdkafka_assigned) == KIP848_PARTITIONS, "librdkafka-consumer to own every partition")
            describe()
            time.sleep(1.5)
        finally:
            kproto_member.process.kill()
            kproto_member.process.wait(30)
            stop.set()
            for thread in threads:
                thread.join(60)


# --- aiokafka ---------------------------------------------------------------------------------------------


def aiokafka(path: Path) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run(bootstrap: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aiokafka-producer")
        await producer.start()
        try:
            for i in range(MESSAGES):
                key, value, headers = message(i)
                await producer.send(TOPIC, key=key, value=value, headers=headers)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=GROUP,
            client_id="aiokafka-consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            seen = 0
            while seen < MESSAGES:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=200), 60)
                seen += sum(len(rs) for rs in batches.values())
            await consumer.commit()
        finally:
            await consumer.stop()

    with recording_broker(path) as broker:
        asyncio.run(run(broker.bootstrap_servers))


# --- TLS ---------------------------------------------------------------------------------------------------


def tls_loopback(path: Path) -> None:
    """A TLS connection made in memory with Python's ssl module, written as TCP to port 9092."""
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "1",
                "-subj",
                f"/CN={SERVER_NAME}",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
        )
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(cert, key)
        client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client_ctx.load_verify_locations(cert)
    pipes = [ssl.MemoryBIO() for _ in range(4)]  # client in/out, server in/out
    client = client_ctx.wrap_bio(pipes[0], pipes[1], server_hostname=SERVER_NAME)
    server = server_ctx.wrap_bio(pipes[2], pipes[3], server_side=True)
    messages: List[Tuple[Side, bytes, float]] = []
    clock = time.time()

    def move() -> None:
        nonlocal clock
        for source, sink, side in ((pipes[1], pipes[2], Side.CLIENT), (pipes[3], pipes[0], Side.SERVER)):
            data = source.read()
            if data:
                clock += 0.001
                messages.append((side, data, clock))
                sink.write(data)

    for _ in range(10):  # the handshake: each side steps until both are done
        for end in (client, server):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        move()
    # An ApiVersions request and an answer, inside TLS: application-data records on the wire.
    api = kproto.APIS["ApiVersions"]
    client.write(
        kproto.encode_request(
            api.request(client_software_name="tls-sample", client_software_version="1"), 3, 1, "tls-client"
        )
    )
    move()
    server.read()
    server.write(kproto.encode_response(api.response(api_keys=[]), 3, 1))
    move()
    write_capture(path, [TcpConversation(("127.0.0.1", 50123), ("127.0.0.1", 9092), messages)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("only", nargs="*", help="file names to make (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs: List[Tuple[str, Callable[[Path], None]]] = [
        ("kafka-python-produce-consume.pcap", kafka_python),
        ("librdkafka-produce-consume.pcap", librdkafka),
        ("aiokafka-produce-consume.pcap", aiokafka),
        ("kafka-python-sasl-plain.pcap", lambda p: kafka_python(p, sasl=True)),
        ("kafka-python-sasl-plain-v0.pcap", lambda p: kafka_python(p, sasl=True, api_version=(0, 10, 0))),
        ("librdkafka-sasl-plain.pcap", lambda p: librdkafka(p, sasl=True)),
        ("kafka-python-slow-member.pcap", kafka_python_slow_member),
        ("kip848-session-expiry.pcap", kip848_session_expiry),
        ("tls-loopback.pcap", tls_loopback),
    ]
    for name, job in jobs:
        if args.only and name not in args.only:
            continue
        path = args.out / name
        job(path)
        size = os.path.getsize(path)
        print(f"{name:40s} {size:8d} bytes")
        if size >= 1_000_000:
            print(f"  warning: {name} is over 1 MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
