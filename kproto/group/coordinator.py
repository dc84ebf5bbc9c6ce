"""The group coordinator (broker side) as a sans-I/O state machine, for every classic-group version.

Theory of operation
===================

A :class:`GroupCoordinator` manages many consumer groups the way a Kafka broker's classic group
coordinator does (docs/group-coordinator.md lists the rules and what is simplified).  It never touches
sockets, threads or a clock: every call takes ``now_ms`` and every timer is a deadline the caller learns
from :meth:`GroupCoordinator.next_deadline_ms` and honours by calling :meth:`GroupCoordinator.tick`.

**Calls and replies.**  :meth:`GroupCoordinator.handle` takes a decoded request message (the generated
classes of :mod:`kproto.messages`, in a version of :data:`SERVED_VERSIONS`) with an opaque ``reply_to``
token and returns a list of :class:`Reply` objects, each carrying a response message.  JoinGroup and
SyncGroup answers may be *parked*: the call returns without a reply for its own token, and the reply
appears later in the list returned by another call (another member's JoinGroup, the leader's SyncGroup,
a LeaveGroup) or by :meth:`GroupCoordinator.tick`.  Every other request is answered at once, but may
still release parked replies of other callers.  The caller sends each reply to whoever its token names.
A member that re-sends JoinGroup (or SyncGroup) while an earlier one is parked replaces the earlier
token; the replaced one is never answered.

**Group states** are the five a Kafka broker reports.  A new group is ``Empty`` with generation 0.
Group transitions are the :data:`TRANSITIONS` table (state × event → state); nothing else changes
``GroupState``.  A join phase that ends with no member leaves the group ``Empty`` (generation + 1).  An
``Empty`` group is kept while it has committed offsets (or a member that must rejoin with its new id)
and is removed (``Dead``) as soon as it has neither, or when DeleteGroups deletes it; later requests see
an unknown group.

**Request handling** is two tables.  :data:`CHECKS` lists, per API, the checks that run in Kafka's
order; the first that fails answers with its error code.  One of them is ``Check.STATE``, which
consults :data:`RESPONSES` (request kind × group state → an error code, or the :class:`Handling` to
apply once the remaining checks pass).  The member checks (``INSTANCE_KNOWN``, ``INSTANCE_NOT_FENCED``,
``MEMBER_KNOWN``) also judge each member of a batched LeaveGroup.

**New members.**  A JoinGroup with an empty member id is a new member, and :data:`NEW_MEMBER_RULES`
decides what becomes of it: a *static* member (JoinGroup v5+ ``group_instance_id``) whose instance id
the group knows replaces that instance's old member id (the old id is fenced: its requests get
FENCED_INSTANCE_ID); any other static member is added; a dynamic member joining with JoinGroup v4+ is
given an id and answered MEMBER_ID_REQUIRED, and waits as a *pending* member until it rejoins with that
id (or its session timeout passes); an older dynamic member is added at once.  ``group_max_size``
refuses members past the limit with GROUP_MAX_SIZE_REACHED.

**Join phase.**  A rebalance starts (``PreparingRebalance``) when a member is added, when a known member
joins with changed metadata (or, in Stable, when the leader re-joins), and when a member leaves or
expires.  Parked SyncGroups of the abandoned ``CompletingRebalance`` phase are answered
REBALANCE_IN_PROGRESS.  The phase completes as soon as every member has a parked JoinGroup and no
pending member is left, or at the rebalance deadline (the largest rebalance timeout among the members;
JoinGroup v0 has none and uses the session timeout), when *dynamic* members that did not rejoin are
removed; static members stay until their session expires.  Completion increments the generation,
selects the protocol by vote, moves to ``CompletingRebalance`` and answers every parked JoinGroup; only
the leader's answer lists the members.

**A static member restarting.**  When a known instance rejoins with a new member id in ``Stable`` and
its protocols would not change the group's protocol, there is no rebalance: the new id takes over the
old one's assignment and the JoinGroup is answered at once with the current generation.  Before
JoinGroup v9 the answer names the *old* leader id, so a restarted leader behaves as a follower and
simply fetches its assignment; from v9 a leader is told it leads, with the members listed and
``skip_assignment`` set.  In ``CompletingRebalance`` the replacement rebalances (the leader may already
be assigning to the old id).

**Leader and protocol.**  The first member of a group is its leader and stays leader across
generations; when it goes (or, at the end of a join phase, has not rejoined) the oldest remaining
rejoined member takes over.  The protocol is the one most members list first among the protocols every
member supports; a tie goes to the candidate the leader prefers.

**Sync phase.**  SyncGroups are parked in ``CompletingRebalance``.  The leader's carries the
assignment: members it leaves out get empty bytes, the group becomes ``Stable`` and every parked
SyncGroup is answered with its member's assignment.  SyncGroup v5 names the protocol type and name,
which must match the group's (INCONSISTENT_GROUP_PROTOCOL).

**Sessions.**  Each member has a session deadline, ``last refresh + session timeout``.  Refreshes are a
Heartbeat that passes the member checks, a SyncGroup in ``CompletingRebalance`` or ``Stable``, an
OffsetCommit of a member, join completion and assignment propagation.  At the deadline a member with a
parked JoinGroup or SyncGroup is kept (its timer stops until the next refresh); any other member is
removed as if it had left.  A pending member's deadline is its session timeout after it was told its
id.  Timers fire in deadline order and act at their deadline's time, so the outcome does not depend on
how late ``tick`` is called.  Overdue timers also fire at the start of every call, before the request.

**Offsets** live in an :class:`~kproto.group.offset_store.OffsetStore`, per group, until their
retention passes (another deadline).  A commit with a negative generation, no member id and no
instance id is a "simple" commit outside group management: it creates the group (``Empty``) if needed
and is accepted only while the group has no members.  OffsetFetch answers whatever is stored, in any
group state; an empty topic list (v0/v1) or a null one (v2+) means every stored offset.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from kproto import ErrorCode
from kproto.errors import DecodeError, ProtocolError, UnsupportedVersionError
from kproto.group.offset_store import OffsetStore
from kproto.message_base import Message
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
    "GroupEvent",
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


# --------------------------------------------------------------------------------------------------
# The tables


class GroupState(str, enum.Enum):
    """A group's state; the values are the names DescribeGroups reports (a ``str``, so they compare as such)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    #: The same state under its 0.9-1.0 name (those brokers reported "AwaitingSync").
    AWAITING_SYNC = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(enum.Enum):
    """What moves a group from one state to another."""

    REBALANCE_NEEDED = "a member joined, changed its metadata, left or expired"
    JOIN_COMPLETED = "every remaining member rejoined (or the rest were evicted)"
    JOIN_COMPLETED_EMPTY = "the join phase ended with no member left"
    ASSIGNMENT_STORED = "the leader's SyncGroup assignment was stored"
    REMOVED = "an empty group lost its last offset, or was deleted"
    UNLOADED = "the coordinator gave the group up"


