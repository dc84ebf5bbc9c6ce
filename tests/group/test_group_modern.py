"""The group coordinator and member at the modern versions, one rule per test (docs/group-coordinator.md).

The last tests replay the group requests kafka-python, librdkafka and aiokafka sent at their defaults
(tests/golden/clients) against the coordinator and decode its answers with kafka-python's response
classes, an independent reader of the same bytes.
"""

from __future__ import annotations

import importlib
import itertools
import json
from pathlib import Path

import pytest

import kproto
from kproto import ErrorCode
from kproto.group.consumer_codec import ConsumerProtocolCodec, ConsumerSubscription
from kproto.group.coordinator import (
    GROUP_AUTHORIZED_OPERATIONS,
    NEW_MEMBER_RULES,
    SERVED_VERSIONS,
    CoordinatorConfig,
    GroupCoordinator,
    GroupState,
    NewMemberRule,
)
from kproto.group.loopback import Loopback
from kproto.group.member import GroupFailed, GroupMember, MemberConfig, MemberState, OffsetsFetched, SendRequest
from kproto.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kproto.versions import negotiate

E = ErrorCode
CODEC = ConsumerProtocolCodec()
SUB_T = CODEC.encode_subscription(["t"])


def new_coordinator(**config) -> GroupCoordinator:
    ids = itertools.count(1)
    return GroupCoordinator(CoordinatorConfig(**config), member_id_suffix=lambda: str(next(ids)))


def send(c, token, request, version, now, client_id="c"):
    replies = c.handle(token, request, version, client_id=client_id, client_host="/h", now_ms=now)
    return {r.reply_to: r.result for r in replies}


def join(
    c,
    token,
    now,
    *,
    version=5,
    member_id="",
    instance=None,
    client_id="c",
    protocols=(("range", SUB_T),),
    session=10000,
    rebalance=20000,
    group="g",
):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[P(name=n, metadata=m) for n, m in protocols],
    )
    return send(c, token, request, version, now, client_id)


def sync(c, token, now, member_id, generation, assignments=None, *, version=3, instance=None, group="g", **extra):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    request = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        **extra,
        assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()],
    )
    return send(c, token, request, version, now)


def heartbeat(c, now, member_id, generation, instance=None):
    request = HeartbeatRequest(group_id="g", generation_id=generation, member_id=member_id, group_instance_id=instance)
    return send(c, "hb", request, 4, now)["hb"].error_code


def commit(c, now, member_id, generation, offset, *, version=8, instance=None, epoch=-1, group="g", partition=0):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance,
        topics=[
            T(
                name="t",
                partitions=[
                    T.OffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=epoch,
                        commit_timestamp=-1,
                    )
                ],
            )
        ],
    )
    return send(c, "oc", request, version, now)["oc"].topics[0].partitions[0].error_code


def static_pair(c):
    """Static members "ia" (leader, a id) and "ib" (b id), Stable in generation 1, assigned b"A" and b"B"."""
    a = join(c, "a", 0, instance="ia")["a"]
    a_id = a.member_id
    assert join(c, "b", 0, instance="ib") == {}
    answers = join(c, "a2", 0, member_id=a_id, instance="ia")
    b_id = answers["b"].member_id
    gen = answers["a2"].generation_id
    sync(c, "sb", 1, b_id, gen, instance="ib")
    done = sync(c, "sa", 1, a_id, gen, {a_id: b"A", b_id: b"B"}, instance="ia")
    assert done["sb"].assignment == b"B" and done["sa"].assignment == b"A"
    return a_id, b_id, gen


# --- new members ------------------------------------------------------------------------------------


def test_new_member_rules_cover_every_case_once():
    for static in (True, False):
        for known in (True, False):
            for v4 in (True, False):
                hits = [
                    rule for s, k, v, rule in NEW_MEMBER_RULES if s == static and k in (None, known) and v in (None, v4)
                ]
                assert len(hits) == 1, (static, known, v4)
    assert {rule for *_, rule in NEW_MEMBER_RULES} == set(NewMemberRule)


