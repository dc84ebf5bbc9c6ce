"""The pipelined asyncio producer.

Theory of operation
===================

``await producer.send(topic, value)`` never waits for the network: it picks the partition (the
:class:`~kproto.client.partitioner.DefaultPartitioner` unless ``partition=`` is given), appends the record
to the open batch of that partition and returns an :class:`asyncio.Future` of its
:class:`RecordMetadata`.  Only two things make ``send`` wait: ``max_buffered_records`` records already
waiting (back-pressure), and nothing else.  A record for a topic whose partition count is not known yet
goes to that topic's *holding queue*; the send loop asks for metadata and moves it to its partition when
the answer comes, so one unknown topic never holds up the others.  Until the loop has moved them, later
records for that topic join the holding queue too, so that none overtakes a held one.

One task, the *send loop*, does everything else:

1. moves held records whose topic became known to their partitions, and starts a Metadata refresh (in
   its own task) when a topic or a partition leader is unknown;
2. takes the *ready* partitions -- the oldest batch is full, or ``linger_ms`` has passed since it was
   opened, or a flush is asked -- whose leader is known and which may send now (below);
3. collates them per leader into one Produce request (one batch per partition, as the protocol
   requires), compresses and encodes the batches in the version negotiated with that broker, and sends
   it without waiting for the answer while the leader has fewer than ``max_in_flight`` requests out;
4. sleeps until a record arrives, a batch fills, a linger deadline passes or an answer comes back.

Answers resolve each record's future with its offset.  A retriable error (NOT_LEADER_FOR_PARTITION,
LEADER_NOT_AVAILABLE, a lost connection, ...) forgets the partition's leader, asks for metadata, and puts
the batch back at the head of its partition queue, in creation order with other returned batches; it is
resent after ``retry_backoff_ms`` up to ``retries`` times, then its records fail.  A request unanswered
for ``request_timeout_ms`` (plus a second) closes its connection and counts as REQUEST_TIMED_OUT for every
batch in flight on it: they are retried, so such a batch may be written twice unless idempotence is on.

**Order** within a partition: batches leave in creation order, and while the head batch is a retry the
partition sends nothing else and waits for all of its requests in flight to come back first, then sends
the retries one at a time.  A broker that rejects one request for a partition rejects the ones queued
after it too (a leader change does), so everything comes back and is resent in order.  With idempotence
(``idempotence=True``, or ``None`` and a broker that serves InitProducerId with ``acks="all"``) every
batch carries the producer id and a per-partition sequence that survives retries, so the broker itself
refuses to append out of order (OUT_OF_ORDER_SEQUENCE is then retried as well).

**Versions**: the Produce version is the one negotiated with each broker
(:class:`~kproto.client.connection.Connection`); v0/v1 carry magic 0 message sets, v2 magic 1, v3 and
later magic 2 record batches (the only format with headers and zstd).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from kproto import ErrorCode
from kproto._generated.error_codes import error_class
from kproto.client.cluster import ClusterView
from kproto.client.connection import BrokerVersions, BrokerConnectionError, Connection
from kproto.client.partitioner import DefaultPartitioner
from kproto.errors import KprotoError
from kproto.messages import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse
from kproto.records import RecordSet, encode_message_set, encode_record_batch

__all__ = ["Producer", "ProducerClosedError", "RecordMetadata"]

_PRODUCE = 0
_INIT_PRODUCER_ID = 22
_ACKS = {0: 0, 1: 1, -1: -1, "all": -1}
_CODECS = (None, "gzip", "snappy", "lz4", "zstd")
_RECORD_OVERHEAD = 22  # a bound on per-record framing, for the batch-size estimate
_C = ErrorCode
_INIT_RETRIABLE = frozenset({_C.GROUP_LOAD_IN_PROGRESS, _C.GROUP_COORDINATOR_NOT_AVAILABLE, _C.NOT_COORDINATOR_FOR_GROUP})
_RETRIABLE_ALWAYS = {_C.OUT_OF_ORDER_SEQUENCE_NUMBER}
Headers = Sequence[Tuple[str, Optional[bytes]]]
Partitioner = Callable[[str, Optional[bytes], int], int]


class ProducerClosedError(KprotoError):
    """``send`` after ``close``."""


class RecordMetadata:
    """Where a record was written: ``offset`` is -1 with ``acks=0`` (the broker does not say)."""

    __slots__ = ("topic", "partition", "offset", "timestamp")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return f"RecordMetadata({self.topic!r}, {self.partition}, offset={self.offset})"


class _Batch:
    __slots__ = ("topic", "partition", "records", "futures", "size", "opened", "seq", "attempts", "retry_at",
                 "base_sequence", "encoded")

    def __init__(self, topic: str, partition: int, seq: int, now: float) -> None:
        self.topic = topic
        self.partition = partition
        self.records: List[Tuple[Optional[bytes], Optional[bytes], int, Headers]] = []
        self.futures: List["asyncio.Future[RecordMetadata]"] = []
        self.size = 0
        self.opened = now
        self.seq = seq               # creation order within the partition
        self.attempts = 0            # sends so far
        self.retry_at = 0.0
        self.base_sequence = -1      # idempotence: fixed on the first send
        self.encoded: Optional[Tuple[int, bytes]] = None  # (produce version, bytes) reused by retries


class Producer:
    """An asyncio Kafka producer; see the module docstring.  Use ``async with Producer(...) as p:``.

    ``broker_release`` names a broker without ApiVersions (``"0.9.0"``); ``acks`` is 0, 1 or ``"all"``;
    ``compression`` None, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``; ``linger_ms`` how long a
    batch waits to fill; ``batch_size`` its size in bytes; ``max_in_flight`` the Produce requests out per
    broker; ``retries``/``retry_backoff_ms`` the retry budget.
    """

    def __init__(
        self,
        bootstrap_servers: Union[str, Sequence[str]],
        *,
        client_id: str = "kproto-producer",
        broker_release: Optional[BrokerVersions] = None,
        acks: Union[int, str] = 1,
        compression: Optional[str] = None,
        linger_ms: float = 0,
        batch_size: int = 16384,
        max_in_flight: int = 5,
        retries: int = 5,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        idempotence: Optional[bool] = None,
        partitioner: Optional[Partitioner] = None,
        max_buffered_records: int = 100_000,
        metadata_timeout_ms: int = 60000,
    ) -> None:
        if acks not in _ACKS:
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if compression not in _CODECS:
            raise ValueError(f"compression must be one of {_CODECS}, not {compression!r}")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.acks = _ACKS[acks]
        if idempotence and self.acks != -1:
            raise ValueError("idempotence needs acks='all'")
        if idempotence and max_in_flight > 5:
            raise ValueError("idempotence allows at most 5 requests in flight per broker")
        self.compression = compression
        self.linger = linger_ms / 1000.0
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self.metadata_timeout = metadata_timeout_ms / 1000.0
        self._idempotence_wanted = idempotence
        self._partitioner: Partitioner = partitioner if partitioner is not None else DefaultPartitioner()
        self._sticky = self._partitioner if isinstance(self._partitioner, DefaultPartitioner) else None
        # one connection per broker for Produce, plus the metadata connection ClusterView opens
        self.cluster = ClusterView(bootstrap_servers, client_id=client_id, broker_release=broker_release,
                                   max_in_flight=max_in_flight, retry_backoff_ms=retry_backoff_ms)
        self.max_buffered_records = max_buffered_records
        self._queues: Dict[Tuple[str, int], Deque[_Batch]] = {}
        self._holding: Dict[str, List[Tuple[Any, ...]]] = {}
        self._holding_since: Dict[str, float] = {}
        self._partition_in_flight: Dict[Tuple[str, int], int] = {}
        self._node_in_flight: Dict[int, int] = {}
        self._batch_seq: Dict[Tuple[str, int], int] = {}
        self._next_sequence: Dict[Tuple[str, int], int] = {}
        self._producer_id = -1
        self._producer_epoch = -1
        self.idempotent = False
        #: the most Produce requests that were in flight to one broker at once (a pipelining gauge)
        self.peak_in_flight = 0
        self._buffered = 0
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._wake = asyncio.Event()
        self._flushing = 0
        self._closing = False
        self._closed = False
        self._loop_task: Optional["asyncio.Task[None]"] = None
        self._stopping = False
        self._refresh_task: Optional["asyncio.Task[None]"] = None
        self._refresh_wanted = False
        self._next_refresh_at = 0.0
        self._tasks: Set["asyncio.Task[None]"] = set()

    # ---------------------------------------------------------------- life cycle

    async def start(self) -> None:
        """Connect to a bootstrap broker, settle idempotence, and start the send loop."""
        conn = await self.cluster.connection(None)
        if self._idempotence_wanted is not False and conn.supports(_INIT_PRODUCER_ID) and self.acks == -1:
            # A broker that has just started answers COORDINATOR_LOAD_IN_PROGRESS (or NOT_AVAILABLE) until
            # it holds a block of producer ids: retriable, within the request timeout.
            give_up = time.monotonic() + self.request_timeout_ms / 1000.0
            while True:
                response = await conn.request(InitProducerIdRequest(transactional_id=None,
                                                                    transaction_timeout_ms=60000))
                assert isinstance(response, InitProducerIdResponse)
                if response.error_code not in _INIT_RETRIABLE or time.monotonic() > give_up:
                    break
                await asyncio.sleep(self.retry_backoff)
            if response.error_code != _C.NONE:
                raise error_class(response.error_code)("InitProducerId failed")
            self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
            self.idempotent = True
        elif self._idempotence_wanted:
            raise KprotoError("idempotence was asked for, but the broker does not serve InitProducerId "
                              "(Kafka 0.11 or later is needed)")
        self._loop_task = asyncio.ensure_future(self._send_loop())

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def flush(self) -> None:
        """Send every buffered record now and wait until each one is acknowledged or failed."""
        self._flushing += 1
        self._wake.set()
        try:
            await self._idle.wait()
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        """Flush, stop the send loop and close the connections."""
        if self._closed:
            return
        self._closing = True
        if self._loop_task is not None:
            await self.flush()
            # Stopped by a flag, not by cancel(): on Python 3.11 a cancel that lands while the loop's
            # wait_for(wake, timeout) is completing is swallowed, and the loop would wait on forever.
            self._stopping = True
            self._wake.set()
            await self._loop_task
        for task in list(self._tasks) + ([self._refresh_task] if self._refresh_task else []):
            task.cancel()
        self._closed = True
        await self.cluster.close()

    # ---------------------------------------------------------------- sending

    async def send(
        self,
        topic: str,
        value: Optional[bytes],
        *,
        key: Optional[bytes] = None,
        headers: Optional[Headers] = None,
        partition: Optional[int] = None,
        timestamp_ms: Optional[int] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Queue one record; returns the future of its :class:`RecordMetadata` (see the module docstring)."""
        if self._closing:
            raise ProducerClosedError("send() on a closed producer")
        if self._buffered >= self.max_buffered_records:
            self._room.clear()
            await self._room.wait()
        future: "asyncio.Future[RecordMetadata]" = asyncio.get_running_loop().create_future()
        ts = timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000
        record = (key, value, ts, headers or ())
        self._buffered += 1
        self._idle.clear()
        count = self.cluster.partitions.get(topic)
        held = self._holding.get(topic)
        if held is not None or (partition is None and count is None):
            # Held records go first even once the topic is known: the send loop moves them on its next
            # turn, and a record appended directly before that would overtake them.
            if held is None:
                held = self._holding[topic] = []
                self._holding_since[topic] = time.monotonic()
            held.append((record, partition, future))
            self._wake.set()
            return future
        if partition is None:
            partition = self._partitioner(topic, key, count)  # type: ignore[arg-type]
        self._append(topic, partition, record, future)
        return future

    def _append(self, topic: str, partition: int, record: Tuple[Any, ...], future: "asyncio.Future[RecordMetadata]") -> None:
        tp = (topic, partition)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        size = _RECORD_OVERHEAD + len(record[0] or b"") + len(record[1] or b"")
        batch = queue[-1] if queue else None
        if batch is None or batch.attempts or batch.size + size > self.batch_size and batch.records:
            seq = self._batch_seq.get(tp, 0)
            self._batch_seq[tp] = seq + 1
            batch = _Batch(topic, partition, seq, time.monotonic())
            queue.append(batch)
            if self._sticky is not None and len(queue) > 1:
                self._sticky.batch_closed(topic, partition, self.cluster.partitions.get(topic, 1))
            self._wake.set()
        batch.records.append(record)
        batch.futures.append(future)
        batch.size += size
        if batch.size >= self.batch_size or not self.linger:
            self._wake.set()

    # ---------------------------------------------------------------- the send loop

    async def _send_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = time.monotonic()
            self._release_held(now)
            deadline = self._drain_ready(now)
            if self._refresh_wanted and self._refresh_task is None:
                self._start_refresh(now)
                if self._refresh_task is None:  # held back by retry_backoff_ms: look again when it ends
                    deadline = _earliest(deadline, self._next_refresh_at)
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if timeout == 0.0:
                await asyncio.sleep(0)
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def _release_held(self, now: float) -> None:
        for topic in list(self._holding):
            count = self.cluster.partitions.get(topic)
            if count is None:
                self._refresh_wanted = True
                if now - self._holding_since[topic] <= self.metadata_timeout:
                    continue
            held = self._holding.pop(topic)
            del self._holding_since[topic]
            if count is None:
                error = KprotoError(f"no metadata for topic {topic!r} within {self.metadata_timeout:.0f} s")
                for _, _, future in held:
                    self._settle_error(future, error)
                continue
            for record, partition, future in held:
                if partition is None:
                    partition = self._partitioner(topic, record[0], count)
                self._append(topic, partition, record, future)

    def _drain_ready(self, now: float) -> Optional[float]:
        """Send what is ready; returns when the loop must look again (a linger or backoff deadline)."""
        deadline: Optional[float] = None
        by_node: Dict[int, List[_Batch]] = {}
        flushing = self._flushing > 0 or self._closing
        for tp, queue in self._queues.items():
            if not queue:
                continue
            head = queue[0]
            if head.attempts:
                if self._partition_in_flight.get(tp, 0) or not self._sendable(now, head):
                    if not self._partition_in_flight.get(tp, 0):
                        deadline = _earliest(deadline, head.retry_at)
                    continue
            elif self._partition_in_flight.get(tp, 0) >= self.max_in_flight:
                continue
            elif not (flushing or len(queue) > 1 or head.size >= self.batch_size):
                due = head.opened + self.linger
                if due > now:
                    deadline = _earliest(deadline, due)
                    continue
            leader = self.cluster.leader(*tp)
            if leader is None:
                self._refresh_wanted = True
                continue
            by_node.setdefault(leader, []).append(head)
        for node, batches in by_node.items():
            if self._node_in_flight.get(node, 0) >= self.max_in_flight:
                continue
            for batch in batches:
                tp = (batch.topic, batch.partition)
                self._queues[tp].popleft()
                batch.attempts += 1
                self._partition_in_flight[tp] = self._partition_in_flight.get(tp, 0) + 1
            in_flight = self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
            self.peak_in_flight = max(self.peak_in_flight, in_flight)
            task = asyncio.ensure_future(self._produce(node, batches))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if by_node and any(self._node_in_flight.get(n, 0) < self.max_in_flight for n in by_node):
            deadline = _earliest(deadline, now)  # more batches may be waiting behind the ones just sent
        return deadline

    @staticmethod
    def _sendable(now: float, head: _Batch) -> bool:
        return head.retry_at <= now

    def _start_refresh(self, now: float) -> None:
        if now < self._next_refresh_at:
            return
        self._refresh_wanted = False
        topics = set(self._holding) | {t for t, _ in self._queues} | set(self.cluster.partitions)
        self._refresh_task = asyncio.ensure_future(self._refresh(topics))

    async def _refresh(self, topics: Set[str]) -> None:
        try:
            await self.cluster.refresh(topics)
        except (KprotoError, OSError):
            self._refresh_wanted = True
        finally:
            self._next_refresh_at = time.monotonic() + self.retry_backoff
            self._refresh_task = None
            self._wake.set()

    # ---------------------------------------------------------------- one Produce request

    async def _produce(self, node: int, batches: List[_Batch]) -> None:
        conn: Optional[Connection] = None
        try:
            try:
                conn = await self.cluster.connection(node)
                request = self._request(conn, batches)
                if self.acks == 0:
                    await conn.send_one_way(request)
                    for batch in batches:
                        self._complete(batch, -1)
                    return
                try:
                    response = await asyncio.wait_for(conn.request(request), self.request_timeout_ms / 1000.0 + 1.0)
                except asyncio.TimeoutError:
                    # no answer in time: the connection's order can no longer be trusted, so it goes, and
                    # everything in flight on it is retried (a timed-out batch may have been written: at least once)
                    self.cluster.forget_connection(conn)
                    await conn.close()
                    for batch in batches:
                        self._failed(batch, _C.REQUEST_TIMED_OUT, None)
                    return
            except BrokerConnectionError as exc:
                if conn is not None:
                    self.cluster.forget_connection(conn)
                for batch in batches:
                    self._failed(batch, _C.NETWORK_EXCEPTION, exc)
                return
            except KprotoError as exc:
                for batch in batches:
                    self._fail_batch(batch, exc)
                return
            assert isinstance(response, ProduceResponse)
            answers = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
            for batch in batches:
                answer = answers.get((batch.topic, batch.partition))
                if answer is None:
                    self._fail_batch(batch, KprotoError(f"no answer for {batch.topic}[{batch.partition}]"))
                elif answer.error_code == _C.NONE:
                    self._complete(batch, answer.base_offset)
                elif answer.error_code == _C.DUPLICATE_SEQUENCE_NUMBER and self.idempotent:
                    self._complete(batch, -1)
                else:
                    self._failed(batch, answer.error_code, None)
        finally:
            self._node_in_flight[node] -= 1
            for batch in batches:
                self._partition_in_flight[(batch.topic, batch.partition)] -= 1
            self._wake.set()

    def _request(self, conn: Connection, batches: List[_Batch]) -> ProduceRequest:
        version = conn.version(_PRODUCE)
        Topic = ProduceRequest.TopicProduceData
        Partition = Topic.PartitionProduceData
        topics: Dict[str, List[Any]] = {}
        for batch in batches:
            topics.setdefault(batch.topic, []).append(Partition(index=batch.partition,
                                                                records=RecordSet(self._encode(batch, version))))
        request = ProduceRequest(acks=self.acks, timeout_ms=self.request_timeout_ms,
                                 topic_data=[Topic(name=t, partition_data=ps) for t, ps in topics.items()])
        return request

    def _encode(self, batch: _Batch, version: int) -> bytes:
        if batch.encoded is not None and batch.encoded[0] == version:
            return batch.encoded[1]
        if version >= 3:
            if self.idempotent and batch.base_sequence < 0:
                tp = (batch.topic, batch.partition)
                batch.base_sequence = self._next_sequence.get(tp, 0)
                self._next_sequence[tp] = (batch.base_sequence + len(batch.records)) & 0x7FFFFFFF
            data = encode_record_batch(batch.records, codec=self.compression, producer_id=self._producer_id,
                                       producer_epoch=self._producer_epoch, base_sequence=batch.base_sequence)
        else:
            if any(r[3] for r in batch.records):
                raise KprotoError(f"record headers need Produce v3 (Kafka 0.11); this broker speaks v{version}")
            if self.compression == "zstd":
                raise KprotoError(f"zstd needs Produce v7 (Kafka 2.1); this broker speaks v{version}")
            data = encode_message_set([r[:3] for r in batch.records], magic=1 if version == 2 else 0, codec=self.compression)
        batch.encoded = (version, data)
        return data

    # ---------------------------------------------------------------- outcomes

    def _complete(self, batch: _Batch, base_offset: int) -> None:
        for i, (future, record) in enumerate(zip(batch.futures, batch.records)):
            if not future.done():
                offset = base_offset + i if base_offset >= 0 else -1
                future.set_result(RecordMetadata(batch.topic, batch.partition, offset, record[2]))
        self._settled(len(batch.futures))

    def _failed(self, batch: _Batch, code: int, cause: Optional[BaseException]) -> None:
        error = error_class(code)(f"{batch.topic}[{batch.partition}]" + (f": {cause}" if cause else ""))
        retriable = error.retriable or code in _RETRIABLE_ALWAYS or code == _C.NETWORK_EXCEPTION
        if not retriable or batch.attempts > self.retries:
            self._fail_batch(batch, error)
            return
        self.cluster.forget_leader(batch.topic, batch.partition)
        self._refresh_wanted = True
        batch.retry_at = time.monotonic() + self.retry_backoff
        queue = self._queues.setdefault((batch.topic, batch.partition), deque())
        index = 0
        while index < len(queue) and queue[index].seq < batch.seq:
            index += 1
        queue.insert(index, batch)

    def _fail_batch(self, batch: _Batch, error: BaseException) -> None:
        for future in batch.futures:
            self._settle_error(future, error, count=False)
        self._settled(len(batch.futures))

    def _settle_error(self, future: "asyncio.Future[RecordMetadata]", error: BaseException, count: bool = True) -> None:
        if not future.done():
            future.set_exception(error)
            future.exception()  # marked retrieved: a caller that never awaits it gets no warning
        if count:
            self._settled(1)

    def _settled(self, n: int) -> None:
        self._buffered -= n
        if self._buffered < self.max_buffered_records:
            self._room.set()
        if self._buffered == 0:
            self._idle.set()


def _earliest(a: Optional[float], b: float) -> float:
    return b if a is None else min(a, b)
