"""Captures to tables on Spark: read files with ``binaryFile``, extract, shuffle by connection, decode.

Stage 1 runs :func:`~kproto.spark.capture_stages.extract_segments` on each file (``mapInArrow``; one
file is one task's work, so a single huge file is not split).  The segments are repartitioned by
connection key and sorted within partitions into reading order, and stage 2 streams each partition
through :func:`~kproto.spark.capture_stages.decode_sorted_segments` (``mapInArrow`` again: this works on
every pyspark from 3.5 and never holds more than one connection's reassembly state; a grouped
``applyInArrow`` would materialise each connection's segments as one table).
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, Iterator, Optional

import pyarrow as pa

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.spark.capture_stages import CONNECTION_KEY, READING_ORDER, SEGMENTS, decode_sorted_segments, extract_segments
from kproto.spark.inputs import display_path
from kproto.spark.schema import spark_schema
from kproto.spark.table_union import SparkTables, split_union, union_batch, union_spark_schema

__all__ = ["read_binary_files", "capture_tables"]


def read_binary_files(spark: Any, inputs: Iterable[str], glob: Optional[str] = None) -> Any:
    """A ``path, content`` DataFrame of the files under ``inputs`` (any path Spark can read, directories
    searched recursively; ``glob`` filters file names)."""
    reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
    if glob:
        reader = reader.option("pathGlobFilter", glob)
    return reader.load(list(inputs)).select("path", "content")


def _stage1(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        contents = batch.column("content")
        for i, path in enumerate(batch.column("path").to_pylist()):
            yield from extract_segments(display_path(path), contents[i].as_py())


class _Stage2:
    """Picklable stage 2 function (Spark ships it to the executors)."""

    def __init__(self, ports: Collection[int], detect: bool) -> None:
        self.ports = frozenset(ports)
        self.detect = detect

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for table, batch in decode_sorted_segments(batches, ports=self.ports, detect=self.detect):
            yield union_batch(table, batch)


def capture_tables(
    spark: Any,
    inputs: Iterable[str],
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    glob: Optional[str] = None,
    partitions: Optional[int] = None,
) -> SparkTables:
    """The ``exchanges``, ``messages`` and ``problems`` DataFrames of the captures under ``inputs``.

    Lazy: nothing runs until a table is written or collected; the decode then runs once for all three
    (call :meth:`SparkTables.release` afterwards).  ``partitions`` is the number of stage 2 tasks;
    the default, twice the cluster's default parallelism, keeps every core busy without the per-task
    cost of ``spark.sql.shuffle.partitions`` (200) tasks: adaptive execution does not coalesce the
    partitions of a persisted plan.
    """
    files = read_binary_files(spark, inputs, glob)
    segments = files.mapInArrow(_stage1, spark_schema(SEGMENTS))
    keys = list(CONNECTION_KEY)
    count = partitions or 2 * max(1, spark.sparkContext.defaultParallelism)
    ordered = segments.repartition(count, *keys).sortWithinPartitions(*keys, *READING_ORDER)
    return split_union(ordered.mapInArrow(_Stage2(ports, detect), union_spark_schema()))
