"""One byte budget shared by every connection of the mock broker: memory for requests in flight.

Why a shared budget
===================

``max_frame_size`` bounds one request (100 MiB by default, Kafka's ``socket.request.max.bytes``), but
not how many of them the broker holds at once: ten clients that each send the first 100 MiB − 1 bytes
of a request and then stall make the broker hold a gigabyte.  Kafka bounds the total with a memory
pool (``queued.max.request.bytes``): a connection that starts a request asks the pool for the request's
whole declared size and is muted -- not read from -- until the pool can give it.

:class:`ByteBudget` is that pool, cooperative and single-threaded (asyncio):

* :meth:`ByteBudget.reserve` waits until ``size`` bytes fit (``used + size <= limit``), in arrival
  order, so a large request is not starved by a stream of small ones.  A request larger than the whole
  budget is still granted once nothing else is reserved, or it could never be served.
* :meth:`ByteBudget.charge` takes bytes without waiting, for a request that arrived whole in one
  read before it could be reserved; such bytes count against later reservations.  Its caller stops
  reading while :attr:`ByteBudget.exhausted`, so uncharged memory stays within one read per connection.
* :meth:`ByteBudget.release` returns bytes and wakes the waiters that now fit.

A reservation is held from the request's first bytes until it has been handled, so the memory of
queued requests counts too.  A sender that never finishes its request keeps its reservation only
until ``request_receive_timeout_ms`` closes its connection.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Deque, Tuple

__all__ = ["ByteBudget"]


class ByteBudget:
    """Bytes of requests held by all connections together; see the module docstring."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a byte budget needs a positive limit")
        self.limit = limit
        self.used = 0
        #: Highest ``used`` seen: what tests and the abuse benchmark read.
        self.peak = 0
        #: Reservations that had to wait for room.
        self.waits = 0
        self._waiters: Deque[Tuple[int, "asyncio.Future[None]"]] = deque()

    @property
    def exhausted(self) -> bool:
        """Whether nothing more fits: readers without a reservation pause."""
        return self.used >= self.limit

    def _fits(self, size: int) -> bool:
        return self.used == 0 or self.used + size <= self.limit

    def _take(self, size: int) -> None:
        self.used += size
        self.peak = max(self.peak, self.used)

    async def reserve(self, size: int) -> None:
        """Wait until ``size`` bytes fit, then take them (first come, first served)."""
        if not self._waiters and self._fits(size):
            self._take(size)
            return
        self.waits += 1
        future: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._waiters.append((size, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(size)  # granted just as the waiter was cancelled: give it back
            else:
                self._waiters.remove((size, future))
                self._wake()
            raise

    async def wait_for_room(self) -> None:
        """Wait until the budget is no longer exhausted (for readers that hold no reservation)."""
        while self.exhausted:
            await self.reserve(1)  # granted once one byte fits, that is once used < limit
            self.release(1)

    def charge(self, size: int) -> None:
        """Take ``size`` bytes without waiting (a request that arrived whole before it was reserved)."""
        self._take(size)

    def release(self, size: int) -> None:
        """Give back ``size`` bytes taken by :meth:`reserve` or :meth:`charge`."""
        self.used -= size
        if self.used < 0:
            raise RuntimeError("byte budget released more than it held")
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            size, future = self._waiters[0]
            if future.done():
                self._waiters.popleft()
                continue
            if not self._fits(size):
                return
            self._waiters.popleft()
            self._take(size)
            future.set_result(None)
