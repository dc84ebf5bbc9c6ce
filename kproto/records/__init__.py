"""Kafka records of every era: message sets magic 0 (0.8/0.9) and 1 (0.10), record batches magic 2 (0.11+),
with gzip, snappy, lz4 and zstd.  The formats are described in ``docs/records.md``.

* :func:`decode_records` — any mix of magics, records as objects, batch headers in ``.batches``;
* :func:`encode_record_batch` / :func:`encode_control_batch` — one magic 2 batch;
  :func:`encode_record_batch_columns` — the same batch from columns of keys, values, timestamps, headers;
* :func:`decode_message_set` / :func:`encode_message_set` — magic 0/1 messages as objects;
* :func:`record_rows` — decoded records as a consumer's (topic, partition, offset, ...) rows, in bulk;
* :func:`decode_columns` — bulk decode of any magic into contiguous columns (or a pyarrow RecordBatch);
* :func:`read_segment` — the batches of a Kafka log segment file, torn tail reported;
* :class:`RecordSet` — the raw-bytes value of a ``records`` field in the generated codecs.

The hot loops are compiled (``kproto._fast``) with a pure-Python twin; ``kproto._backend.BACKEND`` says
which one runs.  The backend-bound names load on first use.  Both twins import the codecs
(:mod:`kproto.records.compression`) and result classes (:mod:`kproto.records.decoded`) below them.

A magic 0/1 message decodes to a :class:`LegacyRecord` (Kafka's name for it), a magic 2 record to a
:class:`Record`.  ``kproto.records.Message``, its former name, still works and warns: ``Message`` is
kproto's protocol message base (:class:`kproto.Message`).
"""

import warnings
from typing import TYPE_CHECKING, Any

from kproto.records.decoded import Batch, DecodedRecords, MessageColumns, MessageSet, RecordColumns
from kproto.records.format import DEFAULT_MAX_DECOMPRESSED_SIZE
from kproto.records.record_set import RecordSet

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Batch",
    "DecodedRecords",
    "LegacyRecord",
    "MessageColumns",
    "MessageSet",
    "MessageSetCodec",
    "Record",
    "RecordColumns",
    "RecordSet",
    "Segment",
    "decode_columns",
    "decode_message_set",
    "decode_records",
    "encode_control_batch",
    "encode_message_set",
    "encode_record_batch",
    "encode_record_batch_columns",
    "read_segment",
    "record_rows",
]

if TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from kproto.records.codec import (
        LegacyRecord as LegacyRecord,
        MessageSetCodec as MessageSetCodec,
        Record as Record,
        decode_columns as decode_columns,
        decode_message_set as decode_message_set,
        decode_records as decode_records,
        encode_control_batch as encode_control_batch,
        encode_message_set as encode_message_set,
        encode_record_batch as encode_record_batch,
        encode_record_batch_columns as encode_record_batch_columns,
        record_rows as record_rows,
    )
    from kproto.records.segment import Segment as Segment, read_segment as read_segment

_BACKEND_BOUND = {
    "LegacyRecord",
    "MessageSetCodec",
    "Record",
    "decode_columns",
    "decode_message_set",
    "decode_records",
    "encode_control_batch",
    "encode_message_set",
    "encode_record_batch",
    "encode_record_batch_columns",
    "record_rows",
}


def __getattr__(name: str) -> Any:
    if name == "Message":
        warnings.warn(
            "kproto.records.Message is deprecated: the magic 0/1 record is kproto.records.LegacyRecord",
            DeprecationWarning,
            stacklevel=2,
        )
        name = "LegacyRecord"
    if name in _BACKEND_BOUND:
        from kproto.records import codec

        return getattr(codec, name)
    if name in ("Segment", "read_segment"):
        from kproto.records import segment

        return getattr(segment, name)
    raise AttributeError(f"module 'kproto.records' has no attribute {name!r}")