def test_member_id_required_then_join_with_the_given_id():
    c = new_coordinator()
    first = join(c, "j", 0, version=4, client_id="kp")["j"]
    assert (first.error_code, first.member_id) == (E.MEMBER_ID_REQUIRED, "kp-1")
    assert c.snapshot("g").pending_member_ids == ("kp-1",)
    again = join(c, "j2", 1, version=4, member_id="kp-1", client_id="kp")["j2"]
    assert (again.error_code, again.generation_id, again.leader, again.member_id) == (E.NONE, 1, "kp-1", "kp-1")
    assert c.snapshot("g").pending_member_ids == ()


def test_a_pending_member_holds_the_join_phase_until_it_rejoins_or_its_session_ends():
    c = new_coordinator()
    assert join(c, "a", 0, version=3)["a"].generation_id == 1  # v3: added at once
    sync(c, "s", 0, "c-1", 1, {"c-1": b""})
    # b is told its id; then d's arrival starts a rebalance that b's pending id holds open
    assert join(c, "b", 1, version=4, session=7000)["b"].error_code == E.MEMBER_ID_REQUIRED
    assert join(c, "d", 1, version=3, client_id="d") == {}
    assert join(c, "a2", 2, version=3, member_id="c-1") == {}
    assert c.snapshot("g").state is GroupState.PREPARING_REBALANCE
    replies = {r.reply_to: r.result for r in c.tick(8001)}  # b never came back (its deadline was 8001)
    assert replies["a2"].generation_id == 2 and c.snapshot("g").pending_member_ids == ()


def test_rebalance_timeout_bounds_the_join_phase_and_v0_uses_the_session():
    c = new_coordinator()
    join(c, "a", 0, version=1, session=6000, rebalance=9000)
    sync(c, "s", 0, "c-1", 1, {"c-1": b""}, version=0)
    join(c, "b", 100, version=1, session=6000, rebalance=9000)
    assert c.snapshot("g").join_deadline_ms == 100 + 9000
    heartbeat(c, 5000, "c-1", 1)  # a stays alive but never rejoins
    replies = {r.reply_to: r.result for r in c.tick(9100)}
    assert replies["b"].generation_id == 2 and [m.member_id for m in replies["b"].members] == ["c-2"]


def test_group_max_size_turns_away_members_past_the_limit():
    c = new_coordinator(group_max_size=1)
    join(c, "a", 0, version=3)
    assert join(c, "b", 0, version=3)["b"].error_code == E.GROUP_MAX_SIZE_REACHED


# --- static membership ------------------------------------------------------------------------------


def test_static_member_restart_in_stable_keeps_its_assignment_without_a_rebalance():
    c = new_coordinator()
    a_id, b_id, gen = static_pair(c)
    restarted = join(c, "b-new", 5, instance="ib", client_id="c")["b-new"]
    assert (restarted.error_code, restarted.generation_id, restarted.leader) == (E.NONE, gen, a_id)
    new_id = restarted.member_id
    assert new_id != b_id and new_id.startswith("ib-")
    assert c.snapshot("g").state is GroupState.STABLE  # no rebalance
    assert sync(c, "s", 6, new_id, gen, instance="ib")["s"].assignment == b"B"
    # the old id is fenced wherever it shows up with the instance id
    assert heartbeat(c, 7, b_id, gen, instance="ib") == E.FENCED_INSTANCE_ID
    assert sync(c, "s-old", 7, b_id, gen, instance="ib")["s-old"].error_code == E.FENCED_INSTANCE_ID
    assert commit(c, 7, b_id, gen, 5, instance="ib") == E.FENCED_INSTANCE_ID
    assert heartbeat(c, 7, b_id, gen) == E.UNKNOWN_MEMBER_ID  # without it, the id is simply unknown
    assert heartbeat(c, 7, new_id, gen, instance="ib") == E.NONE


