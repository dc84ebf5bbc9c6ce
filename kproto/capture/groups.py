"""Consumer groups in a capture: members, generations, who the coordinator waited for, what was read twice.

Why: the question people bring to a capture of a consumer group is rarely "what is in frame 8123" but
"why did the group stop for 40 seconds" and "were records processed twice".  Both answers are in the
group-protocol exchanges a capture already holds (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ConsumerGroupHeartbeat) and the consumers' Fetch requests; this module reads
them from :class:`~kproto.capture.conversation.Exchange` records (it never splits frames itself) and
folds them into one :class:`GroupReport` per group.

Theory of operation
    :class:`GroupAnalyzer` is fed the records of :func:`~kproto.capture.conversation.decode_capture` in
    any order; it keeps the group-protocol exchanges and the Fetch exchanges (positions, for the
    double-processing check) and does all the work in :meth:`~GroupAnalyzer.finish`, after sorting them
    by request time, so the result does not depend on the order connections were decoded in.

    *Generation* (classic protocol).  Every JoinGroup answered without error carries the generation it
    belongs to.  A generation's **start** is the earliest of those JoinGroup requests (the first JoinGroup
    after the group was last Stable: the rebalance begins when the first member rejoins), its **end** the
    time of the last SyncGroup response of that generation (the group is Stable when every member has its
    assignment).

    *Who was waited for*.  The coordinator holds the JoinGroup answers until every member it knew when the
    rebalance began has rejoined, left (LeaveGroup) or been removed (its session expired, or its
    rebalance timeout ran out).  So each of those events that came after the start held the group until
    then: a late JoinGroup (``joined late``/``rejoined late``, for ``its join - start``), a LeaveGroup
    (until the LeaveGroup, or until the JoinGroup answers when those came first: the coordinator had
    already removed the member), a member of the previous generation that neither rejoined nor left (until
    the last JoinGroup answer).  The one that ended the hold is :attr:`Generation.slowest`.  A member that
    left, or whose session (its last exchange with the coordinator plus the ``session_timeout_ms`` its
    JoinGroup declared) expired, *before* the start held nobody: it is a :class:`Departure` with ``held``
    false, not a wait.  The cause is named: a LeaveGroup that follows the member's last Fetch by about its
    ``rebalance_timeout_ms`` (which the clients set to max.poll.interval.ms) is ``left after exceeding
    max.poll.interval.ms``.  The followers' SyncGroups wait for the leader's, so a leader that syncs late
    is waited for too.  A static member (``group.instance.id``) whose JoinGroup, with a new member id,
    comes in a generation already complete replaced its old id without a rebalance (:class:`StaticRejoin`).

    *Time without an owner* (:class:`OwnerGap`).  For each partition the previous generation assigned too:
    from its old owner's last Fetch request for it (before the old owner rejoined or left) to the new
    owner's first Fetch request for it after its SyncGroup answer; without such a Fetch, from the old
    owner's LeaveGroup or estimated expiry.  Topics that Fetch v13+ names by id take their name from the
    capture's Metadata answers (:class:`~kproto.capture.topic_names.TopicNames`).

    *Completeness*.  The leader's JoinGroup response lists every member of a generation.  When it is
    missing, or a listed member's JoinGroup is (the capture began mid-rebalance, or the member's
    connection to the coordinator is not in the capture), the start is ``None`` -- unknown -- and a
    problem says why; the same holds for the end when a member's SyncGroup response is missing.  A
    duration is only given when both ends are known: nothing is invented.

    *Members* are named by member id; their client id and host come from their requests.  Fetch requests
    (sent to partition leaders, often on other connections) are tied to a member by ``(host, client id)``.

    *Records processed twice*.  When a partition changes owner between two generations, the old owner's
    *position* is the highest offset it had fetched (its Fetch requests' ``fetch_offset``, and one past
    the last record of the Fetch responses it received); the new owner's *start* is its first Fetch
    offset for the partition after the new generation's SyncGroup, else its OffsetFetch answer.  A start
    below the position means the records in between are processed again (:class:`DuplicateRisk`).  The
    count is a lower bound when the old owner's last Fetch responses are missing from the capture.

    *KIP-848* (ConsumerGroupHeartbeat): there are no generations or SyncGroups; each member's heartbeats
    are summarised per member epoch (:class:`EpochSummary`) with the assignment the coordinator sent, and
    :mod:`kproto.capture.heartbeat_groups` gives the group epochs and their causes, each member's owned
    and assigned partitions over time, the partitions' moves between members (time without an owner,
    records read twice) as :attr:`GroupReport.heartbeat`.  One capture may hold groups of both kinds.

Limits: the analyzer holds the group exchanges and, per partition and client, one position; a
capture's group traffic is small next to its Fetch and Produce traffic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from kproto import ErrorCode
from kproto.capture.conversation import Exchange, Problem, ProblemKind, Record, decode_capture
from kproto.capture.files import CaptureSource
from kproto.capture.heartbeat_groups import CONSUMER_GROUP_DESCRIBE, HeartbeatTimeline, build_timeline
from kproto.capture.topic_names import METADATA, TopicNames
from kproto.errors import KprotoError
from kproto.group.consumer_codec import ConsumerProtocolCodec
from kproto.message_facts import GROUP, entities

__all__ = [
    "GROUP_APIS",
    "PROTOCOL_STEPS",
    "GroupEvent",
    "MemberInfo",
    "MemberWait",
    "Departure",
    "OwnerGap",
    "StaticRejoin",
    "Generation",
    "Commit",
    "DuplicateRisk",
    "EpochSummary",
    "GroupReport",
    "GroupAnalyzer",
    "analyse_groups",
    "analyse_capture",
    "error_name",
    "report_dict",
]

FETCH, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, CONSUMER_GROUP_HEARTBEAT = 11, 12, 13, 14, 68

#: The api keys whose exchanges become :class:`GroupEvent` items.
GROUP_APIS = frozenset(
    {
        OFFSET_COMMIT,
        OFFSET_FETCH,
        JOIN_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        SYNC_GROUP,
        CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE,
    }
)

#: (api, error) answers that are steps of the group protocol, not failures: a member's first JoinGroup
#: (v4+) is answered MEMBER_ID_REQUIRED with its id, a Heartbeat REBALANCE_IN_PROGRESS announces a rebalance.
PROTOCOL_STEPS = frozenset({("JoinGroup", "MEMBER_ID_REQUIRED"), ("Heartbeat", "REBALANCE_IN_PROGRESS")})

#: Heartbeat answers that tell a member its generation is over.
HEARTBEAT_ERRORS = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)

_CODEC = ConsumerProtocolCodec()


def error_name(code: Optional[int]) -> Optional[str]:
    """``"NONE"`` for 0, the error's name for a known code, ``"ERROR_<n>"`` otherwise; None stays None."""
    if code is None:
        return None
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


