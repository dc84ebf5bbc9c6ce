"""The 0.9 group coordinator (broker side) as a sans-I/O state machine.

Theory of operation
===================

A :class:`GroupCoordinator` manages many consumer groups the way a 0.9.0.0 broker does
(docs/protocol-notes.md, "The group coordinator").  It never touches sockets, threads or a clock: every call takes ``now_ms`` and every
timer is a deadline the caller learns from :meth:`GroupCoordinator.next_deadline_ms` and honours by
calling :meth:`GroupCoordinator.tick`.

**Calls and replies.**  :meth:`GroupCoordinator.handle` takes a decoded request message (the generated
classes of :mod:`kproto.messages`, in a version of :data:`SERVED_VERSIONS`) with an opaque ``reply_to``
token and returns a list of :class:`Reply` objects, each carrying a response message.  JoinGroup and SyncGroup answers may be *parked*: the call returns without a
reply for its own token, and the reply appears later in the list returned by another call (another
member's JoinGroup, the leader's SyncGroup, a LeaveGroup) or by :meth:`GroupCoordinator.tick`.  Every
other request is answered at once, but may still release parked replies of other callers.  The caller
sends each reply to whoever its token names.  A member that re-sends JoinGroup (or SyncGroup) while an
earlier one is parked replaces the earlier token; as in 0.9.0 the replaced one is never answered.

**Group states** are the four a 0.9 broker reports.  A brand-new group is ``Stable`` with generation 0 and no
members, and leaves that state with its first member.  Group transitions are the :data:`TRANSITIONS`
table (state × event → state); nothing else changes ``GroupState``.  A group reaching ``Dead`` is
removed at once, so later requests see an unknown group; its committed offsets stay (0.9.0 keys them
by group, topic and partition, apart from membership).

**Request handling** is two tables.  :data:`CHECKS` lists, per API, the checks that run in 0.9.0's
order; the first that fails answers with its error code.  One of them is ``Check.STATE``, which
consults :data:`RESPONSES` (request kind × group state → an error code, or the :class:`Handling` to
apply once the remaining checks pass).

**Join phase.**  A rebalance starts (``PreparingRebalance``) when a member joins, when a known member
joins with changed metadata (or, in Stable, when the leader re-joins), and when a member leaves or
expires.  Parked SyncGroups of the abandoned ``AwaitingSync`` phase are answered
REBALANCE_IN_PROGRESS.  The phase completes as soon as every known member has a parked JoinGroup, or
at the rebalance deadline (the largest session timeout among the members), when members that did not
rejoin are removed.  Completion increments the generation, selects the protocol by vote, moves to
``AwaitingSync`` and answers every parked JoinGroup; only the leader's answer lists the members.

**Leader and protocol.**  The first member of a group is its leader and stays leader across
generations; when it goes, the oldest remaining member takes over (0.9.0 picked an arbitrary one).
The protocol is the one most members list first among the protocols every member supports; a tie goes
to the candidate the leader prefers (0.9.0 broke ties arbitrarily).

**Sync phase.**  SyncGroups are parked in ``AwaitingSync``.  The leader's carries the assignment:
members it leaves out get empty bytes, the group becomes ``Stable`` and every parked SyncGroup is
answered with its member's assignment.  Storing the assignment always succeeds here (there is no log).

**Sessions.**  Each member has a session deadline, ``last refresh + session timeout``.  Refreshes are
an accepted Heartbeat, a SyncGroup in ``AwaitingSync`` or ``Stable``, join completion and assignment
propagation.  At the deadline a member with a parked JoinGroup or SyncGroup is kept (its timer
stops until the next refresh); any other member is removed as if it had left.  Timers fire in
deadline order and act at their deadline's time, so the outcome does not depend on how late
``tick`` is called.  Overdue timers also fire at the start of every call, before the request.

**Offsets** live in an :class:`~kproto.group.offset_store.OffsetStore`, per group, until their
retention passes (another deadline).  A commit to an unknown group is a "simple" commit outside group
management when its generation is negative, and ILLEGAL_GENERATION otherwise.  OffsetFetch answers
whatever is stored, in any group state; an empty request means every stored offset (0.9.0).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import (
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from kproto import ErrorCode
from kproto.errors import ProtocolError, UnsupportedVersionError
from kproto.group.offset_store import OffsetStore
from kproto.message_base import Message
from kproto.messages import (
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
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "GroupState",
    "GroupEvent",
    "TRANSITIONS",
    "RequestKind",
    "Handling",
    "RESPONSES",
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


# --------------------------------------------------------------------------------------------------
# The tables


class GroupState(str, enum.Enum):
    """A group's state; the values are the names DescribeGroups reports (a ``str``, so they compare as such)."""

    PREPARING_REBALANCE = "PreparingRebalance"
    AWAITING_SYNC = "AwaitingSync"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(enum.Enum):
    """What moves a group from one state to another."""

    REBALANCE_NEEDED = "a member joined, changed its metadata, left or expired"
    JOIN_COMPLETED = "every remaining member rejoined (or the rest were evicted)"
    JOIN_COMPLETED_EMPTY = "the join phase ended with no member left"
    ASSIGNMENT_STORED = "the leader's SyncGroup assignment was stored"
    UNLOADED = "the coordinator gave the group up"