@pytest.mark.parametrize("version,leader_told,skip", [(5, "old", False), (9, "new", True)])
def test_restarted_static_leader_is_told_how_to_behave(version, leader_told, skip):
    """Before v9 it is shown the old leader id (so it only fetches); from v9 it leads with skip_assignment."""
    c = new_coordinator()
    a_id, b_id, gen = static_pair(c)
    answer = join(c, "a-new", 5, instance="ia", version=version)["a-new"]
    assert answer.leader == (a_id if leader_told == "old" else answer.member_id)
    assert answer.skip_assignment is skip and bool(answer.members) is skip
    assert c.snapshot("g").state is GroupState.STABLE and c.snapshot("g").leader_id == answer.member_id


def test_static_member_rejoining_with_other_protocols_rebalances():
    c = new_coordinator()
    both = (("range", SUB_T), ("roundrobin", SUB_T))
    a_id = join(c, "a", 0, instance="ia", protocols=both)["a"].member_id
    sync(c, "s", 0, a_id, 1, {a_id: b"A"}, instance="ia")
    assert join(c, "a-new", 5, instance="ia", protocols=(("roundrobin", SUB_T),)) != {}  # alone: completes at once
    answer = join(c, "b", 6, instance="ib", protocols=both)
    assert answer == {} and c.snapshot("g").state is GroupState.PREPARING_REBALANCE
    c2 = new_coordinator()
    a_id = join(c2, "a", 0, instance="ia", protocols=both)["a"].member_id
    b_answers = join(c2, "b", 0, instance="ib", protocols=both)
    assert b_answers == {}
    answers = join(c2, "a2", 0, member_id=a_id, instance="ia", protocols=both)
    b_id = answers["b"].member_id
    sync(c2, "sb", 1, b_id, 2, instance="ib")
    sync(c2, "sa", 1, a_id, 2, {a_id: b"A", b_id: b"B"}, instance="ia")
    # b restarts offering only roundrobin: the group's protocol would change, so this is a rebalance
    assert join(c2, "b-new", 5, instance="ib", protocols=(("roundrobin", SUB_T),)) == {}
    assert c2.snapshot("g").state is GroupState.PREPARING_REBALANCE


def test_absent_static_member_survives_the_join_deadline_but_not_its_session():
    c = new_coordinator()
    a_id, b_id, gen = static_pair(c)
    join(c, "d", 10, version=3, client_id="d")  # a dynamic newcomer starts a rebalance
    join(c, "a2", 11, member_id=a_id, instance="ia")
    for now in (9000, 18000):  # b is alive (heartbeats) but does not rejoin
        assert heartbeat(c, now, b_id, gen, instance="ib") == E.REBALANCE_IN_PROGRESS
    replies = {r.reply_to: r.result for r in c.tick(10 + 20000)}  # the rebalance timeout
    members = [m.member_id for m in replies["a2"].members]
    assert b_id in members, "a static member that did not rejoin is kept"
    assert replies["a2"].generation_id == gen + 1


# --- leaving ----------------------------------------------------------------------------------------


def test_leave_group_v3_batch_answers_per_member():
    c = new_coordinator()
    a_id, b_id, gen = static_pair(c)
    M = LeaveGroupRequest.MemberIdentity
    request = LeaveGroupRequest(
        group_id="g",
        members=[
            M(member_id="", group_instance_id="ib"),  # an administrator removing an instance
            M(member_id="ghost"),
            M(member_id="wrong", group_instance_id="ia"),
        ],
    )
    answer = send(c, "l", request, 3, 5)["l"]
    R = LeaveGroupResponse.MemberResponse
    assert answer.error_code == E.NONE
    assert answer.members == [
        R(member_id="", group_instance_id="ib", error_code=E.NONE),
        R(member_id="ghost", group_instance_id=None, error_code=E.UNKNOWN_MEMBER_ID),
        R(member_id="wrong", group_instance_id="ia", error_code=E.FENCED_INSTANCE_ID),
    ]
    assert [m.member_id for m in c.snapshot("g").members] == [a_id]
    answer.encode(3)
    unknown_group = send(c, "l2", LeaveGroupRequest(group_id="nope", members=[M(member_id="x")]), 5, 6)["l2"]
    assert unknown_group.members[0].error_code == E.UNKNOWN_MEMBER_ID


