"""The group coordinator machine at the 0.9 versions, driven call by call with an injected clock
(docs/group-coordinator.md).

The modern versions (static membership, member-id-required, batch leave, multi-group fetch, admin APIs)
are in tests/group/test_group_modern.py."""

from __future__ import annotations

import itertools

import pytest

from kproto import ErrorCode
from kproto.errors import ProtocolError
from kproto.group.coordinator import (
    CHECK_ERRORS,
    CHECKS,
    RESPONSES,
    TRANSITIONS,
    Check,
    CoordinatorConfig,
    GroupCoordinator,
    CoordinatorEvent,
    GroupState,
    RequestKind,
)
from kproto.errors import UnsupportedVersionError
from kproto.messages import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupCoordinatorRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

E = ErrorCode
RANGE = (("range", b"meta"),)


def new_coordinator(**kwargs) -> GroupCoordinator:
    ids = itertools.count(1)
    return GroupCoordinator(member_id_suffix=lambda: str(next(ids)), **kwargs)


def results(replies):
    """token → result; asserts no token is answered twice in one batch."""
    out = {}
    for reply in replies:
        assert reply.reply_to not in out
        out[reply.reply_to] = reply.result
    return out


def send(c, token, request, now, version=0, client_id="c"):
    return results(c.handle(token, request, version, client_id=client_id, client_host="/127.0.0.1", now_ms=now))


def join(
    c, token, now, *, member_id="", client_id="c", group="g", timeout=10000, protocols=RANGE, protocol_type="consumer"
):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=timeout,
        member_id=member_id,
        protocol_type=protocol_type,
        protocols=[P(name=n, metadata=m) for n, m in protocols],
    )
    return send(c, token, request, now, client_id=client_id)


def sync(c, token, now, member_id, generation, assignments=None, group="g"):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    request = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()],
    )
    return send(c, token, request, now)


def heartbeat(c, now, member_id, generation, group="g"):
    request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
    return send(c, "hb", request, now)["hb"]


def leave(c, token, now, member_id, group="g"):
    return send(c, token, LeaveGroupRequest(group_id=group, member_id=member_id), now)


def describe(c, now, *group_ids):
    return send(c, "d", DescribeGroupsRequest(groups=list(group_ids)), now)["d"].groups


def list_groups(c, now):
    return send(c, "l", ListGroupsRequest(), now)["l"]


