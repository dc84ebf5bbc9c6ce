"""The group coordinator (broker side) as a sans-I/O state machine: the engine that applies the rules
of :mod:`kproto.group.coordinator_rules` (its theory of operation, and every table) to many groups.

:class:`GroupCoordinator` takes decoded requests with reply tokens and ``now_ms``, returns
:class:`Reply` objects, and keeps what the tables do not: members, parked replies, deadlines and
offsets.  The tables' names are importable from here too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    Union,
)

from kproto import ErrorCode
from kproto.errors import DecodeError, LocalProtocolError, UnsupportedVersionError
from kproto.group.coordinator_rules import (
    CHECK_ERRORS,
    CHECKS,
    NEW_MEMBER_RULES,
    REQUEST_KINDS,
    RESPONSES,
    SERVED_VERSIONS,
    SKIPPED_CHECKS,
    TRANSITIONS,
    Check,
    CoordinatorEvent,
    GroupState,
    Handling,
    NewMemberRule,
    RequestKind,
)
from kproto.group.coordinator_rules import COMMON_CHECKS as _COMMON
from kproto.group.coordinator_rules import MEMBER_CHECKS as _MEMBER
from kproto.group.offset_store import OffsetStore
from kproto.state_machine import StateMachine
from kproto.message_base import Message

if TYPE_CHECKING:  # the element classes, by their module-level names (a nested name is an alias to mypy)
    from kproto._generated.delete_groups import DeleteGroupsResponse_DeletableGroupResult
    from kproto._generated.describe_groups import DescribeGroupsResponse_DescribedGroup
    from kproto._generated.join_group import JoinGroupResponse_JoinGroupResponseMember
    from kproto._generated.offset_commit import OffsetCommitResponse_OffsetCommitResponsePartition
from kproto.messages import (
    ConsumerProtocolSubscription,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "GroupState",
    "CoordinatorEvent",
    "TRANSITIONS",
    "RequestKind",
    "Handling",
    "RESPONSES",
    "NewMemberRule",
    "NEW_MEMBER_RULES",
    "Check",
    "CHECKS",
    "CHECK_ERRORS",
    "SERVED_VERSIONS",
    "CoordinatorConfig",
    "Reply",
    "MemberSnapshot",
    "GroupSnapshot",
    "GroupCoordinator",
]


_C = ErrorCode

#: The ``authorized_operations`` of a described group when asked for (v3+) and no authorizer runs:
#: READ (3), DELETE (6) and DESCRIBE (8), one bit each.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_OPERATIONS_NOT_REQUESTED = -(2**31)

#: ListGroups v5 types: every group here is a classic group.
_GROUP_TYPE = "classic"


# --------------------------------------------------------------------------------------------------
# Public value types


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker settings the coordinator obeys (Kafka's defaults, except where a test broker wants otherwise)."""

    #: ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms`` (Kafka 2.3+ defaults; 0.9-2.2
    #: capped sessions at 30000, below the 45 s default of today's clients)
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    #: ``offset.metadata.max.bytes`` (compared with the metadata's length in UTF-16 units, as Java does)
    offset_metadata_max_bytes: int = 4096
    #: ``offsets.retention.minutes`` = 1440, in milliseconds
    offsets_retention_ms: int = 24 * 60 * 60 * 1000
    #: ``group.max.size``: members per group (None: no limit, Kafka's Integer.MAX_VALUE)
    group_max_size: Optional[int] = None


@dataclass(frozen=True)
class Reply:
    """An answer for the request whose call carried ``reply_to``."""

    reply_to: object
    result: Message


@dataclass(frozen=True)
class MemberSnapshot:
    """A read-only view of one member, for tests and tools."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    protocols: Tuple[Tuple[str, bytes], ...]
    assignment: bytes
    awaiting_join: bool
    awaiting_sync: bool
    session_deadline_ms: Optional[int]
    #: JoinGroup v5+ static membership (None: a dynamic member)
    group_instance_id: Optional[str] = None
    rebalance_timeout_ms: int = 0


@dataclass(frozen=True)
class GroupSnapshot:
    """A read-only view of one group, for tests and tools."""

    group_id: str
    state: GroupState
    generation_id: int
    protocol_type: str
    protocol: str
    leader_id: str
    members: Tuple[MemberSnapshot, ...]
    join_deadline_ms: Optional[int]
    #: member ids handed out with MEMBER_ID_REQUIRED and not yet used to rejoin
    pending_member_ids: Tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------------
# Internal records


@dataclass
class _Parked:
    """A parked request's token and version (a wrapper, because ``None`` is a valid token)."""

    reply_to: object
    api_version: int = 0