_S = GroupState
_E = GroupEvent

#: state × event → next state.  Missing pairs are illegal; these are Kafka's ``validPreviousStates``.
TRANSITIONS: Mapping[Tuple[GroupState, GroupEvent], GroupState] = {
    (_S.EMPTY, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.STABLE, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.REBALANCE_NEEDED): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED): _S.COMPLETING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED_EMPTY): _S.EMPTY,
    (_S.COMPLETING_REBALANCE, _E.ASSIGNMENT_STORED): _S.STABLE,
    (_S.EMPTY, _E.REMOVED): _S.DEAD,
    **{(state, _E.UNLOADED): _S.DEAD
       for state in (_S.EMPTY, _S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE)},
}


class RequestKind(enum.Enum):
    """A request as the per-state table sees it (JoinGroup splits on whether the member is new)."""

    JOIN_NEW_MEMBER = "JoinGroup with member_id \"\" (or from a pending member)"
    JOIN_KNOWN_MEMBER = "JoinGroup from a known member"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    OFFSET_COMMIT = "OffsetCommit from a member"
    SIMPLE_COMMIT = "OffsetCommit outside group management (no generation, member or instance)"
    DESCRIBE = "DescribeGroups (one group of it)"
    DELETE = "DeleteGroups (one group of it)"


class Handling(enum.Enum):
    """What the coordinator does with a request that passed every check."""

    ADD_MEMBER = "apply NEW_MEMBER_RULES (add, replace a static member, or ask for a member id)"
    UPDATE_MEMBER = "replace the member's protocols, park the JoinGroup"
    UPDATE_IF_CHANGED = "answer now if the protocols are unchanged, else update, rebalance and park"
    UPDATE_IF_LEADER_OR_CHANGED = "answer a follower with unchanged protocols now, else update, rebalance, park"
    PARK_SYNC = "park the SyncGroup; the leader's assignment completes the phase"
    SEND_ASSIGNMENT = "answer with the member's current assignment"
    REFRESH_SESSION = "refresh the member's session"
    REFRESH_SESSION_REBALANCING = "refresh the member's session, answer REBALANCE_IN_PROGRESS"
    STORE_OFFSETS = "store the offsets"
    STORE_OFFSETS_REFRESH_SESSION = "store the offsets and refresh the member's session"
    DESCRIBE_IN_FULL = "state, protocol, members with their metadata and assignments"
    DESCRIBE_MEMBERS_ONLY = "state and members; no protocol, empty metadata and assignments"
    DESCRIBE_AS_DEAD = "state Dead, nothing else"
    DELETE_GROUP = "delete the group and its offsets"


