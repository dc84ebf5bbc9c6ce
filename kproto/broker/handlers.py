"""What the mock broker answers: one handler per api, over the cluster, the group coordinator and a clock.

:class:`BrokerCore` knows nothing of sockets.  ``await core.handle(request, client_host)`` returns the
response message for a decoded request (None for an ``acks=0`` Produce); it waits only where a 0.9
broker would park the request: a Fetch long poll (``max_wait_ms``/``min_bytes``) and JoinGroup/SyncGroup
requests the group coordinator holds until the join or sync phase completes.  Requests a client never
sends to a 0.9 broker (the inter-broker keys 4-7) raise :class:`~kproto.errors.ProtocolError`, and the
connection is closed, as 0.8 brokers did with requests they could not read.

The group APIs go to the sans-I/O :class:`~kproto.group.coordinator.GroupCoordinator`; each parked call
carries an :class:`asyncio.Future` as its reply token, resolved when the coordinator releases the
reply.  :meth:`BrokerCore.run_timers` drives the coordinator's deadlines (session expiry, join
timeouts).  OffsetCommit v0 / OffsetFetch v0 use a separate store, as 0.9 kept those in ZooKeeper apart
from the group coordinator (no group checks; "no offset" is UNKNOWN_TOPIC_OR_PARTITION).

Simplifications, all documented in the handlers: ListOffsets answers one offset (latest for −1, the log
start for −2 and any other time); topics are created on Metadata/Produce without the transient
LEADER_NOT_AVAILABLE of a real broker; throttle times are 0.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

from kproto import ErrorCode
from kproto.broker.append import DecompressionBudget, has_compressed_entries, prepare_append
from kproto.broker.cluster import Cluster
from kproto.broker.config import BrokerConfig
from kproto.broker.control import CONTROL_PLANE_VERSIONS, ControlPlane, VersionTable, served_table
from kproto.broker.faults import error_response
from kproto.broker.sasl import SASL_VERSIONS
from kproto.connection.server import RequestReceived
from kproto.errors import ProtocolError, UnsupportedVersionError
from kproto.group.coordinator import SERVED_VERSIONS as COORDINATOR_VERSIONS
from kproto.group.coordinator import GroupCoordinator, Reply
from kproto.message_base import Message
from kproto.messages import (
    FetchResponse,
    ListOffsetsResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    ProduceResponse,
)

__all__ = ["BrokerCore", "DATA_PLANE_VERSIONS", "SERVED_VERSIONS", "monotonic_ms", "wait_event"]

_C = ErrorCode
_ZK_METADATA_MAX = 4096  # offset.metadata.max.bytes also bounds v0 commits

#: The versions the data-plane handlers below answer (Produce, Fetch, ListOffsets), by api key.
DATA_PLANE_VERSIONS: VersionTable = {0: (0, 2), 1: (0, 3), 2: (0, 0)}
#: OffsetCommit/OffsetFetch v0: the ZooKeeper-era offsets this module keeps apart from the coordinator.
_ZK_OFFSET_VERSIONS: VersionTable = {8: (0, 0), 9: (0, 0)}

#: Everything the broker serves, by api key: each part's own declaration, merged once
#: (:func:`kproto.broker.control.served_table`).  ApiVersions advertises it and :meth:`BrokerCore.handle`
#: enforces it.
SERVED_VERSIONS: VersionTable = served_table(
    DATA_PLANE_VERSIONS, _ZK_OFFSET_VERSIONS, CONTROL_PLANE_VERSIONS, SASL_VERSIONS,
    {request.API_KEY: served for request, served in COORDINATOR_VERSIONS.items()})


def monotonic_ms() -> int:
    """The coordinator's clock: milliseconds that never go backwards."""
    return int(time.monotonic() * 1000)


async def wait_event(event: asyncio.Event, timeout: Optional[float]) -> None:
    """Wait until ``event`` is set or ``timeout`` seconds pass (None: no limit).

    Not ``asyncio.wait_for``: on Python 3.11 it can swallow a cancellation that arrives as the event is
    set, and a task that ignores its cancellation keeps the broker from stopping.
    """
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()


