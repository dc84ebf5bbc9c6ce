"""Real clients talking to a real Apache Kafka, captured on loopback by dumpcap, read by kproto's tools.

Each client, at its defaults, produces a few keyed records to a topic of its own, reads them back as the
only member of a group of its own and commits; dumpcap records the broker port meanwhile.  Then:

* ``kproto pcap -v`` decodes every frame of the capture with no problem row (but for a request the
  client left unanswered by closing the connection, a fact of the conversation), and shows the records'
  values both in the Produce requests and in the Fetch answers;
* tshark agrees with kproto on every header field it decodes, and on the body fields (topics,
  partitions, offsets, error codes) of the versions it knows (``test_cli_tshark_oracle.compare_with_tshark``);
* ``kproto groups`` reports the generations the coordinator announced in its JoinGroup answers (read by
  kproto and, for JoinGroup versions tshark knows, by tshark) and ends with the one the client saw.

Clients: kafka-python 3, aiokafka, confluent-kafka (librdkafka), kproto's own client, the Java client
(``tests/peers/java/ClientProbe.java``) and franz-go (the ``group`` mode of ``benchmarks/go``) against
Kafka 4.1.1; kafka-python pinned to 0.9 (``api_version=(0, 9)``) against Kafka 3.9.1, the last
release that still serves the 0.9 request versions.  One broker per release for the session (the
``kproto_apache_kafka`` fixture), one capture of a few hundred packets per client.

dumpcap and tshark (Debian ``tshark``, installed by ``scripts/test``), java, mvn and go are test
dependencies; capturing on ``lo`` needs root or dumpcap's capture capabilities.  With ``CI`` set, a
missing tool fails the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import struct
import tempfile
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from kproto.testing.apache_kafka import ApacheKafka, missing_tools
from test_cli_tshark_oracle import compare_with_tshark, repeated_keys, tshark_path
from test_cli_usage import run_kproto

pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.skipif(missing_tools() is not None, reason=f"Apache Kafka: {missing_tools()}"),
]

MODERN = "4.1.1"
OLD = "3.9.1"
COUNT = 12
DEADLINE = 60.0
JAVA_PROBE = Path(__file__).resolve().parents[1] / "peers" / "java" / "ClientProbe.java"
# franz-go's probe is the client benchmark's program; its "group" mode is this module's scenario.
GO_PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "go"


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message + ": it must be available in CI")
    pytest.skip(message)


def dumpcap_path() -> str:
    path = shutil.which("dumpcap")
    if path is None:
        _missing("dumpcap is required to capture real traffic (apt-get install tshark)")
    return str(path)


class Dumpcap:
    """dumpcap recording ``tcp port PORT`` on loopback into ``path`` while the ``with`` block runs.

    dumpcap says "Capturing on" before its filter is attached, and the kernel hands it packets in blocks
    (what is still in a block when it stops is lost), so both ends are marked: a connection to the port
    (a handshake and a close, no payload) is made until its ports show up in the file, once before the
    block and once after it.  The marker connections stay in the capture."""

    def __init__(self, port: int, path: Path) -> None:
        self.port, self.path = port, path
        self._proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> "Dumpcap":
        self._proc = subprocess.Popen(
            [dumpcap_path(), "-q", "-i", "lo", "-f", f"tcp port {self.port}", "-w", str(self.path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            self._mark()
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if exc_info[0] is None:
                self._mark()
        finally:
            self._stop()

    def _mark(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + 30
        while True:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as marker:
                ports = struct.pack(">HH", marker.getsockname()[1], self.port)  # its SYN's TCP header
            retry = time.monotonic() + 1.0
            while time.monotonic() < retry:
                if self._proc.poll() is not None:
                    err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                    if "ermission" in err or "privileges" in err:
                        _missing(f"dumpcap cannot capture on lo (needs root or capture capabilities): {err.strip()}")
                    raise AssertionError(f"dumpcap exited {self._proc.returncode}: {err}")
                if self.path.exists() and ports in self.path.read_bytes():
                    return
                time.sleep(0.05)
            if time.monotonic() > deadline:
                raise AssertionError("dumpcap did not record a marker connection within 30 s")

    def _stop(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# --- the scenarios: produce COUNT records, consume them in a group, commit; return the generation seen --


def values() -> List[bytes]:
    return [b"value-%d" % i for i in range(COUNT)]


def wait_for_all(poll: Callable[[], int], what: str) -> None:
    seen, deadline = 0, time.monotonic() + DEADLINE
    while seen < COUNT:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: read {seen} of {COUNT} records")
        seen += poll()


def kafka_python(bootstrap: str, topic: str, group: str, **pin: Any) -> Optional[int]:
    import kafka

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, client_id="kafka-python-producer", **pin)
    for i, value in enumerate(values()):
        producer.send(topic, value, key=b"k%d" % i)
    producer.flush()
    producer.close()
    consumer = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="kafka-python-consumer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **pin,
    )
    wait_for_all(lambda: sum(len(r) for r in consumer.poll(200).values()), "kafka-python")
    consumer.commit()
    generation = consumer._coordinator._generation.generation_id
    consumer.close()
    return int(generation)


def kafka_python_09(bootstrap: str, topic: str, group: str) -> Optional[int]:
    return kafka_python(bootstrap, topic, group, api_version=(0, 9))


def confluent(bootstrap: str, topic: str, group: str) -> Optional[int]:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": "librdkafka-producer"})
    for i, value in enumerate(values()):
        producer.produce(topic, value, key=b"k%d" % i)
    assert producer.flush(DEADLINE) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "librdkafka-consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])

    def poll() -> int:
        messages = consumer.consume(COUNT, 0.2)
        assert all(m.error() is None for m in messages), [m.error() for m in messages]
        return len(messages)

    wait_for_all(poll, "confluent-kafka")
    consumer.commit(asynchronous=False)
    consumer.close()
    return None  # librdkafka does not expose the generation id


def aiokafka_client(bootstrap: str, topic: str, group: str) -> Optional[int]:
    import aiokafka

    async def run() -> int:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aiokafka-producer")
        await producer.start()
        try:
            for i, value in enumerate(values()):
                await producer.send(topic, value, key=b"k%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id="aiokafka-consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            seen, deadline = 0, time.monotonic() + DEADLINE
            while seen < COUNT:
                assert time.monotonic() < deadline, f"aiokafka: read {seen} of {COUNT} records"
                seen += sum(len(r) for r in (await consumer.getmany(timeout_ms=200)).values())
            await consumer.commit()
            return int(consumer._coordinator.generation)
        finally:
            await consumer.stop()

    return asyncio.run(run())


def kproto_client(bootstrap: str, topic: str, group: str) -> Optional[int]:
    from kproto.client import sync

    with sync.Producer(bootstrap, client_id="kproto-producer") as producer:
        futures = [producer.send(topic, value, key=b"k%d" % i) for i, value in enumerate(values())]
        producer.flush()
        for future in futures:
            future.result(DEADLINE)
    with sync.Consumer(
        bootstrap,
        group_id=group,
        topics=[topic],
        client_id="kproto-consumer",
        auto_commit=False,
        auto_offset_reset="earliest",
    ) as consumer:
        wait_for_all(lambda: len(consumer.poll(200)), "kproto")
        consumer.commit()
        member = consumer._client.member
        assert member is not None
        return int(member.generation_id)


def java_client(bootstrap: str, topic: str, group: str) -> Optional[int]:
    from kproto.testing import jars

    try:
        java = jars.require_tool("java")
        classes = jars.classpath([f"org.apache.kafka:kafka-clients:{MODERN}"])
    except jars.JavaToolMissingError as exc:
        _missing(f"the Java client needs {exc}")
    done = subprocess.run(
        [java, "-cp", classes, str(JAVA_PROBE), bootstrap, topic, group, str(COUNT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("generation ")]
    return int(line.split()[1])


def franz_go(bootstrap: str, topic: str, group: str) -> Optional[int]:
    go = shutil.which("go")
    if go is None:
        _missing("franz-go's probe needs Go on PATH")
    with tempfile.TemporaryDirectory() as build:
        program = os.path.join(build, "franz-go-probe")
        built = subprocess.run(
            [str(go), "build", "-o", program, "."], cwd=GO_PROBE, capture_output=True, text=True, timeout=600
        )
        assert built.returncode == 0, built.stderr[-3000:]
        done = subprocess.run(
            [program, "group", bootstrap, topic, str(COUNT), group], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(json.loads(done.stdout.strip().splitlines()[-1])["generation"])


CLIENTS: Dict[str, Any] = {
    "kafka-python-0.9": (OLD, kafka_python_09),
    "kafka-python": (MODERN, kafka_python),
    "aiokafka": (MODERN, aiokafka_client),
    "confluent-kafka": (MODERN, confluent),
    "kproto": (MODERN, kproto_client),
    "java": (MODERN, java_client),
    "franz-go": (MODERN, franz_go),
}


@pytest.fixture
def kafka(request: pytest.FixtureRequest, kproto_apache_kafka: Any) -> Iterator[ApacheKafka]:
    version = CLIENTS[request.node.callspec.params["client"]][0]
    kafka = kproto_apache_kafka.get(version)
    before = set(kafka.topics())
    yield kafka
    kafka = kproto_apache_kafka.get(version)
    kafka.delete_topics(sorted(set(kafka.topics()) - before))


def tshark_joingroup_generations(capture: Path, port: int) -> List[int]:
    """The generation ids of the JoinGroup answers without error that tshark pairs and decodes (versions
    up to 7: tshark 4.0 marks later ones unsupported and does not pair their answers)."""
    proc = subprocess.run(
        [
            tshark_path(),
            "-r",
            str(capture),
            "-d",
            f"tcp.port=={port},kafka",
            "-T",
            "json",
            "-Y",
            "kafka.response_key == 11",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    generations = []
    for packet in json.loads(proc.stdout, object_pairs_hook=repeated_keys):
        for pdu in packet["_source"][0]["layers"][0]["kafka"]:
            if pdu.get("kafka.error", ["0"])[0] == "0":
                generations += [int(g) for g in pdu["kafka.generation_id"]]
    return generations


@pytest.mark.parametrize("client", list(CLIENTS))
def test_real_client_traffic(client: str, kafka: ApacheKafka, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"traffic-{client}-{tag}", f"traffic-group-{tag}"
    kafka.create_topic(topic, 1)
    port = int(kafka.bootstrap_servers.rsplit(":", 1)[1])
    capture = tmp_path / f"{client}.pcapng"
    with Dumpcap(port, capture):
        seen_generation = CLIENTS[client][1](kafka.bootstrap_servers, topic, group)

    # every frame decodes; the records are in the Produce requests and Fetch answers
    verbose = run_kproto("pcap", capture, "--port", str(port), "-v", "--no-progress", check_code=0)
    text = verbose.stdout.decode()
    problems = [line for line in text.splitlines() if line.lstrip().startswith("!")]
    assert all("! unanswered-request" in line for line in problems), problems
    jsonl = run_kproto("pcap", capture, "--port", str(port), "--format", "jsonl", check_code=0)
    records = [json.loads(line) for line in jsonl.stdout.decode().splitlines()]
    (summary,) = [r for r in records if r["record"] == "summary"]
    assert summary["failures"] == 0, summary
    # The one problem allowed is a fact of the conversation: a consumer may close while its long-poll Fetch
    # is still out (franz-go always does, kproto's client when the poll ends at that moment), and librdkafka
    # also closes with a Metadata request out.
    assert set(summary["problems"]) <= {"unanswered-request"}, summary
    unanswered = [r for r in records if r["record"] == "problem"]
    assert all(
        r["kind"] == "unanswered-request" and r["detail"].endswith("the connection ended") for r in unanswered
    ), unanswered
    assert all(client == "confluent-kafka" or "api key 1 " in r["detail"] for r in unanswered), unanswered
    apis = {r["api_name"] for r in records if r["record"] == "exchange"}
    assert {"Produce", "Fetch", "JoinGroup", "SyncGroup", "OffsetCommit"} <= apis, apis
    for value in values():
        assert text.count(f"value {value!r}") >= 2, f"{value!r} not shown in a Produce and a Fetch"

    # tshark agrees on every header, and on the bodies of the versions it knows
    tally = compare_with_tshark(capture, port)
    assert tally["headers"] >= tally["exchanges"] > 0, tally
    if client == "kafka-python-0.9":
        assert tally["bodies"] >= tally["exchanges"], tally  # tshark knows every 0.9 version

    # kproto groups: the coordinator's generations, ending with the one the client saw
    announced = [
        e["response"]["generation_id"]
        for e in records
        if e["record"] == "exchange" and e["api_name"] == "JoinGroup" and e["error_codes"] == []
    ]
    assert announced, "no JoinGroup answer in the capture"
    read_by_tshark = tshark_joingroup_generations(capture, port)
    # tshark 4.0 pairs JoinGroup answers up to v7; Java, kproto and franz-go use v9
    tshark_blind = client in ("java", "kproto", "franz-go") and not read_by_tshark
    assert read_by_tshark == announced or tshark_blind, read_by_tshark
    report = json.loads(run_kproto("groups", capture, "--port", str(port), "--format", "json", check_code=0).stdout)
    (found,) = [r for r in report["records"] if r["record"] == "group"]
    assert found["group_id"] == group and found["coordinator"] == kafka.bootstrap_servers
    assert [g["generation_id"] for g in found["generations"]] == sorted(set(announced))
    last = found["generations"][-1]
    assert last["problems"] == [] and last["assignments"] and found["problems"] == []
    assert {t: ps for a in last["assignments"].values() for t, ps in a.items()} == {topic: [0]}
    assert last["commits_after"] == {f"{topic}-0": COUNT}
    if seen_generation is not None:
        assert announced[-1] == seen_generation