_K = RequestKind
_H = Handling
_C = ErrorCode

#: request kind × group state → an error code to answer with, or the handling to apply.  A group that
#: does not exist is looked up as Dead (only JoinGroup of a new member and a simple commit create one).
RESPONSES: Mapping[Tuple[RequestKind, GroupState], Union[ErrorCode, Handling]] = {
    (_K.JOIN_NEW_MEMBER, _S.EMPTY): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.PREPARING_REBALANCE): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.COMPLETING_REBALANCE): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.STABLE): _H.ADD_MEMBER,
    (_K.JOIN_NEW_MEMBER, _S.DEAD): _H.ADD_MEMBER,  # the group is created, Empty
    (_K.JOIN_KNOWN_MEMBER, _S.EMPTY): _C.UNKNOWN_MEMBER_ID,
    (_K.JOIN_KNOWN_MEMBER, _S.PREPARING_REBALANCE): _H.UPDATE_MEMBER,
    (_K.JOIN_KNOWN_MEMBER, _S.COMPLETING_REBALANCE): _H.UPDATE_IF_CHANGED,
    (_K.JOIN_KNOWN_MEMBER, _S.STABLE): _H.UPDATE_IF_LEADER_OR_CHANGED,
    (_K.JOIN_KNOWN_MEMBER, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.SYNC, _S.EMPTY): _C.UNKNOWN_MEMBER_ID,
    (_K.SYNC, _S.PREPARING_REBALANCE): _C.REBALANCE_IN_PROGRESS,
    (_K.SYNC, _S.COMPLETING_REBALANCE): _H.PARK_SYNC,
    (_K.SYNC, _S.STABLE): _H.SEND_ASSIGNMENT,
    (_K.SYNC, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.HEARTBEAT, _S.EMPTY): _C.UNKNOWN_MEMBER_ID,
    (_K.HEARTBEAT, _S.PREPARING_REBALANCE): _H.REFRESH_SESSION_REBALANCING,
    # A member may heartbeat between its JoinGroup answer and its SyncGroup.
    (_K.HEARTBEAT, _S.COMPLETING_REBALANCE): _H.REFRESH_SESSION,
    (_K.HEARTBEAT, _S.STABLE): _H.REFRESH_SESSION,
    (_K.HEARTBEAT, _S.DEAD): _C.UNKNOWN_MEMBER_ID,
    (_K.OFFSET_COMMIT, _S.EMPTY): _H.STORE_OFFSETS,
    # During the join phase the previous generation is still the current one, so commits go through.
    (_K.OFFSET_COMMIT, _S.PREPARING_REBALANCE): _H.STORE_OFFSETS_REFRESH_SESSION,
    (_K.OFFSET_COMMIT, _S.COMPLETING_REBALANCE): _C.REBALANCE_IN_PROGRESS,
    (_K.OFFSET_COMMIT, _S.STABLE): _H.STORE_OFFSETS_REFRESH_SESSION,
    (_K.OFFSET_COMMIT, _S.DEAD): _C.ILLEGAL_GENERATION,
    # Only a group without members takes commits from outside group management.
    (_K.SIMPLE_COMMIT, _S.EMPTY): _H.STORE_OFFSETS,
    (_K.SIMPLE_COMMIT, _S.PREPARING_REBALANCE): _C.UNKNOWN_MEMBER_ID,
    (_K.SIMPLE_COMMIT, _S.COMPLETING_REBALANCE): _C.UNKNOWN_MEMBER_ID,
    (_K.SIMPLE_COMMIT, _S.STABLE): _C.UNKNOWN_MEMBER_ID,
    (_K.SIMPLE_COMMIT, _S.DEAD): _H.STORE_OFFSETS,  # the group is created, Empty
    (_K.DESCRIBE, _S.EMPTY): _H.DESCRIBE_MEMBERS_ONLY,
    (_K.DESCRIBE, _S.PREPARING_REBALANCE): _H.DESCRIBE_MEMBERS_ONLY,
    (_K.DESCRIBE, _S.COMPLETING_REBALANCE): _H.DESCRIBE_MEMBERS_ONLY,
    (_K.DESCRIBE, _S.STABLE): _H.DESCRIBE_IN_FULL,
    (_K.DESCRIBE, _S.DEAD): _H.DESCRIBE_AS_DEAD,
    (_K.DELETE, _S.EMPTY): _H.DELETE_GROUP,
    (_K.DELETE, _S.PREPARING_REBALANCE): _C.NON_EMPTY_GROUP,
    (_K.DELETE, _S.COMPLETING_REBALANCE): _C.NON_EMPTY_GROUP,
    (_K.DELETE, _S.STABLE): _C.NON_EMPTY_GROUP,
    (_K.DELETE, _S.DEAD): _C.GROUP_ID_NOT_FOUND,
}


