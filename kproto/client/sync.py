"""Blocking wrappers over the asyncio producer and consumer, for scripts.

Why a thread: the asyncio core needs a running loop for its send loop, heartbeats and fetches, also
while a script sits between calls.  Each wrapper owns one event loop on a daemon thread and forwards
every call to it with :func:`asyncio.run_coroutine_threadsafe`; nothing is reimplemented here.

Example::

    with Producer("localhost:9092") as producer:
        producer.send("events", b"hello").result()
    with Consumer("localhost:9092", group_id="g", topics=["events"]) as consumer:
        for record in consumer.poll(1000):
            print(record.value)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Awaitable, Callable, Iterable, List, Mapping, Optional, TypeVar

from kproto.client import consumer as _consumer
from kproto.client import producer as _producer

__all__ = ["Consumer", "Producer"]

T = TypeVar("T")


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


class Producer:
    """:class:`kproto.client.Producer` (same keywords) driven from blocking code."""

    def __init__(self, bootstrap_servers: Any, **options: Any) -> None:
        self._thread = _LoopThread("kproto-producer")
        try:
            self._producer = self._thread.run(lambda: self._build(bootstrap_servers, options))
        except BaseException:
            self._thread.stop()
            raise

    @staticmethod
    async def _build(bootstrap_servers: Any, options: Mapping[str, Any]) -> _producer.Producer:
        producer = _producer.Producer(bootstrap_servers, **options)
        await producer.start()
        return producer

    def send(
        self, topic: str, value: Optional[bytes], **options: Any
    ) -> "concurrent.futures.Future[_producer.RecordMetadata]":
        """Queue a record; ``.result()`` on the returned future waits for its metadata."""

        async def send() -> _producer.RecordMetadata:
            return await (await self._producer.send(topic, value, **options))

        return asyncio.run_coroutine_threadsafe(send(), self._thread.loop)

    def flush(self, timeout: Optional[float] = None) -> None:
        """As :meth:`kproto.client.Producer.flush` (``ClientTimeoutError`` when ``timeout`` seconds pass)."""
        self._thread.run(lambda: self._producer.flush(timeout))

    def close(self, timeout: Optional[float] = None) -> None:
        """As :meth:`kproto.client.Producer.close`: records unsent after ``timeout`` seconds fail."""
        try:
            self._thread.run(lambda: self._producer.close(timeout))
        finally:
            self._thread.stop()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Consumer:
    """:class:`kproto.client.Consumer` (same keywords) driven from blocking code."""

    def __init__(self, bootstrap_servers: Any, **options: Any) -> None:
        self._thread = _LoopThread("kproto-consumer")
        try:
            self._consumer = self._thread.run(lambda: self._build(bootstrap_servers, options))
        except BaseException:
            self._thread.stop()
            raise

    @staticmethod
    async def _build(bootstrap_servers: Any, options: Mapping[str, Any]) -> _consumer.Consumer:
        consumer = _consumer.Consumer(bootstrap_servers, **options)
        await consumer.start()
        return consumer

    def poll(self, timeout_ms: int = 1000, max_records: int = 500) -> List[_consumer.ConsumerRecord]:
        return self._thread.run(lambda: self._consumer.poll(timeout_ms, max_records))

    def commit(self, offsets: Optional[Mapping[_consumer.TopicPartition, int]] = None) -> None:
        self._thread.run(lambda: self._consumer.commit(offsets))

    def seek(self, tp: _consumer.TopicPartition, offset: int) -> None:
        async def seek() -> None:
            self._consumer.seek(tp, offset)

        self._thread.run(seek)

    def assign(self, partitions: Iterable[_consumer.TopicPartition]) -> None:
        async def assign() -> None:
            self._consumer.assign(partitions)

        self._thread.run(assign)

    def assignment(self) -> List[_consumer.TopicPartition]:
        return self._consumer.assignment()

    def close(self) -> None:
        try:
            self._thread.run(self._consumer.close)
        finally:
            self._thread.stop()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