def commit(c, now, member_id, generation, offsets, group="g", retention=-1):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    by_topic = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        by_topic.setdefault(topic, []).append(
            T.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        retention_time_ms=retention,
        topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    reply = send(c, "commit", request, now, version=2)["commit"]
    return {(t.name, p.partition_index): p.error_code for t in reply.topics for p in t.partitions}


def fetch(c, now, partitions=None, group="g"):
    by_topic = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    request = OffsetFetchRequest(group_id=group, topics=[T(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
    reply = send(c, "fetch", request, now, version=1)["fetch"]
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in reply.topics
        for p in t.partitions
    }


def synced(code, assignment=b""):
    return SyncGroupResponse(error_code=code, assignment=assignment)


def joined(code, generation, protocol, leader, member_id, members=()):
    M = JoinGroupResponse.JoinGroupResponseMember
    return JoinGroupResponse(
        error_code=code,
        generation_id=generation,
        protocol_name=protocol,
        leader=leader,
        member_id=member_id,
        members=[M(member_id=m, metadata=d) for m, d in members],
    )


def stable_pair(c, now=0):
    """Members a-1 (leader) and b-2 in generation 2, Stable, with assignments b"A" and b"B"."""
    assert join(c, "a", now, client_id="a")["a"].generation_id == 1
    assert join(c, "b", now, client_id="b") == {}  # parked: a must rejoin
    answers = join(c, "a2", now, member_id="a-1", client_id="a")
    assert set(answers) == {"a2", "b"}
    assert sync(c, "sb", now, "b-2", 2) == {}
    done = sync(c, "sa", now, "a-1", 2, {"a-1": b"A", "b-2": b"B"})
    assert done == {"sa": synced(E.NONE, b"A"), "sb": synced(E.NONE, b"B")}
    return answers


# --- the tables -------------------------------------------------------------------------------------


def test_transition_table_matches_valid_previous_states():
    previous = {}
    for (src, _event), dst in TRANSITIONS.items():
        if src != dst:
            previous.setdefault(dst, set()).add(src)
    S = GroupState
    assert previous == {  # Kafka's GroupMetadata validPreviousStates
        S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.EMPTY: {S.PREPARING_REBALANCE},
        S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY},
    }


def test_response_table_is_complete():
    assert set(RESPONSES) == {(k, s) for k in RequestKind for s in GroupState}
    K = RequestKind
    # A group that does not exist: member requests are told the member is unknown.
    assert all(
        RESPONSES[(k, GroupState.DEAD)] == E.UNKNOWN_MEMBER_ID for k in (K.JOIN_KNOWN_MEMBER, K.SYNC, K.HEARTBEAT)
    )


def test_every_check_has_a_code_and_state_is_consulted_once_per_api():
    assert set(CHECK_ERRORS) == set(Check)
    for api, checks in CHECKS.items():
        assert checks[0] is Check.COORDINATOR_ACTIVE
        assert checks.count(Check.STATE) == (
            0 if api in (OffsetFetchRequest, LeaveGroupRequest, OffsetDeleteRequest) else 1
        )


def test_coordinator_event_names_are_documented():
    assert all(event.value for event in CoordinatorEvent)


# --- joining and syncing ----------------------------------------------------------------------------


def test_first_member_joins_alone_and_becomes_leader():
    c = new_coordinator()
    answer = join(c, "t", 0, client_id="kproto")["t"]
    assert answer == joined(E.NONE, 1, "range", "kproto-1", "kproto-1", [("kproto-1", b"meta")])
    assert c.snapshot("g").state is GroupState.AWAITING_SYNC
    assert sync(c, "s", 5, "kproto-1", 1, {"kproto-1": b"x"}) == {"s": synced(E.NONE, b"x")}
    assert c.snapshot("g").state is GroupState.STABLE


def test_two_members_split_and_only_the_leader_sees_members():
    c = new_coordinator()
    answers = stable_pair(c)
    leader, follower = answers["a2"], answers["b"]
    assert (leader.generation_id, leader.leader, leader.member_id) == (2, "a-1", "a-1")
    assert [m.member_id for m in leader.members] == ["a-1", "b-2"]
    assert (follower.generation_id, follower.leader, follower.member_id, follower.members) == (2, "a-1", "b-2", [])
    assert heartbeat(c, 100, "a-1", 2) == HeartbeatResponse(error_code=E.NONE)
    assert heartbeat(c, 100, "b-2", 2) == HeartbeatResponse(error_code=E.NONE)


def test_third_member_triggers_rebalance_and_generation_increments():
    c = new_coordinator()
    stable_pair(c)
    assert join(c, "c", 1000, client_id="c") == {}
    assert c.snapshot("g").state is GroupState.PREPARING_REBALANCE
    assert heartbeat(c, 1001, "a-1", 2).error_code == E.REBALANCE_IN_PROGRESS
    assert join(c, "a3", 1002, member_id="a-1", client_id="a") == {}
    answers = join(c, "b3", 1003, member_id="b-2", client_id="b")
    assert {t: r.generation_id for t, r in answers.items()} == {"a3": 3, "b3": 3, "c": 3}
    assert [m.member_id for m in answers["a3"].members] == ["a-1", "b-2", "c-3"]
    assert heartbeat(c, 1004, "b-2", 3).error_code == E.NONE  # CompletingRebalance: heartbeats are fine
    assert heartbeat(c, 1004, "b-2", 2).error_code == E.ILLEGAL_GENERATION
    sync(c, "sa", 1005, "a-1", 3, {"a-1": b"1", "b-2": b"2", "c-3": b"3"})
    assert heartbeat(c, 1006, "b-2", 2).error_code == E.ILLEGAL_GENERATION
    assert commit(c, 1006, "b-2", 2, {("t", 0): (5, "")}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert sync(c, "sc", 1007, "c-3", 3) == {"sc": synced(E.NONE, b"3")}


def test_leader_assignment_fills_missing_members_with_empty_bytes():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    join(c, "a2", 0, member_id="a-1", client_id="a")
    assert sync(c, "sa", 0, "a-1", 2, {"a-1": b"all", "ghost": b"?"}) == {"sa": synced(E.NONE, b"all")}
    assert sync(c, "sb", 1, "b-2", 2) == {"sb": synced(E.NONE, b"")}


def test_new_member_during_awaiting_sync_fails_parked_syncs():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    join(c, "a2", 0, member_id="a-1", client_id="a")
    assert sync(c, "sb", 1, "b-2", 2) == {}
    assert join(c, "c", 2, client_id="c") == {"sb": synced(E.REBALANCE_IN_PROGRESS, b"")}
    assert c.snapshot("g").state is GroupState.PREPARING_REBALANCE
    assert sync(c, "sa", 3, "a-1", 2, {"a-1": b"x"})["sa"].error_code == E.REBALANCE_IN_PROGRESS


def test_known_member_rejoining_unchanged_in_awaiting_sync_is_answered_at_once():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    join(c, "a2", 0, member_id="a-1", client_id="a")
    again = join(c, "b-again", 1, member_id="b-2", client_id="b")["b-again"]
    assert (again.generation_id, again.members) == (2, [])
    leader = join(c, "a-again", 1, member_id="a-1", client_id="a")["a-again"]
    assert [m.member_id for m in leader.members] == ["a-1", "b-2"]
    assert c.snapshot("g").state is GroupState.AWAITING_SYNC
    changed = join(c, "b-changed", 2, member_id="b-2", client_id="b", protocols=(("range", b"new"),))
    assert changed == {} and c.snapshot("g").state is GroupState.PREPARING_REBALANCE


def test_follower_rejoin_in_stable_is_answered_but_leader_rejoin_rebalances():
    c = new_coordinator()
    stable_pair(c)
    follower = join(c, "b3", 10, member_id="b-2", client_id="b")["b3"]
    assert (follower.error_code, follower.generation_id, follower.members) == (E.NONE, 2, [])
    assert c.snapshot("g").state is GroupState.STABLE
    assert join(c, "a3", 11, member_id="a-1", client_id="a") == {}
    assert c.snapshot("g").state is GroupState.PREPARING_REBALANCE


def test_sync_in_preparing_rebalance_and_stable():
    c = new_coordinator()
    stable_pair(c)
    assert sync(c, "again", 10, "b-2", 2) == {"again": synced(E.NONE, b"B")}
    join(c, "c", 11, client_id="c")
    assert sync(c, "late", 12, "b-2", 2) == {"late": synced(E.REBALANCE_IN_PROGRESS, b"")}


# --- protocols, validation ---------------------------------------------------------------------------


def test_inconsistent_protocols_and_protocol_type():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b""),))
    rr_only = join(c, "b", 1, client_id="b", protocols=(("roundrobin", b""),))["b"]
    assert rr_only == joined(E.INCONSISTENT_GROUP_PROTOCOL, -1, "", "", "")
    connect = join(c, "x", 1, client_id="x", protocol_type="connect")["x"]
    assert connect.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(c, "e", 1, client_id="e", group="other", protocols=())["e"].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert c.group_ids() == ["g"]  # the refused join did not create "other"


