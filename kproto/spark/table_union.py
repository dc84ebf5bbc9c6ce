"""Three tables out of one Spark stage: a union row type, and splitting it again.

A decoding task produces rows of all three tables at once, but a Spark ``mapInArrow`` has one output
schema.  The stage therefore outputs rows of one struct column per table (exactly one non-null per
row); the result is persisted, so the decode runs once, and each table is a filter and a ``struct.*``
projection of it.  A null struct costs one slot per row in Spark's rows, unlike one wide schema of
every table's columns.

Persisting is to disk by default: measured on captures (17 MB, local[2], 2 loaded cores), decoding
then writing the three tables took ~24 s recomputing the decode per table, ~23 s persisted in memory
(Spark's columnar cache builder is slow on these nested rows), ~13 s persisted to disk and ~11 s with
a ``localCheckpoint``, which is not kept when an executor is lost, so not an option on a cluster.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List

import pyarrow as pa

from kproto.spark.schema import TABLES, spark_schema

__all__ = ["UNION", "union_batch", "SparkTables", "split_union"]

#: The output schema of the decoding stages: one struct column per table.
UNION = pa.schema([(name, pa.struct(list(schema))) for name, schema in TABLES.items()])


def union_batch(table: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` of ``table`` as a batch of :data:`UNION` (the other tables' columns null)."""
    n = batch.num_rows
    arrays = []
    for field in UNION:
        if field.name == table:
            arrays.append(pa.StructArray.from_arrays(batch.columns, fields=list(field.type)))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=UNION)


def union_spark_schema() -> Any:
    """:data:`UNION` as a Spark ``StructType``."""
    return spark_schema(UNION)


@dataclass
class SparkTables:
    """The three tables as Spark DataFrames over one persisted decode; :meth:`release` when written."""

    exchanges: Any
    messages: Any
    problems: Any
    _union: Any = None
    #: Warnings about how the tables were made (carried into the summary).
    notes: List[str] = dataclasses.field(default_factory=list)

    def tables(self) -> Dict[str, Any]:
        return {"exchanges": self.exchanges, "messages": self.messages, "problems": self.problems}

    def release(self) -> None:
        """Drop the persisted decode (after the tables were written or collected)."""
        if self._union is not None:
            self._union.unpersist()


def split_union(union: Any, storage_level: Any = None) -> SparkTables:
    """Persist a DataFrame of :data:`UNION` rows (``DISK_ONLY`` unless ``storage_level`` says otherwise)
    and project the three tables out of it."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    union = union.persist(StorageLevel.DISK_ONLY if storage_level is None else storage_level)
    frames = {name: union.where(F.col(name).isNotNull()).select(f"{name}.*") for name in TABLES}
    return SparkTables(_union=union, **frames)
