"""One partition's log in memory: magic 2 record batches as produced, with offset, time and producer state.

The log is a list of record batches (one bytes object each: appending never copies the log, and a
read joins the batches it returns), each exactly as its producer wrote it except for the base offset (and, on a
LogAppendTime topic, the max timestamp, attributes and CRC) patched in place by
:func:`~kproto.broker.batches.patch_batch`.  Per batch the log keeps its first and last offset, byte
position and max timestamp; the running maximum of those timestamps is the *time index* that
ListOffsets searches by timestamp (then one batch is decoded to find the record).

A read from an offset starts at the batch that holds it -- a whole batch even when the offset is inside
it; consumers skip records below their fetch offset -- and stops after ``max_bytes``, which may cut
the last batch (the partial trailing batch real brokers send, which clients drop).  A reader that
needs magic 0/1 (Fetch v0-v3) gets each batch down-converted by :mod:`kproto.broker.conversion`; the
results are cached per (batch index, magic, first offset) up to :data:`CONVERSION_CACHE_BYTES`.

Appends are all-or-nothing: a request's batches are checked (headers, producer sequences) before the
first byte is added.  The log never shrinks: ``log_start_offset`` stays 0.

Transactions (see :mod:`kproto.broker.transactions`): the log remembers where each producer's open
transaction began -- the oldest is the last stable offset -- and, when a transaction is aborted, its
(producer id, first offset, marker offset) for read_committed fetches.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from kproto import ErrorCode
from kproto.broker.batches import BatchHeader, patch_batch
from kproto.broker.conversion import downconvert_batch
from kproto.broker.producers import PartitionProducers, ProducerIds
from kproto.records import decode_records, encode_control_batch

__all__ = ["CONVERSION_CACHE_BYTES", "PartitionLog"]

#: Bytes of down-converted batches one partition keeps for old consumers reading the same data again.
CONVERSION_CACHE_BYTES = 8 * 1024 * 1024
_BASE_OFFSET = struct.Struct(">q")


class PartitionLog:
    """The batches of one partition; offsets start at 0 and the high watermark is the next offset."""

    def __init__(self, *, log_append_time: bool = False) -> None:
        self._batches: List[bytes] = []
        self._size = 0
        self._first_offsets: List[int] = []
        self._last_offsets: List[int] = []
        self._max_timestamps: List[int] = []
        self._time_index: List[int] = []  # running max of _max_timestamps: sorted, so bisectable
        self._converted: "OrderedDict[Tuple[int, int, int], bytes]" = OrderedDict()
        self._converted_bytes = 0
        #: Whether the topic stamps batches with the broker's time (``message.timestamp.type``).
        self.log_append_time = log_append_time
        self.producers = PartitionProducers()
        self._open_transactions: Dict[int, int] = {}  # producer id -> first offset of its open transaction
        #: (producer id, first offset, marker offset) of each aborted transaction, in marker order.
        self._aborted: List[Tuple[int, int, int]] = []
        self.log_start_offset = 0
        self.high_watermark = 0

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, or the high watermark if none is open:
        what read_committed consumers may read up to."""
        return min(self._open_transactions.values(), default=self.high_watermark)

    # ---------------------------------------------------------------- appending

    def append(
        self, data: Union[bytes, bytearray], headers: Sequence[BatchHeader], producer_ids: ProducerIds, now_ms: int
    ) -> Tuple[ErrorCode, int]:
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
                1 for h in headers if h.producer_id >= 0
            ):
                return ErrorCode.INVALID_RECORD, -1  # one producer's batches in one request: only one is checkable
        stamp = now_ms if self.log_append_time else -1
        first = offset = self.high_watermark
        if len(headers) == 1 and stamp < 0:
            # The usual case: one copy, the base offset written in front of the rest.
            pieces = [_BASE_OFFSET.pack(offset) + bytes(memoryview(data)[8:])]
        else:
            buf = bytearray(data)
            for header in headers:
                patch_batch(buf, header, offset, stamp)
                offset += header.last_offset_delta + 1
            pieces = [bytes(buf[h.position : h.position + h.size]) for h in headers]
            offset = first
        for header, piece in zip(headers, pieces):
            last = offset + header.last_offset_delta
            self._batches.append(piece)
            self._size += len(piece)
            self._first_offsets.append(offset)
            self._last_offsets.append(last)
            max_ts = stamp if stamp >= 0 else header.max_timestamp
            self._max_timestamps.append(max_ts)
            self._time_index.append(max(max_ts, self._time_index[-1]) if self._time_index else max_ts)
            self.producers.record(header, offset, producer_ids)
            if header.transactional:
                self._open_transactions.setdefault(header.producer_id, offset)
            offset = last + 1
        self.high_watermark = offset
        return ErrorCode.NONE, first

    def end_transaction(self, producer_id: int, epoch: int, commit: bool, now_ms: int) -> int:
        """Append the COMMIT or ABORT marker of ``producer_id``'s transaction; returns its offset."""
        offset = self.high_watermark
        marker = encode_control_batch(
            commit, producer_id=producer_id, producer_epoch=epoch, base_offset=offset, timestamp=now_ms
        )
        first = self._open_transactions.pop(producer_id, None)
        if not commit and first is not None:
            self._aborted.append((producer_id, first, offset))
        self._batches.append(marker)
        self._size += len(marker)
        self._first_offsets.append(offset)
        self._last_offsets.append(offset)
        self._max_timestamps.append(now_ms)
        self._time_index.append(max(now_ms, self._time_index[-1]) if self._time_index else now_ms)
        self.high_watermark = offset + 1
        return offset

    def aborted_transactions(self, start: int, end: int) -> List[Tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in [start, end)."""
        return [(pid, first) for pid, first, last in self._aborted if last >= start and first < end]

    # ---------------------------------------------------------------- reading

    def in_range(self, offset: int) -> bool:
        """Whether a fetch may start at ``offset`` (the high watermark itself is allowed: nothing yet)."""
        return self.log_start_offset <= offset <= self.high_watermark

    def read(
        self, offset: int, max_bytes: int, *, magic: int = 2, first_whole_limit: int = 0, upto: Optional[int] = None
    ) -> Union[bytes, ErrorCode]:
        """At most ``max_bytes`` of the log from the batch holding ``offset``, in format ``magic`` (empty at
        the end), and no batch starting at or past ``upto`` (read_committed: the last stable offset).
        A batch that cannot be down-converted (zstd to magic 0/1) is its error code, or ends the read.
        The first batch is returned whole when it alone is up to ``first_whole_limit`` bytes
        (Fetch v3+ lets a consumer progress past a batch larger than its limits)."""
        index = bisect_left(self._last_offsets, offset)
        if index == len(self._last_offsets):
            return b""
        pieces: List[bytes] = []
        total = 0
        stop = len(self._batches) if upto is None else bisect_left(self._first_offsets, upto)
        while index < stop and (total < max_bytes or (not pieces and first_whole_limit > 0)):
            piece: Union[bytes, ErrorCode]
            if magic == 2:
                piece = self._batches[index]
            else:
                piece = self._downconverted(index, magic, offset)
            index += 1
            if isinstance(piece, ErrorCode):
                if pieces:
                    break  # serve what converted; the error comes with the next fetch
                return piece
            if not piece:
                continue  # only control records, or none at or past ``offset``
            if not pieces and len(piece) <= first_whole_limit:
                max_bytes = max(max_bytes, len(piece))
            pieces.append(piece)
            total += len(piece)
        if len(pieces) == 1 and total <= max_bytes:
            return pieces[0]
        return b"".join(pieces)[: max(max_bytes, 0)]

    def _downconverted(self, index: int, magic: int, offset: int) -> Union[bytes, ErrorCode]:
        first = max(offset, self._first_offsets[index])
        key = (index, magic, first)
        cached = self._converted.get(key)
        if cached is not None:
            self._converted.move_to_end(key)
            return cached
        converted = downconvert_batch(self._batches[index], magic, first)
        if isinstance(converted, bytes) and len(converted) <= CONVERSION_CACHE_BYTES:
            self._converted[key] = converted
            self._converted_bytes += len(converted)
            while self._converted_bytes > CONVERSION_CACHE_BYTES:
                _, dropped = self._converted.popitem(last=False)
                self._converted_bytes -= len(dropped)
        return converted

    def batches(self) -> bytes:
        """Every stored batch (what a Fetch from offset 0 without limits would return)."""
        return b"".join(self._batches)

    # ---------------------------------------------------------------- the time index

    def offset_for_timestamp(self, timestamp: int) -> Optional[Tuple[int, int]]:
        """(timestamp, offset) of the first record whose timestamp is at least ``timestamp``, or None."""
        index = bisect_left(self._time_index, timestamp)
        # The running max first reaches ``timestamp`` at batch ``index``: earlier batches hold no such record.
        while index < len(self._batches):
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

    def _records(self, index: int) -> List[Any]:
        return list(decode_records(self._batches[index]))
