"""The 0.9 group coordinator machine, driven call by call with an injected clock (protocol.md §6)."""

from __future__ import annotations

import itertools

import pytest

from kproto import ErrorCode
from kproto.errors import ProtocolError
from kproto.group import requests as rq
from kproto.group import responses as rs
from kproto.group.coordinator import (
    CHECK_ERRORS,
    CHECKS,
    RESPONSES,
    TRANSITIONS,
    Check,
    CoordinatorConfig,
    GroupCoordinator,
    GroupEvent,
    GroupState,
    RequestKind,
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


def join(c, token, now, *, member_id="", client_id="c", group="g", timeout=10000, protocols=RANGE,
         protocol_type="consumer"):
    return results(c.join_group(
        token, group_id=group, member_id=member_id, client_id=client_id, client_host="/127.0.0.1",
        session_timeout_ms=timeout, protocol_type=protocol_type, protocols=list(protocols), now_ms=now,
    ))


def sync(c, token, now, member_id, generation, assignments=None, group="g"):
    return results(c.sync_group(
        token, group_id=group, generation_id=generation, member_id=member_id,
        assignments=assignments or {}, now_ms=now,
    ))


def heartbeat(c, now, member_id, generation, group="g"):
    return results(c.heartbeat("hb", group_id=group, generation_id=generation, member_id=member_id, now_ms=now))["hb"]


def commit(c, now, member_id, generation, offsets, group="g", retention=-1):
    reply = results(c.commit_offsets(
        "commit", group_id=group, generation_id=generation, member_id=member_id, offsets=offsets,
        retention_time_ms=retention, now_ms=now,
    ))["commit"]
    return {(t.topic, p.partition): p.error_code for t in reply.responses for p in t.partition_responses}


def fetch(c, now, partitions=None, group="g"):
    reply = results(c.fetch_offsets("fetch", group_id=group, partitions=partitions, now_ms=now))["fetch"]
    return {(t.topic, p.partition): (p.offset, p.metadata, p.error_code) for t in reply.responses
            for p in t.partition_responses}


def stable_pair(c, now=0):
    """Members a-1 (leader) and b-2 in generation 2, Stable, with assignments b"A" and b"B"."""
    assert join(c, "a", now, client_id="a")["a"].generation_id == 1
    assert join(c, "b", now, client_id="b") == {}  # parked: a must rejoin
    answers = join(c, "a2", now, member_id="a-1", client_id="a")
    assert set(answers) == {"a2", "b"}
    assert sync(c, "sb", now, "b-2", 2) == {}
    done = sync(c, "sa", now, "a-1", 2, {"a-1": b"A", "b-2": b"B"})
    assert done == {"sa": rs.SyncGroupResponse(E.NONE, b"A"), "sb": rs.SyncGroupResponse(E.NONE, b"B")}
    return answers


# --- the tables -------------------------------------------------------------------------------------


def test_transition_table_matches_valid_previous_states():
    previous = {}
    for (src, _event), dst in TRANSITIONS.items():
        if src != dst:
            previous.setdefault(dst, set()).add(src)
    assert previous == {
        GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.AWAITING_SYNC},
        GroupState.AWAITING_SYNC: {GroupState.PREPARING_REBALANCE},
        GroupState.STABLE: {GroupState.AWAITING_SYNC},
        GroupState.DEAD: {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.AWAITING_SYNC},
    }


def test_response_table_is_complete():
    assert set(RESPONSES) == {(k, s) for k in RequestKind for s in GroupState}
    assert all(RESPONSES[(k, GroupState.DEAD)] == E.UNKNOWN_MEMBER_ID for k in RequestKind if k is not RequestKind.DESCRIBE)


def test_every_check_has_a_code_and_state_is_consulted_once_per_api():
    assert set(CHECK_ERRORS) == set(Check)
    for api, checks in CHECKS.items():
        assert checks[0] is Check.COORDINATOR_ACTIVE
        assert checks.count(Check.STATE) == (0 if api in ("fetch_offsets", "describe_groups") else 1)


def test_group_event_names_are_documented():
    assert all(event.value for event in GroupEvent)


# --- joining and syncing ----------------------------------------------------------------------------


def test_first_member_joins_alone_and_becomes_leader():
    c = new_coordinator()
    answer = join(c, "t", 0, client_id="kproto")["t"]
    assert answer == rs.JoinGroupResponse(
        E.NONE, 1, "range", "kproto-1", "kproto-1", (rs.JoinGroupMember("kproto-1", b"meta"),)
    )
    assert c.snapshot("g").state is GroupState.AWAITING_SYNC
    assert sync(c, "s", 5, "kproto-1", 1, {"kproto-1": b"x"}) == {"s": rs.SyncGroupResponse(E.NONE, b"x")}
    assert c.snapshot("g").state is GroupState.STABLE


