"""A consumer group member of the KIP-848 protocol (ConsumerGroupHeartbeat) as a sans-I/O machine.

Theory of operation
===================

In the classic protocol the members agree on an assignment (JoinGroup, SyncGroup) and every member
gives up all its partitions before each rebalance.  In the *consumer* protocol (KIP-848, Kafka 4's
default) the coordinator computes the assignment and hands each member its *target* in the answer to
its ConsumerGroupHeartbeat; there is no stop-the-world step.  A :class:`HeartbeatMember` only talks
heartbeats (plus FindCoordinator and OffsetCommit) and *reconciles*:

1. A heartbeat answer carrying an assignment sets the new target (topics named by id; an id the member
   cannot name yet waits for :meth:`HeartbeatMember.update_topic_ids`).
2. Reconciling the target against the owned partitions, one reconciliation at a time: the partitions
   to give up stop being fetched (:class:`StopFetching`), their positions are committed first when
   auto-commit is on (the commit's answer, good or bad, lets the reconciliation go on: a refused commit
   means records processed again, never lost), then they are revoked (:class:`PartitionsRevoked`), then
   the new ones are handed out (:class:`PartitionsAdded`).  Partitions kept are not touched: their
   fetching goes on.
3. The next heartbeat, sent at once, lists the owned partitions: that is the acknowledgement the
   coordinator waits for before it gives a partition taken from one member to another.

Requests: the first heartbeat of a membership (member epoch 0) is *full* -- rebalance timeout,
subscription, static instance id, owned partitions (none).  Later ones send a field only when it changed
since it was last sent (the subscription, the owned partitions), else null, as Java's consumer does; a
heartbeat that failed makes the next one full again.  Heartbeats go every ``heartbeat_interval_ms`` of
the latest answer, one at a time.  The member id is the member's own (a random id, KIP-1082), kept
across rejoins.

Errors: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID mean the coordinator dropped the member: its
partitions are *lost* (revoked without a commit, which the coordinator would refuse) and it joins again
at epoch 0.  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE or a lost connection send it back to find the
coordinator, keeping its partitions (the coordinator decides, when it answers, whether the epoch is
still good).  COORDINATOR_LOAD_IN_PROGRESS and unknown codes are retried after ``retry_backoff_ms``.
GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, UNSUPPORTED_VERSION,
UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID and GROUP_MAX_SIZE_REACHED are fatal (:class:`GroupFailed`).

Commits carry the member id and the member epoch (OffsetCommit v9+).  STALE_MEMBER_EPOCH (a commit
overtaken by a newer epoch) is reported to the caller, who may commit again with the new epoch.

Leaving: :meth:`HeartbeatMember.close` commits (auto-commit) and sends a heartbeat with epoch -1 (a static
member: -2, so that its partitions wait for it); :meth:`HeartbeatMember.poll_timeout` (the application
stopped polling for ``max.poll.interval.ms``) leaves with -1, loses the partitions and waits in ``LEFT``
for :meth:`HeartbeatMember.rejoin`.

States reuse :class:`~kproto.group.member.MemberState` (DISCOVERING, JOINING until the first answer,
STABLE -- which here includes reconciling --, LEFT, FAILED, CLOSED) so a client drives either member
the same way.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple, Union

from kproto import ErrorCode
from kproto.errors import LocalProtocolError, RemoteProtocolError
from kproto.group.member import (
    CoordinatorNode,
    GroupFailed,
    MemberState,
    OffsetsCommitted,
    PartitionsRevoked,
    SendRequest,
    choose_versions,
)
from kproto.message_base import Message
from kproto.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)

__all__ = [
    "HeartbeatMember",
    "HeartbeatMemberConfig",
    "PartitionsAdded",
    "StopFetching",
    "TopicIdsNeeded",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "HEARTBEAT_MAX_VERSION",
]

TopicPartition = Tuple[str, int]
_C = ErrorCode
_S = MemberState
#: the member epoch of a leaving heartbeat; a static member's -2 keeps its partitions for it
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
#: ConsumerGroupHeartbeat v1: the member id is the client's own
HEARTBEAT_MAX_VERSION = 1
_HEARTBEAT_API = ConsumerGroupHeartbeatRequest.API_KEY
_FATAL = {
    _C.GROUP_AUTHORIZATION_FAILED,
    _C.INVALID_REQUEST,
    _C.UNSUPPORTED_ASSIGNOR,
    _C.UNSUPPORTED_VERSION,
    _C.UNRELEASED_INSTANCE_ID,
    _C.FENCED_INSTANCE_ID,
    _C.GROUP_MAX_SIZE_REACHED,
    _C.GROUP_ID_NOT_FOUND,
    _C.INVALID_GROUP_ID,
}
_FENCED = {_C.FENCED_MEMBER_EPOCH, _C.UNKNOWN_MEMBER_ID}
_COORDINATOR_GONE = {_C.GROUP_COORDINATOR_NOT_AVAILABLE, _C.NOT_COORDINATOR_FOR_GROUP}


@dataclass(frozen=True)
class HeartbeatMemberConfig:
    """Consumer settings that shape a KIP-848 member (Java's names in snake case)."""

    group_id: str
    client_id: str
    topics: Tuple[str, ...]
    rebalance_timeout_ms: int = 300_000
    retry_backoff_ms: int = 100
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    group_instance_id: Optional[str] = None
    #: ``group.remote.assignor``: None lets the coordinator choose
    server_assignor: Optional[str] = None


@dataclass(frozen=True)
class StopFetching:
    """These partitions are about to be revoked: return and fetch no more of their records."""

    partitions: Tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsAdded:
    """The member now owns these partitions too (at ``member_epoch``): look their positions up, fetch them."""

    member_epoch: int
    partitions: Tuple[TopicPartition, ...]


@dataclass(frozen=True)
class TopicIdsNeeded:
    """The assignment names topics by ids the member cannot name: answer with ``update_topic_ids``."""

    topic_ids: Tuple[uuid.UUID, ...]


Action = Union[
    SendRequest, PartitionsRevoked, PartitionsAdded, StopFetching, TopicIdsNeeded, OffsetsCommitted, GroupFailed
]


def _new_member_id() -> str:
    return uuid.uuid4().hex


class HeartbeatMember:
    """One KIP-848 consumer group member (see the module docstring).  Its inputs take ``now_ms`` and return
    actions, as :class:`~kproto.group.member.GroupMember`'s do."""

    def __init__(self, config: HeartbeatMemberConfig) -> None:
        self.config = config
        self.state = _S.UNJOINED
        self.member_id = _new_member_id()
        self.member_epoch = 0
        self.coordinator: Optional[CoordinatorNode] = None
        self.versions = choose_versions(None)
        self.versions["consumer_group_heartbeat"] = HEARTBEAT_MAX_VERSION
        self.heartbeat_interval_ms = 0
        self.owned: Set[TopicPartition] = set()
        self._topic_names: Dict[uuid.UUID, str] = {}
        self._target: Optional[Dict[uuid.UUID, Tuple[int, ...]]] = None
        self._revoking: Optional[Tuple[TopicPartition, ...]] = None  # waiting for the pre-revoke commit
        self._pending_add: Tuple[TopicPartition, ...] = ()
        self._ack_needed = False
        self._sent_topics: Optional[Tuple[str, ...]] = None
        self._sent_owned: Optional[Tuple[TopicPartition, ...]] = None
        self._positions: Dict[TopicPartition, int] = {}
        self._ids = itertools.count(1)
        self._in_flight: Dict[int, str] = {}
        self._commit_before_revoke: Optional[int] = None
        self._heartbeat_at: Optional[int] = None
        self._retry_at: Optional[int] = None
        self._auto_commit_at: Optional[int] = None
        self._now_ms = 0
        self._actions: List[Action] = []

    # ---------------------------------------------------------------- inputs

    @property
    def generation_id(self) -> int:
        """The member epoch (what commits carry in place of a generation)."""
        return self.member_epoch

    def set_api_versions(self, api_versions: Optional[Mapping[int, int]]) -> None:
        """Versions negotiated with the broker; a broker without ConsumerGroupHeartbeat cannot host the member."""
        if api_versions is None or _HEARTBEAT_API not in api_versions:
            raise LocalProtocolError(
                f"group {self.config.group_id}: the broker does not serve ConsumerGroupHeartbeat "
                "(group_protocol='consumer' needs Kafka 4.0 or later)"
            )
        self.versions = choose_versions(api_versions)
        if self.versions["offset_commit"] < 9:
            raise LocalProtocolError(f"group {self.config.group_id}: OffsetCommit v9 (member epochs) is not served")
        self.versions["consumer_group_heartbeat"] = min(api_versions[_HEARTBEAT_API], HEARTBEAT_MAX_VERSION)

    def start(self, now_ms: int) -> List[Action]:
        """Find the coordinator, then join with epoch 0."""
        self._set_time(now_ms)
        self._discover()
        return self._take()

    def receive(self, request_id: int, response: Message, now_ms: int) -> List[Action]:
        """Hand in the answer to a :class:`SendRequest`; answers no longer awaited are ignored."""
        self._set_time(now_ms)
        api = self._in_flight.pop(request_id, None)
        if api is None or self.state in (_S.CLOSED, _S.FAILED):
            return []
        if api == "group_coordinator" and isinstance(response, GroupCoordinatorResponse):
            self._on_coordinator(response)
        elif api == "heartbeat" and isinstance(response, ConsumerGroupHeartbeatResponse):
            self._on_heartbeat(response)
        elif api == "offset_commit" and isinstance(response, OffsetCommitResponse):
            self._on_commit(request_id, response)
        elif api != "leave":
            raise RemoteProtocolError(f"request {request_id} ({api}) answered by {type(response).__name__}")
        return self._take()

    def request_failed(self, request_id: int, now_ms: int) -> List[Action]:
        """The connection carrying the request broke before an answer came."""
        self._set_time(now_ms)
        api = self._in_flight.pop(request_id, None)
        if api is None or self.state in (_S.CLOSED, _S.FAILED, _S.LEFT):
            return []
        if api == "offset_commit" and request_id == self._commit_before_revoke:
            self._commit_before_revoke = None
            self._finish_revoke()
        elif api in ("heartbeat", "group_coordinator"):
            self._forget_sent()
            self.coordinator = None
            self._retry_at = self._now_ms + self.config.retry_backoff_ms
            self.state = _S.DISCOVERING
        return self._take()

    def update_topic_ids(self, names: Mapping[uuid.UUID, str], now_ms: int) -> List[Action]:
        """Topic id → name (from Metadata v10+); resumes a reconciliation that waited for names."""
        self._set_time(now_ms)
        self._topic_names.update(names)
        self._reconcile()
        return self._take()

    def set_position(self, topic: str, partition: int, offset: int) -> None:
        """The application's position (next offset to consume), for auto-commit."""
        self._positions[(topic, partition)] = offset

    def commit(self, now_ms: int, offsets: Optional[Mapping[TopicPartition, int]] = None) -> List[Action]:
        """Commit ``offsets`` (default: positions of owned partitions) with the current member epoch."""
        self._set_time(now_ms)
        if self.member_epoch <= 0 or self.coordinator is None or self.state is not _S.STABLE:
            raise LocalProtocolError(f"cannot commit in state {self.state.name}: the member has no epoch")
        self._send_commit(self._owned_positions() if offsets is None else dict(offsets))
        return self._take()

    def close(self, now_ms: int) -> List[Action]:
        """Commit (auto-commit) and leave, without waiting for answers."""
        self._set_time(now_ms)
        if self.state in (_S.CLOSED, _S.FAILED):
            return []
        if self.state is _S.STABLE and self.member_epoch > 0:
            if self.config.auto_commit and self._owned_positions():
                self._send_commit(self._owned_positions())
            self._send_leave()
        self.state = _S.CLOSED
        self._in_flight.clear()
        return self._take()

    def poll_timeout(self, now_ms: int) -> List[Action]:
        """The application stopped polling: leave, lose the partitions, wait for :meth:`rejoin`."""
        self._set_time(now_ms)
        if self.state not in (_S.DISCOVERING, _S.JOINING, _S.STABLE):
            return []
        if self.coordinator is not None and self.member_epoch > 0:
            self._send_leave(LEAVE_EPOCH)
        self._lose_partitions()
        self.state = _S.LEFT
        return self._take()

    def rejoin(self, now_ms: int) -> List[Action]:
        """After :meth:`poll_timeout`: join again with epoch 0."""
        self._set_time(now_ms)
        if self.state is _S.LEFT:
            self._in_flight.clear()
            self._discover()
        return self._take()

    def tick(self, now_ms: int) -> List[Action]:
        """Run what is due: the next heartbeat, a retry, the periodic auto-commit."""
        self._set_time(now_ms)
        if self._retry_at is not None and now_ms >= self._retry_at:
            self._retry_at = None
            if self.state is _S.DISCOVERING:
                self._discover()
            elif self.state in (_S.JOINING, _S.STABLE):
                self._heartbeat()
        if self.state in (_S.JOINING, _S.STABLE) and self._heartbeat_at is not None and now_ms >= self._heartbeat_at:
            self._heartbeat()
        if (
            self._auto_commit_at is not None
            and now_ms >= self._auto_commit_at
            and self.state is _S.STABLE
            and self.member_epoch > 0
        ):
            self._auto_commit_at = now_ms + self.config.auto_commit_interval_ms
            if self._owned_positions() and not self._has("offset_commit"):
                self._send_commit(self._owned_positions())
        return self._take()

    def next_deadline_ms(self) -> Optional[int]:
        """When :meth:`tick` must run next (None: nothing is timed)."""
        due = [t for t in (self._retry_at, self._heartbeat_at, self._auto_commit_at) if t is not None]
        if self.state not in (_S.DISCOVERING, _S.JOINING, _S.STABLE) or not due:
            return None
        return min(due)

    # ---------------------------------------------------------------- coordinator

    def _discover(self) -> None:
        self.state = _S.DISCOVERING
        if not self._has("group_coordinator"):
            self._send("group_coordinator", GroupCoordinatorRequest(key=self.config.group_id), to_coordinator=False)

    def _on_coordinator(self, response: GroupCoordinatorResponse) -> None:
        if self.state is not _S.DISCOVERING:
            return
        if response.error_code:
            if response.error_code in _FATAL:
                self._fail("group_coordinator", response.error_code)
            else:
                self._retry_at = self._now_ms + self.config.retry_backoff_ms
            return
        self.coordinator = CoordinatorNode(response.node_id, response.host, response.port)
        self.state = _S.JOINING if self.member_epoch == 0 else _S.STABLE
        self._heartbeat()

    # ---------------------------------------------------------------- heartbeats

    def _heartbeat(self) -> None:
        if self._has("heartbeat") or self.coordinator is None:
            return
        self._heartbeat_at = None
        joining = self.member_epoch == 0
        owned = tuple(sorted(self.owned))
        topics = tuple(sorted(self.config.topics))
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.config.group_id, member_id=self.member_id, member_epoch=self.member_epoch
        )
        if joining or self._sent_topics is None:
            request.rebalance_timeout_ms = self.config.rebalance_timeout_ms
            request.instance_id = self.config.group_instance_id
            request.server_assignor = self.config.server_assignor
        if joining or self._sent_topics != topics:
            request.subscribed_topic_names = list(topics)
            self._sent_topics = topics
        if joining or self._sent_owned != owned:
            request.topic_partitions = self._owned_by_id(owned)
            self._sent_owned = owned
        self._ack_needed = False
        self._send("heartbeat", request)

    def _owned_by_id(self, owned: Tuple[TopicPartition, ...]) -> List[Any]:
        ids = {name: topic_id for topic_id, name in self._topic_names.items()}
        by_topic: Dict[uuid.UUID, List[int]] = {}
        for topic, partition in owned:
            by_topic.setdefault(ids[topic], []).append(partition)
        Entry = ConsumerGroupHeartbeatRequest.TopicPartitions
        return [Entry(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()]

    def _on_heartbeat(self, response: ConsumerGroupHeartbeatResponse) -> None:
        if self.state not in (_S.JOINING, _S.STABLE):
            return
        code = response.error_code
        if code:
            self._forget_sent()
            if code in _FENCED:
                # dropped by the coordinator: what it owned is given to others, a commit would be refused
                self._lose_partitions()
                self.member_epoch = 0
                self.state = _S.JOINING
                self._heartbeat()
            elif code in _COORDINATOR_GONE:
                self.coordinator = None
                self._retry_at = self._now_ms + self.config.retry_backoff_ms
                self.state = _S.DISCOVERING
            elif code in _FATAL:
                self._fail("consumer_group_heartbeat", code)
            else:  # COORDINATOR_LOAD_IN_PROGRESS and anything unknown: try again shortly
                self._retry_at = self._now_ms + self.config.retry_backoff_ms
            return
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if self.state is _S.JOINING:
            self.state = _S.STABLE
            if self.config.auto_commit:
                self._auto_commit_at = self._now_ms + self.config.auto_commit_interval_ms
        self._heartbeat_at = self._now_ms + self.heartbeat_interval_ms
        if response.assignment is not None:
            self._target = {tp.topic_id: tuple(sorted(tp.partitions)) for tp in response.assignment.topic_partitions}
        self._reconcile()
        if self._ack_needed:
            self._heartbeat()

    def _forget_sent(self) -> None:
        """The next heartbeat is full: the coordinator may not have seen what was last sent."""
        self._sent_topics = None
        self._sent_owned = None

    # ---------------------------------------------------------------- reconciliation

    def _reconcile(self) -> None:
        if self._target is None or self._revoking is not None or self.state is not _S.STABLE:
            return
        unknown = tuple(t for t in self._target if t not in self._topic_names)
        if unknown:
            self._actions.append(TopicIdsNeeded(unknown))
        target = {
            (self._topic_names[t], p) for t, parts in self._target.items() if t in self._topic_names for p in parts
        }
        revoked = tuple(sorted(self.owned - target))
        self._pending_add = tuple(sorted(target - self.owned))
        if revoked:
            self._actions.append(StopFetching(revoked))
            self._revoking = revoked
            positions = {tp: self._positions[tp] for tp in revoked if tp in self._positions}
            if self.config.auto_commit and positions:
                self._commit_before_revoke = self._send_commit(positions)
                return
            self._finish_revoke()
        elif self._pending_add:
            self._finish_revoke()

    def _finish_revoke(self) -> None:
        revoked, self._revoking = self._revoking or (), None
        if revoked:
            self._actions.append(PartitionsRevoked(revoked))
            self.owned.difference_update(revoked)
            for tp in revoked:
                self._positions.pop(tp, None)
        added = self._pending_add
        self._pending_add = ()
        if added:
            self.owned.update(added)
            self._actions.append(PartitionsAdded(self.member_epoch, added))
        self._ack_needed = True
        if not self._has("heartbeat") and self.state is _S.STABLE:
            self._heartbeat()
        self._reconcile()  # a newer target may have come in meanwhile

    def _lose_partitions(self) -> None:
        self._target = None
        self._revoking = None
        self._pending_add = ()
        self._commit_before_revoke = None
        if self.owned:
            lost = tuple(sorted(self.owned))
            self._actions.append(StopFetching(lost))
            self._actions.append(PartitionsRevoked(lost))
            self.owned.clear()
        self._positions.clear()
        self._forget_sent()

    # ---------------------------------------------------------------- commits and leaving

    def _send_commit(self, offsets: Mapping[TopicPartition, int]) -> int:
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        Partition = Topic.OffsetCommitRequestPartition
        by_topic: Dict[str, List[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                Partition(partition_index=partition, committed_offset=offset, committed_metadata="")
            )
        request = OffsetCommitRequest(
            group_id=self.config.group_id,
            generation_id_or_member_epoch=self.member_epoch,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            retention_time_ms=-1,
            topics=[Topic(name=topic, partitions=parts) for topic, parts in by_topic.items()],
        )
        return self._send("offset_commit", request)

    def _on_commit(self, request_id: int, response: OffsetCommitResponse) -> None:
        self._actions.append(OffsetsCommitted(request_id, response))
        codes = {p.error_code for t in response.topics for p in t.partitions if p.error_code}
        if request_id == self._commit_before_revoke:
            self._commit_before_revoke = None
            self._finish_revoke()  # best effort, as in Java: a refused commit means records seen again
        if codes & _FENCED and self.state is _S.STABLE:
            self._on_heartbeat(ConsumerGroupHeartbeatResponse(error_code=min(codes & _FENCED)))
        elif codes & _COORDINATOR_GONE and self.state is _S.STABLE:
            self.coordinator = None
            self._forget_sent()
            self._retry_at = self._now_ms + self.config.retry_backoff_ms
            self.state = _S.DISCOVERING

    def _send_leave(self, epoch: Optional[int] = None) -> None:
        if epoch is None:
            epoch = STATIC_LEAVE_EPOCH if self.config.group_instance_id is not None else LEAVE_EPOCH
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.config.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.config.group_instance_id,
        )
        self._send("leave", request, api_version_of="consumer_group_heartbeat")
        self.member_epoch = 0
        self._heartbeat_at = None
        self._auto_commit_at = None

    # ---------------------------------------------------------------- helpers

    def _fail(self, api: str, code: int) -> None:
        self.state = _S.FAILED
        self._actions.append(GroupFailed(api, code))

    def _send(
        self, api: str, request: Message, *, to_coordinator: bool = True, api_version_of: Optional[str] = None
    ) -> int:
        request_id = next(self._ids)
        self._in_flight[request_id] = api
        version_key = api_version_of or {"heartbeat": "consumer_group_heartbeat"}.get(api, api)
        destination = self.coordinator if to_coordinator else None
        self._actions.append(SendRequest(request_id, request, self.versions[version_key], destination))
        return request_id

    def _has(self, api: str) -> bool:
        return api in self._in_flight.values()

    def _owned_positions(self) -> Dict[TopicPartition, int]:
        return {tp: self._positions[tp] for tp in sorted(self.owned) if tp in self._positions}

    def _set_time(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise LocalProtocolError(f"clock went backwards: {now_ms} < {self._now_ms}")
        self._now_ms = now_ms

    def _take(self) -> List[Action]:
        actions, self._actions = self._actions, []
        return actions
