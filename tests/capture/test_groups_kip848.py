"""KIP-848 groups in captures (kproto.capture.heartbeat_groups through kproto.capture.groups).

The recorded sample ``samples/modern/kip848-session-expiry.pcap`` (kproto's and librdkafka's consumers in
one group, a join, then a stalled member's session expiry, and a classic group beside it) is checked for
what it must show; a scripted conversation covers what a recording cannot make on demand: a heartbeat
answer missing from the capture, a member fenced with FENCED_MEMBER_EPOCH that rejoins, a commit refused
with STALE_MEMBER_EPOCH.  A capture cut short must give fewer facts, never wrong ones.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from kproto.capture.groups import GroupReport, analyse_capture, report_dict
from kproto.pcap.writer import write_capture
from kproto.cli.groups import report_lines
from test_groups_analysis import SAMPLES, Script, fetch_answer, join_v5, join_v5_answer, ns

SAMPLE = SAMPLES / "modern" / "kip848-session-expiry.pcap"
SESSION_MS = 3000  # the recording broker's group.consumer.session.timeout.ms
HEARTBEAT_MS = 1000  # and its group.consumer.heartbeat.interval.ms


def by_client(report: GroupReport) -> Dict[str, str]:
    return {str(m.client_id): m.member_id for m in report.members.values()}


def test_sample_two_protocols_epochs_moves_and_records_read_twice() -> None:
    reports = {r.group_id: r for r in analyse_capture(SAMPLE)}
    assert set(reports) == {"classic-group", "kip848-group"}
    classic, kip = reports["classic-group"], reports["kip848-group"]
    assert classic.protocol == "classic" and classic.heartbeat is None and len(classic.generations) == 1
    assert kip.protocol == "consumer" and kip.generations == [] and kip.problems == []
    ids = by_client(kip)
    stalled, joiner = ids["kproto-consumer"], ids["librdkafka-consumer"]
    timeline = kip.heartbeat
    assert timeline is not None
    assert [e.epoch for e in timeline.epochs] == [1, 2, 3]
    assert timeline.epochs[0].causes == [f"{stalled} joined"]
    assert timeline.epochs[1].causes == [f"{joiner} joined"]
    (expiry,) = timeline.epochs[2].causes
    assert expiry.startswith(f"{stalled}'s session expired")
    # the stalled member is removed after its session timeout, found at the next heartbeat of the other
    quiet_ms = (timeline.epochs[2].first_seen_ns - timeline.expired[stalled]) / 1e6
    assert SESSION_MS <= quiet_ms <= SESSION_MS + HEARTBEAT_MS + 2000
    assert list(timeline.expired) == [stalled] and timeline.fenced == {}
    assert kip.members[stalled].expired and kip.members[joiner].left_ns is not None
    # the stalled member's epochs: 1 while it owned everything and revoked two, 2 after
    assert [(s.sent_epoch, s.member_epoch) for s in timeline.steps[stalled][:2]] == [(0, 1), (1, 1)]
    assert {s.member_epoch for s in timeline.steps[stalled]} == {1, 2}
    revoking = [s for s in timeline.steps[stalled] if s.owned and s.owned != s.assigned]
    assert revoking and revoking[0].owned == {"orders": [0, 1, 2, 3]} and revoking[0].assigned == {"orders": [0, 1]}
    moves = {(m.partition, m.cause): m for m in timeline.moves}
    assert set(moves) == {(2, "revoked"), (3, "revoked"), (0, "session expired"), (1, "session expired")}
    for m in timeline.moves:
        assert (m.topic, m.old_owner, m.new_owner) == ("orders", stalled, joiner)
        assert (m.from_what, m.to_what) == ("last fetch", "first fetch")
        # nothing past the last commit was committed, so the new owner starts there and reads the rest again
        assert m.new_start == m.committed and m.old_position is not None
        assert m.records_twice == m.old_position - m.committed > 0
        if m.cause == "revoked":  # released at the member's next heartbeat, taken at the joiner's next
            assert 0 < m.gap_ms <= 2 * HEARTBEAT_MS + 1000
        else:  # from its last fetch to the joiner's first fetch after the expiry
            assert SESSION_MS <= m.gap_ms <= SESSION_MS + 2 * HEARTBEAT_MS + 2000
    assert sorted((p, m.records_twice) for (p, _), m in moves.items()) == [(0, 4), (1, 2), (2, 2), (3, 3)]
    # the coordinator's own account, asked while the join was reconciled and after the expiry
    reconciling, stable = timeline.descriptions
    assert (reconciling.state, reconciling.group_epoch, reconciling.assignment_epoch) == ("Reconciling", 2, 2)
    assert {m.member_id: (m.member_epoch, m.assigned, m.target) for m in reconciling.members} == {
        stalled: (1, {"orders": [0, 1, 2, 3]}, {"orders": [0, 1]}),
        joiner: (2, {}, {"orders": [2, 3]}),
    }
    assert (stable.state, stable.group_epoch, [m.member_id for m in stable.members]) == ("Stable", 3, [joiner])
    assert stable.members[0].target == stable.members[0].assigned == {"orders": [0, 1, 2, 3]}
    # member epochs on OffsetCommit are not generations: no "generation in use" problem
    assert all("generation" not in p for p in kip.problems)


def test_sample_text_and_json() -> None:
    (kip,) = [r for r in analyse_capture(SAMPLE) if r.group_id == "kip848-group"]
    text = "\n".join(report_lines(kip))
    assert "protocol consumer" in text.splitlines()[0]
    assert "group epochs (consumer protocol):" in text
    assert text.count("PROCESSED TWICE orders[") == 4
    assert "(session expired): without an owner 3," in text
    as_json = json.loads(json.dumps(report_dict(kip)))
    part = as_json["consumer_protocol"]
    assert [e["epoch"] for e in part["group_epochs"]] == [1, 2, 3]
    assert [d["group_epoch"] for d in part["descriptions"]] == [2, 3]
    assert "described " in text and "target orders[2, 3]" in text
    assert sum(m["records_twice"] for m in part["moves"]) == 11


def test_cut_capture_gives_fewer_facts_not_wrong_ones(tmp_path: Path) -> None:
    """The capture ends while the stalled member's session runs: no expiry, no move it did not see."""
    (kip,) = [r for r in analyse_capture(SAMPLE) if r.group_id == "kip848-group"]
    assert kip.heartbeat is not None
    cut_at = kip.heartbeat.epochs[2].first_seen_ns - 1_000_000_000  # a second before the expiry showed
    data = SAMPLE.read_bytes()
    # pcap: 24-byte header, then records of a 16-byte header (seconds, microseconds, caught, length)
    offset = 24
    while offset < len(data):
        seconds = int.from_bytes(data[offset : offset + 4], "little")
        micros = int.from_bytes(data[offset + 4 : offset + 8], "little")
        if seconds * 10**9 + micros * 1000 > cut_at:
            break
        offset += 16 + int.from_bytes(data[offset + 8 : offset + 12], "little")
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: offset + 30])  # the next record cut inside its header
    (short,) = [r for r in analyse_capture(cut) if r.group_id == "kip848-group"]
    assert short.heartbeat is not None
    assert [e.epoch for e in short.heartbeat.epochs] == [1, 2]
    assert short.heartbeat.expired == {}
    assert {m.cause for m in short.heartbeat.moves} == {"revoked"}
    assert not any(m.expired for m in short.members.values())


