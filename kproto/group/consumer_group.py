"""The KIP-848 consumer group coordinator: the engine that applies :mod:`kproto.group.consumer_group_rules`.

Sans-I/O like the classic :class:`~kproto.group.coordinator.GroupCoordinator`: every call takes
``now_ms``, every timer (session expiry, revocation timeout) is a deadline the caller learns from
:meth:`ConsumerGroupCoordinator.next_deadline_ms` and honours with :meth:`ConsumerGroupCoordinator.tick`.
No request is parked: a ConsumerGroupHeartbeat is answered at once with whatever the member may do
now, and the member learns the rest on its next heartbeat.

The coordinator reads topics from two live mappings it is given (name → partitions, any sized
sequence; name → topic id) and keeps committed offsets in the classic coordinator's
:class:`~kproto.group.offset_store.OffsetStore`, so both kinds of group share one store.  It also
answers the classic coordinator's questions about group ids it owns (:meth:`owns`, :meth:`has_members`,
:meth:`release_if_empty`, :meth:`offset_commit_error`, :meth:`offset_fetch_error`).

Bounds per request: a subscription of at most ``max_subscribed_topics`` names (INVALID_REQUEST past
it), a regular expression of at most ``max_regex_length`` characters in the syntax RE2 accepts
(INVALID_REGULAR_EXPRESSION otherwise), matched in time linear in the topic name as Kafka's RE2/J
(:mod:`kproto.group.linear_regex`: no pattern makes it backtrack), and owned partitions that name
unknown topics or partitions are ignored, as Kafka does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Sized, Tuple

from kproto import ErrorCode
from kproto.errors import LocalProtocolError, UnsupportedVersionError
from kproto.group.consumer_group_rules import (
    LEAVE_EPOCH,
    MEMBER_TRANSITIONS,
    SERVED_VERSIONS,
    STATIC_LEAVE_EPOCH,
    Check,
    EpochKind,
    GroupState,
    MemberState,
    ReconcileOutcome,
    epoch_kind,
)
from kproto.group.linear_regex import LinearPattern, compile_linear
from kproto.group.offset_store import OffsetStore
from kproto.group.server_assignors import ASSIGNORS
from kproto.message_base import Message
from kproto.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kproto.state_machine import StateMachine

__all__ = ["ConsumerGroupConfig", "ConsumerGroupCoordinator", "MemberView", "safe_regex"]

_C = ErrorCode
_X = Check
#: The authorized operations of a described group when asked for: READ, DELETE and DESCRIBE.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_NOT_ASKED = -(2**31)
_MEMBER_TYPE_CONSUMER = 1
#: States of one subscribed regular expression's automaton: the time of one matched character on a
#: cache miss, and the memory of the pattern (RE2 likewise caps a counted repeat at 1000).
MAX_REGEX_STATES = 2000

#: (topic id, partition)
TopicPartition = Tuple[uuid.UUID, int]
#: topic id → partitions
Partitions = Dict[uuid.UUID, Set[int]]


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The broker's ``group.consumer.*`` settings (Kafka's defaults)."""

    #: ``group.consumer.session.timeout.ms``
    session_timeout_ms: int = 45000
    #: ``group.consumer.heartbeat.interval.ms``
    heartbeat_interval_ms: int = 5000
    #: ``group.consumer.max.size`` (None: no limit)
    max_size: Optional[int] = None
    #: ``group.consumer.assignors``: the first is the default
    assignors: Tuple[str, ...] = ("uniform", "range")
    #: Longest subscribed_topic_regex accepted.
    max_regex_length: int = 1024
    #: Most topic names one member may subscribe to.
    max_subscribed_topics: int = 100_000


@dataclass(frozen=True)
class MemberView:
    """A read-only view of one member (for tests and tools)."""

    member_id: str
    instance_id: Optional[str]
    member_epoch: int
    state: MemberState
    assigned: Dict[str, Tuple[int, ...]]
    pending_revocation: Dict[str, Tuple[int, ...]]
    target: Dict[str, Tuple[int, ...]]


def safe_regex(pattern: str, max_length: int) -> Optional[LinearPattern]:
    """``pattern`` compiled for matching in linear time (:mod:`kproto.group.linear_regex`), or None.

    Refused: longer than ``max_length``; not valid syntax; constructs RE2, Kafka's engine, does not have
    either (back-references, look-arounds, possessive repeats, ...); an automaton of more than
    :data:`MAX_REGEX_STATES` states (counted repeats such as ``a{5000}``).
    """
    if len(pattern) > max_length:
        return None
    return compile_linear(pattern, MAX_REGEX_STATES)


