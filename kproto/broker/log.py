"""One partition's log in memory: magic 2 record batches as produced, with offset, time and producer state.

The log is one byte string of record batches, each exactly as its producer wrote it except for the
base offset (and, on a LogAppendTime topic, the max timestamp, attributes and CRC) patched in place by
:func:`~kproto.broker.batches.patch_batch`.  Per batch the log keeps its first and last offset, byte
position and max timestamp; the running maximum of those timestamps is the *time index* that
ListOffsets searches by timestamp (then one batch is decoded to find the record).

A read from an offset starts at the batch that holds it -- a whole batch even when the offset is inside
it; consumers skip records below their fetch offset -- and stops after ``max_bytes``, which may cut
the last batch (the partial trailing batch real brokers send, which clients drop).  A reader that
needs magic 0/1 (Fetch v0-v3) gets each batch down-converted by :mod:`kproto.broker.conversion`; the
results are cached per (batch position, magic, first offset) up to :data:`CONVERSION_CACHE_BYTES`.

Appends are all-or-nothing: a request's batches are checked (headers, producer sequences) before the
first byte is added.  The log never shrinks: ``log_start_offset`` stays 0.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple, Union

from kproto import ErrorCode
from kproto.broker.batches import BatchHeader, patch_batch
from kproto.broker.conversion import downconvert_batch
from kproto.broker.producers import PartitionProducers, ProducerIds
from kproto.records import decode_records

__all__ = ["CONVERSION_CACHE_BYTES", "PartitionLog"]

#: Bytes of down-converted batches one partition keeps for old consumers reading the same data again.
CONVERSION_CACHE_BYTES = 8 * 1024 * 1024


class PartitionLog:
    """The batches of one partition; offsets start at 0 and the high watermark is the next offset."""

    def __init__(self, *, log_append_time: bool = False) -> None:
        self._data = bytearray()
        self._first_offsets: List[int] = []
        self._last_offsets: List[int] = []
        self._positions: List[int] = []
        self._max_timestamps: List[int] = []
        self._time_index: List[int] = []  # running max of _max_timestamps: sorted, so bisectable
        self._converted: "OrderedDict[Tuple[int, int, int], bytes]" = OrderedDict()
        self._converted_bytes = 0
        #: Whether the topic stamps batches with the broker's time (``message.timestamp.type``).
        self.log_append_time = log_append_time
        self.producers = PartitionProducers()
        self.log_start_offset = 0
        self.high_watermark = 0

    @property
    def size_bytes(self) -> int:
        return len(self._data)

    @property
    def last_stable_offset(self) -> int:
        """No transactions are kept open, so every offset below the high watermark is stable."""
        return self.high_watermark

    # ---------------------------------------------------------------- appending

    def append(self, data: Union[bytes, bytearray], headers: Sequence[BatchHeader], producer_ids: ProducerIds,
               now_ms: int) -> Tuple[ErrorCode, int]:
        """Append the batches of ``data`` that :func:`~kproto.broker.batches.scan_batches` vouched for:
        (NONE, first offset) -- the original one for a producer's retry -- or (error, -1), nothing stored."""
        if len(headers) == 1:  # the usual case (always so from Produce v3): one producer check
            seen = self.producers.check(headers[0], producer_ids)
            if isinstance(seen, ErrorCode):
                return seen, -1
            if seen is not None:
                return ErrorCode.NONE, seen
        else:
            for header in headers:
                seen = self.producers.check(header, producer_ids)
                if seen is not None:  # a duplicate inside a multi-batch request is not a clean retry
                    return seen if isinstance(seen, ErrorCode) else ErrorCode.DUPLICATE_SEQUENCE_NUMBER, -1
            if len({h.producer_id for h in headers if h.producer_id >= 0}) < sum(
                    1 for h in headers if h.producer_id >= 0):
                return ErrorCode.INVALID_RECORD, -1  # one producer's batches in one request: only one is checkable
        buf = data if isinstance(data, bytearray) else bytearray(data)
        stamp = now_ms if self.log_append_time else -1
        first = offset = self.high_watermark
        start = len(self._data)
        for header in headers:
            patch_batch(buf, header, offset, stamp)
            last = offset + header.last_offset_delta
            self._first_offsets.append(offset)
            self._last_offsets.append(last)
            self._positions.append(start + header.position)
            max_ts = stamp if stamp >= 0 else header.max_timestamp
            self._max_timestamps.append(max_ts)
            self._time_index.append(max(max_ts, self._time_index[-1]) if self._time_index else max_ts)
            self.producers.record(header, offset, producer_ids)
            offset = last + 1
        self._data += buf
        self.high_watermark = offset
        return ErrorCode.NONE, first

    # ---------------------------------------------------------------- reading

    def in_range(self, offset: int) -> bool:
        """Whether a fetch may start at ``offset`` (the high watermark itself is allowed: nothing yet)."""
        return self.log_start_offset <= offset <= self.high_watermark

    def read(self, offset: int, max_bytes: int, *, magic: int = 2, first_whole_limit: int = 0
             ) -> Union[bytes, ErrorCode]:
        """At most ``max_bytes`` of the log from the batch holding ``offset``, in format ``magic`` (empty at
        the end).  The first batch is returned whole when it alone is up to ``first_whole_limit`` bytes
        (Fetch v3+ lets a consumer progress past a batch larger than its limits)."""
        index = bisect_left(self._last_offsets, offset)
        if index == len(self._last_offsets):
            return b""
        if magic == 2:
            start = self._positions[index]
            limit = max(max_bytes, min(self._batch_end(index) - start, first_whole_limit))
            return bytes(self._data[start:start + max(limit, 0)]) if limit > 0 else b""
        pieces: List[bytes] = []
        total = 0
        while index < len(self._positions) and (total < max_bytes or (not pieces and first_whole_limit > 0)):
            converted = self._downconverted(index, magic, offset)
            index += 1
            if isinstance(converted, ErrorCode):
                if pieces:
                    break  # serve what converted; the error comes with the next fetch
                return converted
            if not converted:
                continue  # only control records, or none at or past ``offset``
            if not pieces and len(converted) <= first_whole_limit:
                max_bytes = max(max_bytes, len(converted))
            pieces.append(converted)
            total += len(converted)
        return b"".join(pieces)[:max(max_bytes, 0)]

    def _batch_end(self, index: int) -> int:
        return self._positions[index + 1] if index + 1 < len(self._positions) else len(self._data)

    def _downconverted(self, index: int, magic: int, offset: int) -> Union[bytes, ErrorCode]:
        first = max(offset, self._first_offsets[index])
        key = (self._positions[index], magic, first)
        cached = self._converted.get(key)
        if cached is not None:
            self._converted.move_to_end(key)
            return cached
        batch = bytes(self._data[self._positions[index]:self._batch_end(index)])
        converted = downconvert_batch(batch, magic, first)
        if isinstance(converted, bytes) and len(converted) <= CONVERSION_CACHE_BYTES:
            self._converted[key] = converted
            self._converted_bytes += len(converted)
            while self._converted_bytes > CONVERSION_CACHE_BYTES:
                _, dropped = self._converted.popitem(last=False)
                self._converted_bytes -= len(dropped)
        return converted

    def batches(self) -> bytes:
        """Every stored batch (what a Fetch from offset 0 without limits would return)."""
        return bytes(self._data)

    # ---------------------------------------------------------------- the time index

    def offset_for_timestamp(self, timestamp: int) -> Optional[Tuple[int, int]]:
        """(timestamp, offset) of the first record whose timestamp is at least ``timestamp``, or None."""
        index = bisect_left(self._time_index, timestamp)
        # The running max first reaches ``timestamp`` at batch ``index``: earlier batches hold no such record.
        while index < len(self._positions):
            for record in self._records(index):
                if record.timestamp >= timestamp and not record.is_control:
                    return record.timestamp, record.offset
            index += 1
        return None

    def max_timestamp(self) -> Optional[Tuple[int, int]]:
        """(timestamp, offset) of the first record carrying the largest timestamp, or None if empty."""
        if not self._time_index:
            return None
        index = bisect_left(self._time_index, self._time_index[-1])
        best = self._time_index[-1]
        for record in self._records(index):
            if record.timestamp == best:
                return record.timestamp, record.offset
        return best, self._first_offsets[index]

    def _records(self, index: int) -> List:
        return list(decode_records(bytes(self._data[self._positions[index]:self._batch_end(index)])))
