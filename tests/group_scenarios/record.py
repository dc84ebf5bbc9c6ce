"""Record one scripted consumer-group scenario against kproto's mock broker, with each client's own account.

    python record.py SCENARIO OUT_DIR

writes ``OUT_DIR/SCENARIO.pcap`` (the broker's recording, port 9092) and ``OUT_DIR/SCENARIO.json``: the
consumers' journals (see ``client.py``) keyed by client id, plus what the script itself did (``killed``:
the time a member was SIGKILLed).  Records are produced to both partitions of topic ``scenario`` every
50 ms during the whole run, so a partition's first consumption after an assignment comes within a poll.

Scenarios (short timeouts: the coordinator's session floor is lowered to 3 s):

* ``slow-poll`` (kafka-python): ``slow`` owns both partitions, then stops polling for 11 s with
  ``max_poll_interval_ms`` 6000; ``fresh`` joins 1 s into the pause.  The rebalance is held until
  ``slow``'s heartbeat thread leaves the group for exceeding the poll interval; ``slow`` rejoins when it
  polls again.
* ``kill`` (confluent-kafka): ``victim`` and ``survivor`` share the partitions (session 6000 ms), then
  ``victim`` is SIGKILLed: its partitions wait for the session to expire and the survivor to rejoin.
* ``join-leave`` (aiokafka): ``first`` consumes alone, ``late`` joins, then ``late`` closes (LeaveGroup).
* ``static`` (confluent-kafka): ``static-a`` (group.instance.id ``instance-a``) and ``other`` share the
  partitions; ``static-a`` closes and restarts with the same instance id within its session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

from kproto.testing import MockBroker

HERE = Path(__file__).resolve().parent
TOPIC = "scenario"


def journal(path: Path) -> List[Dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Scenario:
    def __init__(self, name: str, out: Path, broker: MockBroker) -> None:
        self.name, self.out, self.broker = name, out, broker
        self.procs: Dict[str, "subprocess.Popen[bytes]"] = {}
        self.facts: Dict[str, Any] = {}

    def events_path(self, client_id: str) -> Path:
        return self.out / f"{self.name}.{client_id}.jsonl"

    def start(self, lib: str, client_id: str, **options: Any) -> None:
        self.procs[client_id] = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "client.py"),
                lib,
                self.broker.bootstrap_servers,
                self.name,
                client_id,
                str(self.events_path(client_id)),
                "--options",
                json.dumps(options),
            ],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )

    def events(self, client_id: str, kind: str) -> List[Dict[str, Any]]:
        return [e for e in journal(self.events_path(client_id)) if e["event"] == kind]

    def owns(self, client_id: str, partitions: List[int], since: float = 0.0) -> bool:
        """The client's latest assignment after ``since`` is ``partitions`` and it consumed them all since."""
        assigned = [e for e in self.events(client_id, "assigned") if e["t"] >= since]
        if not assigned or assigned[-1]["partitions"] != partitions:
            return False
        consumed = {
            p for e in self.events(client_id, "consumed") if e["t"] >= assigned[-1]["t"] for p in e["partitions"]
        }
        return set(partitions) <= consumed

    def stop(self, client_id: str) -> None:
        self.events_path(client_id).with_name(self.events_path(client_id).name + ".stop").touch()
        self.procs[client_id].wait(60)

    def kill(self, client_id: str) -> None:
        self.facts["killed"] = {"client_id": client_id, "t": time.time()}
        self.procs[client_id].send_signal(signal.SIGKILL)
        self.procs[client_id].wait(10)

    def close(self) -> None:
        for client_id, proc in self.procs.items():
            if proc.poll() is None:
                self.stop(client_id)