@dataclass
class _Member:
    member_id: str
    instance_id: Optional[str]
    client_id: str = ""
    client_host: str = ""
    rack_id: Optional[str] = None
    rebalance_timeout_ms: int = 300000
    topic_names: Tuple[str, ...] = ()
    regex: Optional[str] = None
    compiled: Optional[LinearPattern] = None
    assignor: Optional[str] = None
    epoch: int = 0
    previous_epoch: int = -1
    machine: StateMachine[MemberState, ReconcileOutcome] = field(
        default_factory=lambda: StateMachine(MEMBER_TRANSITIONS, MemberState.STABLE, "consumer group member")
    )
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    session_deadline_ms: int = 0
    revocation_deadline_ms: Optional[int] = None
    #: The existing topics of the subscription → their partition counts, as of the last heartbeat.
    resolved: Dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> MemberState:
        return self.machine.state


@dataclass
class _Group:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: Dict[str, _Member] = field(default_factory=dict)
    static: Dict[str, str] = field(default_factory=dict)  # instance id → member id
    target: Dict[str, Partitions] = field(default_factory=dict)
    owners: Dict[TopicPartition, str] = field(default_factory=dict)
    subscribed: Dict[str, int] = field(default_factory=dict)  # topic → partitions at the last bump
    #: The members' regular expressions already resolved (a new one is resolved after the answer to the
    #: heartbeat that brought it, as Kafka resolves it in the background).
    regexes: Set[str] = field(default_factory=set)

    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE


class _Refused(Exception):
    """A failed check: the request is answered with the check's code."""

    def __init__(self, check: Check, message: str) -> None:
        super().__init__(message)
        self.check = check


def _copy(partitions: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in partitions.items() if ps}


