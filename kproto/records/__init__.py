"""Kafka message sets, magic 0 (0.8/0.9) and magic 1 (0.10), with gzip, snappy and lz4 wrappers.

* :func:`decode_message_set` / :func:`encode_message_set` — messages as objects;
* :func:`decode_columns` — bulk decode into contiguous columns (or a pyarrow RecordBatch);
* :class:`RecordSet` — the raw-bytes value of a ``records`` field in the generated codecs.

The hot loops are compiled (``kproto._fast``) with a pure-Python twin; :data:`kproto._backend.BACKEND` says
which one runs.
"""

from kproto.records.decoded import MessageColumns, MessageSet
from kproto.records.format import DEFAULT_MAX_DECOMPRESSED_SIZE
from kproto.records.message_set import Message, decode_columns, decode_message_set, encode_message_set
from kproto.records.record_set import RecordSet

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Message",
    "MessageColumns",
    "MessageSet",
    "RecordSet",
    "decode_columns",
    "decode_message_set",
    "encode_message_set",
]
