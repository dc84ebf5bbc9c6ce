"""The rules of the group coordinator (broker side), for every classic-group version: the tables
:mod:`kproto.group.coordinator` applies, and the theory of operation they encode.

Rule 1: every decision the coordinator makes from a request and a group's state is a table here; the
engine (:class:`~kproto.group.coordinator.GroupCoordinator`) looks rules up and keeps the state they
do not hold (members, deadlines, parked replies), and where a rule does not fit a table the engine's
code says why.
Rule 2: api identity is the request class, as in :data:`SERVED_VERSIONS`.

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
Group transitions are the :data:`TRANSITIONS` table (state × event → state), applied by
:class:`kproto.state_machine.StateMachine`; nothing else changes ``GroupState``.  A join phase that ends with no
member leaves the group ``Empty`` (generation + 1).  An
``Empty`` group is kept while it has committed offsets (or a member that must rejoin with its new id)
and is removed (``Dead``) as soon as it has neither, or when DeleteGroups deletes it; later requests see
an unknown group.

**Request handling** is two tables.  :data:`CHECKS` lists, per request class, the checks that run in
Kafka's order (less those :data:`SKIPPED_CHECKS` names for the request's kind,
:data:`REQUEST_KINDS`); the first that fails answers with its error code.  One of them is ``Check.STATE``, which
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
from typing import FrozenSet, Mapping, Optional, Sequence, Tuple, Union, cast

from kproto import ErrorCode
from kproto.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kproto.state_machine import names_of, read_matrix, transitions_by_event

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
    "REQUEST_KINDS",
    "SKIPPED_CHECKS",
    "SERVED_VERSIONS",
    "MEMBER_CHECKS",
    "COMMON_CHECKS",
]


class GroupState(str, enum.Enum):
    """A group's state; the values are the names DescribeGroups reports (a ``str``, so they compare as such)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    #: The same state under its 0.9-1.0 name (those brokers reported "AwaitingSync").
    AWAITING_SYNC = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class CoordinatorEvent(enum.Enum):
    """What moves a group from one state to another."""

    REBALANCE_NEEDED = "a member joined, changed its metadata, left or expired"
    JOIN_COMPLETED = "every remaining member rejoined (or the rest were evicted)"
    JOIN_COMPLETED_EMPTY = "the join phase ended with no member left"
    ASSIGNMENT_STORED = "the leader's SyncGroup assignment was stored"
    REMOVED = "an empty group lost its last offset, or was deleted"
    UNLOADED = "the coordinator gave the group up"


#: state × event → next state, one row per event; ``-`` is an illegal move.  These are Kafka's
#: ``validPreviousStates``.
TRANSITIONS: Mapping[Tuple[GroupState, CoordinatorEvent], GroupState] = transitions_by_event(
    GroupState,
    CoordinatorEvent,
    """
                          EMPTY                PREPARING_REBALANCE   COMPLETING_REBALANCE  STABLE               DEAD
    REBALANCE_NEEDED      PREPARING_REBALANCE  PREPARING_REBALANCE   PREPARING_REBALANCE   PREPARING_REBALANCE  -
    JOIN_COMPLETED        -                    COMPLETING_REBALANCE  -                     -                    -
    JOIN_COMPLETED_EMPTY  -                    EMPTY                 -                     -                    -
    ASSIGNMENT_STORED     -                    -                     STABLE                -                    -
    REMOVED               DEAD                 -                     -                     -                    -
    UNLOADED              DEAD                 DEAD                  DEAD                  DEAD                 -
    """,
)


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
_C = ErrorCode

