"""Clients through cluster failures, the mock cluster held against a three-node Apache Kafka 4.1.1.

The two scenarios of :mod:`cluster_failover` -- a partition leader stopped mid-produce and started again
(idempotence, acks=all), a group's coordinator node stopped mid-consume -- run for kproto's client,
kafka-python, confluent-kafka, aiokafka, Kafka's Java client and franz-go, each at its defaults, first on the
mock cluster, then on Apache Kafka (one JVM set at a time).  For each run the report keeps the errors the
client logged, what the log holds afterwards (lost, duplicated, out of order) or what the group read, and
the recovery time.

``python benchmarks/cluster_failover.py`` runs this module with ``KPROTO_CLUSTER_REPORT`` naming where the
side-by-side table goes (``benchmarks/results/cluster-failover.json``, rendered into docs/benchmarks.md);
without it the report is only checked.  What differs between the engines is listed in docs/broker.md
("Clients through failures, against Apache Kafka") and pinned here.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

from cluster_failover import (
    PYTHON_CLIENTS,
    Cluster,
    KafkaCluster,
    MockCluster,
    program_consume,
    program_produce,
)
from kproto.testing import MockBroker
from kproto.testing.apache_kafka import ApacheKafka, missing_tools

pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.apache_kafka,
    pytest.mark.skipif(missing_tools() is not None, reason=f"Apache Kafka: {missing_tools()}"),
]

SCENARIOS = ("produce", "consume")
Row = Dict[str, Any]


def run_clients(cluster: Cluster, java: List[str], go: List[str]) -> List[Row]:
    """Every client through both scenarios on ``cluster``, each on a topic of its own; a client that fails
    is a row saying how, not the end of the report."""
    runners: Dict[str, Dict[str, Callable[[str], Row]]] = {
        name: {
            "produce": lambda topic, p=produce: p(cluster, topic),
            "consume": lambda topic, c=consume, n=name: c(cluster, topic, f"g-{n}"),
        }
        for name, (produce, consume) in PYTHON_CLIENTS.items()
    }
    bootstrap = [cluster.bootstrap_servers]
    for name, cmd, group, prefix in (("java", java, "jcg", "cluster-"), ("franz-go", go, "gcg", "kgo-cluster-")):
        runners[name] = {
            "produce": lambda topic, c=cmd + bootstrap, p=prefix: program_produce(c, p + "produce", cluster, topic),
            "consume": lambda topic, c=cmd + bootstrap, p=prefix, g=group: program_consume(
                c, p + "consume", cluster, topic, g
            ),
        }
    rows = []
    for client, scenarios in runners.items():
        for scenario in SCENARIOS:
            topic = f"{scenario}-{client}"
            cluster.create_topic(topic)
            try:
                result = scenarios[scenario](topic)
            except (Exception, asyncio.CancelledError) as exc:  # reported, and failed on by the tests below
                result = {"failed": f"{type(exc).__name__}: {exc}"[:400], "errors": []}
            finally:
                cluster.restore()
            rows.append({"engine": cluster.engine, "client": client, "scenario": scenario, **result})
    return rows


@pytest.fixture(scope="module")
def report(java_scenarios, go_peers: str) -> Iterator[Dict[str, List[Row]]]:  # type: ignore[no-untyped-def]
    target = os.environ.get("KPROTO_CLUSTER_REPORT")
    run = start_run(Path(target)) if target else None  # started here: its time and load are the run's
    java = [java_scenarios[0], "-cp", java_scenarios[1], "JavaClientScenarios"]
    with MockBroker(brokers=3) as broker:
        mock = run_clients(MockCluster(broker), java, [go_peers])
    with ApacheKafka("4.1.1", brokers=3, heap="384m") as kafka:
        real = run_clients(KafkaCluster(kafka), java, [go_peers])
    if run is not None:
        for row in mock + real:
            run.add(**{k: (", ".join(v) if isinstance(v, list) else v) for k, v in row.items()})
        run.save(target)
    yield {"mock": mock, "kafka": real}


def start_run(path: Path) -> Any:
    """The benchmark run the report is saved as (``benchmarks/results.py``), named after ``path``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from results import Run

    run = Run(path.stem, argv=[])
    run.command = "python benchmarks/cluster_failover.py"
    run.settings = {"records": 600, "partitions": 3, "replicas": 3, "kafka": "4.1.1"}
    run.note("kproto's client does not log the errors it retries on: its rows say none logged.")
    run.note(
        "Kafka's node stops in a controlled shutdown (SIGTERM), the mock's at once: docs/broker.md, differences "
        "between the engines, says how that shows in the errors and the recovery times."
    )
    return run


def by_client(rows: List[Row]) -> Dict[tuple, Row]:
    return {(r["client"], r["scenario"]): r for r in rows}


@pytest.mark.parametrize("engine", ["mock", "kafka"])
def test_every_client_loses_and_duplicates_nothing(report: Dict[str, List[Row]], engine: str) -> None:
    for row in report[engine]:
        where = f"{engine} {row['client']} {row['scenario']}"
        assert row["failed"] is None, f"{where}: {row['failed']}"
        assert (row["lost"], row["duplicated"]) == (0, 0), f"{where}: {row}"
        if row["scenario"] == "produce":
            assert row["order_kept"], f"{where}: a partition out of order"
        else:
            assert row["resumed"], f"{where}: a new member did not resume from the committed offsets"
        assert row["recovery_ms"] is not None and row["recovery_ms"] >= 0, f"{where}: never recovered"


def test_a_stopped_mock_broker_closes_where_kafka_shuts_down_in_order(report: Dict[str, List[Row]]) -> None:
    """Difference 1 of docs/broker.md: the mock's stop closes connections at once, so no client meets
    NOT_LEADER_OR_FOLLOWER from the stopped broker, only a refused or closed connection, which the clients
    that log every disconnection report (kproto's client and aiokafka may log neither).  Whether a client
    meets NOT_LEADER_OR_FOLLOWER from Kafka's stopping node depends on what it had in flight then."""
    mock = by_client(report["mock"])
    for client in {client for client, _ in mock}:
        errors = mock[(client, "produce")]["errors"]
        assert "NOT_LEADER_OR_FOLLOWER" not in errors, (client, errors)
        if client in ("java", "kafka-python", "confluent-kafka", "franz-go"):
            assert "connection" in errors, (client, errors)


def test_franz_go_recovers_from_the_mocks_abrupt_stop_on_its_metadata_age(report: Dict[str, List[Row]]) -> None:
    """Difference 2 of docs/broker.md: after the mock's stop franz-go's producer waits out MetadataMinAge
    (5 s) before it reads the new leader; through Kafka's controlled shutdown it knew it already."""
    mock, kafka = by_client(report["mock"]), by_client(report["kafka"])
    assert mock[("franz-go", "produce")]["recovery_ms"] >= 1000
    assert kafka[("franz-go", "produce")]["recovery_ms"] < mock[("franz-go", "produce")]["recovery_ms"]
