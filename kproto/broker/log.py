"""One partition's log in memory: appended message sets and byte-limited reads, as a broker serves them.

The log is one byte string of shallow message-set entries (compressed wrappers stay wrapped) plus, per
entry, its last offset and starting byte position.  A read from an offset starts at the entry that
holds it -- a whole compressed wrapper even when the offset is inside it, so readers must skip inner
messages below the fetch offset (docs/protocol-notes.md, "Message sets the broker handles") -- and stops after ``max_bytes``, which can cut the
last entry: the partial trailing message real brokers send.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import List

from kproto.broker.append import PreparedAppend

__all__ = ["PartitionLog"]


class PartitionLog:
    """The messages of one partition; offsets start at 0 and the high watermark is the next offset."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._last_offsets: List[int] = []
        self._positions: List[int] = []
        self.log_start_offset = 0
        self.high_watermark = 0

    @property
    def size_bytes(self) -> int:
        return len(self._data)

    def append(self, prepared: PreparedAppend) -> int:
        """Append a message set made by :func:`~kproto.broker.append.prepare_append` for this log's
        high watermark; returns its first offset."""
        if prepared.first_offset != self.high_watermark:
            raise ValueError(f"offsets prepared from {prepared.first_offset}, log is at {self.high_watermark}")
        base = len(self._data)
        self._data += prepared.data
        for last_offset, position in prepared.entries:
            self._last_offsets.append(last_offset)
            self._positions.append(base + position)
        self.high_watermark += prepared.count
        return prepared.first_offset

    def in_range(self, offset: int) -> bool:
        """Whether a fetch may start at ``offset`` (the high watermark itself is allowed: nothing yet)."""
        return self.log_start_offset <= offset <= self.high_watermark

    def read(self, offset: int, max_bytes: int) -> bytes:
        """At most ``max_bytes`` of the log from the entry holding ``offset`` (empty at the end)."""
        index = bisect_left(self._last_offsets, offset)
        if index == len(self._last_offsets) or max_bytes <= 0:
            return b""
        start = self._positions[index]
        return bytes(self._data[start:start + max_bytes])

    def first_entry_size(self, offset: int) -> int:
        """Bytes of the entry holding ``offset`` (0 at the end): what a read must return to progress."""
        index = bisect_left(self._last_offsets, offset)
        if index == len(self._last_offsets):
            return 0
        end = self._positions[index + 1] if index + 1 < len(self._positions) else len(self._data)
        return end - self._positions[index]

    def available(self, offset: int) -> int:
        """Bytes a read from ``offset`` could return without a limit."""
        index = bisect_left(self._last_offsets, offset)
        if index == len(self._last_offsets):
            return 0
        return len(self._data) - self._positions[index]