_S = GroupState
_E = GroupEvent

#: state × event → next state.  Missing pairs are illegal; these are 0.9.0's ``validPreviousStates``.
TRANSITIONS: Mapping[Tuple[GroupState, GroupEvent], GroupState] = {
    (_S.STABLE, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.AWAITING_SYNC, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED): _S.AWAITING_SYNC,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED_EMPTY): _S.DEAD,
    (_S.AWAITING_SYNC, _E.ASSIGNMENT_STORED): _S.STABLE,
    (_S.STABLE, _E.UNLOADED): _S.DEAD,
    (_S.PREPARING_REBALANCE, _E.UNLOADED): _S.DEAD,
    (_S.AWAITING_SYNC, _E.UNLOADED): _S.DEAD,
}


class RequestKind(enum.Enum):
    """A request as the per-state table sees it (JoinGroup splits on whether the member is new)."""

    JOIN_NEW_MEMBER = "JoinGroup with member_id \"\""
    JOIN_KNOWN_MEMBER = "JoinGroup from a known member"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"
    OFFSET_COMMIT = "OffsetCommit"
    DESCRIBE = "DescribeGroups (one group of it)"


class Handling(enum.Enum):
    """What the coordinator does with a request that passed every check."""

    ADD_MEMBER = "add the member, rebalance, park the JoinGroup"
    UPDATE_MEMBER = "replace the member's protocols, park the JoinGroup"
    UPDATE_IF_CHANGED = "answer now if the protocols are unchanged, else update, rebalance and park"
    UPDATE_IF_LEADER_OR_CHANGED = "answer a follower with unchanged protocols now, else update, rebalance, park"
    PARK_SYNC = "park the SyncGroup; the leader's assignment completes the phase"
    SEND_ASSIGNMENT = "answer with the member's current assignment"
    REFRESH_SESSION = "refresh the member's session"
    REMOVE_MEMBER = "remove the member and rebalance"
    STORE_OFFSETS = "store the offsets"
    DESCRIBE_IN_FULL = "state, protocol, members with their metadata and assignments"
    DESCRIBE_MEMBERS_ONLY = "state and members; no protocol, empty metadata and assignments"
    DESCRIBE_AS_DEAD = "state Dead, nothing else"


_K = RequestKind
_H = Handling
_C = ErrorCode

#: request kind × group state → an error code to answer with, or the handling to apply.
RESPONSES: Mapping[Tuple[RequestKind, GroupState], Union[ErrorCode, Handling]] = {
    (_K.JOIN_NEW_MEMBER, _S.PREPARING_REBALANCE): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.AWAITING_SYNC): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.STABLE): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.JOIN_KNOWN_MEMBER, _S.PREPARING_REBALANCE): _H.UPDATE_MEMBER,
    (_K.JOIN_KNOWN_MEMBER, _S.AWAITING_SYNC): _H.UPDATE_IF_CHANGED,
    (_K.JOIN_KNOWN_MEMBER, _S.STABLE): _H.UPDATE_IF_LEADER_OR_CHANGED,
    (_K.JOIN_KNOWN_MEMBER, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.SYNC, _S.PREPARING_REBALANCE): _C.REBALANCE_IN_PROGRESS,
    (_K.SYNC, _S.AWAITING_SYNC): _H.PARK_SYNC,
    (_K.SYNC, _S.STABLE): _H.SEND_ASSIGNMENT,
    (_K.SYNC, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.HEARTBEAT, _S.PREPARING_REBALANCE): _C.REBALANCE_IN_PROGRESS,
    (_K.HEARTBEAT, _S.AWAITING_SYNC): _C.REBALANCE_IN_PROGRESS,
    (_K.HEARTBEAT, _S.STABLE): _H.REFRESH_SESSION,
    (_K.HEARTBEAT, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.LEAVE, _S.PREPARING_REBALANCE): _H.REMOVE_MEMBER,
    (_K.LEAVE, _S.AWAITING_SYNC): _H.REMOVE_MEMBER,
    (_K.LEAVE, _S.STABLE): _H.REMOVE_MEMBER,
    (_K.LEAVE, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    # During the join phase the previous generation is still the current one, so commits go through.
    (_K.OFFSET_COMMIT, _S.PREPARING_REBALANCE): _H.STORE_OFFSETS,
    (_K.OFFSET_COMMIT, _S.AWAITING_SYNC): _C.REBALANCE_IN_PROGRESS,
    (_K.OFFSET_COMMIT, _S.STABLE): _H.STORE_OFFSETS,
    (_K.OFFSET_COMMIT, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.DESCRIBE, _S.PREPARING_REBALANCE): _H.DESCRIBE_MEMBERS_ONLY,
    (_K.DESCRIBE, _S.AWAITING_SYNC): _H.DESCRIBE_MEMBERS_ONLY,
    (_K.DESCRIBE, _S.STABLE): _H.DESCRIBE_IN_FULL,
    (_K.DESCRIBE, _S.DEAD): _H.DESCRIBE_AS_DEAD,
}


