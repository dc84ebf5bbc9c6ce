"""The KIP-848 consumer group coordinator on a deterministic clock: one test per rule, the assignors'
outputs, and a stateful test that no partition ever has two owners."""

from __future__ import annotations

import re
import time
import uuid
from typing import Dict, List, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker_client import SocketClient
from kproto import ErrorCode
from kproto.errors import LocalProtocolError
from kproto.group.consumer_group import ConsumerGroupConfig, ConsumerGroupCoordinator, safe_regex
from kproto.group.consumer_group_rules import HEARTBEAT_CHECKS, Check, GroupState, MemberState
from kproto.group.offset_store import OffsetStore
from kproto.group.server_assignors import range_assign, uniform_assign
from kproto.messages import (
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeleteGroupsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kproto.testing import MockBroker

H = ConsumerGroupHeartbeatRequest
SESSION = 10_000


class Harness:
    def __init__(self, topics: Optional[Dict[str, int]] = None, **config: object) -> None:
        self.topics = {name: [None] * n for name, n in (topics or {"t": 6}).items()}
        self.ids = {name: uuid.uuid4() for name in self.topics}
        self.offsets = OffsetStore(metadata_max_length=4096, default_retention_ms=10**9)
        self.classic_members: set = set()
        self.c = ConsumerGroupCoordinator(
            ConsumerGroupConfig(**{"session_timeout_ms": SESSION, **config}),  # type: ignore[arg-type]
            topic_partitions=self.topics,
            topic_ids=self.ids,
            offsets=self.offsets,
            classic_has_members=lambda g: g in self.classic_members,
        )
        self.now = 0

    def hb(
        self,
        member_id: str,
        epoch: int,
        owned: Optional[Dict[str, List[int]]] = None,
        *,
        names: Optional[List[str]] = None,
        instance: Optional[str] = None,
        regex: Optional[str] = None,
        version: int = 1,
        group: str = "g",
        assignor: Optional[str] = None,
        rebalance_timeout_ms: Optional[int] = None,
    ) -> ConsumerGroupHeartbeatResponse:
        joining = epoch == 0
        if joining and names is None and regex is None:
            names = ["t"]
        parts = (
            ([] if joining else None)
            if owned is None
            else [H.TopicPartitions(topic_id=self.ids[t], partitions=ps) for t, ps in owned.items()]
        )
        req = H(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=rebalance_timeout_ms
            if rebalance_timeout_ms is not None
            else (5000 if joining else -1),
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=parts,
        )
        return self.c.handle(req, version, client_id="cid", client_host="/127.0.0.1", now_ms=self.now)

    def assigned(self, response: ConsumerGroupHeartbeatResponse) -> Dict[str, List[int]]:
        names = {v: k for k, v in self.ids.items()}
        assert response.assignment is not None
        return {names[t.topic_id]: list(t.partitions) for t in response.assignment.topic_partitions}

    def owners_ok(self, group: str = "g") -> None:
        """Each partition held (assigned or pending revocation) by at most one member."""
        seen: Dict[tuple, str] = {}
        for m in self.c.members(group):
            for topic, ps in list(m.assigned.items()) + list(m.pending_revocation.items()):
                for p in ps:
                    assert (topic, p) not in seen, f"{topic}-{p} held by {seen[(topic, p)]} and {m.member_id}"
                    seen[(topic, p)] = m.member_id


def converge(h: Harness, ids: List[str], rounds: int = 6) -> Dict[str, Dict[str, List[int]]]:
    """Heartbeat every member (each acknowledging what it was told) until nothing moves."""
    held = {m: {} for m in ids}  # type: Dict[str, Dict[str, List[int]]]
    epochs = {m.member_id: m.member_epoch for m in h.c.members("g")}
    for _ in range(rounds):
        for m in ids:
            r = h.hb(m, epochs[m], held[m])
            assert r.error_code == ErrorCode.NONE, r
            epochs[m] = r.member_epoch
            if r.assignment is not None:
                held[m] = h.assigned(r)
            h.owners_ok()
    return held


# ------------------------------------------------------------------------------------------- joining


def test_first_member_gets_everything_at_epoch_one() -> None:
    h = Harness()
    r = h.hb("a", 0)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "a", 1, 5000)
    assert h.assigned(r) == {"t": [0, 1, 2, 3, 4, 5]}
    assert h.c.group_state("g") is GroupState.STABLE


