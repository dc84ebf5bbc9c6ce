"""Group analysis of traffic real clients produced: kafka-python 3, librdkafka and aiokafka consuming as
one group at their defaults (``samples/modern/``, recorded against the mock broker).

The facts checked are the ones the recording fixes (one consumer per capture, its client id, the group)
and the ones the packets fix (each known start is a JoinGroup request's capture time, each known end a
SyncGroup answer's, the duration their difference).  The samples come from the modern-samples work;
until they are in the tree this module says so and skips.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kproto.capture.groups import analyse_capture
from test_groups_analysis import SAMPLES

CLIENTS = {"kafka-python-produce-consume.pcap": "kafka-python-consumer",
           "librdkafka-produce-consume.pcap": "librdkafka-consumer",
           "aiokafka-produce-consume.pcap": "aiokafka-consumer"}


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_real_client_group(name: str) -> None:
    path: Path = SAMPLES / "modern" / name
    if not path.exists():
        pytest.skip(f"samples/modern/{name} (recorded real-client traffic) is not in this tree yet")
    (report,) = analyse_capture(path)
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
