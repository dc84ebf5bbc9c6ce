"""Kafka message sets, magic 0 (0.8/0.9) and magic 1 (0.10), with gzip, snappy and lz4 wrappers.

* :func:`decode_message_set` / :func:`encode_message_set` — messages as objects;
* :func:`decode_columns` — bulk decode into contiguous columns (or a pyarrow RecordBatch);
* :class:`RecordSet` — the raw-bytes value of a ``records`` field in the generated codecs.

The hot loops are compiled (``kproto._fast``) with a pure-Python twin; ``kproto._backend.BACKEND`` says
which one runs.  The backend-bound names load on first use, so that ``kproto._backend`` and the compiled
module can import this package's helpers without an import cycle.
"""

from typing import Any

from kproto.records.decoded import MessageColumns, MessageSet
from kproto.records.format import DEFAULT_MAX_DECOMPRESSED_SIZE
from kproto.records.record_set import RecordSet

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Message",
    "MessageColumns",
    "MessageSet",
    "MessageSetCodec",
    "RecordSet",
    "decode_columns",
    "decode_message_set",
    "encode_message_set",
]

_BACKEND_BOUND = {"Message", "MessageSetCodec", "decode_columns", "decode_message_set", "encode_message_set"}


def __getattr__(name: str) -> Any:
    if name in _BACKEND_BOUND:
        from kproto.records import message_set

        return getattr(message_set, name)
    raise AttributeError(f"module 'kproto.records' has no attribute {name!r}")