def test_two_members_split_and_only_the_leader_sees_members():
    c = new_coordinator()
    answers = stable_pair(c)
    leader, follower = answers["a2"], answers["b"]
    assert (leader.generation_id, leader.leader_id, leader.member_id) == (2, "a-1", "a-1")
    assert [m.member_id for m in leader.members] == ["a-1", "b-2"]
    assert (follower.generation_id, follower.leader_id, follower.member_id, follower.members) == (2, "a-1", "b-2", ())
    assert heartbeat(c, 100, "a-1", 2) == rs.HeartbeatResponse(E.NONE)
    assert heartbeat(c, 100, "b-2", 2) == rs.HeartbeatResponse(E.NONE)


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
    assert heartbeat(c, 1004, "b-2", 2).error_code == E.REBALANCE_IN_PROGRESS  # AwaitingSync
    sync(c, "sa", 1005, "a-1", 3, {"a-1": b"1", "b-2": b"2", "c-3": b"3"})
    assert heartbeat(c, 1006, "b-2", 2).error_code == E.ILLEGAL_GENERATION
    assert commit(c, 1006, "b-2", 2, {("t", 0): (5, "")}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert sync(c, "sc", 1007, "c-3", 3) == {"sc": rs.SyncGroupResponse(E.NONE, b"3")}


def test_leader_assignment_fills_missing_members_with_empty_bytes():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    join(c, "a2", 0, member_id="a-1", client_id="a")
    assert sync(c, "sa", 0, "a-1", 2, {"a-1": b"all", "ghost": b"?"}) == {"sa": rs.SyncGroupResponse(E.NONE, b"all")}
    assert sync(c, "sb", 1, "b-2", 2) == {"sb": rs.SyncGroupResponse(E.NONE, b"")}


def test_new_member_during_awaiting_sync_fails_parked_syncs():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    join(c, "a2", 0, member_id="a-1", client_id="a")
    assert sync(c, "sb", 1, "b-2", 2) == {}
    assert join(c, "c", 2, client_id="c") == {"sb": rs.SyncGroupResponse(E.REBALANCE_IN_PROGRESS, b"")}
    assert c.snapshot("g").state is GroupState.PREPARING_REBALANCE
    assert sync(c, "sa", 3, "a-1", 2, {"a-1": b"x"})["sa"].error_code == E.REBALANCE_IN_PROGRESS


def test_known_member_rejoining_unchanged_in_awaiting_sync_is_answered_at_once():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    join(c, "a2", 0, member_id="a-1", client_id="a")
    again = join(c, "b-again", 1, member_id="b-2", client_id="b")["b-again"]
    assert (again.generation_id, again.members) == (2, ())
    leader = join(c, "a-again", 1, member_id="a-1", client_id="a")["a-again"]
    assert [m.member_id for m in leader.members] == ["a-1", "b-2"]
    assert c.snapshot("g").state is GroupState.AWAITING_SYNC
    changed = join(c, "b-changed", 2, member_id="b-2", client_id="b", protocols=(("range", b"new"),))
    assert changed == {} and c.snapshot("g").state is GroupState.PREPARING_REBALANCE


def test_follower_rejoin_in_stable_is_answered_but_leader_rejoin_rebalances():
    c = new_coordinator()
    stable_pair(c)
    follower = join(c, "b3", 10, member_id="b-2", client_id="b")["b3"]
    assert (follower.error_code, follower.generation_id, follower.members) == (E.NONE, 2, ())
    assert c.snapshot("g").state is GroupState.STABLE
    assert join(c, "a3", 11, member_id="a-1", client_id="a") == {}
    assert c.snapshot("g").state is GroupState.PREPARING_REBALANCE


def test_sync_in_preparing_rebalance_and_stable():
    c = new_coordinator()
    stable_pair(c)
    assert sync(c, "again", 10, "b-2", 2) == {"again": rs.SyncGroupResponse(E.NONE, b"B")}
    join(c, "c", 11, client_id="c")
    assert sync(c, "late", 12, "b-2", 2) == {"late": rs.SyncGroupResponse(E.REBALANCE_IN_PROGRESS, b"")}


# --- protocols, validation ---------------------------------------------------------------------------


def test_inconsistent_protocols_and_protocol_type():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b""),))
    rr_only = join(c, "b", 1, client_id="b", protocols=(("roundrobin", b""),))["b"]
    assert rr_only == rs.JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL, 0, "", "", "")
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
    assert {r.group_protocol for r in answers.values()} == {"roundrobin"}
    assert [m.member_metadata for m in answers["a2"].members] == [b"rr-a", b"rr-b", b"rr-c"]


