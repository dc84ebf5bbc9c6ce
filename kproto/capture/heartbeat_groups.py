"""KIP-848 consumer groups in a capture: group epochs and their causes, each member's assignment over time,
partitions without an owner while they moved, records read twice.

Why: in the consumer group protocol (ConsumerGroupHeartbeat) there are no JoinGroup/SyncGroup rounds to
time; the coordinator moves partitions one at a time, each member at its own pace, and the questions
become "why did the group epoch change", "how long was partition 3 nobody's" and "what was read twice
when that member's session expired".  :mod:`kproto.capture.groups` hands this module one group's
exchanges; it answers those questions in a :class:`HeartbeatTimeline`.

Theory of operation
    *What the exchanges say.*  A heartbeat request carries the member's epoch (0: joining, -1: leaving,
    -2: a static member leaving for a while) and, when changed since its last heartbeat, its subscription
    and the partitions it **owns** (``TopicPartitions``; null means "unchanged").  The response carries the
    member's new epoch and, when changed, the partitions the coordinator **assigns** it (``Assignment``;
    null means "unchanged").  Topics are named by id; their names come from the capture's Metadata
    answers.  A ConsumerGroupDescribe answer gives the coordinator's own account (:class:`Description`):
    the group epoch, the target assignment's epoch, and per member its epoch, its current assignment and
    its target.

    *Member steps* (:class:`MemberStep`).  One row per heartbeat with both sets carried forward.  A
    response missing from the capture makes the assigned set unknown (None) until a response carries a
    full assignment again: a later null would mean "unchanged" from the lost answer.  A member whose first
    heartbeat in the capture is not a join has unknown sets until it reports them.

    *Group epoch* (:class:`EpochChange`).  Heartbeat answers carry member epochs only; a member epoch is
    the group epoch of the target assignment the member has reached, so each new highest epoch the
    capture shows is a group epoch, first seen then.  Its causes are the membership events before it:
    a join (the joining member's first answer carries the new epoch), a leave, a subscription change, a
    member removed by the coordinator (its session expired: no more heartbeats, and its partitions were
    given to others, or its next heartbeat was answered ``UNKNOWN_MEMBER_ID``/``FENCED_MEMBER_EPOCH``).  An
    epoch with none of these in the capture says so (topic metadata changed, or the member's connection is
    not captured).

    *Partition moves* (:class:`PartitionMove`).  The coordinator gives a partition to a new member only once
    the old owner has released it: reported it no longer owns it (revoked), left, or was removed.  For each
    such move the partition had no fetching owner from the old owner's last Fetch of it to the new owner's
    first Fetch of it after the assignment reached it (without those Fetches, from the release to the
    assignment).  The old owner's *position* (the highest offset its Fetches had reached) above the new
    owner's first fetch offset means those records were read twice: nothing past the new start had been
    committed.  Fetches are tied to members by (host, client id), as in the classic analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from kproto import ErrorCode
from kproto.capture.conversation import Exchange
from kproto.capture.topic_names import TopicNames

__all__ = [
    "CONSUMER_GROUP_HEARTBEAT",
    "CONSUMER_GROUP_DESCRIBE",
    "EpochChange",
    "MemberStep",
    "Description",
    "DescribedMember",
    "PartitionMove",
    "HeartbeatTimeline",
    "build_timeline",
    "changed_steps",
]

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69

Assignment = Dict[str, List[int]]
Client = Tuple[str, Optional[str]]
#: answers that tell a member the coordinator no longer counts it (it must rejoin with epoch 0)
FENCED = (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID)


@dataclass
class EpochChange:
    """A group epoch first seen in the capture, and what caused it (``causes``: in words, oldest first)."""

    epoch: int
    first_seen_ns: int
    causes: List[str] = field(default_factory=list)


@dataclass
class MemberStep:
    """One heartbeat of a KIP-848 member, with the owned and assigned sets after it (None: unknown)."""

    time_ns: int
    sent_epoch: int
    member_epoch: Optional[int]  #: the answer's (None: no answer captured or an error)
    owned: Optional[Assignment]
    assigned: Optional[Assignment]
    error: Optional[str]  #: "NONE", an error name, or None without an answer
    note: str = ""  #: "joined", "left", "fenced", "no response in the capture", ...


@dataclass
class PartitionMove:
    """A partition going from one member to another (see the module docs)."""

    topic: str
    partition: int
    old_owner: str
    new_owner: str
    cause: str  #: "revoked", "left", "session expired", "fenced", "rejoined"
    released_ns: Optional[int]  #: the old owner's heartbeat without it, or its leave (None: removed unseen)
    assigned_ns: int  #: the answer that gave it to the new owner
    from_ns: int
    from_what: str  #: "last fetch", "released" or "last heartbeat"
    to_ns: int
    to_what: str  #: "first fetch" or "assigned"
    committed: Optional[int] = None  #: the last offset committed for it before the move
    old_position: Optional[int] = None
    new_start: Optional[int] = None

    @property
    def gap_ms(self) -> float:
        """How long the partition had no fetching owner."""
        return (self.to_ns - self.from_ns) / 1e6

    @property
    def records_twice(self) -> int:
        """Offsets the new owner read again (0 when none or unknown)."""
        if self.old_position is None or self.new_start is None:
            return 0
        return max(0, self.old_position - self.new_start)


@dataclass
class DescribedMember:
    """One member as a ConsumerGroupDescribe answer gave it: its epoch, its current assignment and the
    target assignment it is reconciling towards."""

    member_id: str
    member_epoch: int
    client_id: str
    assigned: Assignment
    target: Assignment


@dataclass
class Description:
    """A ConsumerGroupDescribe answer for the group: the coordinator's own account at that moment."""

    time_ns: int
    state: str
    group_epoch: int
    assignment_epoch: int  #: the epoch of the target assignment (below the group epoch while computing one)
    assignor: str
    members: List[DescribedMember] = field(default_factory=list)


