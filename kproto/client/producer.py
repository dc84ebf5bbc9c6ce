"""The pipelined asyncio producer.

Theory of operation
===================

``await producer.send(topic, value)`` never waits for the network: it picks the partition (the
:class:`~kproto.client.partitioner.DefaultPartitioner` unless ``partition=`` is given), appends the record
to the open batch of that partition and returns a :class:`~kproto.client.record_future.RecordFuture` of its
:class:`RecordMetadata`: the pair (batch, index), which asyncio takes as a future.  Only two things
make ``send`` wait: ``max_buffered_records`` records already waiting (back-pressure), and nothing else.
A record for a topic whose partition count is not known yet
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

An answer settles each batch once (its base offset or an error); a record's metadata is derived from
that and its index when its handle is asked for it, so nothing is made per record on the way back.
A retriable error (NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE, a lost connection, ...) forgets
the partition's leader, asks for metadata, and puts the batch back at the head of its partition queue,
in creation order with other returned batches; it is resent after ``retry_backoff_ms`` up to
``retries`` times, then its records fail.  A request unanswered
for ``request_timeout_ms`` closes its connection and counts as REQUEST_TIMED_OUT for every batch in flight
on it: they are retried, so such a batch may be written twice unless idempotence is on.

**Bounds** (Kafka's names and defaults): every record's future is settled within ``delivery_timeout_ms``
(120 s) of its batch's creation -- acknowledged, or failed with the last error, or with
:class:`~kproto.client.connection.ClientTimeoutError` once that time has passed, whatever the broker does
(gone, frozen, silent); a batch in flight at its deadline fails then, its answer is ignored.  A record
whose topic has no metadata fails after ``max_block_ms`` (60 s), and ``send`` waits at most that long for
buffer room; a held record whose topic becomes known joins a batch then, so any record is settled within
``max_block_ms + delivery_timeout_ms`` of ``send``.  Every request waits at most ``request_timeout_ms``
(30 s).  So :meth:`Producer.flush` and :meth:`Producer.close` return within that too, sooner with their
``timeout``.

**Order** within a partition: batches leave in creation order, and while the head batch is a retry the
partition sends nothing else and waits for all of its requests in flight to come back first, then sends
the retries one at a time.  A broker that rejects one request for a partition rejects the ones queued
after it too (a leader change does), so everything comes back and is resent in order.  With idempotence
(``idempotence=True``, or ``None`` and a broker that serves InitProducerId with ``acks="all"``) every
batch carries the producer id and a per-partition sequence that survives retries, so the broker itself
refuses to append out of order (OUT_OF_ORDER_SEQUENCE is then retried as well).  Requests reach a
broker in the order they were made: while its connection opens, one request waits for it and nothing
else is sent to that broker.

**Recovery of the idempotent producer**: once a batch that was given sequence numbers fails for good
(retries spent, ``delivery_timeout_ms`` passed) the broker's idea of the next sequence and the producer's
differ, and every later batch would be refused as out of order.  So the send loop then stops sending,
waits for the requests in flight, asks InitProducerId again -- from v3 naming the current producer id and
epoch (KIP-360); Apache Kafka hands an idempotent producer a fresh id at epoch 0 either way -- and numbers
the batches still queued from 0 under the new id/epoch.  (Kafka's own producer bumps its epoch on its
side instead, which Kafka's log accepts from sequence 0; asking works with every broker that serves
idempotence.)  UNKNOWN_PRODUCER_ID (a broker that lost the id, e.g. restarted) and INVALID_PRODUCER_EPOCH
answers do the same and retry the batch.

**Versions**: the Produce version is the one negotiated with each broker
(:class:`~kproto.client.connection.Connection`); v0/v1 carry magic 0 message sets, v2 magic 1, v3 and
later magic 2 record batches (the only format with headers and zstd).
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections import deque
from itertools import accumulate, repeat
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union, overload

from kproto import ErrorCode
from kproto._generated.error_codes import error_class
from kproto.client.cluster import ClusterView
from kproto.client.connection import (
    DEFAULT_REQUEST_TIMEOUT_MS,
    BrokerConnectionError,
    BrokerVersions,
    ClientTimeoutError,
    Connection,
    RequestTimeoutError,
)
from kproto.client.partitioner import DefaultPartitioner
from kproto.client.record_future import RecordFuture, RecordMetadata, _HeldOutcome, _Outcome
from kproto.errors import EncodeError, KprotoError
from kproto.messages import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse
from kproto.records import RecordSet, encode_message_set, encode_record_batch, encode_record_batch_columns

__all__ = [
    "BufferFullError",
    "InvalidRecordError",
    "Producer",
    "ProducerClosedError",
    "RecordFuture",
    "RecordMetadata",
    "RecordTooLargeError",
    "SentBatch",
]

_PRODUCE = 0
_INIT_PRODUCER_ID = 22
_ACKS = {0: 0, 1: 1, -1: -1, "all": -1}
_CODECS = (None, "gzip", "snappy", "lz4", "zstd")
_RECORD_OVERHEAD = 22  # a bound on per-record framing, for the batch-size estimate
_BATCH_OVERHEAD = 61  # a magic 2 batch's header: a one-record batch is this much larger than the record
_C = ErrorCode
_INIT_RETRIABLE = frozenset(
    {_C.GROUP_LOAD_IN_PROGRESS, _C.GROUP_COORDINATOR_NOT_AVAILABLE, _C.NOT_COORDINATOR_FOR_GROUP}
)
_RETRIABLE_ALWAYS = {_C.OUT_OF_ORDER_SEQUENCE_NUMBER}
#: answers that mean the broker does not know this producer id/epoch: a new one is taken, the batch retried
_RESET_CODES = {_C.UNKNOWN_PRODUCER_ID, _C.INVALID_PRODUCER_EPOCH}
_YIELD_EVERY = 1023  # send() lets the loop run once per this many + 1 records buffered (a power of 2, less 1)
_handle = RecordFuture._make
_running_loop = asyncio.get_running_loop
_time_ns = time.time_ns
Headers = Sequence[Tuple[str, Optional[bytes]]]
Partitioner = Callable[[str, Optional[bytes], int], int]


class ProducerClosedError(KprotoError):
    """``send`` after ``close``, or a record still unsent when ``close(timeout)`` ran out."""


class BufferFullError(KprotoError):
    """``send_nowait`` when ``max_buffered_records`` records are already waiting (``send`` would wait)."""


class InvalidRecordError(KprotoError, ValueError):
    """A record that cannot be sent as given: ``index`` is its position in a ``send_batch`` call (``None``
    for a single send).  Nothing of the call was queued."""

    def __init__(self, message: str, index: Optional[int] = None) -> None:
        super().__init__(message)
        self.index = index


class RecordTooLargeError(InvalidRecordError):
    """A record whose batch alone would be larger than ``max_request_size`` (Kafka's ``max.request.size``)."""


class SentBatch(Sequence[RecordMetadata]):
    """The outcome of one :meth:`Producer.send_batch` call: a sequence of :class:`RecordMetadata` in the
    order the records were given, each made when it is asked for."""

    __slots__ = ("_starts", "_segments")

    def __init__(self, segments: List[Tuple[int, int, str, int, int, int]]) -> None:
        # (first index, count, topic, partition, base offset, timestamp), sorted by first index
        segments.sort()
        self._segments = segments
        self._starts = [segment[0] for segment in segments]

    def __len__(self) -> int:
        return sum(segment[1] for segment in self._segments)

    @overload
    def __getitem__(self, index: int) -> RecordMetadata: ...

    @overload
    def __getitem__(self, index: slice) -> List[RecordMetadata]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[RecordMetadata, List[RecordMetadata]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        at = bisect_right(self._starts, index) - 1
        if at < 0 or index >= self._starts[at] + self._segments[at][1]:
            raise IndexError(index)
        start, _, topic, partition, base_offset, timestamp = self._segments[at]
        return RecordMetadata(topic, partition, base_offset + index - start if base_offset >= 0 else -1, timestamp)


class _Group:
    """The records of one ``send_batch`` call: one future for all of them, settled when the last batch
    holding some of them is."""

    __slots__ = ("future", "remaining", "segments")

    def __init__(self, future: "asyncio.Future[SentBatch]", count: int) -> None:
        self.future = future
        self.remaining = count
        self.segments: List[Tuple[int, int, str, int, int, int]] = []

    def done(self) -> bool:
        return self.future.done()

    def acknowledged(self, segment: Tuple[int, int, str, int, int, int]) -> None:
        if self.future.done():
            return
        self.segments.append(segment)
        self.remaining -= segment[1]
        if self.remaining == 0:
            self.future.set_result(SentBatch(self.segments))

    def failed(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)
            self.future.exception()  # marked retrieved: a caller that never awaits it gets no warning


class _Slice:
    """``count`` records of a :class:`_Group` in one batch, the first being the call's record ``start``."""

    __slots__ = ("group", "start", "count")

    def __init__(self, group: _Group, start: int, count: int) -> None:
        self.group = group
        self.start = start
        self.count = count


class _Held:
    """The records of one topic waiting for its metadata, since ``since``.  While none has a key, headers or
    a partition of its own they are kept as columns and join batches a slice at a time when the topic
    becomes known; from the first that has, every record is kept as a row, moved one at a time.  Their
    handles point at ``outcome`` by arrival order, which forwards each to its batch once it has joined one."""

    __slots__ = ("since", "values", "timestamps", "sizes", "rows", "outcome", "count")

    def __init__(self, since: float, outcome: _HeldOutcome) -> None:
        self.since = since
        self.values: List[Optional[bytes]] = []
        self.timestamps: List[int] = []
        self.sizes: List[int] = []  # each record's size estimate
        self.rows: Optional[List[Tuple[Tuple[Any, ...], Optional[int]]]] = None
        self.outcome = outcome
        self.count = 0

    def add_row(self, record: Tuple[Any, ...], partition: Optional[int]) -> None:
        if self.rows is None:
            self.rows = [((None, v, t, None), None) for v, t in zip(self.values, self.timestamps)]
            self.values, self.timestamps, self.sizes = [], [], []
        self.rows.append((record, partition))


class _Batch(_Outcome):
    """The records of one partition sent together, as columns, and their one outcome: the handle of a
    record given to ``send`` is (batch, index); ``send_batch`` shares are settled from ``slices``."""

    __slots__ = (
        "values",
        "keys",
        "headers",
        "slices",
        "size",
        "opened",
        "seq",
        "attempts",
        "retry_at",
        "base_sequence",
        "encoded",
        "last_error",
    )

    def __init__(self, topic: str, partition: int, seq: int, now: float) -> None:
        super().__init__(_running_loop(), topic, partition, [])
        # The records as columns, the encoder's input (kproto.records.encode_record_batch_columns): nothing
        # is made per record.  ``keys``/``headers`` stay None while no record has one.
        self.values: List[Optional[bytes]] = []
        self.keys: Optional[List[Optional[bytes]]] = None
        self.headers: Optional[List[Optional[Headers]]] = None
        #: (index of its first record, the share) for each send_batch() call with records here
        self.slices: List[Tuple[int, _Slice]] = []
        self.size = _BATCH_OVERHEAD  # the estimate of the encoded batch, as Kafka's batch.size counts it
        self.opened = now
        self.seq = seq  # creation order within the partition
        self.attempts = 0  # sends so far
        self.retry_at = 0.0
        self.base_sequence = -1  # idempotence: fixed on the first send
        self.encoded: Optional[Tuple[int, bytes]] = None  # (produce version, bytes) reused by retries
        self.last_error: Optional[BaseException] = None  # why the last attempt failed, for the expiry message

    def append(self, key: Optional[bytes], value: Optional[bytes], timestamp: int, headers: Optional[Headers]) -> None:
        """Add one record (the producer inlines the case of no key and no headers)."""
        if key is not None and self.keys is None:
            self.keys = [None] * len(self.values)
        if headers and self.headers is None:
            self.headers = [None] * len(self.values)
        self.values.append(value)
        self.timestamps.append(timestamp)
        if self.keys is not None:
            self.keys.append(key)
        if self.headers is not None:
            self.headers.append(headers or None)

    def extend(
        self,
        keys: Optional[Sequence[Optional[bytes]]],
        values: Sequence[Optional[bytes]],
        timestamps: Union[int, List[int]],
        headers: Optional[Sequence[Optional[Headers]]],
        start: int,
        end: int,
    ) -> None:
        """Add the records ``start:end`` of columns (``keys``/``headers`` None: none has one; an int
        ``timestamps``: the one timestamp of them all)."""
        count = end - start
        if keys is not None and self.keys is None:
            self.keys = [None] * len(self.values)
        if headers is not None and self.headers is None:
            self.headers = [None] * len(self.values)
        self.values.extend(values[start:end])
        self.timestamps.extend(repeat(timestamps, count) if isinstance(timestamps, int) else timestamps[start:end])
        if self.keys is not None:
            self.keys.extend(keys[start:end] if keys is not None else repeat(None, count))
        if self.headers is not None:
            self.headers.extend(headers[start:end] if headers is not None else repeat(None, count))


class Producer:
    """An asyncio Kafka producer; see the module docstring.  Use ``async with Producer(...) as p:``.

    ``broker_release`` names a broker without ApiVersions (``"0.9.0"``); ``acks`` is 0, 1 or ``"all"``;
    ``compression`` None, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``; ``linger_ms`` how long a
    batch waits to fill; ``batch_size`` its size in bytes; ``max_in_flight`` the Produce requests out per
    broker; ``retries``/``retry_backoff_ms`` the retry budget.  The bounds (module docstring):
    ``delivery_timeout_ms`` (at least ``linger_ms + request_timeout_ms``, as Kafka requires),
    ``request_timeout_ms``, ``max_block_ms``, and ``connect_timeout_ms`` for a TCP handshake.
    ``max_request_size`` (Kafka's ``max.request.size``) refuses a record too large for one request;
    ``bulk_batch_size`` is the size up to which :meth:`send_batch` fills batches (the caller's records are
    batched already, so larger batches than ``batch_size`` spare requests): 1,000,000 B stays under the
    smallest default message limit of Kafka brokers (1,000,012 B in early releases).
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
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        idempotence: Optional[bool] = None,
        partitioner: Optional[Partitioner] = None,
        max_buffered_records: int = 100_000,
        max_block_ms: int = 60000,
        delivery_timeout_ms: int = 120000,
        connect_timeout_ms: int = 10000,
        max_request_size: int = 1048576,
        bulk_batch_size: int = 1_000_000,
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
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError(
                f"delivery_timeout_ms ({delivery_timeout_ms}) must be at least linger_ms + "
                f"request_timeout_ms ({linger_ms + request_timeout_ms})"
            )
        self.compression = compression
        self.linger = linger_ms / 1000.0
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self.max_block = max_block_ms / 1000.0
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self._idempotence_wanted = idempotence
        self._partitioner: Partitioner = partitioner if partitioner is not None else DefaultPartitioner()
        self._sticky = self._partitioner if isinstance(self._partitioner, DefaultPartitioner) else None
        # one connection per broker for Produce, plus the metadata connection ClusterView opens
        self.cluster = ClusterView(
            bootstrap_servers,
            client_id=client_id,
            broker_release=broker_release,
            max_in_flight=max_in_flight,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
        )
        self.max_buffered_records = max_buffered_records
        self.max_request_size = max_request_size
        #: the largest batch ``send_batch`` fills (at least ``batch_size``, at most ``max_request_size``)
        self.bulk_batch_size = max(batch_size, min(bulk_batch_size, max_request_size))
        self._queues: Dict[Tuple[str, int], Deque[_Batch]] = {}
        self._holding: Dict[str, _Held] = {}
        self._partition_in_flight: Dict[Tuple[str, int], int] = {}
        self._in_flight: Set[_Batch] = set()
        self._node_in_flight: Dict[int, int] = {}
        #: brokers whose connection one Produce request is opening: nothing else is sent to them meanwhile
        self._connecting: Set[int] = set()
        self._batch_seq: Dict[Tuple[str, int], int] = {}
        self._next_sequence: Dict[Tuple[str, int], int] = {}
        self._producer_id = -1
        self._producer_epoch = -1
        self.idempotent = False
        #: idempotence: a sequenced batch failed, so a new producer id/epoch is needed before sending on
        self._reset_needed = False
        self._reset_task: Optional["asyncio.Task[None]"] = None
        #: how many times a new producer id/epoch was taken after a failure (a recovery gauge)
        self.producer_id_resets = 0
        #: the most Produce requests that were in flight to one broker at once (a pipelining gauge)
        self.peak_in_flight = 0
        self._buffered = 0
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._wake = asyncio.Event()
        #: False once the send loop has cleared ``_wake``: send_nowait sets it once per turn of the loop, not
        #: once per record (Event.set is a Python call)
        self._woken = False
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
        """Connect to a bootstrap broker, settle idempotence, and start the send loop.

        Each bootstrap address tried takes at most ``connect_timeout_ms`` + ``request_timeout_ms``
        (ApiVersions), plus ``request_timeout_ms`` for InitProducerId; failures are
        :class:`~kproto.client.connection.BrokerConnectionError` (``RequestTimeoutError`` for silence)."""
        try:
            await self._start()
        except BaseException:
            await self.cluster.close()
            raise

    async def _start(self) -> None:
        conn = await self.cluster.connection(None)
        if self._idempotence_wanted is not False and conn.supports(_INIT_PRODUCER_ID) and self.acks == -1:
            # A broker that has just started answers COORDINATOR_LOAD_IN_PROGRESS (or NOT_AVAILABLE) until
            # it holds a block of producer ids: retriable, within the request timeout.
            give_up = time.monotonic() + self.request_timeout_ms / 1000.0
            while True:
                response = await conn.request(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
                )
                assert isinstance(response, InitProducerIdResponse)
                if response.error_code not in _INIT_RETRIABLE or time.monotonic() > give_up:
                    break
                await asyncio.sleep(self.retry_backoff)
            if response.error_code != _C.NONE:
                raise error_class(response.error_code)(f"InitProducerId from {conn.address} failed")
            self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
            self.idempotent = True
        elif self._idempotence_wanted:
            raise KprotoError(
                "idempotence was asked for, but the broker does not serve InitProducerId "
                "(Kafka 0.11 or later is needed)"
            )
        self._loop_task = asyncio.ensure_future(self._send_loop())

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Send every buffered record now and wait until each one is acknowledged or failed.

        Returns within ``delivery_timeout_ms`` (``max_block_ms`` for records still waiting for their
        topic's metadata), when every record is settled; with ``timeout`` (seconds), raises
        :class:`~kproto.client.connection.ClientTimeoutError` when records are still unsettled by then
        (they stay queued, and are not failed)."""
        self._flushing += 1
        self._wake.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except asyncio.TimeoutError:
            raise ClientTimeoutError(
                f"flush(): {self._buffered} record(s) still unacknowledged after {timeout:g} s"
            ) from None
        finally:
            self._flushing -= 1

    async def close(self, timeout: Optional[float] = None) -> None:
        """Flush, stop the send loop and close the connections.

        Waits for every record to be settled (at most ``delivery_timeout_ms``, see :meth:`flush`); with
        ``timeout`` (seconds, as Kafka's ``close(Duration)``) at most that long, after which the records
        still unsettled fail with :class:`ProducerClosedError` and the connections close."""
        if self._closed:
            return
        self._closing = True
        if self._loop_task is not None:
            try:
                await self.flush(timeout)
            except ClientTimeoutError:
                self._abort(
                    ProducerClosedError(
                        f"the producer was closed with this record unsent: close() timeout of {timeout:g} s passed"
                    )
                )
            # Stopped by a flag, not by cancel(): on Python 3.11 a cancel that lands while the loop's
            # wait_for(wake, timeout) is completing is swallowed, and the loop would wait on forever.
            self._stopping = True
            self._wake.set()
            await self._loop_task
        tasks = list(self._tasks) + [t for t in (self._refresh_task, self._reset_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._closed = True
        await self.cluster.close()

    def _abort(self, error: BaseException) -> None:
        """Fail every record not yet settled (held, queued or in flight) with ``error``."""
        for topic in list(self._holding):
            held = self._holding.pop(topic)
            held.outcome.fail(error)
            self._settled(held.count)
        for queue in self._queues.values():
            while queue:
                self._fail_batch(queue.popleft(), error)
        for batch in list(self._in_flight):
            self._fail_batch(batch, error)

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
    ) -> RecordFuture:
        """Queue one record; returns the :class:`~kproto.client.record_future.RecordFuture` of its
        :class:`RecordMetadata` (see the module docstring): ``await (await producer.send(...))`` is the
        metadata, or raises the record's error.

        Waits only for buffer room (at most ``max_block_ms``).  A record too large for one request raises
        :class:`RecordTooLargeError` at once."""
        if self._closing:
            raise ProducerClosedError("send() on a closed producer")
        if self._buffered >= self.max_buffered_records:
            give_up = time.monotonic() + self.max_block
            while self._buffered >= self.max_buffered_records:  # others woken with this call may fill it first
                await self._wait_for_room("send()", give_up)
            if self._closing:
                raise ProducerClosedError("send() on a producer closed while the call waited")
        elif self._buffered & _YIELD_EVERY == _YIELD_EVERY:
            # a caller awaiting send() in a loop never gives the send loop a turn otherwise: nothing would
            # leave before the buffer fills, and sending would not overlap queueing
            await asyncio.sleep(0)
        return self.send_nowait(topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms)

    def send_nowait(
        self,
        topic: str,
        value: Optional[bytes],
        *,
        key: Optional[bytes] = None,
        headers: Optional[Headers] = None,
        partition: Optional[int] = None,
        timestamp_ms: Optional[int] = None,
    ) -> RecordFuture:
        """:meth:`send` without a coroutine: queues the record and returns its handle at once.

        Call it from the event loop's thread, with the loop running.  Where ``send`` would wait for buffer
        room, raises :class:`BufferFullError` instead (the record is not queued: await a future, or
        :meth:`flush`, and send it again).  The future's bounds are ``send``'s."""
        if self._closing:
            raise ProducerClosedError("send_nowait() on a closed producer")
        if self._buffered >= self.max_buffered_records:
            raise BufferFullError(f"send_nowait(): {self._buffered} records buffered (max_buffered_records)")
        # The whole path of a record, inline: a Python call is the largest part of a record's cost here.
        size = (len(value) if value is not None else 0) + (len(key) if key is not None else 0)
        if headers:
            size += _headers_size(headers, None)
        if size > self.max_request_size - _BATCH_OVERHEAD - _RECORD_OVERHEAD:
            raise RecordTooLargeError(
                f"a record of {size} bytes is too large for one request of max_request_size {self.max_request_size}"
            )
        ts = timestamp_ms if timestamp_ms is not None else _time_ns() // 1_000_000
        self._buffered += 1
        if self._buffered == 1:
            self._idle.clear()
        count = self.cluster.partitions.get(topic)
        if topic in self._holding or (partition is None and count is None):
            held = self._holding.get(topic)
            if held is None:
                held = self._holding[topic] = _Held(time.monotonic(), _HeldOutcome(_running_loop(), topic))
            if held.rows is None and key is None and not headers and partition is None:
                held.values.append(value)
                held.timestamps.append(ts)
                held.sizes.append(size + _RECORD_OVERHEAD)
            else:
                held.add_row((key, value, ts, headers or None), partition)
            held.count += 1
            if not self._woken:
                self._woken = True
                self._wake.set()
            return _handle((held.outcome, held.count - 1))
        if partition is None:
            sticky = self._sticky
            if key is None and sticky is not None:
                partition = sticky.sticky.get(topic)
                if partition is None or partition >= count:  # type: ignore[operator]
                    partition = sticky(topic, None, count)  # type: ignore[arg-type]
            else:
                partition = self._partitioner(topic, key, count)  # type: ignore[arg-type]
        queue = self._queues.get((topic, partition))
        if queue:
            batch = queue[-1]
            size += _RECORD_OVERHEAD
            if not batch.attempts and batch.size + size <= self.batch_size:
                handle = _handle((batch, len(batch.timestamps)))
                if key is None and not headers and batch.keys is None and batch.headers is None:
                    batch.values.append(value)
                    batch.timestamps.append(ts)
                else:
                    batch.append(key, value, ts, headers)
                batch.size += size
                if not self._woken and (batch.size >= self.batch_size or not self.linger):
                    self._woken = True
                    self._wake.set()
                return handle
        return self._append(topic, partition, (key, value, ts, headers or None))

    async def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        headers: Any = None,
        partition: Optional[int] = None,
        timestamp_ms: Optional[int] = None,
    ) -> "asyncio.Future[Sequence[RecordMetadata]]":
        """Queue many records for ``topic`` at once; returns one future of their :class:`RecordMetadata`,
        in the order given (a :class:`SentBatch`), or of the first error of any of them.

        ``values`` (and ``keys``, ``headers`` when given) are columns of one length: sequences, numpy arrays
        of objects or pyarrow binary arrays; a value or key is ``bytes`` or ``None``, the headers of a
        record a sequence of ``(str, bytes | None)`` pairs.  Every record is checked before any is queued:
        a column of another length, a value that is not ``bytes``, or a record too large for one request
        raises :class:`InvalidRecordError` (:class:`RecordTooLargeError`) naming the record's index, and
        nothing of the call is sent.  The records share one timestamp (``timestamp_ms``, else the time of
        the call).  Without ``partition`` and ``keys``, the default partitioner puts the whole call on one
        partition (the next call goes to the next one); with keys each record goes to its key's partition.

        Waits for buffer room as :meth:`send` does, once for the call (the buffer may then hold up to
        ``len(values) - 1`` records more than ``max_buffered_records``), and, when the topic's partition
        count is not known yet, for its metadata: at most ``max_block_ms`` each
        (:class:`~kproto.client.connection.ClientTimeoutError`)."""
        if self._closing:
            raise ProducerClosedError("send_batch() on a closed producer")
        value_list = _column(values, "values")
        n = len(value_list)
        key_list = _column(keys, "keys") if keys is not None else None
        header_list = _column(headers, "headers") if headers is not None else None
        for name, column in (("keys", key_list), ("headers", header_list)):
            if column is not None and len(column) != n:
                raise InvalidRecordError(
                    f"send_batch(): {len(column)} {name} for {n} values", index=min(len(column), n)
                )
        sizes = _lengths(value_list, "value")
        if key_list is not None:
            sizes = [a + b for a, b in zip(sizes, _lengths(key_list, "key"))]
        if header_list is not None:
            sizes = [size + (_headers_size(h, i) if h else 0) for i, (size, h) in enumerate(zip(sizes, header_list))]
        limit = self.max_request_size - _BATCH_OVERHEAD - _RECORD_OVERHEAD
        if n and max(sizes) > limit:
            i = next(i for i, size in enumerate(sizes) if size > limit)
            raise RecordTooLargeError(
                f"send_batch(): record {i} of {sizes[i]} bytes is too large for one request "
                f"of max_request_size {self.max_request_size}",
                index=i,
            )
        if self._buffered >= self.max_buffered_records:
            await self._wait_for_room("send_batch()")
        loop = asyncio.get_running_loop()
        ts = timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000
        if partition is None and (key_list is not None or self._sticky is None):
            # a partition per record: each record is queued on its own
            enqueue = self._enqueue_checked
            futures = [
                enqueue(
                    topic,
                    value_list[i],
                    key_list[i] if key_list is not None else None,
                    header_list[i] if header_list is not None else None,
                    None,
                    ts,
                )
                for i in range(n)
            ]
            return asyncio.gather(*futures)  # type: ignore[return-value]
        future: "asyncio.Future[Sequence[RecordMetadata]]" = loop.create_future()
        if not n:
            future.set_result(SentBatch([]))
            return future
        if partition is None:
            count = await self._partition_count(topic)
            partition = self._partitioner(topic, None, count)
        if self._closing:
            raise ProducerClosedError("send_batch() on a producer closed while the call waited")
        self._buffered += n
        self._idle.clear()
        group = _Group(future, n)  # type: ignore[arg-type]  # the call's future resolves to its SentBatch
        ends = list(accumulate(s + _RECORD_OVERHEAD for s in sizes))
        self._append_many(topic, partition, (key_list, value_list, ts, header_list), ends, group)
        return future

    async def _partition_count(self, topic: str) -> int:
        """The partition count of ``topic`` once it is known and no record of it is held, asking for
        metadata as needed, within ``max_block_ms``."""
        give_up = time.monotonic() + self.max_block
        while True:
            count = self.cluster.partitions.get(topic)
            if count is not None and topic not in self._holding:
                return count
            left = give_up - time.monotonic()
            if left <= 0:
                raise ClientTimeoutError(
                    f"send_batch(): no metadata for topic {topic!r} within "
                    f"{self.max_block * 1000:.0f} ms (max_block_ms)"
                )
            if count is None:
                try:
                    await asyncio.wait_for(self.cluster.refresh(set(self.cluster.partitions) | {topic}), left)
                except (KprotoError, OSError, asyncio.TimeoutError):
                    pass
                if topic not in self.cluster.partitions:
                    await asyncio.sleep(min(self.retry_backoff, max(give_up - time.monotonic(), 0)))
            else:  # the send loop moves the held records on its next turn
                self._wake.set()
                await asyncio.sleep(0.001)

    def _append_many(
        self,
        topic: str,
        partition: int,
        columns: Tuple[Optional[Sequence[Any]], Sequence[Any], int, Optional[Sequence[Any]]],
        ends: List[int],
        group: _Group,
    ) -> None:
        """Append the records of ``columns`` (keys or None, values, their one timestamp, headers or None;
        ``ends``: the running sum of their size estimates) to the partition's open batch and as many new
        ones as they need, each batch taking one :class:`_Slice` of the group.  Batches are filled up to
        ``bulk_batch_size``."""
        keys, values, timestamp, headers = columns
        tp = (topic, partition)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        n = len(values)
        # the caller batched these already: batches larger than batch_size spare requests
        cap = self.bulk_batch_size
        i = 0
        while i < n:
            before = ends[i - 1] if i else 0
            batch = queue[-1] if queue else None
            j = i
            if batch is not None and not batch.attempts:
                j = bisect_right(ends, before + cap - batch.size, i)
                if j == i and not batch.values:
                    j = i + 1
            if j == i:
                seq = self._batch_seq.get(tp, 0)
                self._batch_seq[tp] = seq + 1
                batch = _Batch(topic, partition, seq, time.monotonic())
                queue.append(batch)
                if self._sticky is not None and len(queue) > 1:
                    self._sticky.batch_closed(topic, partition, self.cluster.partitions.get(topic, 1))
                j = max(bisect_right(ends, before + cap - batch.size, i), i + 1)
            assert batch is not None
            batch.slices.append((len(batch.timestamps), _Slice(group, i, j - i)))
            batch.extend(keys, values, timestamp, headers, i, j)
            batch.size += ends[j - 1] - before
            i = j
        self._wake.set()

    async def _wait_for_room(self, call: str, give_up: Optional[float] = None) -> None:
        """Wait until a record settles below ``max_buffered_records``, until ``give_up`` (monotonic; default
        ``max_block_ms`` from now)."""
        self._room.clear()
        left = self.max_block if give_up is None else max(give_up - time.monotonic(), 0.0)
        try:
            await asyncio.wait_for(self._room.wait(), left)
        except asyncio.TimeoutError:
            raise ClientTimeoutError(
                f"{call}: {self._buffered} records buffered (max_buffered_records) "
                f"and no room within {self.max_block * 1000:.0f} ms (max_block_ms)"
            ) from None

    def _enqueue_checked(
        self,
        topic: str,
        value: Optional[bytes],
        key: Optional[bytes],
        headers: Optional[Headers],
        partition: Optional[int],
        timestamp_ms: Optional[int],
    ) -> RecordFuture:
        ts = timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000
        record = (key, value, ts, headers or None)
        self._buffered += 1
        self._idle.clear()
        count = self.cluster.partitions.get(topic)
        if topic in self._holding or (partition is None and count is None):
            return self._hold(topic, record, partition)
        if partition is None:
            partition = self._partitioner(topic, key, count)  # type: ignore[arg-type]
        return self._append(topic, partition, record)

    def _hold(self, topic: str, record: Tuple[Any, ...], partition: Optional[int]) -> RecordFuture:
        # Held records go first even once the topic is known: the send loop moves them on its next turn,
        # and a record appended directly before that would overtake them.
        held = self._holding.get(topic)
        if held is None:
            held = self._holding[topic] = _Held(time.monotonic(), _HeldOutcome(asyncio.get_running_loop(), topic))
        held.add_row(record, partition)
        held.count += 1
        self._wake.set()
        return _handle((held.outcome, held.count - 1))

    def _append(self, topic: str, partition: int, record: Tuple[Any, ...]) -> RecordFuture:
        """Append ``record`` to the partition's open batch (a new one if it is full); returns its handle."""
        tp = (topic, partition)
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        size = _RECORD_OVERHEAD + len(record[0] or b"") + len(record[1] or b"")
        batch = queue[-1] if queue else None
        if batch is None or batch.attempts or batch.size + size > self.batch_size and batch.values:
            seq = self._batch_seq.get(tp, 0)
            self._batch_seq[tp] = seq + 1
            batch = _Batch(topic, partition, seq, time.monotonic())
            queue.append(batch)
            if self._sticky is not None and len(queue) > 1:
                self._sticky.batch_closed(topic, partition, self.cluster.partitions.get(topic, 1))
            self._wake.set()
        index = len(batch.timestamps)
        if record[0] is None and not record[3] and batch.keys is None and batch.headers is None:
            batch.values.append(record[1])
            batch.timestamps.append(record[2])
        else:
            batch.append(*record)
        batch.size += size
        if batch.size >= self.batch_size or not self.linger:
            self._wake.set()
        return _handle((batch, index))

    # ---------------------------------------------------------------- the send loop

    async def _send_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            self._woken = False
            now = time.monotonic()
            self._release_held(now)
            deadline = self._expire(now)
            if self._reset_needed:
                # nothing is sent under the old producer id/epoch any more; the new one is asked for once
                # every request in flight has come back
                if self._reset_task is None and not self._in_flight:
                    self._reset_task = asyncio.ensure_future(self._reset_producer_id())
            else:
                deadline = _min_deadline(deadline, self._drain_ready(now))
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
                if now - self._holding[topic].since <= self.max_block:
                    continue
            held = self._holding.pop(topic)
            if count is None:
                error = ClientTimeoutError(
                    f"no metadata for topic {topic!r} within {self.max_block * 1000:.0f} ms (max_block_ms)"
                )
                held.outcome.fail(error)
                self._settled(held.count)
                continue
            if held.rows is None:
                self._release_columns(topic, count, held)
                continue
            for index, (record, partition) in enumerate(held.rows):
                if partition is None:
                    partition = self._partitioner(topic, record[0], count)
                batch, at = self._append(topic, partition, record)
                held.outcome.place(index, index + 1, batch, at)

    def _release_columns(self, topic: str, count: int, held: _Held) -> None:
        """Move held keyless records into batches a slice at a time, each batch filled as :meth:`_append`
        fills it (to ``batch_size``), on the partition the partitioner names for it."""
        ends = list(accumulate(held.sizes))
        n = len(ends)
        i = 0
        while i < n:
            partition = self._partitioner(topic, None, count)
            tp = (topic, partition)
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = deque()
            before = ends[i - 1] if i else 0
            batch = queue[-1] if queue else None
            j = i
            if batch is not None and not batch.attempts:
                j = bisect_right(ends, before + self.batch_size - batch.size, i)
                if j == i and not batch.values:
                    j = i + 1
            if j == i:
                seq = self._batch_seq.get(tp, 0)
                self._batch_seq[tp] = seq + 1
                batch = _Batch(topic, partition, seq, time.monotonic())
                queue.append(batch)
                if self._sticky is not None and len(queue) > 1:
                    self._sticky.batch_closed(topic, partition, count)
                j = max(bisect_right(ends, before + self.batch_size - batch.size, i), i + 1)
            assert batch is not None
            held.outcome.place(i, j, batch, len(batch.timestamps))
            batch.extend(None, held.values, held.timestamps, None, i, j)
            batch.size += ends[j - 1] - before
            i = j
        self._wake.set()

    def _expire(self, now: float) -> Optional[float]:
        """Fail the batches whose ``delivery_timeout_ms`` has passed, queued or in flight; returns the next
        deadline the loop must wake for (a batch's expiry or a held topic's ``max_block_ms``)."""
        deadline: Optional[float] = None
        for held in self._holding.values():
            deadline = _earliest(deadline, held.since + self.max_block + 0.001)
        for queue in self._queues.values():
            # a partition's batches are queued in creation order, so only heads can have expired
            while queue and queue[0].opened + self.delivery_timeout <= now:
                batch = queue.popleft()
                self._fail_batch(batch, self._expiry_error(batch, now))
            if queue:
                deadline = _earliest(deadline, queue[0].opened + self.delivery_timeout)
        for batch in list(self._in_flight):
            if batch.done:
                continue
            if batch.opened + self.delivery_timeout <= now:
                self._fail_batch(batch, self._expiry_error(batch, now))
            else:
                deadline = _earliest(deadline, batch.opened + self.delivery_timeout)
        return deadline

    def _expiry_error(self, batch: _Batch, now: float) -> ClientTimeoutError:
        cause = f"; last error: {batch.last_error}" if batch.last_error is not None else ""
        return ClientTimeoutError(
            f"{len(batch.values)} record(s) for {batch.topic}[{batch.partition}] expired: "
            f"{(now - batch.opened) * 1000:.0f} ms since the batch was created, delivery_timeout_ms is "
            f"{self.delivery_timeout * 1000:.0f} ({batch.attempts} attempt(s){cause})"
        )

    async def _reset_producer_id(self) -> None:
        """Take a new producer id/epoch (module docstring: recovery) and renumber the queued batches."""
        try:
            conn = await self.cluster.connection(None)
            version = conn.version(_INIT_PRODUCER_ID)
            request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
            if version >= 3:  # KIP-360: name the current id/epoch; the broker may bump its epoch
                request.producer_id, request.producer_epoch = self._producer_id, self._producer_epoch
            response = await conn.request(request, version)
            assert isinstance(response, InitProducerIdResponse)
            if response.error_code != _C.NONE and version >= 3:
                # the broker refuses the named pair (fenced, forgotten): a fresh id serves as well
                response = await conn.request(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version
                )
                assert isinstance(response, InitProducerIdResponse)
            if response.error_code != _C.NONE:
                raise error_class(response.error_code)(f"InitProducerId from {conn.address} failed")
        except (KprotoError, OSError):
            # tried again after retry_backoff_ms; the queued batches expire meanwhile if it takes too long
            await asyncio.sleep(self.retry_backoff)
            return
        finally:
            self._reset_task = None
            self._wake.set()
        self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
        self._next_sequence.clear()
        for queue in self._queues.values():
            for batch in queue:
                if batch.base_sequence >= 0:
                    batch.base_sequence = -1
                    batch.encoded = None
        self._reset_needed = False
        self.producer_id_resets += 1

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
            if self._node_in_flight.get(node, 0) >= self.max_in_flight or node in self._connecting:
                continue
            if not self.cluster.is_open(node):
                # One request waits for the connection; the rest wait here.  Requests written in the order
                # they were made is what keeps a partition's batches in order, and tasks that wait for the
                # same connection do not resume in the order they were created (one made after it opened
                # would write first).
                self._connecting.add(node)
            for batch in batches:
                tp = (batch.topic, batch.partition)
                self._queues[tp].popleft()
                self._in_flight.add(batch)
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
                try:
                    conn = await self.cluster.connection(node)
                finally:
                    self._connecting.discard(node)
                    self._wake.set()
                request = self._request(conn, batches)
                if self.acks == 0:
                    await conn.send_one_way(request)
                    for batch in batches:
                        self._complete(batch, -1)
                    return
                try:
                    response = await conn.request(request)
                except RequestTimeoutError as exc:
                    # no answer in time: the connection closed itself (its order can no longer be trusted),
                    # and everything in flight on it is retried (a timed-out batch may have been written)
                    self.cluster.forget_connection(conn)
                    for batch in batches:
                        self._failed(batch, _C.REQUEST_TIMED_OUT, exc)
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
                self._in_flight.discard(batch)
            self._wake.set()

    def _request(self, conn: Connection, batches: List[_Batch]) -> ProduceRequest:
        version = conn.version(_PRODUCE)
        Topic = ProduceRequest.TopicProduceData
        Partition = Topic.PartitionProduceData
        topics: Dict[str, List[Any]] = {}
        for batch in batches:
            topics.setdefault(batch.topic, []).append(
                Partition(index=batch.partition, records=RecordSet(self._encode(batch, version)))
            )
        request = ProduceRequest(
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[Topic(name=t, partition_data=ps) for t, ps in topics.items()],
        )
        return request

    def _encode(self, batch: _Batch, version: int) -> bytes:
        if batch.encoded is not None and batch.encoded[0] == version:
            return batch.encoded[1]
        if version >= 3:
            if self.idempotent and batch.base_sequence < 0:
                tp = (batch.topic, batch.partition)
                batch.base_sequence = self._next_sequence.get(tp, 0)
                self._next_sequence[tp] = (batch.base_sequence + len(batch.values)) & 0x7FFFFFFF
            options: Dict[str, Any] = dict(
                codec=self.compression,
                producer_id=self._producer_id,
                producer_epoch=self._producer_epoch,
                base_sequence=batch.base_sequence,
            )
            try:
                data = encode_record_batch_columns(
                    batch.values, keys=batch.keys, timestamps=batch.timestamps, headers=batch.headers, **options
                )
            except EncodeError:
                # the columns take bytes only; the row encoder also takes other bytes-like objects, and says
                # what is wrong with anything else
                data = encode_record_batch(_rows(batch), **options)
        else:
            if batch.headers is not None and any(batch.headers):
                raise KprotoError(f"record headers need Produce v3 (Kafka 0.11); this broker speaks v{version}")
            if self.compression == "zstd":
                raise KprotoError(f"zstd needs Produce v7 (Kafka 2.1); this broker speaks v{version}")
            data = encode_message_set(
                [r[:3] for r in _rows(batch)], magic=1 if version == 2 else 0, codec=self.compression
            )
        batch.encoded = (version, data)
        return data

    # ---------------------------------------------------------------- outcomes

    def _complete(self, batch: _Batch, base_offset: int) -> None:
        if batch.done:
            return  # expired while in flight: its records already failed
        base = base_offset if base_offset >= 0 else -1
        timestamps = batch.timestamps
        for at, share in batch.slices:
            offset = base + at if base >= 0 else -1
            share.group.acknowledged((share.start, share.count, batch.topic, batch.partition, offset, timestamps[at]))
        batch.succeed(base)  # the records' handles read their metadata from the batch when asked
        self._settled(len(timestamps))
        self._release(batch)

    def _failed(self, batch: _Batch, code: int, cause: Optional[BaseException]) -> None:
        if batch.done:
            return
        error = error_class(code)(f"{batch.topic}[{batch.partition}]" + (f": {cause}" if cause else ""))
        batch.last_error = error
        retriable = error.retriable or code in _RETRIABLE_ALWAYS or code == _C.NETWORK_EXCEPTION
        if self.idempotent and code in _RESET_CODES:
            self._reset_needed = True  # the broker does not know this id/epoch: take a new one, then retry
            retriable = True
        now = time.monotonic()
        if batch.opened + self.delivery_timeout <= now:
            self._fail_batch(batch, self._expiry_error(batch, now))
            return
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
        if batch.done:
            return
        if self.idempotent and batch.base_sequence >= 0:
            # its sequences may or may not have reached the broker: every later batch would be out of order
            self._reset_needed = True
        for _, share in batch.slices:
            share.group.failed(error)
        batch.fail(error)
        self._settled(len(batch.timestamps))
        self._release(batch)

    @staticmethod
    def _release(batch: _Batch) -> None:
        """Drop what a settled batch no longer needs: its handles keep it (for its timestamps) as long as
        the caller keeps them."""
        batch.values, batch.keys, batch.headers, batch.encoded, batch.slices = [], None, None, None, []

    def _settled(self, n: int) -> None:
        self._buffered -= n
        if self._buffered < self.max_buffered_records:
            self._room.set()
        if self._buffered == 0:
            self._idle.set()


def _column(column: Any, name: str) -> Sequence[Any]:
    """A ``send_batch`` column as a sequence: pyarrow arrays give Python objects, numpy arrays a list."""
    if hasattr(column, "to_pylist"):  # pyarrow Array / ChunkedArray
        return column.to_pylist()  # type: ignore[no-any-return]
    if hasattr(column, "tolist"):  # numpy
        return column.tolist()  # type: ignore[no-any-return]
    if isinstance(column, (bytes, str)):
        raise InvalidRecordError(f"send_batch(): {name} must be a column of records, not one {type(column).__name__}")
    return column if isinstance(column, (list, tuple)) else list(column)


def _lengths(column: Sequence[Any], name: str) -> List[int]:
    """The lengths of a column of ``bytes``/``None``; :class:`InvalidRecordError` names the first other."""
    kinds = set(map(type, column))
    if kinds <= _BYTES:
        return list(map(len, column))
    if kinds <= _BYTES_OR_NONE:
        return [len(v) if v is not None else 0 for v in column]
    i, bad = next((i, v) for i, v in enumerate(column) if v is not None and type(v) is not bytes)
    raise InvalidRecordError(
        f"send_batch(): record {i}: the {name} is {type(bad).__name__}, not bytes or None", index=i
    )


_BYTES = {bytes}
_BYTES_OR_NONE = {bytes, type(None)}


def _headers_size(headers: Any, index: Optional[int]) -> int:
    where = f"record {index}: " if index is not None else ""
    size = 0
    try:
        for hkey, hvalue in headers:
            if type(hkey) is not str or (hvalue is not None and type(hvalue) is not bytes):
                raise InvalidRecordError(
                    f"{where}a header must be a (str, bytes | None) pair, not "
                    f"({type(hkey).__name__}, {type(hvalue).__name__})",
                    index=index,
                )
            size += len(hkey.encode("utf-8")) + (len(hvalue) if hvalue is not None else 0) + 10
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InvalidRecordError):
            raise
        raise InvalidRecordError(f"{where}headers must be (str, bytes | None) pairs: {exc}", index=index) from None
    return size


def _rows(batch: _Batch) -> List[Tuple[Optional[bytes], Optional[bytes], int, Headers]]:
    """A batch's records as (key, value, timestamp, headers) rows, for the row encoders."""
    n = len(batch.values)
    keys = batch.keys if batch.keys is not None else repeat(None, n)
    headers = batch.headers if batch.headers is not None else repeat(None, n)
    return [(k, v, t, h or ()) for k, v, t, h in zip(keys, batch.values, batch.timestamps, headers)]


def _earliest(a: Optional[float], b: float) -> float:
    return b if a is None else min(a, b)


def _min_deadline(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a if b is None else _earliest(a, b)
