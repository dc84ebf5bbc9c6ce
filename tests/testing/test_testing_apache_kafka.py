"""kproto.testing.ApacheKafka: real KRaft brokers from jars, their life cycle, and what goes wrong starting one.

Each test here starts its own cluster (the life cycle is what is tested); tests of behaviour on a broker
share the session's through the ``kafka_broker`` fixture instead.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from kproto.messages import ProduceRequest
from kproto.records import encode_record_batch, read_segment
from kproto.testing import jars
from kproto.testing.apache_kafka import (
    MARKER,
    ApacheKafka,
    BrokerStartError,
    broker_artifacts,
    harness_root,
    missing_tools,
    remove_stale_runs,
)

pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.apache_kafka,
]


def _produce(kafka: ApacheKafka, topic: str, values: list, acks: int = -1) -> None:
    T = ProduceRequest.TopicProduceData
    batch = encode_record_batch([(b"k%d" % i, v, None, [("n", b"%d" % i)]) for i, v in enumerate(values)])
    answer = kafka.request(
        ProduceRequest(
            acks=acks,
            timeout_ms=10000,
            topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch)])],
        ),
        kafka.api_version(0, 9),
        kafka.leader(topic, 0),
    )
    assert answer.responses[0].partition_responses[0].error_code == 0


@pytest.mark.parametrize("version", ["3.9.1", "4.1.1"])
def test_one_node_life_cycle(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import kproto.testing.apache_kafka as module

    # On 4.1.1 the first port chosen is already taken: the start is retried on new ports.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    if version == "4.1.1":
        real, first = module._free_port, iter([taken.getsockname()[1]])
        monkeypatch.setattr(module, "_free_port", lambda: next(first, None) or real())
    with taken, ApacheKafka(version=version) as kafka:
        assert kafka.timing.attempts == (2 if version == "4.1.1" else 1)
        assert kafka.address(1)[1] != taken.getsockname()[1]
        run = kafka.log_dirs[1].parents[1]
        assert (run / MARKER).is_file() and run.parent == harness_root()
        kafka.create_topic("life", partitions=2, config={"segment.bytes": 1 << 20})
        kafka.create_topic("life", partitions=2)  # exists: no-op
        assert kafka.topics() == {"life": 2}
        _produce(kafka, "life", [b"a", b"b", b"c"])
        assert [(r.offset, r.key, r.value, r.headers) for r in kafka.records("life", 0)] == [
            (0, b"k0", b"a", (("n", b"0"),)),
            (1, b"k1", b"b", (("n", b"1"),)),
            (2, b"k2", b"c", (("n", b"2"),)),
        ]
        # 3.9 still serves the 0.8/0.9 request versions; 4.x removed them (Produce from v3).
        assert kafka.api_version(0, 0 if version.startswith("3.") else 3) == (0 if version.startswith("3.") else 3)

        kafka.stop_broker(1)
        assert not kafka.running(1)
        segment = kafka.log_dirs[1] / "life-0" / "00000000000000000000.log"
        assert [r.value for b in read_segment(segment) for r in b.records] == [b"a", b"b", b"c"]
        kafka.start_broker(1)  # same log directory: the records are still there
        assert [r.value for r in kafka.records("life")] == [b"a", b"b", b"c"]
        assert kafka.committed("nobody") == {}
        kafka.delete_topics(["life"])
        assert kafka.topics() == {}
    assert not run.exists()


def test_three_nodes_survive_one_stopping() -> None:
    with ApacheKafka(version="4.1.1", brokers=3, heap="384m") as kafka:
        assert len(kafka.bootstrap_servers.split(",")) == 3 and len(set(kafka.log_dirs.values())) == 3
        kafka.create_topic("r3", partitions=3, replication_factor=3)
        _produce(kafka, "r3", [b"x", b"y"])
        kafka.stop_broker(2)
        kafka.wait_for_leaders("r3", 3)
        assert [r.value for r in kafka.records("r3", 0)] == [b"x", b"y"]
        _produce(kafka, "r3", [b"z"], acks=1)
        kafka.start_broker(2)
        assert [r.value for r in kafka.records("r3", 0)] == [b"x", b"y", b"z"]
        assert all((d / "r3-0").is_dir() for d in kafka.log_dirs.values())


def test_a_corrupted_jar_cache_is_resolved_again(tmp_path: Path) -> None:
    # A copy of the resolved set in a cache of its own, so the real cache stays intact for other tests.
    lib = jars.resolve(broker_artifacts("4.1.1"))
    shutil.copytree(lib.parent, tmp_path / "jars" / lib.parent.name)
    lib = tmp_path / "jars" / lib.parent.name / "lib"
    victim = next(lib.glob("kafka-server-*.jar"))
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.warns(UserWarning, match="jars differ from the manifest: kafka-server"):
        again = jars.resolve(broker_artifacts("4.1.1"), cache_dir=tmp_path)
    assert again == lib and victim.stat().st_size > 100


def test_a_broker_that_dies_at_start_up_reports_its_log() -> None:
    # A setting the configuration check accepts (formatting passes) but the broker cannot start with.
    kafka = ApacheKafka(version="4.1.1", broker_config={"authorizer.class.name": "no.such.Authorizer"})
    with pytest.raises(BrokerStartError, match="node 1 exited with 1 during start-up") as caught:
        kafka.start()
    assert "ClassNotFoundException: no.such.Authorizer" in caught.value.log_tail
    assert "last lines of the broker's log" in str(caught.value)
    assert kafka.timing.attempts == 1  # not a port clash: no retry
    assert not any(kafka._nodes[i].directory.exists() for i in kafka.node_ids)


def test_a_bad_setting_fails_formatting_with_its_log() -> None:
    kafka = ApacheKafka(version="4.1.1", broker_config={"log.segment.bytes": 3})
    with pytest.raises(BrokerStartError, match="formatting node 1's log directory failed") as caught:
        kafka.start()
    assert "log.segment.bytes" in caught.value.log_tail


def test_a_broker_not_ready_in_time_is_stopped_with_its_log() -> None:
    kafka = ApacheKafka(version="4.1.1", start_timeout=0.3)
    with pytest.raises(BrokerStartError, match="not ready within"):
        kafka.start()
    assert all(not kafka.running(i) for i in kafka.node_ids)


def test_missing_java_names_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(jars.JavaToolMissingError, match="openjdk-17-jdk-headless"):
        ApacheKafka(version="4.1.1").start()
    assert missing_tools() is not None and "install" in str(missing_tools())


def test_unknown_release_line_is_refused() -> None:
    with pytest.raises(ValueError, match="3.9, 4.1"):
        ApacheKafka(version="2.8.0")


_KILLED_RUN = textwrap.dedent("""
    import os, signal
    from kproto.testing.apache_kafka import ApacheKafka
    kafka = ApacheKafka(version="4.1.1").start()
    print(kafka.log_dirs[1].parents[1], kafka._nodes[1].process.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_killed_run_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN],
        stdout=subprocess.PIPE,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    run_text, pid_text = done.stdout.decode().split()
    run, jvm = Path(run_text), int(pid_text)
    assert run.is_dir() and os.path.exists(f"/proc/{jvm}")  # the orphaned JVM still runs
    # Left alone: a directory without the marker, and a marked one whose owner holds the lock.
    unmarked = Path(tempfile.mkdtemp(prefix="run-", dir=harness_root()))
    live = Path(tempfile.mkdtemp(prefix="run-", dir=harness_root()))
    with (live / MARKER).open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.warns(UserWarning, match=re.escape(f"removed {run}") + f".*killed its orphaned JVMs \\[{jvm}\\]"):
            removed = remove_stale_runs()
        assert run in removed and not run.exists()
        assert unmarked.is_dir() and live.is_dir()
    shutil.rmtree(live)
    unmarked.rmdir()
    for _ in range(50):  # the kill is delivered; the zombie is reaped by init
        if not os.path.exists(f"/proc/{jvm}") or "Z" in Path(f"/proc/{jvm}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"JVM {jvm} of the killed run still runs")


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    import kproto.testing.apache_kafka as module

    # 0xf8 encodes to "-" first: StorageTool would read "-t -..." as an unknown option.
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x00" * 16)])
    monkeypatch.setattr(module.uuid, "uuid4", lambda: next(drawn))
    assert module._cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"
