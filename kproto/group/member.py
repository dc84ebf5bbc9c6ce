"""A consumer group member (client side) as a sans-I/O state machine.

Theory of operation
===================

A :class:`GroupMember` is the group-management half of a Java consumer: it finds the group's
coordinator, joins, syncs, then heartbeats, and reacts to the coordinator's error codes the way
``AbstractCoordinator``/``ConsumerCoordinator`` do (docs/protocol-notes.md, "Group membership";
docs/group-coordinator.md for the modern versions).  It owns no socket, thread or clock.  Every input
method takes ``now_ms`` and returns a list of *actions*:

* :class:`SendRequest` — send ``request`` (a generated message of :mod:`kproto.messages`) in
  ``api_version`` to ``destination`` (the coordinator, or any broker when ``destination`` is None) and
  hand the decoded response back with :meth:`GroupMember.receive` under the same ``request_id``, or
  report a lost connection with :meth:`GroupMember.request_failed`.  Without ``api_versions`` the
  versions are the :data:`REQUEST_VERSIONS` table, those of the 0.9 Java consumer (for a broker that
  cannot answer ApiVersions); given the versions negotiated from the broker's ApiVersions
  (:func:`kproto.versions.negotiate`), each API is sent in the highest of them up to
  :data:`MAX_VERSIONS`.  Answers to requests the member no longer waits for (an older generation, a
  forgotten coordinator) are ignored.
* events for the application: :class:`PartitionsRevoked`, :class:`PartitionsAssigned`,
  :class:`MetadataNeeded`, :class:`OffsetsCommitted`, :class:`GroupFailed`.

Timers are deadlines: :meth:`GroupMember.next_deadline_ms` says when :meth:`GroupMember.tick` must be
called next (heartbeats, the local session check, retry backoffs, periodic auto-commit).

**States and transitions** are the :data:`TRANSITIONS` table (state × event → state); entering a state
performs that state's entry action (send GroupCoordinator, OffsetCommit, JoinGroup or SyncGroup; ask for
metadata; start heartbeating).  Where a response leads depends on three facts the member keeps:

* ``rejoin needed`` — set at start and by REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
  UNKNOWN_MEMBER_ID; cleared by a successful JoinGroup;
* ``join prepared`` — the pre-join work (commit offsets if auto-commit is on, then revoke the owned
  partitions) is done once per rebalance, not again when a JoinGroup or SyncGroup fails; cleared by a
  successful SyncGroup;
* the member id — UNKNOWN_MEMBER_ID resets it to "" before rejoining; MEMBER_ID_REQUIRED (JoinGroup
  v4+) hands the member its id, and it joins again at once with it.

**Static membership** (``MemberConfig.group_instance_id``, JoinGroup v5+): the instance id travels in
JoinGroup, SyncGroup, Heartbeat, OffsetCommit (v7+) and LeaveGroup (v3+).  A static member does *not*
leave the group on :meth:`GroupMember.close`, as Java's consumer does not: a restart within the
session timeout then gets its old assignment back without a rebalance.  FENCED_INSTANCE_ID (another
process took the instance id) is fatal.  A JoinGroup v9 answer with ``skip_assignment`` tells a
restarted static leader not to run the assignor: it syncs with no assignments and gets its own.

After the coordinator is found the member resumes heartbeating if no rejoin is needed, prepares the
join if it is not yet prepared, and otherwise joins.

**An application that stops polling** (Java's ``max.poll.interval.ms``, which JoinGroup v1+ also carries
as the rebalance timeout) is the caller's to notice: it calls :meth:`GroupMember.poll_timeout`, and the
member leaves as Java's consumer does -- a dynamic member sends LeaveGroup; every member forgets its
member id and generation and gives its partitions up without committing (they are lost: the group
reassigns them, and a commit from a member that left would be refused).  It then waits in ``LEFT`` until
:meth:`GroupMember.rejoin` (the application polled again) sends it back to discovery and a fresh join.

**Errors** are the :data:`REACTIONS` table (request class × error code → reaction).  Losing the coordinator
(GROUP_COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR_FOR_GROUP, a lost connection, or no successful
heartbeat for a whole session timeout) sends the member back to discovery *without* revoking its
partitions: the application keeps fetching, and the coordinator decides on rediscovery whether the
generation is still current.  INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID,
GROUP_AUTHORIZATION_FAILED, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED and unexpected codes end in
``FAILED``.

**The leader** (its JoinGroup answer lists the members) decodes every member's subscription with the
injected :class:`ConsumerCodec`, runs the assignor the coordinator selected on the partition
counts it knows, and sends the encoded assignments in its SyncGroup.  If it lacks the partition count of
a subscribed topic it first emits :class:`MetadataNeeded` and waits for
:meth:`GroupMember.update_metadata`; topics still unknown then are skipped, as Java does.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Type,
    Union,
)

from kproto import ErrorCode
from kproto.errors import LocalProtocolError, RemoteProtocolError
from kproto.group.assignors import ASSIGNORS, AssignorFunction
from kproto.group.consumer_codec import ConsumerProtocolCodec
from kproto.message_base import Message
from kproto.state_machine import StateMachine, transitions_by_event

if TYPE_CHECKING:  # the element classes, by their module-level names (a nested name is an alias to mypy)
    from kproto._generated.join_group import JoinGroupResponse_JoinGroupResponseMember
    from kproto._generated.offset_commit import OffsetCommitRequest_OffsetCommitRequestPartition
    from kproto._generated.sync_group import SyncGroupRequest_SyncGroupRequestAssignment
from kproto.messages import (
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "MemberState",
    "MemberEvent",
    "REQUEST_VERSIONS",
    "MAX_VERSIONS",
    "choose_versions",
    "OffsetsFetched",
    "TRANSITIONS",
    "Reaction",
    "REACTIONS",
    "ConsumerCodec",
    "MemberConfig",
    "CoordinatorNode",
    "SendRequest",
    "PartitionsRevoked",
    "PartitionsAssigned",
    "MetadataNeeded",
    "OffsetsCommitted",
    "GroupFailed",
    "Action",
    "GroupMember",
]

TopicPartition = Tuple[str, int]


# --------------------------------------------------------------------------------------------------
# The tables


class MemberState(enum.Enum):
    """Where the member is in the group protocol."""

    UNJOINED = "not started"
    DISCOVERING = "looking for the coordinator"
    PREPARING_REJOIN = "committing offsets before revoking and rejoining"
    JOINING = "JoinGroup in flight"
    AWAITING_METADATA = "leader waiting for partition counts before assigning"
    SYNCING = "SyncGroup in flight"
    STABLE = "member of the current generation, heartbeating"
    LEFT = "left the group because the application stopped polling; rejoins when it polls again"
    FAILED = "stopped by a fatal group error"
    CLOSED = "left the group"


class MemberEvent(enum.Enum):
    """What moves the member from one state to another."""

    START = "start() was called"
    RESUME = "coordinator found, current generation still believed valid"
    PREPARE_JOIN = "a rejoin is needed and the pre-join work is not done yet"
    JOIN = "a rejoin is needed and the pre-join work is done"
    COORDINATOR_LOST = "coordinator unavailable, moved, disconnected or silent for a session"
    JOINED_AS_FOLLOWER = "JoinGroup answered, no members list"
    JOINED_AS_LEADER = "JoinGroup answered with the members; partition counts known"
    JOINED_AS_LEADER_WITHOUT_METADATA = "JoinGroup answered with the members; partition counts missing"
    METADATA_UPDATED = "update_metadata() was called"
    SYNCED = "SyncGroup answered with this member's assignment"
    FATAL_ERROR = "an error the protocol does not retry"
    POLL_TIMEOUT = "poll_timeout(): the application did not poll within max.poll.interval"
    REJOIN = "rejoin(): the application polls again after a poll timeout"
    CLOSE = "close() was called"


_S = MemberState
_E = MemberEvent
_ACTIVE = (_S.DISCOVERING, _S.PREPARING_REJOIN, _S.JOINING, _S.AWAITING_METADATA, _S.SYNCING, _S.STABLE)
_TALKING = (_S.PREPARING_REJOIN, _S.JOINING, _S.AWAITING_METADATA, _S.SYNCING, _S.STABLE)

#: state × event → next state, one row per event, the states in two parts; ``-`` is an illegal move (a
#: LocalProtocolError, i.e. a bug).  The table is applied by :class:`kproto.state_machine.StateMachine`.
TRANSITIONS: Mapping[Tuple[MemberState, MemberEvent], MemberState] = transitions_by_event(
    MemberState,
    MemberEvent,
    """
                                       UNJOINED     DISCOVERING       PREPARING_REJOIN  JOINING
    START                              DISCOVERING  -                 -                 -
    RESUME                             -            STABLE            -                 -
    PREPARE_JOIN                       -            PREPARING_REJOIN  -                 -
    JOIN                               -            JOINING           JOINING           JOINING
    COORDINATOR_LOST                   -            -                 DISCOVERING       DISCOVERING
    JOINED_AS_FOLLOWER                 -            -                 -                 SYNCING
    JOINED_AS_LEADER                   -            -                 -                 SYNCING
    JOINED_AS_LEADER_WITHOUT_METADATA  -            -                 -                 AWAITING_METADATA
    METADATA_UPDATED                   -            -                 -                 -
    SYNCED                             -            -                 -                 -
    FATAL_ERROR                        -            FAILED            FAILED            FAILED
    POLL_TIMEOUT                       -            LEFT              LEFT              LEFT
    REJOIN                             -            -                 -                 -
    CLOSE                              CLOSED       CLOSED            CLOSED            CLOSED

                                       AWAITING_METADATA  SYNCING      STABLE            LEFT         FAILED  CLOSED
    START                              -                  -            -                 -            -       -
    RESUME                             -                  -            -                 -            -       -
    PREPARE_JOIN                       -                  -            PREPARING_REJOIN  -            -       -
    JOIN                               JOINING            JOINING      -                 -            -       -
    COORDINATOR_LOST                   DISCOVERING        DISCOVERING  DISCOVERING       -            -       -
    JOINED_AS_FOLLOWER                 -                  -            -                 -            -       -
    JOINED_AS_LEADER                   -                  -            -                 -            -       -
    JOINED_AS_LEADER_WITHOUT_METADATA  -                  -            -                 -            -       -
    METADATA_UPDATED                   SYNCING            -            -                 -            -       -
    SYNCED                             -                  STABLE       -                 -            -       -
    FATAL_ERROR                        FAILED             FAILED       FAILED            -            -       -
    POLL_TIMEOUT                       LEFT               LEFT         LEFT              -            -       -
    REJOIN                             -                  -            -                 DISCOVERING  -       -
    CLOSE                              CLOSED             CLOSED       CLOSED            CLOSED       CLOSED  -
    """,
)


class Reaction(enum.Enum):
    """What the member does about an error code in a response."""

    RETRY = "send the same request again after the retry backoff"
    REJOIN = "rejoin the group"
    RESET_MEMBER_ID_AND_REJOIN = "forget the member id, then rejoin"
    REJOIN_WITH_GIVEN_ID = "take the member id the answer carries and join again at once"
    REDISCOVER = "forget the coordinator and find it again (keep the partitions)"
    REPORT = "tell the application, change nothing"
    FAIL = "stop: the application must intervene"


_R = Reaction
_C = ErrorCode
_COORDINATOR_GONE = {_C.GROUP_COORDINATOR_NOT_AVAILABLE: _R.REDISCOVER, _C.NOT_COORDINATOR_FOR_GROUP: _R.REDISCOVER}
_MEMBERSHIP_GONE = {
    _C.REBALANCE_IN_PROGRESS: _R.REJOIN,
    _C.ILLEGAL_GENERATION: _R.REJOIN,
    _C.UNKNOWN_MEMBER_ID: _R.RESET_MEMBER_ID_AND_REJOIN,
}

#: Request class → {error code → reaction}.  A code not listed gets the API's entry under ErrorCode.UNKNOWN.
REACTIONS: Mapping[Type[Message], Mapping[ErrorCode, Reaction]] = {
    GroupCoordinatorRequest: {_C.GROUP_AUTHORIZATION_FAILED: _R.FAIL, _C.UNKNOWN: _R.RETRY},
    JoinGroupRequest: {
        **_COORDINATOR_GONE,
        **_MEMBERSHIP_GONE,
        _C.GROUP_LOAD_IN_PROGRESS: _R.RETRY,
        _C.MEMBER_ID_REQUIRED: _R.REJOIN_WITH_GIVEN_ID,
        _C.UNKNOWN: _R.FAIL,
    },
    SyncGroupRequest: {**_COORDINATOR_GONE, **_MEMBERSHIP_GONE, _C.UNKNOWN: _R.FAIL},
    HeartbeatRequest: {**_COORDINATOR_GONE, **_MEMBERSHIP_GONE, _C.UNKNOWN: _R.FAIL},
    OffsetCommitRequest: {**_COORDINATOR_GONE, **_MEMBERSHIP_GONE, _C.UNKNOWN: _R.REPORT},
}


def _reaction(api: str, code: int) -> Reaction:
    """The reaction to ``code`` answering the request the member knows as ``api``."""
    table = REACTIONS[REQUEST_VERSIONS[api][0]]
    return table.get(ErrorCode(code), table[_C.UNKNOWN])


# --------------------------------------------------------------------------------------------------
# Configuration, injected codec, actions


class ConsumerCodec(Protocol):
    """Encodes the embedded consumer protocol; :class:`kproto.group.consumer_codec.ConsumerProtocolCodec` is one."""

    def encode_subscription(self, topics: Sequence[str]) -> bytes:
        """ConsumerProtocolMemberMetadata v0 bytes for a subscription (empty user data)."""

    def decode_subscription(self, data: bytes) -> List[str]:
        """The subscribed topics from ConsumerProtocolMemberMetadata bytes."""

    def encode_assignment(self, assignment: Mapping[str, Sequence[int]]) -> bytes:
        """ConsumerProtocolMemberAssignment v0 bytes for {topic: partitions} (empty user data)."""

    def decode_assignment(self, data: bytes) -> Dict[str, List[int]]:
        """{topic: partitions} from ConsumerProtocolMemberAssignment bytes (empty bytes: nothing)."""


@dataclass(frozen=True)
class MemberConfig:
    """Consumer settings that shape the member's group behaviour (0.9 Java defaults)."""

    group_id: str
    client_id: str
    topics: Tuple[str, ...]
    #: ``partition.assignment.strategy``: assignor names, most preferred first
    assignors: Tuple[str, ...] = ("range",)
    session_timeout_ms: int = 30000
    heartbeat_interval_ms: int = 3000
    retry_backoff_ms: int = 100
    #: ``enable.auto.commit``: commit positions before every rebalance and every interval
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    protocol_type: str = "consumer"
    #: ``group.instance.id``: a static member (JoinGroup v5+); None: a dynamic member
    group_instance_id: Optional[str] = None
    #: JoinGroup v1+ rebalance timeout (Java: ``max.poll.interval.ms``); None: the session timeout,
    #: which is what a v0 JoinGroup means
    rebalance_timeout_ms: Optional[int] = None


