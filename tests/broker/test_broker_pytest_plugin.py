"""The pytest plugin as a user meets it: a test file of their own, run by pytest in a fresh process, with
the ``kafka_broker`` fixture found through kproto's ``pytest11`` entry point (no conftest, no import)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FIXTURE_API = '''
import pytest

def test_fixture_api(kafka_broker):
    assert kafka_broker.bootstrap_servers.startswith("127.0.0.1:")
    kafka_broker.create_topic("orders", partitions=3)
    assert kafka_broker.topics() == {"orders": 3}
    assert kafka_broker.messages("orders") == []
    fault = kafka_broker.fail("Produce", "NOT_LEADER_FOR_PARTITION", topic="orders", times=2)
    assert (fault.fired, fault.times, fault.topic) == (0, 2, "orders")
    with pytest.raises(ValueError, match="known errors"):
        kafka_broker.fail("Produce", "NO_SUCH_ERROR")

@pytest.mark.kafka_broker(default_partitions=4, topics={"declared": 2})
def test_marker_options(kafka_broker):
    assert kafka_broker.topics() == {"declared": 2}
    assert kafka_broker.broker.config.default_partitions == 4

@pytest.mark.kafka_broker(brokers=3, topics={"t": 3})
def test_cluster_marker(kafka_broker):
    assert kafka_broker.bootstrap_servers.count(",") == 2
    leader = kafka_broker.leader("t", 0)
    kafka_broker.stop_broker(leader)
    assert kafka_broker.leader("t", 0) not in (leader, -1)
    kafka_broker.start_broker(leader)
    assert [type(e).__name__ for e in kafka_broker.events][0] == "BrokerStopped"
'''

# The README example: an unmodified kafka-python producer and consumer at their defaults.
README_EXAMPLE = '''
from kafka import KafkaConsumer, KafkaProducer


def test_round_trip(kafka_broker):
    kafka_broker.create_topic("events", partitions=3)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send("events", key=b"user-1", value=b"hello")
    producer.flush()
    consumer = KafkaConsumer(
        "events",
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id="app",
        auto_offset_reset="earliest",
        consumer_timeout_ms=30_000,
    )
    assert next(consumer).value == b"hello"
    assert [(m.key, m.value) for m in kafka_broker.messages("events")] == [(b"user-1", b"hello")]
'''


def run_user_suite(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::DeprecationWarning",
            "test_user.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_fixture_is_found_through_the_entry_point(tmp_path: Path) -> None:
    result = run_user_suite(tmp_path, FIXTURE_API)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


@pytest.mark.real_clients
def test_the_readme_example_passes(tmp_path: Path) -> None:
    result = run_user_suite(tmp_path, README_EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_the_readme_shows_the_example_that_passes() -> None:
    """The example run above is the one the README prints, line for line."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert README_EXAMPLE.strip() in readme