def test_protocol_tie_goes_to_the_leaders_preference():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    join(c, "b", 0, client_id="b", protocols=(("roundrobin", b""), ("range", b"")))
    answers = join(c, "a2", 0, member_id="a-1", client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    assert answers["a2"].group_protocol == "range"


def test_protocol_supported_by_all_wins_even_against_first_choices():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    join(c, "b", 0, client_id="b", protocols=(("roundrobin", b""),))
    answers = join(c, "a2", 0, member_id="a-1", client_id="a", protocols=(("range", b""), ("roundrobin", b"")))
    assert answers["a2"].group_protocol == "roundrobin"


@pytest.mark.parametrize("timeout,code", [(5999, E.INVALID_SESSION_TIMEOUT), (6000, E.NONE),
                                          (30000, E.NONE), (30001, E.INVALID_SESSION_TIMEOUT)])
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
    assert answer == rs.JoinGroupResponse(E.UNKNOWN_MEMBER_ID, 0, "", "", "nobody")


# --- unknown members and groups --------------------------------------------------------------------


def test_unknown_member_and_unknown_group():
    c = new_coordinator()
    stable_pair(c)
    assert heartbeat(c, 1, "ghost", 2).error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(c, 1, "a-1", 2, group="nope").error_code == E.UNKNOWN_MEMBER_ID
    assert sync(c, "s", 1, "ghost", 2)["s"].error_code == E.UNKNOWN_MEMBER_ID
    assert sync(c, "s", 1, "a-1", 2, group="nope")["s"].error_code == E.UNKNOWN_MEMBER_ID
    assert join(c, "j", 1, member_id="a-1", group="nope")["j"].error_code == E.UNKNOWN_MEMBER_ID
    leave = results(c.leave_group("l", group_id="g", member_id="ghost", now_ms=1))["l"]
    assert leave.error_code == E.UNKNOWN_MEMBER_ID
    assert commit(c, 1, "ghost", 2, {("t", 0): (1, "")}) == {("t", 0): E.UNKNOWN_MEMBER_ID}


def test_sync_checks_member_before_generation():
    c = new_coordinator()
    stable_pair(c)
    assert sync(c, "s", 1, "a-1", 7)["s"].error_code == E.ILLEGAL_GENERATION
    assert sync(c, "s", 1, "ghost", 7)["s"].error_code == E.UNKNOWN_MEMBER_ID


def test_heartbeat_checks_state_before_member():
    c = new_coordinator()
    stable_pair(c)
    join(c, "c", 1, client_id="c")
    assert heartbeat(c, 2, "ghost", 99).error_code == E.REBALANCE_IN_PROGRESS


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
    assert results(c.leave_group("l", group_id="g", member_id="a-1", now_ms=5))["l"] == rs.LeaveGroupResponse(E.NONE)
    assert c.snapshot("g").leader_id == "b-2"
    assert heartbeat(c, 6, "b-2", 2).error_code == E.REBALANCE_IN_PROGRESS
    answer = join(c, "b3", 7, member_id="b-2", client_id="b")["b3"]
    assert (answer.generation_id, answer.leader_id, [m.member_id for m in answer.members]) == (3, "b-2", ["b-2"])


def test_leave_during_join_phase_can_complete_it():
    c = new_coordinator()
    stable_pair(c)
    join(c, "a3", 10, member_id="a-1", client_id="a")  # leader rejoins: rebalance, b-2 not yet back
    replies = results(c.leave_group("l", group_id="g", member_id="b-2", now_ms=11))
    assert replies["l"].error_code == E.NONE and replies["a3"].generation_id == 3


def test_last_member_leaving_kills_the_group():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    sync(c, "s", 0, "a-1", 1, {"a-1": b""})
    c.leave_group("l", group_id="g", member_id="a-1", now_ms=1)
    assert c.group_ids() == []
    described = results(c.describe_groups("d", group_ids=["g"], now_ms=2))["d"].groups[0]
    assert (described.error_code, described.state, described.members) == (E.NONE, "Dead", ())


def test_members_that_do_not_rejoin_are_evicted_at_the_rebalance_deadline():
    c = new_coordinator()
    join(c, "a", 0, client_id="a", timeout=10000)
    join(c, "b", 0, client_id="b", timeout=6000)
    join(c, "a2", 0, member_id="a-1", client_id="a", timeout=10000)  # generation 2, AwaitingSync
    assert sync(c, "sb", 1000, "b-2", 2) == {}  # b parks; the leader never syncs
    c.tick(7000)  # b-2's session ends while its SyncGroup is parked: kept, its timer stops
    assert c.snapshot("g").members[1].session_deadline_ms is None
    # At 10000 a-1 expires (nothing parked): rebalance; b's parked sync is failed; b leads.
    assert results(c.tick(10000)) == {"sb": rs.SyncGroupResponse(E.REBALANCE_IN_PROGRESS, b"")}
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
    assert replies["b"].generation_id == 2 and replies["b"].leader_id == "b-2"
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
    assert c.join_group(None, group_id="g", member_id="", client_id="b", client_host="/h", session_timeout_ms=10000,
                        protocol_type="consumer", protocols=list(RANGE), now_ms=0) == []
    replies = c.join_group("a2", group_id="g", member_id="a-1", client_id="a", client_host="/h",
                           session_timeout_ms=10000, protocol_type="consumer", protocols=list(RANGE), now_ms=0)
    assert {r.reply_to for r in replies} == {"a2", None}


# --- offsets ----------------------------------------------------------------------------------------


def test_simple_commit_outside_group_management_and_fetch():
    c = new_coordinator()
    assert commit(c, 0, "", -1, {("t", 0): (42, "meta"), ("t", 1): (7, None), ("u", 0): (1, "")}) == {
        ("t", 0): E.NONE, ("t", 1): E.NONE, ("u", 0): E.NONE,
    }
    assert c.group_ids() == []  # a commit does not create a group
    assert fetch(c, 1, [("t", 0), ("t", 1), ("t", 9)]) == {
        ("t", 0): (42, "meta", E.NONE), ("t", 1): (7, None, E.NONE), ("t", 9): (-1, "", E.NONE),
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
    codes = commit(c, 0, "", -1, {("t", 0): (1, "abcd"), ("t", 1): (1, "abcde"), ("t", 2): (1, "\U0001f600\U0001f600\U0001f600")})
    assert codes == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE, ("t", 2): E.OFFSET_METADATA_TOO_LARGE}
    assert c.committed("g") == {("t", 0): (1, "abcd")}


def test_offsets_expire_after_retention_and_survive_group_death():
    c = new_coordinator(config=CoordinatorConfig(offsets_retention_ms=1000))
    join(c, "a", 0, client_id="a")
    sync(c, "s", 0, "a-1", 1, {"a-1": b""})
    commit(c, 0, "a-1", 1, {("t", 0): (5, "")})
    commit(c, 0, "a-1", 1, {("t", 1): (6, "")}, retention=50000)
    c.leave_group("l", group_id="g", member_id="a-1", now_ms=1)
    assert c.group_ids() == [] and c.committed("g") == {("t", 0): (5, ""), ("t", 1): (6, "")}
    assert c.next_deadline_ms() == 1000
    c.tick(1000)
    assert c.committed("g") == {("t", 1): (6, "")}


# --- describe, list, hooks ---------------------------------------------------------------------------


def test_describe_groups_per_state():
    c = new_coordinator()
    stable_pair(c)
    group = results(c.describe_groups("d", group_ids=["g"], now_ms=1))["d"].groups[0]
    assert (group.state, group.protocol_type, group.protocol) == ("Stable", "consumer", "range")
    assert group.members == (
        rs.DescribedMember("a-1", "a", "/127.0.0.1", b"meta", b"A"),
        rs.DescribedMember("b-2", "b", "/127.0.0.1", b"meta", b"B"),
    )
    join(c, "c", 2, client_id="c")
    group = results(c.describe_groups("d", group_ids=["g"], now_ms=3))["d"].groups[0]
    assert (group.state, group.protocol) == ("PreparingRebalance", "")
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in group.members)


