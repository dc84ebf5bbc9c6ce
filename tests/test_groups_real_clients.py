"""Group analysis of traffic real clients produced: kafka-python 3, librdkafka and aiokafka consuming as
one group at their defaults (``samples/modern/``, recorded against the mock broker).

The facts checked are the ones the recording fixes (one consumer per capture, its client id, the group;
in the slow-member recording, which member stopped polling and for how long) and the ones the packets fix
(each known start is a JoinGroup request's capture time, each known end a SyncGroup answer's, the
duration their difference).  ``samples/modern/record_samples.py`` made the files.
"""

from __future__ import annotations

import pytest

from kproto.capture.groups import analyse_capture
from test_groups_analysis import SAMPLES

CLIENTS = {
    "kafka-python-produce-consume.pcap": "kafka-python-consumer",
    "librdkafka-produce-consume.pcap": "librdkafka-consumer",
    "aiokafka-produce-consume.pcap": "aiokafka-consumer",
}


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_real_client_group(name: str) -> None:
    (report,) = analyse_capture(SAMPLES / "modern" / name)
    assert report.coordinator != "unknown"
    assert [m.client_id for m in report.members.values()] == [CLIENTS[name]]
    (member,) = report.members.values()
    assert member.left_ns is not None  # each recording closes its consumer
    assert report.generations
    joins = {e.request_time_ns for e in report.events if e.api == "JoinGroup" and e.error == "NONE"}
    syncs = {e.response_time_ns for e in report.events if e.api == "SyncGroup" and e.error == "NONE"}
    for gen in report.generations:
        assert gen.members == [member.member_id] and gen.leader == member.member_id
        assert gen.start_ns in joins and gen.end_ns in syncs
        assert gen.duration_ms == (gen.end_ns - gen.start_ns) / 1e6 > 0
        assert gen.problems == [] and gen.waited_for == []
    assert report.generations[-1].assignments[member.member_id]  # it was given partitions in the end


def test_real_clients_rebalance_waiting_for_a_slow_member() -> None:
    # kafka-python-slow-member.pcap: slow-consumer owned both partitions, then did not poll for 3 s while
    # fast-consumer joined; kafka-python rejoins only from poll(), so the generation with both waited for it
    (report,) = analyse_capture(SAMPLES / "modern" / "kafka-python-slow-member.pcap")
    assert report.group_id == "slow-group"
    by_client = {m.client_id: m for m in report.members.values()}
    assert set(by_client) == {"slow-consumer", "fast-consumer"}
    slow, fast = by_client["slow-consumer"].member_id, by_client["fast-consumer"].member_id
    # slow-consumer alone first (kafka-python may rejoin once after its first metadata), then both
    *alone, gen2 = report.generations
    assert alone and all(g.members == [slow] for g in alone) and sorted(gen2.members) == sorted([slow, fast])
    assert gen2.slowest is not None and gen2.slowest.member_id == slow
    joins = {
        e.member_id: e.request_time_ns
        for e in report.events
        if e.api == "JoinGroup" and e.generation == gen2.generation_id and e.error == "NONE"
    }
    # the rebalance starts with fast-consumer's join and waits until slow-consumer's, from the packet times
    assert gen2.start_ns is not None and gen2.start_ns <= joins[fast] < joins[slow]
    assert gen2.slowest.waited_ms == pytest.approx((joins[slow] - gen2.start_ns) / 1e6)
    assert 2000 < gen2.slowest.waited_ms <= gen2.duration_ms < 3000 + 2000  # the 3 s pause, less fast's start-up
    assert {tp for a in gen2.assignments.values() for t, ps in a.items() for tp in ((t, p) for p in ps)} == {
        ("modern", 0),
        ("modern", 1),
    }
    for risk in gen2.duplicates:  # nothing was committed, so the new owner starts from the beginning
        assert (risk.old_owner, risk.new_owner, risk.new_start) == (slow, fast, 0)