def test_protocol_chosen_among_common_protocols_by_vote():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b"ra"), ("roundrobin", b"rr-a")))
    join(c, "b", 0, client_id="b", protocols=(("roundrobin", b"rr-b"), ("range", b"rb")))
    join(c, "c", 0, client_id="c", protocols=(("roundrobin", b"rr-c"), ("range", b"rc")))
    answers = join(c, "a2", 0, member_id="a-1", client_id="a", protocols=(("range", b"ra"), ("roundrobin", b"rr-a")))
    assert {r.protocol_name for r in answers.values()} == {"roundrobin"}
    assert [m.metadata for m in answers["a2"].members] == [b"rr-a", b"rr-b", b"rr-c"]


def test_protocol_tie_goes_to_the_leaders_preference():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    join(c, "b", 0, client_id="b", protocols=(("roundrobin", b""), ("range", b"")))
    answers = join(c, "a2", 0, member_id="a-1", client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    assert answers["a2"].protocol_name == "range"


def test_protocol_supported_by_all_wins_even_against_first_choices():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    join(c, "b", 0, client_id="b", protocols=(("roundrobin", b""),))
    answers = join(c, "a2", 0, member_id="a-1", client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    assert answers["a2"].protocol_name == "roundrobin"


@pytest.mark.parametrize(
    "timeout,code",
    [(5999, E.INVALID_SESSION_TIMEOUT), (6000, E.NONE), (1800000, E.NONE), (1800001, E.INVALID_SESSION_TIMEOUT)],
)
def test_session_timeout_bounds(timeout, code):
    assert join(new_coordinator(), "t", 0, timeout=timeout)["t"].error_code == code


def test_session_timeout_bounds_are_configurable():
    c = new_coordinator(config=CoordinatorConfig(min_session_timeout_ms=100, max_session_timeout_ms=200))
    assert join(c, "t", 0, timeout=150)["t"].error_code == E.NONE
    assert join(c, "u", 0, timeout=6000, group="h")["u"].error_code == E.INVALID_SESSION_TIMEOUT


def test_empty_group_id_is_checked_before_session_timeout():
    assert join(new_coordinator(), "t", 0, group="", timeout=1)["t"].error_code == E.INVALID_GROUP_ID


def test_join_error_echoes_member_id_with_generation_zero():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    answer = join(c, "t", 1, member_id="nobody")["t"]
    assert answer == joined(E.UNKNOWN_MEMBER_ID, -1, "", "", "nobody")


# --- unknown members and groups --------------------------------------------------------------------


def test_unknown_member_and_unknown_group():
    c = new_coordinator()
    stable_pair(c)
    assert heartbeat(c, 1, "ghost", 2).error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(c, 1, "a-1", 2, group="nope").error_code == E.UNKNOWN_MEMBER_ID
    assert sync(c, "s", 1, "ghost", 2)["s"].error_code == E.UNKNOWN_MEMBER_ID
    assert sync(c, "s", 1, "a-1", 2, group="nope")["s"].error_code == E.UNKNOWN_MEMBER_ID
    assert join(c, "j", 1, member_id="a-1", group="nope")["j"].error_code == E.UNKNOWN_MEMBER_ID
    left = leave(c, "l", 1, "ghost")["l"]
    assert left.error_code == E.UNKNOWN_MEMBER_ID
    assert commit(c, 1, "ghost", 2, {("t", 0): (1, "")}) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_sync_checks_member_before_generation():
    c = new_coordinator()
    stable_pair(c)
    assert sync(c, "s", 1, "a-1", 7)["s"].error_code == E.ILLEGAL_GENERATION
    assert sync(c, "s", 1, "ghost", 7)["s"].error_code == E.UNKNOWN_MEMBER_ID


def test_heartbeat_checks_member_and_generation_before_state():
    c = new_coordinator()
    stable_pair(c)
    join(c, "c", 1, client_id="c")
    assert heartbeat(c, 2, "ghost", 99).error_code == E.UNKNOWN_MEMBER_ID  # 0.9.0 answered 27 first
    assert heartbeat(c, 2, "a-1", 1).error_code == E.ILLEGAL_GENERATION
    assert heartbeat(c, 2, "a-1", 2).error_code == E.REBALANCE_IN_PROGRESS


# --- sessions, leaving, timeouts --------------------------------------------------------------------


def test_silent_member_expires_and_survivor_takes_everything():
    c = new_coordinator()
    stable_pair(c)  # both sessions refreshed at t=0, timeout 10000
    assert c.next_deadline_ms() == 10000
    for now in range(3000, 10000, 3000):
        assert heartbeat(c, now, "a-1", 2).error_code == E.NONE
    assert c.tick(10000) == []  # b-2 expires; a-1 has no parked request to answer
    snap = c.snapshot("g")
    assert snap.state is GroupState.PREPARING_REBALANCE
    assert [m.member_id for m in snap.members] == ["a-1"]
    assert heartbeat(c, 10001, "a-1", 2).error_code == E.REBALANCE_IN_PROGRESS
    answer = join(c, "a3", 10002, member_id="a-1", client_id="a")["a3"]
    assert (answer.generation_id, [m.member_id for m in answer.members]) == (3, ["a-1"])


def test_heartbeat_refreshes_session_only_when_stable():
    c = new_coordinator()
    stable_pair(c)
    heartbeat(c, 9000, "b-2", 2)
    assert c.snapshot("g").members[1].session_deadline_ms == 19000


def test_leader_leaves_and_a_new_leader_is_elected():
    c = new_coordinator()
    stable_pair(c)
    assert leave(c, "l", 5, "a-1")["l"] == LeaveGroupResponse(error_code=E.NONE)
    assert c.snapshot("g").leader_id == "b-2"
    assert heartbeat(c, 6, "b-2", 2).error_code == E.REBALANCE_IN_PROGRESS
    answer = join(c, "b3", 7, member_id="b-2", client_id="b")["b3"]
    assert (answer.generation_id, answer.leader, [m.member_id for m in answer.members]) == (3, "b-2", ["b-2"])


def test_leave_during_join_phase_can_complete_it():
    c = new_coordinator()
    stable_pair(c)
    join(c, "a3", 10, member_id="a-1", client_id="a")  # leader rejoins: rebalance, b-2 not yet back
    replies = leave(c, "l", 11, "b-2")
    assert replies["l"].error_code == E.NONE and replies["a3"].generation_id == 3


def test_last_member_leaving_kills_the_group():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    sync(c, "s", 0, "a-1", 1, {"a-1": b""})
    leave(c, "l", 1, "a-1")
    assert c.group_ids() == []
    described = describe(c, 2, "g")[0]
    assert (described.error_code, described.group_state, described.members) == (E.NONE, "Dead", [])


def test_members_that_do_not_rejoin_are_evicted_at_the_rebalance_deadline():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", timeout=10000)
    join(c, "b", 0, client_id="b", timeout=6000)
    join(c, "a2", 0, member_id="a-1", client_id="a", timeout=10000)  # generation 2, AwaitingSync
    assert sync(c, "sb", 1000, "b-2", 2) == {}  # b parks; the leader never syncs
    c.tick(7000)  # b-2's session ends while its SyncGroup is parked: kept, its timer stops
    assert c.snapshot("g").members[1].session_deadline_ms is None
    # At 10000 a-1 expires (nothing parked): rebalance; b's parked sync is failed; b leads.
    assert results(c.tick(10000)) == {"sb": synced(E.REBALANCE_IN_PROGRESS, b"")}
    snap = c.snapshot("g")
    assert (snap.state, snap.leader_id, snap.join_deadline_ms) == (GroupState.PREPARING_REBALANCE, "b-2", 16000)
    c.tick(15999)
    assert c.group_ids() == ["g"]
    c.tick(16000)  # b-2 never rejoined: evicted by the join deadline, and the empty group dies
    assert c.group_ids() == []


def test_timers_act_at_their_deadline_however_late_tick_comes():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", timeout=10000)
    sync(c, "s", 0, "a-1", 1, {"a-1": b""})
    join(c, "b", 100, client_id="b", timeout=10000)  # a-1 never rejoins: evicted at its deadline
    replies = results(c.tick(15000))
    assert replies["b"].generation_id == 2 and replies["b"].leader == "b-2"
    assert c.snapshot("g").members[0].session_deadline_ms == 20000  # 10000 (eviction) + 10000


def test_member_with_parked_join_is_not_expired():
    c = new_coordinator()
    stable_pair(c)
    join(c, "c", 9000, client_id="c", timeout=30000)  # join deadline 39000
    join(c, "a3", 9001, member_id="a-1", client_id="a")
    c.tick(10000)  # a-1 and b-2 sessions end: a-1 is parked (kept), b-2 is not (removed)
    assert c.snapshot("g").state is GroupState.AWAITING_SYNC
    assert [m.member_id for m in c.snapshot("g").members] == ["a-1", "c-3"]


def test_clock_must_not_go_backwards():
    c = new_coordinator()
    c.tick(10)
    with pytest.raises(ProtocolError):
        c.tick(9)


def test_none_is_a_valid_reply_token_for_parked_joins():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    new = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10000,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"meta")],
    )
    assert c.handle(None, new, 0, client_id="b", client_host="/h", now_ms=0) == []
    new.member_id = "a-1"
    replies = c.handle("a2", new, 0, client_id="a", client_host="/h", now_ms=0)
    assert {r.reply_to for r in replies} == {"a2", None}


