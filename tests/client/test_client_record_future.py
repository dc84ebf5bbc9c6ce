"""The per-record handle (RecordFuture) the producer returns, against the mock broker.

One outcome per batch; each record's metadata is derived from it and the record's index when asked for.
What is checked: the offsets and partitions each handle reports, that a failed batch's error reaches every
handle (held records' too), callbacks, and that asyncio's own tools (await, gather, wait, wait_for,
as_completed, cancellation of a waiting task) take the handle as a future.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, TypeVar

import pytest

from kproto import ErrorCode
from kproto.client import Producer, RecordFuture, RecordMetadata
from kproto.testing import MockBroker

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 60))


def test_handles_derive_each_records_metadata_from_its_batch() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 2}) as broker:
            async with Producer(broker.bootstrap_servers, batch_size=500) as producer:
                await producer.send("t", b"warm", partition=1)  # the topic is known: no record is held
                handles = [
                    producer.send_nowait("t", b"%03d" % i, partition=0, timestamp_ms=1000 + i) for i in range(60)
                ]
                keyed = producer.send_nowait("t", b"k", key=b"key", partition=1, headers=[("h", b"1")])
                assert isinstance(handles[0], RecordFuture) and asyncio.isfuture(handles[0])
                assert not handles[0].done() and not handles[0].cancelled()
                with pytest.raises(asyncio.InvalidStateError):
                    handles[0].result()
                await producer.flush()
                assert len({id(h[0]) for h in handles}) > 1  # spread over several batches
                metadata = [h.result() for h in handles]
                assert metadata == [RecordMetadata("t", 0, i, 1000 + i) for i in range(60)]
                assert all(h.done() and h.exception() is None for h in handles)
                assert (await keyed).offset == 1 and keyed.result().partition == 1

    run(main)


def test_a_failed_batch_fails_every_handle_including_held_records() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            broker.inject("Produce", error=ErrorCode.MESSAGE_TOO_LARGE)
            async with Producer(broker.bootstrap_servers, linger_ms=50) as producer:
                assert "t" not in producer.cluster.partitions  # the first records are held for metadata
                held = [producer.send_nowait("t", b"%d" % i) for i in range(3)]
                held_keyed = producer.send_nowait("t", b"k", key=b"a")
                await producer.flush()
                for handle in held + [held_keyed]:
                    error = handle.exception()
                    assert error is not None
                    assert getattr(error, "code", None) == ErrorCode.MESSAGE_TOO_LARGE
                    with pytest.raises(type(error), match=r"t\[0\]"):
                        handle.result()
                    with pytest.raises(type(error)):
                        await handle
                later = [producer.send_nowait("t", b"x"), producer.send_nowait("t", b"y")]
                assert [m.offset for m in await asyncio.gather(*later)] == [0, 1]
                assert later[1].result().partition == 0

    run(main)


def test_callbacks_receive_the_handle_and_asyncio_tools_take_it() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            broker.inject("Produce", delay=0.2)
            async with Producer(broker.bootstrap_servers) as producer:
                seen: List[Any] = []
                handles = [producer.send_nowait("t", b"%d" % i) for i in range(5)]
                for handle in handles:
                    handle.add_done_callback(seen.append)
                dropped = handles[4].add_done_callback
                dropped(seen.append)
                assert handles[4].remove_done_callback(seen.append) == 2
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(handles[0], 0.01)  # the record is still sent
                assert handles[0].cancelled() and handles[0] in seen  # its callback ran on cancel
                done, pending = await asyncio.wait(handles[1:], return_when=asyncio.FIRST_COMPLETED)
                assert handles[1] in done and not pending  # one batch: all settle together
                assert [(await f).offset for f in asyncio.as_completed(handles[1:3])] in ([1, 2], [2, 1])
                await asyncio.sleep(0)
                assert seen == [handles[0]] + handles[1:4]  # callbacks get the handle itself
                assert handles[4] not in seen
                late: List[Any] = []
                handles[1].add_done_callback(late.append)  # settled: scheduled at once
                await asyncio.sleep(0)
                assert late == [handles[1]]
                assert not handles[1].cancel()
                assert (await producer.send_nowait("t", b"z")).offset == 5  # the cancelled record was written

    run(main)


def test_cancelling_a_task_that_awaits_a_handle_leaves_the_batch_alone() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            broker.inject("Produce", delay=0.2)
            async with Producer(broker.bootstrap_servers) as producer:
                first, second = producer.send_nowait("t", b"a"), producer.send_nowait("t", b"b")

                async def wait_for_first() -> RecordMetadata:
                    return await first

                task = asyncio.ensure_future(wait_for_first())
                gathered = asyncio.gather(first, second)
                await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert first.cancelled() and not second.done()  # only the awaited handle was cancelled
                with pytest.raises(asyncio.CancelledError):
                    await gathered  # gather reports a cancelled child as asyncio does
                assert (await second).offset == 1

    run(main)


def test_held_records_keep_their_callbacks_and_cancellation_when_they_join_batches() -> None:
    async def main() -> None:
        async with MockBroker(topics={"t": 1}) as broker:
            async with Producer(broker.bootstrap_servers) as producer:
                assert "t" not in producer.cluster.partitions  # held until the first Metadata answer
                handles = [producer.send_nowait("t", b"%d" % i) for i in range(4)]
                keyed = producer.send_nowait("t", b"k", key=b"a")  # from here on, held as rows
                seen: List[Any] = []
                handles[1].add_done_callback(seen.append)
                keyed.add_done_callback(seen.append)
                assert handles[2].cancel() and handles[2].done() and not handles[3].done()
                await producer.flush()
                await asyncio.sleep(0)
                assert [h.result().offset for h in handles[:2] + handles[3:]] == [0, 1, 3]
                assert handles[2].cancelled() and keyed.result() == RecordMetadata("t", 0, 4, keyed.result().timestamp)
                assert seen == [handles[1], keyed]  # the callbacks got the handles they were added on

    run(main)
