"""Blocking wrappers over the asyncio producer and consumer, for scripts.

Why a thread: the asyncio core needs a running loop for its send loop, heartbeats and fetches, also
while a script sits between calls.  Each wrapper owns one event loop on a daemon thread and forwards
every call to it with :func:`asyncio.run_coroutine_threadsafe`; nothing is reimplemented here.

Example::

    with Producer("localhost:9092") as producer:
        producer.send("events", b"hello").result()
        producer.send_batch("events", [b"a", b"b"]).result()
    with Consumer("localhost:9092", group_id="g", topics=["events"]) as consumer:
        for record in consumer.poll(1000):
            print(record.value)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Generic, Iterable, List, Mapping, Optional, Sequence, TypeVar

from kproto.client import consumer as _consumer
from kproto.client import producer as _producer

__all__ = ["Consumer", "Producer"]

T = TypeVar("T")
C = TypeVar("C", _producer.Producer, _consumer.Consumer)


class _LoopThread:
    """An event loop running on a daemon thread, and a blocking way to run coroutines on it."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, make: Callable[[], Awaitable[T]], timeout: Optional[float] = None) -> T:
        async def call() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


def _chained(source: "asyncio.Future[T]") -> "concurrent.futures.Future[T]":
    """A thread-safe future settled as ``source`` is (called on ``source``'s loop)."""
    target: "concurrent.futures.Future[T]" = concurrent.futures.Future()
    source.add_done_callback(lambda done: _settle(target, done))
    return target


class _Facade(Generic[C]):
    """The life cycle both facades share: the client is built and started on the loop thread, and closed
    there before the thread stops."""

    _thread_name = "kproto-client"

    def __init__(self, bootstrap_servers: Any, **options: Any) -> None:
        self._thread = _LoopThread(self._thread_name)
        try:
            self._client: C = self._thread.run(lambda: self._build(bootstrap_servers, options))
        except BaseException:
            self._thread.stop()
            raise

    async def _build(self, bootstrap_servers: Any, options: Mapping[str, Any]) -> C:
        raise NotImplementedError

    def _close(self, close: Callable[[], Awaitable[None]]) -> None:
        try:
            self._thread.run(close)
        finally:
            self._thread.stop()

    def close(self) -> None:
        """Close the client, then stop the loop thread."""
        raise NotImplementedError

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Producer(_Facade[_producer.Producer]):
    """:class:`kproto.client.Producer` (same keywords) driven from blocking code."""

    _thread_name = "kproto-producer"

    async def _build(self, bootstrap_servers: Any, options: Mapping[str, Any]) -> _producer.Producer:
        producer = _producer.Producer(bootstrap_servers, **options)
        await producer.start()
        return producer

    def send(
        self, topic: str, value: Optional[bytes], **options: Any
    ) -> "concurrent.futures.Future[_producer.RecordMetadata]":
        """Queue a record; ``.result()`` on the returned future waits for its metadata."""

        async def send() -> _producer.RecordMetadata:
            return await (await self._client.send(topic, value, **options))

        return asyncio.run_coroutine_threadsafe(send(), self._thread.loop)

    def send_nowait(
        self,
        topic: str,
        value: Optional[bytes],
        *,
        key: Optional[bytes] = None,
        headers: Optional[_producer.Headers] = None,
        partition: Optional[int] = None,
        timestamp_ms: Optional[int] = None,
    ) -> "concurrent.futures.Future[_producer.RecordMetadata]":
        """:meth:`kproto.client.Producer.send_nowait` from this thread: hands the record to the loop and
        returns at once, without a coroutine per record.  Where ``send`` would wait for buffer room the
        future fails with :class:`~kproto.client.BufferFullError` (the record is not queued), as it does
        with any other error of ``send_nowait``."""
        target: "concurrent.futures.Future[_producer.RecordMetadata]" = concurrent.futures.Future()

        def queue() -> None:
            try:
                source = self._client.send_nowait(
                    topic, value, key=key, headers=headers, partition=partition, timestamp_ms=timestamp_ms
                )
            except BaseException as exc:
                target.set_exception(exc)
                return
            source.add_done_callback(lambda done: _settle(target, done))

        self._thread.loop.call_soon_threadsafe(queue)
        return target

    def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        headers: Any = None,
        partition: Optional[int] = None,
        timestamp_ms: Optional[int] = None,
    ) -> "concurrent.futures.Future[Sequence[_producer.RecordMetadata]]":
        """:meth:`kproto.client.Producer.send_batch`: blocks until the records are queued (buffer room,
        the topic's metadata) and raises its errors (:class:`~kproto.client.InvalidRecordError` naming the
        record, nothing of the call sent); ``.result()`` on the returned future waits for the metadata of
        every record, in the order given."""

        async def queue() -> "concurrent.futures.Future[Sequence[_producer.RecordMetadata]]":
            source = await self._client.send_batch(topic, values, keys, headers, partition, timestamp_ms)
            return _chained(source)

        return self._thread.run(queue)

    def flush(self, timeout: Optional[float] = None) -> None:
        """As :meth:`kproto.client.Producer.flush` (``ClientTimeoutError`` when ``timeout`` seconds pass)."""
        self._thread.run(lambda: self._client.flush(timeout))

    def close(self, timeout: Optional[float] = None) -> None:
        """As :meth:`kproto.client.Producer.close`: records unsent after ``timeout`` seconds fail."""
        self._close(lambda: self._client.close(timeout))

    def __enter__(self) -> "Producer":
        return self


def _settle(target: "concurrent.futures.Future[Any]", done: "asyncio.Future[Any] | _producer.RecordFuture") -> None:
    if done.cancelled():
        target.cancel()
    elif done.exception() is not None:
        target.set_exception(done.exception())
    else:
        target.set_result(done.result())


class Consumer(_Facade[_consumer.Consumer]):
    """:class:`kproto.client.Consumer` (same keywords) driven from blocking code."""

    _thread_name = "kproto-consumer"

    async def _build(self, bootstrap_servers: Any, options: Mapping[str, Any]) -> _consumer.Consumer:
        consumer = _consumer.Consumer(bootstrap_servers, **options)
        await consumer.start()
        return consumer

    def poll(self, timeout_ms: int = 1000, max_records: int = 500) -> List[_consumer.ConsumerRecord]:
        return self._thread.run(lambda: self._client.poll(timeout_ms, max_records))

    def commit(self, offsets: Optional[Mapping[_consumer.TopicPartition, int]] = None) -> None:
        self._thread.run(lambda: self._client.commit(offsets))

    def seek(self, tp: _consumer.TopicPartition, offset: int) -> None:
        async def seek() -> None:
            self._client.seek(tp, offset)

        self._thread.run(seek)

    def assign(self, partitions: Iterable[_consumer.TopicPartition]) -> None:
        async def assign() -> None:
            self._client.assign(partitions)

        self._thread.run(assign)

    def assignment(self) -> List[_consumer.TopicPartition]:
        return self._client.assignment()

    def close(self) -> None:
        """As :meth:`kproto.client.Consumer.close`."""
        self._close(self._client.close)

    def __enter__(self) -> "Consumer":
        return self
