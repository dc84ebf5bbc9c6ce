"""What the fidelity tests share: one Apache Kafka broker per module, and the comparison's assertion."""

from __future__ import annotations

from typing import Iterator, List

import pytest

from kproto.testing import fidelity as fid
from kproto.testing.jars import JavaToolMissingError


def kafka_broker(version: str) -> Iterator[fid.Target]:
    """A real Kafka ``version`` for a whole module, set up as the corpus needs, as a comparison target."""
    from kproto.testing.apache_kafka import ApacheKafka

    try:
        kafka = ApacheKafka(version, broker_config=fid.KAFKA_CONFIG).start()
    except JavaToolMissingError as exc:
        pytest.skip(f"Apache Kafka {version} cannot run here: {exc}")
    try:
        yield fid.kafka_target(kafka.address(kafka.node_ids[0]), kafka.create_topic)
    finally:
        kafka.stop()


def assert_agrees(scenarios: List[fid.Scenario], kafka: fid.Target, mock: object) -> fid.Comparison:
    """Run each scenario on both brokers; fail listing every difference docs/broker.md does not name."""
    result = fid.run_and_compare(scenarios, kafka, fid.mock_target(mock))
    left = fid.undocumented(result.differences)
    assert not left, "\n".join(
        f"{d.scenario} {d.label} {d.api} v{d.version} {d.path}: kafka={d.kafka!r} mock={d.mock!r}" for d in left
    )
    return result