def slow_poll(s: Scenario) -> None:
    s.start("kafka-python", "slow", session_ms=6000, max_poll_ms=6000, pause_s=11, pause_after_s=2)
    wait_for(lambda: bool(s.events("slow", "pause")), "slow to pause")
    time.sleep(1)
    s.start("kafka-python", "fresh", session_ms=6000, max_poll_ms=6000)
    wait_for(lambda: bool(s.events("slow", "resume")), "slow to resume", 30)
    resumed = s.events("slow", "resume")[0]["t"]
    wait_for(
        lambda: (
            any(e["t"] > resumed for e in s.events("slow", "assigned"))
            and any(e["t"] > resumed for e in s.events("fresh", "assigned"))
        ),
        "the group to settle",
    )
    time.sleep(1.5)


def kill(s: Scenario) -> None:
    s.start("confluent-kafka", "victim", session_ms=6000)
    wait_for(lambda: s.owns("victim", [0, 1]), "victim to own both partitions")
    s.start("confluent-kafka", "survivor", session_ms=6000)
    wait_for(
        lambda: (
            len(s.events("survivor", "assigned")) >= 1
            and s.owns("survivor", s.events("survivor", "assigned")[-1]["partitions"] or [-1])
        ),
        "survivor to consume",
    )
    time.sleep(1)
    s.kill("victim")
    killed = s.facts["killed"]["t"]
    wait_for(lambda: s.owns("survivor", [0, 1], since=killed), "survivor to take both partitions", 40)
    time.sleep(1)


def join_leave(s: Scenario) -> None:
    s.start("aiokafka", "first", session_ms=6000)
    wait_for(lambda: s.owns("first", [0, 1]), "first to own both partitions")
    s.start("aiokafka", "late", session_ms=6000)
    wait_for(
        lambda: (
            bool(s.events("late", "assigned"))
            and s.owns("late", s.events("late", "assigned")[-1]["partitions"] or [-1])
        ),
        "late to consume",
    )
    time.sleep(1)
    s.stop("late")
    left = s.events("late", "closed")[0]["t"]
    wait_for(lambda: s.owns("first", [0, 1], since=left), "first to take both partitions back")
    time.sleep(1)


def static(s: Scenario) -> None:
    s.start("confluent-kafka", "static-a", session_ms=10000, instance_id="instance-a")
    wait_for(lambda: s.owns("static-a", [0, 1]), "static-a to own both partitions")
    s.start("confluent-kafka", "other", session_ms=10000)
    wait_for(
        lambda: (
            bool(s.events("other", "assigned"))
            and s.owns("other", s.events("other", "assigned")[-1]["partitions"] or [-1])
        ),
        "other to consume",
    )
    time.sleep(1)
    s.stop("static-a")
    s.facts["restarted"] = time.time()
    s.events_path("static-a").with_name(s.events_path("static-a").name + ".stop").unlink()
    s.start("confluent-kafka", "static-a", session_ms=10000, instance_id="instance-a")
    restarted = s.facts["restarted"]
    wait_for(lambda: any(e["t"] > restarted for e in s.events("static-a", "consumed")), "static-a to consume again")
    time.sleep(1)


SCENARIOS = {"slow-poll": slow_poll, "kill": kill, "join-leave": join_leave, "static": static}


def produce(broker: MockBroker, stop: threading.Event) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="scenario-producer", linger_ms=0)
    i = 0
    while not stop.is_set():
        for p in (0, 1):
            producer.send(TOPIC, value=f"record {i}".encode(), partition=p)
        i += 1
        stop.wait(0.05)
    producer.flush(10)
    producer.close()


def record(name: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{name}.*"):
        old.unlink()
    with MockBroker(
        record_pcap=out / f"{name}.pcap", record_server_port=9092, topics={TOPIC: 2}, min_session_timeout_ms=3000
    ) as broker:
        stop = threading.Event()
        producer = threading.Thread(target=produce, args=(broker, stop))
        producer.start()
        scenario = Scenario(name, out, broker)
        try:
            SCENARIOS[name](scenario)
        finally:
            scenario.close()
            stop.set()
            producer.join(30)
        truth = {"facts": scenario.facts, "journals": {c: journal(scenario.events_path(c)) for c in scenario.procs}}
    (out / f"{name}.json").write_text(json.dumps(truth, indent=1))


if __name__ == "__main__":
    record(sys.argv[1], Path(sys.argv[2]))