@dataclass
class GroupEvent:
    """One group-protocol exchange: who, which generation (member epoch for ConsumerGroupHeartbeat), the
    api, its outcome (``error`` is ``"NONE"`` when it succeeded, None when no response was captured)."""

    group_id: str
    member_id: Optional[str]
    generation: Optional[int]
    api: str
    error: Optional[str]
    request_time_ns: Optional[int]
    response_time_ns: Optional[int]
    client_id: Optional[str]
    client: str
    coordinator: str


@dataclass
class MemberInfo:
    """A member as its requests show it."""

    member_id: str
    group_instance_id: Optional[str] = None
    client_id: Optional[str] = None
    host: Optional[str] = None
    first_seen_ns: Optional[int] = None
    last_seen_ns: Optional[int] = None
    left_ns: Optional[int] = None  #: time of its LeaveGroup request (or KIP-848 leave heartbeat)
    expired: bool = False  #: dropped from the group without leaving (session or rebalance timeout)
    session_timeout_ms: Optional[int] = None  #: as its last JoinGroup declared it
    #: as its last JoinGroup declared it (Java-like clients send their max.poll.interval.ms)
    rebalance_timeout_ms: Optional[int] = None
    heartbeat_errors: Dict[str, int] = field(default_factory=dict)


@dataclass
class MemberWait:
    """A member the coordinator waited for in a rebalance, and for how long (None: unknown)."""

    member_id: str
    waited_ms: Optional[float]
    reason: str


@dataclass
class Departure:
    """A member of the previous generation that is not in this one: it ``left`` (LeaveGroup) or ``expired``.

    ``time_ns`` is its LeaveGroup request, or for an expiry the estimate last heartbeat + session timeout
    (None when the session timeout is unknown); ``held`` says whether the rebalance was waiting for it
    (it was still a member when the rebalance began); ``cause`` says why, in words."""

    member_id: str
    kind: str  #: "left" or "expired"
    time_ns: Optional[int]
    cause: str
    held: bool


@dataclass
class StaticRejoin:
    """A static member (group.instance.id) that came back under a new member id without a rebalance: the
    coordinator gave the new id the old one's place and assignment in the same generation."""

    group_instance_id: str
    old_member: str
    new_member: str
    time_ns: int  #: its JoinGroup request
    assignment: Any = None  #: what its SyncGroup answer gave it
    gaps: List["OwnerGap"] = field(default_factory=list)  #: its partitions between the two ids


@dataclass
class OwnerGap:
    """A partition between two owners: from the old owner's last Fetch of it (or, without one, its leave or
    expiry) to the new owner's first Fetch of it after the rebalance (see the module docs)."""

    topic: str
    partition: int
    old_owner: str
    new_owner: str
    from_ns: int
    from_what: str  #: "last fetch", "left" or "expired"
    to_ns: int

    @property
    def gap_ms(self) -> float:
        """How long nobody fetched the partition."""
        return (self.to_ns - self.from_ns) / 1e6


@dataclass
class Commit:
    """One partition of an OffsetCommit request, with the error its response gave it (None: unanswered)."""

    time_ns: Optional[int]
    member_id: Optional[str]
    generation: Optional[int]
    topic: str
    partition: int
    offset: int
    error: Optional[str]


@dataclass
class DuplicateRisk:
    """A partition whose new owner starts below what its old owner had already fetched."""

    topic: str
    partition: int
    old_owner: str
    new_owner: str
    old_position: int
    new_start: int

    @property
    def records(self) -> int:
        """How many offsets are read again (a lower bound, see the module docs)."""
        return self.old_position - self.new_start


@dataclass
class Generation:
    """One generation of a classic-protocol group and the rebalance that made it."""

    generation_id: int
    protocol_type: Optional[str] = None
    protocol: Optional[str] = None
    leader: Optional[str] = None
    members: List[str] = field(default_factory=list)
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    joins_ns: Dict[str, int] = field(default_factory=dict)
    syncs_ns: Dict[str, int] = field(default_factory=dict)
    waited_for: List[MemberWait] = field(default_factory=list)
    assignments: Dict[str, Any] = field(default_factory=dict)
    left: List[str] = field(default_factory=list)
    expired: List[str] = field(default_factory=list)
    departures: List[Departure] = field(default_factory=list)
    owner_gaps: List[OwnerGap] = field(default_factory=list)
    static_rejoins: List[StaticRejoin] = field(default_factory=list)
    commits_before: Dict[str, int] = field(
        default_factory=dict
    )  #: "topic-partition" -> last offset committed before the start
    commits_after: Dict[str, int] = field(
        default_factory=dict
    )  #: "topic-partition" -> first offset committed after the end
    duplicates: List[DuplicateRisk] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)

    @property
    def duration_ms(self) -> Optional[float]:
        """End minus start, when both are known."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def slowest(self) -> Optional[MemberWait]:
        """The member whose rejoin, leave or expiry ended the hold (waited for longest), if any."""
        known = [w for w in self.waited_for if w.waited_ms is not None]
        return (
            max(known, key=lambda w: w.waited_ms or 0.0) if known else (self.waited_for[0] if self.waited_for else None)
        )


@dataclass
class EpochSummary:
    """KIP-848: one member at one member epoch, from its ConsumerGroupHeartbeat exchanges."""

    member_id: str
    member_epoch: int
    first_ns: Optional[int]
    last_ns: Optional[int]
    heartbeats: int = 0
    #: topic -> partitions, as the coordinator sent it (a topic id the capture's Metadata does not name stays the id)
    assignment: Optional[Dict[str, List[int]]] = None
    errors: Dict[str, int] = field(default_factory=dict)


@dataclass
class GroupReport:
    """Everything the capture says about one group (see the module docs)."""

    group_id: str
    coordinators: List[str] = field(default_factory=list)
    members: Dict[str, MemberInfo] = field(default_factory=dict)
    generations: List[Generation] = field(default_factory=list)
    epochs: List[EpochSummary] = field(default_factory=list)
    commits: List[Commit] = field(default_factory=list)
    events: List[GroupEvent] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)
    #: the KIP-848 view (None: no ConsumerGroupHeartbeat or ConsumerGroupDescribe in the capture)
    heartbeat: Optional[HeartbeatTimeline] = None

    @property
    def protocol(self) -> str:
        """``"consumer"`` (KIP-848), ``"classic"``, or ``"classic+consumer"`` when the capture shows both."""
        kinds = []
        if self.generations or any(e.api in ("JoinGroup", "SyncGroup", "Heartbeat") for e in self.events):
            kinds.append("classic")
        if self.heartbeat is not None:
            kinds.append("consumer")
        return "+".join(kinds) or "classic"

    @property
    def coordinator(self) -> str:
        """The coordinator's address, ``"unknown"`` when no exchange with it was captured."""
        return ", ".join(self.coordinators) if self.coordinators else "unknown"

    @property
    def rebalances(self) -> List[Generation]:
        """The generations (each is the outcome of one rebalance)."""
        return self.generations