# --- offsets ----------------------------------------------------------------------------------------


def test_simple_commit_outside_group_management_and_fetch():
    c = new_coordinator()
    assert commit(c, 0, "", -1, {("t", 0): (42, "meta"), ("t", 1): (7, None), ("u", 0): (1, "")}) == {
        ("t", 0): E.NONE,
        ("t", 1): E.NONE,
        ("u", 0): E.NONE,
    }
    assert c.snapshot("g").state is GroupState.EMPTY  # a simple commit creates an Empty group
    assert fetch(c, 1, [("t", 0), ("t", 1), ("t", 9)]) == {
        ("t", 0): (42, "meta", E.NONE),
        ("t", 1): (7, None, E.NONE),
        ("t", 9): (-1, "", E.NONE),
    }
    assert set(fetch(c, 1)) == {("t", 0), ("t", 1), ("u", 0)}  # empty request: everything
    assert fetch(c, 1, group="other") == {}


def test_commit_with_generation_to_unknown_group_is_illegal_generation():
    assert commit(new_coordinator(), 0, "m", 3, {("t", 0): (1, "")}) == {("t", 0): E.ILLEGAL_GENERATION}


def test_group_commits_check_member_generation_and_state():
    c = new_coordinator()
    stable_pair(c)
    assert commit(c, 1, "a-1", 2, {("t", 0): (10, "")}) == {("t", 0): E.NONE}
    assert commit(c, 1, "", -1, {("t", 0): (11, "")}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert commit(c, 1, "a-1", 1, {("t", 0): (11, "")}) == {("t", 0): E.ILLEGAL_GENERATION}
    join(c, "c", 2, client_id="c")  # PreparingRebalance: generation 2 is still current
    assert commit(c, 3, "b-2", 2, {("t", 1): (20, "")}) == {("t", 1): E.NONE}
    join(c, "a3", 4, member_id="a-1", client_id="a")
    join(c, "b3", 4, member_id="b-2", client_id="b")  # AwaitingSync, generation 3
    assert commit(c, 5, "b-2", 3, {("t", 1): (21, "")}) == {("t", 1): E.REBALANCE_IN_PROGRESS}
    assert c.committed("g") == {("t", 0): (10, ""), ("t", 1): (20, "")}


def test_metadata_too_large_refuses_only_that_partition():
    c = new_coordinator(config=CoordinatorConfig(offset_metadata_max_bytes=4))
    codes = commit(
        c, 0, "", -1, {("t", 0): (1, "abcd"), ("t", 1): (1, "abcde"), ("t", 2): (1, "\U0001f600\U0001f600\U0001f600")}
    )
    assert codes == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE, ("t", 2): E.OFFSET_METADATA_TOO_LARGE}
    assert c.committed("g") == {("t", 0): (1, "abcd")}