# --- offsets ----------------------------------------------------------------------------------------


def test_commit_v1_timestamp_v6_leader_epoch_and_fetch_v5_reads_it():
    c = new_coordinator(offsets_retention_ms=1000)
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    v1 = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        topics=[
            T(
                name="t",
                partitions=[
                    T.OffsetCommitRequestPartition(partition_index=0, committed_offset=3, commit_timestamp=500)
                ],
            )
        ],
    )
    send(c, "c1", v1, 1, 0)
    assert c.next_deadline_ms() == 1500  # the commit counts as made at 500
    assert commit(c, 10, "", -1, 9, version=6, epoch=4, partition=1) == E.NONE
    F = OffsetFetchRequest.OffsetFetchRequestTopic
    fetched = send(c, "f", OffsetFetchRequest(group_id="g", topics=[F(name="t", partition_indexes=[1])]), 5, 11)["f"]
    p = fetched.topics[0].partitions[0]
    assert (p.committed_offset, p.committed_leader_epoch, p.error_code) == (9, 4, E.NONE)


def test_fetch_v2_null_topics_means_all_and_v8_answers_several_groups():
    c = new_coordinator()
    commit(c, 0, "", -1, 7, group="g1")
    commit(c, 0, "", -1, 8, group="g2", partition=3)
    everything = send(c, "f", OffsetFetchRequest(group_id="g1", topics=None), 2, 1)["f"]
    assert [(t.name, p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions] == [
        ("t", 0, 7)
    ]
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    multi = OffsetFetchRequest(
        groups=[G(group_id="g1", topics=None), G(group_id="g2", topics=[T(name="t", partition_indexes=[3, 4])])]
    )
    answer = send(c, "m", multi, 8, 2)["m"]
    assert [
        (g.group_id, [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions])
        for g in answer.groups
    ] == [("g1", [(0, 7)]), ("g2", [(3, 8), (4, -1)])]
    answer.encode(8)


def test_simple_commit_is_refused_while_the_group_has_members():
    c = new_coordinator()
    static_pair(c)
    assert commit(c, 1, "", -1, 5) == E.UNKNOWN_MEMBER_ID
    assert commit(new_coordinator(), 1, "m", 3, 5) == E.ILLEGAL_GENERATION  # unknown group, a generation


def test_offset_delete_spares_subscribed_topics_and_empty_groups_lose_everything():
    c = new_coordinator()
    a_id, b_id, gen = static_pair(c)
    commit(c, 1, a_id, gen, 5, instance="ia")
    commit(c, 1, a_id, gen, 6, instance="ia", partition=1)
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    P = T.OffsetDeleteRequestPartition
    request = OffsetDeleteRequest(group_id="g", topics=[T(name="t", partitions=[P(partition_index=0)])])
    answer = send(c, "d", request, 0, 2)["d"]
    assert answer.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC  # members read "t"
    M = LeaveGroupRequest.MemberIdentity
    send(
        c,
        "l",
        LeaveGroupRequest(
            group_id="g", members=[M(member_id=a_id, group_instance_id="ia"), M(member_id=b_id, group_instance_id="ib")]
        ),
        3,
        3,
    )
    assert c.snapshot("g").state is GroupState.EMPTY
    assert send(c, "d2", request, 0, 4)["d2"].topics[0].partitions[0].error_code == E.NONE
    assert c.committed("g") == {("t", 1): (6, "")}
    assert send(c, "d3", OffsetDeleteRequest(group_id="nope"), 0, 5)["d3"].error_code == E.GROUP_ID_NOT_FOUND


# --- administration ---------------------------------------------------------------------------------


def test_describe_v4_shows_instance_ids_and_v3_the_authorized_operations():
    c = new_coordinator()
    static_pair(c)
    described = send(c, "d", DescribeGroupsRequest(groups=["g"], include_authorized_operations=True), 4, 1)["d"]
    group = described.groups[0]
    assert group.group_state == "Stable" and group.authorized_operations == GROUP_AUTHORIZED_OPERATIONS
    assert [m.group_instance_id for m in group.members] == ["ia", "ib"]
    described.encode(4)


def test_list_groups_v4_filters_states_and_v5_types():
    c = new_coordinator()
    static_pair(c)
    commit(c, 1, "", -1, 1, group="idle")

    def listed(version, **filters):
        answer = send(c, "l", ListGroupsRequest(**filters), version, 1)["l"]
        return sorted((g.group_id, g.group_state, g.group_type) for g in answer.groups)

    assert listed(4, states_filter=["empty"]) == [("idle", "Empty", "")]
    assert listed(4, states_filter=["Stable", "Empty"]) == [("g", "Stable", ""), ("idle", "Empty", "")]
    assert listed(5, types_filter=["Classic"]) == [("g", "Stable", "classic"), ("idle", "Empty", "classic")]
    assert listed(5, types_filter=["consumer"]) == []
    assert listed(0) == [("g", "", ""), ("idle", "", "")]


def test_delete_groups_deletes_only_empty_groups():
    c = new_coordinator()
    static_pair(c)
    commit(c, 1, "", -1, 1, group="idle")
    answer = send(c, "d", DeleteGroupsRequest(groups_names=["idle", "g", "nope"]), 2, 1)["d"]
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("idle", E.NONE),
        ("g", E.NON_EMPTY_GROUP),
        ("nope", E.GROUP_ID_NOT_FOUND),
    ]
    assert c.committed("idle") == {} and c.group_ids() == ["g"]


