"""The per-record handle the producer returns: one record's share of its batch's single outcome.

Why not an :class:`asyncio.Future` per record: making one, and later settling it, is a Python-level cost
paid for every record even when nobody looks at it (most callers look at a few, or at none and call
``flush``).  A batch instead settles once -- a base offset or an error -- and a :class:`RecordFuture` is
the pair (its batch, its index), made without running Python code; the record's :class:`RecordMetadata`
(offset = base offset + index) is made only when :meth:`RecordFuture.result` is called.

A :class:`RecordFuture` behaves as an asyncio future for everything asyncio does with one: ``await``,
:func:`asyncio.gather`, :func:`asyncio.wait`, :func:`asyncio.wait_for`, :func:`asyncio.as_completed`,
``loop.run_until_complete`` all take it as is (:func:`asyncio.isfuture` is true for it), and
``add_done_callback`` callbacks receive the handle itself, scheduled on the loop as a future's are.
``cancel()`` cancels the handle only: the record is still sent (it cannot be taken back out of its batch),
but whoever waits on the handle stops waiting, with :class:`asyncio.CancelledError`.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, List, NamedTuple, Optional, Set, Tuple

__all__ = ["RecordFuture", "RecordMetadata"]

Callback = Callable[["RecordFuture"], object]


class RecordMetadata(NamedTuple):
    """Where a record was written: ``offset`` is -1 with ``acks=0`` (the broker does not say).  A named
    tuple: the producer makes one per acknowledged record, and a tuple is made without running Python
    code."""

    topic: str
    partition: int
    offset: int
    timestamp: int

    def __repr__(self) -> str:
        return f"RecordMetadata({self.topic!r}, {self.partition}, offset={self.offset})"


_Watcher = Tuple[Callback, Any, "RecordFuture"]  # (callback, its context, the handle it was added on)


class _Outcome:
    """What a set of records settles to, once: ``base_offset`` (the first record's offset, -1 when the
    broker does not say) or ``error``.  The producer's batches are outcomes.  ``partition`` is known once
    it is settled."""

    __slots__ = ("loop", "topic", "partition", "timestamps", "done", "base_offset", "error", "_watchers", "_cancelled")

    def __init__(self, loop: asyncio.AbstractEventLoop, topic: str, partition: int, timestamps: List[int]) -> None:
        self.loop = loop
        self.topic = topic
        self.partition = partition
        self.timestamps = timestamps
        self.done = False
        self.base_offset = -1
        self.error: Optional[BaseException] = None
        #: index -> the done-callbacks of that record (made when the first is added)
        self._watchers: Optional[Dict[int, List[_Watcher]]] = None
        #: the indexes whose handle was cancelled
        self._cancelled: Optional[Set[int]] = None

    def target(self, index: int) -> Tuple["_Outcome", int]:
        """Where record ``index`` is settled: here."""
        return self, index

    def succeed(self, base_offset: int) -> None:
        self.done = True
        self.base_offset = base_offset
        self._notify()

    def fail(self, error: BaseException) -> None:
        self.done = True
        self.error = error
        self._notify()

    def _notify(self) -> None:
        watchers, self._watchers = self._watchers, None
        if watchers:
            for callbacks in watchers.values():
                self._schedule(callbacks)

    def _schedule(self, callbacks: List[_Watcher]) -> None:
        for fn, context, handle in callbacks:
            self.loop.call_soon(fn, handle, context=context)


class _HeldOutcome(_Outcome):
    """The records of one topic that wait for its metadata, in arrival order.  They join batches a run at
    a time (:meth:`place`); a placed record is settled by its batch, the others fail here if they never
    join one."""

    __slots__ = ("_starts", "_places")

    def __init__(self, loop: asyncio.AbstractEventLoop, topic: str) -> None:
        super().__init__(loop, topic, -1, [])
        self._starts: List[int] = []
        self._places: List[Tuple[int, _Outcome, int]] = []  # (end, batch, index of the first record there)

    def target(self, index: int) -> Tuple[_Outcome, int]:
        at = bisect_right(self._starts, index) - 1
        if at >= 0:
            end, outcome, first = self._places[at]
            if index < end:
                return outcome, first + index - self._starts[at]
        return self, index

    def place(self, start: int, end: int, outcome: _Outcome, first: int) -> None:
        """Records ``start:end`` are now ``outcome``'s records from ``first`` on: their callbacks and
        cancellations move there."""
        self._starts.append(start)
        self._places.append((end, outcome, first))
        if self._watchers:
            for index in [i for i in self._watchers if start <= i < end]:
                if outcome._watchers is None:
                    outcome._watchers = {}
                outcome._watchers[first + index - start] = self._watchers.pop(index)
        if self._cancelled:
            for index in [i for i in self._cancelled if start <= i < end]:
                self._cancelled.discard(index)
                if outcome._cancelled is None:
                    outcome._cancelled = set()
                outcome._cancelled.add(first + index - start)


class RecordFuture(Tuple[_Outcome, int]):
    """The outcome of one record given to :meth:`~kproto.client.Producer.send` or
    :meth:`~kproto.client.Producer.send_nowait`: awaitable, and with the methods of an
    :class:`asyncio.Future` (see the module docstring).  ``await handle`` and :meth:`result` give the
    record's :class:`RecordMetadata`, or raise the error its batch failed with."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __new__(cls, items: Tuple[_Outcome, int]) -> "RecordFuture": ...

    #: made without running Python code (tuple's constructor); the producer makes one per record
    _make: Callable[[Tuple[_Outcome, int]], "RecordFuture"]
    _cancel_message = None  # asyncio.gather reads it of a cancelled child

    def done(self) -> bool:
        outcome, index = self[0].target(self[1])
        return outcome.done or (outcome._cancelled is not None and index in outcome._cancelled)

    def cancelled(self) -> bool:
        outcome, index = self[0].target(self[1])
        return outcome._cancelled is not None and index in outcome._cancelled

    def result(self) -> RecordMetadata:
        """The record's metadata; raises its error, :class:`asyncio.CancelledError` once :meth:`cancel`
        has been called, or :class:`asyncio.InvalidStateError` while it is pending."""
        error = self.exception()
        if error is not None:
            raise error
        outcome, index = self[0].target(self[1])
        base = outcome.base_offset
        return RecordMetadata(
            outcome.topic, outcome.partition, base + index if base >= 0 else -1, outcome.timestamps[index]
        )

    def exception(self) -> Optional[BaseException]:
        """The error the record failed with, or None once it is acknowledged (raises as :meth:`result`)."""
        outcome, index = self[0].target(self[1])
        if outcome._cancelled is not None and index in outcome._cancelled:
            raise asyncio.CancelledError()
        if not outcome.done:
            raise asyncio.InvalidStateError("the record is not acknowledged yet")
        return outcome.error

    def add_done_callback(self, fn: Callback, *, context: Any = None) -> None:
        """Call ``fn(handle)`` on the loop once the record is settled (at once, scheduled, if it is)."""
        if self.done():
            self[0].loop.call_soon(fn, self, context=context)
            return
        outcome, index = self[0].target(self[1])
        if outcome._watchers is None:
            outcome._watchers = {}
        outcome._watchers.setdefault(index, []).append((fn, context, self))

    def remove_done_callback(self, fn: Callback) -> int:
        """Remove every ``fn`` added by :meth:`add_done_callback`; returns how many were."""
        outcome, index = self[0].target(self[1])
        callbacks = outcome._watchers.get(index) if outcome._watchers is not None else None
        if not callbacks:
            return 0
        kept = [watcher for watcher in callbacks if watcher[0] != fn]
        removed = len(callbacks) - len(kept)
        callbacks[:] = kept
        return removed

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting for the record (it is still sent); False once it is settled."""
        if self.done():
            return False
        outcome, index = self[0].target(self[1])
        if outcome._cancelled is None:
            outcome._cancelled = set()
        outcome._cancelled.add(index)
        callbacks = outcome._watchers.pop(index, None) if outcome._watchers is not None else None
        if callbacks:
            outcome._schedule(callbacks)
        return True

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self[0].loop

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        return asyncio.CancelledError()

    # asyncio's Task takes any object with this attribute as a future it may wait on: it reads it (True:
    # "yielded by __await__, wait for me") and sets it back to False; nothing needs storing.
    @property
    def _asyncio_future_blocking(self) -> bool:
        return True

    @_asyncio_future_blocking.setter
    def _asyncio_future_blocking(self, value: bool) -> None:
        pass

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            yield self
        return self.result()

    def __repr__(self) -> str:
        outcome, index = self[0].target(self[1])
        state = "pending" if not self.done() else "cancelled" if self.cancelled() else "settled"
        return f"<RecordFuture {outcome.topic}[{outcome.partition}] #{index} {state}>"


RecordFuture._make = partial(tuple.__new__, RecordFuture)  # type: ignore[assignment]