def test_offsets_expire_after_retention_and_survive_group_death():
    c = new_coordinator(config=CoordinatorConfig(offsets_retention_ms=1000))
    join(c, "a", 0, client_id="a")
    sync(c, "s", 0, "a-1", 1, {"a-1": b""})
    commit(c, 0, "a-1", 1, {("t", 0): (5, "")})
    commit(c, 0, "a-1", 1, {("t", 1): (6, "")}, retention=50000)
    leave(c, "l", 1, "a-1")
    assert c.snapshot("g").state is GroupState.EMPTY  # kept for its offsets
    assert c.committed("g") == {("t", 0): (5, ""), ("t", 1): (6, "")}
    assert c.next_deadline_ms() == 1000
    c.tick(1000)
    assert c.committed("g") == {("t", 1): (6, "")}
    c.tick(50000)
    assert c.group_ids() == []  # no member, no offset: the group is gone


# --- describe, list, hooks ---------------------------------------------------------------------------


def test_describe_groups_per_state():
    c = new_coordinator()
    stable_pair(c)
    group = describe(c, 1, "g")[0]
    assert (group.group_state, group.protocol_type, group.protocol_data) == ("Stable", "consumer", "range")
    M = DescribeGroupsResponse.DescribedGroup.DescribedGroupMember
    assert group.members == [
        M(member_id="a-1", client_id="a", client_host="/127.0.0.1", member_metadata=b"meta", member_assignment=b"A"),
        M(member_id="b-2", client_id="b", client_host="/127.0.0.1", member_metadata=b"meta", member_assignment=b"B"),
    ]
    join(c, "c", 2, client_id="c")
    group = describe(c, 3, "g")[0]
    assert (group.group_state, group.protocol_data) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in group.members)