def test_sync_v5_protocol_must_match():
    c = new_coordinator()
    joined = join(c, "a", 0, version=3)["a"]
    bad = sync(c, "s", 1, joined.member_id, 1, version=5, protocol_type="consumer", protocol_name="roundrobin")
    assert bad["s"].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    good = sync(
        c,
        "s2",
        1,
        joined.member_id,
        1,
        {joined.member_id: b"x"},
        version=5,
        protocol_type="consumer",
        protocol_name="range",
    )["s2"]
    assert (good.error_code, good.protocol_type, good.protocol_name, good.assignment) == (
        E.NONE,
        "consumer",
        "range",
        b"x",
    )


def test_every_served_version_answers_something_that_encodes():
    """Whatever the coordinator answers in each served version is ready for the wire in that version."""
    for request_class, (low, high) in SERVED_VERSIONS.items():
        for version in range(low, high + 1):
            c = new_coordinator()
            message = (
                request_class.decode(request_class().encode(version), version)
                if request_class is not JoinGroupRequest
                else JoinGroupRequest(
                    group_id="g",
                    session_timeout_ms=10000,
                    protocol_type="consumer",
                    protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUB_T)],
                )
            )
            for reply in c.handle("t", message, version, client_id="c", client_host="/h", now_ms=0):
                reply.result.encode(version)


# --- the member -------------------------------------------------------------------------------------


def modern_member(name, **config):
    return GroupMember(
        MemberConfig("g", name, ("t",), session_timeout_ms=10000, **config), api_versions=negotiate("3.9")
    )


def test_member_versions_follow_the_negotiation_and_default_to_0_9():
    assert modern_member("a").versions == {
        "group_coordinator": 3,
        "join_group": 9,
        "sync_group": 5,
        "heartbeat": 4,
        "offset_commit": 9,
        "leave_group": 5,
        "offset_fetch": 7,
    }
    old = GroupMember(MemberConfig("g", "a", ("t",)))
    assert old.versions["join_group"] == 0 and old.versions["offset_commit"] == 2
    assert GroupMember(MemberConfig("g", "a", ("t",)), api_versions=negotiate("2.0")).versions["join_group"] == 3


def test_modern_members_share_partitions_over_the_loopback():
    lb = Loopback(GroupCoordinator(), {"t": 4})
    a = lb.add("a", modern_member("a", rebalance_timeout_ms=20000))
    b = lb.add("b", modern_member("b", rebalance_timeout_ms=20000))
    lb.advance(5000)  # a learns of the rebalance from its next heartbeat
    assert a.state is b.state is MemberState.STABLE
    assert sorted(a.assignment["t"] + b.assignment["t"]) == [0, 1, 2, 3]
    members = lb.coordinator.snapshot("g").members
    assert [m.rebalance_timeout_ms for m in members] == [20000, 20000]  # JoinGroup v1+ carried it


