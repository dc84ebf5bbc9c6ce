"""Kafka log segments to tables on Spark: segments larger than the split size are decoded in ranges.

Files are listed through Spark; one light job walks the entry headers of each file larger than the
split size for range boundaries (:func:`~kproto.spark.segment_rows.entry_boundaries`), then one task per
range reads its bytes itself and decodes them.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

import pyarrow as pa

from kproto.spark.capture_plan import check_split_bytes
from kproto.spark.capture_splits import DEFAULT_SPLIT_BYTES
from kproto.spark.capture_tables import list_input_files
from kproto.spark.inputs import SEGMENT_GLOB, open_input
from kproto.spark.schema import spark_schema
from kproto.spark.segment_rows import entry_boundaries, segment_batches
from kproto.spark.table_union import SparkTables, split_union, union_batch, union_spark_schema

__all__ = ["segment_tables", "segment_ranges", "SegmentDecode", "plan_segment_ranges", "SEGMENT_RANGES"]

#: The decode stage's input rows: bytes ``[start, stop)`` of a segment file.
SEGMENT_RANGES = pa.schema([("path", pa.string()), ("start", pa.int64()), ("stop", pa.int64())])


def _boundaries(task: Tuple[str, int, List[int]]) -> Tuple[str, List[int]]:
    path, size, starts = task
    with open_input(path) as stream:

        def read_at(offset: int, n: int) -> bytes:
            stream.seek(offset)
            return bytes(stream.read(n))

        return path, entry_boundaries(read_at, size, starts)


def plan_segment_ranges(
    files: List[Tuple[str, int]],
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    run: Callable[[Any, List[Any]], Iterable[Any]] = map,
) -> List[Tuple[str, int, int]]:
    """``(path, start, stop)`` ranges of segment ``files`` (``(path, size)`` pairs)."""
    check_split_bytes(split_bytes)
    tasks = [(path, size, list(range(split_bytes, size, split_bytes))) for path, size in files if size > split_bytes]
    cuts = dict(run(_boundaries, tasks)) if tasks else {}
    ranges: List[Tuple[str, int, int]] = []
    for path, size in files:
        edges = [0] + cuts.get(path, []) + [size]
        ranges.extend((path, a, b) for a, b in zip(edges, edges[1:]) if a < b)
    return ranges


class SegmentDecode:
    """Picklable decode function: :data:`SEGMENT_RANGES` batches in, ``(table, batch)`` pairs out, or
    with ``union`` batches of the union schema (one struct column per table)."""

    def __init__(self, union: bool = False) -> None:
        self.union = union

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
        for batch in batches:
            for row in batch.to_pylist():
                with open_input(row["path"]) as stream:
                    stream.seek(row["start"])
                    data = stream.read(row["stop"] - row["start"])
                for table, rows in segment_batches(row["path"], data, base=row["start"]):
                    yield union_batch(table, rows) if self.union else (table, rows)


def segment_ranges(
    spark: Any,
    inputs: Iterable[str],
    *,
    glob: Optional[str] = SEGMENT_GLOB,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    log: Optional[Callable[[str], None]] = None,
) -> Any:
    """Planning (runs now): the DataFrame of :data:`SEGMENT_RANGES` rows, one range per partition."""
    sc = spark.sparkContext
    files = list_input_files(spark, inputs, glob)

    def run(function: Callable[[Any], Any], tasks: List[Any]) -> List[Any]:
        sc.setJobDescription("kproto: plan segment ranges")
        try:
            return sc.parallelize(tasks, len(tasks)).map(function).collect()  # type: ignore[no-any-return]
        finally:
            sc.setJobDescription(None)

    ranges = plan_segment_ranges(files, split_bytes, run)
    if log is not None:
        log(f"plan: {len(files)} segment file(s), {len(ranges)} range(s) to decode (split size {split_bytes} bytes)")
    return spark.createDataFrame(sc.parallelize(ranges, max(1, len(ranges))), spark_schema(SEGMENT_RANGES))


def segment_tables(
    spark: Any,
    inputs: Iterable[str],
    *,
    glob: Optional[str] = SEGMENT_GLOB,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    log: Optional[Callable[[str], None]] = None,
) -> SparkTables:
    """The ``messages`` and ``problems`` DataFrames (``exchanges`` is empty) of the log segments under
    ``inputs``; lazy after planning, like :func:`~kproto.spark.capture_tables.capture_tables`."""
    plan = segment_ranges(spark, inputs, glob=glob, split_bytes=split_bytes, log=log)
    return split_union(plan.mapInArrow(SegmentDecode(union=True), union_spark_schema()))
