"""Converting between message formats at the broker's edges, as a Kafka 3.x broker does.

The log holds magic 2 record batches only.  A Produce v0-v2 client writes magic 0/1 message sets:
they are validated by :func:`~kproto.broker.append.prepare_append` and then *up-converted* into one
batch (Kafka 3.x has no older on-disk format either).  A Fetch v0-v3 client cannot read magic 2, so
what it fetches is *down-converted*, batch by batch: Fetch v0-v1 gets magic 0, v2-v3 magic 1, the
codec kept (zstd has no older form: UNSUPPORTED_COMPRESSION_TYPE, as Kafka answers), control batches
dropped, records below the fetch offset left out of an uncompressed first batch (a compressed one
stays whole, a wrapper with every record).  Timestamps survive into magic 1;
magic 0 has none, and up-converted magic 0 messages carry -1 (no timestamp), as in Kafka.

Both directions decode and re-encode records with kproto's records API; they are the slow path, taken
only for old clients, and the log caches down-converted batches (see :mod:`kproto.broker.log`).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from kproto import ErrorCode
from kproto.errors import KprotoError
from kproto.records import decode_message_set, decode_records, encode_message_set, encode_record_batch

__all__ = ["FETCH_MAGIC", "downconvert_batch", "fetch_magic", "upconvert_message_set"]

#: The newest message format each Fetch version can read (v4+ reads record batches).
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}


def fetch_magic(version: int) -> int:
    """The message format a Fetch of ``version`` is answered in."""
    return FETCH_MAGIC.get(version, 2)


def upconvert_message_set(message_set: bytes, base_offset: int, *, max_decompressed_size: int) -> Tuple[bytes, int]:
    """A validated magic 0/1 message set as one CreateTime magic 2 batch from ``base_offset``:
    (batch, record count).  The batch takes the codec of the first compressed wrapper (none if there
    is none); a LogAppendTime log stamps it on append like any other batch.
    """
    messages = decode_message_set(message_set, max_decompressed_size=max_decompressed_size)
    codec: Optional[str] = next((m.codec for m in messages if m.codec), None)
    records = [(m.key, m.value, -1 if m.timestamp is None else m.timestamp) for m in messages]
    return encode_record_batch(records, base_offset=base_offset, codec=codec), len(records)


def downconvert_batch(batch: bytes, magic: int, first_offset: int) -> Union[bytes, ErrorCode]:
    """One stored magic 2 batch as a magic ``magic`` message set, from ``first_offset`` on (b"" if none)."""
    try:
        decoded = decode_records(batch)
        # A compressed batch keeps all its records, so the wrapper is whole (its offset is its last
        # record's, as old consumers expect); an uncompressed one starts at the fetch offset (Kafka too).
        records: List[Any] = [
            r for r in decoded if not r.is_control and (r.codec is not None or r.offset >= first_offset)
        ]
    except KprotoError:  # stored batches were validated; a failure here is a broker bug made visible
        return ErrorCode.CORRUPT_MESSAGE
    if not records:
        return b""
    codec = records[0].codec
    if codec == "zstd":
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    log_append = magic == 1 and records[0].timestamp_type == 1
    ts_type = 1 if log_append else 0
    contiguous = records[-1].offset - records[0].offset == len(records) - 1
    if codec is None and not contiguous:
        # Every message keeps its own offset (a batch's offsets may have gaps).
        return b"".join(
            encode_message_set(
                [(r.key, r.value, r.timestamp)], magic=magic, base_offset=r.offset, timestamp_type=ts_type
            )
            for r in records
        )
    return encode_message_set(
        [(r.key, r.value, r.timestamp) for r in records],
        magic=magic,
        codec=codec,
        base_offset=records[0].offset,
        timestamp_type=ts_type,
    )