# --- scripted edge cases ------------------------------------------------------------------------------------

TOPIC_ID = str(uuid.UUID(int=7))


def heartbeat(member: str, epoch: int, owned: Optional[List[int]], subscribe: bool = False) -> Dict[str, Any]:
    return {
        "group_id": "edge",
        "member_id": member,
        "member_epoch": epoch,
        "rebalance_timeout_ms": 300000 if epoch == 0 else -1,
        "subscribed_topic_names": ["parcels"] if subscribe else None,
        "topic_partitions": None if owned is None else [{"topic_id": TOPIC_ID, "partitions": owned}],
    }


def answer(member: str, epoch: int, assigned: Optional[List[int]], error: int = 0) -> Dict[str, Any]:
    return {
        "error_code": error,
        "member_id": member,
        "member_epoch": epoch,
        "heartbeat_interval_ms": 1000,
        "assignment": None
        if assigned is None
        else {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": assigned}]},
    }


def fetch_v13(partition: int, offset: int) -> Dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
    }


def fetch_v13_answer(partition: int, first: int, count: int) -> Dict[str, Any]:
    v4 = fetch_answer(partition, first, count)["responses"][0]
    return {"responses": [{"topic_id": TOPIC_ID, "partitions": v4["partitions"]}]}


def commit(member: str, epoch: int, offset: int) -> Dict[str, Any]:
    return {
        "group_id": "edge",
        "generation_id_or_member_epoch": epoch,
        "member_id": member,
        "topics": [{"name": "parcels", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
    }


def commit_answer(error: int) -> Dict[str, Any]:
    return {"topics": [{"name": "parcels", "partitions": [{"partition_index": 0, "error_code": error}]}]}


def edge_capture(tmp_path: Path, classic_member: bool = False) -> Path:
    """Group 'edge': a-1 joins and owns parcels 0 and 1; b-1 joins, a-1 revokes 1, b-1 takes it; a-1
    fetches partition 0 to offset 15 but commits 10; a-1's next heartbeat answer is not captured, then it
    goes quiet; the coordinator gives partition 0 to b-1 (a-1 was removed); a-1's next heartbeat is
    answered FENCED_MEMBER_EPOCH, its commit STALE_MEMBER_EPOCH, and it rejoins."""
    a = Script(("10.1.0.41", 42001), "alpha")
    b = Script(("10.1.0.42", 42002), "beta")
    metadata = {
        "brokers": [],
        "topics": [{"error_code": 0, "name": "parcels", "topic_id": TOPIC_ID, "is_internal": False, "partitions": []}],
    }
    a.exchange("Metadata", 12, {"topics": None, "allow_auto_topic_creation": False}, metadata, 0.0, 0.001)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 0, [], True), answer("a-1", 1, [0, 1]), 0.01, 0.011)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 1, [0, 1]), answer("a-1", 1, None), 0.02, 0.021)
    b.exchange("ConsumerGroupHeartbeat", 1, heartbeat("b-1", 0, [], True), answer("b-1", 2, []), 1.0, 1.001)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 1, None), answer("a-1", 1, [0]), 1.5, 1.501)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 1, [0]), answer("a-1", 2, None), 1.51, 1.511)
    b.exchange("ConsumerGroupHeartbeat", 1, heartbeat("b-1", 2, None), answer("b-1", 2, [1]), 2.0, 2.001)
    b.exchange("ConsumerGroupHeartbeat", 1, heartbeat("b-1", 2, [1]), answer("b-1", 2, None), 2.01, 2.011)
    a.exchange("Fetch", 13, fetch_v13(0, 10), fetch_v13_answer(0, 10, 5), 2.5, 2.501)
    a.exchange("OffsetCommit", 9, commit("a-1", 2, 10), commit_answer(0), 2.6, 2.601)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 2, None), answer("a-1", 2, None), 3.0, 3.001)
    a.messages.pop()  # that answer is not in the capture
    b.exchange("ConsumerGroupHeartbeat", 1, heartbeat("b-1", 2, None), answer("b-1", 3, [0, 1]), 7.0, 7.001)
    b.exchange("ConsumerGroupHeartbeat", 1, heartbeat("b-1", 3, [0, 1]), answer("b-1", 3, None), 7.01, 7.011)
    b.exchange("Fetch", 13, fetch_v13(0, 10), fetch_v13_answer(0, 10, 5), 7.1, 7.101)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 2, None), answer("a-1", 2, None, 110), 8.0, 8.001)
    a.exchange("OffsetCommit", 9, commit("a-1", 2, 15), commit_answer(113), 8.05, 8.051)
    a.exchange("ConsumerGroupHeartbeat", 1, heartbeat("a-1", 0, [], True), answer("a-1", 4, []), 8.1, 8.101)
    scripts = [a, b]
    if classic_member:  # a classic consumer in the same group id (Kafka serves it in a consumer group)
        c = Script(("10.1.0.43", 42003), "gamma")
        join = {**join_v5("c-1", "host-c"), "group_id": "edge"}
        c.exchange("JoinGroup", 5, join, join_v5_answer(5, "c-1", "c-1", [("c-1", "host-c")]), 9.0, 9.01)
        scripts.append(c)
    path = tmp_path / "edge.pcap"
    write_capture(path, [x.conversation() for x in scripts])
    return path


