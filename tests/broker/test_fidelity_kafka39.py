"""The mock broker against Apache Kafka 3.9, the last release serving the 0.8/0.9 request versions: the
old-version corpus and the classic group coordinator's scripted members, answers and their timing."""

from __future__ import annotations

import pytest

from kproto.testing import fidelity as fid
from kproto.testing.fidelity_scenarios import GROUP_SCENARIOS, SCENARIOS

from fidelity_support import assert_agrees, kafka_broker

pytestmark = pytest.mark.real_clients


@pytest.fixture(scope="module")
def kafka():
    yield from kafka_broker("3.9.1")


@pytest.fixture(scope="module")
def mock():
    with fid.comparable_mock() as broker:
        yield broker


def test_old_versions_answer_as_kafka_39(kafka, mock) -> None:
    result = assert_agrees([s for s in SCENARIOS if s.kafka == "3.9"], kafka, mock)
    # Every old data-plane and group api was compared, error paths included.
    assert {
        "Produce",
        "Fetch",
        "ListOffsets",
        "Metadata",
        "OffsetCommit",
        "OffsetFetch",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "DescribeGroups",
        "ListGroups",
    } <= set(result.compared)


@pytest.mark.parametrize("scenario", GROUP_SCENARIOS, ids=lambda s: s.name)
def test_group_coordinator_answers_and_times_as_kafka_39(kafka, mock, scenario) -> None:
    result = assert_agrees([scenario], kafka, mock)
    assert result.compared["JoinGroup"] > 0 and result.compared["SyncGroup"] > 0