class Check(enum.Enum):
    """One pre-check a 0.9.0 coordinator runs (the value describes what must hold); :data:`CHECK_ERRORS` gives its code."""

    COORDINATOR_ACTIVE = "the coordinator is running"
    GROUP_ID_VALID = "group_id is not empty"
    GROUP_OWNED = "this broker coordinates the group"
    GROUP_LOADED = "the group's metadata is loaded"
    GROUP_LOADED_OR_BLIND_OK = "the group's metadata is loaded (else Heartbeat answers NONE blindly)"
    SESSION_TIMEOUT_IN_RANGE = "min session timeout <= session_timeout <= max"
    GROUP_KNOWN_OR_NEW_MEMBER = "the group exists, or the member is new"
    GROUP_KNOWN = "the group exists"
    GROUP_KNOWN_OR_SIMPLE_COMMIT = "the group exists (else only generation < 0 commits are taken)"
    PROTOCOL_CONSISTENT = "same protocol_type, and a protocol every member supports"
    NEW_OR_KNOWN_MEMBER = "member_id is empty or belongs to the group"
    MEMBER_KNOWN = "member_id belongs to the group"
    GENERATION_CURRENT = "the generation is the group's current one"
    STATE = "look the request up in RESPONSES"

    @property
    def error_code(self) -> ErrorCode:
        """The code answered when this check fails."""
        return CHECK_ERRORS[self]


_X = Check

#: check → the code answered when it fails (STATE answers whatever RESPONSES says).
CHECK_ERRORS: Mapping[Check, ErrorCode] = {
    _X.COORDINATOR_ACTIVE: _C.GROUP_COORDINATOR_NOT_AVAILABLE,
    _X.GROUP_ID_VALID: _C.INVALID_GROUP_ID,
    _X.GROUP_OWNED: _C.NOT_COORDINATOR_FOR_GROUP,
    _X.GROUP_LOADED: _C.GROUP_LOAD_IN_PROGRESS,
    _X.GROUP_LOADED_OR_BLIND_OK: _C.NONE,
    _X.SESSION_TIMEOUT_IN_RANGE: _C.INVALID_SESSION_TIMEOUT,
    _X.GROUP_KNOWN_OR_NEW_MEMBER: _C.UNKNOWN_MEMBER_ID,
    _X.GROUP_KNOWN: _C.UNKNOWN_MEMBER_ID,
    _X.GROUP_KNOWN_OR_SIMPLE_COMMIT: _C.ILLEGAL_GENERATION,
    _X.PROTOCOL_CONSISTENT: _C.INCONSISTENT_GROUP_PROTOCOL,
    _X.NEW_OR_KNOWN_MEMBER: _C.UNKNOWN_MEMBER_ID,
    _X.MEMBER_KNOWN: _C.UNKNOWN_MEMBER_ID,
    _X.GENERATION_CURRENT: _C.ILLEGAL_GENERATION,
    _X.STATE: _C.UNKNOWN,
}
_COMMON = (_X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_LOADED)

#: API → its checks in 0.9.0's order.
CHECKS: Mapping[str, Tuple[Check, ...]] = {
    "join_group": (
        _X.COORDINATOR_ACTIVE, _X.GROUP_ID_VALID, _X.GROUP_OWNED, _X.GROUP_LOADED,
        _X.SESSION_TIMEOUT_IN_RANGE, _X.GROUP_KNOWN_OR_NEW_MEMBER, _X.PROTOCOL_CONSISTENT,
        _X.NEW_OR_KNOWN_MEMBER, _X.STATE,
    ),
    "sync_group": (
        _X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_KNOWN, _X.MEMBER_KNOWN,
        _X.GENERATION_CURRENT, _X.STATE,
    ),
    "heartbeat": (
        _X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_LOADED_OR_BLIND_OK, _X.GROUP_KNOWN,
        _X.STATE, _X.MEMBER_KNOWN, _X.GENERATION_CURRENT,
    ),
    "leave_group": _COMMON + (_X.GROUP_KNOWN, _X.STATE, _X.MEMBER_KNOWN),
    "commit_offsets": _COMMON + (
        _X.GROUP_KNOWN_OR_SIMPLE_COMMIT, _X.STATE, _X.MEMBER_KNOWN, _X.GENERATION_CURRENT,
    ),
    "fetch_offsets": _COMMON,
    "describe_groups": _COMMON,
}