def test_lost_answer_fencing_and_rejoin(tmp_path: Path) -> None:
    (edge,) = analyse_capture(edge_capture(tmp_path))
    timeline = edge.heartbeat
    assert timeline is not None and edge.protocol == "consumer"
    assert [(e.epoch, e.first_seen_ns) for e in timeline.epochs] == [
        (1, ns(0.011)),
        (2, ns(1.001)),
        (3, ns(7.001)),
        (4, ns(8.101)),
    ]
    assert timeline.epochs[0].causes == ["a-1 joined"] and timeline.epochs[1].causes == ["b-1 joined"]
    assert timeline.epochs[2].causes == ["a-1's session expired (4,001 ms after its last heartbeat)"]
    assert timeline.epochs[3].causes == ["a-1 rejoined"]
    assert timeline.expired == {"a-1": ns(3.0)} and timeline.fenced == {"a-1": ns(8.001)}
    steps = {round((s.time_ns - ns(0)) / 1e9, 3): s for s in timeline.steps["a-1"]}
    # the topic id is named through the capture's Metadata
    assert steps[0.02].owned == {"parcels": [0, 1]} and steps[0.02].assigned == {"parcels": [0, 1]}
    assert steps[1.5].owned == {"parcels": [0, 1]} and steps[1.5].assigned == {"parcels": [0]}
    # the missing answer may have changed the assignment: unknown, not carried forward
    assert steps[3.0].assigned is None and steps[3.0].member_epoch is None
    assert steps[3.0].note == "no response in the capture"
    assert steps[8.0].error == "FENCED_MEMBER_EPOCH" and steps[8.0].note == "fenced"
    assert (steps[8.1].note, steps[8.1].member_epoch, steps[8.1].owned) == ("rejoined", 4, {})
    assert any("a-1" in p and "missing" in p for p in edge.problems)
    revoked, expired = timeline.moves
    assert (revoked.partition, revoked.cause, revoked.released_ns, revoked.assigned_ns) == (
        1,
        "revoked",
        ns(1.51),
        ns(2.001),
    )
    assert (revoked.from_what, revoked.to_what, round(revoked.gap_ms, 3)) == ("released", "assigned", 491.0)
    assert (expired.partition, expired.cause, expired.released_ns) == (0, "session expired", None)
    assert (expired.from_what, expired.from_ns, expired.to_what, expired.to_ns) == (
        "last fetch",
        ns(2.5),
        "first fetch",
        ns(7.1),
    )
    assert (expired.committed, expired.old_position, expired.new_start, expired.records_twice) == (10, 15, 10, 5)
    refused = [c for c in edge.commits if c.error != "NONE"]
    assert [(c.member_id, c.generation, c.offset, c.error) for c in refused] == [("a-1", 2, 15, "STALE_MEMBER_EPOCH")]
    text = "\n".join(report_lines(edge))
    assert "commit refused parcels[0]=15 by a-1 (member epoch 2): STALE_MEMBER_EPOCH" in text
    assert "fenced: a-1" in text and "epoch 2->unknown  owned parcels[0]  assigned unknown" in text


