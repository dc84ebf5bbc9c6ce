"""Magic 2 record batches as the broker appends them: validated from their headers, patched in place.

Why not decode and re-encode: a produced batch is already in the form the log keeps and consumers
read.  Its CRC-32C covers everything from the attributes to the end, but not the first 17 bytes, so the
broker can give it its offsets by overwriting ``baseOffset`` (bytes 0-7) without touching the CRC --
what Kafka's log does.  Only a LogAppendTime topic changes covered bytes (attributes and
``maxTimestamp``), and then the CRC is recomputed with the backend's CRC-32C, once per batch.

Validation reads headers only: sizes, magic, CRC-32C, record count against ``lastOffsetDelta``, codec,
no control batches from clients.  An uncompressed batch is also walked by the backend's decoder (no
record re-encoded) so that its records are well formed and their count and size agree, as Kafka
iterates them; per-record offset deltas are not compared.  A compressed batch is not decompressed -- its header
already says how many records and offsets it holds, and the CRC vouches that the client wrote it so.
The layout is in docs/records.md; which Kafka error answers which fault is in docs/broker-storage.md.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import List, Union

from kproto import ErrorCode
from kproto._backend import records_impl
from kproto.errors import KprotoError
from kproto.records.format import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, CODEC_MASK, CODEC_ZSTD

__all__ = ["BATCH_HEADER_SIZE", "BatchHeader", "patch_batch", "scan_batches"]

#: Bytes of a magic 2 batch header, up to and including the record count.
BATCH_HEADER_SIZE = 61
#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
#: maxTimestamp, producerId, producerEpoch, baseSequence, recordCount.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_MAGIC_AT = 16
_CRC_START = 21  # attributes: the first byte the CRC covers
_MAX_TIMESTAMP = struct.Struct(">q")
_ATTRIBUTES = struct.Struct(">H")
_CRC = struct.Struct(">I")
_LOG_OVERHEAD = 12  # baseOffset + batchLength


@dataclass(frozen=True)
class BatchHeader:
    """What the broker needs from one batch's header, and where the batch lies in its buffer."""

    position: int
    size: int  # whole batch, log overhead included
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (sequences wrap from 2**31 - 1 to 0)."""
        return (self.base_sequence + self.count - 1) % 2**31


def scan_batches(
    data: Union[bytes, bytearray, memoryview], *, message_max_bytes: int, zstd_allowed: bool = True
) -> Union[List[BatchHeader], ErrorCode]:
    """The headers of the magic 2 batches filling ``data`` exactly, or the Kafka error that rejects them.

    Nothing is modified.  ``data`` must hold whole batches only: a truncated one is CORRUPT_MESSAGE (a
    producer never sends a partial batch).  ``zstd_allowed`` is False for Produce below v7.
    """
    headers: List[BatchHeader] = []
    pos, end = 0, len(data)
    crc32c = records_impl.crc32c
    view = memoryview(data)
    try:
        while pos < end:
            if end - pos > _MAGIC_AT and data[pos + _MAGIC_AT] != 2:
                return ErrorCode.INVALID_RECORD  # a message set where Produce v3+ needs batches
            if end - pos < BATCH_HEADER_SIZE:
                return ErrorCode.CORRUPT_MESSAGE
            (_, length, _, magic, crc, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq, count) = (
                _HEADER.unpack_from(data, pos)
            )
            size = _LOG_OVERHEAD + length
            if size < BATCH_HEADER_SIZE or pos + size > end:
                return ErrorCode.CORRUPT_MESSAGE
            if size > message_max_bytes:
                return ErrorCode.MESSAGE_TOO_LARGE
            if crc32c(view[pos + _CRC_START : pos + size]) != crc:
                return ErrorCode.CORRUPT_MESSAGE
            codec = attributes & CODEC_MASK
            if codec > CODEC_ZSTD:
                return ErrorCode.CORRUPT_MESSAGE
            if codec == CODEC_ZSTD and not zstd_allowed:
                return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            if count < 1 or last_delta != count - 1 or attributes & ATTR_CONTROL:
                return ErrorCode.INVALID_RECORD
            if not codec and not _records_fill(data if size == end else view[pos : pos + size], count):
                return ErrorCode.CORRUPT_MESSAGE
            headers.append(BatchHeader(pos, size, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq, count))
            pos += size
    finally:
        view.release()
    return headers


def _records_fill(view: Union[bytes, bytearray, memoryview], count: int) -> bool:
    """Whether exactly ``count`` well-formed records fill the uncompressed batch in ``view`` (the whole
    buffer when it is one batch, the usual Produce: a slice would be copied first).

    The backend's decoder walks them (in C when compiled; no record is re-encoded, and the CRC was
    checked already); its limit is the batch's own size, so nothing larger is ever allocated.
    """
    try:
        return len(records_impl.decode_records(view, False, len(view))) == count
    except KprotoError:
        return False


def patch_batch(buf: bytearray, header: BatchHeader, base_offset: int, log_append_time: int) -> None:
    """Give the batch at ``header.position`` in ``buf`` its offsets; with ``log_append_time`` >= 0 also mark
    it LogAppendTime with that max timestamp and recompute its CRC-32C."""
    pos = header.position
    struct.pack_into(">q", buf, pos, base_offset)
    if log_append_time >= 0:
        _ATTRIBUTES.pack_into(buf, pos + 21, (header.attributes | ATTR_TIMESTAMP_TYPE) & 0xFFFF)
        _MAX_TIMESTAMP.pack_into(buf, pos + 35, log_append_time)
        with memoryview(buf) as view:
            crc = records_impl.crc32c(view[pos + _CRC_START : pos + header.size])
        _CRC.pack_into(buf, pos + 17, crc)