def test_list_groups():
    c = new_coordinator()
    join(c, "a", 0, group="g1")
    join(c, "b", 0, group="g2", protocol_type="connect")
    listed = list_groups(c, 1)
    assert listed == ListGroupsResponse(
        error_code=E.NONE,
        groups=[
            ListGroupsResponse.ListedGroup(group_id="g1", protocol_type="consumer"),
            ListGroupsResponse.ListedGroup(group_id="g2", protocol_type="connect"),
        ],
    )


def test_not_coordinator_loading_and_inactive():
    c = new_coordinator(owns_group=lambda g: g != "elsewhere", is_loading=lambda g: g == "loading")
    assert join(c, "j", 0, group="elsewhere")["j"].error_code == E.NOT_COORDINATOR_FOR_GROUP
    assert join(c, "j", 0, group="loading")["j"].error_code == E.GROUP_LOAD_IN_PROGRESS
    assert heartbeat(c, 0, "x", 1, group="loading").error_code == E.NONE  # answered blindly
    assert sync(c, "s", 0, "x", 1, group="loading")["s"].error_code == E.UNKNOWN_MEMBER_ID  # no loading check
    assert fetch(c, 0, [("t", 0)], group="loading") == {("t", 0): (-1, "", E.GROUP_LOAD_IN_PROGRESS)}
    described = describe(c, 0, "elsewhere")[0]
    assert described.error_code == E.NOT_COORDINATOR_FOR_GROUP
    c.active = False
    assert join(c, "j", 0, group="")["j"].error_code == E.GROUP_COORDINATOR_NOT_AVAILABLE
    assert list_groups(c, 0).error_code == E.GROUP_COORDINATOR_NOT_AVAILABLE