#: request kind × group state → an error code to answer with, or the :class:`Handling` to apply.  A
#: group that does not exist is looked up as Dead (only JoinGroup of a new member and a simple commit
#: create one, Empty).  A member may heartbeat between its JoinGroup answer and its SyncGroup.  During
#: the join phase the previous generation is still the current one, so commits go through.  Only a
#: group without members takes commits from outside group management.
RESPONSES: Mapping[Tuple[RequestKind, GroupState], Union[ErrorCode, Handling]] = read_matrix(
    """
                       EMPTY                  PREPARING_REBALANCE            COMPLETING_REBALANCE
    JOIN_NEW_MEMBER    ADD_MEMBER             ADD_MEMBER                     ADD_MEMBER
    JOIN_KNOWN_MEMBER  UNKNOWN_MEMBER_ID      UPDATE_MEMBER                  UPDATE_IF_CHANGED
    SYNC               UNKNOWN_MEMBER_ID      REBALANCE_IN_PROGRESS          PARK_SYNC
    HEARTBEAT          UNKNOWN_MEMBER_ID      REFRESH_SESSION_REBALANCING    REFRESH_SESSION
    OFFSET_COMMIT      STORE_OFFSETS          STORE_OFFSETS_REFRESH_SESSION  REBALANCE_IN_PROGRESS
    SIMPLE_COMMIT      STORE_OFFSETS          UNKNOWN_MEMBER_ID              UNKNOWN_MEMBER_ID
    DESCRIBE           DESCRIBE_MEMBERS_ONLY  DESCRIBE_MEMBERS_ONLY          DESCRIBE_MEMBERS_ONLY
    DELETE             DELETE_GROUP           NON_EMPTY_GROUP                NON_EMPTY_GROUP

                       STABLE                         DEAD
    JOIN_NEW_MEMBER    ADD_MEMBER                     ADD_MEMBER
    JOIN_KNOWN_MEMBER  UPDATE_IF_LEADER_OR_CHANGED    UNKNOWN_MEMBER_ID
    SYNC               SEND_ASSIGNMENT                UNKNOWN_MEMBER_ID
    HEARTBEAT          REFRESH_SESSION                UNKNOWN_MEMBER_ID
    OFFSET_COMMIT      STORE_OFFSETS_REFRESH_SESSION  ILLEGAL_GENERATION
    SIMPLE_COMMIT      UNKNOWN_MEMBER_ID              STORE_OFFSETS
    DESCRIBE           DESCRIBE_IN_FULL               DESCRIBE_AS_DEAD
    DELETE             NON_EMPTY_GROUP                GROUP_ID_NOT_FOUND
    """,
    RequestKind.__members__,
    GroupState.__members__,
    cast(Mapping[str, Union[ErrorCode, Handling]], names_of(ErrorCode, Handling)),
    "RESPONSES",
)


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
#: The checks every group request starts with.
COMMON_CHECKS = _COMMON = (_X.COORDINATOR_ACTIVE, _X.GROUP_OWNED, _X.GROUP_LOADED)
#: The checks that a request comes from a member of the group (LeaveGroup v3+ runs them per member).
MEMBER_CHECKS = _MEMBER = (_X.INSTANCE_KNOWN, _X.INSTANCE_NOT_FENCED, _X.MEMBER_KNOWN)

#: Request class → its checks in Kafka's order.  :data:`SKIPPED_CHECKS` names those a kind of request
#: leaves out (a new member's JoinGroup, a simple commit).
CHECKS: Mapping[type, Tuple[Check, ...]] = {
    JoinGroupRequest: (
        _X.COORDINATOR_ACTIVE,
        _X.GROUP_ID_VALID,
        _X.GROUP_OWNED,
        _X.GROUP_LOADED,
        _X.SESSION_TIMEOUT_IN_RANGE,
        _X.GROUP_KNOWN_OR_NEW_MEMBER,
        _X.GROUP_HAS_ROOM,
        _X.PROTOCOL_CONSISTENT,
        *_MEMBER,
        _X.STATE,
    ),
    SyncGroupRequest: (
        _X.COORDINATOR_ACTIVE,
        _X.GROUP_OWNED,
        _X.GROUP_KNOWN,
        *_MEMBER,
        _X.GENERATION_CURRENT,
        _X.SYNC_PROTOCOL_MATCHES,
        _X.STATE,
    ),
    HeartbeatRequest: (
        _X.COORDINATOR_ACTIVE,
        _X.GROUP_OWNED,
        _X.GROUP_LOADED_OR_BLIND_OK,
        _X.GROUP_KNOWN,
        *_MEMBER,
        _X.GENERATION_CURRENT,
        _X.STATE,
    ),
    # LeaveGroup v3+ judges each member of its batch with the member checks, after the common ones.
    LeaveGroupRequest: _COMMON + _MEMBER,
    OffsetCommitRequest: _COMMON + (_X.GROUP_KNOWN_OR_NO_GENERATION, *_MEMBER, _X.GENERATION_CURRENT, _X.STATE),
    OffsetFetchRequest: _COMMON,
    DescribeGroupsRequest: _COMMON + (_X.STATE,),
    DeleteGroupsRequest: _COMMON + (_X.STATE,),
    OffsetDeleteRequest: _COMMON + (_X.GROUP_KNOWN,),
}

#: Request class → how RESPONSES sees it, where one kind fits every request of the class.  Two classes
#: split on the request instead: a JoinGroup is JOIN_NEW_MEMBER when its member id is "" (or a pending
#: member's, without an instance id) and JOIN_KNOWN_MEMBER otherwise; an OffsetCommit is SIMPLE_COMMIT
#: when it names no generation (negative), no member id and no instance id, and OFFSET_COMMIT otherwise.
REQUEST_KINDS: Mapping[type, RequestKind] = {
    SyncGroupRequest: _K.SYNC,
    HeartbeatRequest: _K.HEARTBEAT,
    DescribeGroupsRequest: _K.DESCRIBE,
    DeleteGroupsRequest: _K.DELETE,
}

#: Request kind → the checks of its class it skips: a new member has no member to check, and a simple
#: commit comes from outside group management (no generation, member or instance to check).
SKIPPED_CHECKS: Mapping[RequestKind, FrozenSet[Check]] = {
    _K.JOIN_NEW_MEMBER: frozenset(_MEMBER),
    _K.SIMPLE_COMMIT: frozenset((_X.GROUP_KNOWN_OR_NO_GENERATION, *_MEMBER, _X.GENERATION_CURRENT)),
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