def test_list_groups():
    c = new_coordinator()
    join(c, "a", 0, group="g1")
    join(c, "b", 0, group="g2", protocol_type="connect")
    listed = results(c.list_groups("l", now_ms=1))["l"]
    assert listed == rs.ListGroupsResponse(E.NONE, (rs.ListedGroup("g1", "consumer"), rs.ListedGroup("g2", "connect")))


def test_not_coordinator_loading_and_inactive():
    c = new_coordinator(owns_group=lambda g: g != "elsewhere", is_loading=lambda g: g == "loading")
    assert join(c, "j", 0, group="elsewhere")["j"].error_code == E.NOT_COORDINATOR_FOR_GROUP
    assert join(c, "j", 0, group="loading")["j"].error_code == E.GROUP_LOAD_IN_PROGRESS
    assert heartbeat(c, 0, "x", 1, group="loading").error_code == E.NONE  # answered blindly
    assert sync(c, "s", 0, "x", 1, group="loading")["s"].error_code == E.UNKNOWN_MEMBER_ID  # no loading check
    assert fetch(c, 0, [("t", 0)], group="loading") == {("t", 0): (-1, "", E.GROUP_LOAD_IN_PROGRESS)}
    described = results(c.describe_groups("d", group_ids=["elsewhere"], now_ms=0))["d"].groups[0]
    assert described.error_code == E.NOT_COORDINATOR_FOR_GROUP
    c.active = False
    assert join(c, "j", 0, group="")["j"].error_code == E.GROUP_COORDINATOR_NOT_AVAILABLE
    assert results(c.list_groups("l", now_ms=0))["l"].error_code == E.GROUP_COORDINATOR_NOT_AVAILABLE