def test_list_groups_reports_loading_alongside_the_list():
    loading = set()
    c = new_coordinator(is_loading=lambda g: g in loading)
    join(c, "a", 0)
    loading.add("g")
    assert list_groups(c, 0) == ListGroupsResponse(
        error_code=E.GROUP_LOAD_IN_PROGRESS,
        groups=[ListGroupsResponse.ListedGroup(group_id="g", protocol_type="consumer")],
    )


def test_unload_group_answers_parked_requests_not_coordinator():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    commit(c, 0, "", -1, {("t", 0): (1, "")})
    replies = results(c.unload_group("g", now_ms=1))
    assert replies == {"b": joined(E.NOT_COORDINATOR_FOR_GROUP, -1, "", "", "b-2")}
    assert c.group_ids() == [] and c.committed("g") == {}


# --- wire messages ----------------------------------------------------------------------------------


def test_handle_takes_and_answers_wire_messages_in_their_versions():
    c = new_coordinator()
    join_request = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10000,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")],
    )
    answer = send(c, "j", join_request, 0, client_id="kp")["j"]
    assert isinstance(answer, JoinGroupResponse) and answer.member_id == "kp-1"
    answer.encode(0)  # what the coordinator answers is ready for the wire
    assert sync(c, "s", 1, "kp-1", 1, {"kp-1": b"x"})["s"] == synced(E.NONE, b"x")
    assert commit(c, 3, "kp-1", 1, {("t", 0): (9, "m")}) == {("t", 0): E.NONE}
    P = OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    request = OffsetFetchRequest(
        group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    )
    fetched = send(c, "f", request, 4, version=1)["f"]
    assert fetched.topics[0].partitions == [P(partition_index=0, committed_offset=9, metadata="m", error_code=E.NONE)]
    fetched.encode(1)
    assert describe(c, 5, "g")[0].group_state == "Stable"
    assert list_groups(c, 5).groups == [ListGroupsResponse.ListedGroup(group_id="g", protocol_type="consumer")]
    assert leave(c, "x", 6, "kp-1")["x"] == LeaveGroupResponse(error_code=E.NONE)


