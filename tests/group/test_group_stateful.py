"""Random join/sync/heartbeat/leave/commit/tick sequences against the coordinator, checking invariants.

Clients join at JoinGroup v0 (0.9), v4 (member id required), v5 (static membership for the clients that
have an instance id) or v9 (a restarted static leader skips assignment), and leave at v0 or in v3's
batch form, so the modern rules meet the old ones in the same group."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Dict, List, Set

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kproto import ErrorCode
from kproto.group.coordinator import GroupCoordinator, GroupState
from kproto.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)

E = ErrorCode
CLIENTS = ["c0", "c1", "c2", "c3"]
#: clients c2 and c3 are static members whenever they join at v5+
INSTANCE_IDS = {"c2": "i2", "c3": "i3"}
JOIN_VERSIONS = [0, 4, 5, 9]
PROTOCOL_CHOICES = [("range",), ("range", "roundrobin"), ("roundrobin", "range"), ("roundrobin",)]


@dataclass
class Client:
    """What one consumer knows from the answers it received."""

    name: str
    member_id: str = ""
    generation: int = -1
    is_leader: bool = False
    members: List[str] = field(default_factory=list)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        ids = itertools.count(1)
        self.coordinator = GroupCoordinator(member_id_suffix=lambda: str(next(ids)))
        self.now = 0
        self.clients: Dict[str, Client] = {name: Client(name) for name in CLIENTS}
        self.tokens = itertools.count()
        self.outstanding: Set[object] = set()
        self.incarnation = 0
        self.last_generation = 0
        self.assignments: Dict[tuple, Dict[str, bytes]] = {}  # (incarnation, generation) → leader's map

    # ---------------------------------------------------------------- plumbing

    def _token(self, client: str, api: str) -> tuple:
        token = (client, api, next(self.tokens))
        self.outstanding.add(token)
        return token

    def _send(self, client: str, api: str, request, version: int = 0):
        return self.coordinator.handle(
            self._token(client, api), request, version, client_id=client, client_host="/h", now_ms=self.now
        )

    def _apply(self, replies) -> None:
        for reply in replies:
            assert reply.reply_to in self.outstanding, f"unexpected or repeated reply {reply}"
            self.outstanding.discard(reply.reply_to)
            client = self.clients[reply.reply_to[0]]
            result = reply.result
            if isinstance(result, JoinGroupResponse):
                self._learn_join(client, result)

    def _learn_join(self, client: Client, result: JoinGroupResponse) -> None:
        if result.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.member_id = ""
        if result.error_code == E.MEMBER_ID_REQUIRED:
            assert result.member_id, "MEMBER_ID_REQUIRED carries the id to rejoin with"
            client.member_id = result.member_id
        if result.error_code != E.NONE:
            return
        if result.skip_assignment or (
            client.member_id and result.member_id != client.member_id and result.generation_id == client.generation
        ):
            # A static member replaced its old id without a rebalance: the new id holds the old assignment.
            known = self.assignments.get((self.incarnation, result.generation_id))
            if known is not None and client.member_id in known:
                known[result.member_id] = known[client.member_id]
        # (Later timers of the same tick may already have moved the group on, so only the answer's
        # own consistency is checked here.)
        assert result.generation_id >= 1 and result.protocol_name in ("range", "roundrobin")
        if not result.skip_assignment:
            assert not result.members or result.member_id == result.leader
        if result.members:
            assert result.member_id in [m.member_id for m in result.members]
        client.member_id, client.generation = result.member_id, result.generation_id
        client.is_leader = result.member_id == result.leader and not result.skip_assignment
        client.members = [m.member_id for m in result.members]

    # ---------------------------------------------------------------- rules

    @rule(
        client=st.sampled_from(CLIENTS),
        fresh=st.booleans(),
        protocols=st.sampled_from(PROTOCOL_CHOICES),
        timeout=st.sampled_from([6000, 10000]),
        version=st.sampled_from(JOIN_VERSIONS),
    )
    def join(self, client, fresh, protocols, timeout, version=0):
        c = self.clients[client]
        member_id = "" if fresh else c.member_id
        instance = INSTANCE_IDS.get(client) if version >= 5 else None
        P = JoinGroupRequest.JoinGroupRequestProtocol
        request = JoinGroupRequest(
            group_id="g",
            member_id=member_id,
            session_timeout_ms=timeout,
            rebalance_timeout_ms=timeout + 2000,
            group_instance_id=instance,
            protocol_type="consumer",
            protocols=[P(name=name, metadata=name.encode()) for name in protocols],
        )
        self._apply(self._send(client, "join", request, version))

    @rule(client=st.sampled_from(CLIENTS), drop_one=st.booleans())
    def sync(self, client, drop_one):
        c = self.clients[client]
        assignment = {}
        if c.is_leader:
            assignment = {m: f"{m}@{c.generation}".encode() for m in c.members[drop_one:]}
        A = SyncGroupRequest.SyncGroupRequestAssignment
        request = SyncGroupRequest(
            group_id="g",
            generation_id=c.generation,
            member_id=c.member_id,
            assignments=[A(member_id=m, assignment=a) for m, a in assignment.items()],
        )
        self._apply(self._send(client, "sync", request))
        snapshot = self.coordinator.snapshot("g")
        if c.is_leader and snapshot and snapshot.state is GroupState.STABLE and snapshot.generation_id == c.generation:
            self.assignments.setdefault((self.incarnation, c.generation), assignment)

    @rule(client=st.sampled_from(CLIENTS), stale=st.booleans())
    def heartbeat(self, client, stale):
        c = self.clients[client]
        token = self._token(client, "heartbeat")
        request = HeartbeatRequest(group_id="g", generation_id=c.generation - stale, member_id=c.member_id)
        replies = self.coordinator.handle(token, request, 0, client_id=client, client_host="/h", now_ms=self.now)
        answered = {r.reply_to: r.result for r in replies}
        assert token in answered, "heartbeats are answered at once"
        snapshot = self.coordinator.snapshot("g")
        code = answered[token].error_code
        if snapshot is None or c.member_id not in {m.member_id for m in snapshot.members}:
            assert code == E.UNKNOWN_MEMBER_ID
        elif c.generation - stale != snapshot.generation_id:
            assert code == E.ILLEGAL_GENERATION
        elif snapshot.state is GroupState.PREPARING_REBALANCE:
            assert code == E.REBALANCE_IN_PROGRESS
        else:
            assert code == E.NONE
        self._apply(replies)

    @rule(client=st.sampled_from(CLIENTS), batch=st.booleans())
    def leave(self, client, batch):
        c = self.clients[client]
        if not batch:
            self._apply(self._send(client, "leave", LeaveGroupRequest(group_id="g", member_id=c.member_id)))
            return
        identity = LeaveGroupRequest.MemberIdentity(member_id=c.member_id, group_instance_id=INSTANCE_IDS.get(client))
        replies = self._send(client, "leave", LeaveGroupRequest(group_id="g", members=[identity]), 3)
        self._apply(replies)
        answer = [r.result for r in replies if r.reply_to[:2] == (client, "leave")][0]
        assert answer.error_code == E.NONE and len(answer.members) == 1

    @rule(client=st.sampled_from(CLIENTS), offset=st.integers(0, 1000))
    def commit(self, client, offset):
        c = self.clients[client]
        before = self.coordinator.committed("g")
        token = self._token(client, "commit")
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        request = OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=c.generation,
            member_id=c.member_id,
            topics=[
                T(
                    name="t",
                    partitions=[
                        T.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=offset, committed_metadata=""
                        )
                    ],
                )
            ],
        )
        replies = self.coordinator.handle(token, request, 2, client_id=client, client_host="/h", now_ms=self.now)
        code = {r.reply_to: r.result for r in replies}[token].topics[0].partitions[0].error_code
        after = self.coordinator.committed("g")
        assert (after.get(("t", 0)) == (offset, "")) if code == E.NONE else (after == before)
        self._apply(replies)

    @rule()
    def settle(self):
        """Every client that believes it is a member rejoins, then syncs (the leader last): a cooperative round."""
        members = [c for c in self.clients.values() if c.member_id]
        for c in members:
            self.join(c.name, fresh=False, protocols=("range",), timeout=10000)
        for c in sorted(members, key=lambda c: c.is_leader):
            self.sync(c.name, drop_one=False)

    @rule(ms=st.one_of(st.sampled_from([0, 100, 3000, 7000]), st.integers(0, 12000)))
    def advance(self, ms):
        self.now += ms
        self._apply(self.coordinator.tick(self.now))

    @precondition(lambda self: self.coordinator.next_deadline_ms() is not None)
    @rule()
    def jump_to_next_deadline(self):
        self.now = max(self.now, self.coordinator.next_deadline_ms())
        self._apply(self.coordinator.tick(self.now))

    # ---------------------------------------------------------------- invariants

    @invariant()
    def generation_is_monotonic(self):
        snapshot = self.coordinator.snapshot("g")
        if snapshot is None:
            if self.last_generation:
                self.incarnation += 1
            self.last_generation = 0
            return
        assert snapshot.generation_id >= self.last_generation
        self.last_generation = snapshot.generation_id

    @invariant()
    def group_shape_matches_its_state(self):
        snapshot = self.coordinator.snapshot("g")
        if snapshot is None:
            return
        members = {m.member_id: m for m in snapshot.members}
        if snapshot.state is GroupState.EMPTY or not members:
            # A rebalance may wait with no member left only for a pending one (Kafka does the same).
            assert not snapshot.leader_id
            assert snapshot.state is GroupState.EMPTY or (
                snapshot.state is GroupState.PREPARING_REBALANCE and snapshot.pending_member_ids
            )
        else:
            assert snapshot.leader_id in members
        assert (snapshot.join_deadline_ms is not None) == (snapshot.state is GroupState.PREPARING_REBALANCE)
        instances = [m.group_instance_id for m in snapshot.members if m.group_instance_id is not None]
        assert len(instances) == len(set(instances)), "one member per instance id"
        for m in snapshot.members:
            assert not (m.awaiting_join and m.awaiting_sync), "a member is in one phase at a time"
            if m.awaiting_join:
                assert snapshot.state is GroupState.PREPARING_REBALANCE
            if m.awaiting_sync:
                assert snapshot.state is GroupState.COMPLETING_REBALANCE
            if snapshot.state is not GroupState.PREPARING_REBALANCE:
                assert m.awaiting_sync or m.session_deadline_ms is not None, "nobody escapes session expiry"
        if snapshot.state is GroupState.PREPARING_REBALANCE:
            complete = all(m.awaiting_join for m in snapshot.members) and not snapshot.pending_member_ids
            assert not complete, "a complete join phase was not closed"

    @invariant()
    def stable_group_holds_exactly_the_leaders_assignment(self):
        snapshot = self.coordinator.snapshot("g")
        if snapshot is None or snapshot.state is not GroupState.STABLE or snapshot.generation_id == 0:
            return
        expected = self.assignments.get((self.incarnation, snapshot.generation_id))
        assert expected is not None, "Stable only after the leader's SyncGroup"
        for m in snapshot.members:
            assert m.assignment == expected.get(m.member_id, b"")

    @invariant()
    def no_timer_is_overdue(self):
        deadline = self.coordinator.next_deadline_ms()
        assert deadline is None or deadline > self.now

    @invariant()
    def parked_requests_match_outstanding_tokens(self):
        snapshot = self.coordinator.snapshot("g")
        parked = sum(m.awaiting_join + m.awaiting_sync for m in snapshot.members) if snapshot else 0
        # Superseded parked requests are never answered (as in Kafka), so tokens may exceed parked ones.
        assert parked <= len(self.outstanding)


CoordinatorMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestCoordinatorMachine = CoordinatorMachine.TestCase