@dataclass
class _Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    protocols: Tuple[Tuple[str, bytes], ...]
    group_instance_id: Optional[str] = None
    rebalance_timeout_ms: int = 0
    assignment: bytes = b""
    parked_join: Optional[_Parked] = None
    parked_sync: Optional[_Parked] = None
    session_deadline_ms: Optional[int] = None

    def protocol_names(self) -> List[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        return dict(self.protocols)[protocol]


@dataclass
class _Group:
    group_id: str
    protocol_type: str
    generation_id: int = 0
    leader_id: Optional[str] = None
    protocol: str = ""
    members: Dict[str, _Member] = field(default_factory=dict)
    #: group_instance_id → member_id of the static members
    static_members: Dict[str, str] = field(default_factory=dict)
    #: member id → deadline of the members told MEMBER_ID_REQUIRED
    pending: Dict[str, int] = field(default_factory=dict)
    join_deadline_ms: Optional[int] = None

    machine: StateMachine[GroupState, CoordinatorEvent] = field(init=False)

    def __post_init__(self) -> None:
        self.machine = StateMachine(
            TRANSITIONS,
            GroupState.EMPTY,
            f"group {self.group_id!r}",
            lambda state, event: f"group {self.group_id!r}: no transition for {event.name} in {state.value}",
        )

    @property
    def state(self) -> GroupState:
        return self.machine.state

    def transition(self, event: CoordinatorEvent) -> None:
        self.machine.fire(event)

    def candidate_protocols(self, members: Optional[Iterable[_Member]] = None) -> List[str]:
        """Protocols every member supports, in the leader's preference order."""
        members = list(self.members.values() if members is None else members)
        anchor = self.members.get(self.leader_id or "") or members[0]
        names = anchor.protocol_names()
        for member in members:
            supported = set(member.protocol_names())
            names = [name for name in names if name in supported]
        return names

    def select_protocol(self, members: Optional[Iterable[_Member]] = None) -> str:
        members = list(self.members.values() if members is None else members)
        candidates = self.candidate_protocols(members)
        votes = {name: 0 for name in candidates}
        for member in members:
            votes[next(n for n in member.protocol_names() if n in votes)] += 1
        return max(candidates, key=lambda name: votes[name])  # max keeps the first of equals

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def all_rejoined(self) -> bool:
        return not self.pending and all(member.parked_join is not None for member in self.members.values())

    def member_metadata(self) -> List["JoinGroupResponse_JoinGroupResponseMember"]:
        Member = JoinGroupResponse.JoinGroupResponseMember
        return [
            Member(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata_for(self.protocol))
            for m in self.members.values()
        ]

    def subscribed_topics(self) -> Optional[Set[str]]:
        """Topics the members subscribe to under the consumer protocol (None: not a consumer group)."""
        if self.protocol_type != "consumer" or not self.protocol:
            return None
        topics: Set[str] = set()
        for member in self.members.values():
            data = member.metadata_for(self.protocol)
            try:
                subscription, _ = ConsumerProtocolSubscription.decode_from(data, 2, len(data), 0)
            except (DecodeError, ValueError):
                continue  # unreadable metadata subscribes to nothing we can name
            topics.update(subscription.topics)
        return topics


@dataclass
class _Call:
    """One incoming request, with the fields the checks look at."""

    api: type  # the request class, as CHECKS and REQUEST_KINDS key it
    reply_to: object
    group_id: str
    member_id: str = ""
    generation_id: int = -1
    api_version: int = 0
    group_instance_id: Optional[str] = None
    session_timeout_ms: int = 0
    rebalance_timeout_ms: int = 0
    protocol_type: Optional[str] = ""
    protocol_name: Optional[str] = None
    protocols: Tuple[Tuple[str, bytes], ...] = ()
    handling: Optional[Handling] = None


_Verdict = Union[ErrorCode, Handling, None]


def _join_error(code: ErrorCode, member_id: str, version: int) -> JoinGroupResponse:
    """A failed JoinGroup: no generation (−1 in every version, as Kafka 3.9 and 4.1 answer; 0.9 said 0),
    no leader, and no protocol name (null where the field is nullable, from v7)."""
    return JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_name=None if version >= 7 else "", member_id=member_id
    )