class NewMemberRule(enum.Enum):
    """What a JoinGroup with an empty member id does (the :data:`NEW_MEMBER_RULES` outcomes)."""

    REPLACE_STATIC_MEMBER = "the new id takes over the instance's old member (which is fenced)"
    ADD_STATIC_MEMBER = "add the member under its instance id and rebalance"
    REQUIRE_MEMBER_ID = "make the id a pending member, answer MEMBER_ID_REQUIRED with it"
    ADD_DYNAMIC_MEMBER = "add the member and rebalance"


#: (has a group_instance_id, the instance is known, JoinGroup v4+) → rule.  None: either value.
NEW_MEMBER_RULES: Sequence[Tuple[bool, Optional[bool], Optional[bool], NewMemberRule]] = (
    (True, True, None, NewMemberRule.REPLACE_STATIC_MEMBER),
    (True, False, None, NewMemberRule.ADD_STATIC_MEMBER),
    (False, None, True, NewMemberRule.REQUIRE_MEMBER_ID),
    (False, None, False, NewMemberRule.ADD_DYNAMIC_MEMBER),
)


class Check(enum.Enum):
    """One pre-check the coordinator runs (the value describes what must hold); :data:`CHECK_ERRORS` gives its code."""

    COORDINATOR_ACTIVE = "the coordinator is running"
    GROUP_ID_VALID = "group_id is not empty"
    GROUP_OWNED = "this broker coordinates the group"
    GROUP_LOADED = "the group's metadata is loaded"
    GROUP_LOADED_OR_BLIND_OK = "the group's metadata is loaded (else Heartbeat answers NONE blindly)"
    SESSION_TIMEOUT_IN_RANGE = "min session timeout <= session_timeout <= max"
    GROUP_KNOWN_OR_NEW_MEMBER = "the group exists, or the member is new"
    GROUP_KNOWN = "the group exists"
    GROUP_HAS_ROOM = "the member is known, or the group is below group_max_size"
    GROUP_KNOWN_OR_NO_GENERATION = "the group exists, or the commit names no generation (else it is from an old one)"
    PROTOCOL_CONSISTENT = "same protocol_type, and a protocol every member supports"
    INSTANCE_KNOWN = "group_instance_id, if given, belongs to the group"
    INSTANCE_NOT_FENCED = "group_instance_id, if given, maps to this member_id"
    MEMBER_KNOWN = "member_id belongs to the group"
    GENERATION_CURRENT = "the generation is the group's current one"
    SYNC_PROTOCOL_MATCHES = "SyncGroup v5's protocol type and name, if given, are the group's"
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
    _X.GROUP_HAS_ROOM: _C.GROUP_MAX_SIZE_REACHED,
    _X.GROUP_KNOWN_OR_NO_GENERATION: _C.ILLEGAL_GENERATION,
    _X.PROTOCOL_CONSISTENT: _C.INCONSISTENT_GROUP_PROTOCOL,
    _X.INSTANCE_KNOWN: _C.UNKNOWN_MEMBER_ID,
    _X.INSTANCE_NOT_FENCED: _C.FENCED_INSTANCE_ID,
    _X.MEMBER_KNOWN: _C.UNKNOWN_MEMBER_ID,
    _X.GENERATION_CURRENT: _C.ILLEGAL_GENERATION,
    _X.SYNC_PROTOCOL_MATCHES: _C.INCONSISTENT_GROUP_PROTOCOL,
    _X.STATE: _C.UNKNOWN,
}
_COMMON = (_X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_LOADED)
_MEMBER = (_X.INSTANCE_KNOWN, _X.INSTANCE_NOT_FENCED, _X.MEMBER_KNOWN)

