"""The group member machine: unit steps by hand, then wired to the coordinator through the loopback."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto import ErrorCode
from kproto.errors import DecodeError, ProtocolError
from kproto.group.assignors import assign_range, assign_roundrobin
from kproto.group.consumer_codec import ConsumerProtocolCodec
from kproto.group.coordinator import GroupCoordinator
from kproto.group.loopback import Loopback
from kproto.group.member import (
    REACTIONS,
    TRANSITIONS,
    CoordinatorNode,
    GroupFailed,
    GroupMember,
    MemberConfig,
    MemberEvent,
    MemberState,
    MetadataNeeded,
    OffsetsCommitted,
    PartitionsAssigned,
    PartitionsRevoked,
    SendRequest,
)
from kproto.messages import (
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

E = ErrorCode
CODEC = ConsumerProtocolCodec()
NODE = CoordinatorNode(7, "broker", 9092)


def sends(actions):
    return [a for a in actions if isinstance(a, SendRequest)]


def only_send(actions):
    [send] = sends(actions)
    return send


def found(code, node_id=-1, host="", port=-1):
    return GroupCoordinatorResponse(error_code=code, node_id=node_id, host=host, port=port)


def joined(code, generation, protocol, leader, member_id, members=()):
    return JoinGroupResponse(
        error_code=code,
        generation_id=generation,
        protocol_name=protocol,
        leader=leader,
        member_id=member_id,
        members=list(members),
    )


def entry(member_id, metadata):
    return JoinGroupResponse.JoinGroupResponseMember(member_id=member_id, metadata=metadata)


def synced(code, assignment=b""):
    return SyncGroupResponse(error_code=code, assignment=assignment)


def committed(topic, *partitions):
    """An OffsetCommit answer for one topic: (partition, error code) pairs."""
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    return OffsetCommitResponse(
        topics=[
            T(
                name=topic,
                partitions=[
                    T.OffsetCommitResponsePartition(partition_index=p, error_code=code) for p, code in partitions
                ],
            )
        ]
    )


def make_member(**overrides) -> GroupMember:
    settings = dict(
        group_id="g",
        client_id="c",
        topics=("t0", "t1"),
        session_timeout_ms=10000,
        heartbeat_interval_ms=3000,
        auto_commit=False,
    )
    settings.update(overrides)
    return GroupMember(MemberConfig(**settings))


def to_joining(member, now=0):
    """Start the member and answer discovery; returns the JoinGroup send."""
    discover = only_send(member.start(now))
    assert discover.request == GroupCoordinatorRequest(key="g") and discover.destination is None
    actions = member.receive(discover.request_id, found(E.NONE, 7, "broker", 9092), now)
    assert actions[0] == PartitionsRevoked(())  # Java revokes (nothing) before the first join too
    return only_send(actions)


def to_stable(member, now=0, assignment=None, generation=1):
    """Take a follower to Stable with ``assignment``; returns the actions of the SyncGroup answer."""
    join = to_joining(member, now)
    sync = only_send(member.receive(join.request_id, joined(E.NONE, generation, "range", "leader-0", "c-1"), now))
    assert sync.request == SyncGroupRequest(group_id="g", generation_id=generation, member_id="c-1", assignments=[])
    data = CODEC.encode_assignment(assignment or {"t0": [0, 1]})
    return member.receive(sync.request_id, synced(E.NONE, data), now)


# --- the tables -------------------------------------------------------------------------------------


def test_every_state_but_unjoined_is_reachable_and_every_event_is_used():
    reachable = {MemberState.UNJOINED} | set(TRANSITIONS.values())
    assert reachable == set(MemberState)
    assert {event for _, event in TRANSITIONS} == set(MemberEvent)


def test_reaction_tables_have_a_default():
    assert all(E.UNKNOWN in table for table in REACTIONS.values())


# --- the happy path step by step --------------------------------------------------------------------


def test_discovery_join_sync_stable():
    member = make_member(assignors=("range", "roundrobin"))
    join = to_joining(member)
    assert join.destination == NODE
    subscription = CODEC.encode_subscription(["t0", "t1"])
    P = JoinGroupRequest.JoinGroupRequestProtocol
    assert join.request == JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[P(name="range", metadata=subscription), P(name="roundrobin", metadata=subscription)],
    )
    assert join.api_version == 0
    member2 = make_member()
    actions = to_stable(member2, now=5, assignment={"t1": [2], "t0": [0, 1]})
    assert actions == [PartitionsAssigned(1, (("t0", 0), ("t0", 1), ("t1", 2)))]
    assert member2.state is MemberState.STABLE and member2.generation_id == 1
    assert member2.next_deadline_ms() == 3005


def test_heartbeats_follow_the_interval():
    member = make_member()
    to_stable(member)
    assert member.tick(2999) == []
    hb = only_send(member.tick(3000))
    assert hb.request == HeartbeatRequest(group_id="g", generation_id=1, member_id="c-1")
    assert member.next_deadline_ms() == 10000  # only the session check while the heartbeat is out
    assert member.receive(hb.request_id, HeartbeatResponse(error_code=E.NONE), 3100) == []
    assert member.next_deadline_ms() == 6000
    assert member.receive(hb.request_id, HeartbeatResponse(error_code=E.NONE), 3200) == []  # duplicate: ignored


def test_leader_waits_for_metadata_then_assigns():
    member = make_member(topics=("t0",))
    join = to_joining(member)
    members = (
        entry("c-1", CODEC.encode_subscription(["t0"])),
        entry("b-2", CODEC.encode_subscription(["t0", "t1"])),
    )
    actions = member.receive(join.request_id, joined(E.NONE, 1, "range", "c-1", "c-1", members), 0)
    assert actions == [MetadataNeeded(("t0", "t1"))] and member.state is MemberState.AWAITING_METADATA
    sync = only_send(member.update_metadata({"t0": 3, "t1": 2}, 1))
    assignments = {a.member_id: CODEC.decode_assignment(a.assignment) for a in sync.request.assignments}
    assert assignments == assign_range({"c-1": ["t0"], "b-2": ["t0", "t1"]}, {"t0": 3, "t1": 2})


def test_leader_with_metadata_assigns_at_once():
    member = make_member(topics=("t0",))
    member.update_metadata({"t0": 4}, 0)
    join = to_joining(member)
    members = (entry("c-1", CODEC.encode_subscription(["t0"])),)
    sync = only_send(member.receive(join.request_id, joined(E.NONE, 1, "range", "c-1", "c-1", members), 0))
    assert CODEC.decode_assignment(sync.request.assignments[0].assignment) == {"t0": [0, 1, 2, 3]}


# --- error-driven transitions -----------------------------------------------------------------------


def answer_heartbeat(member, code, now=3000):
    hb = only_send(member.tick(now))
    return member.receive(hb.request_id, HeartbeatResponse(error_code=code), now)


def test_rebalance_in_progress_commits_then_revokes_then_rejoins():
    member = make_member(auto_commit=True)
    to_stable(member, assignment={"t0": [0, 1]})
    member.set_position("t0", 0, 40)
    member.set_position("t0", 1, 41)
    member.set_position("t9", 0, 99)  # not owned: not committed
    commit = only_send(answer_heartbeat(member, E.REBALANCE_IN_PROGRESS))
    assert member.state is MemberState.PREPARING_REJOIN
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    assert commit.request == OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id="c-1",
        retention_time_ms=-1,
        topics=[
            T(
                name="t0",
                partitions=[
                    P(partition_index=0, committed_offset=40, committed_metadata=""),
                    P(partition_index=1, committed_offset=41, committed_metadata=""),
                ],
            )
        ],
    )
    assert commit.api_version == 2
    answer = committed("t0", (0, E.NONE), (1, E.NONE))
    actions = member.receive(commit.request_id, answer, 3001)
    assert actions[:2] == [OffsetsCommitted(commit.request_id, answer), PartitionsRevoked((("t0", 0), ("t0", 1)))]
    assert only_send(actions).request.member_id == "c-1"
    assert member.state is MemberState.JOINING and member.assignment == {}


def test_failed_pre_join_commit_still_rejoins():
    member = make_member(auto_commit=True)
    to_stable(member, assignment={"t0": [0]})
    member.set_position("t0", 0, 5)
    commit = only_send(answer_heartbeat(member, E.REBALANCE_IN_PROGRESS))
    answer = committed("t0", (0, E.ILLEGAL_GENERATION))
    assert isinstance(only_send(member.receive(commit.request_id, answer, 3001)).request, JoinGroupRequest)


def test_rebalance_without_auto_commit_revokes_and_rejoins_at_once():
    member = make_member()
    to_stable(member, assignment={"t1": [3]})
    actions = answer_heartbeat(member, E.REBALANCE_IN_PROGRESS)
    assert actions[0] == PartitionsRevoked((("t1", 3),))
    assert only_send(actions).request.member_id == "c-1"


def test_unknown_member_resets_member_id():
    member = make_member()
    to_stable(member)
    join = only_send(answer_heartbeat(member, E.UNKNOWN_MEMBER_ID))
    assert join.request.member_id == "" and member.member_id == ""


def test_illegal_generation_rejoins_with_same_id():
    member = make_member()
    to_stable(member)
    assert only_send(answer_heartbeat(member, E.ILLEGAL_GENERATION)).request.member_id == "c-1"


@pytest.mark.parametrize("code", [E.GROUP_COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR_FOR_GROUP])
def test_coordinator_errors_rediscover_and_keep_partitions(code):
    member = make_member()
    to_stable(member, assignment={"t0": [0]})
    actions = answer_heartbeat(member, code)
    assert only_send(actions).request == GroupCoordinatorRequest(key="g")
    assert not any(isinstance(a, PartitionsRevoked) for a in actions)
    assert member.state is MemberState.DISCOVERING and member.assignment == {"t0": [0]}
    discover = only_send(actions)
    again = member.receive(discover.request_id, found(E.NONE, 8, "other", 9093), 3500)
    assert again == [] and member.state is MemberState.STABLE
    assert only_send(member.tick(6500)).destination == CoordinatorNode(8, "other", 9093)


def test_lost_connection_rediscovers_and_late_answers_are_ignored():
    member = make_member()
    to_stable(member, assignment={"t0": [0]})
    hb = only_send(member.tick(3000))
    discover = only_send(member.request_failed(hb.request_id, 3001))
    assert discover.request == GroupCoordinatorRequest(key="g")
    assert member.receive(hb.request_id, HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS), 3002) == []
    assert member.assignment == {"t0": [0]}


def test_local_session_timeout_marks_coordinator_dead():
    member = make_member()
    to_stable(member)
    only_send(member.tick(3000))  # never answered
    assert member.next_deadline_ms() == 10000
    actions = member.tick(10000)
    assert only_send(actions).request == GroupCoordinatorRequest(key="g")
    assert member.state is MemberState.DISCOVERING


def test_discovery_retries_after_backoff():
    member = make_member(retry_backoff_ms=250)
    discover = only_send(member.start(0))
    assert member.receive(discover.request_id, found(E.GROUP_COORDINATOR_NOT_AVAILABLE), 10) == []
    assert member.next_deadline_ms() == 260
    assert only_send(member.tick(260)).request == GroupCoordinatorRequest(key="g")


def test_join_load_in_progress_retries_and_unknown_member_resends_at_once():
    member = make_member(retry_backoff_ms=100)
    join = to_joining(member)
    assert member.receive(join.request_id, joined(E.GROUP_LOAD_IN_PROGRESS, 0, "", "", ""), 5) == []
    retry = only_send(member.tick(105))
    assert isinstance(retry.request, JoinGroupRequest)
    again = only_send(member.receive(retry.request_id, joined(E.UNKNOWN_MEMBER_ID, 0, "", "", ""), 106))
    assert again.request.member_id == ""


@pytest.mark.parametrize(
    "code",
    [E.INCONSISTENT_GROUP_PROTOCOL, E.INVALID_SESSION_TIMEOUT, E.INVALID_GROUP_ID, E.GROUP_AUTHORIZATION_FAILED, 99],
)
def test_fatal_join_errors(code):
    member = make_member()
    join = to_joining(member)
    actions = member.receive(join.request_id, joined(code, 0, "", "", ""), 1)
    assert actions == [GroupFailed("join_group", code)] and member.state is MemberState.FAILED
    assert member.next_deadline_ms() is None


def test_sync_rebalance_in_progress_rejoins_without_revoking_again():
    member = make_member()
    join = to_joining(member)
    sync = only_send(member.receive(join.request_id, joined(E.NONE, 1, "range", "x", "c-1"), 0))
    actions = member.receive(sync.request_id, synced(E.REBALANCE_IN_PROGRESS), 1)
    assert [type(a) for a in actions] == [SendRequest] and member.state is MemberState.JOINING


# --- misuse and closing -----------------------------------------------------------------------------


def test_wrong_response_type_is_a_protocol_error():
    member = make_member()
    discover = only_send(member.start(0))
    with pytest.raises(ProtocolError):
        member.receive(discover.request_id, HeartbeatResponse(error_code=E.NONE), 1)


def test_commit_needs_a_generation():
    member = make_member()
    member.start(0)
    with pytest.raises(ProtocolError):
        member.commit(1)


def test_manual_commit_and_clock_checks():
    member = make_member()
    to_stable(member, now=10)
    commit = only_send(member.commit(11, {("t0", 0): 5}))
    assert (
        commit.request.generation_id_or_member_epoch == 1
        and commit.request.topics[0].partitions[0].committed_offset == 5
    )
    with pytest.raises(ProtocolError):
        member.tick(5)


def test_close_commits_and_leaves():
    member = make_member(auto_commit=True)
    to_stable(member, assignment={"t0": [0]})
    member.set_position("t0", 0, 3)
    requests = [s.request for s in sends(member.close(100))]
    assert isinstance(requests[0], OffsetCommitRequest)
    assert requests[1] == LeaveGroupRequest(group_id="g", member_id="c-1")
    assert member.state is MemberState.CLOSED and member.close(101) == []


def test_poll_timeout_leaves_loses_the_partitions_and_rejoin_starts_over():
    member = make_member(auto_commit=True)
    to_stable(member, assignment={"t0": [0]})
    member.set_position("t0", 0, 3)
    actions = member.poll_timeout(100)
    # no commit: the partitions are lost (the group hands them on), a commit would be refused anyway
    assert [s.request for s in sends(actions)] == [LeaveGroupRequest(group_id="g", member_id="c-1")]
    assert PartitionsRevoked((("t0", 0),)) in actions
    assert (member.state, member.member_id, member.generation_id, member.assignment) == (MemberState.LEFT, "", -1, {})
    assert member.next_deadline_ms() is None and member.tick(60_000) == [] and member.poll_timeout(60_001) == []
    discover = only_send(member.rejoin(60_002))
    assert discover.request == GroupCoordinatorRequest(key="g")
    join = only_send(member.receive(discover.request_id, found(E.NONE, 7, "broker", 9092), 60_003))  # no revoke again
    assert isinstance(join.request, JoinGroupRequest) and join.request.member_id == ""
    assert member.rejoin(60_004) == []  # only from LEFT


def test_unknown_assignor_is_rejected():
    with pytest.raises(ValueError):
        make_member(assignors=("sticky",))


# --- the consumer-protocol codec (worked examples 7.3 and 7.5) ----------------------------------------


def test_codec_matches_worked_examples():
    assert CODEC.encode_subscription(["test"]) == bytes.fromhex("0000 00000001 0004 74657374 00000000")
    assignment = bytes.fromhex("0000 00000001 0004 74657374 00000001 00000000 00000000")
    assert CODEC.encode_assignment({"test": [0]}) == assignment
    assert CODEC.decode_assignment(assignment) == {"test": [0]}
    assert CODEC.decode_subscription(CODEC.encode_subscription(["a", "b"])) == ["a", "b"]


def test_codec_reads_newer_versions_as_v0_and_rejects_negative():
    newer = bytes.fromhex("0003 00000001 0004 74657374 00000000") + b"future"
    assert CODEC.decode_subscription(newer) == ["test"]
    with pytest.raises(DecodeError):
        CODEC.decode_subscription(bytes.fromhex("ffff 00000000 00000000"))
    with pytest.raises(DecodeError):
        CODEC.decode_assignment(b"\x00")
    assert CODEC.decode_assignment(b"") == {}


# --- members wired to the coordinator ---------------------------------------------------------------

PARTITIONS = {"t0": 3, "t1": 3}


def loopback(**kwargs):
    ids = itertools.count(1)
    coordinator = GroupCoordinator(member_id_suffix=lambda: str(next(ids)))
    return Loopback(coordinator, PARTITIONS, **kwargs)


def consumer(name, topics=("t0", "t1"), **overrides):
    settings = dict(
        group_id="g",
        client_id=name,
        topics=topics,
        session_timeout_ms=10000,
        heartbeat_interval_ms=3000,
        auto_commit=False,
    )
    settings.update(overrides)
    return GroupMember(MemberConfig(**settings))


def owned(lb):
    return {
        name: {t: sorted(ps) for t, ps in m.assignment.items() if ps}
        for name, m in lb.members.items()
        if name not in lb.silenced
    }


def expected(lb, assign=assign_range):
    live = {n: m for n, m in lb.members.items() if n not in lb.silenced}
    subs = {m.member_id: list(m.config.topics) for m in live.values()}
    result = assign(subs, PARTITIONS)
    return {n: {t: sorted(ps) for t, ps in result[m.member_id].items()} for n, m in live.items()}


def assert_converged(lb, assign=assign_range):
    generations = {m.generation_id for n, m in lb.members.items() if n not in lb.silenced}
    snapshot = lb.coordinator.snapshot("g")
    assert snapshot.state.value == "Stable" and generations == {snapshot.generation_id}
    assert all(m.state is MemberState.STABLE for n, m in lb.members.items() if n not in lb.silenced)
    assert owned(lb) == expected(lb, assign)


def test_two_members_converge_to_the_java_range_assignment():
    lb = loopback()
    lb.add("C0", consumer("C0"))
    lb.add("C1", consumer("C1"))
    lb.advance(10_000)
    assert_converged(lb)
    assert owned(lb) == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}


def test_roundrobin_group_converges_to_the_java_assignment():
    lb = loopback()
    for name in ("C0", "C1"):
        lb.add(name, consumer(name, assignors=("roundrobin", "range")))
    lb.advance(10_000)
    assert_converged(lb, assign_roundrobin)
    assert owned(lb) == {"C0": {"t0": [0, 2], "t1": [1]}, "C1": {"t0": [1], "t1": [0, 2]}}


def test_third_member_rebalances_and_redistributes():
    lb = loopback()
    lb.add("C0", consumer("C0"))
    lb.add("C1", consumer("C1"))
    lb.advance(10_000)
    before = lb.coordinator.snapshot("g").generation_id
    seen = len(lb.events)
    lb.add("C2", consumer("C2", topics=("t0",)))
    lb.advance(20_000)
    assert_converged(lb)
    assert lb.coordinator.snapshot("g").generation_id == before + 1
    assert owned(lb) == {"C0": {"t0": [0], "t1": [0, 1]}, "C1": {"t0": [1], "t1": [2]}, "C2": {"t0": [2]}}
    revoked = [name for name, event in lb.events[seen:] if isinstance(event, PartitionsRevoked) and event.partitions]
    assert sorted(revoked) == ["C0", "C1"]


def test_silent_member_is_evicted_and_survivors_own_everything():
    lb = loopback()
    for name in ("C0", "C1", "C2"):
        lb.add(name, consumer(name))
    lb.advance(10_000)
    assert_converged(lb)
    lb.silence("C1")
    lb.advance(40_000)
    assert_converged(lb)
    assert owned(lb) == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C2": {"t0": [2], "t1": [2]}}


def test_a_member_that_stops_polling_leaves_and_comes_back():
    lb = loopback()
    for name in ("C0", "C1", "C2"):
        lb.add(name, consumer(name, rebalance_timeout_ms=30_000))
    lb.advance(10_000)
    assert_converged(lb)
    generation = lb.coordinator.snapshot("g").generation_id
    lb.deliver("C1", lb.members["C1"].poll_timeout(lb.now_ms))
    lb.silenced.add("C1")  # away: its LEFT state ticks nothing
    lb.advance(20_000)  # well inside every session: only the LeaveGroup made the others rebalance
    assert_converged(lb)
    assert owned(lb) == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C2": {"t0": [2], "t1": [2]}}
    assert lb.coordinator.snapshot("g").generation_id == generation + 1
    lb.silenced.discard("C1")
    lb.deliver("C1", lb.members["C1"].rejoin(lb.now_ms))
    lb.advance(30_000)
    assert_converged(lb)
    assert lb.coordinator.snapshot("g").generation_id == generation + 2 and len(owned(lb)) == 3


def test_leader_leaving_elects_a_new_leader():
    lb = loopback()
    for name in ("C0", "C1", "C2"):
        lb.add(name, consumer(name))
    lb.advance(10_000)
    assert lb.coordinator.snapshot("g").leader_id == lb.members["C0"].member_id
    lb.close("C0")
    lb.advance(20_000)
    assert_converged(lb)
    assert lb.coordinator.snapshot("g").leader_id == lb.members["C1"].member_id


def test_auto_commit_stores_positions_and_commits_before_rebalance():
    lb = loopback()
    lb.add("C0", consumer("C0", auto_commit=True, auto_commit_interval_ms=4000))
    lb.advance(5_000)
    for topic, partitions in lb.members["C0"].assignment.items():
        for p in partitions:
            lb.members["C0"].set_position(topic, p, 100 + p)
    lb.advance(9_500)  # a periodic auto-commit has gone out by now
    assert lb.coordinator.committed("g")[("t0", 2)] == (102, "")
    lb.members["C0"].set_position("t0", 2, 500)
    lb.add("C1", consumer("C1", auto_commit=True))
    lb.advance(20_000)
    assert lb.coordinator.committed("g")[("t0", 2)] == (500, "")  # committed on the way into the rebalance
    assert_converged(lb)


def test_coordinator_moving_does_not_revoke():
    lb = loopback()
    lb.add("C0", consumer("C0"))
    lb.add("C1", consumer("C1"))
    lb.advance(10_000)
    lb.coordinator.active = False  # every request now gets GROUP_COORDINATOR_NOT_AVAILABLE
    lb.advance(13_500)
    lb.coordinator.active = True
    revoked_before = sum(isinstance(e, PartitionsRevoked) for _, e in lb.events)
    lb.advance(30_000)
    assert_converged(lb)
    assert sum(isinstance(e, PartitionsRevoked) for _, e in lb.events) == revoked_before


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from([("t0",), ("t1",), ("t0", "t1")])),
        st.tuples(st.just("silence"), st.integers(0, 7)),
        st.tuples(st.just("close"), st.integers(0, 7)),
        st.tuples(st.just("advance"), st.integers(0, 15_000)),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(operations, st.sampled_from([("range",), ("roundrobin",)]))
def test_any_history_converges_to_the_java_assignment(ops, assignors):
    lb = loopback()
    names = []
    for op, arg in ops:
        live = [n for n in names if n not in lb.silenced]
        if op == "add":
            name = f"C{len(names)}"
            names.append(name)
            lb.add(name, consumer(name, topics=arg, assignors=assignors))
        elif op == "silence" and live:
            lb.silence(live[arg % len(live)])
        elif op == "close" and live:
            lb.close(live[arg % len(live)])
        elif op == "advance":
            lb.advance(lb.now_ms + arg)
    lb.advance(lb.now_ms + 60_000)  # long enough for evictions and a final rebalance
    if any(n not in lb.silenced for n in names):
        assert_converged(lb, assign_range if assignors == ("range",) else assign_roundrobin)
    else:
        assert lb.coordinator.snapshot("g") is None


def test_coordinator_disconnect_between_requests_rediscovers():
    member = make_member()
    to_stable(member, assignment={"t0": [0]})
    assert only_send(member.coordinator_disconnected(100)).request == GroupCoordinatorRequest(key="g")
    assert member.coordinator is None and member.assignment == {"t0": [0]}
    assert member.coordinator_disconnected(101) == []  # nothing more to lose


def test_member_requests_and_responses_travel_as_frames():
    """What the member emits is a wire message in the version it names; decoded responses go straight back."""
    import kproto

    def over_the_wire(send, answer_with):
        _, request = kproto.decode_request(kproto.encode_request(send.request, send.api_version, 1))
        response = answer_with(request, send.api_version)
        frame = kproto.encode_response(response, send.api_version, 1)
        return kproto.decode_response(frame, request.API_KEY, send.api_version)[1]

    def coordinator_answer(request, version):
        [reply] = coordinator.handle("t", request, version, client_id="c", client_host="/h", now_ms=0)
        return reply.result

    member = make_member()
    member.update_metadata({"t0": 1, "t1": 1}, 0)
    coordinator = GroupCoordinator(member_id_suffix=lambda: "1")
    discover = only_send(member.start(0))
    answer = over_the_wire(discover, lambda request, version: found(E.NONE, 7, "broker", 9092))
    join = only_send(member.receive(discover.request_id, answer, 0))
    sync = only_send(member.receive(join.request_id, over_the_wire(join, coordinator_answer), 0))
    assert member.state is MemberState.SYNCING and member.member_id == "c-1"
    synced_answer = over_the_wire(sync, coordinator_answer)
    assert member.receive(sync.request_id, synced_answer, 0) == [PartitionsAssigned(1, (("t0", 0), ("t1", 0)))]
    hb = only_send(member.tick(3000))
    with pytest.raises(ProtocolError, match="answered by SyncGroupResponse, not HeartbeatResponse"):
        member.receive(hb.request_id, synced_answer, 3000)