class ConsumerGroupCoordinator:
    """KIP-848 consumer groups over live topic metadata; see the module docstring.

    ``topic_partitions`` maps a topic name to its partitions (only the length is read) and
    ``topic_ids`` a name to its id; both are read at each heartbeat, so topics created or grown
    since are seen.  ``offsets`` is the store shared with the classic coordinator.
    ``classic_has_members`` and ``release_classic`` ask the classic coordinator about a group id.
    """

    def __init__(
        self,
        config: ConsumerGroupConfig,
        *,
        topic_partitions: Mapping[str, Sized],
        topic_ids: Mapping[str, uuid.UUID],
        offsets: OffsetStore,
        classic_has_members: Callable[[str], bool] = lambda group_id: False,
        release_classic: Callable[[str], None] = lambda group_id: None,
        member_id_factory: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        for name in config.assignors:
            if name not in ASSIGNORS:
                raise ValueError(f"unknown server assignor {name!r}; known: {', '.join(ASSIGNORS)}")
        self.config = config
        self._topic_partitions = topic_partitions
        self._topic_ids = topic_ids
        self._offsets = offsets
        self._classic_has_members = classic_has_members
        self._release_classic = release_classic
        self._new_member_id = member_id_factory
        self._groups: Dict[str, _Group] = {}
        self._now_ms: Optional[int] = None

    # ---------------------------------------------------------------- requests

    def handle(self, request: Message, api_version: int, *, client_id: str, client_host: str, now_ms: int) -> Message:
        """Answer a ConsumerGroupHeartbeat or ConsumerGroupDescribe sent in ``api_version``."""
        served = SERVED_VERSIONS.get(type(request))
        if served is None or not served[0] <= api_version <= served[1]:
            raise UnsupportedVersionError(
                f"the consumer group coordinator does not answer {type(request).__name__} v{api_version}"
            )
        self.tick(now_ms)
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            try:
                return self._heartbeat(request, api_version, client_id, client_host, now_ms)
            except _Refused as refused:
                return ConsumerGroupHeartbeatResponse(
                    error_code=refused.check.error_code,
                    error_message=str(refused),
                    member_id=None,
                    member_epoch=0,
                    heartbeat_interval_ms=0,
                    assignment=None,
                )
            finally:
                self._drop_unused_groups()
        assert isinstance(request, ConsumerGroupDescribeRequest)
        return ConsumerGroupDescribeResponse(
            groups=[self._describe(group_id, request.include_authorized_operations) for group_id in request.group_ids]
        )

    def next_deadline_ms(self) -> Optional[int]:
        """The earliest session or revocation deadline, or None."""
        deadlines = [
            d
            for g in self._groups.values()
            for m in g.members.values()
            for d in (m.session_deadline_ms, m.revocation_deadline_ms)
            if d is not None
        ]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> None:
        """Fence every member whose session or revocation deadline is ``now_ms`` or earlier.

        Raises :class:`~kproto.errors.LocalProtocolError` if ``now_ms`` is before a time already seen.
        """
        if self._now_ms is not None and now_ms < self._now_ms:
            raise LocalProtocolError(f"consumer group coordinator: clock went backwards: {now_ms} < {self._now_ms}")
        self._now_ms = now_ms
        for group in list(self._groups.values()):
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now_ms or (
                    member.revocation_deadline_ms is not None and member.revocation_deadline_ms <= now_ms
                ):
                    self._remove(group, member)
        self._drop_unused_groups()

    # ---------------------------------------------------------------- questions of the classic coordinator

    def owns(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer group."""
        return group_id in self._groups

    def has_members(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer group with members (a classic JoinGroup is then refused)."""
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)

    def release_if_empty(self, group_id: str) -> None:
        """Give an empty consumer group's id up to a classic group (its offsets stay)."""
        group = self._groups.get(group_id)
        if group is not None and not group.members:
            del self._groups[group_id]

    def offset_commit_error(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> Optional[ErrorCode]:
        """None if an OffsetCommit to the consumer group may store its offsets, else its error."""
        group = self._groups[group_id]
        if member_epoch < 0 and not group.members:
            return None  # an admin commit, or a consumer outside group management
        member = group.members.get(member_id)
        if member is None:
            return _X.OFFSET_MEMBER_KNOWN.error_code
        if api_version < 9:
            return _X.OFFSET_VERSION.error_code
        if member_epoch != member.epoch:
            return _X.OFFSET_EPOCH_CURRENT.error_code
        return None

    def offset_fetch_error(self, group_id: str, member_id: Optional[str], member_epoch: int) -> Optional[ErrorCode]:
        """None if an OffsetFetch of the consumer group may read its offsets, else its error."""
        if member_id is None or (member_epoch < 0 and not member_id):
            return None  # the admin client, or a client that does not say
        member = self._groups[group_id].members.get(member_id)
        if member is None:
            return _X.OFFSET_MEMBER_KNOWN.error_code
        if member_epoch != member.epoch:
            return _X.OFFSET_EPOCH_CURRENT.error_code
        return None

    def listing(self) -> List[Tuple[str, str]]:
        """(group id, state) of every consumer group, for ListGroups."""
        return [(group_id, group.state().value) for group_id, group in self._groups.items()]

    # ---------------------------------------------------------------- introspection

    def group_ids(self) -> List[str]:
        """The consumer groups held."""
        return list(self._groups)

    def group_state(self, group_id: str) -> GroupState:
        """The group's state (DEAD if unknown)."""
        group = self._groups.get(group_id)
        return GroupState.DEAD if group is None else group.state()

    def group_epoch(self, group_id: str) -> Tuple[int, int]:
        """(group epoch, assignment epoch)."""
        group = self._groups[group_id]
        return group.epoch, group.assignment_epoch

    def members(self, group_id: str) -> List[MemberView]:
        """The group's members with their assignments, by topic name."""
        group = self._groups.get(group_id)
        if group is None:
            return []
        names = self._names_by_id()

        def named(partitions: Partitions) -> Dict[str, Tuple[int, ...]]:
            return {names.get(t, str(t)): tuple(sorted(ps)) for t, ps in partitions.items() if ps}

        return [
            MemberView(
                m.member_id,
                m.instance_id,
                m.epoch,
                m.state,
                named(m.assigned),
                named(m.pending_revocation),
                named(group.target.get(m.member_id, {})),
            )
            for m in group.members.values()
        ]

    def owners(self, group_id: str) -> Dict[TopicPartition, str]:
        """(topic id, partition) → the one member that holds it (assigned or pending revocation)."""
        group = self._groups.get(group_id)
        return dict(group.owners) if group is not None else {}

    # ---------------------------------------------------------------- the heartbeat

    def _heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str, client_host: str, now_ms: int
    ) -> ConsumerGroupHeartbeatResponse:
        kind = epoch_kind(req.member_epoch)
        compiled = self._check_fields(req, version, kind)
        group = self._group_for(req.group_id, kind)
        member, is_new = self._member_for(group, req, kind)
        if kind is EpochKind.LEAVE:
            self._remove(group, member)
            return self._answer(member.member_id, LEAVE_EPOCH, None, interval_ms=0)
        if kind is EpochKind.STATIC_LEAVE:
            member.epoch = STATIC_LEAVE_EPOCH
            member.revocation_deadline_ms = None
            return self._answer(member.member_id, STATIC_LEAVE_EPOCH, None, interval_ms=0)
        before = self._copy_assigned(member)
        changed = self._update_member(member, req, compiled, client_id, client_host) or is_new
        if self._refresh_subscriptions(group, member) or changed:
            group.epoch += 1
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        owned = None if req.topic_partitions is None else {t.topic_id: set(t.partitions) for t in req.topic_partitions}
        self._reconcile(group, member, owned, now_ms)
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        full = kind is EpochKind.JOIN or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        show = full or before != self._copy_assigned(member)
        answer = self._answer(member.member_id, member.epoch, member.assigned if show else None)
        if member.regex is not None and member.regex not in group.regexes:
            # Resolved "in the background": the group epoch moves now, the member learns its topics'
            # partitions on its next heartbeat (Kafka answers a new expression's join without them).
            in_use = {m.regex for m in group.members.values() if m.regex is not None}
            group.regexes = (group.regexes & in_use) | {member.regex}
            if self._refresh_subscriptions(group, member):
                group.epoch += 1
        return answer

    def _answer(
        self, member_id: str, epoch: int, assigned: Optional[Partitions], interval_ms: Optional[int] = None
    ) -> ConsumerGroupHeartbeatResponse:
        A = ConsumerGroupHeartbeatResponse.Assignment
        T = A.TopicPartitions
        assignment = (
            None
            if assigned is None
            else A(
                topic_partitions=[
                    T(topic_id=t, partitions=sorted(ps))
                    for t, ps in sorted(assigned.items(), key=lambda kv: str(kv[0]))
                    if ps
                ]
            )
        )
        return ConsumerGroupHeartbeatResponse(
            error_code=_C.NONE,
            member_id=member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms if interval_ms is None else interval_ms,
            assignment=assignment,
        )

    @staticmethod
    def _copy_assigned(member: _Member) -> Partitions:
        return _copy(member.assigned)

    def _check_fields(
        self, req: ConsumerGroupHeartbeatRequest, version: int, kind: EpochKind
    ) -> Optional[LinearPattern]:
        """The checks on the request's own fields, in :data:`HEARTBEAT_CHECKS` order (the group and member
        checks follow in :meth:`_group_for` and :meth:`_member_for`); the compiled regex, if any."""

        def need(ok: bool, check: Check, message: str) -> None:
            if not ok:
                raise _Refused(check, message)

        need(bool(req.group_id), _X.GROUP_ID_SET, "GroupId can't be empty.")
        need(req.instance_id != "", _X.INSTANCE_ID_NOT_EMPTY, "InstanceId can't be empty.")
        need(req.rack_id != "", _X.RACK_ID_NOT_EMPTY, "RackId can't be empty.")
        need(kind is not EpochKind.INVALID, _X.EPOCH_VALID, "MemberEpoch is invalid.")
        need(
            bool(req.member_id) or (kind is EpochKind.JOIN and version == 0),
            _X.MEMBER_ID_SET,
            "MemberId can't be empty.",
        )
        if kind is EpochKind.STATIC_LEAVE:
            need(req.instance_id is not None, _X.STATIC_LEAVE_HAS_INSTANCE, "InstanceId can't be null.")
        regex = req.subscribed_topic_regex if version >= 1 else None
        if kind is EpochKind.JOIN:
            need(
                req.rebalance_timeout_ms != -1,
                _X.JOIN_HAS_REBALANCE_TIMEOUT,
                "RebalanceTimeoutMs must be provided in first request.",
            )
            need(
                req.topic_partitions is not None and not req.topic_partitions,
                _X.JOIN_OWNS_NOTHING,
                "TopicPartitions must be empty when (re-)joining.",
            )
            need(
                bool(req.subscribed_topic_names) or regex is not None,
                _X.JOIN_HAS_SUBSCRIPTION,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
        names = req.subscribed_topic_names
        need(
            names is None or len(names) <= self.config.max_subscribed_topics,
            _X.SUBSCRIPTION_BOUNDED,
            f"at most {self.config.max_subscribed_topics} subscribed topic names",
        )
        need(
            req.server_assignor is None or req.server_assignor in self.config.assignors,
            _X.ASSIGNOR_KNOWN,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(self.config.assignors)}.",
        )
        compiled = None
        if regex:
            compiled = safe_regex(regex, self.config.max_regex_length)
            need(
                compiled is not None,
                _X.REGEX_VALID,
                f"SubscribedTopicRegex `{regex}` is longer than {self.config.max_regex_length} characters, "
                "not a valid regular expression, or uses what RE2 does not have (back-references, look-arounds, "
                f"possessive repeats, inline flags) or more than {MAX_REGEX_STATES} automaton states",
            )
        return compiled

    def _group_for(self, group_id: str, kind: EpochKind) -> _Group:
        group = self._groups.get(group_id)
        if group is not None:
            return group
        if kind is EpochKind.JOIN:
            if self._classic_has_members(group_id):
                raise _Refused(_X.NOT_CLASSIC_GROUP, f"Group {group_id} is not a consumer group")
            self._release_classic(group_id)
            group = self._groups[group_id] = _Group(group_id)
            return group
        raise _Refused(_X.GROUP_EXISTS, f"Consumer group {group_id} not found.")

    def _member_for(self, group: _Group, req: ConsumerGroupHeartbeatRequest, kind: EpochKind) -> Tuple[_Member, bool]:
        """The member the heartbeat is from, and whether it is new (then already added)."""
        instance = req.instance_id
        if kind is EpochKind.JOIN:
            if instance is not None:
                holder_id = group.static.get(instance)
                holder = group.members.get(holder_id) if holder_id is not None else None
                if holder is not None and holder.member_id == req.member_id and req.member_id:
                    return holder, False  # the same member rejoining
                if holder is not None and holder.epoch != STATIC_LEAVE_EPOCH:
                    raise _Refused(
                        _X.INSTANCE_RELEASED,
                        f"Static member {req.member_id} with instance id "
                        f"{instance} cannot join the group because the instance id is owned by "
                        f"{holder.member_id} member.",
                    )
                self._has_room(group, holder is not None)
                member = _Member(req.member_id or self._new_member_id(), instance)
                if holder is not None:
                    self._replace(group, holder, member)
                    return member, False  # the group epoch moves only if the subscription differs
                self._add(group, member)
                return member, True
            existing = group.members.get(req.member_id) if req.member_id else None
            if existing is not None:
                return existing, False
            self._has_room(group, False)
            member = _Member(req.member_id or self._new_member_id(), None)
            self._add(group, member)
            return member, True
        if instance is not None:
            holder_id = group.static.get(instance)
            if holder_id is None:
                raise _Refused(_X.MEMBER_KNOWN, f"Instance id {instance} is unknown.")
            if holder_id != req.member_id:
                raise _Refused(
                    _X.INSTANCE_OWNED,
                    f"Static member {req.member_id} with instance id {instance} was fenced by member {holder_id}.",
                )
        known = group.members.get(req.member_id)
        if known is None:
            raise _Refused(_X.MEMBER_KNOWN, f"Member {req.member_id} is not a member of group {group.group_id}.")
        if kind is EpochKind.HEARTBEAT:
            self._check_epoch(known, req)
        return known, False

    def _has_room(self, group: _Group, replacing: bool) -> None:
        limit = self.config.max_size
        if limit is not None and not replacing and len(group.members) >= limit:
            raise _Refused(
                _X.GROUP_HAS_ROOM, f"The consumer group has reached its maximum capacity of {limit} members."
            )

    @staticmethod
    def _check_epoch(member: _Member, req: ConsumerGroupHeartbeatRequest) -> None:
        received = req.member_epoch
        if received == member.epoch:
            return
        if received < member.epoch and received == member.previous_epoch:
            owned = req.topic_partitions
            if owned is None or all(set(t.partitions) <= member.assigned.get(t.topic_id, set()) for t in owned):
                return
        raise _Refused(
            _X.EPOCH_CURRENT,
            f"The consumer group member has a different member epoch ({received}) than "
            f"the one known by the group coordinator ({member.epoch}). The member must abandon all its "
            f"partitions and rejoin.",
        )

    def _update_member(
        self,
        member: _Member,
        req: ConsumerGroupHeartbeatRequest,
        compiled: Optional[LinearPattern],
        client_id: str,
        client_host: str,
    ) -> bool:
        """Take the fields the heartbeat sets; True if the subscription (or assignor) changed."""
        member.client_id, member.client_host = client_id, client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        changed = False
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            changed |= names != member.topic_names
            member.topic_names = names
        regex = getattr(req, "subscribed_topic_regex", None)
        if regex is not None:
            new_regex = regex or None
            changed |= new_regex != member.regex
            member.regex, member.compiled = new_regex, compiled
        if req.server_assignor is not None:
            changed |= req.server_assignor != member.assignor
            member.assignor = req.server_assignor
        return changed

    # ---------------------------------------------------------------- membership

    def _add(self, group: _Group, member: _Member) -> None:
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static[member.instance_id] = member.member_id

    def _replace(self, group: _Group, old: _Member, new: _Member) -> None:
        """A static member restarting: the new member id takes the old one's place and partitions."""
        del group.members[old.member_id]
        new.assigned, new.epoch, new.previous_epoch = old.assigned, old.epoch, old.previous_epoch
        new.pending_revocation = old.pending_revocation
        new.topic_names, new.regex, new.compiled, new.assignor = old.topic_names, old.regex, old.compiled, old.assignor
        new.rack_id, new.rebalance_timeout_ms, new.resolved = old.rack_id, old.rebalance_timeout_ms, old.resolved
        for tp, owner in list(group.owners.items()):
            if owner == old.member_id:
                group.owners[tp] = new.member_id
        if old.member_id in group.target:
            group.target[new.member_id] = group.target.pop(old.member_id)
        self._add(group, new)

    def _remove(self, group: _Group, member: _Member) -> None:
        """A member leaves or is fenced: its partitions are free, and the group epoch moves."""
        if group.members.pop(member.member_id, None) is None:
            return
        if member.instance_id is not None and group.static.get(member.instance_id) == member.member_id:
            del group.static[member.instance_id]
        for tp in [tp for tp, owner in group.owners.items() if owner == member.member_id]:
            del group.owners[tp]
        group.target.pop(member.member_id, None)
        group.epoch += 1

    # ---------------------------------------------------------------- assignment

    def _resolve(self, group: _Group, member: _Member) -> None:
        """Re-read the partition counts of the existing topics the member subscribes to (by name, or by a
        regex the group has resolved).

        Done for the member whose heartbeat is being handled only: the cost is its own subscription
        (and the broker's topics for a regex), never the whole group's.
        """
        names = {t for t in member.topic_names if t in self._topic_partitions}
        if member.compiled is not None and member.regex in group.regexes:
            names.update(t for t in self._topic_partitions if member.compiled.fullmatch(t))
        member.resolved = {name: len(self._topic_partitions[name]) for name in names}

    def _refresh_subscriptions(self, group: _Group, member: _Member) -> bool:
        """Re-read ``member``'s topics and merge every member's; True if the group's counts changed."""
        self._resolve(group, member)
        subscribed: Dict[str, int] = {}
        for other in group.members.values():
            subscribed.update(other.resolved)
        changed = subscribed != group.subscribed
        group.subscribed = subscribed
        return changed

    def _assignor_name(self, group: _Group) -> str:
        votes: Dict[str, int] = {}
        for member in group.members.values():
            if member.assignor is not None:
                votes[member.assignor] = votes.get(member.assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        return max(votes, key=lambda name: (votes[name], -self.config.assignors.index(name)))

    def _assign(self, group: _Group) -> None:
        """A new target assignment for the group epoch."""
        names = self._names_by_id()
        # Counts as they are now: a topic deleted since a member's last heartbeat is left out.
        counts = {
            name: len(self._topic_partitions[name])
            for name in group.subscribed
            if name in self._topic_partitions and name in self._topic_ids
        }
        ids = {name: self._topic_ids[name] for name in counts}
        specs = {
            m.member_id: (m.instance_id, sorted(n for n in m.resolved if n in counts)) for m in group.members.values()
        }
        previous = {
            member_id: {names[t]: sorted(ps) for t, ps in target.items() if t in names}
            for member_id, target in group.target.items()
        }
        result = ASSIGNORS[self._assignor_name(group)](specs, counts, previous)
        group.target = {
            member_id: {ids[topic]: set(ps) for topic, ps in by_topic.items() if ps}
            for member_id, by_topic in result.items()
        }
        group.assignment_epoch = group.epoch

    def _reconcile(self, group: _Group, member: _Member, owned: Optional[Partitions], now_ms: int) -> None:
        """One step of Kafka's reconciliation for ``member`` (see the rules' theory of operation)."""
        state = member.state
        # A restarted static member (epoch -2) starts from the partitions it kept, towards its target.
        if state is MemberState.STABLE and member.epoch == group.assignment_epoch:
            return
        if state is MemberState.UNREVOKED_PARTITIONS and self._still_owns(owned, member.pending_revocation):
            return
        self._next_assignment(group, member, owned, now_ms)

    @staticmethod
    def _still_owns(owned: Optional[Partitions], revoking: Partitions) -> bool:
        if owned is None:
            return True
        return any(owned.get(t, set()) & ps for t, ps in revoking.items())

    def _next_assignment(self, group: _Group, member: _Member, owned: Optional[Partitions], now_ms: int) -> None:
        target = group.target.get(member.member_id, {})
        kept: Partitions = {}
        revoking: Partitions = {}
        adding: Partitions = {}
        withheld = False
        for topic in set(target) | set(member.assigned):
            want = target.get(topic, set())
            have = member.assigned.get(topic, set())
            keep = have & want
            if keep:
                kept[topic] = keep
            if have - keep:
                revoking[topic] = have - keep
            free = {p for p in want - keep if group.owners.get((topic, p), member.member_id) == member.member_id}
            withheld |= len(free) < len(want - keep)
            if free:
                adding[topic] = free
        # The partitions this member gives up stay its own until it has revoked them.
        if revoking and self._still_owns(owned, revoking):
            outcome = ReconcileOutcome.MUST_REVOKE
            self._hold(group, member, kept, revoking)
            if member.revocation_deadline_ms is None or member.state is not MemberState.UNREVOKED_PARTITIONS:
                member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
        else:
            for topic, ps in adding.items():
                kept.setdefault(topic, set()).update(ps)
            outcome = ReconcileOutcome.WITHHELD if withheld else ReconcileOutcome.RECONCILED
            self._hold(group, member, kept, {})
            member.revocation_deadline_ms = None
            if member.epoch != group.assignment_epoch:
                member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
        member.machine.fire(outcome)

    @staticmethod
    def _hold(group: _Group, member: _Member, assigned: Partitions, revoking: Partitions) -> None:
        """Make ``assigned`` and ``revoking`` the member's, releasing what it held besides."""
        for topic, ps in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in ps:
                if group.owners.get((topic, p)) == member.member_id:
                    del group.owners[(topic, p)]
        for topic, ps in list(assigned.items()) + list(revoking.items()):
            for p in ps:
                group.owners[(topic, p)] = member.member_id
        member.assigned, member.pending_revocation = _copy(assigned), _copy(revoking)

    # ---------------------------------------------------------------- describe and housekeeping

    def _names_by_id(self) -> Dict[uuid.UUID, str]:
        return {topic_id: name for name, topic_id in self._topic_ids.items()}

    def _describe(self, group_id: str, include_operations: bool) -> Any:
        G = ConsumerGroupDescribeResponse.DescribedGroup
        M = G.Member
        A = M.Assignment
        T = A.TopicPartitions
        group = self._groups.get(group_id)
        if group is None:
            return G(
                error_code=_C.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} not found.",
                group_id=group_id,
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
                members=[],
                authorized_operations=_NOT_ASKED,
            )
        names = self._names_by_id()

        def assignment(partitions: Partitions) -> Any:
            return A(
                topic_partitions=[
                    T(topic_id=t, topic_name=names.get(t, ""), partitions=sorted(ps))
                    for t, ps in partitions.items()
                    if ps
                ]
            )

        members = [
            M(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.topic_names),
                subscribed_topic_regex=m.regex or "",
                assignment=assignment(m.assigned),
                target_assignment=assignment(group.target.get(m.member_id, {})),
                member_type=_MEMBER_TYPE_CONSUMER,
            )
            for m in group.members.values()
        ]
        return G(
            error_code=_C.NONE,
            group_id=group_id,
            group_state=group.state().value,
            group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self._assignor_name(group),
            members=members,
            authorized_operations=_GROUP_OPERATIONS if include_operations else _NOT_ASKED,
        )

    def _drop_unused_groups(self) -> None:
        for group_id in [
            g for g, group in self._groups.items() if not group.members and not self._offsets.has_offsets(g)
        ]:
            del self._groups[group_id]
