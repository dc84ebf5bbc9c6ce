"""The ``kafka_broker`` fixture's ``engine="apache-kafka"``: the mock's interface on a real broker that the
session shares, tests isolated by deleting their topics, and a skip that says what to install."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kproto.client import sync
from kproto.pytest_plugin import ApacheKafkaBroker
from kproto.testing.apache_kafka import NeedsMockBrokerError

on_kafka = pytest.mark.kafka_broker(engine="apache-kafka", version="4.1.1")


@pytest.mark.real_clients
@on_kafka
def test_the_real_engine_answers_like_the_mock(kafka_broker) -> None:
    assert isinstance(kafka_broker, ApacheKafkaBroker)
    kafka_broker.create_topic("fixture-shared", partitions=2)
    assert kafka_broker.topics() == {"fixture-shared": 2}
    with sync.Producer(kafka_broker.bootstrap_servers) as producer:
        producer.send("fixture-shared", b"hello", key=b"k", partition=1, headers=[("h", b"1")]).result(30)
    [record] = kafka_broker.messages("fixture-shared")
    assert (record.partition, record.offset, record.key, record.value, record.headers) == (
        1,
        0,
        b"k",
        b"hello",
        (("h", b"1"),),
    )
    with sync.Consumer(
        kafka_broker.bootstrap_servers,
        group_id="fixture-group",
        topics=["fixture-shared"],
        auto_commit=False,
        auto_offset_reset="earliest",
    ) as consumer:
        assert [r.value for r in consumer.poll(30_000)] == [b"hello"]
        consumer.commit({("fixture-shared", 1): 1})
    assert kafka_broker.committed("fixture-group") == {("fixture-shared", 1): (1, "")}
    with pytest.raises(NeedsMockBrokerError, match="injecting faults needs the mock broker"):
        kafka_broker.fail("Produce", "NOT_LEADER_FOR_PARTITION")


@pytest.mark.real_clients
@on_kafka
def test_the_next_test_shares_the_broker_without_the_topics(kafka_broker) -> None:
    assert kafka_broker.topics() == {}
    kafka_broker.create_topic("fixture-shared", partitions=1)  # the same name again, from scratch
    assert kafka_broker.messages("fixture-shared") == []


USER_SUITE = '''
import pytest

@pytest.mark.kafka_broker(engine="apache-kafka")
def test_one(kafka_broker):
    pass

@pytest.mark.kafka_broker(engine="apache-kafka")
def test_two(kafka_broker):
    pass
'''


def test_without_java_the_tests_skip_with_one_reason(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_SUITE))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PATH"] = str(bin_dir)  # no java, no mvn
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    reasons = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(reasons) == 1 and "[2]" in reasons[0], result.stdout
    assert (
        "kproto/pytest_plugin.py" in reasons[0]
        and "'java' is not on PATH: install" in reasons[0]
        and "openjdk-17-jdk-headless" in reasons[0]
    )
    assert "2 skipped" in result.stdout
