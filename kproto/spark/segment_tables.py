"""Kafka log segments to tables on Spark: ``binaryFile`` over ``*.log``, one task decodes a file."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

import pyarrow as pa

from kproto.spark.inputs import SEGMENT_GLOB, display_path
from kproto.spark.segment_rows import segment_batches
from kproto.spark.table_union import SparkTables, split_union, union_batch, union_spark_schema

__all__ = ["segment_tables"]


def _decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        contents = batch.column("content")
        for i, path in enumerate(batch.column("path").to_pylist()):
            for table, rows in segment_batches(display_path(path), contents[i].as_py()):
                yield union_batch(table, rows)


def segment_tables(spark: Any, inputs: Iterable[str], *, glob: Optional[str] = SEGMENT_GLOB) -> SparkTables:
    """The ``messages`` and ``problems`` DataFrames (``exchanges`` is empty) of the log segments under
    ``inputs``; lazy, like :func:`~kproto.spark.capture_tables.capture_tables`."""
    reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
    if glob:
        reader = reader.option("pathGlobFilter", glob)
    files = reader.load(list(inputs)).select("path", "content")
    return split_union(files.mapInArrow(_decode, union_spark_schema()))