def test_v0_join_without_member_id_gets_one_v1_must_send_one() -> None:
    h = Harness()
    assert h.hb("", 0, version=0).member_id
    assert h.hb("", 0, version=1).error_code == ErrorCode.INVALID_REQUEST


def test_partitions_move_only_after_the_old_owner_revokes() -> None:
    h = Harness()
    h.hb("a", 0)
    b = h.hb("b", 0)
    # b's target is half the partitions, but a still holds them: b waits in UNRELEASED_PARTITIONS.
    assert h.assigned(b) == {} and b.member_epoch == 2
    assert {m.member_id: m.state for m in h.c.members("g")}["b"] is MemberState.UNRELEASED_PARTITIONS
    a = h.hb("a", 1, {"t": [0, 1, 2, 3, 4, 5]})
    assert a.member_epoch == 1 and h.assigned(a) == {"t": [0, 1, 2]}
    assert {m.member_id: m.state for m in h.c.members("g")}["a"] is MemberState.UNREVOKED_PARTITIONS
    assert h.hb("b", 2, {}).assignment is None  # still held by a
    a = h.hb("a", 1, {"t": [0, 1, 2]})  # revoked: a moves to the new epoch
    assert a.member_epoch == 2
    b = h.hb("b", 2, {})
    assert h.assigned(b) == {"t": [3, 4, 5]}
    assert h.c.group_state("g") is GroupState.STABLE
    h.owners_ok()


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    h.hb("a", 0, rebalance_timeout_ms=3000)
    h.hb("b", 0)
    h.hb("a", 1, {"t": [0, 1, 2, 3, 4, 5]})  # asked to revoke 3-5
    h.now = 3000
    h.c.tick(h.now)
    assert [m.member_id for m in h.c.members("g")] == ["b"]
    r = h.hb("a", 1, {"t": [0, 1, 2, 3, 4, 5]})
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    b = h.hb("b", 2, {})
    assert h.assigned(b) == {"t": [0, 1, 2, 3, 4, 5]}


def test_session_expiry_frees_only_the_dead_members_partitions() -> None:
    h = Harness()
    held = converge(h, ["a", "b"]) if h.hb("a", 0) and h.hb("b", 0) else {}
    assert held["a"] and held["b"]
    h.now = SESSION - 1
    for m in ("a",):
        h.hb(m, h.c.members("g")[0].member_epoch, held[m])
    h.now = SESSION
    h.c.tick(h.now)
    assert [m.member_id for m in h.c.members("g")] == ["a"]
    epoch = h.c.members("g")[0].member_epoch
    r = h.hb("a", epoch, held["a"])
    got = h.assigned(r)["t"]
    assert set(held["a"]["t"]) <= set(got) and sorted(got) == [0, 1, 2, 3, 4, 5]


def test_leave_frees_partitions_at_once() -> None:
    h = Harness()
    h.hb("a", 0)
    h.hb("b", 0)
    assert h.hb("a", -1).member_epoch == -1
    assert h.assigned(h.hb("b", 2, {})) == {"t": [0, 1, 2, 3, 4, 5]}


# ------------------------------------------------------------------------------------------- epochs