# --- reading exchanges -------------------------------------------------------------------------------------


def _has(message: Any, version: int, name: str) -> bool:
    for info in type(message).FIELDS:
        if info.name == name:
            lo, hi = info.versions
            return bool(lo <= version <= hi)
    return False


def _field(message: Any, version: int, name: str) -> Any:
    """``message.name`` when the exchange's version has the field, else None."""
    return getattr(message, name) if message is not None and _has(message, version, name) else None


def _group_of(ex: Exchange) -> Optional[str]:
    for message in (ex.request, ex.response):
        if message is None:
            continue
        for entity in entities(message, ex.api_version):
            if entity.kind == GROUP:
                return str(entity.value)
    return None


def _error(ex: Exchange) -> Optional[str]:
    if ex.response is None:
        return None
    return error_name(_field(ex.response, ex.api_version, "error_code") or 0)


def _time(ex: Exchange) -> int:
    return ex.request_time_ns if ex.request_time_ns is not None else (ex.response_time_ns or 0)


def _key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _decode_assignment(protocol_type: Optional[str], data: Any) -> Any:
    if data is None:
        return None
    if protocol_type not in (None, "consumer"):
        return {"bytes": len(bytes(data))}
    try:
        return _CODEC.decode_assignment(bytes(data))
    except KprotoError as exc:
        return {"undecodable": str(exc)}


@dataclass
class _Position:
    time_ns: int
    offset: int


class GroupAnalyzer:
    """Collects exchanges (:meth:`feed`) and builds one :class:`GroupReport` per group (:meth:`finish`)."""

    def __init__(self) -> None:
        self._group_exchanges: List[Exchange] = []
        self._fetches: List[Exchange] = []
        self._problem_connections: Dict[str, List[str]] = {}
        self.topic_names = TopicNames()

    def feed(self, record: Record) -> None:
        """One record of :func:`~kproto.capture.conversation.decode_capture` (other records are ignored)."""
        if isinstance(record, Exchange):
            if record.api_key in GROUP_APIS:
                self._group_exchanges.append(record)
            elif record.api_key == FETCH and record.request is not None:
                self._fetches.append(record)
            elif record.api_key == METADATA:
                self.topic_names.feed(record)
        elif (
            isinstance(record, Problem)
            and record.connection is not None
            and record.kind
            in (
                ProblemKind.RESPONSE_WITHOUT_REQUEST,
                ProblemKind.CAPTURE_GAP,
                ProblemKind.INCOMPLETE_FRAME,
                ProblemKind.RESYNC_SKIPPED,
                ProblemKind.DECODE_ERROR,
            )
        ):
            self._problem_connections.setdefault(str(record.connection), []).append(record.kind.value)

    def finish(self) -> List[GroupReport]:
        """The groups, sorted by group id."""
        by_group: Dict[str, List[Exchange]] = {}
        for ex in sorted(self._group_exchanges, key=lambda e: (_time(e), str(e.connection), e.correlation_id)):
            group = _group_of(ex)
            if group is not None:
                by_group.setdefault(group, []).append(ex)
        positions, fetch_times, fetch_requests = self._positions()
        return [
            _GroupBuilder(
                group, exchanges, positions, self._problem_connections, fetch_times, fetch_requests, self.topic_names
            ).build()
            for group, exchanges in sorted(by_group.items())
        ]

    def _positions(
        self,
    ) -> Tuple[
        Dict[Tuple[str, Optional[str]], Dict[str, List[_Position]]],
        Dict[Tuple[str, Optional[str]], Dict[str, List[int]]],
        Dict[Tuple[str, Optional[str]], List[int]],
    ]:
        """(host, client id) -> "topic-partition" -> fetch positions in time order, the times of the
        Fetch requests that named the partition, and (host, client id) -> the times of all its Fetch
        requests.  Topics named by id (Fetch v13+) take their name from the
        capture's Metadata answers."""
        out: Dict[Tuple[str, Optional[str]], Dict[str, List[_Position]]] = {}
        times: Dict[Tuple[str, Optional[str]], Dict[str, List[int]]] = {}
        every: Dict[Tuple[str, Optional[str]], List[int]] = {}
        for ex in sorted(self._fetches, key=lambda e: (_time(e), str(e.connection), e.correlation_id)):
            client = (ex.client.ip, getattr(ex.request_header, "client_id", None))
            parts = out.setdefault(client, {})
            asked = times.setdefault(client, {})
            every.setdefault(client, []).append(_time(ex))
            request: Any = ex.request
            for topic in request.topics or []:
                name = self.topic_names.name(topic)
                if not name:
                    continue
                for p in topic.partitions or []:
                    parts.setdefault(_key(name, p.partition), []).append(_Position(_time(ex), p.fetch_offset))
                    asked.setdefault(_key(name, p.partition), []).append(_time(ex))
            if ex.response is None or ex.response_time_ns is None:
                continue
            for topic in ex.response.responses or []:
                name = self.topic_names.name(topic)
                if not name:
                    continue
                for p in topic.partitions or []:
                    last = _last_offset(p.records)
                    if last is not None:
                        parts.setdefault(_key(name, p.partition_index), []).append(
                            _Position(ex.response_time_ns, last + 1)
                        )
        return out, times, every