def test_static_member_restart_over_the_loopback_keeps_the_generation_and_partitions():
    lb = Loopback(GroupCoordinator(), {"t": 4})
    a = lb.add("a", modern_member("a", group_instance_id="ia"))
    b = lb.add("b", modern_member("b", group_instance_id="ib"))
    lb.advance(4000)
    generation, before = b.generation_id, b.assignment
    assert b.state is MemberState.STABLE and before
    actions = b.close(lb.now_ms)
    assert not any(isinstance(x, SendRequest) and isinstance(x.request, LeaveGroupRequest) for x in actions)
    lb.silence("b")
    b2 = lb.add("b2", modern_member("b", group_instance_id="ib"))
    lb.advance(lb.now_ms + 4000)
    assert (b2.state, b2.generation_id, b2.assignment) == (MemberState.STABLE, generation, before)
    assert a.generation_id == generation  # a never rebalanced


def test_dynamic_member_leaves_with_the_batch_form():
    lb = Loopback(GroupCoordinator(), {"t": 2})
    a = lb.add("a", modern_member("a"))
    lb.advance(100)
    sends = [x for x in a.close(lb.now_ms) if isinstance(x, SendRequest)]
    leave = [s for s in sends if isinstance(s.request, LeaveGroupRequest)][0]
    assert leave.api_version == 5 and [m.member_id for m in leave.request.members] == [a.member_id]


def test_member_fetches_committed_offsets():
    lb = Loopback(GroupCoordinator(), {"t": 2})
    a = lb.add("a", modern_member("a"))
    lb.advance(100)
    lb._enqueue("a", a.commit(lb.now_ms, {("t", 0): 42}))
    lb.flush()
    lb._enqueue("a", a.fetch_committed([("t", 0), ("t", 1)], lb.now_ms))
    lb.flush()
    fetched = [x for _, x in lb.events if isinstance(x, OffsetsFetched)][-1]
    assert fetched.offsets == {("t", 0): (42, ""), ("t", 1): (-1, "")} and fetched.error_code == 0


def test_static_membership_needs_join_group_v5():
    member = GroupMember(MemberConfig("g", "a", ("t",), group_instance_id="i"), api_versions=negotiate("2.2"))
    lb = Loopback(GroupCoordinator(), {"t": 1})
    lb.add("a", member)
    assert member.state is MemberState.FAILED
    assert [x for _, x in lb.events if isinstance(x, GroupFailed)][0].error_code == E.UNSUPPORTED_VERSION


# --- the consumer protocol --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_versions_match_kafka_python_byte_for_byte(version):
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Theirs

    ours = ConsumerSubscription(
        version,
        ("a", "b"),
        b"ud",
        {"a": (0, 2)} if version else {},
        5 if version >= 2 else -1,
        "r1" if version >= 3 else None,
    )
    theirs = Theirs(
        topics=["a", "b"],
        user_data=b"ud",
        owned_partitions=[Theirs.TopicPartition(topic="a", partitions=[0, 2])],
        generation_id=5,
        rack_id="r1",
        version=version,
    )
    data = CODEC.encode_subscription_details(ours)
    assert data == theirs.encode()
    assert CODEC.decode_subscription_details(data) == ours
    assert CODEC.decode_subscription(data) == ["a", "b"]  # the 0.9 rule reads the topics of any version


def test_subscription_details_reject_a_body_shorter_than_its_version():
    with pytest.raises(kproto.KprotoError):
        CODEC.decode_subscription_details(bytes.fromhex("0003 00000001 0004 74657374 00000000"))


# --- real clients' requests, answered ---------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "clients"
INDEX = json.loads((GOLDEN / "index.json").read_text(encoding="utf-8"))