def test_epoch_rules() -> None:
    h = Harness()
    h.hb("a", 0)
    assert h.hb("a", 7, {}).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.hb("a", -3).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("zz", 1, {}).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.hb("zz", 1, {}, group="nope").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    h.hb("b", 0)  # group epoch 2
    h.hb("a", 1, {"t": [0, 1, 2, 3, 4, 5]})
    h.hb("a", 1, {"t": [0, 1, 2]})  # a now at epoch 2
    # The previous epoch with owned partitions inside the assignment: a lost answer, accepted.
    assert h.hb("a", 1, {"t": [0, 1]}).error_code == ErrorCode.NONE
    assert h.hb("a", 1, {"t": [5]}).error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_bad_requests() -> None:
    h = Harness()
    assert h.hb("a", 0, {"t": [1]}).error_code == ErrorCode.INVALID_REQUEST  # a join owns nothing
    assert h.hb("a", 0, names=[]).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("a", 0, assignor="sticky").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert h.hb("a", 0, instance="").error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("a", 0, rebalance_timeout_ms=-1).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("a", -2).error_code == ErrorCode.INVALID_REQUEST  # a static leave needs its instance id
    full = Harness(max_size=1)
    full.hb("a", 0)
    assert full.hb("b", 0).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_checks_run_in_table_order() -> None:
    # A request failing several checks is answered by the first of HEARTBEAT_CHECKS.
    order = HEARTBEAT_CHECKS.index
    assert order(Check.ASSIGNOR_KNOWN) < order(Check.REGEX_VALID) < order(Check.NOT_CLASSIC_GROUP)
    h = Harness()
    h.classic_members.add("g")
    assert h.hb("a", 0, regex="(?=a)b", assignor="x").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert h.hb("a", 0, regex="(?=a)b").error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert h.hb("a", 0).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_huge_subscriptions_are_bounded() -> None:
    h = Harness()
    names = [f"topic-{i}" for i in range(99_999)] + ["t"]
    started = time.monotonic()
    r = h.hb("a", 0, names=names)
    assert r.error_code == ErrorCode.NONE and h.assigned(r) == {"t": [0, 1, 2, 3, 4, 5]}
    assert time.monotonic() - started < 10.0  # linear in the names; a generous bound
    over = Harness(max_subscribed_topics=1000)
    assert over.hb("a", 0, names=names).error_code == ErrorCode.INVALID_REQUEST


def test_regex_subscriptions() -> None:
    h = Harness({"orders-1": 2, "orders-2": 2, "other": 2})
    r = h.hb("a", 0, regex=r"orders-\d+")
    # As Kafka, a new expression is resolved after the join is answered: its topics come on the next heartbeat.
    assert (r.member_epoch, h.assigned(r)) == (1, {})
    r = h.hb("a", 1, {})
    assert (r.member_epoch, h.assigned(r)) == (2, {"orders-1": [0, 1], "orders-2": [0, 1]})
    # What RE2 (Kafka's engine) does not have, bad syntax, and patterns past the size bounds are refused.
    for bad in [r"(\w)\1", "(?=a)b", "a++", "(?i)x", "[", "a" * 2000, "a{1500}b{1500}"]:
        assert h.hb("b", 0, regex=bad).error_code == ErrorCode.INVALID_REGULAR_EXPRESSION, bad
    assert safe_regex("a*b+c?", 100) is not None and safe_regex("(ab)+", 100) is not None


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|a)*c", "(x*)*y", "a*" * 30 + "c", "(.*a){12}"])
def test_regex_that_would_backtrack_is_matched_in_linear_time(pattern: str) -> None:
    # Python's re takes seconds on (a|a)*c against 26 characters and would not finish against 249; the
    # linear matcher answers as re does (checked on short names) and stays fast on the longest name.
    matcher = safe_regex(pattern, 1024)
    assert matcher is not None
    for text in ["", "a", "aac", "xxy", "aaaa", "ab" * 6]:
        assert matcher.fullmatch(text) == bool(re.fullmatch(pattern, text)), text
    started = time.monotonic()
    for name in ["a" * 249, "a" * 248 + "b", "x" * 249]:
        matcher.fullmatch(name)
    assert time.monotonic() - started < 2.0  # milliseconds in practice; a generous bound
    h = Harness({"a" * 249: 1})
    assert h.hb("a", 0, regex=pattern).error_code == ErrorCode.NONE


# ------------------------------------------------------------------------------------------- static members