def _last_offset(records: Any) -> Optional[int]:
    if records is None or not len(records):
        return None
    try:
        decoded = records.records(check_crc=False)
    except (KprotoError, AttributeError):
        return None
    last = None
    for batch in decoded.batches:
        if batch.magic == 2:
            last = batch.base_offset + batch.last_offset_delta
        elif batch.records:
            last = batch.records[-1].offset
    return last


class _GroupBuilder:
    """Builds one group's report from its exchanges (sorted by time)."""

    def __init__(
        self,
        group_id: str,
        exchanges: List[Exchange],
        positions: Dict[Tuple[str, Optional[str]], Dict[str, List[_Position]]],
        problem_connections: Dict[str, List[str]],
        fetch_times: Optional[Dict[Tuple[str, Optional[str]], Dict[str, List[int]]]] = None,
        fetch_requests: Optional[Dict[Tuple[str, Optional[str]], List[int]]] = None,
        topic_names: Optional[TopicNames] = None,
    ) -> None:
        self.topic_names = topic_names or TopicNames()
        self.exchanges = exchanges
        self.positions = positions
        self.fetch_times = fetch_times or {}
        self.fetch_requests = fetch_requests or {}
        self.report = GroupReport(group_id)
        self.generations: Dict[int, Generation] = {}
        self.member_of_connection: Dict[str, str] = {}
        self.leaves: Dict[str, int] = {}
        self.session_timeout_ms: Dict[str, int] = {}
        self.offset_answers: List[Tuple[int, str, str, int]] = []  # time, connection, "topic-partition", offset
        self.join_answered_ns: Dict[int, int] = {}  # generation -> last JoinGroup answer
        self.static_sync_ns: Dict[str, int] = {}  # static member's new id -> its SyncGroup answer
        self.shared: Set[Tuple[str, Optional[str]]] = set()  # (host, client id) two members used at once
        connections = {str(ex.connection) for ex in exchanges}
        for conn in sorted(connections):
            for kind in sorted(set(problem_connections.get(conn, []))):
                self.report.problems.append(f"{kind} on coordinator connection {conn}")

    # --- members -------------------------------------------------------------------------------------------

    def member(self, member_id: str, ex: Exchange, instance: Optional[str] = None) -> MemberInfo:
        info = self.report.members.get(member_id)
        if info is None:
            info = self.report.members[member_id] = MemberInfo(member_id)
        info.client_id = info.client_id or getattr(ex.request_header, "client_id", None)
        info.host = info.host or ex.client.ip
        info.group_instance_id = info.group_instance_id or instance
        t = _time(ex)
        info.first_seen_ns = t if info.first_seen_ns is None else min(info.first_seen_ns, t)
        info.last_seen_ns = t if info.last_seen_ns is None else max(info.last_seen_ns, t)
        self.member_of_connection[str(ex.connection)] = member_id
        return info

    def generation(self, gen_id: int) -> Generation:
        gen = self.generations.get(gen_id)
        if gen is None:
            gen = self.generations[gen_id] = Generation(gen_id)
        return gen

    # --- one pass over the exchanges -----------------------------------------------------------------------

    def build(self) -> GroupReport:
        report = self.report
        coordinators: List[str] = []
        for ex in self.exchanges:
            server = str(ex.server)
            if server not in coordinators:
                coordinators.append(server)
            member_id, generation = self.read(ex)
            report.events.append(
                GroupEvent(
                    report.group_id,
                    member_id,
                    generation,
                    ex.api_name,
                    _error(ex),
                    ex.request_time_ns,
                    ex.response_time_ns,
                    getattr(ex.request_header, "client_id", None),
                    str(ex.client),
                    server,
                )
            )
        report.coordinators = coordinators
        report.generations = [self.generations[g] for g in sorted(self.generations)]
        self.shared = self.shared_clients()
        previous_ones: List[Optional[Generation]] = [None, *report.generations[:-1]]
        for previous, gen in zip(previous_ones, report.generations):
            self.complete(previous, gen)
        self.unfinished_rebalance()
        if any(ex.api_key in (CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE) for ex in self.exchanges):
            self.heartbeat_timeline()
        # a KIP-848 group's OffsetCommits carry member epochs, not generations
        commit_apis = ("Heartbeat",) if report.heartbeat is not None else ("Heartbeat", "OffsetCommit")
        in_use = sorted(
            {
                e.generation
                for e in report.events
                if e.api in commit_apis and e.generation is not None and e.generation >= 0
            }
            - set(self.generations)
        )
        if in_use:
            report.problems.append(
                f"generation {', '.join(map(str, in_use))} in use, but the rebalance that made it "
                "is not in the capture (it happened before the capture began)"
            )
        return report

    def heartbeat_timeline(self) -> None:
        """The KIP-848 view of the group (:mod:`kproto.capture.heartbeat_groups`)."""
        timeline = build_timeline(
            self.report.group_id,
            self.exchanges,
            self.topic_names,
            self.fetches_of,
            self.fetch_times,
            self.positions,
            self.report.commits,
        )
        for member_id in list(timeline.expired) + list(timeline.fenced):
            if member_id in self.report.members:
                self.report.members[member_id].expired = True
        self.report.problems.extend(timeline.problems)
        self.report.heartbeat = timeline

    def unfinished_rebalance(self) -> None:
        """A rebalance that began after the last generation and did not end inside the capture."""
        if not self.report.generations:
            return
        last = self.report.generations[-1]
        since = last.end_ns if last.end_ns is not None else max(last.joins_ns.values(), default=None)
        if since is None:
            return
        for event in self.report.events:
            if (
                event.api == "Heartbeat"
                and event.error == "REBALANCE_IN_PROGRESS"
                and (event.request_time_ns or 0) > since
            ):
                self.report.problems.append(
                    f"a rebalance began after generation {last.generation_id} (heartbeat of {event.member_id} "
                    "answered REBALANCE_IN_PROGRESS) and did not finish inside the capture"
                )
                return

    def read(self, ex: Exchange) -> Tuple[Optional[str], Optional[int]]:
        """Fold one exchange in; returns the (member id, generation or epoch) its event row carries."""
        req: Any = ex.request
        resp: Any = ex.response
        v = ex.api_version
        if req is None:
            return self.member_of_connection.get(str(ex.connection)), None
        key = ex.api_key
        if key == JOIN_GROUP:
            return self.read_join(ex)
        if key == SYNC_GROUP:
            return self.read_sync(ex)
        if key == HEARTBEAT:
            member_id, gen = req.member_id, req.generation_id
            info = self.member(member_id, ex, _field(req, v, "group_instance_id"))
            err = _error(ex)
            if resp is not None and resp.error_code in HEARTBEAT_ERRORS and err is not None:
                info.heartbeat_errors[err] = info.heartbeat_errors.get(err, 0) + 1
                if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    info.expired = True
            return member_id, gen
        if key == LEAVE_GROUP:
            ids = [req.member_id] if _has(req, v, "member_id") else [m.member_id for m in req.members or []]
            for member_id in ids:
                if member_id:
                    info = self.member(member_id, ex)
                    info.left_ns = _time(ex)
                    self.leaves[member_id] = _time(ex)
            return (ids[0] if len(ids) == 1 else None), None
        if key == OFFSET_COMMIT:
            return self.read_commit(ex)
        if key == OFFSET_FETCH:
            return self.read_offset_fetch(ex)
        if key == CONSUMER_GROUP_HEARTBEAT:
            return self.read_consumer_heartbeat(ex)
        return None, None

    def read_join(self, ex: Exchange) -> Tuple[Optional[str], Optional[int]]:
        req: Any = ex.request
        resp: Any = ex.response
        v = ex.api_version
        instance = _field(req, v, "group_instance_id")
        member_id = req.member_id or (resp.member_id if resp is not None else "") or None
        if member_id:
            info = self.member(member_id, ex, instance)
            self.session_timeout_ms[member_id] = req.session_timeout_ms
            info.session_timeout_ms = req.session_timeout_ms
            rebalance_timeout = _field(req, v, "rebalance_timeout_ms")
            info.rebalance_timeout_ms = (
                rebalance_timeout
                if rebalance_timeout is not None and rebalance_timeout >= 0
                else req.session_timeout_ms
            )
        if resp is None or resp.error_code != ErrorCode.NONE:
            return member_id, None
        gen = self.generation(resp.generation_id)
        replaced = self.static_replacement(gen, resp.member_id, instance)
        if replaced is not None:
            gen.static_rejoins.append(StaticRejoin(instance, replaced, resp.member_id, _time(ex)))
            return resp.member_id, resp.generation_id
        gen.protocol_type = gen.protocol_type or req.protocol_type
        gen.protocol = gen.protocol or resp.protocol_name
        gen.leader = gen.leader or resp.leader
        t = _time(ex)
        gen.joins_ns[resp.member_id] = min(t, gen.joins_ns.get(resp.member_id, t))
        if ex.response_time_ns is not None:
            answered = self.join_answered_ns.get(resp.generation_id, ex.response_time_ns)
            self.join_answered_ns[resp.generation_id] = max(answered, ex.response_time_ns)
        if resp.members:  # the leader's answer lists everyone
            gen.members = [m.member_id for m in resp.members]
            for m in resp.members:
                instance_id = _field(m, v, "group_instance_id")
                if instance_id and m.member_id in self.report.members:
                    self.report.members[m.member_id].group_instance_id = instance_id
        return resp.member_id, resp.generation_id

    def static_replacement(self, gen: Generation, member_id: str, instance: Optional[str]) -> Optional[str]:
        """The member id a static member's JoinGroup replaces inside an already complete generation."""
        if (
            not instance
            or not gen.members
            or member_id in gen.members
            or any(r.new_member == member_id for r in gen.static_rejoins)
        ):
            return None
        for old in gen.members:
            info = self.report.members.get(old)
            if info is not None and info.group_instance_id == instance and old in gen.syncs_ns:
                return old
        return None

    def read_sync(self, ex: Exchange) -> Tuple[Optional[str], Optional[int]]:
        req: Any = ex.request
        resp: Any = ex.response
        v = ex.api_version
        member_id, gen_id = req.member_id, req.generation_id
        self.member(member_id, ex, _field(req, v, "group_instance_id"))
        gen = self.generation(gen_id)
        ptype = gen.protocol_type or _field(req, v, "protocol_type")
        rejoin = next((r for r in gen.static_rejoins if r.new_member == member_id), None)
        if rejoin is not None:
            if resp is not None and resp.error_code == ErrorCode.NONE:
                rejoin.assignment = _decode_assignment(ptype, resp.assignment)
                self.static_sync_ns[member_id] = ex.response_time_ns or _time(ex)
            return member_id, gen_id
        for entry in req.assignments or []:  # the leader's request carries every member's assignment
            gen.assignments.setdefault(entry.member_id, _decode_assignment(ptype, entry.assignment))
        if resp is not None and resp.error_code == ErrorCode.NONE and ex.response_time_ns is not None:
            gen.syncs_ns[member_id] = ex.response_time_ns
            gen.assignments[member_id] = _decode_assignment(ptype, resp.assignment)
        return member_id, gen_id

    def read_commit(self, ex: Exchange) -> Tuple[Optional[str], Optional[int]]:
        req: Any = ex.request
        resp: Any = ex.response
        v = ex.api_version
        member_id = _field(req, v, "member_id") or self.member_of_connection.get(str(ex.connection))
        gen = _field(req, v, "generation_id_or_member_epoch")
        errors: Dict[Tuple[str, int], int] = {}
        for topic in (resp.topics or []) if resp is not None else []:
            for p in topic.partitions or []:
                errors[(self.topic_names.name(topic) or "", p.partition_index)] = p.error_code
        for topic in req.topics or []:
            name = self.topic_names.name(topic) or ""  # v10+ names topics by id
            for p in topic.partitions or []:
                code = errors.get((name, p.partition_index)) if resp is not None else None
                self.report.commits.append(
                    Commit(_time(ex), member_id, gen, name, p.partition_index, p.committed_offset, error_name(code))
                )
        return member_id, gen

    def read_offset_fetch(self, ex: Exchange) -> Tuple[Optional[str], Optional[int]]:
        resp, v = ex.response, ex.api_version
        member_id = self.member_of_connection.get(str(ex.connection))
        if resp is not None and ex.response_time_ns is not None:
            topics = list(_field(resp, v, "topics") or [])
            for group in _field(resp, v, "groups") or []:
                if group.group_id == self.report.group_id:
                    topics.extend(group.topics or [])
            for topic in topics:
                name = _field(topic, v, "name")
                for p in topic.partitions or [] if name else []:
                    if p.error_code == 0 and p.committed_offset >= 0:
                        self.offset_answers.append(
                            (ex.response_time_ns, str(ex.connection), _key(name, p.partition_index), p.committed_offset)
                        )
        return member_id, None

    def read_consumer_heartbeat(self, ex: Exchange) -> Tuple[Optional[str], Optional[int]]:
        req: Any = ex.request
        resp: Any = ex.response
        member_id = req.member_id or (resp.member_id if resp is not None else None) or None
        if not member_id:
            return None, None
        info = self.member(member_id, ex, req.instance_id)
        if req.member_epoch < 0:  # -1 leave, -2 static member leaving temporarily
            info.left_ns = _time(ex)
            return member_id, req.member_epoch
        epoch = resp.member_epoch if resp is not None and resp.error_code == 0 else req.member_epoch
        summary = next((e for e in self.report.epochs if e.member_id == member_id and e.member_epoch == epoch), None)
        if summary is None:
            summary = EpochSummary(member_id, epoch, _time(ex), _time(ex))
            self.report.epochs.append(summary)
        summary.heartbeats += 1
        summary.last_ns = _time(ex)
        if resp is not None and resp.error_code != 0:
            err = error_name(resp.error_code) or ""
            summary.errors[err] = summary.errors.get(err, 0) + 1
            if resp.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                info.expired = True
        elif resp is not None and resp.assignment is not None:
            summary.assignment = {
                self.topic_names.resolve(str(tp.topic_id)): list(tp.partitions)
                for tp in resp.assignment.topic_partitions
            }
        return member_id, epoch

    # --- per generation ------------------------------------------------------------------------------------

    def complete(self, previous: Optional[Generation], gen: Generation) -> None:
        if not gen.members:
            gen.members = sorted(gen.joins_ns, key=lambda m: gen.joins_ns[m])
            gen.problems.append("the leader's JoinGroup response is not in the capture: member list may be incomplete")
            complete_members = False
        else:
            complete_members = True
        missing_joins = [m for m in gen.members if m not in gen.joins_ns]
        if missing_joins:
            gen.problems.append(
                f"JoinGroup of {', '.join(missing_joins)} not in the capture "
                "(capture began mid-rebalance or the connection is missing): start unknown"
            )
        if complete_members and not missing_joins and gen.joins_ns:
            gen.start_ns = min(gen.joins_ns.values())
        missing_syncs = [m for m in gen.members if m not in gen.syncs_ns]
        if missing_syncs:
            gen.problems.append(f"no SyncGroup answered for {', '.join(missing_syncs)} in the capture: end unknown")
        elif gen.syncs_ns and complete_members:
            gen.end_ns = max(gen.syncs_ns.values())
        self.waits(previous, gen)
        self.offsets(previous, gen)
        if previous is not None:
            self.owner_gaps(previous, gen)
        for rejoin in gen.static_rejoins:
            self.static_gaps(gen, rejoin)

    def waits(self, previous: Optional[Generation], gen: Generation) -> None:
        """Who held the rebalance: every member the coordinator knew when it began had to rejoin, leave or
        expire before it answered the JoinGroups; each one whose rejoin/leave/expiry came after the start
        is waited for until then (the last of them held the group).  A member that was already gone when
        the rebalance began held nobody."""
        start = gen.start_ns
        joins_answered = self.join_answered_ns.get(gen.generation_id)
        before = set(previous.members) if previous is not None else set()
        for member_id in sorted(gen.joins_ns, key=lambda m: gen.joins_ns[m]):
            t = gen.joins_ns[member_id]
            if start is not None and t > start:
                gen.waited_for.append(
                    MemberWait(member_id, (t - start) / 1e6, "rejoined late" if member_id in before else "joined late")
                )
        if previous is not None:
            for member_id in previous.members:
                if member_id in gen.members:
                    continue
                departure = self.departure(previous, gen, member_id, joins_answered)
                gen.departures.append(departure)
                (gen.left if departure.kind == "left" else gen.expired).append(member_id)
                if departure.kind == "expired":
                    self.report.members.setdefault(member_id, MemberInfo(member_id)).expired = True
                if not departure.held:
                    continue
                # the coordinator held every JoinGroup answer until this member left or was removed
                end = joins_answered
                if departure.kind == "left" and departure.time_ns is not None:
                    end = departure.time_ns if end is None else min(end, departure.time_ns)
                waited = (end - start) / 1e6 if start is not None and end is not None else None
                gen.waited_for.append(MemberWait(member_id, waited, departure.cause))
        if gen.leader and gen.leader in gen.syncs_ns and len(gen.syncs_ns) > 1:
            leader_sync = self.sync_request_time(gen, gen.leader)
            others = [self.sync_request_time(gen, m) for m in gen.syncs_ns if m != gen.leader]
            first_other = min((t for t in others if t is not None), default=None)
            if leader_sync is not None and first_other is not None and leader_sync > first_other:
                gen.waited_for.append(
                    MemberWait(
                        gen.leader, (leader_sync - first_other) / 1e6, "leader's SyncGroup came after the followers'"
                    )
                )

    def departure(
        self, previous: Generation, gen: Generation, member_id: str, joins_answered: Optional[int]
    ) -> Departure:
        """How a member of ``previous`` that is not in ``gen`` went, and whether ``gen``'s rebalance waited."""
        start = gen.start_ns
        left = self.leaves.get(member_id)
        info = self.report.members.get(member_id) or MemberInfo(member_id)
        if left is not None and (previous.start_ns is None or left >= previous.start_ns):
            cause = self.leave_cause(member_id, left)
            if joins_answered is not None and start is not None and left > joins_answered:
                # the coordinator answered the JoinGroups before this LeaveGroup: it had removed the member
                rebalance = info.rebalance_timeout_ms
                limit = f" {rebalance:,} ms" if rebalance is not None else ""
                return Departure(
                    member_id,
                    "left",
                    left,
                    f"did not rejoin within the rebalance timeout{limit}: removed, then {cause}",
                    held=True,
                )
            return Departure(member_id, "left", left, cause, held=start is not None and left > start)
        session = info.session_timeout_ms
        if session is None or info.last_seen_ns is None:
            return Departure(
                member_id, "expired", None, "did not rejoin (removed by a timeout of unknown length)", held=True
            )
        expiry = info.last_seen_ns + session * 1_000_000
        cause = f"session expired {session:,} ms after its last heartbeat"
        if start is not None and expiry <= start:
            return Departure(member_id, "expired", expiry, cause, held=False)
        rebalance = info.rebalance_timeout_ms
        if (
            joins_answered is not None
            and start is not None
            and rebalance is not None
            and joins_answered < expiry - _slack_ns(session)
        ):
            cause = f"did not rejoin within the rebalance timeout {rebalance:,} ms (removed)"
        return Departure(member_id, "expired", expiry, cause, held=True)

    def leave_cause(self, member_id: str, left_ns: int) -> str:
        """``left after exceeding max.poll.interval.ms N ms`` when the LeaveGroup follows the member's last
        Fetch by about its rebalance timeout (which Java-like clients set to max.poll.interval.ms), else
        ``left``."""
        info = self.report.members.get(member_id)
        client = self.fetches_of(member_id)
        if info is None or client is None or info.rebalance_timeout_ms is None:
            return "left"
        interval = info.rebalance_timeout_ms
        fetches = [t for t in self.fetch_requests.get(client, []) if t <= left_ns]
        if not fetches:
            return "left"
        quiet = (left_ns - fetches[-1]) / 1e6
        if interval * 0.8 <= quiet <= interval * 1.5 + 2000.0:
            return f"left after exceeding max.poll.interval.ms {interval:,} ms (no Fetch for {quiet:,.0f} ms)"
        return "left"

    def sync_request_time(self, gen: Generation, member_id: str) -> Optional[int]:
        for ex in self.exchanges:
            if (
                ex.api_key == SYNC_GROUP
                and ex.request is not None
                and ex.request.member_id == member_id
                and ex.request.generation_id == gen.generation_id
            ):
                return ex.request_time_ns
        return None

    def offsets(self, previous: Optional[Generation], gen: Generation) -> None:
        ok = [c for c in self.report.commits if c.error == "NONE" and c.time_ns is not None]
        before = gen.start_ns if gen.start_ns is not None else min(gen.joins_ns.values(), default=None)
        if before is not None:
            for c in ok:
                if c.time_ns is not None and c.time_ns < before:
                    gen.commits_before[_key(c.topic, c.partition)] = c.offset
        if gen.end_ns is not None:
            for c in ok:
                if c.time_ns is not None and c.time_ns > gen.end_ns:
                    gen.commits_after.setdefault(_key(c.topic, c.partition), c.offset)
        if previous is not None:
            self.duplicates(previous, gen)

    def client_of(self, member_id: str) -> Optional[Tuple[str, Optional[str]]]:
        info = self.report.members.get(member_id)
        return (info.host, info.client_id) if info is not None and info.host is not None else None

    def shared_clients(self) -> Set[Tuple[str, Optional[str]]]:
        """(host, client id) pairs that two members used at the same time.  Clients at their defaults
        share a client id ("rdkafka", "kafka-python-<version>"), so consumers on one host cannot be told
        apart by their Fetch requests: owner gaps and poll-interval causes that need those are not
        given for them (a group problem says so)."""
        spans: Dict[Tuple[str, Optional[str]], List[Tuple[int, int, str]]] = {}
        for info in self.report.members.values():
            client = self.client_of(info.member_id)
            if client is None or info.first_seen_ns is None:
                continue
            end = max(info.last_seen_ns or info.first_seen_ns, info.left_ns or 0)
            spans.setdefault(client, []).append((info.first_seen_ns, end, info.member_id))
        shared: Set[Tuple[str, Optional[str]]] = set()
        for client, members in sorted(spans.items(), key=lambda kv: str(kv[0])):
            members.sort()
            together = [(a[2], b[2]) for a, b in zip(members, members[1:]) if b[0] <= a[1]]
            if together:
                shared.add(client)
                self.report.problems.append(
                    f"members {', '.join(sorted({m for pair in together for m in pair}))} share host {client[0]} and "
                    f"client id {client[1]!r}: their Fetch requests cannot be told apart, so times without an "
                    "owner and max.poll.interval.ms causes are not given for them"
                )
        return shared

    def fetches_of(self, member_id: str) -> Optional[Tuple[str, Optional[str]]]:
        """The (host, client id) whose Fetch requests are this member's, None when unknown or shared."""
        client = self.client_of(member_id)
        return None if client is None or client in self.shared else client

    def duplicates(self, previous: Generation, gen: Generation) -> None:
        owners_before = _owners(previous.assignments)
        owners_after = _owners(gen.assignments)
        synced = min(gen.syncs_ns.values(), default=None)
        if synced is None:
            return
        for part, new_owner in sorted(owners_after.items()):
            old_owner = owners_before.get(part)
            if old_owner is None or old_owner == new_owner:
                continue
            old_client, new_client = self.client_of(old_owner), self.client_of(new_owner)
            if old_client is None or new_client is None or old_client == new_client:
                continue
            old_positions = [p.offset for p in self.positions.get(old_client, {}).get(part, []) if p.time_ns <= synced]
            if not old_positions:
                continue
            new_start = self.new_start(new_owner, new_client, part, synced)
            if new_start is not None and new_start < max(old_positions):
                topic, _, partition = part.rpartition("-")
                gen.duplicates.append(
                    DuplicateRisk(topic, int(partition), old_owner, new_owner, max(old_positions), new_start)
                )

    def new_start(self, member_id: str, client: Tuple[str, Optional[str]], part: str, after: int) -> Optional[int]:
        for p in self.positions.get(client, {}).get(part, []):
            if p.time_ns >= after:
                return p.offset
        connections = {c for c, m in self.member_of_connection.items() if m == member_id}
        for t, conn, key, offset in self.offset_answers:
            if t >= after and key == part and conn in connections:
                return offset
        return None

    def static_gaps(self, gen: Generation, rejoin: StaticRejoin) -> None:
        """A restarted static member's partitions: from the old id's last Fetch to the new id's first."""
        old_client, new_client = self.fetches_of(rejoin.old_member), self.fetches_of(rejoin.new_member)
        synced = self.static_sync_ns.get(rejoin.new_member)
        if old_client is None or new_client is None or synced is None:
            return
        for part in sorted(_owners({rejoin.new_member: rejoin.assignment})):
            old = [t for t in self.fetch_times.get(old_client, {}).get(part, []) if t < rejoin.time_ns]
            new = [t for t in self.fetch_times.get(new_client, {}).get(part, []) if t >= synced]
            if old and new:
                topic, _, partition = part.rpartition("-")
                rejoin.gaps.append(
                    OwnerGap(topic, int(partition), rejoin.old_member, rejoin.new_member, old[-1], "last fetch", new[0])
                )

    def owner_gaps(self, previous: Generation, gen: Generation) -> None:
        """Per partition of ``gen`` that ``previous`` assigned too: the time nobody fetched it."""
        owners_before = _owners(previous.assignments)
        departures = {d.member_id: d for d in gen.departures}
        for part, new_owner in sorted(_owners(gen.assignments).items()):
            old_owner = owners_before.get(part)
            new_client, synced = self.fetches_of(new_owner), gen.syncs_ns.get(new_owner)
            if old_owner is None or new_client is None or synced is None:
                continue
            to = next((t for t in self.fetch_times.get(new_client, {}).get(part, []) if t >= synced), None)
            if to is None:
                continue
            departure = departures.get(old_owner)
            # eager protocols stop fetching when the member rejoins; a departed member fetches no more
            limit = gen.joins_ns.get(old_owner, to)
            if departure is not None and departure.kind == "left" and departure.time_ns is not None:
                limit = min(limit, departure.time_ns)
            old_client = self.fetches_of(old_owner)
            floor = previous.end_ns if previous.end_ns is not None else previous.start_ns
            old_fetches = self.fetch_times.get(old_client, {}).get(part, []) if old_client is not None else []
            fetched = [t for t in old_fetches if t < limit and (floor is None or t >= floor)]
            if fetched:
                since, what = fetched[-1], "last fetch"
            elif departure is not None and departure.time_ns is not None:
                since, what = departure.time_ns, departure.kind
            else:
                continue
            if since < to:
                topic, _, partition = part.rpartition("-")
                gen.owner_gaps.append(OwnerGap(topic, int(partition), old_owner, new_owner, since, what, to))


