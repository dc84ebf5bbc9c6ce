"""The rules of the KIP-848 consumer group coordinator (``ConsumerGroupHeartbeat``): the tables
:mod:`kproto.group.consumer_group` applies, and the theory of operation they encode.

Rule 1: every decision taken from a request's fields alone is a table here (how a member epoch is
read, which check answers which error, how a member's reconciliation state moves); the engine
(:class:`~kproto.group.consumer_group.ConsumerGroupCoordinator`) keeps the state the tables do not
hold (members, target assignment, partition owners, deadlines).
Rule 2: api identity is the request class, as in :data:`SERVED_VERSIONS`.

Theory of operation
===================

In the classic protocol the members elect a leader that computes the assignment and every member
stops consuming while it is computed.  KIP-848 moves the assignment into the coordinator and makes a
rebalance incremental: members only heartbeat, and each heartbeat answers with the member's epoch and,
when it changed, its assignment.  docs/group-coordinator.md states the rules in prose.

**Epochs.**  A group has a *group epoch*, bumped whenever what the assignment depends on changes (a
member joins, leaves, is fenced, changes its subscription, or a subscribed topic gains partitions).
The *target assignment* is computed by a server-side assignor (``uniform`` or ``range``,
:mod:`kproto.group.server_assignors`) for a group epoch; its epoch is the *assignment epoch*.  It is
recomputed on the next heartbeat after the group epoch moved past it.  Each member has a *member
epoch*: the assignment epoch it has been reconciled to.

**Reconciliation** moves a member from its current assignment towards its target one partition set
at a time (:data:`MEMBER_TRANSITIONS`).  Partitions it holds that are not in its target must be
revoked first: the member stays at its epoch in ``UNREVOKED_PARTITIONS`` and is told its assignment
without them; only when a heartbeat's owned partitions no longer list them does it move on.
Partitions of its target that another member still holds (assigned or pending revocation) are
withheld: the member takes the target epoch in ``UNRELEASED_PARTITIONS`` and receives them on a later
heartbeat, once released.  So a partition has at most one owner at every moment, and moves only
when its owner changes.  A member that does not revoke within its rebalance timeout is fenced.

**Heartbeats** are read by their member epoch (:data:`EPOCH_KINDS`): 0 joins (or rejoins), -1 leaves,
-2 leaves a static member's place (instance id) for a restart, a positive epoch is a heartbeat of a
member.  The checks of :data:`HEARTBEAT_CHECKS` run in Kafka's order and the first that fails
answers its code.  A heartbeat with a smaller epoch than the member's is accepted only when it is the
member's previous epoch and its owned partitions are within its assignment (the answer carrying the
new epoch was lost); any other mismatch is FENCED_MEMBER_EPOCH.

**Sessions.**  Every heartbeat pushes the member's session deadline to ``now + session timeout``
(``group.consumer.session.timeout.ms``); a member past its deadline is fenced: removed, its partitions
freed, the group epoch bumped.  The heartbeat interval the answers carry is
``group.consumer.heartbeat.interval.ms``.  A static member that left with -2 keeps its assignment and
instance id until its session expires; rejoining under the same instance id (new member id, epoch 0)
takes its place and its assignment.

**Group state** is derived, as Kafka does: ``Empty`` without members, ``Assigning`` while the group
epoch is ahead of the assignment epoch, ``Reconciling`` while a member is not at the assignment epoch
or not ``STABLE``, ``Stable`` otherwise.

**Offsets** of a consumer group live in the store the classic coordinator keeps; OffsetCommit v9+ and
OffsetFetch v9+ carry the member id and epoch and are checked by :data:`OFFSET_CHECKS`.

**Classic groups.**  Kafka's ``group.consumer.migration.policy`` decides whether a group with members
is converted from one protocol to the other.  This coordinator applies ``disabled``: a
ConsumerGroupHeartbeat for a classic group with members is refused GROUP_ID_NOT_FOUND, as Kafka does
under that policy.  Kafka also lets classic members (JoinGroup/SyncGroup/Heartbeat) join a consumer
group, whatever the policy; this coordinator does not host them and refuses such a JoinGroup with
INCONSISTENT_GROUP_PROTOCOL, the code Kafka gives a member whose protocols the group cannot take.  An
empty group of either kind gives way to the other.
"""

from __future__ import annotations

import enum
from typing import Mapping, Tuple

from kproto import ErrorCode
from kproto.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from kproto.state_machine import transitions_by_state

