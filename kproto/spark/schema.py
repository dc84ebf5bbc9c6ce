"""The three output tables (``exchanges``, ``messages``, ``problems``) as Arrow schemas.

One definition serves the single-process path (pyarrow tables written straight to Parquet) and the
Spark path (the same schemas converted to Spark types), so the two cannot drift apart.  Times are
Arrow ``timestamp[us, UTC]`` (Spark ``TimestampType``); Kafka's own message ``timestamp`` stays the
int64 milliseconds of the wire format (null for magic 0, -1 where a magic 1 producer set none).
"""

from __future__ import annotations

from typing import Any, Dict

import pyarrow as pa

from kproto.records.format import CODEC_NAMES as _RECORD_CODECS

__all__ = [
    "TIME",
    "PARTITION_ERROR",
    "HEADER",
    "EXCHANGES",
    "MESSAGES",
    "PROBLEMS",
    "TABLES",
    "CODEC_NAMES",
    "spark_schema",
]

#: Capture times: microseconds since the epoch, UTC (what Spark's TimestampType holds).
TIME = pa.timestamp("us", tz="UTC")

#: One record header (magic 2): a UTF-8 key and a binary value (null when the producer sent none).
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])

#: One non-zero error code of a response below the top level, with the topic/partition it is about.
PARTITION_ERROR = pa.struct([("topic", pa.string()), ("partition", pa.int32()), ("error_code", pa.int16())])

#: One row per request, with its paired response when there is one.
EXCHANGES = pa.schema(
    [
        ("exchange_id", pa.string()),  # "<connection>/<request stream offset>", unique per input set
        ("time", TIME),  # capture time of the packet that completed the request
        ("connection", pa.string()),  # "<initiator>><responder>#<n>", n counts reuses of the 4-tuple
        ("client", pa.string()),
        ("server", pa.string()),
        ("api_key", pa.int16()),
        ("api_name", pa.string()),
        ("api_version", pa.int16()),
        ("correlation_id", pa.int32()),
        ("client_id", pa.string()),
        ("request_size", pa.int64()),  # frame bytes including the 4-byte size prefix
        ("response_size", pa.int64()),
        ("response_time", TIME),
        ("latency_ms", pa.float64()),
        ("expects_response", pa.bool_()),  # false for acks=0 Produce
        ("error_code", pa.int16()),  # the response's top-level error code, if its schema has one
        ("partition_errors", pa.list_(PARTITION_ERROR)),
        ("topics", pa.list_(pa.string())),  # distinct topics named in the request or response, sorted
        ("request_error", pa.string()),  # why the request did not decode
        ("response_error", pa.string()),
        ("file", pa.string()),  # capture file and packet number of the request's last packet
        ("packet", pa.int64()),
        ("response_file", pa.string()),
        ("response_packet", pa.int64()),
    ]
)

#: Codec ids of the message attributes, as the ``codec`` column names them (index = id).
CODEC_NAMES = ("none",) + tuple(_RECORD_CODECS[i] for i in range(1, max(_RECORD_CODECS) + 1))

#: One row per message of a Produce request, a Fetch response or a log segment.
MESSAGES = pa.schema(
    [
        ("exchange_id", pa.string()),  # null for log segments
        ("connection", pa.string()),
        ("direction", pa.string()),  # "request" (Produce) or "response" (Fetch); null for log segments
        ("file", pa.string()),  # capture file (of the frame's last packet) or log segment file
        ("time", TIME),  # capture time of the frame; null for log segments
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("magic", pa.int8()),
        ("attributes", pa.int8()),
        ("codec", pa.string()),
        ("crc_ok", pa.bool_()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        # Producer facts of the record's magic 2 batch; -1 / false before magic 2 (and for a producer that is
        # neither idempotent nor transactional).  ``sequence`` is the record's own: base sequence + offset delta.
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("sequence", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),  # a transaction marker (commit/abort) rather than a user record
        ("headers", pa.list_(HEADER)),  # in wire order; empty before magic 2
    ]
)

#: Everything that is not a clean exchange or message, with where it was found.
PROBLEMS = pa.schema(
    [
        ("kind", pa.string()),  # kproto.capture ProblemKind values, "capture", or the segment/message set kinds
        ("detail", pa.string()),
        ("file", pa.string()),
        ("packet", pa.int64()),  # packet number in ``file`` (captures)
        ("file_offset", pa.int64()),  # byte offset in ``file`` (capture damage, log segments)
        ("connection", pa.string()),
        ("source", pa.string()),  # endpoint that sent the bytes concerned
        ("stream_offset", pa.int64()),  # byte offset in that direction's TCP stream
        ("time", TIME),
    ]
)

#: Table name -> schema, in output order.
TABLES: Dict[str, pa.Schema] = {"exchanges": EXCHANGES, "messages": MESSAGES, "problems": PROBLEMS}


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark ``StructType`` for an Arrow schema of this module (imports pyspark on first use)."""
    from pyspark.sql import types as T

    def convert(t: pa.DataType) -> Any:
        if pa.types.is_struct(t):
            return T.StructType([T.StructField(f.name, convert(f.type), True) for f in t])
        if pa.types.is_list(t):
            return T.ArrayType(convert(t.value_type), True)
        simple = {
            pa.string(): T.StringType(),
            pa.binary(): T.BinaryType(),
            pa.bool_(): T.BooleanType(),
            pa.int8(): T.ByteType(),
            pa.int16(): T.ShortType(),
            pa.int32(): T.IntegerType(),
            pa.int64(): T.LongType(),
            pa.float64(): T.DoubleType(),
            TIME: T.TimestampType(),
        }
        return simple[t]

    return T.StructType([T.StructField(f.name, convert(f.type), True) for f in schema])