def test_list_groups_reports_loading_alongside_the_list():
    loading = set()
    c = new_coordinator(is_loading=lambda g: g in loading)
    join(c, "a", 0)
    loading.add("g")
    assert results(c.list_groups("l", now_ms=0))["l"] == rs.ListGroupsResponse(
        E.GROUP_LOAD_IN_PROGRESS, (rs.ListedGroup("g", "consumer"),)
    )


def test_unload_group_answers_parked_requests_not_coordinator():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    join(c, "b", 0, client_id="b")
    commit(c, 0, "", -1, {("t", 0): (1, "")})
    replies = results(c.unload_group("g", now_ms=1))
    assert replies == {"b": rs.JoinGroupResponse(E.NOT_COORDINATOR_FOR_GROUP, 0, "", "", "b-2")}
    assert c.group_ids() == [] and c.committed("g") == {}


# --- request values --------------------------------------------------------------------------------


def test_handle_dispatches_request_values():
    c = new_coordinator()
    join_request = rq.JoinGroupRequest("g", 10000, "", "consumer", (rq.JoinGroupProtocol("range", b"m"),))
    answer = results(c.handle("j", join_request, client_id="kp", client_host="/h", now_ms=0))["j"]
    assert answer.member_id == "kp-1"
    sync_request = rq.SyncGroupRequest("g", 1, "kp-1", (rq.SyncGroupAssignment("kp-1", b"x"),))
    assert results(c.handle("s", sync_request, client_id="kp", client_host="/h", now_ms=1))["s"].member_assignment == b"x"
    hb = results(c.handle("h", rq.HeartbeatRequest("g", 1, "kp-1"), client_id="kp", client_host="/h", now_ms=2))
    assert hb["h"].error_code == E.NONE
    commit_request = rq.OffsetCommitRequest(
        "g", 1, "kp-1", -1, (rq.OffsetCommitTopic("t", (rq.OffsetCommitPartition(0, 9, "m"),)),)
    )
    c.handle("c", commit_request, client_id="kp", client_host="/h", now_ms=3)
    fetched = results(c.handle("f", rq.OffsetFetchRequest("g", (rq.OffsetFetchTopic("t", (0,)),)),
                               client_id="kp", client_host="/h", now_ms=4))["f"]
    assert fetched.responses[0].partition_responses[0] == rs.OffsetFetchPartitionResponse(0, 9, "m", E.NONE)
    described = results(c.handle("d", rq.DescribeGroupsRequest(("g",)), client_id="kp", client_host="/h", now_ms=5))
    assert described["d"].groups[0].state == "Stable"
    listed = results(c.handle("l", rq.ListGroupsRequest(), client_id="kp", client_host="/h", now_ms=5))
    assert listed["l"].groups == (rs.ListedGroup("g", "consumer"),)
    left = results(c.handle("x", rq.LeaveGroupRequest("g", "kp-1"), client_id="kp", client_host="/h", now_ms=6))
    assert left["x"].error_code == E.NONE
    with pytest.raises(ProtocolError):
        c.handle("?", rq.GroupCoordinatorRequest("g"), client_id="kp", client_host="/h", now_ms=7)


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


def test_describe_awaiting_sync_and_coordinator_down():
    c = new_coordinator()
    join(c, "a", 0, client_id="a")
    group = results(c.describe_groups("d", group_ids=["g"], now_ms=1))["d"].groups[0]
    assert (group.state, group.protocol, group.members[0].member_metadata) == ("AwaitingSync", "", b"")
    c.active = False
    down = results(c.describe_groups("d", group_ids=["g"], now_ms=1))["d"].groups[0]
    assert (down.error_code, down.state) == (E.GROUP_COORDINATOR_NOT_AVAILABLE, "")
