"""What the mock broker answers: one handler per api, over the cluster, the group coordinator and a clock.

:class:`BrokerCore` knows nothing of sockets.  ``await core.handle(request, client_host)`` returns the
response message for a decoded request (None for an ``acks=0`` Produce); it waits only where a broker
parks a request: a Fetch long poll (``max_wait_ms``/``min_bytes``) and JoinGroup/SyncGroup requests the
group coordinator holds until the join or sync phase completes.

Dispatch is by api key over :data:`SERVED_VERSIONS`, the one table ApiVersions advertises: each part
declares its own versions with its handlers, once -- the control plane (:mod:`kproto.broker.control`),
SASL (:mod:`kproto.broker.sasl`, answered per connection by the server), the data plane
(:mod:`kproto.broker.data_plane`: Produce, Fetch, ListOffsets, InitProducerId, transactions), the
ZooKeeper-era offsets here (:attr:`BrokerCore.API_TABLE`) and the group coordinator
(:data:`kproto.group.coordinator.SERVED_VERSIONS`) -- and they are merged once here
(:mod:`kproto.broker.served_versions`).  The core builds the parts and hands each what it needs (the
config, the cluster, the served table, the broker's endpoint); no part sees the core.
A readable version outside the table is answered UNSUPPORTED_VERSION; an api key outside it (the
inter-broker and KRaft keys) raises :class:`~kproto.errors.ProtocolError`, and the connection is closed,
as Kafka does with requests it cannot read.  Every answer is trimmed to the fields of its version
(:func:`~kproto.broker.served_versions.fit_to_version`).

The group APIs go to the sans-I/O :class:`~kproto.group.coordinator.GroupCoordinator`; each parked call
carries an :class:`asyncio.Future` as its reply token, resolved when the coordinator releases the
reply.  ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) go to the sans-I/O
:class:`~kproto.group.consumer_group.ConsumerGroupCoordinator`, which answers at once; it shares group
ids and committed offsets with the classic coordinator, which asks it about OffsetCommit/OffsetFetch
of its groups.  :meth:`BrokerCore.run_timers` drives both coordinators' deadlines (session expiry,
join and revocation timeouts).  OffsetCommit v0 / OffsetFetch v0 use a separate store, as 0.9 kept those in
ZooKeeper apart
from the group coordinator (no group checks; "no offset" is UNKNOWN_TOPIC_OR_PARTITION).  Throttle
times are 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

from kproto import ErrorCode
from kproto.broker.cluster import GROUP_KEY, TRANSACTION_KEY, Cluster
from kproto.broker.config import BrokerConfig
from kproto.broker.control import CONTROL_PLANE_VERSIONS, ControlPlane
from kproto.broker.data_plane import SERVED_VERSIONS as DATA_PLANE_VERSIONS
from kproto.broker.data_plane import DataPlane, wait_event
from kproto.broker.faults import error_response
from kproto.broker.sasl import SASL_VERSIONS
from kproto.broker.served_versions import ApiTable, Handler, VersionTable, bind_handlers, fit_to_version, served_table
from kproto.broker.served_versions import api_key_of, versions_of
from kproto.connection.server import RequestReceived
from kproto.errors import ProtocolError, UnsupportedVersionError
from kproto.group.coordinator import SERVED_VERSIONS as COORDINATOR_VERSIONS
from kproto.group.coordinator import GroupCoordinator, Reply
from kproto.group.consumer_group import ConsumerGroupCoordinator
from kproto.group.consumer_group_rules import SERVED_VERSIONS as CONSUMER_GROUP_VERSIONS
from kproto.message_base import Message
from kproto.messages import OffsetCommitResponse, OffsetFetchResponse

__all__ = ["BrokerCore", "SERVED_VERSIONS", "coordinator_keys", "monotonic_ms", "wait_event"]

_C = ErrorCode
_HEARTBEAT = 12
_ZK_METADATA_MAX = 4096  # offset.metadata.max.bytes also bounds v0 commits


def coordinator_keys(api_key: int, message: Any, version: int) -> List[Tuple[int, str]]:
    """The (key type, key) coordinators a request must reach: groups (0) or transactional ids (1)."""
    if api_key in (8, 11, 12, 13, 14, 28, 47, 68):  # commit, join, heartbeat, leave, sync, txn commit...
        if api_key == 8 and version == 0:
            return []  # the ZooKeeper-era store: any broker
        return [(GROUP_KEY, message.group_id)]
    if api_key == 9:
        if version == 0:
            return []
        if version >= 8:
            return [(GROUP_KEY, g.group_id) for g in message.groups]
        return [(GROUP_KEY, message.group_id)]
    if api_key == 15:
        return [(GROUP_KEY, g) for g in message.groups]
    if api_key == 42:
        return [(GROUP_KEY, g) for g in message.groups_names]
    if api_key == 69:
        return [(GROUP_KEY, g) for g in message.group_ids]
    if api_key == 22:
        return [] if message.transactional_id is None else [(TRANSACTION_KEY, message.transactional_id)]
    if api_key == 24:
        return [(TRANSACTION_KEY, message.v3_and_below_transactional_id)] if version <= 3 else []
    if api_key in (25, 26):
        return [(TRANSACTION_KEY, message.transactional_id)]
    return []


def monotonic_ms() -> int:
    """The coordinator's clock: milliseconds that never go backwards."""
    return int(time.monotonic() * 1000)