class BrokerCore:
    """The request handlers of one mock broker; see the module docstring."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.cluster = Cluster(auto_create=config.auto_create_topics, default_partitions=config.default_partitions,
                               max_topics=config.max_topics)
        self.coordinator = GroupCoordinator(config.coordinator)
        self.zk_offsets: Dict[Tuple[str, str, int], Tuple[int, Optional[str]]] = {}
        self.host = config.advertised_host or "127.0.0.1"
        self.port = config.advertised_port or 0
        #: Requests handled, by (api key, version).
        self.request_counts: Counter = Counter()
        #: Bytes decompressed by Produce requests so far (each request within its own budget).
        self.produce_decompressed_bytes = 0
        self._append_locks: Dict[Tuple[str, int], asyncio.Lock] = {}
        self._data_arrived: Optional[asyncio.Event] = None
        self._timers_changed: Optional[asyncio.Event] = None
        #: What the broker serves (api key → lowest, highest version); ApiVersions advertises it.
        self.served = SERVED_VERSIONS
        self.control = ControlPlane(self)
        self._handlers: Dict[int, Callable[[RequestReceived, str], Awaitable[Optional[Message]]]] = {
            0: self._produce, 1: self._fetch, 2: self._list_offsets,
            8: self._offset_commit, 9: self._offset_fetch,
            **self.control.handlers,  # type: ignore[dict-item]
        }
        # The coordinator takes and answers the group APIs' wire messages as they are.
        for request_class in COORDINATOR_VERSIONS:
            self._handlers.setdefault(request_class.API_KEY, self._ask)

    def bind(self, host: str, port: int) -> None:
        """Advertise the address the broker listens on (unless the config names another)."""
        self.host = self.config.advertised_host or host
        self.port = self.config.advertised_port or port

    async def handle(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """The response to ``request`` (None when none is due); ``client_host`` as DescribeGroups shows it."""
        handler = self._handlers.get(request.api_key)
        if handler is None:
            raise ProtocolError(f"the mock broker does not serve api key {request.api_key}")
        self.request_counts[(request.api_key, request.api_version)] += 1
        low, high = self.served[request.api_key]
        if not low <= request.api_version <= high:
            # A version the broker does not serve but can read (a client that skipped ApiVersions):
            # UNSUPPORTED_VERSION in every error field of that version's response.
            return error_response(request.api_key, request.message, _C.UNSUPPORTED_VERSION, request.api_version)
        try:
            return await handler(request, client_host)
        except UnsupportedVersionError as exc:
            raise ProtocolError(f"the mock broker does not serve api key {request.api_key} "
                                f"v{request.api_version}: {exc}") from exc

    def topics_changed(self) -> None:
        """Topics were created, deleted or grown: parked fetches look again."""
        self._announce_data()

    # ---------------------------------------------------------------- events shared with waiters

    def _event(self, name: str) -> asyncio.Event:
        event = getattr(self, name)
        if event is None:
            event = asyncio.Event()
            setattr(self, name, event)
        return event

    def _announce_data(self) -> None:
        # Wake every parked Fetch; each re-reads and parks again if it still lacks min_bytes.
        event = self._event("_data_arrived")
        self._data_arrived = asyncio.Event()
        event.set()

    # ---------------------------------------------------------------- Produce, Fetch, ListOffsets

    async def _produce(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req = request.message
        T = ProduceResponse.TopicProduceResponse
        P = T.PartitionProduceResponse
        targets = [(topic.name, self.cluster.lookup(topic.name, create=True), part)
                   for topic in req.topic_data for part in topic.partition_data]
        # One decompression budget for the whole request; partitions are appended in request order,
        # each under its partition's lock, so a compressed append can run on a worker thread while
        # other requests (and other partitions) go on.
        budget = DecompressionBudget(self.config.produce_decompression_budget)
        keys = sorted({(name, part.index) for name, partitions, part in targets
                       if partitions is not None and 0 <= part.index < len(partitions)})
        locks = [self._append_locks.setdefault(key, asyncio.Lock()) for key in keys]
        answers: Dict[str, list] = {}
        appended = False
        for lock in locks:
            await lock.acquire()
        try:
            for name, partitions, part in targets:
                code, base = await self._append(req.acks, partitions, part, budget)
                appended = appended or code == _C.NONE
                answers.setdefault(name, []).append(P(index=part.index, error_code=code, base_offset=base))
        finally:
            for lock in locks:
                lock.release()
        self.produce_decompressed_bytes += budget.used
        if appended:
            self._announce_data()
        if req.acks == 0:
            return None
        return ProduceResponse(responses=[T(name=name, partition_responses=ps) for name, ps in answers.items()],
                               throttle_time_ms=0)

    async def _append(self, acks: int, partitions: Optional[list], part: Any,
                      budget: DecompressionBudget) -> Tuple[int, int]:
        if acks not in (-1, 0, 1):
            return _C.INVALID_REQUIRED_ACKS, -1
        if partitions is None or not 0 <= part.index < len(partitions):
            return _C.UNKNOWN_TOPIC_OR_PARTITION, -1
        log = partitions[part.index]
        raw = part.records.raw if part.records is not None else b""
        if has_compressed_entries(raw):
            prepared = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(prepare_append, raw, log.high_watermark,
                                        message_max_bytes=self.config.message_max_bytes, budget=budget))
        else:
            prepared = prepare_append(raw, log.high_watermark, message_max_bytes=self.config.message_max_bytes,
                                      budget=budget)
        if isinstance(prepared, ErrorCode):
            return prepared, -1
        return _C.NONE, log.append(prepared)

    async def _fetch(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req = request.message
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000.0
        # The response budget: the broker's fetch.max.bytes, lowered by a v3+ request's own max_bytes.
        limit = self.config.fetch_max_bytes
        if request.api_version >= 3:
            limit = min(limit, max(getattr(req, "max_bytes", limit), 0))
        while True:
            arrival = self._event("_data_arrived")
            response, total, failed = self._read(req, limit, first_entry_whole=request.api_version >= 3)
            remaining = deadline - loop.time()
            if failed or total >= req.min_bytes or remaining <= 0:
                return response
            await wait_event(arrival, remaining)

    def _read(self, req: Any, limit: int, *, first_entry_whole: bool) -> Tuple[Message, int, bool]:
        """The fetch response as things stand, its record bytes, and whether any partition failed.

        A partition named twice is answered once (Kafka reads the request into a map), and the record
        bytes of the whole response stay within ``limit``: partitions past it get no records.  Fetch
        v3+ (KIP-74) returns the first non-empty partition's first entry whole even when that alone
        exceeds the limits, so a consumer can always progress; older versions cut it, as 0.9 did.
        """
        T = FetchResponse.FetchableTopicResponse
        P = T.PartitionData
        total, failed, topics = 0, False, []
        seen: set = set()
        for topic in req.topics:
            answers = []
            for part in topic.partitions:
                if (topic.topic, part.partition) in seen:
                    continue
                seen.add((topic.topic, part.partition))
                log = self.cluster.partition(topic.topic, part.partition)
                if log is None or not log.in_range(part.fetch_offset):
                    code = _C.UNKNOWN_TOPIC_OR_PARTITION if log is None else _C.OFFSET_OUT_OF_RANGE
                    failed = True
                    answers.append(P(partition_index=part.partition, error_code=code,
                                     high_watermark=-1 if log is None else log.high_watermark, records=b""))
                    continue
                room = min(part.partition_max_bytes, self.config.max_fetch_bytes, limit - total)
                if total == 0 and first_entry_whole:
                    room = max(room, min(log.first_entry_size(part.fetch_offset), self.config.max_fetch_bytes))
                data = log.read(part.fetch_offset, room)
                total += len(data)
                answers.append(P(partition_index=part.partition, error_code=_C.NONE,
                                 high_watermark=log.high_watermark, records=data))
            if answers:
                topics.append(T(topic=topic.topic, partitions=answers))
        return FetchResponse(throttle_time_ms=0, responses=topics), total, failed

    async def _list_offsets(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        topics = []
        for topic in request.message.topics:
            answers = []
            for part in topic.partitions:
                log = self.cluster.partition(topic.name, part.partition_index)
                if log is None:
                    answers.append(P(partition_index=part.partition_index, error_code=_C.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                # One segment per partition: "latest" is the high watermark, any other time its start.
                offset = log.high_watermark if part.timestamp == -1 else log.log_start_offset
                offsets = [offset][:max(part.max_num_offsets, 0)]
                answers.append(P(partition_index=part.partition_index, error_code=_C.NONE, old_style_offsets=offsets))
            topics.append(T(name=topic.name, partitions=answers))
        return ListOffsetsResponse(topics=topics)

    # ---------------------------------------------------------------- offsets

    async def _offset_commit(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        if request.api_version == 0:
            req = request.message
            offsets = {(t.name, p.partition_index): (p.committed_offset, p.committed_metadata)
                       for t in req.topics for p in t.partitions}
            return self._zk_commit(req.group_id, offsets)
        return await self._ask(request, client_host)

    def _zk_commit(self, group_id: str, offsets: Dict[Tuple[str, int], Tuple[int, Optional[str]]]) -> Message:
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        by_topic: Dict[str, list] = {}
        for (topic, partition), (offset, metadata) in offsets.items():
            code = _C.NONE
            if metadata is not None and len(metadata) > _ZK_METADATA_MAX:
                code = _C.OFFSET_METADATA_TOO_LARGE
            else:
                self.zk_offsets[(group_id, topic, partition)] = (offset, metadata)
            by_topic.setdefault(topic, []).append(P(partition_index=partition, error_code=code))
        return OffsetCommitResponse(topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def _offset_fetch(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        req = request.message
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        if request.api_version == 0:
            topics = []
            for t in req.topics:
                parts = []
                for i in t.partition_indexes:
                    found = self.zk_offsets.get((req.group_id, t.name, i))
                    parts.append(P(partition_index=i, committed_offset=found[0], metadata=found[1], error_code=_C.NONE)
                                 if found else P(partition_index=i, committed_offset=-1, metadata="",
                                                 error_code=_C.UNKNOWN_TOPIC_OR_PARTITION))
                topics.append(T(name=t.name, partitions=parts))
            return OffsetFetchResponse(topics=topics)
        return await self._ask(request, client_host)

    # ---------------------------------------------------------------- coordinator plumbing

    async def _ask(self, request: RequestReceived, client_host: str) -> Message:
        """Hand a group request to the coordinator with a future as the reply token; wait for its reply."""
        future = asyncio.get_running_loop().create_future()
        self._deliver(self.coordinator.handle(
            future, request.message, request.api_version, client_id=request.header.client_id or "",
            client_host=client_host, now_ms=monotonic_ms()))
        self._event("_timers_changed").set()
        return await future

    @staticmethod
    def _deliver(replies: List[Reply]) -> None:
        for reply in replies:
            future = reply.reply_to
            if isinstance(future, asyncio.Future) and not future.done():  # done: its connection went away
                future.set_result(reply.result)

    async def run_timers(self) -> None:
        """Fire the coordinator's deadlines as they come, forever (cancel to stop)."""
        changed = self._event("_timers_changed")
        while True:
            changed.clear()
            deadline = self.coordinator.next_deadline_ms()
            timeout = None if deadline is None else max(deadline - monotonic_ms(), 0) / 1000.0
            await wait_event(changed, timeout)
            self._deliver(self.coordinator.tick(monotonic_ms()))