#: API → its checks in Kafka's order.  A known member's JoinGroup runs the member checks before STATE;
#: a new member's skips them (and a pending member counts as new).
CHECKS: Mapping[str, Tuple[Check, ...]] = {
    "join_group": (
        _X.COORDINATOR_ACTIVE, _X.GROUP_ID_VALID, _X.GROUP_OWNED, _X.GROUP_LOADED,
        _X.SESSION_TIMEOUT_IN_RANGE, _X.GROUP_KNOWN_OR_NEW_MEMBER, _X.GROUP_HAS_ROOM, _X.PROTOCOL_CONSISTENT,
        *_MEMBER, _X.STATE,
    ),
    "sync_group": (
        _X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_KNOWN, *_MEMBER, _X.GENERATION_CURRENT,
        _X.SYNC_PROTOCOL_MATCHES, _X.STATE,
    ),
    "heartbeat": (
        _X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_LOADED_OR_BLIND_OK, _X.GROUP_KNOWN, *_MEMBER,
        _X.GENERATION_CURRENT, _X.STATE,
    ),
    "leave_group": _COMMON + _MEMBER,
    "commit_offsets": _COMMON + (_X.GROUP_KNOWN_OR_NO_GENERATION, *_MEMBER, _X.GENERATION_CURRENT, _X.STATE),
    "simple_commit": _COMMON + (_X.STATE,),
    "fetch_offsets": _COMMON,
    "describe_groups": _COMMON + (_X.STATE,),
    "delete_groups": _COMMON + (_X.STATE,),
    "delete_offsets": _COMMON + (_X.GROUP_KNOWN,),
}

_API_KIND: Mapping[str, RequestKind] = {
    "sync_group": _K.SYNC,
    "heartbeat": _K.HEARTBEAT,
    "commit_offsets": _K.OFFSET_COMMIT,
    "simple_commit": _K.SIMPLE_COMMIT,
    "describe_groups": _K.DESCRIBE,
    "delete_groups": _K.DELETE,
}

#: Request class → the (lowest, highest) version the coordinator answers.  OffsetCommit v0 and
#: OffsetFetch v0 are not here: those offsets lived in ZooKeeper, outside group management (the mock
#: broker answers them itself, so it advertises both APIs from v0).
SERVED_VERSIONS: Mapping[type, Tuple[int, int]] = {
    JoinGroupRequest: (0, 9),
    SyncGroupRequest: (0, 5),
    HeartbeatRequest: (0, 4),
    LeaveGroupRequest: (0, 5),
    OffsetCommitRequest: (1, 9),
    OffsetFetchRequest: (1, 9),
    DescribeGroupsRequest: (0, 5),
    ListGroupsRequest: (0, 5),
    DeleteGroupsRequest: (0, 2),
    OffsetDeleteRequest: (0, 0),
}