_API_KIND: Mapping[str, RequestKind] = {
    "describe_groups": _K.DESCRIBE,
    "sync_group": _K.SYNC,
    "heartbeat": _K.HEARTBEAT,
    "leave_group": _K.LEAVE,
    "commit_offsets": _K.OFFSET_COMMIT,
}

#: Request class → the (lowest, highest) version the coordinator answers: what a 0.9.0 broker's
#: coordinator served.  OffsetCommit v0 and OffsetFetch v0 are not here: 0.9 kept those offsets in
#: ZooKeeper, outside group management (the mock broker answers them itself).
SERVED_VERSIONS: Mapping[type, Tuple[int, int]] = {
    JoinGroupRequest: (0, 0),
    SyncGroupRequest: (0, 0),
    HeartbeatRequest: (0, 0),
    LeaveGroupRequest: (0, 0),
    OffsetCommitRequest: (1, 2),
    OffsetFetchRequest: (1, 1),
    DescribeGroupsRequest: (0, 0),
    ListGroupsRequest: (0, 0),
}


# --------------------------------------------------------------------------------------------------
# Public value types


@dataclass(frozen=True)
class CoordinatorConfig:
    """Broker settings the coordinator obeys (0.9.0 defaults)."""

    #: ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms``
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 30000
    #: ``offset.metadata.max.bytes`` (compared with the metadata's length in UTF-16 units, as Java does)
    offset_metadata_max_bytes: int = 4096
    #: ``offsets.retention.minutes`` = 1440, in milliseconds
    offsets_retention_ms: int = 24 * 60 * 60 * 1000


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


# --------------------------------------------------------------------------------------------------
# Internal records


@dataclass
class _Parked:
    """A parked request's token (a wrapper, because ``None`` is a valid token)."""

    reply_to: object


