"""Building Arrow record batches of the output tables.

:class:`RowBuffer` collects the rows of tables with one row per exchange or problem (a tuple per row is
cheap next to decoding the frame it describes).  :func:`message_batch` turns one message set into
``messages`` rows with the columnar records decoder: the per-message columns come from
``decode_columns(arrow=True)`` as they are, and the columns that are the same for the whole set
(topic, partition, exchange, ...) are Arrow constants, so no Python object is made per message.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from kproto.records import decode_columns
from kproto.spark.schema import CODEC_NAMES, MESSAGES

__all__ = ["RowBuffer", "MessageBuffer", "message_batch", "ns_to_us"]

_CODECS = pa.array(CODEC_NAMES, pa.string())


def ns_to_us(ns: Optional[int]) -> Optional[int]:
    """Capture nanoseconds to the microseconds of the tables' time columns (floor, like Spark)."""
    return None if ns is None else ns // 1000


class RowBuffer:
    """Rows of one table, held as tuples in schema order until :meth:`take` makes a batch of them."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._rows: List[Sequence[Any]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def append(self, row: Sequence[Any]) -> None:
        self._rows.append(row)

    def take(self) -> Optional[pa.RecordBatch]:
        """The rows so far as one batch (``None`` when there are none); the buffer is emptied."""
        if not self._rows:
            return None
        columns = list(zip(*self._rows))
        self._rows = []
        arrays = [pa.array(col, type=field.type) for col, field in zip(columns, self.schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class MessageBuffer:
    """``messages`` batches of many message sets, handed out as one batch by :meth:`take`."""

    def __init__(self) -> None:
        self._batches: List[pa.RecordBatch] = []
        self.rows = 0
        self.nbytes = 0

    def __len__(self) -> int:
        return self.rows

    def append(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._batches.append(batch)
            self.rows += batch.num_rows
            self.nbytes += batch.nbytes

    def take(self) -> Optional[pa.RecordBatch]:
        """All batches so far as one (small sets are many; one batch each would be slow downstream)."""
        if not self._batches:
            return None
        table = pa.Table.from_batches(self._batches, schema=MESSAGES).combine_chunks()
        self._batches, self.rows, self.nbytes = [], 0, 0
        batches = table.to_batches()
        return batches[0] if batches else None


def message_batch(
    data: Any,
    *,
    topic: Optional[str],
    partition: Optional[int],
    exchange_id: Optional[str] = None,
    connection: Optional[str] = None,
    direction: Optional[str] = None,
    file: Optional[str] = None,
    time_us: Optional[int] = None,
) -> pa.RecordBatch:
    """The ``messages`` rows of one message set (the bytes of a ``records`` field or a segment chunk).

    CRC mismatches become ``crc_ok = false`` rows; an incomplete trailing message is dropped (the
    caller reads ``valid_bytes`` through :func:`decode_message_columns` when it needs to know).  Damage
    raises :class:`~kproto.errors.DecodeError`.
    """
    return with_constants(
        decode_message_columns(data).to_arrow(),
        topic=topic,
        partition=partition,
        exchange_id=exchange_id,
        connection=connection,
        direction=direction,
        file=file,
        time_us=time_us,
    )


def decode_message_columns(data: Any) -> Any:
    """The columnar decode of a message set, CRCs checked but not enforced."""
    return decode_columns(data, check_crc=False)


def with_constants(
    decoded: pa.RecordBatch,
    *,
    topic: Optional[str],
    partition: Optional[int],
    exchange_id: Optional[str],
    connection: Optional[str],
    direction: Optional[str],
    file: Optional[str],
    time_us: Optional[int],
) -> pa.RecordBatch:
    """A decoded message batch (``MessageColumns.to_arrow()``) completed to the ``messages`` schema.

    Columns the decoder returns are carried by name (so a column added to
    :data:`~kproto.spark.schema.MESSAGES` — record headers, producer id/epoch, base sequence of
    magic 2 batches — fills from the decoder's column of the same name, and is null for decoders
    that do not produce it); the columns that are the same for the whole set are Arrow constants.
    """
    n = decoded.num_rows
    constants = {
        "exchange_id": exchange_id,
        "connection": connection,
        "direction": direction,
        "file": file,
        "time": time_us,
        "topic": topic,
        "partition": partition,
    }
    names = set(decoded.schema.names)
    arrays = []
    for field in MESSAGES:
        if field.name in constants:
            arrays.append(pa.repeat(pa.scalar(constants[field.name], type=field.type), n))
        elif field.name == "codec":
            arrays.append(pc.take(_CODECS, decoded.column("codec")))
        elif field.name in names:
            arrays.append(decoded.column(field.name).cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=MESSAGES)
