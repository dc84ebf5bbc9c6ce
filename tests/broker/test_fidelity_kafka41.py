"""The mock broker against Apache Kafka 4.1: the modern-version corpus and the golden traffic of clients
at their defaults (tests/golden/clients), replayed to both."""

from __future__ import annotations

from pathlib import Path

import pytest

from kproto.testing import fidelity as fid
from kproto.testing.fidelity_scenarios import SCENARIOS, golden_scenarios

from fidelity_support import assert_agrees, kafka_broker

pytestmark = pytest.mark.real_clients
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "clients"


@pytest.fixture(scope="module")
def kafka():
    yield from kafka_broker("4.1.1")


@pytest.fixture(scope="module")
def mock():
    with fid.comparable_mock() as broker:
        yield broker


def test_modern_versions_answer_as_kafka_41(kafka, mock) -> None:
    assert_agrees([s for s in SCENARIOS if s.kafka == "4.1"], kafka, mock)


def test_golden_client_traffic_is_answered_as_kafka_41(kafka, mock) -> None:
    result = assert_agrees(golden_scenarios(GOLDEN), kafka, mock)
    assert {"Produce", "Fetch", "JoinGroup", "OffsetCommit"} <= set(result.compared)