#: The ``authorized_operations`` of a described group when asked for (v3+) and no authorizer runs:
#: READ (3), DELETE (6) and DESCRIBE (8), one bit each.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_OPERATIONS_NOT_REQUESTED = -(2 ** 31)

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
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    leader_id: Optional[str] = None
    protocol: str = ""
    members: Dict[str, _Member] = field(default_factory=dict)
    #: group_instance_id → member_id of the static members
    static_members: Dict[str, str] = field(default_factory=dict)
    #: member id → deadline of the members told MEMBER_ID_REQUIRED
    pending: Dict[str, int] = field(default_factory=dict)
    join_deadline_ms: Optional[int] = None

    def transition(self, event: GroupEvent) -> None:
        try:
            self.state = TRANSITIONS[(self.state, event)]
        except KeyError:
            raise ProtocolError(f"group {self.group_id!r}: no transition for {event.name} in {self.state.value}")

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

    def member_metadata(self) -> List[JoinGroupResponse.JoinGroupResponseMember]:
        Member = JoinGroupResponse.JoinGroupResponseMember
        return [Member(member_id=m.member_id, group_instance_id=m.group_instance_id,
                       metadata=m.metadata_for(self.protocol)) for m in self.members.values()]

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

    api: str
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
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_name=None if version >= 7 else "",
                             member_id=member_id)


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

    # ---------------------------------------------------------------- requests

    def handle(
        self, reply_to: object, request: Message, api_version: int, *, client_id: str, client_host: str,
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
                f"the group coordinator answers {type(request).__name__} v{served[0]}-v{served[1]}, "
                f"not v{api_version}")
        self._advance(now_ms)
        v = api_version
        if isinstance(request, JoinGroupRequest):
            call = _Call("join_group", reply_to, request.group_id, request.member_id, api_version=v,
                         group_instance_id=request.group_instance_id if v >= 5 else None,
                         session_timeout_ms=request.session_timeout_ms,
                         rebalance_timeout_ms=request.rebalance_timeout_ms if v >= 1 else request.session_timeout_ms,
                         protocol_type=request.protocol_type,
                         protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols))
            self._run(call, lambda: self._apply_join(call, client_id, client_host))
        elif isinstance(request, SyncGroupRequest):
            call = _Call("sync_group", reply_to, request.group_id, request.member_id, request.generation_id, v,
                         group_instance_id=request.group_instance_id if v >= 3 else None,
                         protocol_type=request.protocol_type if v >= 5 else None,
                         protocol_name=request.protocol_name if v >= 5 else None)
            assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
            self._run(call, lambda: self._apply_sync(call, assignments))
        elif isinstance(request, HeartbeatRequest):
            call = _Call("heartbeat", reply_to, request.group_id, request.member_id, request.generation_id, v,
                         group_instance_id=request.group_instance_id if v >= 3 else None)
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
                m.group_instance_id, m.rebalance_timeout_ms,
            )
            for m in group.members.values()
        )
        return GroupSnapshot(
            group.group_id, group.state, group.generation_id, group.protocol_type, group.protocol,
            group.leader_id or "", members, group.join_deadline_ms, tuple(group.pending),
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
            if (group.state is GroupState.EMPTY and not group.members and not group.pending
                    and not self._offsets.has_offsets(group.group_id)):
                group.transition(GroupEvent.REMOVED)
                del self._groups[group.group_id]

    # ---------------------------------------------------------------- checks

    def _check(self, call: _Call) -> _Verdict:
        """Run the API's checks; an ErrorCode answers the call, a Handling (or None) proceeds."""
        group = self._groups.get(call.group_id)
        # A pending id is a new member only without an instance id (Kafka fails internally on one with it;
        # here the member checks judge it, so an instance never gets a second member).
        new_member = call.api == "join_group" and (call.member_id == "" or (
            group is not None and call.member_id in group.pending and call.group_instance_id is None))
        for check in CHECKS[call.api]:
            if new_member and check in _MEMBER:
                continue
            if check is Check.STATE:
                kind = (RequestKind.JOIN_NEW_MEMBER if new_member else RequestKind.JOIN_KNOWN_MEMBER) \
                    if call.api == "join_group" else _API_KIND[call.api]
                return RESPONSES[(kind, group.state if group else GroupState.DEAD)]
            if not self._passes(check, call, group):
                return check.error_code
        return None

    def _passes(self, check: Check, call: _Call, group: Optional[_Group]) -> bool:
        member = group.members.get(call.member_id) if group else None
        cfg = self.config
        instance = call.group_instance_id
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
            Check.GROUP_HAS_ROOM: lambda: self._has_room(call, group),
            Check.GROUP_KNOWN_OR_NO_GENERATION: lambda: group is not None or call.generation_id < 0,
            Check.PROTOCOL_CONSISTENT: lambda: self._protocol_consistent(call, group),
            Check.INSTANCE_KNOWN: lambda: instance is None or (group is not None and instance in group.static_members),
            Check.INSTANCE_NOT_FENCED: lambda: (
                instance is None or group is None or group.static_members.get(instance) == call.member_id
            ),
            Check.MEMBER_KNOWN: lambda: member is not None,
            Check.GENERATION_CURRENT: lambda: group is not None and call.generation_id == group.generation_id,
            Check.SYNC_PROTOCOL_MATCHES: lambda: group is not None and (
                (call.protocol_type is None or call.protocol_type == group.protocol_type)
                and (call.protocol_name is None or call.protocol_name == group.protocol)
            ),
        }
        return tests[check]()

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
        if call.api == "join_group":
            self._reply(call.reply_to, _join_error(code, call.member_id, call.api_version))
        elif call.api == "sync_group":
            self._reply(call.reply_to, SyncGroupResponse(error_code=code))
        else:
            assert call.api == "heartbeat", call.api
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
            if (has_instance == static and instance_known in (None, known) and v4 in (None, requires_id)):
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
            raise ProtocolError(f"member id generator repeated {member_id!r}")
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
            member_id, client_id, client_host, call.session_timeout_ms, call.protocols,
            group_instance_id=call.group_instance_id, rebalance_timeout_ms=call.rebalance_timeout_ms,
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
        group: _Group, member: _Member, members: List[JoinGroupResponse.JoinGroupResponseMember], version: int,
    ) -> JoinGroupResponse:
        """A successful JoinGroup answer; the protocol type is a field from v7."""
        return JoinGroupResponse(
            error_code=_C.NONE, generation_id=group.generation_id,
            protocol_type=group.protocol_type if version >= 7 else None,
            protocol_name=group.protocol, leader=group.leader_id or "", member_id=member.member_id,
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
        group.transition(GroupEvent.REBALANCE_NEEDED)
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
            group.transition(GroupEvent.JOIN_COMPLETED_EMPTY)
            return
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.parked_join is None:
            group.leader_id = joined[0].member_id
        group.protocol = group.select_protocol()
        group.transition(GroupEvent.JOIN_COMPLETED)
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
            group.transition(GroupEvent.ASSIGNMENT_STORED)
            for other in group.members.values():
                if self._answer_sync(group, other, _C.NONE):
                    self._refresh_session(other)

    @staticmethod
    def _sync_result(group: _Group, assignment: bytes, version: int) -> SyncGroupResponse:
        """A successful SyncGroup answer; the protocol type and name are fields from v5."""
        modern = version >= 5
        return SyncGroupResponse(error_code=_C.NONE, protocol_type=group.protocol_type if modern else None,
                                 protocol_name=group.protocol if modern else None, assignment=assignment)

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
        call = _Call("leave_group", reply_to, request.group_id, api_version=version)
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
        members = [Member(member_id=member_id, group_instance_id=instance, error_code=code)
                   for (member_id, instance), code in zip(identities, results)]
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
        call = _Call("leave_group", None, group.group_id, member_id, group_instance_id=instance)
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
        simple = request.generation_id_or_member_epoch < 0 and request.member_id == "" and instance is None
        call = _Call("simple_commit" if simple else "commit_offsets", reply_to, request.group_id,
                     request.member_id, request.generation_id_or_member_epoch, version, group_instance_id=instance)
        # v2-v4 carry a retention time; v1's partitions carry a commit timestamp.
        retention_ms = request.retention_time_ms if 2 <= version <= 4 else -1
        offsets = [(t.name, p) for t in request.topics for p in t.partitions]

        def answer(code: Optional[ErrorCode]) -> None:
            Topic = OffsetCommitResponse.OffsetCommitResponseTopic
            Partition = Topic.OffsetCommitResponsePartition
            by_topic: Dict[str, List[OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition]] = {}
            for topic, p in offsets:
                if code is None:
                    stored = self._offsets.commit(
                        request.group_id, (topic, p.partition_index), p.committed_offset, p.committed_metadata,
                        retention_ms=retention_ms, now_ms=self._now(),
                        leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                        commit_timestamp_ms=p.commit_timestamp if version == 1 else -1)
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

        self._run(call, store, answer)

    def _fetch(self, reply_to: object, request: OffsetFetchRequest, version: int) -> None:
        """OffsetFetch: one group (v1-v7) or many (v8+); null topics (v2+) or none (v1) mean all."""
        if version >= 8:
            Group = OffsetFetchResponse.OffsetFetchResponseGroup
            T8 = Group.OffsetFetchResponseTopics
            P8 = T8.OffsetFetchResponsePartitions
            groups = []
            for wanted_group in request.groups:
                wanted = None if wanted_group.topics is None else [
                    (t.name, i) for t in wanted_group.topics for i in t.partition_indexes]
                code, found = self._fetch_group(wanted_group.group_id, wanted)
                by_topic: Dict[str, List[Any]] = {}
                for (topic, partition), (offset, epoch, metadata, pcode) in found.items():
                    by_topic.setdefault(topic, []).append(P8(
                        partition_index=partition, committed_offset=offset, committed_leader_epoch=epoch,
                        metadata=metadata, error_code=pcode))
                groups.append(Group(group_id=wanted_group.group_id, error_code=code,
                                    topics=[T8(name=t, partitions=ps) for t, ps in by_topic.items()]))
            self._reply(reply_to, OffsetFetchResponse(groups=groups))
            return
        topics = request.topics
        wanted = None if topics is None or (version < 2 and not topics) else [
            (t.name, i) for t in topics for i in t.partition_indexes]
        code, found = self._fetch_group(request.group_id, wanted)
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        by_topic = {}
        for (topic, partition), (offset, epoch, metadata, pcode) in found.items():
            if version < 2 and code != _C.NONE:
                pcode = code  # before v2 a group-level error is told partition by partition
            by_topic.setdefault(topic, []).append(Partition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=epoch,
                metadata=metadata, error_code=pcode))
        self._reply(reply_to, OffsetFetchResponse(
            topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
            error_code=code if version >= 2 else _C.NONE))

    def _fetch_group(
        self, group_id: str, wanted: Optional[List[Tuple[str, int]]],
    ) -> Tuple[ErrorCode, Dict[Tuple[str, int], Tuple[int, int, Optional[str], ErrorCode]]]:
        """(group error, (topic, partition) → (offset, leader epoch, metadata, error)); −1/"" when absent."""
        call = _Call("fetch_offsets", None, group_id)
        error = next((c.error_code for c in CHECKS["fetch_offsets"] if not self._passes(c, call, None)), None)
        stored = self._offsets.partitions(group_id)
        partitions = list(stored) if wanted is None else wanted
        if error is not None:
            return error, {tp: (-1, -1, "", error) for tp in (wanted or [])}
        found = {}
        for tp in partitions:
            entry = stored.get(tp)
            found[tp] = ((entry.offset, entry.leader_epoch, entry.metadata, _C.NONE) if entry is not None
                         else (-1, -1, "", _C.NONE))
        return _C.NONE, found

    def _delete_offsets(self, reply_to: object, request: OffsetDeleteRequest) -> None:
        """OffsetDelete: allowed in an Empty group, and for topics a consumer group does not subscribe to."""
        call = _Call("delete_offsets", reply_to, request.group_id)
        group = self._groups.get(request.group_id)
        failed = next((c for c in CHECKS["delete_offsets"] if not self._passes(c, call, group)), None)
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

    def _describe(self, group_id: str, include_operations: bool) -> DescribeGroupsResponse.DescribedGroup:
        Group = DescribeGroupsResponse.DescribedGroup
        operations = GROUP_AUTHORIZED_OPERATIONS if include_operations else _OPERATIONS_NOT_REQUESTED
        call = _Call("describe_groups", None, group_id)
        group = self._groups.get(group_id)
        verdict = self._check(call)
        if isinstance(verdict, ErrorCode):
            return Group(error_code=verdict, group_id=group_id, authorized_operations=operations)
        if group is None or verdict is Handling.DESCRIBE_AS_DEAD:
            return Group(error_code=_C.NONE, group_id=group_id, group_state=GroupState.DEAD.value,
                         authorized_operations=operations)
        full = verdict is Handling.DESCRIBE_IN_FULL
        members = [
            Group.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, member_metadata=m.metadata_for(group.protocol) if full else b"",
                member_assignment=m.assignment if full else b"",
            )
            for m in group.members.values()
        ]
        return Group(error_code=_C.NONE, group_id=group_id, group_state=group.state.value,
                     protocol_type=group.protocol_type, protocol_data=group.protocol if full else "",
                     members=members, authorized_operations=operations)

    def _list_groups(self, states: Sequence[str], types: Sequence[str], version: int) -> ListGroupsResponse:
        """Groups held, filtered by state and type names (case-insensitive; an empty filter takes all)."""
        if not self.active:
            return ListGroupsResponse(error_code=_C.GROUP_COORDINATOR_NOT_AVAILABLE)
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = [
            ListGroupsResponse.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                                           group_state=g.state.value if version >= 4 else "",
                                           group_type=_GROUP_TYPE if version >= 5 else "")
            for g in self._groups.values()
            if (not wanted_states or g.state.value.lower() in wanted_states)
            and (not wanted_types or _GROUP_TYPE in wanted_types)
        ]
        loading = any(self._is_loading(group_id) for group_id in self._groups)
        return ListGroupsResponse(error_code=_C.GROUP_LOAD_IN_PROGRESS if loading else _C.NONE, groups=listed)

    def _delete_group(self, group_id: str) -> DeleteGroupsResponse.DeletableGroupResult:
        Result = DeleteGroupsResponse.DeletableGroupResult
        verdict = self._check(_Call("delete_groups", None, group_id))
        if isinstance(verdict, ErrorCode):
            return Result(group_id=group_id, error_code=verdict)
        group = self._groups.pop(group_id)
        group.transition(GroupEvent.REMOVED)
        self._offsets.drop_group(group_id)
        return Result(group_id=group_id, error_code=_C.NONE)