@dataclass(frozen=True)
class CoordinatorNode:
    """The broker that coordinates the group, from the GroupCoordinator response."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class SendRequest:
    """Send ``request`` to ``destination`` (None: any broker) and report the outcome under ``request_id``."""

    request_id: int
    request: Message
    api_version: int
    destination: Optional[CoordinatorNode]


@dataclass(frozen=True)
class PartitionsRevoked:
    """The member gives up these partitions (before rejoining): stop fetching them."""

    partitions: Tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsAssigned:
    """The member owns these partitions in ``generation_id``: start fetching them."""

    generation_id: int
    partitions: Tuple[TopicPartition, ...]


@dataclass(frozen=True)
class MetadataNeeded:
    """The leader needs partition counts for these topics; answer with ``update_metadata``."""

    topics: Tuple[str, ...]


@dataclass(frozen=True)
class OffsetsCommitted:
    """The coordinator answered an OffsetCommit the member sent."""

    request_id: int
    response: OffsetCommitResponse


@dataclass(frozen=True)
class OffsetsFetched:
    """The coordinator answered :meth:`GroupMember.fetch_committed`: (topic, partition) → (offset, metadata).

    An offset of −1 means nothing is committed.  ``error_code`` is the first error the answer carried
    (0: none); on an error ``offsets`` holds what could be read.
    """

    request_id: int
    offsets: Mapping[TopicPartition, Tuple[int, Optional[str]]]
    error_code: int = 0


@dataclass(frozen=True)
class GroupFailed:
    """A fatal group error: the member stopped (state FAILED)."""

    api: str
    error_code: int


Action = Union[
    SendRequest, PartitionsRevoked, PartitionsAssigned, MetadataNeeded, OffsetsCommitted, OffsetsFetched, GroupFailed
]


# --------------------------------------------------------------------------------------------------
# The member


@dataclass
class _InFlight:
    request_id: int
    api: str
    to_coordinator: bool
    before_rejoin: bool = False  # the commit of the pre-join work


#: API → (request class, the version the member sends it in, the response class it expects back).
#: The versions are the 0.9 Java consumer's (OffsetCommit v2 carries the retention time); they are used
#: when no negotiated versions are given.
REQUEST_VERSIONS: Mapping[str, Tuple[Type[Message], int, Type[Message]]] = {
    "group_coordinator": (GroupCoordinatorRequest, 0, GroupCoordinatorResponse),
    "join_group": (JoinGroupRequest, 0, JoinGroupResponse),
    "sync_group": (SyncGroupRequest, 0, SyncGroupResponse),
    "heartbeat": (HeartbeatRequest, 0, HeartbeatResponse),
    "offset_commit": (OffsetCommitRequest, 2, OffsetCommitResponse),
    "leave_group": (LeaveGroupRequest, 0, LeaveGroupResponse),
    "offset_fetch": (OffsetFetchRequest, 1, OffsetFetchResponse),
}

#: API → the highest version the member speaks.  FindCoordinator stops at v3 (v4 batches keys).
MAX_VERSIONS: Mapping[str, int] = {
    "group_coordinator": 3,
    "join_group": 9,
    "sync_group": 5,
    "heartbeat": 4,
    "offset_commit": 9,
    "leave_group": 5,
    "offset_fetch": 7,
}

#: The lowest version of each API that carries a static member's ``group_instance_id``.
_INSTANCE_ID_SINCE: Mapping[str, int] = {
    "join_group": 5,
    "sync_group": 3,
    "heartbeat": 3,
    "offset_commit": 7,
    "leave_group": 3,
}


def choose_versions(api_versions: Optional[Mapping[int, int]]) -> Dict[str, int]:
    """The version of each member API: negotiated ones capped at :data:`MAX_VERSIONS`, else the 0.9 table.

    ``api_versions`` maps api key → the version both sides support (what :func:`kproto.versions.negotiate`
    returns); None means the broker lacks ApiVersions (0.9), so the :data:`REQUEST_VERSIONS` are used.
    """
    chosen = {}
    for api, (request_class, version, _) in REQUEST_VERSIONS.items():
        api_key: Any = request_class.API_KEY  # set on every generated request class
        if api_versions is not None and api_key in api_versions:
            version = min(api_versions[api_key], MAX_VERSIONS[api])
        chosen[api] = version
    return chosen


class GroupMember:
    """One consumer's group membership; see the module docstring for the rules.

    ``api_versions`` (api key → version, as :func:`kproto.versions.negotiate` gives them) selects the
    modern versions; without it the member speaks the 0.9 versions.  :attr:`versions` shows the choice;
    :meth:`set_api_versions` changes it (e.g. once the coordinator's connection has negotiated).

    Added with the modern versions, all optional: ``MemberConfig.group_instance_id`` and
    ``rebalance_timeout_ms``, the ``api_versions`` argument, :meth:`set_api_versions`,
    :meth:`fetch_committed` with its :class:`OffsetsFetched` event.
    """

    def __init__(
        self,
        config: MemberConfig,
        codec: Optional[ConsumerCodec] = None,
        *,
        assignors: Mapping[str, AssignorFunction] = ASSIGNORS,
        api_versions: Optional[Mapping[int, int]] = None,
    ) -> None:
        unknown = [name for name in config.assignors if name not in assignors]
        if unknown or not config.assignors:
            raise ValueError(f"unknown or missing assignors: {unknown or config.assignors}")
        self.config = config
        #: API name → the version the member sends it in
        self.versions: Dict[str, int] = choose_versions(api_versions)
        self._codec: ConsumerCodec = codec if codec is not None else ConsumerProtocolCodec()
        self._assignors = assignors
        self._machine: StateMachine[MemberState, MemberEvent] = StateMachine(
            TRANSITIONS, MemberState.UNJOINED, "member"
        )
        self.member_id = ""
        self.generation_id = -1
        self.leader_id = ""
        self.protocol = ""
        self.coordinator: Optional[CoordinatorNode] = None
        self.assignment: Dict[str, List[int]] = {}
        self._partitions_per_topic: Dict[str, int] = {}
        self._positions: Dict[TopicPartition, int] = {}
        self._rejoin_needed = True
        self._join_prepared = False
        self._leader_members: List["JoinGroupResponse_JoinGroupResponseMember"] = []
        self._skip_assignment = False
        self._in_flight: Dict[int, _InFlight] = {}
        self._ids = itertools.count(1)
        self._now_ms = 0
        self._retry_at_ms: Optional[int] = None
        self._next_heartbeat_ms: Optional[int] = None
        self._last_heartbeat_ok_ms = 0
        self._next_auto_commit_ms: Optional[int] = None
        self._actions: List[Action] = []

    # ---------------------------------------------------------------- inputs

    @property
    def state(self) -> MemberState:
        """Where the member stands (moved only through :data:`TRANSITIONS`)."""
        return self._machine.state

    def set_api_versions(self, api_versions: Optional[Mapping[int, int]]) -> None:
        """Use these negotiated versions (None: the 0.9 ones) for every request from now on."""
        self.versions = choose_versions(api_versions)

    def start(self, now_ms: int) -> List[Action]:
        """Begin: discover the coordinator, then join."""
        self._set_time(now_ms)
        self._fire(MemberEvent.START)
        return self._take()

    def receive(self, request_id: int, response: Message, now_ms: int) -> List[Action]:
        """Hand in the decoded response to a :class:`SendRequest`; answers no longer awaited are ignored."""
        self._set_time(now_ms)
        pending = self._in_flight.get(request_id)
        if pending is None:
            return []
        expected = REQUEST_VERSIONS[pending.api][2]
        if not isinstance(response, expected):
            raise RemoteProtocolError(
                f"request {request_id} ({pending.api}) answered by {type(response).__name__}, not {expected.__name__}"
            )
        del self._in_flight[request_id]
        _RESPONSE_HANDLERS[pending.api](self, pending, response)
        return self._take()

    def request_failed(self, request_id: int, now_ms: int) -> List[Action]:
        """The connection carrying the request broke before an answer came."""
        self._set_time(now_ms)
        pending = self._in_flight.pop(request_id, None)
        if pending is None:
            return []
        if pending.to_coordinator:
            self._lose_coordinator()
        else:
            self._retry_at_ms = self._now_ms + self.config.retry_backoff_ms
        return self._take()

    def coordinator_disconnected(self, now_ms: int) -> List[Action]:
        """The connection to the coordinator broke: whatever was in flight to it is lost; rediscover."""
        self._set_time(now_ms)
        if self.coordinator is not None and self.state in _TALKING:
            self._lose_coordinator()
        return self._take()

    def update_metadata(self, partitions_per_topic: Mapping[str, int], now_ms: int) -> List[Action]:
        """Partition counts of topics (merged into what the member knows); unblocks a waiting leader."""
        self._set_time(now_ms)
        self._partitions_per_topic.update(partitions_per_topic)
        if self.state is MemberState.AWAITING_METADATA:
            self._fire(MemberEvent.METADATA_UPDATED)
        return self._take()

    def set_position(self, topic: str, partition: int, offset: int) -> None:
        """Record the application's position (the next offset to consume) for auto-commit."""
        self._positions[(topic, partition)] = offset

    def commit(self, now_ms: int, offsets: Optional[Mapping[TopicPartition, int]] = None) -> List[Action]:
        """Commit ``offsets`` (default: the positions of owned partitions) for the current generation."""
        self._set_time(now_ms)
        if self.state is not MemberState.STABLE:
            raise LocalProtocolError(f"cannot commit in state {self.state.name}: no current generation")
        self._send_commit(self._owned_positions() if offsets is None else dict(offsets))
        return self._take()

    def close(self, now_ms: int) -> List[Action]:
        """Commit (if auto-commit is on) and leave the group, without waiting for answers."""
        self._set_time(now_ms)
        if self.state is MemberState.CLOSED:
            return []
        if self.state is MemberState.STABLE and self.config.auto_commit and self._owned_positions():
            self._send_commit(self._owned_positions())
        self._send_leave()
        self._fire(MemberEvent.CLOSE)
        self._in_flight.clear()
        return self._take()

    def poll_timeout(self, now_ms: int) -> List[Action]:
        """The application did not poll within ``max.poll.interval.ms``: leave the group (see the module
        docstring) and give up the partitions; :meth:`rejoin` comes back.  Ignored unless the member is
        active (joining, joined or looking for the coordinator)."""
        self._set_time(now_ms)
        if self.state not in _ACTIVE:
            return []
        self._send_leave()
        revoked = self._owned_partitions()
        self.assignment = {}
        self.member_id = ""
        self.generation_id = -1
        self._rejoin_needed = True
        self._join_prepared = True  # nothing to commit or revoke on the way back: it is done here
        self._in_flight.clear()  # answers to anything sent before, the LeaveGroup's included, are ignored
        self._next_heartbeat_ms = self._next_auto_commit_ms = None
        self._actions.append(PartitionsRevoked(revoked))
        self._fire(MemberEvent.POLL_TIMEOUT)
        return self._take()

    def rejoin(self, now_ms: int) -> List[Action]:
        """After :meth:`poll_timeout`: find the coordinator and join again (a no-op in any other state)."""
        self._set_time(now_ms)
        if self.state is MemberState.LEFT:
            self._fire(MemberEvent.REJOIN)
        return self._take()

    def _send_leave(self) -> None:
        """LeaveGroup for a dynamic member in touch with its coordinator (static members never leave:
        their session ends it, so that a restart within it keeps the assignment)."""
        static = self.config.group_instance_id is not None
        if self.coordinator is not None and self.member_id and self.state in _TALKING and not static:
            if self.versions["leave_group"] >= 3:
                identity = LeaveGroupRequest.MemberIdentity(member_id=self.member_id)
                request = LeaveGroupRequest(group_id=self.config.group_id, members=[identity])
            else:
                request = LeaveGroupRequest(group_id=self.config.group_id, member_id=self.member_id)
            self._send("leave_group", request)

    def fetch_committed(self, partitions: Sequence[TopicPartition], now_ms: int) -> List[Action]:
        """Ask the coordinator for the group's committed offsets; answered by an :class:`OffsetsFetched`.

        Needs a known coordinator (any state from joining on).  With OffsetFetch v7+ the request asks for
        stable offsets (``require_stable``), as Java does.
        """
        self._set_time(now_ms)
        if self.coordinator is None or self.state not in _TALKING:
            raise LocalProtocolError(f"cannot fetch offsets in state {self.state.name}: no coordinator")
        by_topic: Dict[str, List[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        Topic = OffsetFetchRequest.OffsetFetchRequestTopic
        request = OffsetFetchRequest(
            group_id=self.config.group_id,
            topics=[Topic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            require_stable=self.versions["offset_fetch"] >= 7,
        )
        self._send("offset_fetch", request)
        return self._take()

    def tick(self, now_ms: int) -> List[Action]:
        """Run whatever timer is due: resend after backoff, session check, heartbeat, auto-commit."""
        self._set_time(now_ms)
        if self._retry_at_ms is not None and now_ms >= self._retry_at_ms:
            self._retry_at_ms = None
            self._enter(self.state)  # entry actions send the state's request
        if self.state is MemberState.STABLE:
            self._stable_timers()
        return self._take()

    def next_deadline_ms(self) -> Optional[int]:
        """When :meth:`tick` must run next, or None if only an answer can move the member."""
        deadlines = [self._retry_at_ms]
        if self.state is MemberState.STABLE:
            deadlines.append(self._last_heartbeat_ok_ms + self.config.session_timeout_ms)
            if not self._has_in_flight("heartbeat"):
                deadlines.append(self._next_heartbeat_ms)
            if not self._has_in_flight("offset_commit"):
                deadlines.append(self._next_auto_commit_ms)
        return min((d for d in deadlines if d is not None), default=None)

    # ---------------------------------------------------------------- transitions

    def _fire(self, event: MemberEvent) -> None:
        self._machine.fire(event)
        self._retry_at_ms = None  # a pending retry belonged to the state being left
        self._enter(self.state)

    def _enter(self, state: MemberState) -> None:
        """The entry action of ``state`` (also re-run when a retry backoff ends)."""
        entry = {
            MemberState.DISCOVERING: self._send_discovery,
            MemberState.PREPARING_REJOIN: self._prepare_join,
            MemberState.JOINING: self._send_join,
            MemberState.AWAITING_METADATA: self._ask_metadata,
            MemberState.SYNCING: self._send_sync,
            MemberState.STABLE: self._start_heartbeats,
        }.get(state)
        if entry is not None:
            entry()

    def _next_step(self) -> MemberEvent:
        """Where to go once the coordinator is known (or a rejoin is requested)."""
        if not self._rejoin_needed:
            return MemberEvent.RESUME
        return MemberEvent.JOIN if self._join_prepared else MemberEvent.PREPARE_JOIN

    def _react(self, api: str, code: int, member_id: str = "") -> None:
        reaction = _reaction(api, code)
        if reaction is Reaction.RETRY:
            self._retry_at_ms = self._now_ms + self.config.retry_backoff_ms
        elif reaction is Reaction.REDISCOVER:
            self._lose_coordinator()
        elif reaction is Reaction.FAIL:
            self._actions.append(GroupFailed(api, code))
            self._fire(MemberEvent.FATAL_ERROR)
        elif reaction is Reaction.REJOIN_WITH_GIVEN_ID:
            self.member_id = member_id
            self._fire(MemberEvent.JOIN)
        elif reaction in (Reaction.REJOIN, Reaction.RESET_MEMBER_ID_AND_REJOIN):
            if reaction is Reaction.RESET_MEMBER_ID_AND_REJOIN:
                self.member_id = ""
            self._rejoin_needed = True
            if self.state is not MemberState.PREPARING_REJOIN:  # it joins once its commit is answered
                self._fire(self._next_step())

    def _lose_coordinator(self) -> None:
        """Forget the coordinator and everything in flight to it; keep the partitions."""
        self.coordinator = None
        self._in_flight = {rid: p for rid, p in self._in_flight.items() if not p.to_coordinator}
        self._retry_at_ms = None
        self._fire(MemberEvent.COORDINATOR_LOST)

    # ---------------------------------------------------------------- entry actions and responses

    def _send_discovery(self) -> None:
        if not self._has_in_flight("group_coordinator"):
            self._send("group_coordinator", GroupCoordinatorRequest(key=self.config.group_id), to_coordinator=False)

    def _on_group_coordinator(self, pending: _InFlight, response: GroupCoordinatorResponse) -> None:
        if self.state is not MemberState.DISCOVERING:
            return
        if response.error_code != ErrorCode.NONE:
            self._react("group_coordinator", response.error_code)
            return
        self.coordinator = CoordinatorNode(response.node_id, response.host, response.port)
        self._fire(self._next_step())

    def _prepare_join(self) -> None:
        """Pre-join work: commit positions (auto-commit), then revoke; the join follows."""
        owned = self._owned_positions()
        if self.config.auto_commit and owned and self.member_id and self.generation_id >= 0:
            self._send_commit(owned, before_rejoin=True)
        else:
            self._finish_prepare()

    def _finish_prepare(self) -> None:
        revoked = self._owned_partitions()
        self.assignment = {}
        self._join_prepared = True
        self._actions.append(PartitionsRevoked(revoked))
        self._fire(MemberEvent.JOIN)

    def _send_join(self) -> None:
        subscription = self._codec.encode_subscription(list(self.config.topics))
        Protocol = JoinGroupRequest.JoinGroupRequestProtocol
        rebalance_timeout = self.config.rebalance_timeout_ms
        if rebalance_timeout is None:
            rebalance_timeout = self.config.session_timeout_ms
        request = JoinGroupRequest(
            group_id=self.config.group_id,
            session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout if self.versions["join_group"] >= 1 else -1,
            member_id=self.member_id,
            group_instance_id=self._instance_id("join_group"),
            protocol_type=self.config.protocol_type,
            protocols=[Protocol(name=name, metadata=subscription) for name in self.config.assignors],
        )
        if self.config.group_instance_id is not None and self.versions["join_group"] < 5:
            # Static membership needs JoinGroup v5 (Java raises UnsupportedVersionException).
            self._actions.append(GroupFailed("join_group", ErrorCode.UNSUPPORTED_VERSION))
            self._fire(MemberEvent.FATAL_ERROR)
            return
        self._send("join_group", request)

    def _on_join_group(self, pending: _InFlight, response: JoinGroupResponse) -> None:
        if response.error_code != ErrorCode.NONE:
            self._react("join_group", response.error_code, response.member_id)
            return
        self.member_id = response.member_id
        self.generation_id = response.generation_id
        self.leader_id = response.leader
        self.protocol = response.protocol_name or ""
        self._rejoin_needed = False
        self._leader_members = list(response.members)
        # v9: a restarted static leader of a Stable group keeps the group's assignment instead of making one.
        self._skip_assignment = bool(self.versions["join_group"] >= 9 and response.skip_assignment)
        if response.leader != response.member_id or self._skip_assignment:
            self._fire(MemberEvent.JOINED_AS_FOLLOWER)
        elif self._missing_topics():
            self._fire(MemberEvent.JOINED_AS_LEADER_WITHOUT_METADATA)
        else:
            self._fire(MemberEvent.JOINED_AS_LEADER)

    def _ask_metadata(self) -> None:
        self._actions.append(MetadataNeeded(self._missing_topics()))

    def _send_sync(self) -> None:
        leads = self.leader_id == self.member_id and not self._skip_assignment
        assignments = self._assign() if leads else []
        request = SyncGroupRequest(
            group_id=self.config.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self._instance_id("sync_group"),
            assignments=assignments,
        )
        if self.versions["sync_group"] >= 5:
            request.protocol_type, request.protocol_name = self.config.protocol_type, self.protocol
        self._send("sync_group", request)

    def _on_sync_group(self, pending: _InFlight, response: SyncGroupResponse) -> None:
        if response.error_code != ErrorCode.NONE:
            self._react("sync_group", response.error_code)
            return
        self.assignment = self._codec.decode_assignment(response.assignment)
        self._join_prepared = False
        self._actions.append(PartitionsAssigned(self.generation_id, self._owned_partitions()))
        self._fire(MemberEvent.SYNCED)

    def _start_heartbeats(self) -> None:
        self._last_heartbeat_ok_ms = self._now_ms
        self._next_heartbeat_ms = self._now_ms + self.config.heartbeat_interval_ms
        if self.config.auto_commit:
            self._next_auto_commit_ms = self._now_ms + self.config.auto_commit_interval_ms

    def _stable_timers(self) -> None:
        now = self._now_ms
        if now >= self._last_heartbeat_ok_ms + self.config.session_timeout_ms:
            self._lose_coordinator()  # silent for a whole session: assume the coordinator died
            return
        if (
            not self._has_in_flight("heartbeat")
            and self._next_heartbeat_ms is not None
            and now >= self._next_heartbeat_ms
        ):
            self._next_heartbeat_ms = now + self.config.heartbeat_interval_ms
            request = HeartbeatRequest(
                group_id=self.config.group_id,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=self._instance_id("heartbeat"),
            )
            self._send("heartbeat", request)
        due = self._next_auto_commit_ms
        if due is not None and now >= due and not self._has_in_flight("offset_commit"):
            self._next_auto_commit_ms = now + self.config.auto_commit_interval_ms
            if self._owned_positions():
                self._send_commit(self._owned_positions())

    def _on_heartbeat(self, pending: _InFlight, response: HeartbeatResponse) -> None:
        if self.state is not MemberState.STABLE:
            return
        if response.error_code == ErrorCode.NONE:
            self._last_heartbeat_ok_ms = self._now_ms
        else:
            self._react("heartbeat", response.error_code)

    def _send_commit(self, offsets: Mapping[TopicPartition, int], before_rejoin: bool = False) -> None:
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        Partition = Topic.OffsetCommitRequestPartition
        by_topic: Dict[str, List["OffsetCommitRequest_OffsetCommitRequestPartition"]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                Partition(partition_index=partition, committed_offset=offset, committed_metadata="")
            )
        request = OffsetCommitRequest(
            group_id=self.config.group_id,
            generation_id_or_member_epoch=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self._instance_id("offset_commit"),
            retention_time_ms=-1,
            topics=[Topic(name=topic, partitions=parts) for topic, parts in by_topic.items()],
        )
        self._send("offset_commit", request, before_rejoin=before_rejoin)

    def _on_offset_commit(self, pending: _InFlight, response: OffsetCommitResponse) -> None:
        self._actions.append(OffsetsCommitted(pending.request_id, response))
        codes = [p.error_code for t in response.topics for p in t.partitions if p.error_code]
        code = codes[0] if codes else ErrorCode.NONE
        reaction = _reaction("offset_commit", code) if codes else Reaction.REPORT
        if pending.before_rejoin and self.state is MemberState.PREPARING_REJOIN:
            # The pre-join commit is best effort (as in Java); only a lost coordinator stops the join.
            if reaction is Reaction.REDISCOVER:
                self._lose_coordinator()
            else:
                self._finish_prepare()
        elif self.state is MemberState.STABLE and reaction is not Reaction.REPORT:
            self._react("offset_commit", code)

    # ---------------------------------------------------------------- leader assignment

    def _subscriptions(self) -> Dict[str, List[str]]:
        return {m.member_id: self._codec.decode_subscription(m.metadata) for m in self._leader_members}

    def _missing_topics(self) -> Tuple[str, ...]:
        if self.leader_id != self.member_id or self._skip_assignment:
            return ()
        wanted = {topic for topics in self._subscriptions().values() for topic in topics}
        return tuple(sorted(wanted - set(self._partitions_per_topic)))

    def _assign(self) -> List["SyncGroupRequest_SyncGroupRequestAssignment"]:
        subscriptions = self._subscriptions()
        assignor = self._assignors[self.protocol]
        result = assignor(subscriptions, self._partitions_per_topic)
        Assignment = SyncGroupRequest.SyncGroupRequestAssignment
        return [
            Assignment(member_id=member_id, assignment=self._codec.encode_assignment(result[member_id]))
            for member_id in subscriptions
        ]

    def _on_offset_fetch(self, pending: _InFlight, response: OffsetFetchResponse) -> None:
        offsets: Dict[TopicPartition, Tuple[int, Optional[str]]] = {}
        codes = [response.error_code] if self.versions["offset_fetch"] >= 2 else []
        for topic in response.topics:
            for p in topic.partitions:
                offsets[(topic.name, p.partition_index)] = (p.committed_offset, p.metadata)
                codes.append(p.error_code)
        code = next((c for c in codes if c), 0)
        self._actions.append(OffsetsFetched(pending.request_id, offsets, code))
        if code and _reaction("offset_commit", code) is Reaction.REDISCOVER and self.state in _TALKING:
            self._lose_coordinator()

    # ---------------------------------------------------------------- helpers

    def _instance_id(self, api: str) -> Optional[str]:
        """The static member's instance id, when the API's chosen version carries it."""
        return self.config.group_instance_id if self.versions[api] >= _INSTANCE_ID_SINCE[api] else None

    def _send(self, api: str, request: Message, *, to_coordinator: bool = True, before_rejoin: bool = False) -> None:
        request_id = next(self._ids)
        self._in_flight[request_id] = _InFlight(request_id, api, to_coordinator, before_rejoin)
        destination = self.coordinator if to_coordinator else None
        self._actions.append(SendRequest(request_id, request, self.versions[api], destination))

    def _has_in_flight(self, api: str) -> bool:
        return any(p.api == api for p in self._in_flight.values())

    def _owned_partitions(self) -> Tuple[TopicPartition, ...]:
        return tuple((topic, p) for topic in sorted(self.assignment) for p in self.assignment[topic])

    def _owned_positions(self) -> Dict[TopicPartition, int]:
        return {tp: self._positions[tp] for tp in self._owned_partitions() if tp in self._positions}

    def _set_time(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise LocalProtocolError(f"clock went backwards: {now_ms} < {self._now_ms}")
        self._now_ms = now_ms

    def _take(self) -> List[Action]:
        actions, self._actions = self._actions, []
        return actions


def _ignore_leave_response(member: GroupMember, pending: _InFlight, response: Message) -> None:
    """LeaveGroup is fire and forget: its answer changes nothing."""


#: API → the member's handler of its response (built once).
_RESPONSE_HANDLERS: Mapping[str, Callable[[GroupMember, _InFlight, Any], None]] = {
    "group_coordinator": GroupMember._on_group_coordinator,
    "join_group": GroupMember._on_join_group,
    "sync_group": GroupMember._on_sync_group,
    "heartbeat": GroupMember._on_heartbeat,
    "offset_commit": GroupMember._on_offset_commit,
    "offset_fetch": GroupMember._on_offset_fetch,
    "leave_group": _ignore_leave_response,
}
