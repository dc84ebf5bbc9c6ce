"""The comparison machinery of kproto.testing.fidelity, and the mock's side of every difference from Apache
Kafka that docs/broker.md documents (pinned against the mock alone: no Java needed)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List

import pytest

from kproto.testing import fidelity as fid
from kproto.testing.fidelity_scenarios import GROUP_SCENARIOS, SCENARIOS, golden_scenarios

ROOT = Path(__file__).resolve().parents[2]
ALL = {s.name: s for s in SCENARIOS + GROUP_SCENARIOS + golden_scenarios(ROOT / "tests" / "golden" / "clients")}


def _run(label: str, body: Dict[str, Any], arrived: float = 0.0, timed: bool = False) -> fid.Answer:
    return fid.Answer(label, 11, 5, body, 0.0, arrived, timed)


def _compare(kafka: List[fid.Answer], mock: List[fid.Answer], error: Any = None) -> fid.Comparison:
    scenario = fid.Scenario("unit", "4.1", lambda s: None, tolerance_s=0.5)
    return fid.compare(scenario, fid.ScenarioRun("unit", "kafka", kafka), fid.ScenarioRun("unit", "mock", mock, error))


def _join(member: str, leader: str, members: List[str]) -> Dict[str, Any]:
    return {
        "throttle_time_ms": 7,
        "error_code": 0,
        "generation_id": 1,
        "protocol_name": "range",
        "leader": leader,
        "member_id": member,
        "members": [{"member_id": m, "metadata": b"\0"} for m in members],
    }


def test_made_up_identifiers_compare_by_their_order_of_appearance() -> None:
    kafka = [_run("a", _join("c-1-x", "c-1-x", ["c-2-y", "c-1-x"]))]
    mock = [_run("a", _join("kproto-aaa", "kproto-aaa", ["kproto-aaa", "kproto-bbb"]))]
    agreed = _compare(kafka, mock)
    assert agreed.differences == [] and agreed.compared["JoinGroup"] == agreed.agreed["JoinGroup"]
    # The same answer naming the other member as leader is a difference (a leader counts as a member:
    # ids are numbered as they appear, the leader field first).
    wrong = [_run("a", _join("kproto-aaa", "kproto-bbb", ["kproto-aaa", "kproto-bbb"]))]
    assert [d.path for d in _compare(kafka, wrong).differences] == ["member_id"]


def test_timed_answers_agree_within_the_tolerance_only() -> None:
    body = {"error_code": 27}
    near = _compare([_run("h", body, 1.5, timed=True)], [_run("h", body, 1.8, timed=True)])
    assert near.differences == []
    far = _compare([_run("h", body, 1.5, timed=True)], [_run("h", body, 2.6, timed=True)])
    assert [(d.path, d.kafka, d.mock) for d in far.differences] == [("<arrival s>", 1.5, 2.6)]


def test_a_scenario_that_stopped_early_is_always_a_difference() -> None:
    result = _compare([], [], error="FidelityError: closed")
    assert [(d.label, d.mock) for d in result.differences] == [("<run>", "FidelityError: closed")]
    assert fid.undocumented(result.differences) == result.differences


def test_records_compare_as_records_not_bytes() -> None:
    from kproto.records import encode_record_batch

    a = encode_record_batch([(b"k", b"v", 5)], partition_leader_epoch=0)
    b = encode_record_batch([(b"k", b"v", 5)], partition_leader_epoch=-1)
    assert a != b
    assert _compare([_run("f", {"records": a})], [_run("f", {"records": b})]).differences == []


def test_every_documented_difference_is_pinned_on_the_mock() -> None:
    by_scenario: Dict[str, List[fid.Documented]] = defaultdict(list)
    for doc in fid.DOCUMENTED:
        by_scenario[doc.pin[0]].append(doc)
    with fid.comparable_mock() as broker:
        target = fid.mock_target(broker)
        for name, docs in by_scenario.items():
            run = fid.run_scenario(ALL[name], target)
            assert run.error is None, (name, run.error)
            answers = fid.normalised_answers(run)
            for doc in docs:
                _, label, path, _ = doc.pin
                assert doc.pinned(answers[label].get(path)), (doc.name, label, path, answers[label].get(path))


def test_docs_name_every_documented_difference_and_state_their_count() -> None:
    text = (ROOT / "docs" / "broker.md").read_text(encoding="utf-8")
    names = sorted({doc.name for doc in fid.DOCUMENTED})
    stated = re.search(r"\*\*(\d+) documented differences\*\*", text)
    assert stated is not None and int(stated.group(1)) == len(names)
    listed = re.findall(r"^\d+\. `([a-z0-9-]+)` -- ", text, flags=re.M)
    assert sorted(listed) == names


@pytest.mark.parametrize("doc", fid.DOCUMENTED, ids=lambda d: f"{d.name}-{d.api}")
def test_a_documented_entry_covers_only_its_api(doc: fid.Documented) -> None:
    other = fid.Difference("s", doc.pin[1], "NotThisApi", 0, doc.pin[2], 1, 2)
    assert not doc.matches(other)
    assert doc.matches(fid.Difference("s", doc.pin[1], doc.api, 0, doc.pin[2], 1, 2))