__all__ = [
    "MemberState",
    "ReconcileOutcome",
    "MEMBER_TRANSITIONS",
    "GroupState",
    "EpochKind",
    "epoch_kind",
    "EPOCH_KINDS",
    "Check",
    "CHECK_ERRORS",
    "HEARTBEAT_CHECKS",
    "OFFSET_CHECKS",
    "SERVED_VERSIONS",
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
]

#: The member epochs with a meaning of their own.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(str, enum.Enum):
    """Where a member is in reconciling towards its target assignment (Kafka's MemberState)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ReconcileOutcome(enum.Enum):
    """What one reconciliation step found (the events of :data:`MEMBER_TRANSITIONS`)."""

    MUST_REVOKE = "the member holds partitions outside its target and must revoke them first"
    WITHHELD = "part of the target is still held by another member"
    RECONCILED = "the member holds exactly its target"


#: member state × outcome of a reconciliation step → next state, one row per state.  Every state may
#: reach every outcome: a new target can ask a stable member to revoke, and a withheld partition can be
#: released while another must be revoked.  A member waiting in UNREVOKED_PARTITIONS does not step at
#: all until its owned partitions leave out every partition pending revocation (the engine's check).
MEMBER_TRANSITIONS: Mapping[Tuple[MemberState, ReconcileOutcome], MemberState] = transitions_by_state(
    MemberState,
    ReconcileOutcome,
    """
                           MUST_REVOKE           WITHHELD               RECONCILED
    STABLE                 UNREVOKED_PARTITIONS  UNRELEASED_PARTITIONS  STABLE
    UNREVOKED_PARTITIONS   UNREVOKED_PARTITIONS  UNRELEASED_PARTITIONS  STABLE
    UNRELEASED_PARTITIONS  UNREVOKED_PARTITIONS  UNRELEASED_PARTITIONS  STABLE
    """,
)


class GroupState(str, enum.Enum):
    """A consumer group's state as ConsumerGroupDescribe and ListGroups report it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class EpochKind(enum.Enum):
    """What a heartbeat's member epoch asks for."""

    JOIN = "0: join, or rejoin after losing the assignment"
    LEAVE = "-1: leave the group"
    STATIC_LEAVE = "-2: a static member leaves for a restart, keeping its place"
    HEARTBEAT = "> 0: a member's heartbeat at its epoch"
    INVALID = "any other negative epoch"


def epoch_kind(member_epoch: int) -> EpochKind:
    """How a ConsumerGroupHeartbeat's ``member_epoch`` is read."""
    if member_epoch > 0:
        return EpochKind.HEARTBEAT
    return _EPOCH_KINDS.get(member_epoch, EpochKind.INVALID)


#: The epochs with a meaning of their own → their kind (any positive epoch is a HEARTBEAT).
_EPOCH_KINDS: Mapping[int, EpochKind] = {
    JOIN_EPOCH: EpochKind.JOIN,
    LEAVE_EPOCH: EpochKind.LEAVE,
    STATIC_LEAVE_EPOCH: EpochKind.STATIC_LEAVE,
}
EPOCH_KINDS: Mapping[int, EpochKind] = _EPOCH_KINDS


class Check(enum.Enum):
    """One check of a request (the value says what must hold); :data:`CHECK_ERRORS` gives its code."""

    GROUP_ID_SET = "group_id is not empty"
    INSTANCE_ID_NOT_EMPTY = "instance_id is null or not empty"
    RACK_ID_NOT_EMPTY = "rack_id is null or not empty"
    EPOCH_VALID = "member_epoch is 0, -1, -2 or positive"
    MEMBER_ID_SET = "member_id is set (v1+: always; v0: unless joining)"
    STATIC_LEAVE_HAS_INSTANCE = "a -2 leave names its instance id"
    JOIN_HAS_REBALANCE_TIMEOUT = "a join carries rebalance_timeout_ms"
    JOIN_OWNS_NOTHING = "a join lists no owned partitions"
    JOIN_HAS_SUBSCRIPTION = "a join subscribes to topic names or a regular expression"
    SUBSCRIPTION_BOUNDED = "the subscription holds at most the configured number of topic names"
    ASSIGNOR_KNOWN = "server_assignor, if given, is one this coordinator runs"
    REGEX_VALID = "subscribed_topic_regex, if given, is a regular expression RE2 accepts, of bounded size"
    NOT_CLASSIC_GROUP = "the group is not a classic group with members (migration policy: disabled)"
    GROUP_EXISTS = "the group exists (only a join creates one)"
    GROUP_HAS_ROOM = "the member is known, or the group is below its maximum size"
    INSTANCE_RELEASED = "a joining static member's instance id is free or was left with -2"
    INSTANCE_OWNED = "a static member's instance id belongs to this member id"
    MEMBER_KNOWN = "member_id belongs to the group"
    EPOCH_CURRENT = "member_epoch is the member's, or its previous one with owned partitions within its assignment"
    OFFSET_MEMBER_KNOWN = "an OffsetCommit/OffsetFetch member id belongs to the group"
    OFFSET_EPOCH_CURRENT = "an OffsetCommit/OffsetFetch member epoch is the member's current one"
    OFFSET_VERSION = "a consumer-protocol member commits with OffsetCommit v9+"

    @property
    def error_code(self) -> ErrorCode:
        """The code answered when this check fails."""
        return CHECK_ERRORS[self]