@dataclass
class _Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    protocols: Tuple[Tuple[str, bytes], ...]
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
    state: GroupState = GroupState.STABLE
    generation_id: int = 0
    leader_id: Optional[str] = None
    protocol: str = ""
    members: Dict[str, _Member] = field(default_factory=dict)
    join_deadline_ms: Optional[int] = None

    def transition(self, event: GroupEvent) -> None:
        try:
            self.state = TRANSITIONS[(self.state, event)]
        except KeyError:
            raise ProtocolError(f"group {self.group_id!r}: no transition for {event.name} in {self.state.value}")

    def candidate_protocols(self) -> List[str]:
        """Protocols every member supports, in the leader's preference order."""
        names = self._preference_order()
        for member in self.members.values():
            supported = set(member.protocol_names())
            names = [name for name in names if name in supported]
        return names

    def _preference_order(self) -> List[str]:
        anchor = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        return anchor.protocol_names()

    def supports(self, protocol_names: Sequence[str]) -> bool:
        if not protocol_names:
            return False  # 0.9.0 accepted an empty list and failed later selecting a protocol
        if not self.members:
            return True
        return bool(set(protocol_names) & set(self.candidate_protocols()))

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes = {name: 0 for name in candidates}
        for member in self.members.values():
            votes[next(n for n in member.protocol_names() if n in votes)] += 1
        return max(candidates, key=lambda name: votes[name])  # max keeps the first of equals

    def remove(self, member_id: str) -> None:
        del self.members[member_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def all_rejoined(self) -> bool:
        return all(member.parked_join is not None for member in self.members.values())

    def member_metadata(self) -> List[JoinGroupResponse.JoinGroupResponseMember]:
        Member = JoinGroupResponse.JoinGroupResponseMember
        return [Member(member_id=m.member_id, metadata=m.metadata_for(self.protocol)) for m in self.members.values()]


@dataclass
class _Call:
    """One incoming request, with the fields the checks look at."""

    api: str
    reply_to: object
    group_id: str
    member_id: str = ""
    generation_id: int = -1
    session_timeout_ms: int = 0
    protocol_type: str = ""
    protocols: Tuple[Tuple[str, bytes], ...] = ()
    handling: Optional[Handling] = None


_Verdict = Union[ErrorCode, Handling, None]


def _join_error(code: ErrorCode, member_id: str) -> JoinGroupResponse:
    """A failed JoinGroup: no generation (0.9.0 answers 0 here, not the field's default −1), no leader."""
    return JoinGroupResponse(error_code=code, generation_id=0, member_id=member_id)


# --------------------------------------------------------------------------------------------------
# The coordinator


class GroupCoordinator:
    """The broker-side group coordinator for many groups; see the module docstring for the rules.

    ``member_id_suffix`` makes member ids (``client_id + "-" + suffix()``; a random UUID by default),
    ``owns_group`` says whether this broker coordinates a group (else NOT_COORDINATOR_FOR_GROUP), and
    ``is_loading`` whether its metadata is still loading (else GROUP_LOAD_IN_PROGRESS).
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

    # ---------------------------------------------------------------- requests

    def handle(
        self, reply_to: object, request: Message, api_version: int, *, client_id: str, client_host: str,
        now_ms: int,
    ) -> List[Reply]:
        """Take a decoded group request (a message of :mod:`kproto.messages`) sent in ``api_version``.

        Returns the replies this call releases: its own (unless parked) and parked ones of other callers,
        each a response message in the version its request was sent in.  ``client_id`` and
        ``client_host`` come from the request header and the connection; DescribeGroups reports them.
        Raises :class:`~kproto.errors.UnsupportedVersionError` for a request the coordinator does not
        speak (:data:`SERVED_VERSIONS`).
        """
        served = SERVED_VERSIONS.get(type(request))
        if served is None:
            raise UnsupportedVersionError(f"the group coordinator does not answer {type(request).__name__}")
        if not served[0] <= api_version <= served[1]:
            raise UnsupportedVersionError(
                f"the group coordinator answers {type(request).__name__} v{served[0]}-v{served[1]}, "
                f"not v{api_version}")
        self._advance(now_ms)
        if isinstance(request, JoinGroupRequest):
            call = _Call("join_group", reply_to, request.group_id, request.member_id,
                         session_timeout_ms=request.session_timeout_ms, protocol_type=request.protocol_type,
                         protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols))
            self._run(call, lambda: self._apply_join(call, client_id, client_host))
        elif isinstance(request, SyncGroupRequest):
            call = _Call("sync_group", reply_to, request.group_id, request.member_id, request.generation_id)
            assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
            self._run(call, lambda: self._apply_sync(call, assignments))
        elif isinstance(request, HeartbeatRequest):
            call = _Call("heartbeat", reply_to, request.group_id, request.member_id, request.generation_id)
            self._run(call, lambda: self._apply_heartbeat(call))
        elif isinstance(request, LeaveGroupRequest):
            call = _Call("leave_group", reply_to, request.group_id, request.member_id)
            self._run(call, lambda: self._apply_leave(call))
        elif isinstance(request, OffsetCommitRequest):
            call = _Call("commit_offsets", reply_to, request.group_id, request.member_id,
                         request.generation_id_or_member_epoch)
            offsets = {(t.name, p.partition_index): (p.committed_offset, p.committed_metadata)
                       for t in request.topics for p in t.partitions}
            retention_ms = request.retention_time_ms if api_version >= 2 else -1  # v1 has no retention field
            self._run(call, lambda: self._apply_commit(call, offsets, retention_ms, None),
                      lambda code: self._apply_commit(call, offsets, retention_ms, code))
        elif isinstance(request, OffsetFetchRequest):
            call = _Call("fetch_offsets", reply_to, request.group_id)
            wanted = [(t.name, i) for t in request.topics for i in t.partition_indexes]
            self._run(call, lambda: self._apply_fetch(call, wanted, None),
                      lambda code: self._apply_fetch(call, wanted, code))
        elif isinstance(request, DescribeGroupsRequest):
            described = [self._describe(group_id) for group_id in request.groups]
            self._reply(reply_to, DescribeGroupsResponse(groups=described))
        else:
            assert isinstance(request, ListGroupsRequest)
            self._reply(reply_to, self._list_groups())
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
        return self._take_replies()

    def unload_group(self, group_id: str, now_ms: int) -> List[Reply]:
        """Give a group up (its offsets partition moved away): Dead, parked requests answered 16."""
        self._advance(now_ms)
        group = self._groups.get(group_id)
        if group is not None:
            for member in group.members.values():
                self._answer_join_error(member, _C.NOT_COORDINATOR_FOR_GROUP)
                self._answer_sync(member, _C.NOT_COORDINATOR_FOR_GROUP)
            group.transition(_E.UNLOADED)
            del self._groups[group_id]
        self._offsets.drop_group(group_id)
        return self._take_replies()

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
                m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.protocols, m.assignment,
                m.parked_join is not None, m.parked_sync is not None, m.session_deadline_ms,
            )
            for m in group.members.values()
        )
        return GroupSnapshot(
            group.group_id, group.state, group.generation_id, group.protocol_type, group.protocol,
            group.leader_id or "", members, group.join_deadline_ms,
        )

    def committed(self, group_id: str) -> Dict[Tuple[str, int], Tuple[int, Optional[str]]]:
        """The offsets stored for a group: (topic, partition) → (offset, metadata)."""
        return {tp: (o.offset, o.metadata) for tp, o in self._offsets.partitions(group_id).items()}

    def commit_transactional(self, group_id: str, offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]],
                             now_ms: int) -> None:
        """Store the offsets a committed transaction carried (TxnOffsetCommit, checked when sent): no
        member or generation checks, as Kafka writes them when the commit marker lands."""
        for tp, (offset, metadata) in offsets.items():
            self._offsets.commit(group_id, tp, offset, metadata, retention_ms=-1, now_ms=now_ms)

    # ---------------------------------------------------------------- plumbing

    def _run(
        self, call: _Call, apply: Callable[[], None], on_error: Optional[Callable[[ErrorCode], None]] = None,
    ) -> None:
        """Run the checks, then apply the handling or answer the error."""
        verdict = self._check(call)
        if isinstance(verdict, ErrorCode):
            (on_error or (lambda code: self._answer_error(call, code)))(verdict)
        else:
            call.handling = verdict
            apply()

    def _list_groups(self) -> ListGroupsResponse:
        """Every group this coordinator holds (error 14 alongside the list while loading)."""
        if not self.active:
            return ListGroupsResponse(error_code=_C.GROUP_COORDINATOR_NOT_AVAILABLE)
        listed = [ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type)
                  for g in self._groups.values()]
        loading = any(self._is_loading(group_id) for group_id in self._groups)
        return ListGroupsResponse(error_code=_C.GROUP_LOAD_IN_PROGRESS if loading else _C.NONE, groups=listed)

    def _reply(self, reply_to: object, result: Message) -> None:
        self._replies.append(Reply(reply_to, result))

    def _take_replies(self) -> List[Reply]:
        replies, self._replies = self._replies, []
        return replies

    def _now(self) -> int:
        assert self._now_ms is not None
        return self._now_ms

    # ---------------------------------------------------------------- checks

    def _check(self, call: _Call) -> _Verdict:
        """Run the API's checks; an ErrorCode answers the call, a Handling (or None) proceeds."""
        handling: _Verdict = None
        for check in CHECKS[call.api]:
            verdict = self._run_check(check, call)
            if isinstance(verdict, ErrorCode):
                return verdict
            if isinstance(verdict, Handling):
                handling = verdict
                if check is not Check.STATE:
                    return handling  # a shortcut (simple commit): the remaining checks do not apply
        return handling

    def _run_check(self, check: Check, call: _Call) -> _Verdict:
        group = self._groups.get(call.group_id)
        if check is Check.STATE:
            return RESPONSES[(self._kind(call, group), group.state if group else GroupState.STABLE)]
        if check is Check.GROUP_KNOWN_OR_SIMPLE_COMMIT and group is None:
            return Handling.STORE_OFFSETS if call.generation_id < 0 else check.error_code
        failed = not self._passes(check, call, group)
        return check.error_code if failed else None

    def _passes(self, check: Check, call: _Call, group: Optional[_Group]) -> bool:
        member = group.members.get(call.member_id) if group else None
        cfg = self.config
        tests: Dict[Check, Callable[[], bool]] = {
            Check.COORDINATOR_ACTIVE: lambda: self.active,
            Check.GROUP_ID_VALID: lambda: bool(call.group_id),
            Check.GROUP_OWNED: lambda: self._owns_group(call.group_id),
            Check.GROUP_LOADED: lambda: not self._is_loading(call.group_id),
            Check.GROUP_LOADED_OR_BLIND_OK: lambda: not self._is_loading(call.group_id),
            Check.SESSION_TIMEOUT_IN_RANGE: lambda: (
                cfg.min_session_timeout_ms <= call.session_timeout_ms <= cfg.max_session_timeout_ms
            ),
            Check.GROUP_KNOWN_OR_NEW_MEMBER: lambda: group is not None or call.member_id == "",
            Check.GROUP_KNOWN: lambda: group is not None,
            Check.GROUP_KNOWN_OR_SIMPLE_COMMIT: lambda: group is not None,
            Check.PROTOCOL_CONSISTENT: lambda: self._protocol_consistent(call, group),
            Check.NEW_OR_KNOWN_MEMBER: lambda: call.member_id == "" or member is not None,
            Check.MEMBER_KNOWN: lambda: member is not None,
            Check.GENERATION_CURRENT: lambda: group is not None and call.generation_id == group.generation_id,
        }
        return tests[check]()

    @staticmethod
    def _protocol_consistent(call: _Call, group: Optional[_Group]) -> bool:
        names = [name for name, _ in call.protocols]
        if group is None:
            return bool(names)
        return group.protocol_type == call.protocol_type and group.supports(names)

    @staticmethod
    def _kind(call: _Call, group: Optional[_Group]) -> RequestKind:
        if call.api == "join_group":
            return RequestKind.JOIN_NEW_MEMBER if call.member_id == "" else RequestKind.JOIN_KNOWN_MEMBER
        return _API_KIND[call.api]

    def _answer_error(self, call: _Call, code: ErrorCode) -> None:
        if call.api == "join_group":
            self._reply(call.reply_to, _join_error(code, call.member_id))
        elif call.api == "sync_group":
            self._reply(call.reply_to, SyncGroupResponse(error_code=code))
        elif call.api == "heartbeat":
            self._reply(call.reply_to, HeartbeatResponse(error_code=code))
        else:
            assert call.api == "leave_group", call.api
            self._reply(call.reply_to, LeaveGroupResponse(error_code=code))

    # ---------------------------------------------------------------- JoinGroup

    def _apply_join(self, call: _Call, client_id: str, client_host: str) -> None:
        if call.handling is Handling.ADD_MEMBER:
            self._add_member(call, client_id, client_host)
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
            # In Stable only followers get here, so only AwaitingSync can list members (for the leader).
            members = group.member_metadata() if is_leader else []
            self._reply(call.reply_to, self._join_result(group, member, members))
            return
        member.protocols = call.protocols
        member.parked_join = _Parked(call.reply_to)
        self._rebalance_and_try_complete(group)

    def _add_member(self, call: _Call, client_id: str, client_host: str) -> None:
        group = self._groups.get(call.group_id)
        if group is None:
            group = self._groups[call.group_id] = _Group(call.group_id, call.protocol_type)
        member_id = f"{client_id}-{self._member_id_suffix()}"
        if member_id in group.members:
            raise ProtocolError(f"member id generator repeated {member_id!r}")
        group.members[member_id] = _Member(
            member_id, client_id, client_host, call.session_timeout_ms, call.protocols,
            parked_join=_Parked(call.reply_to),
        )
        if group.leader_id is None:
            group.leader_id = member_id
        self._rebalance_and_try_complete(group)

    def _join_result(
        self, group: _Group, member: _Member, members: List[JoinGroupResponse.JoinGroupResponseMember]
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=_C.NONE, generation_id=group.generation_id, protocol_name=group.protocol,
            leader=group.leader_id or "", member_id=member.member_id, members=members,
        )

    def _rebalance_and_try_complete(self, group: _Group) -> None:
        if group.state in (GroupState.STABLE, GroupState.AWAITING_SYNC):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    def _prepare_rebalance(self, group: _Group) -> None:
        if group.state is GroupState.AWAITING_SYNC:
            # The assignment being synced is obsolete: parked followers learn so and rejoin.
            for member in group.members.values():
                member.assignment = b""
                self._answer_sync(member, _C.REBALANCE_IN_PROGRESS)
        group.transition(GroupEvent.REBALANCE_NEEDED)
        timeout = max((m.session_timeout_ms for m in group.members.values()), default=0)
        group.join_deadline_ms = self._now() + timeout

    def _try_complete_join(self, group: _Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and group.all_rejoined():
            self._complete_join(group)

    def _complete_join(self, group: _Group) -> None:
        for member in [m for m in group.members.values() if m.parked_join is None]:
            group.remove(member.member_id)  # did not rejoin in time
        group.join_deadline_ms = None
        if not group.members:
            group.transition(GroupEvent.JOIN_COMPLETED_EMPTY)
            del self._groups[group.group_id]
            return
        group.generation_id += 1
        group.protocol = group.select_protocol()
        group.transition(GroupEvent.JOIN_COMPLETED)
        leader_view = group.member_metadata()
        for member in group.members.values():
            parked, member.parked_join = member.parked_join, None
            assert parked is not None
            members = leader_view if member.member_id == group.leader_id else []
            self._reply(parked.reply_to, self._join_result(group, member, members))
            self._refresh_session(member)

    def _answer_join_error(self, member: _Member, code: ErrorCode) -> None:
        if member.parked_join is not None:
            parked, member.parked_join = member.parked_join, None
            self._reply(parked.reply_to, _join_error(code, member.member_id))

    # ---------------------------------------------------------------- SyncGroup

    def _apply_sync(self, call: _Call, assignments: Dict[str, bytes]) -> None:
        group = self._groups[call.group_id]
        member = group.members[call.member_id]
        self._refresh_session(member)
        if call.handling is Handling.SEND_ASSIGNMENT:
            self._reply(call.reply_to, SyncGroupResponse(error_code=_C.NONE, assignment=member.assignment))
            return
        member.parked_sync = _Parked(call.reply_to)
        if member.member_id == group.leader_id:
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")  # missing members get nothing
            group.transition(GroupEvent.ASSIGNMENT_STORED)
            for other in group.members.values():
                if self._answer_sync(other, _C.NONE):
                    self._refresh_session(other)

    def _answer_sync(self, member: _Member, code: ErrorCode) -> bool:
        """Answer the member's parked SyncGroup, if any (an error carries no assignment)."""
        if member.parked_sync is None:
            return False
        parked, member.parked_sync = member.parked_sync, None
        assignment = member.assignment if code == _C.NONE else b""
        self._reply(parked.reply_to, SyncGroupResponse(error_code=code, assignment=assignment))
        return True

    # ---------------------------------------------------------------- Heartbeat, LeaveGroup, sessions

    def _apply_heartbeat(self, call: _Call) -> None:
        self._refresh_session(self._groups[call.group_id].members[call.member_id])
        self._reply(call.reply_to, HeartbeatResponse(error_code=_C.NONE))

    def _apply_leave(self, call: _Call) -> None:
        group = self._groups[call.group_id]
        self._remove_member(group, group.members[call.member_id])
        self._reply(call.reply_to, LeaveGroupResponse(error_code=_C.NONE))

    def _refresh_session(self, member: _Member) -> None:
        member.session_deadline_ms = self._now() + member.session_timeout_ms

    def _remove_member(self, group: _Group, member: _Member) -> None:
        """A member left or expired (0.9.0 ``onMemberFailure``)."""
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.AWAITING_SYNC):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    def _expire_session(self, group: _Group, member: _Member) -> None:
        member.session_deadline_ms = None
        if member.parked_join is None and member.parked_sync is None:
            self._remove_member(group, member)

    # ---------------------------------------------------------------- timers

    def _timers(self) -> List[Tuple[int, int, str, str]]:
        """Running group timers as (deadline, kind, group id, member id); joins sort before sessions."""
        timers = []
        for group in self._groups.values():
            if group.join_deadline_ms is not None:
                timers.append((group.join_deadline_ms, 0, group.group_id, ""))
            for member in group.members.values():
                if member.session_deadline_ms is not None:
                    timers.append((member.session_deadline_ms, 1, group.group_id, member.member_id))
        return timers

    def _advance(self, now_ms: int) -> None:
        if self._now_ms is not None and now_ms < self._now_ms:
            raise ProtocolError(f"clock went backwards: {now_ms} < {self._now_ms}")
        while True:
            due = [timer for timer in self._timers() if timer[0] <= now_ms]
            if not due:
                break
            deadline, kind, group_id, member_id = min(due)
            self._now_ms = deadline  # a timer acts at its own deadline, however late tick comes
            group = self._groups[group_id]
            if kind == 0:
                self._complete_join(group)
            else:
                self._expire_session(group, group.members[member_id])
        self._now_ms = now_ms
        self._offsets.expire(now_ms)

    # ---------------------------------------------------------------- offsets

    def _apply_commit(
        self,
        call: _Call,
        offsets: Mapping[Tuple[str, int], Tuple[int, Optional[str]]],
        retention_ms: int,
        error: Optional[ErrorCode],
    ) -> None:
        """Store (or, given ``error``, refuse) every partition; the answer is per partition."""
        Topic = OffsetCommitResponse.OffsetCommitResponseTopic
        Partition = Topic.OffsetCommitResponsePartition
        by_topic: Dict[str, List[OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition]] = {}
        for (topic, partition), (offset, metadata) in offsets.items():
            code = error if error is not None else self._offsets.commit(
                call.group_id, (topic, partition), offset, metadata, retention_ms=retention_ms, now_ms=self._now(),
            )
            by_topic.setdefault(topic, []).append(Partition(partition_index=partition, error_code=code))
        topics = [Topic(name=t, partitions=ps) for t, ps in by_topic.items()]
        self._reply(call.reply_to, OffsetCommitResponse(topics=topics))

    def _apply_fetch(self, call: _Call, wanted: List[Tuple[str, int]], error: Optional[ErrorCode]) -> None:
        """Answer stored offsets (offset −1, metadata "", NONE when absent), or ``error`` for each."""
        stored = self._offsets.partitions(call.group_id)
        partitions = wanted or (list(stored) if error is None else [])
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        by_topic: Dict[str, List[OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition]] = {}
        for topic, partition in partitions:
            found = stored.get((topic, partition)) if error is None else None
            entry = (
                Partition(partition_index=partition, committed_offset=found.offset, metadata=found.metadata,
                          error_code=_C.NONE)
                if found is not None
                else Partition(partition_index=partition, committed_offset=-1, metadata="",
                               error_code=error if error is not None else _C.NONE)
            )
            by_topic.setdefault(topic, []).append(entry)
        topics = [Topic(name=t, partitions=ps) for t, ps in by_topic.items()]
        self._reply(call.reply_to, OffsetFetchResponse(topics=topics))

    # ---------------------------------------------------------------- DescribeGroups

    def _describe(self, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
        Group = DescribeGroupsResponse.DescribedGroup
        call = _Call("describe_groups", None, group_id)
        group = self._groups.get(group_id)
        for check in CHECKS["describe_groups"]:
            if not self._passes(check, call, group):
                return Group(error_code=check.error_code, group_id=group_id)
        # An unknown group is described as Dead, like one that just died.
        handling = RESPONSES[(RequestKind.DESCRIBE, group.state if group else GroupState.DEAD)]
        if group is None or handling is Handling.DESCRIBE_AS_DEAD:
            return Group(error_code=_C.NONE, group_id=group_id, group_state=GroupState.DEAD.value)
        full = handling is Handling.DESCRIBE_IN_FULL
        members = [
            Group.DescribedGroupMember(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol) if full else b"",
                member_assignment=m.assignment if full else b"",
            )
            for m in group.members.values()
        ]
        return Group(error_code=_C.NONE, group_id=group_id, group_state=group.state.value,
                     protocol_type=group.protocol_type, protocol_data=group.protocol if full else "",
                     members=members)
