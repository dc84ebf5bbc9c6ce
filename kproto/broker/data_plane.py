"""The mock broker's data plane: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and InitProducerId at
every version it serves.

Why a module of its own: these APIs share the partition logs, the producer-id table and the
"data arrived" event that wakes parked fetches, and none of them touches groups or cluster metadata.
:attr:`DataPlane.API_TABLE` declares each api key's versions with its handler, once;
:class:`~kproto.broker.core.BrokerCore` registers them and ApiVersions advertises
:data:`SERVED_VERSIONS`.  The data plane listens to the cluster (a topic created, deleted or grown
wakes parked fetches).

Versions and what each adds here (docs/broker-storage.md has the storage model):

* Produce v0-v2 carry magic 0/1 message sets, validated and up-converted to one record batch; v3+
  carry exactly one magic 2 batch per partition, stored as produced (offsets patched in place); zstd
  needs v7+; v2+ answers ``log_append_time_ms``, v5+ ``log_start_offset``.  A transactional batch
  must come with the request's transactional id, from its current producer id and epoch, for a
  partition added to its transaction (else INVALID_TXN_STATE, or the fencing error).
* Fetch v0-v3 get down-converted records (magic 0, then 1); v3+ ``max_bytes`` and the first batch
  whole; v4+ ``last_stable_offset``, and read_committed reads stop there and carry the aborted
  transactions overlapping the fetched range; a zstd batch is UNSUPPORTED_COMPRESSION_TYPE only where it
  would be down-converted (v0-v3), as Kafka 3.9+ answers; v5+ ``log_start_offset``; v7+ fetch sessions
  are declined -- every answer carries session id 0, so clients keep sending full fetches (a request
  naming a session gets FETCH_SESSION_ID_NOT_FOUND, one with session id 0 and a positive epoch
  INVALID_FETCH_SESSION_EPOCH); v13+ name topics by id (UNKNOWN_TOPIC_ID for an id the cluster does
  not know).
* ListOffsets v0 answers the old offset list (latest, or the log start for any other time); v1+
  searches the time index for a timestamp, -1 is the high watermark (the last stable offset for
  read_committed, v2+), -2 the log start, -3 (v7+) the record with the largest timestamp, -4 (v8+)
  the log start again (all of it is local).  v4+ answers the partition's current leader epoch.
* OffsetForLeaderEpoch v0-v4: where a leader epoch ended (:meth:`Cluster.epoch_end_offset`), from the
  partition's leader only, with the same epoch checks as Fetch.
* InitProducerId v0-v5: see :mod:`kproto.broker.producers`; for a transactional id with a transaction
  open, that transaction is aborted first.
* AddPartitionsToTxn v0-v3, AddOffsetsToTxn v0-v3, TxnOffsetCommit v0-v3 and EndTxn v0-v4: see
  :mod:`kproto.broker.transactions`; committed offsets go to the group coordinator's store through the
  ``commit_offsets`` callback the broker passes in.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

from kproto import ErrorCode
from kproto.broker.append import DecompressionBudget, has_compressed_entries, prepare_append
from kproto.broker.batches import BatchHeader, scan_batches
from kproto.broker.cluster import Cluster
from kproto.broker.config import BrokerConfig
from kproto.broker.conversion import fetch_magic, upconvert_message_set
from kproto.broker.log import PartitionLog
from kproto.broker.producers import ProducerIds
from kproto.broker.served_versions import ApiTable, Handler, VersionTable, bind_handlers, versions_of
from kproto.broker.transactions import TransactionCoordinator
from kproto.connection.server import RequestReceived
from kproto.message_base import Message
from kproto.records import RecordSet
from kproto.messages import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    FetchResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    OffsetForLeaderEpochResponse,
    ProduceResponse,
    TxnOffsetCommitResponse,
)

__all__ = ["DataPlane", "SERVED_VERSIONS"]

_C = ErrorCode

_LATEST, _EARLIEST, _MAX_TIMESTAMP, _EARLIEST_LOCAL, _LATEST_TIERED = -1, -2, -3, -4, -5
_READ_COMMITTED = 1
# Produce answers that still report the partition's log start offset (v5+): an append the partition itself
# refused on its producer-state or record checks.  Refusals before the partition is reached (unknown
# partition, damaged or oversized entries, a codec the version lacks) carry -1, as Kafka's.
_KEEPS_LOG_START = frozenset(
    {
        _C.NONE,
        _C.OUT_OF_ORDER_SEQUENCE_NUMBER,
        _C.INVALID_PRODUCER_EPOCH,
        _C.DUPLICATE_SEQUENCE_NUMBER,
        _C.INVALID_RECORD,
        _C.INVALID_TIMESTAMP,
    }
)
_LegacyPrepared = Union[ErrorCode, Tuple[bytes, List[BatchHeader]]]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class DataPlane:
    """Produce, Fetch, ListOffsets and InitProducerId over one :class:`Cluster`."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster: Cluster,
        commit_offsets: Callable[
            [str, Dict[Tuple[str, int], Tuple[int, Optional[str]]]], None
        ] = lambda group_id, offsets: None,
    ) -> None:
        self.config = config
        self.cluster = cluster
        self.producer_ids = ProducerIds(config.max_producer_ids)
        self.transactions = TransactionCoordinator(cluster, self.producer_ids, _now_ms, commit_offsets)
        #: Bytes decompressed by Produce requests so far (each request within its own budget).
        self.produce_decompressed_bytes = 0
        self._append_locks: Dict[Tuple[str, int], asyncio.Lock] = {}
        self._data_arrived: Optional[asyncio.Event] = None
        cluster.on_change(self._announce_data)
        #: Api key → handler, for the keys of :data:`SERVED_VERSIONS`.
        self.handlers: Dict[int, Handler] = bind_handlers(self, self.API_TABLE)

    def _arrival(self) -> asyncio.Event:
        if self._data_arrived is None:
            self._data_arrived = asyncio.Event()
        return self._data_arrived

    def _announce_data(self) -> None:
        # Wake every parked Fetch; each re-reads and parks again if it still lacks min_bytes.  No event
        # means no fetch looked since the last announcement: nobody to wake (the next one makes one).
        event, self._data_arrived = self._data_arrived, None
        if event is not None:
            event.set()

    # ---------------------------------------------------------------- Produce

    async def produce(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Append each partition's records, all or nothing per partition (None for acks=0)."""
        req: Any = request.message
        version = request.api_version
        T = ProduceResponse.TopicProduceResponse
        P = T.PartitionProduceResponse
        targets = [
            (topic.name, self.cluster.lookup(topic.name, create=True), part)
            for topic in req.topic_data
            for part in topic.partition_data
        ]
        # One decompression budget for the whole request; partitions are appended in request order,
        # each under its partition's lock, so a compressed legacy append can run on a worker thread
        # while other requests (and other partitions) go on.
        budget = DecompressionBudget(self.config.produce_decompression_budget)
        keys = sorted(
            {
                (name, part.index)
                for name, partitions, part in targets
                if partitions is not None and 0 <= part.index < len(partitions)
            }
        )
        locks = [self._append_lock(key) for key in keys]
        answers: Dict[str, List[Any]] = {}
        appended = False
        for lock in locks:
            await lock.acquire()
        now = _now_ms()  # one clock read: what LogAppendTime topics stamp is what the answer says
        try:
            for name, partitions, part in targets:
                code, base, log = await self._append(version, req, name, partitions, part, budget, now)
                appended = appended or code == _C.NONE
                append_time = -1
                if code == _C.NONE and log is not None and log.log_append_time:
                    append_time = now
                answers.setdefault(name, []).append(
                    P(
                        index=part.index,
                        error_code=code,
                        base_offset=base,
                        log_append_time_ms=append_time,
                        log_start_offset=log.log_start_offset
                        if log is not None and version >= 5 and code in _KEEPS_LOG_START
                        else -1,
                    )
                )
        finally:
            for lock in locks:
                lock.release()
        self.produce_decompressed_bytes += budget.used
        if appended:
            self._announce_data()
        if req.acks == 0:
            return None
        if req.acks == -1 and appended:
            await self._replicate(answers)
        leaders = self._leader_hints(answers, P.LeaderIdAndEpoch) if version >= 10 else set()
        return ProduceResponse(
            responses=[T(name=name, partition_responses=ps) for name, ps in answers.items()],
            throttle_time_ms=0,
            node_endpoints=self._node_endpoints(leaders, ProduceResponse),
        )

    async def _replicate(self, answers: Dict[str, List[Any]]) -> None:
        """Hold an acks=all answer until the in-sync followers have (in simulation) fetched the
        records: ``replication_lag_ms`` when any partition has one; a partition whose ISR fell below
        ``min.insync.replicas`` meanwhile is NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay)."""
        lag = self.config.replication_lag_ms
        written = [(name, p) for name, ps in answers.items() for p in ps if p.error_code == _C.NONE]
        followed = any(len(getattr(self.cluster.placement(name, p.index), "isr", ())) > 1 for name, p in written)
        if lag > 0 and followed:
            await asyncio.sleep(lag / 1000.0)
        for name, p in written:
            placement = self.cluster.placement(name, p.index)
            if placement is not None and len(placement.isr) < self.cluster.min_insync_replicas:
                p.error_code = _C.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    def _leader_hints(self, answers: Dict[str, List[Any]], hint: Any) -> Set[int]:
        """KIP-951: partitions answered as not led here (or with a stale epoch) carry the current
        leader and epoch; returns the leaders named, whose endpoints go with the answer."""
        named: Set[int] = set()
        for name, parts in answers.items():
            for p in parts:
                if p.error_code in (_C.NOT_LEADER_FOR_PARTITION, _C.FENCED_LEADER_EPOCH):
                    placement = self.cluster.placement(name, getattr(p, "index", getattr(p, "partition_index", -1)))
                    if placement is not None and placement.leader >= 0:
                        p.current_leader = hint(leader_id=placement.leader, leader_epoch=placement.leader_epoch)
                        named.add(placement.leader)
        return named

    def _node_endpoints(self, nodes: Set[int], response: Any) -> List[Any]:
        endpoints = self.cluster.endpoints
        return [
            response.NodeEndpoint(node_id=node, host=endpoints[node].host, port=endpoints[node].port, rack=None)
            for node in sorted(nodes)
        ]

    def _append_lock(self, key: Tuple[str, int]) -> asyncio.Lock:
        lock = self._append_locks.get(key)
        if lock is None:
            lock = self._append_locks[key] = asyncio.Lock()
        return lock

    async def _append(
        self,
        version: int,
        req: Any,
        topic: str,
        partitions: Optional[List[PartitionLog]],
        part: Any,
        budget: DecompressionBudget,
        now_ms: int,
    ) -> Tuple[ErrorCode, int, Optional[PartitionLog]]:
        if req.acks not in (-1, 0, 1):
            return _C.INVALID_REQUIRED_ACKS, -1, None
        if partitions is None or not 0 <= part.index < len(partitions):
            return _C.UNKNOWN_TOPIC_OR_PARTITION, -1, None
        log = partitions[part.index]
        refused = self.cluster.leader_error(topic, part.index, self.cluster.serving())
        if refused is not None:
            return refused, -1, None
        if req.acks == -1:
            placement = self.cluster.placement(topic, part.index)
            if placement is not None and len(placement.isr) < self.cluster.min_insync_replicas:
                return _C.NOT_ENOUGH_REPLICAS, -1, log  # checked before the append, as Kafka does
        raw = part.records.raw if part.records is not None else b""
        if version >= 3:
            headers = scan_batches(raw, message_max_bytes=self.config.message_max_bytes, zstd_allowed=version >= 7)
            if isinstance(headers, ErrorCode):
                return headers, -1, log
            if len(headers) != 1:  # Produce v3+ carries exactly one batch per partition
                return _C.INVALID_RECORD, -1, log
            if headers[0].transactional:
                code = self._transactional_append(req.transactional_id, topic, part.index, headers[0])
                if code != _C.NONE:
                    return code, -1, None  # refused before the partition: no log start in the answer
            code, base = log.append(raw, headers, self.producer_ids, now_ms)
            return code, base, log
        if has_compressed_entries(raw):
            prepared = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(self._prepare_legacy, raw, budget)
            )
        else:
            prepared = self._prepare_legacy(raw, budget)
        if isinstance(prepared, ErrorCode):
            return prepared, -1, log
        batch, headers = prepared
        if not headers:
            return _C.NONE, log.high_watermark, log  # nothing to append (0.9 answered the same)
        code, base = log.append(batch, headers, self.producer_ids, now_ms)
        return code, base, log

    def _transactional_append(
        self, transactional_id: Optional[str], topic: str, index: int, header: BatchHeader
    ) -> ErrorCode:
        """Whether a transactional batch belongs to an open transaction of its producer (Produce answers
        a stale epoch with INVALID_PRODUCER_EPOCH at every version, before it looks at the transaction)."""
        if transactional_id is None:
            return _C.INVALID_TXN_STATE
        code = self.transactions.check(
            transactional_id, header.producer_id, header.producer_epoch, _C.INVALID_PRODUCER_EPOCH
        )
        if code == _C.INVALID_PRODUCER_EPOCH:
            return code
        if (topic, index) not in self.transactions.open_partitions(transactional_id):
            return _C.INVALID_TXN_STATE
        return code

    def _prepare_legacy(self, raw: bytes, budget: DecompressionBudget) -> _LegacyPrepared:
        """A magic 0/1 message set validated and up-converted: (one batch, its header) or the error."""
        prepared = prepare_append(raw, 0, message_max_bytes=self.config.message_max_bytes, budget=budget)
        if isinstance(prepared, ErrorCode):
            return prepared
        if prepared.count == 0:
            return b"", []
        # The set was decompressed within the budget just now; decoding it again costs the same.
        batch, _ = upconvert_message_set(
            prepared.data, 0, max_decompressed_size=self.config.produce_decompression_budget
        )
        headers = scan_batches(batch, message_max_bytes=len(batch))
        assert not isinstance(headers, ErrorCode), headers  # our own encoder's output
        return batch, headers

    # ---------------------------------------------------------------- Fetch

    async def fetch(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Records from each partition, parked until ``min_bytes`` arrive or ``max_wait_ms`` passes."""
        req: Any = request.message
        version = request.api_version
        if version >= 7 and (req.session_id != 0 or req.session_epoch > 0):
            code = _C.FETCH_SESSION_ID_NOT_FOUND if req.session_id != 0 else _C.INVALID_FETCH_SESSION_EPOCH
            return FetchResponse(throttle_time_ms=0, error_code=code, session_id=0, responses=[])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000.0
        # The response budget: the broker's fetch.max.bytes, lowered by a v3+ request's own max_bytes.
        limit = self.config.fetch_max_bytes
        if version >= 3:
            limit = min(limit, max(req.max_bytes, 0))
        while True:
            arrival = self._arrival()
            response, total, failed = self._read(req, version, limit)
            remaining = deadline - loop.time()
            if failed or total >= req.min_bytes or remaining <= 0:
                return response
            await wait_event(arrival, remaining)

    def _read(self, req: Any, version: int, limit: int) -> Tuple[Message, int, bool]:
        """The fetch response as things stand, its record bytes, and whether any partition failed.

        A partition named twice is answered once (Kafka reads the request into a map), and the record
        bytes of the whole response stay within ``limit``: partitions past it get no records.  Fetch
        v3+ (KIP-74) returns the first non-empty partition's first batch whole even when that alone
        exceeds the limits, so a consumer can always progress; older versions cut it, as 0.9 did.
        """
        T = FetchResponse.FetchableTopicResponse
        P = T.PartitionData
        Aborted = P.AbortedTransaction
        magic = fetch_magic(version)
        by_id = version >= 13
        committed = version >= 4 and req.isolation_level == _READ_COMMITTED
        total, failed, topics = 0, False, []
        node = self.cluster.serving()
        leaders: Set[int] = set()
        seen: Set[Tuple[object, int]] = set()
        for topic in req.topics:
            name = self.cluster.topics_by_id.get(topic.topic_id) if by_id else topic.topic
            answers = []
            for part in topic.partitions:
                key = (topic.topic_id if by_id else name, part.partition)
                if key in seen:
                    continue
                seen.add(key)
                log = None if name is None else self.cluster.partition(name, part.partition)
                refused = (
                    None
                    if log is None or name is None
                    else self.cluster.leader_error(
                        name,
                        part.partition,
                        node,
                        part.current_leader_epoch if version >= 9 else -1,
                        follower_ok=version >= 11,
                    )
                )
                if refused is not None:
                    failed = True
                    answers.append(
                        P(
                            partition_index=part.partition,
                            error_code=refused,
                            high_watermark=-1,
                            last_stable_offset=-1,
                            log_start_offset=-1,
                            aborted_transactions=[] if version < 4 else None,
                            records=RecordSet(b""),
                        )
                    )
                    continue
                if log is None or not log.in_range(part.fetch_offset):
                    if log is not None:
                        code = _C.OFFSET_OUT_OF_RANGE
                    else:
                        code = _C.UNKNOWN_TOPIC_ID if by_id and name is None else _C.UNKNOWN_TOPIC_OR_PARTITION
                    failed = True
                    # Kafka's refusal carries no offsets (not even for OFFSET_OUT_OF_RANGE: the consumer
                    # asks ListOffsets), and no aborted transactions (an empty list, not null) for an
                    # unknown partition.
                    answers.append(
                        P(
                            partition_index=part.partition,
                            error_code=code,
                            high_watermark=-1,
                            log_start_offset=-1,
                            aborted_transactions=[] if version < 4 or log is None else None,
                            records=RecordSet(b""),
                        )
                    )
                    continue
                room = min(part.partition_max_bytes, self.config.max_fetch_bytes, limit - total)
                whole = self.config.max_fetch_bytes if version >= 3 and total == 0 else 0
                stable = log.last_stable_offset
                data = log.read(
                    part.fetch_offset, room, magic=magic, first_whole_limit=whole, upto=stable if committed else None
                )
                if isinstance(data, ErrorCode):  # a batch that cannot be down-converted: Kafka says no more
                    failed = True
                    answers.append(
                        P(
                            partition_index=part.partition,
                            error_code=data,
                            high_watermark=-1,
                            aborted_transactions=[] if version < 4 else None,
                            records=None,
                        )
                    )
                    continue
                code = _C.NONE
                total += len(data)
                aborted: Optional[List[Any]] = None if version >= 4 else []  # null: read_uncommitted
                if committed:
                    aborted = [
                        Aborted(producer_id=p, first_offset=f)
                        for p, f in log.aborted_transactions(part.fetch_offset, stable)
                    ]
                # Fields a version does not carry keep their defaults, so the answer is what the client reads.
                answers.append(
                    P(
                        partition_index=part.partition,
                        error_code=code,
                        high_watermark=log.high_watermark,
                        last_stable_offset=stable if version >= 4 else -1,
                        log_start_offset=log.log_start_offset if version >= 5 else -1,
                        aborted_transactions=aborted,
                        records=RecordSet(data),
                    )
                )
            if answers:
                topics.append(
                    T(topic="", topic_id=topic.topic_id, partitions=answers)
                    if by_id
                    else T(topic=topic.topic, partitions=answers)
                )
                if failed and version >= 16 and name is not None:
                    leaders.update(self._leader_hints({name: answers}, P.LeaderIdAndEpoch))
        return (
            FetchResponse(
                throttle_time_ms=0,
                error_code=_C.NONE,
                session_id=0,
                responses=topics,
                node_endpoints=self._node_endpoints(leaders, FetchResponse),
            ),
            total,
            failed,
        )

    # ---------------------------------------------------------------- ListOffsets

    async def list_offsets(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """The offset for each partition's timestamp (or the v0 offset list)."""
        req: Any = request.message
        version = request.api_version
        committed = version >= 2 and req.isolation_level == _READ_COMMITTED
        T = ListOffsetsResponse.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        topics = []
        for topic in req.topics:
            answers = []
            for part in topic.partitions:
                log = self.cluster.partition(topic.name, part.partition_index)
                if log is None:
                    answers.append(P(partition_index=part.partition_index, error_code=_C.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                refused = self.cluster.leader_error(
                    topic.name,
                    part.partition_index,
                    self.cluster.serving(),
                    part.current_leader_epoch if version >= 4 else -1,
                )
                if refused is not None:
                    answers.append(P(partition_index=part.partition_index, error_code=refused))
                    continue
                if version == 0:
                    # The v0 answer: "latest" is the high watermark, any other time the log start.
                    offset = log.high_watermark if part.timestamp == _LATEST else log.log_start_offset
                    answers.append(
                        P(
                            partition_index=part.partition_index,
                            error_code=_C.NONE,
                            old_style_offsets=[offset][: max(part.max_num_offsets, 0)],
                        )
                    )
                    continue
                code, timestamp, offset = self._offset_at(log, part.timestamp, version, committed)
                placement = self.cluster.placement(topic.name, part.partition_index)
                answers.append(
                    P(
                        partition_index=part.partition_index,
                        error_code=code,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=(placement.leader_epoch if placement is not None else 0) if offset >= 0 else -1,
                    )
                )  # Metadata's epoch
            topics.append(T(name=topic.name, partitions=answers))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    @staticmethod
    def _offset_at(log: PartitionLog, timestamp: int, version: int, committed: bool) -> Tuple[ErrorCode, int, int]:
        """(error, timestamp, offset) answering ListOffsets v1+ for one partition."""
        if timestamp == _LATEST:
            return _C.NONE, -1, log.last_stable_offset if committed else log.high_watermark
        if timestamp == _EARLIEST or (timestamp == _EARLIEST_LOCAL and version >= 8):
            return _C.NONE, -1, log.log_start_offset
        if timestamp == _MAX_TIMESTAMP and version >= 7:
            found = log.max_timestamp()
        elif timestamp == _LATEST_TIERED and version >= 9:
            return _C.NONE, -1, -1  # nothing is tiered
        elif timestamp < 0:
            return _C.INVALID_REQUEST, -1, -1
        else:
            found = log.offset_for_timestamp(timestamp)
        if found is None:
            return _C.NONE, -1, -1
        return _C.NONE, found[0], found[1]

    # ---------------------------------------------------------------- OffsetForLeaderEpoch

    async def offset_for_leader_epoch(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Where each asked leader epoch ended: what a consumer validates its position with (KIP-320)
        after a partition's leader epoch grew."""
        req: Any = request.message
        T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        P = T.EpochEndOffset
        topics = []
        for topic in req.topics:
            answers = []
            for part in topic.partitions:
                index = part.partition
                if self.cluster.partition(topic.topic, index) is None:
                    answers.append(P(partition=index, error_code=_C.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                # Kafka answers this from the leader only, to consumers and followers alike.
                refused = self.cluster.leader_error(
                    topic.topic, index, self.cluster.serving(), part.current_leader_epoch
                )
                if refused is not None:
                    answers.append(P(partition=index, error_code=refused))
                    continue
                epoch, end = self.cluster.epoch_end_offset(topic.topic, index, part.leader_epoch)
                answers.append(P(partition=index, error_code=_C.NONE, leader_epoch=epoch, end_offset=end))
            topics.append(T(topic=topic.topic, partitions=answers))
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

    # ---------------------------------------------------------------- InitProducerId

    async def init_producer_id(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """A producer id and epoch for an idempotent (or transactional-id-holding) producer."""
        req: Any = request.message
        version = request.api_version
        named = req.producer_id if version >= 3 else -1
        if req.transactional_id is not None:
            current = self.producer_ids.transactional_producer(req.transactional_id)
            if named < 0 or (named == current and self.producer_ids.epoch(named) == req.producer_epoch):
                self.transactions.abort_open(req.transactional_id)  # a new epoch aborts what the old one left
                self._announce_data()
        code, producer_id, epoch = self.producer_ids.init(
            req.transactional_id,
            req.transaction_timeout_ms,
            req.producer_id if version >= 3 else -1,
            req.producer_epoch if version >= 3 else -1,
            fenced_code=_C.PRODUCER_FENCED if version >= 4 else _C.INVALID_PRODUCER_EPOCH,
        )
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch
        )

    # ---------------------------------------------------------------- transactions

    async def add_partitions_to_txn(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Record partitions a transactional producer is about to write to."""
        req: Any = request.message
        fenced = _C.PRODUCER_FENCED if request.api_version >= 2 else _C.INVALID_PRODUCER_EPOCH
        wanted = [(t.name, index) for t in req.v3_and_below_topics for index in t.partitions]
        answers = self.transactions.add_partitions(
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            wanted,
            fenced,
        )
        T = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
        P = T.AddPartitionsToTxnPartitionResult
        by_topic: Dict[str, List[Any]] = {}
        for (topic, index), code in answers.items():
            by_topic.setdefault(topic, []).append(P(partition_index=index, partition_error_code=code))
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0,
            results_by_topic_v3_and_below=[
                T(name=topic, results_by_partition=parts) for topic, parts in by_topic.items()
            ],
        )

    async def add_offsets_to_txn(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Let a transaction carry a consumer group's offsets."""
        req: Any = request.message
        fenced = _C.PRODUCER_FENCED if request.api_version >= 2 else _C.INVALID_PRODUCER_EPOCH
        code = self.transactions.add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, fenced
        )
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)

    async def txn_offset_commit(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Hold a group's offsets in a transaction until it ends."""
        req: Any = request.message
        fenced = _C.PRODUCER_FENCED if request.api_version >= 3 else _C.INVALID_PRODUCER_EPOCH
        offsets = {
            (t.name, p.partition_index): (p.committed_offset, p.committed_metadata)
            for t in req.topics
            for p in t.partitions
        }
        code = self.transactions.commit_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, offsets, fenced
        )
        T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        return TxnOffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
                for t in req.topics
            ],
        )

    async def end_txn(self, request: RequestReceived, client_host: str) -> Optional[Message]:
        """Commit or abort a transaction: a marker on each of its partitions."""
        req: Any = request.message
        fenced = _C.PRODUCER_FENCED if request.api_version >= 2 else _C.INVALID_PRODUCER_EPOCH
        code = self.transactions.end(req.transactional_id, req.producer_id, req.producer_epoch, req.committed, fenced)
        if code == _C.NONE:
            self._announce_data()
        return EndTxnResponse(throttle_time_ms=0, error_code=code)

    #: The data plane's share of the served table: api key → (versions, handler).  ApiVersions
    #: advertises them and BrokerCore refuses any other version before a handler runs.
    API_TABLE: ApiTable = {
        0: ((0, 11), produce),  # v12 only adds KIP-890 transaction verification; v13 topic ids
        1: ((0, 17), fetch),  # v18 adds a replica's high watermark
        2: ((0, 10), list_offsets),  # v10 adds a timeout for tiered storage, which the mock has none of
        22: ((0, 5), init_producer_id),  # v6 is two-phase commit
        23: ((0, 4), offset_for_leader_epoch),  # Kafka 4 serves v2-v4; v0-v1 lack only the epochs
        24: ((0, 3), add_partitions_to_txn),  # v4+ is the brokers' batched form
        25: ((0, 3), add_offsets_to_txn),  # v4 is KIP-890's
        26: ((0, 4), end_txn),  # v5 bumps the epoch at every end, KIP-890
        28: ((0, 3), txn_offset_commit),  # v4 is KIP-890's
    }


#: The versions the data plane serves, by api key.
SERVED_VERSIONS: VersionTable = versions_of(DataPlane.API_TABLE)


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
