"""The asyncio group consumer: :class:`~kproto.group.member.GroupMember` on a socket, plus fetching.

Theory of operation
===================

Membership is the sans-I/O :class:`~kproto.group.member.GroupMember`; this module only carries its
requests (group traffic on a connection of its own, so a Fetch long poll never sits in front of a
heartbeat), feeds it the answers and the clock, and acts on its events.  Its timers run on a task of
their own, the *group task*, so heartbeats go on while the application is busy between polls.

Rebalances happen **inside poll**, as in the Java consumer.  When a heartbeat answer says the group is
rebalancing (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), the group task *parks* it and
the member keeps its partitions; the next :meth:`Consumer.poll` hands it to the member, which then
commits the positions (auto-commit), revokes, rejoins and syncs, while that poll waits.  So a member
that is slow between polls delays the new generation -- the coordinator holds the others' JoinGroup
until it rejoins or its session expires -- and with auto-commit a rebalance processes nothing twice:
records are returned only while the member is STABLE, and the positions committed before the rejoin are
those just past the last record returned.

``max_poll_interval_ms`` (Java's ``max.poll.interval.ms``, default 5 minutes; sent as JoinGroup's
rebalance timeout) bounds the time between polls, where the protocol has it (JoinGroup v1+, Kafka
0.10.1): heartbeats alone would let a stuck application hold its partitions forever, so when no poll
has run for that long the group task makes the member leave (:meth:`GroupMember.poll_timeout
<kproto.group.member.GroupMember.poll_timeout>`: LeaveGroup, partitions revoked without a commit) and
the next poll rejoins.  Time spent inside ``poll()`` counts as polling.

Fetching: once partitions are assigned, their committed offsets are fetched (OffsetFetch); a partition
without one starts at ``auto_offset_reset`` (ListOffsets).  A *fetch task* keeps one Fetch in flight
per leader for the assigned, unpaused partitions with fewer than ``_PREFETCH_BELOW`` records buffered,
so the next Fetch is out while the application works through the last one, as the Java client does.
A compressed batch or message set can start below the position (the broker sends whole batches), so
records below it are skipped, and so are control batches (whose offsets the position still passes).

Where the time goes: a fetched partition is decoded (and so validated) when its response arrives, but
its records become :class:`ConsumerRecord` objects only when :meth:`Consumer.poll` takes them, a few
batches at a time, by :func:`kproto.records.record_rows` -- which the compiled backend does without
running Python code per record.  So the fetch task hands a response over in the time it takes to
validate it, the next Fetch goes out at once, and building records overlaps the broker's answer.

With ``group_protocol="consumer"`` the member is a :class:`~kproto.group.heartbeat_member.HeartbeatMember`
(KIP-848) instead: nothing is parked, since the coordinator does not stop the group; partitions taken away
are revoked one reconciliation at a time while the others keep being fetched and returned.

Versions are negotiated per broker (:class:`~kproto.client.connection.Connection`); the group requests
go in the versions the member names.

Bounds: every request waits at most ``request_timeout_ms`` (Kafka's ``request.timeout.ms``, 30 s) for its
answer -- a JoinGroup ``max_poll_interval_ms`` + 5 s, since the coordinator holds it for the whole
rebalance, as Kafka's consumer does, and a Fetch ``fetch_max_wait_ms`` more, which the broker may hold
it for -- and a TCP handshake ``connect_timeout_ms``.  So :meth:`Consumer.start`
fails within ``connect_timeout_ms + request_timeout_ms`` per bootstrap address tried,
:meth:`Consumer.commit` fails within ``request_timeout_ms`` (at once when the connection is refused or
lost), and :meth:`Consumer.poll` returns within ``timeout_ms`` whatever the broker does.

:meth:`Consumer.seek` wins over the position the consumer would look up itself: a seek made while the
committed offset or the ``auto_offset_reset`` offset of that partition is being fetched is kept.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from itertools import chain, repeat
from operator import attrgetter
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Deque,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    Union,
)

from kproto import ErrorCode
from kproto._generated.error_codes import error_class
from kproto.client.cluster import BrokerNode, ClusterView
from kproto.client.connection import (
    DEFAULT_REQUEST_TIMEOUT_MS,
    BrokerConnectionError,
    BrokerVersions,
    ClientTimeoutError,
)
from kproto.errors import DecodeError, KprotoError
from kproto.group.member import (
    GroupFailed,
    GroupMember,
    MemberConfig,
    MemberState,
    MetadataNeeded,
    OffsetsCommitted,
    PartitionsAssigned,
    PartitionsRevoked,
    SendRequest,
)
from kproto.group.heartbeat_member import (
    HeartbeatMember,
    HeartbeatMemberConfig,
    PartitionsAdded,
    StopFetching,
    TopicIdsNeeded,
)
from kproto.message_base import Message
from kproto.messages import (
    FetchRequest,
    JoinGroupRequest,
    FetchResponse,
    HeartbeatResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kproto.records import decode_message_set, decode_records, record_rows

__all__ = ["Consumer", "ConsumerRecord", "RebalanceListener", "TopicPartition"]

TopicPartition = Tuple[str, int]
_C = ErrorCode
_FETCH, _LIST_OFFSETS, _OFFSET_FETCH = 1, 2, 9
_PARKED_CODES = {_C.REBALANCE_IN_PROGRESS, _C.ILLEGAL_GENERATION, _C.UNKNOWN_MEMBER_ID}
_RESETS = {"earliest": -2, "latest": -1}
#: a JoinGroup may be held for the whole rebalance: it waits this much longer than the rebalance timeout
_JOIN_SLACK_MS = 5000
#: a partition is fetched again while fewer records than this are buffered (fetching overlaps polling)
_PREFETCH_BELOW = 10000


class ConsumerRecord(NamedTuple):
    """One record as :meth:`Consumer.poll` returns it: a named tuple, so that the fetch path can build it
    without running Python code per record (see the module docstring).  ``timestamp`` is None for a magic 0
    message; ``headers`` is empty before magic 2."""

    topic: str
    partition: int
    offset: int
    timestamp: Optional[int]
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Sequence[Tuple[str, Optional[bytes]]]

    def __repr__(self) -> str:
        return f"ConsumerRecord({self.topic!r}, {self.partition}, offset={self.offset}, key={self.key!r})"


class RebalanceListener(Protocol):
    """Told about revoked partitions (after the pre-rejoin commit, before JoinGroup) and assigned ones
    (after their positions are known).  Either method may be a coroutine function."""

    def on_partitions_revoked(self, partitions: List[TopicPartition]) -> Union[None, Awaitable[None]]: ...

    def on_partitions_assigned(self, partitions: List[TopicPartition]) -> Union[None, Awaitable[None]]: ...


_new_record = tuple.__new__
_OFFSET, _TIMESTAMP, _KEY, _VALUE = map(attrgetter, ("offset", "timestamp", "key", "value"))

#: decoded records of one partition not yet turned into ConsumerRecords: (records, from_message_set, start);
#: records below ``start`` are dropped when they are built, and a magic 0/1 ``Message`` has no headers
_Chunk = Tuple[Sequence[Any], bool, int]


def _decode_fetched(raw: bytes, start: int) -> Tuple[List[_Chunk], int, int]:
    """Decode (and so validate) one fetched partition: its chunks, how many records they hold from
    ``start`` on (about: a chunk's records below ``start`` are counted until built), and the offset to fetch
    next.  The records themselves are built later, by :meth:`_Buffer.take` (see the module docstring).

    A compressed batch or message set can begin below ``start`` (the broker sends whole batches).  Control
    batches (transaction markers) give no records but move the next fetch offset past them, so a partition
    ending in a marker is not fetched again from the same place.  Message sets (magic 0/1, what 0.8-0.10
    brokers hold) go through the message set decoder, which builds no per-entry batch header; anything else,
    a magic 2 batch after a message set included, through decode_records."""
    if len(raw) > 16 and raw[16] < 2:
        try:
            messages = list(decode_message_set(raw))
        except DecodeError:
            pass  # a magic 2 batch after the message set: decode_records reads the mix
        else:
            if not messages:
                return [], 0, start
            return [(messages, True, start)], len(messages), messages[-1].offset + 1
    chunks: List[_Chunk] = []
    count = 0
    next_offset = start
    for batch in decode_records(raw).batches:
        next_offset = max(next_offset, batch.next_offset)
        if batch.is_control:
            continue
        chunks.append((batch.records, False, start))
        count += batch.records_count if batch.magic == 2 else len(batch.records)
    return chunks, count, next_offset


class _Buffer:
    """The fetched, not yet returned records of one partition: decoded ``chunks`` still to build, then
    built ConsumerRecords ``built[at:]`` (see "Where the time goes" in the module docstring), and the offset
    its next fetch starts at (past the last batch fetched, control batches included)."""

    __slots__ = ("topic", "partition", "chunks", "built", "at", "count", "next_offset")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.chunks: Deque[_Chunk] = deque()
        self.built: List[ConsumerRecord] = []
        self.at = 0
        #: records not yet returned (built or not; a chunk's records below its start count until built)
        self.count = 0
        self.next_offset = 0

    def __len__(self) -> int:
        return self.count

    def add(self, chunks: List[_Chunk], count: int, next_offset: int) -> None:
        self.chunks.extend(chunks)
        self.count += count
        self.next_offset = next_offset

    def take(self, n: int) -> List[ConsumerRecord]:
        """Up to ``n`` records, in offset order."""
        out: List[ConsumerRecord] = []
        while len(out) < n:
            at = self.at
            if at < len(self.built):
                chunk = self.built[at : at + n - len(out)]
                self.at = at + len(chunk)
                self.count -= len(chunk)
                if out:
                    out.extend(chunk)
                else:
                    out = chunk
            elif self.chunks:
                self._build(n - len(out))
            else:
                break
        return out

    def _build(self, wanted: int) -> None:
        """Turn the next chunks of one fetch (at least ``wanted`` records' worth, or all) into ConsumerRecords."""
        chunks: List[Sequence[Any]] = []
        _, legacy, start = self.chunks[0]
        decoded = 0
        while self.chunks and self.chunks[0][1:] == (legacy, start) and decoded < wanted:
            chunk = self.chunks.popleft()[0]
            decoded += len(chunk)
            chunks.append(chunk)
        if legacy:  # magic 0/1 Messages have no headers
            records = [m for chunk in chunks for m in chunk if m.offset >= start]
            self.built = list(
                map(
                    _new_record,
                    repeat(ConsumerRecord),
                    zip(
                        repeat(self.topic),
                        repeat(self.partition),
                        map(_OFFSET, records),
                        map(_TIMESTAMP, records),
                        map(_KEY, records),
                        map(_VALUE, records),
                        repeat(()),
                    ),
                )
            )
        else:  # one record object alive at a time: the decoder reuses it
            self.built = record_rows(
                chain.from_iterable(chunks), ConsumerRecord, self.topic, self.partition, start=start
            )
        self.count -= decoded - len(self.built)
        self.at = 0


#: Member states in which the application's polls are watched (max.poll.interval).
#: commit answers that mean "ask again once the coordinator is found or has loaded the group"
_COORDINATOR_MOVING = frozenset(
    {ErrorCode.NOT_COORDINATOR_FOR_GROUP, ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, ErrorCode.GROUP_LOAD_IN_PROGRESS}
)
_POLL_WATCHED = frozenset(MemberState) - {
    MemberState.UNJOINED,
    MemberState.LEFT,
    MemberState.CLOSED,
    MemberState.FAILED,
}


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class Consumer:
    """An asyncio Kafka consumer; see the module docstring.  Use ``async with Consumer(...) as c:``.

    With ``group_id`` and ``topics`` it joins the group (``assignors``: names from
    :data:`kproto.group.ASSIGNORS`, most preferred first); without ``group_id`` call :meth:`assign`.
    ``group_protocol="consumer"`` uses the KIP-848 protocol (ConsumerGroupHeartbeat; docs/client.md, "The
    consumer group protocol"): the coordinator assigns, only moved partitions are revoked, and
    ``group_instance_id`` makes the member static.  ``broker_release`` names a broker without ApiVersions
    (``"0.9.0"``).  ``request_timeout_ms`` and ``connect_timeout_ms`` bound every request and TCP handshake
    (module docstring).
    """

    def __init__(
        self,
        bootstrap_servers: Union[str, Sequence[str]],
        *,
        topics: Iterable[str] = (),
        group_id: Optional[str] = None,
        client_id: str = "kproto-consumer",
        broker_release: Optional[BrokerVersions] = None,
        assignors: Sequence[str] = ("range",),
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300_000,
        auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        max_partition_fetch_bytes: int = 1 << 20,
        retry_backoff_ms: int = 100,
        listener: Optional[RebalanceListener] = None,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        connect_timeout_ms: int = 10000,
        group_protocol: str = "classic",
        group_instance_id: Optional[str] = None,
    ) -> None:
        if auto_offset_reset not in _RESETS:
            raise ValueError("auto_offset_reset must be 'earliest' or 'latest'")
        if group_protocol not in ("classic", "consumer"):
            raise ValueError("group_protocol must be 'classic' or 'consumer'")
        if group_instance_id is not None and group_protocol == "classic":
            raise ValueError("group_instance_id is served with group_protocol='consumer' only")
        self.cluster = ClusterView(
            bootstrap_servers,
            client_id=client_id,
            broker_release=broker_release,
            max_in_flight=5,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
        )
        self.request_timeout = request_timeout_ms / 1000.0
        self.group_id = group_id
        self.topics = tuple(topics)
        self.listener = listener
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.group_protocol = group_protocol
        self.member: Optional[Union[GroupMember, HeartbeatMember]] = None
        if group_id is not None and group_protocol == "consumer":
            self.member = HeartbeatMember(
                HeartbeatMemberConfig(
                    group_id=group_id,
                    client_id=client_id,
                    topics=self.topics,
                    rebalance_timeout_ms=max_poll_interval_ms,
                    retry_backoff_ms=retry_backoff_ms,
                    auto_commit=auto_commit,
                    auto_commit_interval_ms=auto_commit_interval_ms,
                    group_instance_id=group_instance_id,
                )
            )
        elif group_id is not None:
            self.member = GroupMember(
                MemberConfig(
                    group_id=group_id,
                    client_id=client_id,
                    topics=self.topics,
                    assignors=tuple(assignors),
                    session_timeout_ms=session_timeout_ms,
                    heartbeat_interval_ms=heartbeat_interval_ms,
                    rebalance_timeout_ms=max_poll_interval_ms,
                    retry_backoff_ms=retry_backoff_ms,
                    auto_commit=auto_commit,
                    auto_commit_interval_ms=auto_commit_interval_ms,
                )
            )
        self.max_poll_interval_ms = max_poll_interval_ms
        self._last_poll_ms = _now_ms()
        self._polling = 0
        self._assigned: List[TopicPartition] = []
        self._positions: Dict[TopicPartition, int] = {}
        #: seeks per partition so far: a position looked up while a seek happened is not applied
        self._seeks: Dict[TopicPartition, int] = {}
        self._paused: Set[TopicPartition] = set()
        self._buffers: Dict[TopicPartition, _Buffer] = {}
        self._fetching: Set[int] = set()
        self._parked: Optional[Tuple[int, Message]] = None
        self._commit_waiters: Dict[int, "asyncio.Future[OffsetCommitResponse]"] = {}
        self._group_wake = asyncio.Event()
        self._data = asyncio.Event()
        self._fetch_wake = asyncio.Event()
        self._ready = asyncio.Event()  # assignment settled and positions known
        self._failure: Optional[BaseException] = None
        self._tasks: List["asyncio.Task[None]"] = []
        # The event loop keeps only weak references to tasks: one started and not awaited (a settle of
        # positions, a group request, a fetch) can be garbage-collected mid-await, silently, leaving
        # a member that never gets positions.  They are held here until they finish.
        self._spawned: Set["asyncio.Future[None]"] = set()
        self._closed = False

    # ---------------------------------------------------------------- life cycle

    async def start(self) -> None:
        """Connect, join the group (if any) and start fetching (bounds: module docstring)."""
        try:
            await self._start()
        except BaseException:
            await self.cluster.close()
            raise

    async def _start(self) -> None:
        await self.cluster.refresh(self.topics)
        if self.member is not None:
            # The member picks each group request's version from what the client negotiated (ApiVersions,
            # or the configured broker release).
            self.member.set_api_versions((await self.cluster.connection(None, "group")).versions)
            if isinstance(self.member, HeartbeatMember):
                self.member.update_topic_ids(self.cluster.topic_names, _now_ms())
            self._tasks.append(asyncio.ensure_future(self._group_loop()))
        self._tasks.append(asyncio.ensure_future(self._fetch_loop()))

    async def __aenter__(self) -> "Consumer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit (auto-commit), leave the group and close the connections."""
        if self._closed:
            return
        self._closed = True
        if self.member is not None and self.member.state not in (MemberState.CLOSED, MemberState.FAILED):
            actions = self.member.close(_now_ms())
            sends = [a for a in actions if isinstance(a, SendRequest)]
            if sends:
                await asyncio.gather(*(self._carry(a, wait=True) for a in sends), return_exceptions=True)
        # The work they spawned too (a Fetch the broker holds, a position lookup): left pending, it would
        # outlive the loop of a caller that stops it right after close() (kproto.client.sync does).
        running = [*self._tasks, *self._spawned]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await self.cluster.close()

    # ---------------------------------------------------------------- the application's side

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume ``partitions`` without a group (positions from ``auto_offset_reset`` unless sought)."""
        if self.member is not None:
            raise KprotoError("assign() is for consumers without group_id")
        self._assigned = list(partitions)
        self._ready.clear()
        self._spawn(self._settle_positions(self._assigned, committed=False))

    def assignment(self) -> List[TopicPartition]:
        return list(self._assigned)

    def position(self, tp: TopicPartition) -> Optional[int]:
        """The offset of the next record :meth:`poll` returns for ``tp``."""
        return self._positions.get(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Continue ``tp`` from ``offset``; buffered records of it are dropped."""
        self._positions[tp] = offset
        self._seeks[tp] = self._seeks.get(tp, 0) + 1
        self._buffers.pop(tp, None)
        if self.member is not None:
            self.member.set_position(tp[0], tp[1], offset)
        self._fetch_wake.set()

    def pause(self, *tps: TopicPartition) -> None:
        """Stop returning and fetching records of ``tps`` until :meth:`resume`."""
        self._paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._paused.difference_update(tps)
        self._fetch_wake.set()

    def paused(self) -> Set[TopicPartition]:
        return set(self._paused)

    async def poll(self, timeout_ms: int = 1000, max_records: int = 500) -> List[ConsumerRecord]:
        """Records from the positions on (at most ``max_records``), waiting up to ``timeout_ms`` for some.

        A pending rebalance runs first, inside this call (see the module docstring)."""
        self._polling += 1
        try:
            return await self._poll(timeout_ms, max_records)
        finally:
            self._polling -= 1
            self._last_poll_ms = _now_ms()
            self._group_wake.set()  # the group task looks at the max.poll.interval deadline again

    async def _poll(self, timeout_ms: int, max_records: int) -> List[ConsumerRecord]:
        deadline = time.monotonic() + timeout_ms / 1000.0
        if self.member is not None and self.member.state is MemberState.LEFT:
            await self._handle(self.member.rejoin(_now_ms()))
        while True:
            self._raise_failure()
            if self._parked is not None and self.member is not None:
                rid, response = self._parked
                self._parked = None
                self._ready.clear()
                await self._handle(self.member.receive(rid, response, _now_ms()))
            if self._ready.is_set() and self._stable():
                records = self._take(max_records)
                if records:
                    return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._data.clear()
            waiter = self._data if self._ready.is_set() else self._ready
            try:
                await asyncio.wait_for(waiter.wait(), remaining)
            except asyncio.TimeoutError:
                return []

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            for record in await self.poll():
                yield record

    async def commit(self, offsets: Optional[Mapping[TopicPartition, int]] = None) -> None:
        """Commit ``offsets`` (default: the current positions) and wait for the coordinator's answer.

        A coordinator that moves (NOT_COORDINATOR, still loading) or whose node stops (connection refused
        or lost) is found again and asked again, within ``request_timeout_ms + connect_timeout_ms`` in all.
        Past that bound it fails with :class:`~kproto.client.connection.BrokerConnectionError` (the
        coordinator still unreachable) or :class:`~kproto.client.connection.ClientTimeoutError` (no answer,
        or no coordinator found again); an error code the broker answered raises its error class."""
        if self.member is None:
            raise KprotoError("commit() needs a group_id")
        # the request itself is bounded by request_timeout_ms; this bound also covers opening the connection,
        # and a coordinator that moved: found again (the group loop rediscovers it) and asked again
        bound = self.request_timeout + self.cluster.connect_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound
        while True:
            actions = self.member.commit(_now_ms(), offsets)
            send = next(a for a in actions if isinstance(a, SendRequest))
            future: "asyncio.Future[Any]" = loop.create_future()
            self._commit_waiters[send.request_id] = future
            await self._handle(actions)
            try:
                done, _ = await asyncio.wait({future}, timeout=max(deadline - loop.time(), 0.0))
            finally:
                self._commit_waiters.pop(send.request_id, None)
            if not done:
                future.cancel()
                raise ClientTimeoutError(
                    f"commit of group {self.group_id}: no answer within {bound * 1000:.0f} ms "
                    "(request_timeout_ms + connect_timeout_ms)"
                )
            try:
                response = future.result()
            except BrokerConnectionError as exc:
                # the coordinator's node is gone (refused, closed): the member finds the group's coordinator
                # again, as when it answers NOT_COORDINATOR, and the commit goes there.  A coordinator that
                # stays silent is request_timeout_ms's business: that ends the commit.
                if isinstance(exc, ClientTimeoutError) or loop.time() >= deadline:
                    raise
                await self._until_stable(deadline)
                continue
            codes = [
                (topic.name, p.partition_index, p.error_code)
                for topic in response.topics
                for p in topic.partitions
                if p.error_code
            ]
            if not codes:
                return
            topic, partition, code = codes[0]
            if any(c not in _COORDINATOR_MOVING for _, _, c in codes) or loop.time() >= deadline:
                raise error_class(code)(f"commit of {topic}[{partition}]")
            await self._until_stable(deadline)

    async def _until_stable(self, deadline: float) -> None:
        """Wait (a retry backoff at least) until the member is in a generation again, as it is once a
        moved coordinator is found and has loaded the group; ClientTimeoutError past ``deadline``."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.retry_backoff)
            assert self.member is not None
            if self.member.state is MemberState.STABLE:
                return
            if self.member.state in (MemberState.FAILED, MemberState.CLOSED, MemberState.LEFT):
                raise KprotoError(f"commit of group {self.group_id}: the member is {self.member.state.name}")
            if loop.time() >= deadline:
                raise ClientTimeoutError(
                    f"commit of group {self.group_id}: the coordinator was not found again in time"
                )

    async def committed(self, partitions: Iterable[TopicPartition]) -> Dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (-1: none)."""
        if self.member is None or self.member.coordinator is None:
            raise KprotoError("committed() needs a group_id and a known coordinator")
        by_topic: Dict[str, List[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        coordinator = self.member.coordinator
        self.cluster.brokers.setdefault(
            coordinator.node_id, BrokerNode(coordinator.node_id, coordinator.host, coordinator.port)
        )
        conn = await self.cluster.connection(coordinator.node_id, "group")
        Topic = OffsetFetchRequest.OffsetFetchRequestTopic
        request = OffsetFetchRequest(
            group_id=self.group_id or "", topics=[Topic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
        )
        response = await conn.request(request, conn.version(_OFFSET_FETCH))
        assert isinstance(response, OffsetFetchResponse)
        out: Dict[TopicPartition, int] = {}
        for answer in response.topics:
            for p in answer.partitions:
                if p.error_code and p.error_code != _C.UNKNOWN_TOPIC_OR_PARTITION:
                    raise error_class(p.error_code)(f"OffsetFetch of {answer.name}[{p.partition_index}]")
                out[(answer.name, p.partition_index)] = p.committed_offset if not p.error_code else -1
        return out

    # ---------------------------------------------------------------- returning records

    def _stable(self) -> bool:
        return self.member is None or self.member.state is MemberState.STABLE

    def _take(self, max_records: int) -> List[ConsumerRecord]:
        out: List[ConsumerRecord] = []
        for tp in self._assigned:
            if tp in self._paused:
                continue
            buffer = self._buffers.get(tp)
            if buffer is None or tp not in self._positions:
                continue
            chunk = buffer.take(max_records - len(out))
            if chunk:
                out = chunk if not out else out + chunk
            if len(buffer):
                position = chunk[-1].offset + 1 if chunk else self._positions[tp]
            else:  # drained: the position moves past trailing control records too
                position = buffer.next_offset
                del self._buffers[tp]
            self._positions[tp] = position
            if self.member is not None:
                self.member.set_position(tp[0], tp[1], position)
            if len(buffer) < _PREFETCH_BELOW:
                self._fetch_wake.set()
            if len(out) >= max_records:
                break
        return out

    # ---------------------------------------------------------------- the group task

    async def _group_loop(self) -> None:
        assert self.member is not None
        try:
            await self._handle(self.member.start(_now_ms()))
            # close() cancels this task, but on Python 3.11 a cancel landing while wait_for(wake, timeout)
            # completes is swallowed: the flag ends the loop then
            while not self._closed:
                self._group_wake.clear()
                deadline = self.member.next_deadline_ms()
                poll_due = self._poll_due_ms()
                if poll_due is not None:
                    deadline = poll_due if deadline is None else min(deadline, poll_due)
                timeout = None if deadline is None else max(deadline - _now_ms(), 0) / 1000.0
                try:
                    await asyncio.wait_for(self._group_wake.wait(), timeout)
                except asyncio.TimeoutError:
                    pass
                now = _now_ms()
                poll_due = self._poll_due_ms()
                if poll_due is not None and now >= poll_due:
                    # max.poll.interval: the application stopped polling, so the member leaves the group (its
                    # partitions go to the others) instead of holding them while heartbeats say all is well
                    self._parked = None
                    await self._handle(self.member.poll_timeout(now))
                await self._handle(self.member.tick(now))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - surfaced by the next poll
            self._failure = exc
            self._ready.set()

    def _poll_due_ms(self) -> Optional[int]:
        """When the member must leave unless the application polls (None: not watched now -- a poll is
        running, which counts as polling, or the member is not in the group)."""
        assert self.member is not None
        if self._polling or self.member.state not in _POLL_WATCHED or self.member.versions["join_group"] < 1:
            return None  # JoinGroup v0 (before Kafka 0.10.1) has no max.poll.interval: the session covers both
        return self._last_poll_ms + self.max_poll_interval_ms

    async def _handle(self, actions: List[Any]) -> None:
        """Act on the member's actions in order (a revoke listener runs before the JoinGroup is sent)."""
        assert self.member is not None
        for action in actions:
            if isinstance(action, SendRequest):
                self._spawn(self._carry(action))
            elif isinstance(action, StopFetching):  # KIP-848: these are about to be revoked
                gone = set(action.partitions)
                self._assigned = [tp for tp in self._assigned if tp not in gone]
                for tp in gone:
                    self._buffers.pop(tp, None)
            elif isinstance(action, PartitionsRevoked):
                if isinstance(self.member, GroupMember):
                    self._ready.clear()  # classic: every partition goes, the next assignment comes whole
                await self._call_listener("on_partitions_revoked", list(action.partitions))
                gone = set(action.partitions)
                for tp in gone:
                    self._buffers.pop(tp, None)
                    self._positions.pop(tp, None)
                self._assigned = [tp for tp in self._assigned if tp not in gone]
            elif isinstance(action, PartitionsAdded):  # KIP-848: kept partitions go on being fetched
                self._assigned.extend(tp for tp in action.partitions if tp not in self._assigned)
                self._spawn(self._settle_positions(list(action.partitions), committed=True, added=True))
            elif isinstance(action, TopicIdsNeeded):
                self._spawn(self._topic_ids_for_member())
            elif isinstance(action, PartitionsAssigned):
                self._assigned = list(action.partitions)
                self._spawn(self._settle_positions(self._assigned, committed=True))
            elif isinstance(action, MetadataNeeded):
                self._spawn(self._metadata_for_member(action.topics))
            elif isinstance(action, OffsetsCommitted):
                waiter = self._commit_waiters.pop(action.request_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(action.response)
            elif isinstance(action, GroupFailed):
                self._failure = error_class(action.error_code)(f"group {self.group_id}: {action.api} failed")
                self._ready.set()
        self._group_wake.set()

    async def _carry(self, action: SendRequest, wait: bool = False) -> None:
        """Send one member request and hand the answer (or the failure) back to the member."""
        assert self.member is not None
        destination = action.destination
        try:
            if destination is None:
                conn = await self.cluster.connection(None, "group")
            else:
                self.cluster.brokers.setdefault(
                    destination.node_id, BrokerNode(destination.node_id, destination.host, destination.port)
                )
                conn = await self.cluster.connection(destination.node_id, "group")
            timeout = None
            if isinstance(action.request, JoinGroupRequest):
                timeout = max(self.request_timeout, (self.max_poll_interval_ms + _JOIN_SLACK_MS) / 1000.0)
            response = await conn.request(action.request, action.api_version, timeout=timeout)
        except (BrokerConnectionError, OSError) as exc:
            waiter = self._commit_waiters.pop(action.request_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc if isinstance(exc, KprotoError) else BrokerConnectionError(str(exc)))
            if wait or self._closed:
                return
            self.cluster.forget_closed()
            await self._handle(self.member.request_failed(action.request_id, _now_ms()))
            return
        if wait or self._closed:
            return
        if isinstance(response, HeartbeatResponse) and response.error_code in _PARKED_CODES:
            self._parked = (action.request_id, response)  # the next poll() rejoins
            self._data.set()
            return
        await self._handle(self.member.receive(action.request_id, response, _now_ms()))

    async def _topic_ids_for_member(self) -> None:
        assert isinstance(self.member, HeartbeatMember)
        try:
            await self.cluster.refresh(self.topics)
        except (KprotoError, OSError):
            await asyncio.sleep(self.retry_backoff)
        await self._handle(self.member.update_topic_ids(self.cluster.topic_names, _now_ms()))

    async def _metadata_for_member(self, topics: Sequence[str]) -> None:
        assert self.member is not None
        try:
            await self.cluster.refresh(topics)
        except (KprotoError, OSError):
            await asyncio.sleep(self.retry_backoff)
        counts = {t: self.cluster.partitions[t] for t in topics if t in self.cluster.partitions}
        assert isinstance(self.member, GroupMember)
        await self._handle(self.member.update_metadata(counts, _now_ms()))

    async def _call_listener(self, method: str, partitions: List[TopicPartition]) -> None:
        if self.listener is None:
            return
        result = getattr(self.listener, method)(partitions)
        if inspect.isawaitable(result):
            await result

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    # ---------------------------------------------------------------- positions

    async def _settle_positions(self, partitions: List[TopicPartition], committed: bool, added: bool = False) -> None:
        """Positions of newly assigned partitions: committed offsets, else ``auto_offset_reset``.  ``added``:
        partitions joining those already owned (KIP-848), which keep their positions."""
        generation = self.member.generation_id if self.member is not None else None
        seeks = dict(self._seeks)

        def sought(tp: TopicPartition) -> bool:  # seek() ran while this lookup was out: the seek wins
            return self._seeks.get(tp, 0) != seeks.get(tp, 0)

        try:
            found = await self.committed(partitions) if committed else {}
            missing = [tp for tp in partitions if found.get(tp, -1) < 0 and tp not in self._positions]
            for tp, offset in found.items():
                if offset >= 0 and not sought(tp):
                    self._positions[tp] = offset
            if missing:
                for tp, offset in (await self._reset_offsets(missing)).items():
                    if not sought(tp):
                        self._positions[tp] = offset
        except (KprotoError, OSError) as exc:
            self._failure = exc  # surfaced by the next poll()
            self._ready.set()
            return
        if added:
            if any(tp not in self._assigned for tp in partitions):
                return  # revoked again while their positions were looked up
        elif self.member is not None and (self.member.generation_id != generation or self._assigned != partitions):
            return  # a newer assignment overtook this one
        for tp in partitions:
            if self.member is not None and tp in self._positions:
                self.member.set_position(tp[0], tp[1], self._positions[tp])
        await self._call_listener("on_partitions_assigned", list(partitions))
        self._ready.set()
        self._fetch_wake.set()

    async def _reset_offsets(self, partitions: List[TopicPartition]) -> Dict[TopicPartition, int]:
        timestamp = _RESETS[self.auto_offset_reset]
        out: Dict[TopicPartition, int] = {}
        for node, tps in (await self._by_leader(partitions)).items():
            conn = await self.cluster.connection(node)
            version = conn.version(_LIST_OFFSETS)
            Topic = ListOffsetsRequest.ListOffsetsTopic
            Partition = Topic.ListOffsetsPartition
            by_topic: Dict[str, List[Any]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(Partition(partition_index=partition, timestamp=timestamp))
            response = await conn.request(
                ListOffsetsRequest(replica_id=-1, topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]),
                version,
            )
            assert isinstance(response, ListOffsetsResponse)
            for answer in response.topics:
                for p in answer.partitions:
                    if p.error_code:
                        raise error_class(p.error_code)(f"ListOffsets of {answer.name}[{p.partition_index}]")
                    offset = p.old_style_offsets[0] if version == 0 else p.offset
                    out[(answer.name, p.partition_index)] = offset
        return out

    async def _by_leader(self, partitions: Iterable[TopicPartition]) -> Dict[int, List[TopicPartition]]:
        partitions = list(partitions)
        if any(self.cluster.leader(*tp) is None for tp in partitions):
            await self.cluster.refresh({t for t, _ in partitions})
        out: Dict[int, List[TopicPartition]] = {}
        for tp in partitions:
            leader = self.cluster.leader(*tp)
            if leader is not None:
                out.setdefault(leader, []).append(tp)
        return out

    # ---------------------------------------------------------------- the fetch task

    async def _fetch_loop(self) -> None:
        while True:
            self._fetch_wake.clear()
            wanted = [
                tp
                for tp in self._assigned
                if tp not in self._paused
                and tp in self._positions
                and len(self._buffers.get(tp) or ()) < _PREFETCH_BELOW
            ]
            if wanted and self._ready.is_set():
                try:
                    groups = await self._by_leader(wanted)
                except (KprotoError, OSError):
                    await asyncio.sleep(self.retry_backoff)
                    continue
                for node, tps in groups.items():
                    if node not in self._fetching:
                        self._fetching.add(node)
                        self._spawn(self._fetch(node, tps))
            await self._fetch_wake.wait()

    async def _fetch(self, node: int, partitions: List[TopicPartition]) -> None:
        got = False
        try:
            conn = await self.cluster.connection(node)
            version = conn.version(_FETCH)
            asked = {tp: self._next_fetch_offset(tp) for tp in partitions if tp in self._positions}
            Topic = FetchRequest.FetchTopic
            Partition = Topic.FetchPartition
            by_topic: Dict[str, List[Any]] = {}
            for (topic, partition), offset in asked.items():
                by_topic.setdefault(topic, []).append(
                    Partition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=self.max_partition_fetch_bytes
                    )
                )
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=self.fetch_max_wait_ms,
                min_bytes=self.fetch_min_bytes,
                topics=[Topic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            )
            if version >= 3:
                request.max_bytes = 50 << 20
            # the broker may hold a Fetch for max_wait_ms before it answers: that is not silence
            bound = self.request_timeout + self.fetch_max_wait_ms / 1000.0
            response = await conn.request(request, version, timeout=bound)
            assert isinstance(response, FetchResponse)
            got = self._store(response, asked)
        except (BrokerConnectionError, OSError):
            self.cluster.forget_closed()
            await asyncio.sleep(self.retry_backoff)
        except KprotoError as exc:
            self._failure = exc
            self._data.set()
        finally:
            self._fetching.discard(node)
            self._fetch_wake.set()
        if got:  # after waking the fetch task: the next Fetch goes out before poll builds these records
            self._data.set()

    def _next_fetch_offset(self, tp: TopicPartition) -> int:
        """Past the last batch buffered, or the position when nothing is buffered."""
        buffer = self._buffers.get(tp)
        return buffer.next_offset if buffer is not None else self._positions[tp]

    def _store(self, response: FetchResponse, asked: Dict[TopicPartition, int]) -> bool:
        """Buffer the records of ``response`` (decoded and validated, not built); whether any arrived."""
        got = False
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                if (
                    tp not in self._assigned
                    or tp not in self._positions
                    or self._next_fetch_offset(tp) != asked.get(tp)
                ):
                    continue  # sought, revoked or reassigned while the fetch was out
                if p.error_code == _C.OFFSET_OUT_OF_RANGE:
                    self._positions.pop(tp, None)
                    self._spawn(self._settle_positions([tp], committed=False))
                    continue
                if p.error_code:
                    self.cluster.forget_leader(*tp)
                    continue
                raw = bytes(p.records) if p.records is not None else b""
                if not raw:
                    continue
                chunks, count, next_offset = _decode_fetched(raw, asked[tp])
                if next_offset == asked[tp]:
                    continue
                buffer = self._buffers.get(tp)
                if buffer is None:
                    buffer = self._buffers[tp] = _Buffer(*tp)
                buffer.add(chunks, count, next_offset)
                got = True
        return got

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