def test_a_static_member_restarting_keeps_its_partitions() -> None:
    h = Harness()
    h.hb("a", 0, instance="i-a")
    h.hb("b", 0, instance="i-b")
    held = converge(h, ["a", "b"])
    assert h.hb("a", -2, held["a"], instance="i-a").member_epoch == -2
    assert h.hb("a2", 0, instance="i-b").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    epochs = h.c.group_epoch("g")
    r = h.hb("a2", 0, instance="i-a")
    assert r.error_code == ErrorCode.NONE and h.assigned(r) == held["a"]
    assert h.c.group_epoch("g") == epochs  # same subscription: no rebalance
    assert h.hb("a", 2, {}, instance="i-a").error_code == ErrorCode.FENCED_INSTANCE_ID
    h.owners_ok()


# ------------------------------------------------------------------------------------------- offsets, describe, classic


def test_offset_checks() -> None:
    h = Harness()
    h.hb("a", 0)
    assert h.c.offset_commit_error("g", "a", 1, 9) is None
    assert h.c.offset_commit_error("g", "a", 0, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert h.c.offset_commit_error("g", "x", 1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.c.offset_commit_error("g", "a", 1, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert h.c.offset_commit_error("g", "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    assert h.c.offset_fetch_error("g", "a", 1) is None
    assert h.c.offset_fetch_error("g", "a", 5) == ErrorCode.STALE_MEMBER_EPOCH
    assert h.c.offset_fetch_error("g", None, -1) is None


def test_describe() -> None:
    h = Harness()
    h.hb("a", 0, instance="i")
    d = h.c.handle(
        ConsumerGroupDescribeRequest(group_ids=["g", "x"], include_authorized_operations=True),
        1,
        client_id="c",
        client_host="h",
        now_ms=0,
    )
    g, x = d.groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Stable", 1, 1, "uniform")
    assert g.members[0].instance_id == "i" and g.members[0].assignment.topic_partitions[0].topic_name == "t"
    assert x.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_classic_group_with_members_is_not_taken_over() -> None:
    h = Harness()
    h.classic_members.add("g")
    assert h.hb("a", 0).error_code == ErrorCode.GROUP_ID_NOT_FOUND


# ------------------------------------------------------------------------------------------- assignors


def test_range_assignor_matches_kafkas_example() -> None:
    # Kafka's RangeAssignor documentation: M0 gets T1P0, T1P1, T2P0, T2P1; M1 gets T1P2, T2P2.
    members = {"M0": (None, ["T1", "T2"]), "M1": (None, ["T1", "T2"])}
    out = range_assign(members, {"T1": 3, "T2": 3}, {})
    assert out == {"M0": {"T1": [0, 1], "T2": [0, 1]}, "M1": {"T1": [2], "T2": [2]}}
    # Static members come first, in instance-id order.
    members = {"a": (None, ["T1"]), "z": ("I0", ["T1"])}
    assert range_assign(members, {"T1": 3}, {}) == {"z": {"T1": [0, 1]}, "a": {"T1": [2]}}


def test_uniform_assignor_reassigns_as_kafka_from_an_unbalanced_target() -> None:
    # Kafka's uniform assignor test of an unbalanced previous target (A held 4 of 6, B 2): A keeps
    # topic1 0-1 and topic2 0, giving topic2 1 up to B.
    members = {"A": (None, ["topic1", "topic2"]), "B": (None, ["topic1", "topic2"])}
    previous = {"A": {"topic1": [0, 1], "topic2": [0, 1]}, "B": {"topic1": [2], "topic2": [2]}}
    assert uniform_assign(members, {"topic1": 3, "topic2": 3}, previous) == {
        "A": {"topic1": [0, 1], "topic2": [0]},
        "B": {"topic1": [2], "topic2": [1, 2]},
    }


def test_uniform_assignor_balances_and_sticks() -> None:
    members = {m: (None, ["t"]) for m in ("a", "b", "c")}
    first = uniform_assign(members, {"t": 7}, {})
    assert sorted(len(v["t"]) for v in first.values()) == [2, 2, 3]
    members["d"] = (None, ["t"])
    second = uniform_assign(members, {"t": 7}, first)
    moved = sum(len(set(first[m]["t"]) - set(second[m].get("t", []))) for m in first)
    assert sorted(len(v.get("t", [])) for v in second.values()) == [1, 2, 2, 2] and moved == 1
    # Different subscriptions: every subscribed partition assigned to a subscriber.
    mixed = uniform_assign({"a": (None, ["x"]), "b": (None, ["x", "y"])}, {"x": 2, "y": 2}, {})
    assert sorted(mixed["a"]["x"] + mixed["b"].get("x", [])) == [0, 1] and mixed["b"]["y"] == [0, 1]


# ------------------------------------------------------------------------------------------- stateful


class OneOwnerMachine(RuleBasedStateMachine):
    """Random joins, leaves, heartbeats (acknowledging or not), expiries and new partitions: no partition
    ever has two owners, and what a member is told it owns is never held by another."""

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness({"t": 4, "u": 3}, session_timeout_ms=SESSION)
        self.held: Dict[str, Dict[str, List[int]]] = {}
        self.epochs: Dict[str, int] = {}
        self.next_id = 0

    @rule(names=st.sampled_from([["t"], ["u"], ["t", "u"]]))
    def join(self, names: List[str]) -> None:
        member = f"m{self.next_id}"
        self.next_id += 1
        r = self.h.hb(member, 0, names=names)
        if r.error_code == 0:
            self.epochs[member], self.held[member] = r.member_epoch, self.h.assigned(r)

    @rule(data=st.data(), ack=st.booleans())
    def heartbeat(self, data: st.DataObject, ack: bool) -> None:
        if not self.epochs:
            return
        member = data.draw(st.sampled_from(sorted(self.epochs)))
        r = self.h.hb(member, self.epochs[member], self.held[member])
        if r.error_code != 0:
            self.epochs.pop(member)
            self.held.pop(member)
            return
        self.epochs[member] = r.member_epoch
        if r.assignment is not None and ack:
            # A client first revokes what it lost; what it gained it takes.
            self.held[member] = self.h.assigned(r)

    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        if self.epochs:
            member = data.draw(st.sampled_from(sorted(self.epochs)))
            self.h.hb(member, -1)
            self.epochs.pop(member)
            self.held.pop(member)

    @rule(ms=st.integers(0, SESSION))
    def time_passes(self, ms: int) -> None:
        self.h.now += ms
        self.h.c.tick(self.h.now)
        alive = {m.member_id for m in self.h.c.members("g")}
        for member in [m for m in self.epochs if m not in alive]:
            self.epochs.pop(member)
            self.held.pop(member)

    @rule()
    def grow_topic(self) -> None:
        self.h.topics["t"].append(None)

    @invariant()
    def one_owner(self) -> None:
        self.h.owners_ok()
        claimed: Dict[tuple, str] = {}
        for member, held in self.held.items():
            for topic, ps in held.items():
                for p in ps:
                    assert (topic, p) not in claimed, f"{topic}-{p} claimed by {claimed[(topic, p)]} and {member}"
                    claimed[(topic, p)] = member


OneOwnerMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_one_owner_per_partition = OneOwnerMachine.TestCase


# ------------------------------------------------------------------------------------------- served by the mock broker


def test_mock_broker_serves_consumer_groups_and_routes_their_offsets() -> None:
    with MockBroker(topics={"t": 2}) as broker, SocketClient((broker.host, broker.port)) as client:
        versions = client.request(ApiVersionsRequest(client_software_name="k", client_software_version="1"), 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert served[68] == (0, 1) and served[69] == (0, 1)
        assert [(f.name, f.min_version_level, f.max_version_level) for f in versions.finalized_features] == [
            ("group.version", 1, 1)
        ]
        joined = client.request(
            H(
                group_id="g",
                member_id="m1",
                member_epoch=0,
                rebalance_timeout_ms=1000,
                subscribed_topic_names=["t"],
                topic_partitions=[],
            ),
            1,
        )
        assert (joined.error_code, joined.member_epoch) == (0, 1)
        assert len(joined.assignment.topic_partitions[0].partitions) == 2
        fenced = client.request(H(group_id="g", member_id="m1", member_epoch=9, topic_partitions=[]), 1)
        assert (fenced.error_code, fenced.member_id) == (ErrorCode.FENCED_MEMBER_EPOCH, None)

        def commit(epoch: int, version: int = 9) -> int:
            T = OffsetCommitRequest.OffsetCommitRequestTopic
            P = T.OffsetCommitRequestPartition
            answer = client.request(
                OffsetCommitRequest(
                    group_id="g",
                    generation_id_or_member_epoch=epoch,
                    member_id="m1",
                    topics=[T(name="t", partitions=[P(partition_index=0, committed_offset=42)])],
                ),
                version,
            )
            return int(answer.topics[0].partitions[0].error_code)

        assert commit(0) == ErrorCode.STALE_MEMBER_EPOCH
        assert commit(1, version=8) == ErrorCode.UNSUPPORTED_VERSION
        assert commit(1) == ErrorCode.NONE
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        fetched = client.request(
            OffsetFetchRequest(groups=[G(group_id="g", member_id="m1", member_epoch=1, topics=None)]), 9
        )
        assert fetched.groups[0].error_code == 0
        assert [(p.partition_index, p.committed_offset) for p in fetched.groups[0].topics[0].partitions] == [(0, 42)]
        stale = client.request(
            OffsetFetchRequest(groups=[G(group_id="g", member_id="m1", member_epoch=7, topics=None)]), 9
        )
        assert stale.groups[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
        # group.consumer.migration.policy=disabled: a classic member cannot join the consumer group.
        P = JoinGroupRequest.JoinGroupRequestProtocol
        classic = client.request(
            JoinGroupRequest(
                group_id="g",
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id="",
                protocol_type="consumer",
                protocols=[P(name="range", metadata=b"")],
            ),
            5,
        )
        assert classic.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        left = client.request(H(group_id="g", member_id="m1", member_epoch=-1), 1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        # Empty now (its offsets kept): a classic member may take the id over.
        assert (
            client.request(
                JoinGroupRequest(
                    group_id="g",
                    session_timeout_ms=10000,
                    rebalance_timeout_ms=10000,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[P(name="range", metadata=b"")],
                ),
                3,
            ).error_code
            == 0
        )
        assert broker.core.coordinator.committed("g") == {("t", 0): (42, "")}


def test_list_and_delete_consumer_groups() -> None:
    with MockBroker(topics={"t": 2}) as broker, SocketClient((broker.host, broker.port)) as client:
        client.request(
            H(
                group_id="cg",
                member_id="m1",
                member_epoch=0,
                rebalance_timeout_ms=1000,
                subscribed_topic_names=["t"],
                topic_partitions=[],
            ),
            1,
        )
        listed = client.request(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5)
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
            ("cg", "consumer", "Stable", "consumer")
        ]
        assert client.request(ListGroupsRequest(states_filter=[], types_filter=["classic"]), 5).groups == []
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        client.request(
            OffsetCommitRequest(
                group_id="cg",
                generation_id_or_member_epoch=1,
                member_id="m1",
                topics=[
                    T(name="t", partitions=[T.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])
                ],
            ),
            9,
        )
        deleted = client.request(DeleteGroupsRequest(groups_names=["cg"]), 2)
        assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        client.request(H(group_id="cg", member_id="m1", member_epoch=-1), 1)
        assert client.request(DeleteGroupsRequest(groups_names=["cg"]), 2).results[0].error_code == ErrorCode.NONE
        assert broker.core.coordinator.committed("cg") == {} and not broker.core.consumer_groups.owns("cg")


@settings(max_examples=200, deadline=None)
@given(
    members=st.dictionaries(
        st.sampled_from("abcdef"), st.sets(st.sampled_from(["x", "y", "z"]), min_size=1), min_size=1
    ),
    counts=st.fixed_dictionaries({"x": st.integers(0, 9), "y": st.integers(0, 9), "z": st.integers(0, 9)}),
    assignor=st.sampled_from(["uniform", "range"]),
    data=st.data(),
)
def test_assignors_give_each_subscribed_partition_to_one_subscriber(
    members: Dict[str, set], counts: Dict[str, int], assignor: str, data: st.DataObject
) -> None:
    specs = {m: (None, sorted(topics)) for m, topics in members.items()}
    fn = uniform_assign if assignor == "uniform" else range_assign
    first = fn(specs, counts, {})
    # A second round from the first's output, with one member gone, must hold the same properties.
    gone = data.draw(st.sampled_from(sorted(specs)))
    rest = {m: s for m, s in specs.items() if m != gone} or specs
    for out, group in ((first, specs), (fn(rest, counts, first), rest)):
        owner: Dict[tuple, str] = {}
        for m, by_topic in out.items():
            for topic, ps in by_topic.items():
                assert topic in group[m][1]
                for p in ps:
                    assert (topic, p) not in owner
                    owner[(topic, p)] = m
        subscribed = {t for _, topics in group.values() for t in topics}
        assert set(owner) == {(t, p) for t in subscribed for p in range(counts[t])}
        if assignor == "uniform" and len({tuple(t) for _, t in group.values()}) == 1:
            sizes = [sum(len(ps) for ps in out.get(m, {}).values()) for m in group]
            assert max(sizes) - min(sizes) <= 1


def test_new_and_deleted_topics_move_the_group_epoch() -> None:
    h = Harness({"t": 2, "u": 2})
    r = h.hb("a", 0, names=["t", "u"])
    assert h.assigned(r) == {"t": [0, 1], "u": [0, 1]}
    h.topics["t"].append(None)  # CreatePartitions
    r = h.hb("a", 1, {"t": [0, 1], "u": [0, 1]})
    assert r.member_epoch == 2 and h.assigned(r) == {"t": [0, 1, 2], "u": [0, 1]}
    del h.topics["u"], h.ids["u"]  # DeleteTopics
    r = h.hb("a", 2, {"t": [0, 1, 2]})
    assert r.member_epoch == 3 and h.assigned(r) == {"t": [0, 1, 2]}


def test_the_clock_never_goes_backwards() -> None:
    h = Harness()
    h.now = 100
    h.hb("a", 0)
    with pytest.raises(LocalProtocolError):
        h.c.tick(99)


def test_owned_partitions_that_do_not_exist_are_ignored() -> None:
    h = Harness()
    h.hb("a", 0)
    P = H.TopicPartitions
    req = H(
        group_id="g",
        member_id="a",
        member_epoch=1,
        rebalance_timeout_ms=-1,
        topic_partitions=[P(topic_id=uuid.uuid4(), partitions=[0]), P(topic_id=h.ids["t"], partitions=[0, 99])],
    )
    r = h.c.handle(req, 1, client_id="c", client_host="h", now_ms=0)
    assert (r.error_code, r.member_epoch) == (ErrorCode.NONE, 1)
    assert [m.assigned for m in h.c.members("g")] == [{"t": (0, 1, 2, 3, 4, 5)}]


def test_commits_to_partitions_the_cluster_lacks_are_refused_before_the_group_is_asked() -> None:
    # As Kafka's request handler: the known partitions are stored, the others answer UNKNOWN_TOPIC_OR_PARTITION
    # in the same topic entry, whatever the group would say.
    with MockBroker(topics={"t": 2}) as broker, SocketClient((broker.host, broker.port)) as client:
        parts = [{"partition_index": p, "committed_offset": 4, "committed_metadata": ""} for p in (0, 5)]
        topics = [{"name": "t", "partitions": parts}, {"name": "nope", "partitions": parts[:1]}]
        request = OffsetCommitRequest.from_dict({"group_id": "c", "topics": topics})
        answer = client.request(request, 9)
        codes = {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}
        assert len(answer.topics) == 2
        assert codes == {("t", 0): 0, ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): 3}
        assert {tp: o for tp, (o, _) in broker.core.coordinator.committed("c").items()} == {("t", 0): 4}