class BrokerCore:
    """The request handlers of one mock broker; see the module docstring."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.cluster = Cluster(
            auto_create=config.auto_create_topics,
            default_partitions=config.default_partitions,
            max_topics=config.max_topics,
            log_append_time=config.log_message_timestamp_type == "LogAppendTime",
            node_ids=config.node_ids,
            replication_factor=config.default_replication_factor,
            min_insync_replicas=config.min_insync_replicas,
        )
        self.coordinator = GroupCoordinator(config.coordinator)
        #: KIP-848 consumer groups (ConsumerGroupHeartbeat); they share the group ids and offsets of
        #: the classic coordinator, which routes OffsetCommit/OffsetFetch of their groups to them.
        self.consumer_groups = ConsumerGroupCoordinator(
            config.consumer_group,
            topic_partitions=self.cluster.topics,
            topic_ids=self.cluster.topic_ids,
            offsets=self.coordinator.offsets,
            classic_has_members=self.coordinator.has_members,
            release_classic=self.coordinator.release_if_empty,
        )
        self.coordinator.other_groups = self.consumer_groups
        #: Produce, Fetch, ListOffsets, InitProducerId and transactions (kproto.broker.data_plane); the
        #: offsets a transaction commits go to the group coordinator's store.
        self.data = DataPlane(
            config,
            self.cluster,
            commit_offsets=lambda group_id, offsets: self.coordinator.commit_transactional(
                group_id, offsets, monotonic_ms()
            ),
        )
        self.zk_offsets: Dict[Tuple[str, str, int], Tuple[int, Optional[str]]] = {}
        #: Where clients reach the first broker (Metadata, FindCoordinator); set by :meth:`bind`.  Every
        #: node's endpoint is in ``cluster.endpoints``.
        self.endpoint = self.cluster.endpoints[config.node_id]
        self.endpoint.host = config.advertised_host or "127.0.0.1"
        self.endpoint.port = config.advertised_port or 0
        #: Requests handled, by (api key, version).
        self.request_counts: Counter = Counter()
        self._timers_changed: Optional[asyncio.Event] = None
        #: What the broker serves (api key → lowest, highest version); ApiVersions advertises it.
        self.served = SERVED_VERSIONS
        self.control = ControlPlane(config, self.cluster, self.served, self.endpoint)
        self._handlers: Dict[int, Handler] = {
            **self.data.handlers,
            **bind_handlers(self, self.API_TABLE),
            **self.control.handlers,
        }
        # The coordinator takes and answers the group APIs' wire messages as they are.
        for request_class in COORDINATOR_VERSIONS:
            self._handlers.setdefault(api_key_of(request_class), self._ask)
        for request_class in CONSUMER_GROUP_VERSIONS:
            self._handlers[api_key_of(request_class)] = self._ask_consumer_groups

    @property
    def produce_decompressed_bytes(self) -> int:
        """Bytes decompressed by Produce requests so far (each request within its own budget)."""
        return self.data.produce_decompressed_bytes

    @property
    def host(self) -> str:
        """The host clients are told to reach this broker at."""
        return self.endpoint.host

    @property
    def port(self) -> int:
        """The port clients are told to reach this broker at."""
        return self.endpoint.port

    def bind(self, host: str, port: int, node_id: Optional[int] = None) -> None:
        """Advertise the address a node (None: the first) listens on; the first node's may be replaced
        by the config's advertised host and port."""
        if node_id is None or node_id == self.config.node_id:
            self.endpoint.host = self.config.advertised_host or host
            self.endpoint.port = self.config.advertised_port or port
        else:
            endpoint = self.cluster.endpoints[node_id]
            endpoint.host = self.config.advertised_host or host
            endpoint.port = port

    async def handle(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """The response to ``request`` (None when none is due); ``client_host`` as DescribeGroups shows it."""
        handler = self._handlers.get(request.api_key)
        if handler is None:
            raise ProtocolError(f"the mock broker does not serve api key {request.api_key}")
        self.request_counts[(request.api_key, request.api_version)] += 1
        low, high = self.served[request.api_key]
        in_range = low <= request.api_version <= high
        if in_range and len(self.cluster.node_ids) > 1:
            refused = self._not_coordinator(request)
            if refused is not None:
                return refused
        if not in_range:
            # A version the broker does not serve but can read (a client that skipped ApiVersions):
            # UNSUPPORTED_VERSION in every error field of that version's response -- or, for an acks=0
            # Produce, no answer and nothing stored.
            if not request.expects_response:
                return None
            return error_response(request.api_key, request.message, _C.UNSUPPORTED_VERSION, request.api_version)
        try:
            # Every answer holds only what its version carries (see fit_to_version).
            return fit_to_version(await handler(request, client_host), request.api_version)  # type: ignore[no-any-return]
        except UnsupportedVersionError as exc:
            raise ProtocolError(
                f"the mock broker does not serve api key {request.api_key} v{request.api_version}: {exc}"
            ) from exc

    def _not_coordinator(self, request: RequestReceived) -> Optional[Message]:
        """The answer of a node that does not (or not yet) coordinate what ``request`` names, else None.

        A request naming several groups is refused whole when one of them lives elsewhere: clients send
        each coordinator only its own groups.
        """
        keys = coordinator_keys(request.api_key, request.message, request.api_version)
        if not keys:
            return None
        node = self.cluster.serving()
        for key_type, key in keys:
            error = self.cluster.coordinator_error(key_type, key, node)
            if error is not None:
                if not request.expects_response:
                    return None
                if request.api_key == _HEARTBEAT and error == _C.GROUP_LOAD_IN_PROGRESS:
                    error = _C.NONE  # Kafka answers a heartbeat "blindly" while the group loads
                return error_response(request.api_key, request.message, error, request.api_version)
        return None

    # ---------------------------------------------------------------- events shared with waiters

    def _event(self, name: str) -> asyncio.Event:
        event = getattr(self, name)
        if event is None:
            event = asyncio.Event()
            setattr(self, name, event)
        return event

    # ---------------------------------------------------------------- offsets

    async def _offset_commit(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        if request.api_version == 0:
            req: Any = request.message
            offsets = {
                (t.name, p.partition_index): (p.committed_offset, p.committed_metadata)
                for t in req.topics
                for p in t.partitions
            }
            return self._zk_commit(req.group_id, offsets)
        return await self._commit_known_partitions(request, client_host)

    async def _commit_known_partitions(self, request: RequestReceived, client_host: str) -> Message:
        """OffsetCommit v1+: partitions the cluster does not have are answered UNKNOWN_TOPIC_OR_PARTITION
        before the group is consulted (as Kafka's request handler does); the coordinator gets the rest."""
        body = request.message.to_dict()
        unknown: Dict[str, list] = {}
        kept = []
        for topic in body["topics"]:
            known = [p for p in topic["partitions"] if self.cluster.partition(topic["name"], p["partition_index"])]
            missing = [p["partition_index"] for p in topic["partitions"] if p not in known]
            if missing:
                unknown.setdefault(topic["name"], []).extend(missing)
            if known:
                kept.append({**topic, "partitions": known})
        if not unknown:
            return await self._ask(request, client_host)
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        answer: Any = OffsetCommitResponse(topics=[])
        if kept:
            narrowed = type(request.message).from_dict({**body, "topics": kept})
            answer = await self._ask(dataclasses.replace(request, message=narrowed), client_host)
        by_name = {topic.name: topic for topic in answer.topics}
        for name, indexes in unknown.items():
            if name not in by_name:
                by_name[name] = T(name=name, partitions=[])
                answer.topics.append(by_name[name])
            by_name[name].partitions.extend(
                P(partition_index=i, error_code=_C.UNKNOWN_TOPIC_OR_PARTITION) for i in indexes
            )
        return answer  # type: ignore[no-any-return]

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
        req: Any = request.message
        T = OffsetFetchResponse.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        if request.api_version == 0:
            topics = []
            for t in req.topics:
                parts = []
                for i in t.partition_indexes:
                    found = self.zk_offsets.get((req.group_id, t.name, i))
                    parts.append(
                        P(partition_index=i, committed_offset=found[0], metadata=found[1], error_code=_C.NONE)
                        if found
                        else P(
                            partition_index=i,
                            committed_offset=-1,
                            metadata="",
                            error_code=_C.UNKNOWN_TOPIC_OR_PARTITION,
                        )
                    )
                topics.append(T(name=t.name, partitions=parts))
            return OffsetFetchResponse(topics=topics)
        return await self._ask(request, client_host)

    # ---------------------------------------------------------------- coordinator plumbing

    async def _ask(self, request: RequestReceived, client_host: str) -> Message:
        """Hand a group request to the coordinator with a future as the reply token; wait for its reply."""
        future = asyncio.get_running_loop().create_future()
        self._deliver(
            self.coordinator.handle(
                future,
                request.message,
                request.api_version,
                client_id=request.header.client_id or "",
                client_host=client_host,
                now_ms=monotonic_ms(),
            )
        )
        self._event("_timers_changed").set()
        return await future

    async def _ask_consumer_groups(self, request: RequestReceived, client_host: str) -> Message:
        """ConsumerGroupHeartbeat and ConsumerGroupDescribe: answered at once, never parked."""
        answer = self.consumer_groups.handle(
            request.message,
            request.api_version,
            client_id=request.header.client_id or "",
            client_host=client_host,
            now_ms=monotonic_ms(),
        )
        self._event("_timers_changed").set()
        return answer

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
            deadlines = [
                d
                for d in (self.coordinator.next_deadline_ms(), self.consumer_groups.next_deadline_ms())
                if d is not None
            ]
            timeout = max(min(deadlines) - monotonic_ms(), 0) / 1000.0 if deadlines else None
            await wait_event(changed, timeout)
            self._deliver(self.coordinator.tick(monotonic_ms()))
            self.consumer_groups.tick(monotonic_ms())

    #: OffsetCommit/OffsetFetch v0: the ZooKeeper-era offsets this module keeps apart from the
    #: coordinator (v1+ of both go on to it, so the handlers serve the merged range).
    API_TABLE: ApiTable = {8: ((0, 0), _offset_commit), 9: ((0, 0), _offset_fetch)}


#: Everything the broker serves, by api key: each part's own declaration, merged once
#: (:func:`kproto.broker.served_versions.served_table`).  ApiVersions advertises it and
#: :meth:`BrokerCore.handle` enforces it.
SERVED_VERSIONS: VersionTable = served_table(
    DATA_PLANE_VERSIONS,
    versions_of(BrokerCore.API_TABLE),
    CONTROL_PLANE_VERSIONS,
    SASL_VERSIONS,
    {api_key_of(request): served for request, served in COORDINATOR_VERSIONS.items()},
    {api_key_of(request): served for request, served in CONSUMER_GROUP_VERSIONS.items()},
)