def kafka_python_responses():
    found = {}
    for module in ("admin", "consumer"):
        mod = importlib.import_module(f"kafka.protocol.{module}")
        for name in dir(mod):
            cls = getattr(mod, name)
            if isinstance(cls, type) and name.endswith("Response") and hasattr(cls, "API_KEY"):
                found[cls.API_KEY] = cls
    return found


@pytest.mark.parametrize("client", ["kafka-python", "librdkafka", "aiokafka"])
def test_recorded_client_conversation_is_answered_and_kafka_python_reads_the_answers(client):
    """The client's own JoinGroup/SyncGroup/Heartbeat/OffsetCommit/OffsetFetch/LeaveGroup, in the versions it
    chose at its defaults, with member id and generation taken from our answers instead of the recording's."""
    theirs = kafka_python_responses()
    frames = [e for e in INDEX["frames"] if e["client"] == client and e["api_key"] in (8, 9, 11, 12, 13, 14)]
    c = GroupCoordinator()
    member_id, generation, answers = "", -1, {}
    for n, entry in enumerate(frames):
        header, request = kproto.decode_request((GOLDEN / entry["file"]).read_bytes())
        for attr in ("member_id", "generation_id", "generation_id_or_member_epoch"):
            if hasattr(request, attr) and attr != "member_id" or (attr == "member_id" and n and hasattr(request, attr)):
                setattr(request, attr, member_id if attr == "member_id" else generation)
        if isinstance(request, LeaveGroupRequest) and header.api_version >= 3:
            for m in request.members:
                m.member_id = member_id
        committed = c.committed(getattr(request, "group_id", "") or "")
        replies = c.handle(n, request, header.api_version, client_id=header.client_id or "", client_host="/h", now_ms=n)
        (reply,) = [r for r in replies if r.reply_to == n]
        frame = kproto.encode_response(reply.result, header.api_version, header.correlation_id)
        decoded = theirs[entry["api_key"]].decode(frame, version=header.api_version, header=True, framed=True)
        answers.setdefault(entry["api_name"], []).append(decoded)
        if entry["api_name"] == "OffsetFetch":  # what was committed so far, −1 elsewhere
            groups = decoded.groups if header.api_version >= 8 else [decoded]
            for g in groups:
                for t in g.topics:
                    for p in t.partitions:
                        group_committed = c.committed(g.group_id) if header.api_version >= 8 else committed
                        assert p.committed_offset == group_committed.get((t.name, p.partition_index), (-1,))[0]
        if entry["api_name"] == "JoinGroup":
            member_id = decoded.member_id
            generation = decoded.generation_id if decoded.error_code == 0 else generation
    joins = [j.error_code for j in answers["JoinGroup"]]
    assert joins in ([E.MEMBER_ID_REQUIRED, E.NONE], [E.NONE, E.NONE])
    assert answers["SyncGroup"][0].error_code == E.NONE
    assert answers["Heartbeat"][0].error_code == E.NONE
    commit_codes = [p.error_code for t in answers["OffsetCommit"][0].topics for p in t.partitions]
    assert commit_codes and set(commit_codes) == {E.NONE}
    assert answers["OffsetFetch"] and any(c.committed(g) for g in c.group_ids())
    leave = answers["LeaveGroup"][0]
    assert leave.error_code == E.NONE and all(m.error_code == E.NONE for m in getattr(leave, "members", []) or [])


def test_a_pending_id_sent_with_an_instance_id_never_doubles_the_instance():
    """Found by the stateful test: the instance's member is not duplicated through a pending id."""
    c = new_coordinator()
    static_id = join(c, "s", 0, instance="i2")["s"].member_id
    pending = join(c, "p", 1, version=4)["p"].member_id
    assert join(c, "x", 2, member_id=pending, instance="i2")["x"].error_code == E.FENCED_INSTANCE_ID
    assert join(c, "y", 2, member_id=pending, instance="other")["y"].error_code == E.UNKNOWN_MEMBER_ID
    assert [m.group_instance_id for m in c.snapshot("g").members] == ["i2"] and static_id