class OtherGroups(Protocol):
    """Groups of another protocol that share this coordinator's group ids and offset store (the KIP-848
    consumer groups of :class:`kproto.group.consumer_group.ConsumerGroupCoordinator`).

    A JoinGroup for one of its groups with members is refused INCONSISTENT_GROUP_PROTOCOL, as classic
    members are not hosted inside such a group (an empty one gives its id up).  ListGroups lists its
    groups (``listing``: id and state) and DeleteGroups deletes those without members, with their
    offsets.  OffsetCommit and OffsetFetch for one of its groups are judged by it, and the offsets are
    kept in this coordinator's store.
    """

    def owns(self, group_id: str) -> bool: ...

    def has_members(self, group_id: str) -> bool: ...

    def release_if_empty(self, group_id: str) -> None: ...

    def listing(self) -> List[Tuple[str, str]]: ...

    def offset_commit_error(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> Optional[ErrorCode]: ...

    def offset_fetch_error(self, group_id: str, member_id: Optional[str], member_epoch: int) -> Optional[ErrorCode]: ...


# --------------------------------------------------------------------------------------------------
# The coordinator


class GroupCoordinator:
    """The broker-side group coordinator for many groups; see the module docstring for the rules.

    ``member_id_suffix`` makes member ids (``client_id + "-" + suffix()``, or ``group_instance_id + "-" +
    suffix()`` for a static member; a random UUID by default), ``owns_group`` says whether this broker
    coordinates a group (else NOT_COORDINATOR_FOR_GROUP), and ``is_loading`` whether its metadata is
    still loading (else GROUP_LOAD_IN_PROGRESS).
    """

    def __init__(
        self,
        config: CoordinatorConfig = CoordinatorConfig(),
        *,
        member_id_suffix: Callable[[], str] = lambda: str(uuid.uuid4()),
        owns_group: Callable[[str], bool] = lambda group_id: True,
        is_loading: Callable[[str], bool] = lambda group_id: False,
    ) -> None:
        self.config = config
        self.active = True
        self._member_id_suffix = member_id_suffix
        self._owns_group = owns_group
        self._is_loading = is_loading
        self._groups: Dict[str, _Group] = {}
        self._offsets = OffsetStore(
            metadata_max_length=config.offset_metadata_max_bytes,
            default_retention_ms=config.offsets_retention_ms,
        )
        self._now_ms: Optional[int] = None
        self._replies: List[Reply] = []
        #: Groups of the KIP-848 protocol sharing the group ids and the offset store (set by the broker).
        self.other_groups: Optional[OtherGroups] = None

    @property
    def offsets(self) -> OffsetStore:
        """The committed offsets of every group (shared with :attr:`other_groups`)."""
        return self._offsets

    # ---------------------------------------------------------------- requests

    def handle(
        self,
        reply_to: object,
        request: Message,
        api_version: int,
        *,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> List[Reply]:
        """Take a decoded group request (a message of :mod:`kproto.messages`) sent in ``api_version``.

        Returns the replies this call releases: its own (unless parked) and parked ones of other callers,
        each a response message for the version its request was sent in.  ``client_id`` and
        ``client_host`` come from the request header and the connection; DescribeGroups reports them.
        Raises :class:`~kproto.errors.UnsupportedVersionError` for a request the coordinator does not
        speak (:data:`SERVED_VERSIONS`).
        """
        served = SERVED_VERSIONS.get(type(request))
        if served is None:
            raise UnsupportedVersionError(f"the group coordinator does not answer {type(request).__name__}")
        if not served[0] <= api_version <= served[1]:
            raise UnsupportedVersionError(
                f"the group coordinator answers {type(request).__name__} v{served[0]}-v{served[1]}, not v{api_version}"
            )
        self._advance(now_ms)
        v = api_version
        other = self.other_groups
        if isinstance(request, JoinGroupRequest) and other is not None and request.group_id not in self._groups:
            if other.has_members(request.group_id):
                self._reply(reply_to, _join_error(_C.INCONSISTENT_GROUP_PROTOCOL, "", api_version))
                return self._take_replies()
            other.release_if_empty(request.group_id)
        if isinstance(request, JoinGroupRequest):
            call = _Call(
                JoinGroupRequest,
                reply_to,
                request.group_id,
                request.member_id,
                api_version=v,
                group_instance_id=request.group_instance_id if v >= 5 else None,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms if v >= 1 else request.session_timeout_ms,
                protocol_type=request.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            )
            self._run(call, lambda: self._apply_join(call, client_id, client_host))
        elif isinstance(request, SyncGroupRequest):
            call = _Call(
                SyncGroupRequest,
                reply_to,
                request.group_id,
                request.member_id,
                request.generation_id,
                v,
                group_instance_id=request.group_instance_id if v >= 3 else None,
                protocol_type=request.protocol_type if v >= 5 else None,
                protocol_name=request.protocol_name if v >= 5 else None,
            )
            assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
            self._run(call, lambda: self._apply_sync(call, assignments))
        elif isinstance(request, HeartbeatRequest):
            call = _Call(
                HeartbeatRequest,
                reply_to,
                request.group_id,
                request.member_id,
                request.generation_id,
                v,
                group_instance_id=request.group_instance_id if v >= 3 else None,
            )
            self._run(call, lambda: self._apply_heartbeat(call))
        elif isinstance(request, LeaveGroupRequest):
            self._leave(reply_to, request, v)
        elif isinstance(request, OffsetCommitRequest):
            self._commit(reply_to, request, v)
        elif isinstance(request, OffsetFetchRequest):
            self._fetch(reply_to, request, v)
        elif isinstance(request, DescribeGroupsRequest):
            include_operations = v >= 3 and request.include_authorized_operations
            described = [self._describe(group_id, include_operations) for group_id in request.groups]
            self._reply(reply_to, DescribeGroupsResponse(groups=described))
        elif isinstance(request, ListGroupsRequest):
            states = list(request.states_filter) if v >= 4 else []
            types = list(request.types_filter) if v >= 5 else []
            self._reply(reply_to, self._list_groups(states, types, v))
        elif isinstance(request, DeleteGroupsRequest):
            results = [self._delete_group(group_id) for group_id in dict.fromkeys(request.groups_names)]
            self._reply(reply_to, DeleteGroupsResponse(results=results))
        else:
            assert isinstance(request, OffsetDeleteRequest)
            self._delete_offsets(reply_to, request)
        self._drop_unused_groups()
        return self._take_replies()

    # ---------------------------------------------------------------- time and administration

    def next_deadline_ms(self) -> Optional[int]:
        """The earliest time :meth:`tick` has work to do, or None when no timer is running."""
        deadlines: List[Optional[int]] = [deadline for deadline, *_ in self._timers()]
        deadlines.append(self._offsets.next_expiry_ms())
        return min((d for d in deadlines if d is not None), default=None)

    def tick(self, now_ms: int) -> List[Reply]:
        """Fire every timer due at ``now_ms``; returns the replies that released."""
        self._advance(now_ms)
        self._drop_unused_groups()
        return self._take_replies()

    def unload_group(self, group_id: str, now_ms: int) -> List[Reply]:
        """Give a group up (its offsets partition moved away): Dead, parked requests answered 16."""
        self._advance(now_ms)
        group = self._groups.get(group_id)
        if group is not None:
            for member in group.members.values():
                self._answer_join_error(member, _C.NOT_COORDINATOR_FOR_GROUP)
                self._answer_sync(group, member, _C.NOT_COORDINATOR_FOR_GROUP)
            group.transition(CoordinatorEvent.UNLOADED)
            del self._groups[group_id]
        self._offsets.drop_group(group_id)
        return self._take_replies()

    def release_if_empty(self, group_id: str) -> None:
        """Give an Empty group's id up to a group of :attr:`other_groups` (its offsets stay in the store)."""
        group = self._groups.get(group_id)
        if group is not None and group.state is GroupState.EMPTY and not group.members and not group.pending:
            group.transition(CoordinatorEvent.REMOVED)
            del self._groups[group_id]

    def has_members(self, group_id: str) -> bool:
        """Whether the classic group ``group_id`` has members (or a pending one)."""
        group = self._groups.get(group_id)
        return group is not None and bool(group.members or group.pending)

    # ---------------------------------------------------------------- introspection

    def group_ids(self) -> List[str]:
        """Ids of the groups currently held (Dead groups are gone)."""
        return list(self._groups)

    def snapshot(self, group_id: str) -> Optional[GroupSnapshot]:
        """A read-only view of a group, or None if it is unknown."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        members = tuple(
            MemberSnapshot(
                m.member_id,
                m.client_id,
                m.client_host,
                m.session_timeout_ms,
                m.protocols,
                m.assignment,
                m.parked_join is not None,
                m.parked_sync is not None,
                m.session_deadline_ms,
                m.group_instance_id,
                m.rebalance_timeout_ms,
            )
            for m in group.members.values()
        )
        return GroupSnapshot(
            group.group_id,
            group.state,
            group.generation_id,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            members,
            group.join_deadline_ms,
            tuple(group.pending),
        )

    def committed(self, group_id: str) -> Dict[Tuple[str, int], Tuple[int, Optional[str]]]:
        """The offsets stored for a group: (topic, partition) → (offset, metadata)."""
        return {tp: (o.offset, o.metadata) for tp, o in self._offsets.partitions(group_id).items()}

    def commit_transactional(
        self, group_id: str, offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]], now_ms: int
    ) -> None:
        """Store the offsets a committed transaction carried (TxnOffsetCommit, checked when sent): no
        member or generation checks, as Kafka writes them when the commit marker lands."""
        for tp, (offset, metadata) in offsets.items():
            self._offsets.commit(group_id, tp, offset, metadata, retention_ms=-1, now_ms=now_ms)

    # ---------------------------------------------------------------- plumbing

    def _run(
        self,
        call: _Call,
        apply: Callable[[], None],
        on_error: Optional[Callable[[ErrorCode], None]] = None,
    ) -> None:
        """Run the checks, then apply the handling or answer the error."""
        verdict = self._check(call)
        if isinstance(verdict, ErrorCode):
            (on_error or (lambda code: self._answer_error(call, code)))(verdict)
        else:
            call.handling = verdict
            apply()

    def _reply(self, reply_to: object, result: Message) -> None:
        self._replies.append(Reply(reply_to, result))

    def _take_replies(self) -> List[Reply]:
        replies, self._replies = self._replies, []
        return replies

    def _now(self) -> int:
        assert self._now_ms is not None
        return self._now_ms

    def _drop_unused_groups(self) -> None:
        """Remove Empty groups left with no offsets and no pending member (Kafka's cleanup, done at once)."""
        for group in list(self._groups.values()):
            if (
                group.state is GroupState.EMPTY
                and not group.members
                and not group.pending
                and not self._offsets.has_offsets(group.group_id)
            ):
                group.transition(CoordinatorEvent.REMOVED)
                del self._groups[group.group_id]

    # ---------------------------------------------------------------- checks

    def _check(self, call: _Call) -> _Verdict:
        """Run the API's checks; an ErrorCode answers the call, a Handling (or None) proceeds."""
        group = self._groups.get(call.group_id)
        kind = self._kind(call, group)
        skipped = SKIPPED_CHECKS.get(kind, frozenset()) if kind is not None else frozenset()
        for check in CHECKS[call.api]:
            if check in skipped:
                continue
            if check is Check.STATE:
                assert kind is not None, call.api
                return RESPONSES[(kind, group.state if group else GroupState.DEAD)]
            if not self._passes(check, call, group):
                return check.error_code
        return None

    @staticmethod
    def _kind(call: _Call, group: Optional[_Group]) -> Optional[RequestKind]:
        """How RESPONSES sees the call (REQUEST_KINDS, and the two classes that split on the request)."""
        if call.api is JoinGroupRequest:
            # A pending id is a new member only without an instance id (Kafka fails internally on one with
            # it; here the member checks judge it, so an instance never gets a second member).
            new = call.member_id == "" or (
                group is not None and call.member_id in group.pending and call.group_instance_id is None
            )
            return RequestKind.JOIN_NEW_MEMBER if new else RequestKind.JOIN_KNOWN_MEMBER
        if call.api is OffsetCommitRequest:
            simple = call.generation_id < 0 and call.member_id == "" and call.group_instance_id is None
            return RequestKind.SIMPLE_COMMIT if simple else RequestKind.OFFSET_COMMIT
        return REQUEST_KINDS.get(call.api)

    def _passes(self, check: Check, call: _Call, group: Optional[_Group]) -> bool:
        return _CHECK_TESTS[check](self, call, group)

    def _has_room(self, call: _Call, group: Optional[_Group]) -> bool:
        limit = self.config.group_max_size
        if limit is None or group is None or call.member_id in group.members:
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            # Counting rejoined members lets the last ones to rejoin be the ones turned away.
            return sum(m.parked_join is not None for m in group.members.values()) < limit
        if group.state is GroupState.EMPTY:
            return True
        return len(group.members) < limit

    @staticmethod
    def _protocol_consistent(call: _Call, group: Optional[_Group]) -> bool:
        names = [name for name, _ in call.protocols]
        if not names:
            return False
        if group is None or not group.members:
            return True
        return group.protocol_type == call.protocol_type and bool(set(names) & set(group.candidate_protocols()))

    def _answer_error(self, call: _Call, code: ErrorCode) -> None:
        if call.api is JoinGroupRequest:
            self._reply(call.reply_to, _join_error(code, call.member_id, call.api_version))
        elif call.api is SyncGroupRequest:
            self._reply(call.reply_to, SyncGroupResponse(error_code=code))
        else:
            assert call.api is HeartbeatRequest, call.api
            self._reply(call.reply_to, HeartbeatResponse(error_code=code))

    # ---------------------------------------------------------------- JoinGroup

    def _apply_join(self, call: _Call, client_id: str, client_host: str) -> None:
        if call.handling is Handling.ADD_MEMBER:
            self._join_new_member(call, client_id, client_host)
            return
        group = self._groups[call.group_id]
        member = group.members[call.member_id]
        unchanged = member.protocols == call.protocols
        answer_now = {
            Handling.UPDATE_MEMBER: False,
            Handling.UPDATE_IF_CHANGED: unchanged,
            Handling.UPDATE_IF_LEADER_OR_CHANGED: unchanged and member.member_id != group.leader_id,
        }[call.handling]  # type: ignore[index]
        if answer_now:
            is_leader = member.member_id == group.leader_id
            # In Stable only followers get here, so only CompletingRebalance can list members (for the leader).
            members = group.member_metadata() if is_leader else []
            self._reply(call.reply_to, self._join_result(group, member, members, call.api_version))
            return
        member.protocols = call.protocols
        member.session_timeout_ms = call.session_timeout_ms
        member.rebalance_timeout_ms = call.rebalance_timeout_ms
        member.parked_join = _Parked(call.reply_to, call.api_version)
        self._rebalance_and_try_complete(group)

    def _new_member_rule(self, call: _Call, group: Optional[_Group]) -> NewMemberRule:
        static = call.group_instance_id is not None
        known = group is not None and call.group_instance_id in group.static_members
        requires_id = call.api_version >= 4
        for has_instance, instance_known, v4, rule in NEW_MEMBER_RULES:
            if has_instance == static and instance_known in (None, known) and v4 in (None, requires_id):
                return rule
        raise AssertionError("NEW_MEMBER_RULES cover every case")

    def _join_new_member(self, call: _Call, client_id: str, client_host: str) -> None:
        group = self._groups.get(call.group_id)
        if group is None:
            group = self._groups[call.group_id] = _Group(call.group_id, call.protocol_type or "")
        if call.member_id in group.pending:  # a pending member rejoins with the id it was given
            del group.pending[call.member_id]
            self._add_member(group, call, call.member_id, client_id, client_host)
            return
        rule = self._new_member_rule(call, group)
        prefix = call.group_instance_id if call.group_instance_id is not None else client_id
        member_id = f"{prefix}-{self._member_id_suffix()}"
        if member_id in group.members or member_id in group.pending:
            raise LocalProtocolError(f"member id generator repeated {member_id!r}")
        if rule is NewMemberRule.REPLACE_STATIC_MEMBER:
            self._replace_static_member(group, call, member_id)
        elif rule is NewMemberRule.REQUIRE_MEMBER_ID:
            group.pending[member_id] = self._now() + call.session_timeout_ms
            self._reply(call.reply_to, _join_error(_C.MEMBER_ID_REQUIRED, member_id, call.api_version))
        else:
            self._add_member(group, call, member_id, client_id, client_host)

    def _add_member(self, group: _Group, call: _Call, member_id: str, client_id: str, client_host: str) -> None:
        if not group.members:
            group.protocol_type = call.protocol_type or ""
        group.members[member_id] = _Member(
            member_id,
            client_id,
            client_host,
            call.session_timeout_ms,
            call.protocols,
            group_instance_id=call.group_instance_id,
            rebalance_timeout_ms=call.rebalance_timeout_ms,
            parked_join=_Parked(call.reply_to, call.api_version),
        )
        if call.group_instance_id is not None:
            group.static_members[call.group_instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        self._rebalance_and_try_complete(group)

    def _replace_static_member(self, group: _Group, call: _Call, new_id: str) -> None:
        """A known instance rejoins with an empty member id: the new id takes the old member's place."""
        assert call.group_instance_id is not None
        old_id = group.static_members[call.group_instance_id]
        old = group.members[old_id]
        self._answer_join_error(old, _C.FENCED_INSTANCE_ID)
        self._answer_sync(group, old, _C.FENCED_INSTANCE_ID)
        old_leader = group.leader_id
        # Same position in the member order, same assignment, the new id.
        group.members = {(new_id if mid == old_id else mid): m for mid, m in group.members.items()}
        old.member_id = new_id
        group.static_members[call.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        old.protocols = call.protocols
        old.session_timeout_ms = call.session_timeout_ms
        old.rebalance_timeout_ms = call.rebalance_timeout_ms
        if group.state is GroupState.STABLE:
            if group.select_protocol() == group.protocol:
                self._refresh_session(old)
                is_leader = group.leader_id == new_id
                if call.api_version >= 9:
                    result = self._join_result(group, old, group.member_metadata() if is_leader else [], 9)
                    result.skip_assignment = is_leader
                else:
                    # The old leader id: a restarted leader does not assign, it fetches its assignment.
                    result = self._join_result(group, old, [], call.api_version)
                    result.leader = old_leader or ""
                self._reply(call.reply_to, result)
                return
        old.parked_join = _Parked(call.reply_to, call.api_version)
        self._rebalance_and_try_complete(group)

    @staticmethod
    def _join_result(
        group: _Group,
        member: _Member,
        members: List["JoinGroupResponse_JoinGroupResponseMember"],
        version: int,
    ) -> JoinGroupResponse:
        """A successful JoinGroup answer; the protocol type is a field from v7."""
        return JoinGroupResponse(
            error_code=_C.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type if version >= 7 else None,
            protocol_name=group.protocol,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def _rebalance_and_try_complete(self, group: _Group) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    def _prepare_rebalance(self, group: _Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The assignment being synced is obsolete: parked followers learn so and rejoin.
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(group, member, _C.REBALANCE_IN_PROGRESS)
        group.transition(CoordinatorEvent.REBALANCE_NEEDED)
        self._schedule_join_deadline(group)

    def _schedule_join_deadline(self, group: _Group) -> None:
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.join_deadline_ms = self._now() + timeout

    def _try_complete_join(self, group: _Group) -> None:
        # A deadline already reached (a rebalance timeout of 0, e.g. when only a pending member is left)
        # completes the phase now rather than at the next call.
        overdue = group.join_deadline_ms is not None and group.join_deadline_ms <= self._now()
        if group.state is GroupState.PREPARING_REBALANCE and (group.all_rejoined() or overdue):
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        for member in [m for m in group.members.values() if m.parked_join is None and m.group_instance_id is None]:
            group.remove(member.member_id)  # a dynamic member that did not rejoin in time
        joined = [m for m in group.members.values() if m.parked_join is not None]
        if group.members and not joined:
            # Only absent static members are left: wait another rebalance timeout for their sessions to end.
            self._schedule_join_deadline(group)
            return
        group.join_deadline_ms = None
        group.generation_id += 1
        if not group.members:
            group.protocol = ""
            group.transition(CoordinatorEvent.JOIN_COMPLETED_EMPTY)
            return
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.parked_join is None:
            group.leader_id = joined[0].member_id
        group.protocol = group.select_protocol()
        group.transition(CoordinatorEvent.JOIN_COMPLETED)
        leader_view = group.member_metadata()
        for member in joined:
            parked, member.parked_join = member.parked_join, None
            assert parked is not None
            members = leader_view if member.member_id == group.leader_id else []
            self._reply(parked.reply_to, self._join_result(group, member, members, parked.api_version))
            self._refresh_session(member)

    def _answer_join_error(self, member: _Member, code: ErrorCode) -> None:
        if member.parked_join is not None:
            parked, member.parked_join = member.parked_join, None
            self._reply(parked.reply_to, _join_error(code, member.member_id, parked.api_version))

    # ---------------------------------------------------------------- SyncGroup

    def _apply_sync(self, call: _Call, assignments: Dict[str, bytes]) -> None:
        group = self._groups[call.group_id]
        member = group.members[call.member_id]
        self._refresh_session(member)
        if call.handling is Handling.SEND_ASSIGNMENT:
            self._reply(call.reply_to, self._sync_result(group, member.assignment, call.api_version))
            return
        member.parked_sync = _Parked(call.reply_to, call.api_version)
        if member.member_id == group.leader_id:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")  # missing members get nothing
            group.transition(CoordinatorEvent.ASSIGNMENT_STORED)
            for other in group.members.values():
                if self._answer_sync(group, other, _C.NONE):
                    self._refresh_session(other)

    @staticmethod
    def _sync_result(group: _Group, assignment: bytes, version: int) -> SyncGroupResponse:
        """A successful SyncGroup answer; the protocol type and name are fields from v5."""
        modern = version >= 5
        return SyncGroupResponse(
            error_code=_C.NONE,
            protocol_type=group.protocol_type if modern else None,
            protocol_name=group.protocol if modern else None,
            assignment=assignment,
        )

    def _answer_sync(self, group: _Group, member: _Member, code: ErrorCode) -> bool:
        """Answer the member's parked SyncGroup, if any (an error carries no assignment)."""
        if member.parked_sync is None:
            return False
        parked, member.parked_sync = member.parked_sync, None
        if code == _C.NONE:
            self._reply(parked.reply_to, self._sync_result(group, member.assignment, parked.api_version))
        else:
            self._reply(parked.reply_to, SyncGroupResponse(error_code=code, assignment=b""))
        return True

    # ---------------------------------------------------------------- Heartbeat, LeaveGroup, sessions

    def _apply_heartbeat(self, call: _Call) -> None:
        self._refresh_session(self._groups[call.group_id].members[call.member_id])
        rebalancing = call.handling is Handling.REFRESH_SESSION_REBALANCING
        self._reply(call.reply_to, HeartbeatResponse(error_code=_C.REBALANCE_IN_PROGRESS if rebalancing else _C.NONE))

    def _leave(self, reply_to: object, request: LeaveGroupRequest, version: int) -> None:
        """LeaveGroup: one member (v0-v2) or a batch of members by id and/or instance id (v3+)."""
        if version >= 3:
            identities = [(m.member_id, m.group_instance_id) for m in request.members]
        else:
            identities = [(request.member_id, None)]
        call = _Call(LeaveGroupRequest, reply_to, request.group_id, api_version=version)
        top = next((c.error_code for c in _COMMON if not self._passes(c, call, None)), None)
        results: List[ErrorCode] = []
        if top is None:
            group = self._groups.get(request.group_id)
            results = [self._leave_one(group, member_id, instance) for member_id, instance in identities]
        if version < 3:
            code = top if top is not None else results[0]
            self._reply(reply_to, LeaveGroupResponse(error_code=code))
            return
        Member = LeaveGroupResponse.MemberResponse
        members = [
            Member(member_id=member_id, group_instance_id=instance, error_code=code)
            for (member_id, instance), code in zip(identities, results)
        ]
        self._reply(reply_to, LeaveGroupResponse(error_code=top if top is not None else _C.NONE, members=members))

    def _leave_one(self, group: Optional[_Group], member_id: str, instance: Optional[str]) -> ErrorCode:
        if group is None:
            return _C.UNKNOWN_MEMBER_ID
        if member_id == "":  # an administrator removing a static member by its instance id
            member_id = group.static_members.get(instance or "", "")
            if not member_id:
                return _C.UNKNOWN_MEMBER_ID
        elif member_id in group.pending:
            del group.pending[member_id]
            self._try_complete_join(group)
            return _C.NONE
        call = _Call(LeaveGroupRequest, None, group.group_id, member_id, group_instance_id=instance)
        for check in _MEMBER:
            if not self._passes(check, call, group):
                return check.error_code
        self._remove_member(group, group.members[member_id])
        return _C.NONE

    def _refresh_session(self, member: _Member) -> None:
        member.session_deadline_ms = self._now() + member.session_timeout_ms

    def _remove_member(self, group: _Group, member: _Member) -> None:
        """A member left or expired: a parked JoinGroup is answered UNKNOWN_MEMBER_ID, then rebalance."""
        self._answer_join_error(member, _C.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    def _expire_session(self, group: _Group, member: _Member) -> None:
        member.session_deadline_ms = None
        if member.parked_join is None and member.parked_sync is None:
            self._remove_member(group, member)

    # ---------------------------------------------------------------- timers

    def _timers(self) -> List[Tuple[int, int, str, str]]:
        """Running timers as (deadline, kind, group id, member id): join phases, sessions, pending members."""
        timers = []
        for group in self._groups.values():
            if group.join_deadline_ms is not None:
                timers.append((group.join_deadline_ms, 0, group.group_id, ""))
            for member in group.members.values():
                if member.session_deadline_ms is not None:
                    timers.append((member.session_deadline_ms, 1, group.group_id, member.member_id))
            for member_id, deadline in group.pending.items():
                timers.append((deadline, 2, group.group_id, member_id))
        return timers

    def _advance(self, now_ms: int) -> None:
        if self._now_ms is not None and now_ms < self._now_ms:
            raise LocalProtocolError(f"clock went backwards: {now_ms} < {self._now_ms}")
        while True:
            due = [timer for timer in self._timers() if timer[0] <= now_ms]
            if not due:
                break
            deadline, kind, group_id, member_id = min(due)
            self._now_ms = deadline  # a timer acts at its own deadline, however late tick comes
            group = self._groups[group_id]
            if kind == 0:
                self._complete_join(group)
            elif kind == 1:
                self._expire_session(group, group.members[member_id])
            else:
                del group.pending[member_id]
                self._try_complete_join(group)
        self._now_ms = now_ms
        self._offsets.expire(now_ms)

    # ---------------------------------------------------------------- offsets

    def _commit(self, reply_to: object, request: OffsetCommitRequest, version: int) -> None:
        instance = request.group_instance_id if version >= 7 else None
        call = _Call(
            OffsetCommitRequest,
            reply_to,
            request.group_id,
            request.member_id,
            request.generation_id_or_member_epoch,
            version,
            group_instance_id=instance,
        )
        # v2-v4 carry a retention time; v1's partitions carry a commit timestamp.
        retention_ms = request.retention_time_ms if 2 <= version <= 4 else -1
        offsets = [(t.name, p) for t in request.topics for p in t.partitions]

        def answer(code: Optional[ErrorCode]) -> None:
            Topic = OffsetCommitResponse.OffsetCommitResponseTopic
            Partition = Topic.OffsetCommitResponsePartition
            by_topic: Dict[str, List["OffsetCommitResponse_OffsetCommitResponsePartition"]] = {}
            for topic, p in offsets:
                if code is None:
                    stored = self._offsets.commit(
                        request.group_id,
                        (topic, p.partition_index),
                        p.committed_offset,
                        p.committed_metadata,
                        retention_ms=retention_ms,
                        now_ms=self._now(),
                        leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                        commit_timestamp_ms=p.commit_timestamp if version == 1 else -1,
                    )
                else:
                    stored = code
                by_topic.setdefault(topic, []).append(Partition(partition_index=p.partition_index, error_code=stored))
            topics = [Topic(name=t, partitions=ps) for t, ps in by_topic.items()]
            self._reply(reply_to, OffsetCommitResponse(topics=topics))

        def store() -> None:
            group = self._groups.get(request.group_id)
            if group is None:  # a simple commit creates the group
                group = self._groups[request.group_id] = _Group(request.group_id, "")
            if call.handling is Handling.STORE_OFFSETS_REFRESH_SESSION:
                self._refresh_session(group.members[request.member_id])
            answer(None)

        other = self.other_groups
        if other is not None and other.owns(request.group_id):
            answer(
                other.offset_commit_error(
                    request.group_id, request.member_id, request.generation_id_or_member_epoch, version
                )
            )
            return
        self._run(call, store, answer)

    def _fetch(self, reply_to: object, request: OffsetFetchRequest, version: int) -> None:
        """OffsetFetch: one group (v1-v7) or many (v8+); null topics (v2+) or none (v1) mean all."""
        if version >= 8:
            Group = OffsetFetchResponse.OffsetFetchResponseGroup
            T8 = Group.OffsetFetchResponseTopics
            P8 = T8.OffsetFetchResponsePartitions
            groups = []
            for wanted_group in request.groups:
                wanted = (
                    None
                    if wanted_group.topics is None
                    else [(t.name, i) for t in wanted_group.topics for i in t.partition_indexes]
                )
                code, found = self._fetch_group(
                    wanted_group.group_id,
                    wanted,
                    wanted_group.member_id if version >= 9 else None,
                    wanted_group.member_epoch if version >= 9 else -1,
                )
                by_topic: Dict[str, List[Any]] = {}
                for (topic, partition), (offset, epoch, metadata, pcode) in found.items():
                    by_topic.setdefault(topic, []).append(
                        P8(
                            partition_index=partition,
                            committed_offset=offset,
                            committed_leader_epoch=epoch,
                            metadata=metadata,
                            error_code=pcode,
                        )
                    )
                # A group-level error (a member's unknown id or stale epoch) lists no topics, as Kafka.
                groups.append(
                    Group(
                        group_id=wanted_group.group_id,
                        error_code=code,
                        topics=[] if code else [T8(name=t, partitions=ps) for t, ps in by_topic.items()],
                    )
                )
            self._reply(reply_to, OffsetFetchResponse(groups=groups))
            return
        topics = request.topics
        wanted = (
            None
            if topics is None or (version < 2 and not topics)
            else [(t.name, i) for t in topics for i in t.partition_indexes]
        )
        code, found = self._fetch_group(request.group_id, wanted)
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        by_topic = {}
        for (topic, partition), (offset, epoch, metadata, pcode) in found.items():
            if version < 2 and code != _C.NONE:
                pcode = code  # before v2 a group-level error is told partition by partition
            by_topic.setdefault(topic, []).append(
                Partition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    metadata=metadata,
                    error_code=pcode,
                )
            )
        self._reply(
            reply_to,
            OffsetFetchResponse(
                topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
                error_code=code if version >= 2 else _C.NONE,
            ),
        )

    def _fetch_group(
        self,
        group_id: str,
        wanted: Optional[List[Tuple[str, int]]],
        member_id: Optional[str] = None,
        member_epoch: int = -1,
    ) -> Tuple[ErrorCode, Dict[Tuple[str, int], Tuple[int, int, Optional[str], ErrorCode]]]:
        """(group error, (topic, partition) → (offset, leader epoch, metadata, error)); −1/"" when absent.
        ``member_id``/``member_epoch`` (v9+) are checked only for a group of :attr:`other_groups`."""
        call = _Call(OffsetFetchRequest, None, group_id)
        error = next((c.error_code for c in CHECKS[OffsetFetchRequest] if not self._passes(c, call, None)), None)
        other = self.other_groups
        if error is None and other is not None and other.owns(group_id):
            error = other.offset_fetch_error(group_id, member_id, member_epoch)
        stored = self._offsets.partitions(group_id)
        partitions = list(stored) if wanted is None else wanted
        if error is not None:
            return error, {tp: (-1, -1, "", error) for tp in (wanted or [])}
        found = {}
        for tp in partitions:
            entry = stored.get(tp)
            found[tp] = (
                (entry.offset, entry.leader_epoch, entry.metadata, _C.NONE)
                if entry is not None
                else (-1, -1, "", _C.NONE)
            )
        return _C.NONE, found

    def _delete_offsets(self, reply_to: object, request: OffsetDeleteRequest) -> None:
        """OffsetDelete: allowed in an Empty group, and for topics a consumer group does not subscribe to."""
        call = _Call(OffsetDeleteRequest, reply_to, request.group_id)
        group = self._groups.get(request.group_id)
        failed = next((c for c in CHECKS[OffsetDeleteRequest] if not self._passes(c, call, group)), None)
        if failed is not None:
            code = _C.GROUP_ID_NOT_FOUND if failed is Check.GROUP_KNOWN else failed.error_code
            self._reply(reply_to, OffsetDeleteResponse(error_code=code))
            return
        assert group is not None
        subscribed = set() if group.state is GroupState.EMPTY else group.subscribed_topics()
        if subscribed is None:
            self._reply(reply_to, OffsetDeleteResponse(error_code=_C.NON_EMPTY_GROUP))
            return
        Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
        Partition = Topic.OffsetDeleteResponsePartition
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                if topic.name in subscribed:
                    code = _C.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    self._offsets.delete(group.group_id, (topic.name, p.partition_index))
                    code = _C.NONE
                parts.append(Partition(partition_index=p.partition_index, error_code=code))
            topics.append(Topic(name=topic.name, partitions=parts))
        self._reply(reply_to, OffsetDeleteResponse(error_code=_C.NONE, topics=topics))

    # ---------------------------------------------------------------- DescribeGroups, ListGroups, DeleteGroups

    def _describe(self, group_id: str, include_operations: bool) -> "DescribeGroupsResponse_DescribedGroup":
        Group = DescribeGroupsResponse.DescribedGroup
        operations = GROUP_AUTHORIZED_OPERATIONS if include_operations else _OPERATIONS_NOT_REQUESTED
        call = _Call(DescribeGroupsRequest, None, group_id)
        group = self._groups.get(group_id)
        verdict = self._check(call)
        if isinstance(verdict, ErrorCode):
            return Group(error_code=verdict, group_id=group_id, authorized_operations=operations)
        if group is None or verdict is Handling.DESCRIBE_AS_DEAD:
            return Group(
                error_code=_C.NONE,
                group_id=group_id,
                group_state=GroupState.DEAD.value,
                authorized_operations=operations,
            )
        full = verdict is Handling.DESCRIBE_IN_FULL
        members = [
            Group.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol) if full else b"",
                member_assignment=m.assignment if full else b"",
            )
            for m in group.members.values()
        ]
        return Group(
            error_code=_C.NONE,
            group_id=group_id,
            group_state=group.state.value,
            protocol_type=group.protocol_type,
            protocol_data=group.protocol if full else "",
            members=members,
            authorized_operations=operations,
        )

    def _list_groups(self, states: Sequence[str], types: Sequence[str], version: int) -> ListGroupsResponse:
        """Groups held, filtered by state and type names (case-insensitive; an empty filter takes all)."""
        if not self.active:
            return ListGroupsResponse(error_code=_C.GROUP_COORDINATOR_NOT_AVAILABLE)
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = [
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state.value if version >= 4 else "",
                group_type=_GROUP_TYPE if version >= 5 else "",
            )
            for g in self._groups.values()
            if (not wanted_states or g.state.value.lower() in wanted_states)
            and (not wanted_types or _GROUP_TYPE in wanted_types)
        ]
        if self.other_groups is not None:
            # Consumer groups (type "consumer", protocol type "consumer"), as a Kafka 4 broker lists them.
            listed.extend(
                ListGroupsResponse.ListedGroup(
                    group_id=group_id,
                    protocol_type="consumer",
                    group_state=state if version >= 4 else "",
                    group_type="consumer" if version >= 5 else "",
                )
                for group_id, state in self.other_groups.listing()
                if (not wanted_states or state.lower() in wanted_states)
                and (not wanted_types or "consumer" in wanted_types)
            )
        loading = any(self._is_loading(group_id) for group_id in self._groups)
        return ListGroupsResponse(error_code=_C.GROUP_LOAD_IN_PROGRESS if loading else _C.NONE, groups=listed)

    def _delete_group(self, group_id: str) -> "DeleteGroupsResponse_DeletableGroupResult":
        Result = DeleteGroupsResponse.DeletableGroupResult
        other = self.other_groups
        if other is not None and other.owns(group_id):
            # A consumer group is deleted only when it has no members, as Kafka's consumer groups.
            if other.has_members(group_id):
                return Result(group_id=group_id, error_code=_C.NON_EMPTY_GROUP)
            other.release_if_empty(group_id)
            self._offsets.drop_group(group_id)
            return Result(group_id=group_id, error_code=_C.NONE)
        verdict = self._check(_Call(DeleteGroupsRequest, None, group_id))
        if isinstance(verdict, ErrorCode):
            return Result(group_id=group_id, error_code=verdict)
        group = self._groups.pop(group_id)
        group.transition(CoordinatorEvent.REMOVED)
        self._offsets.drop_group(group_id)
        return Result(group_id=group_id, error_code=_C.NONE)


def _instance_known(call: _Call, group: Optional[_Group]) -> bool:
    instance = call.group_instance_id
    return instance is None or (group is not None and instance in group.static_members)


def _instance_not_fenced(call: _Call, group: Optional[_Group]) -> bool:
    instance = call.group_instance_id
    return instance is None or group is None or group.static_members.get(instance) == call.member_id


def _sync_protocol_matches(call: _Call, group: Optional[_Group]) -> bool:
    return group is not None and (
        (call.protocol_type is None or call.protocol_type == group.protocol_type)
        and (call.protocol_name is None or call.protocol_name == group.protocol)
    )


def _session_timeout_in_range(coordinator: GroupCoordinator, call: _Call) -> bool:
    config = coordinator.config
    return config.min_session_timeout_ms <= call.session_timeout_ms <= config.max_session_timeout_ms


#: Check → its test (coordinator, call, group or None) → whether it holds; built once.
_CHECK_TESTS: Mapping[Check, Callable[[GroupCoordinator, _Call, Optional[_Group]], bool]] = {
    Check.COORDINATOR_ACTIVE: lambda c, call, group: c.active,
    Check.GROUP_ID_VALID: lambda c, call, group: bool(call.group_id),
    Check.GROUP_OWNED: lambda c, call, group: c._owns_group(call.group_id),
    Check.GROUP_LOADED: lambda c, call, group: not c._is_loading(call.group_id),
    Check.GROUP_LOADED_OR_BLIND_OK: lambda c, call, group: not c._is_loading(call.group_id),
    Check.SESSION_TIMEOUT_IN_RANGE: lambda c, call, group: _session_timeout_in_range(c, call),
    Check.GROUP_KNOWN_OR_NEW_MEMBER: lambda c, call, group: group is not None or call.member_id == "",
    Check.GROUP_KNOWN: lambda c, call, group: group is not None,
    Check.GROUP_HAS_ROOM: lambda c, call, group: c._has_room(call, group),
    Check.GROUP_KNOWN_OR_NO_GENERATION: lambda c, call, group: group is not None or call.generation_id < 0,
    Check.PROTOCOL_CONSISTENT: lambda c, call, group: c._protocol_consistent(call, group),
    Check.INSTANCE_KNOWN: lambda c, call, group: _instance_known(call, group),
    Check.INSTANCE_NOT_FENCED: lambda c, call, group: _instance_not_fenced(call, group),
    Check.MEMBER_KNOWN: lambda c, call, group: group is not None and call.member_id in group.members,
    Check.GENERATION_CURRENT: lambda c, call, group: group is not None and call.generation_id == group.generation_id,
    Check.SYNC_PROTOCOL_MATCHES: lambda c, call, group: _sync_protocol_matches(call, group),
}