def _slack_ns(session_ms: int) -> int:
    """How far a measured expiry may lie from last heartbeat + session timeout (the coordinator checks
    sessions on a timer and the last heartbeat's time is the request's, not its arrival's)."""
    return max(1000, session_ms // 10) * 1_000_000


def _owners(assignments: Dict[str, Any]) -> Dict[str, str]:
    owners: Dict[str, str] = {}
    for member_id, assignment in assignments.items():
        if isinstance(assignment, dict):
            for topic, partitions in assignment.items():
                if isinstance(partitions, list):
                    for p in partitions:
                        owners[_key(topic, p)] = member_id
    return owners


def report_dict(report: GroupReport) -> Dict[str, Any]:
    """``report`` as JSON-ready values (times in ns since the epoch, durations in ms; see docs/groups.md)."""

    def wait(w: MemberWait) -> Dict[str, Any]:
        return {"member_id": w.member_id, "waited_ms": w.waited_ms, "reason": w.reason}

    generations = []
    for g in report.generations:
        slowest = g.slowest
        generations.append(
            {
                "generation_id": g.generation_id,
                "protocol_type": g.protocol_type,
                "protocol": g.protocol,
                "leader": g.leader,
                "members": g.members,
                "start_ns": g.start_ns,
                "end_ns": g.end_ns,
                "duration_ms": g.duration_ms,
                "joins_ns": g.joins_ns,
                "syncs_ns": g.syncs_ns,
                "waited_for": [wait(w) for w in g.waited_for],
                "slowest_member": slowest.member_id if slowest is not None else None,
                "assignments": g.assignments,
                "left": g.left,
                "expired": g.expired,
                "departures": [vars(d) for d in g.departures],
                "owner_gaps": [{**vars(o), "gap_ms": o.gap_ms} for o in g.owner_gaps],
                "static_rejoins": [
                    {**vars(r), "gaps": [{**vars(o), "gap_ms": o.gap_ms} for o in r.gaps]} for r in g.static_rejoins
                ],
                "commits_before": g.commits_before,
                "commits_after": g.commits_after,
                "duplicates": [
                    {
                        "topic": d.topic,
                        "partition": d.partition,
                        "old_owner": d.old_owner,
                        "new_owner": d.new_owner,
                        "old_position": d.old_position,
                        "new_start": d.new_start,
                        "records": d.records,
                    }
                    for d in g.duplicates
                ],
                "problems": g.problems,
            }
        )
    return {
        "group_id": report.group_id,
        "coordinator": report.coordinator,
        "members": [vars(m) for m in report.members.values()],
        "generations": generations,
        "epochs": [vars(e) for e in report.epochs],
        "protocol": report.protocol,
        "consumer_protocol": _heartbeat_dict(report.heartbeat),
        "commits": [vars(c) for c in report.commits],
        "events": len(report.events),
        "problems": report.problems,
    }


def _heartbeat_dict(timeline: Optional[HeartbeatTimeline]) -> Optional[Dict[str, Any]]:
    if timeline is None:
        return None
    return {
        "group_epochs": [vars(e) for e in timeline.epochs],
        "members": {m: [vars(s) for s in steps] for m, steps in timeline.steps.items()},
        "moves": [{**vars(m), "gap_ms": m.gap_ms, "records_twice": m.records_twice} for m in timeline.moves],
        "expired": timeline.expired,
        "fenced": timeline.fenced,
        "descriptions": [{**vars(d), "members": [vars(m) for m in d.members]} for d in timeline.descriptions],
    }


def analyse_groups(records: Iterable[Record]) -> List[GroupReport]:
    """The groups of already decoded capture records."""
    analyzer = GroupAnalyzer()
    for record in records:
        analyzer.feed(record)
    return analyzer.finish()


def analyse_capture(source: CaptureSource, **options: Any) -> List[GroupReport]:
    """The groups of a pcap/pcapng capture (``options`` go to
    :func:`~kproto.capture.conversation.decode_capture`)."""
    return analyse_groups(decode_capture(source, **options))