def test_one_group_id_with_both_protocols(tmp_path: Path) -> None:
    (edge,) = analyse_capture(edge_capture(tmp_path, classic_member=True))
    assert edge.protocol == "classic+consumer"
    assert [g.generation_id for g in edge.generations] == [5] and edge.generations[0].members == ["c-1"]
    assert edge.heartbeat is not None and [e.epoch for e in edge.heartbeat.epochs] == [1, 2, 3, 4]
    assert report_lines(edge)[0].endswith("protocol classic+consumer")


def test_capture_beginning_mid_group(tmp_path: Path) -> None:
    """The first heartbeat seen is at epoch 5 with nulls: owned and assigned are unknown until reported,
    and the epoch is listed without a cause the capture shows."""
    d = Script(("10.1.0.44", 42004), "delta")
    d.exchange("ConsumerGroupHeartbeat", 1, heartbeat("d-1", 5, None), answer("d-1", 5, None), 0.0, 0.001)
    d.exchange("ConsumerGroupHeartbeat", 1, heartbeat("d-1", 5, [2]), answer("d-1", 5, [2]), 1.0, 1.001)
    path = tmp_path / "mid.pcap"
    write_capture(path, [d.conversation()])
    (group,) = analyse_capture(path)
    assert group.heartbeat is not None
    first, second = group.heartbeat.steps["d-1"]
    assert (first.owned, first.assigned) == (None, None) and first.note.startswith("first heartbeat in the capture")
    assert (second.owned, second.assigned) == ({TOPIC_ID: [2]}, {TOPIC_ID: [2]})  # no Metadata: the id stays
    assert [(e.epoch, e.causes[0].startswith("none in the capture")) for e in group.heartbeat.epochs] == [(5, True)]
    assert any("d-1 joined before the capture began" in p for p in group.problems)
    assert group.heartbeat.moves == [] and group.heartbeat.expired == {}