def test_handle_refuses_requests_and_versions_it_does_not_serve():
    c = new_coordinator()
    with pytest.raises(UnsupportedVersionError, match="does not answer"):
        send(c, "?", GroupCoordinatorRequest(key="g"), 0)
    with pytest.raises(UnsupportedVersionError, match="v0"):
        send(c, "?", OffsetFetchRequest(group_id="g"), 0, version=0)  # 0.9 kept v0 offsets in ZooKeeper


def test_offset_commit_v1_has_no_retention_time():
    c = new_coordinator(config=CoordinatorConfig(offsets_retention_ms=1000))
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id="solo",
        generation_id_or_member_epoch=-1,
        retention_time_ms=5,
        topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])],
    )
    send(c, "c", request, 0, version=1)
    assert c.next_deadline_ms() == 1000  # the broker default, not the 5 ms v1 cannot carry


def test_default_member_ids_are_client_id_dash_uuid():
    c = GroupCoordinator()
    member_id = join(c, "t", 0, client_id="kproto")["t"].member_id
    prefix, _, suffix = member_id.partition("-")
    assert prefix == "kproto" and len(suffix) == 36


def test_rejoin_while_parked_replaces_the_token_and_the_old_one_is_never_answered():
    c = new_coordinator()
    stable_pair(c)
    join(c, "c", 1, client_id="c")
    assert join(c, "c-again", 2, member_id="c-3", client_id="c") == {}
    join(c, "a3", 3, member_id="a-1", client_id="a")
    answers = join(c, "b3", 4, member_id="b-2", client_id="b")
    assert set(answers) == {"a3", "b3", "c-again"}  # "c" was superseded (0.9.0 dropped its callback)


def test_describe_completing_rebalance_and_coordinator_down():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    group = describe(c, 1, "g")[0]
    assert (group.group_state, group.protocol_data, group.members[0].member_metadata) == (
        "CompletingRebalance",
        "",
        b"",
    )
    c.active = False
    down = describe(c, 1, "g")[0]
    assert (down.error_code, down.group_state) == (E.GROUP_COORDINATOR_NOT_AVAILABLE, "")


def test_group_state_is_a_str_enum_with_the_names_describe_groups_reports():
    c = new_coordinator()
    stable_pair(c)
    state = c.snapshot("g").state
    assert isinstance(state, str) and state == "Stable" == describe(c, 1, "g")[0].group_state
    assert {s.value for s in GroupState} == {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}
    assert GroupState.AWAITING_SYNC is GroupState.COMPLETING_REBALANCE  # the 0.9 name, kept as an alias