@dataclass
class _Member:
    owned: Optional[Assignment] = None
    assigned: Optional[Assignment] = None
    subscription: Optional[List[str]] = None
    last_heartbeat_ns: Optional[int] = None
    gone: bool = False
    steps: List[MemberStep] = field(default_factory=list)

    def last_before(self, t: int) -> int:
        """The time of its last heartbeat before ``t``."""
        return max((s.time_ns for s in self.steps if s.time_ns < t), default=t)


@dataclass
class _Release:
    member: str
    time_ns: Optional[int]
    cause: str


@dataclass
class HeartbeatTimeline:
    """What :func:`build_timeline` found for one group."""

    epochs: List[EpochChange] = field(default_factory=list)
    steps: Dict[str, List[MemberStep]] = field(default_factory=dict)
    moves: List[PartitionMove] = field(default_factory=list)
    expired: Dict[str, int] = field(default_factory=dict)  #: member -> its last heartbeat before removal
    fenced: Dict[str, int] = field(default_factory=dict)  #: member -> the answer that fenced it
    descriptions: List[Description] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)


def _parts(topics: Any, names: TopicNames) -> Assignment:
    out: Assignment = {}
    for tp in topics or []:
        # ConsumerGroupDescribe names its topics too; heartbeats give the id only
        name = getattr(tp, "topic_name", None) or names.name(tp) or "?"
        out.setdefault(name, [])
        out[name] = sorted(set(out[name]) | set(tp.partitions or []))
    return {t: ps for t, ps in sorted(out.items()) if ps}


def _flat(assignment: Optional[Assignment]) -> Set[Tuple[str, int]]:
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


def _time(ex: Exchange) -> int:
    return ex.request_time_ns if ex.request_time_ns is not None else (ex.response_time_ns or 0)