_X = Check
_C = ErrorCode

#: The checks of a request's own fields whose failure is an INVALID_REQUEST, whichever field it is.
_MALFORMED = (
    _X.GROUP_ID_SET,
    _X.INSTANCE_ID_NOT_EMPTY,
    _X.RACK_ID_NOT_EMPTY,
    _X.EPOCH_VALID,
    _X.MEMBER_ID_SET,
    _X.STATIC_LEAVE_HAS_INSTANCE,
    _X.JOIN_HAS_REBALANCE_TIMEOUT,
    _X.JOIN_OWNS_NOTHING,
    _X.JOIN_HAS_SUBSCRIPTION,
    _X.SUBSCRIPTION_BOUNDED,
)

#: check → the code answered when it fails.
CHECK_ERRORS: Mapping[Check, ErrorCode] = {
    **dict.fromkeys(_MALFORMED, _C.INVALID_REQUEST),
    _X.ASSIGNOR_KNOWN: _C.UNSUPPORTED_ASSIGNOR,
    _X.REGEX_VALID: _C.INVALID_REGULAR_EXPRESSION,
    _X.NOT_CLASSIC_GROUP: _C.GROUP_ID_NOT_FOUND,
    _X.GROUP_EXISTS: _C.GROUP_ID_NOT_FOUND,
    _X.GROUP_HAS_ROOM: _C.GROUP_MAX_SIZE_REACHED,
    _X.INSTANCE_RELEASED: _C.UNRELEASED_INSTANCE_ID,
    _X.INSTANCE_OWNED: _C.FENCED_INSTANCE_ID,
    _X.MEMBER_KNOWN: _C.UNKNOWN_MEMBER_ID,
    _X.EPOCH_CURRENT: _C.FENCED_MEMBER_EPOCH,
    _X.OFFSET_MEMBER_KNOWN: _C.UNKNOWN_MEMBER_ID,
    _X.OFFSET_EPOCH_CURRENT: _C.STALE_MEMBER_EPOCH,
    _X.OFFSET_VERSION: _C.UNSUPPORTED_VERSION,
}

#: ConsumerGroupHeartbeat's checks in Kafka's order: first the request's own fields, then the group,
#: then the member.  The engine skips those that do not apply to the epoch's kind (a join has no
#: member to check yet; only a join may create the group).
HEARTBEAT_CHECKS: Tuple[Check, ...] = (
    *_MALFORMED,
    _X.ASSIGNOR_KNOWN,
    _X.REGEX_VALID,
    _X.NOT_CLASSIC_GROUP,
    _X.GROUP_EXISTS,
    _X.GROUP_HAS_ROOM,
    _X.INSTANCE_RELEASED,
    _X.INSTANCE_OWNED,
    _X.MEMBER_KNOWN,
    _X.EPOCH_CURRENT,
)

#: OffsetCommit/OffsetFetch to a consumer group.  A negative epoch with no member is an admin commit
#: or fetch, accepted (a commit only while the group has no members, as Kafka).
OFFSET_CHECKS: Tuple[Check, ...] = (_X.OFFSET_MEMBER_KNOWN, _X.OFFSET_VERSION, _X.OFFSET_EPOCH_CURRENT)

#: Request class → the (lowest, highest) version the coordinator answers.  v1 adds the regular
#: expression subscription and requires a client-made member id.
SERVED_VERSIONS: Mapping[type, Tuple[int, int]] = {
    ConsumerGroupHeartbeatRequest: (0, 1),
    ConsumerGroupDescribeRequest: (0, 1),
}