class _Builder:
    def __init__(
        self,
        names: TopicNames,
        fetches_of: Callable[[str], Optional[Client]],
        fetch_times: Dict[Client, Dict[str, List[int]]],
        positions: Dict[Client, Dict[str, List[Any]]],
        commits: List[Any],
    ) -> None:
        self.names = names
        self.fetches_of = fetches_of
        self.fetch_times = fetch_times
        self.positions = positions
        self.commits = commits
        self.members: Dict[str, _Member] = {}
        self.timeline = HeartbeatTimeline()
        self.seen_epochs: List[Tuple[int, int]] = []  # (time, epoch) of every successful answer
        self.causes: List[Tuple[int, str, Optional[int]]] = []  # (time, words, epoch it is known to make)
        # per partition: releases and assignments in time order
        self.releases: Dict[Tuple[str, int], List[_Release]] = {}
        # partition -> member -> the last heartbeat whose owned or assigned set held it (so far in the pass)
        self.last_held: Dict[Tuple[str, int], Dict[str, int]] = {}
        # (answer time, new owner, partition, previous holder, its last heartbeat holding it)
        self.assigns: List[Tuple[int, str, Tuple[str, int], str, int]] = []

    # --- reading ---------------------------------------------------------------------------------------

    def heartbeat(self, ex: Exchange) -> None:
        req: Any = ex.request
        resp: Any = ex.response
        member_id = req.member_id or (resp.member_id if resp is not None else None)
        if not member_id:
            return
        t = _time(ex)
        state = self.members.get(member_id)
        first = state is None
        if state is None:
            state = self.members[member_id] = _Member()
        note = ""
        if req.member_epoch == 0:
            note = "rejoined" if not first else "joined"
            self.release_all(member_id, state, t, "rejoined")  # nothing left when it had left or was fenced
            state.owned, state.assigned, state.gone = {}, {}, False
        elif req.member_epoch < 0:
            note = "left" if req.member_epoch == -1 else "left for a while (static member)"
            self.release_all(member_id, state, t, "left")
            state.owned, state.assigned, state.gone = {}, {}, True
            self.causes.append((t, f"{member_id} left", None))
        elif first:
            note = f"first heartbeat in the capture at epoch {req.member_epoch} (joined before it began)"
        if req.topic_partitions is not None and req.member_epoch >= 0:
            owned = _parts(req.topic_partitions, self.names)
            for tp in sorted(_flat(state.owned) - _flat(owned)) if state.owned is not None else []:
                self.releases.setdefault(tp, []).append(_Release(member_id, t, "revoked"))
            state.owned = owned
        subscription = req.subscribed_topic_names
        if subscription is not None and req.member_epoch > 0 and state.subscription is not None:
            if sorted(subscription) != sorted(state.subscription):
                self.causes.append((t, f"{member_id} changed its subscription to {sorted(subscription)}", None))
        if subscription is not None:
            state.subscription = list(subscription)
        state.last_heartbeat_ns = t
        error, epoch = None, None
        if resp is None:
            if req.member_epoch >= 0:
                state.assigned = None  # a later null assignment is relative to this lost answer
            note = (note + "; " if note else "") + "no response in the capture"
        else:
            error = _error_name(resp.error_code)
            if resp.error_code in FENCED:
                note = (note + "; " if note else "") + "fenced"
                self.timeline.fenced[member_id] = ex.response_time_ns or t
                self.release_all(member_id, state, t, "fenced")
                state.owned, state.assigned, state.gone = {}, {}, True
            elif resp.error_code == 0:
                epoch = resp.member_epoch
                if req.member_epoch >= 0:
                    self.seen_epochs.append((ex.response_time_ns or t, epoch))
                if req.member_epoch == 0:
                    self.causes.append((t, f"{member_id} {note}", epoch))
                if resp.assignment is not None:
                    assigned = _parts(resp.assignment.topic_partitions, self.names)
                    for tp in sorted(_flat(assigned) - _flat(state.assigned)):
                        self.assigned_to(member_id, tp, ex.response_time_ns or t)
                    state.assigned = assigned
        state.steps.append(MemberStep(t, req.member_epoch, epoch, state.owned, state.assigned, error, note))
        for tp in _flat(state.owned) | _flat(state.assigned):
            self.last_held.setdefault(tp, {})[member_id] = t

    def assigned_to(self, member_id: str, tp: Tuple[str, int], t: int) -> None:
        """A partition newly given to a member: a move when another member held it last."""
        holders = [(held, m) for m, held in self.last_held.get(tp, {}).items() if m != member_id]
        if holders:
            held, old_owner = max(holders)
            self.assigns.append((t, member_id, tp, old_owner, held))

    def release_all(self, member_id: str, state: _Member, t: int, cause: str) -> None:
        for tp in sorted(_flat(state.owned) | _flat(state.assigned)):
            self.releases.setdefault(tp, []).append(_Release(member_id, t, cause))

    def describe(self, ex: Exchange, group_id: str) -> None:
        resp: Any = ex.response
        if resp is None or ex.response_time_ns is None:
            return
        for group in resp.groups or []:
            if group.group_id != group_id or group.error_code != 0:
                continue
            self.seen_epochs.append((ex.response_time_ns, group.group_epoch))
            members = [
                DescribedMember(
                    m.member_id,
                    m.member_epoch,
                    m.client_id,
                    _parts(m.assignment.topic_partitions, self.names),
                    _parts(m.target_assignment.topic_partitions, self.names),
                )
                for m in group.members or []
            ]
            self.timeline.descriptions.append(
                Description(
                    ex.response_time_ns,
                    group.group_state,
                    group.group_epoch,
                    group.assignment_epoch,
                    group.assignor_name,
                    members,
                )
            )

    # --- after the pass ----------------------------------------------------------------------------------

    def finish(self) -> HeartbeatTimeline:
        timeline = self.timeline
        timeline.steps = {m: s.steps for m, s in self.members.items()}
        self.find_moves()
        self.group_epochs()
        for member_id, state in self.members.items():
            if state.steps and state.steps[0].note.startswith("first heartbeat in the capture"):
                timeline.problems.append(
                    f"{member_id} joined before the capture began: what it owned is unknown until it reports it"
                )
            if any(s.note.endswith("no response in the capture") for s in state.steps):
                timeline.problems.append(
                    f"heartbeat answers of {member_id} are missing: its assignment is unknown until a full one"
                )
        return timeline

    def find_moves(self) -> None:
        for assigned_ns, new_owner, tp, old_owner, held_ns in sorted(self.assigns):
            release = next(
                (
                    r
                    for r in reversed(self.releases.get(tp, []))
                    if r.member == old_owner and r.time_ns is not None and held_ns < r.time_ns <= assigned_ns
                ),
                None,
            )
            if release is None:
                # the coordinator gave it away without the owner letting go: it had removed the owner
                release = _Release(old_owner, None, "session expired")
                self.timeline.expired.setdefault(old_owner, self.members[old_owner].last_before(assigned_ns))
            self.timeline.moves.append(self.move(tp, old_owner, new_owner, release, assigned_ns))

    def move(self, tp: Tuple[str, int], old: str, new: str, release: _Release, assigned_ns: int) -> PartitionMove:
        key = f"{tp[0]}-{tp[1]}"
        old_client, new_client = self.fetches_of(old), self.fetches_of(new)
        limit = release.time_ns if release.time_ns is not None else assigned_ns
        last_fetch = max(
            (t for t in self.fetch_times.get(old_client, {}).get(key, []) if t <= limit) if old_client else (),
            default=None,
        )
        first_fetch = min(
            (t for t in self.fetch_times.get(new_client, {}).get(key, []) if t >= assigned_ns) if new_client else (),
            default=None,
        )
        if last_fetch is not None:
            from_ns, from_what = last_fetch, "last fetch"
        elif release.time_ns is not None:
            from_ns, from_what = release.time_ns, "released"
        else:
            from_ns, from_what = self.members[old].last_heartbeat_ns or assigned_ns, "last heartbeat"
        to_ns, to_what = (first_fetch, "first fetch") if first_fetch is not None else (assigned_ns, "assigned")
        old_seen = self.positions.get(old_client, {}) if old_client is not None else {}
        new_seen = self.positions.get(new_client, {}) if new_client is not None else {}
        positions = [p.offset for p in old_seen.get(key, []) if p.time_ns <= limit]
        new_start = next((p.offset for p in new_seen.get(key, []) if p.time_ns >= assigned_ns), None)
        committed = [
            c.offset
            for c in self.commits
            if c.error == "NONE" and (c.topic, c.partition) == tp and c.time_ns is not None and c.time_ns < to_ns
        ]
        return PartitionMove(
            tp[0],
            tp[1],
            old,
            new,
            release.cause,
            release.time_ns,
            assigned_ns,
            from_ns,
            from_what,
            to_ns,
            to_what,
            committed[-1] if committed else None,
            max(positions) if positions and old_client else None,
            new_start if new_client else None,
        )

    def group_epochs(self) -> None:
        firsts: Dict[int, int] = {}
        highest = -1
        for t, epoch in sorted(self.seen_epochs):
            if epoch > highest:
                firsts[epoch] = t
                highest = epoch
        changes = [EpochChange(e, t) for e, t in sorted(firsts.items())]
        causes = list(self.causes)
        for member_id, last in self.timeline.expired.items():
            seen = next((c.first_seen_ns for c in changes if c.first_seen_ns > last), None)
            quiet = f" ({(seen - last) / 1e6:,.0f} ms after its last heartbeat)" if seen is not None else ""
            causes.append((last, f"{member_id}'s session expired{quiet}", None))
        for member_id, t in self.timeline.fenced.items():
            if member_id not in self.timeline.expired:
                # removed before the answer that told it: after its last heartbeat answered without error
                steps = self.members[member_id].steps
                last_ok = max((s.time_ns for s in steps if s.time_ns < t and s.error == "NONE"), default=t)
                causes.append(
                    (last_ok, f"{member_id} was removed by the coordinator (fenced at its next heartbeat)", None)
                )
        for t, words, made in sorted(causes, key=lambda c: c[0]):
            target: Optional[EpochChange] = None
            if made is not None:
                target = next((c for c in changes if c.epoch == made), None)
            if target is None:
                target = next((c for c in changes if c.first_seen_ns >= t), None)
            if target is not None:
                target.causes.append(words)
        for change in changes:
            if not change.causes:
                change.causes.append(
                    "none in the capture (it began later, topic metadata changed, or a member's connection "
                    "is not captured)"
                )
        self.timeline.epochs = changes


def changed_steps(steps: List[MemberStep]) -> List[MemberStep]:
    """The steps worth a row: the epoch, the owned or the assigned set changed, or an error or a note."""
    out: List[MemberStep] = []
    shown: Any = None
    for s in steps:
        if (s.member_epoch, s.owned, s.assigned) == shown and not s.note and s.error == "NONE":
            continue
        shown = (s.member_epoch, s.owned, s.assigned)
        out.append(s)
    return out


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


def build_timeline(
    group_id: str,
    exchanges: List[Exchange],
    names: TopicNames,
    fetches_of: Callable[[str], Optional[Client]],
    fetch_times: Dict[Client, Dict[str, List[int]]],
    positions: Dict[Client, Dict[str, List[Any]]],
    commits: List[Any],
) -> HeartbeatTimeline:
    """The KIP-848 view of one group from its exchanges (time order); see the module docs."""
    builder = _Builder(names, fetches_of, fetch_times, positions, commits)
    for ex in exchanges:
        if ex.request is None:
            continue
        if ex.api_key == CONSUMER_GROUP_HEARTBEAT:
            builder.heartbeat(ex)
        elif ex.api_key == CONSUMER_GROUP_DESCRIBE:
            builder.describe(ex, group_id)
    return builder.finish()
