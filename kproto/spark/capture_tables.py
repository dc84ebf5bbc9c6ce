"""Captures to tables on Spark: plan byte ranges, extract per-connection rows, shuffle by connection, decode.

Planning (:mod:`kproto.spark.capture_plan`) lists the input files through Spark (any path Spark
lists; the files' contents are not read by the listing) and runs one light job that reads each
file's head and, for files larger than the split size, guesses and checks the range boundaries.
Stage 1 runs :func:`~kproto.spark.capture_stages.extract_segments` on each range (``mapInArrow`` over
one range per partition): the task reads its bytes itself, so a file of any size is split and no
capture bytes pass through the JVM on the way in.  The per-connection rows are repartitioned by
connection key and sorted within partitions into reading order, and stage 2 streams each partition
through :func:`~kproto.spark.capture_stages.decode_sorted_segments` (``mapInArrow`` again: this works on
every pyspark from 3.5 and never holds more than one connection's reassembly state; a grouped
``applyInArrow`` would materialise each connection's segments as one table).
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Iterable, Iterator, List, Optional, Tuple, get_type_hints

import pyarrow as pa

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.spark.capture_plan import CaptureRange, plan_ranges
from kproto.spark.capture_splits import DEFAULT_SPLIT_BYTES
from kproto.spark.capture_stages import (
    CONNECTION_KEY,
    READING_ORDER,
    SEGMENTS,
    decode_sorted_segments,
    extract_segments,
)
from kproto.spark.hadoop_fs import HadoopFileSystem
from kproto.spark.schema import spark_schema
from kproto.spark.table_union import SparkTables, split_union, union_batch, union_spark_schema

__all__ = [
    "list_input_files",
    "plan_capture_ranges",
    "sorted_segments",
    "Stage2",
    "capture_tables",
    "RANGES",
    "PURE_EXECUTORS_NOTE",
]

#: Arrow's type for each type a :class:`~kproto.spark.capture_plan.CaptureRange` field holds.
_ARROW_TYPES = {str: pa.string(), int: pa.int64(), Optional[int]: pa.int64(), bytes: pa.binary()}

#: The stage 1 input rows: one :class:`~kproto.spark.capture_plan.CaptureRange` each, a column per
#: field in the tuple's order (a plan row is ``tuple(range)``, and reads back as ``CaptureRange(**row)``).
RANGES = pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in get_type_hints(CaptureRange).items()])


def list_input_files(spark: Any, inputs: Iterable[str], glob: Optional[str] = None) -> List[Tuple[str, int]]:
    """``(path, size)`` of the non-empty files under ``inputs`` (any path Spark lists; directories
    searched recursively; ``glob`` filters file names), paths as the tables name them, sorted."""
    return HadoopFileSystem(spark).list_files(inputs, glob)


#: The summary's note when executors run kproto without its compiled extension.
PURE_EXECUTORS_NOTE = (
    "Spark executors decoded with kproto's PURE-PYTHON path (its compiled extension does not "
    "import there), several times slower: install kproto with its extension on every node "
    "(see docs/spark.md, 'On a cluster')"
)


def plan_capture_ranges(
    spark: Any,
    inputs: Iterable[str],
    *,
    glob: Optional[str] = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    backends: Optional[set] = None,
) -> List[CaptureRange]:
    """The stage 1 ranges of the captures under ``inputs`` (one Spark job scans the heads and range
    boundaries of the files larger than ``split_bytes``; none runs when there are none); the kproto
    backends of the executors that ran it are added to ``backends``."""
    files = list_input_files(spark, inputs, glob)
    sc = spark.sparkContext

    def run(function: Callable[[Any], Any], tasks: List[Any]) -> List[Any]:
        if not tasks:
            return []
        sc.setJobDescription(f"kproto: plan {len(files)} capture file(s)")
        try:
            results = sc.parallelize(tasks, len(tasks)).map(function).collect()
            if backends is not None:
                backends.update(r.backend for r in results)
            return results  # type: ignore[no-any-return]
        finally:
            sc.setJobDescription(None)

    return plan_ranges(files, split_bytes=split_bytes, run=run)


def _executor_backend(_: Any) -> str:
    import kproto

    return kproto.backend


def _stage1(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for row in batch.to_pylist():
            yield from extract_segments(CaptureRange(**row))


class Stage2:
    """Picklable stage 2 function (Spark ships it to the executors): sorted :data:`SEGMENTS` batches
    in, ``(table, batch)`` pairs out, or with ``union`` batches of the union schema (one struct
    column per table) for a DataFrame of all three tables."""

    def __init__(self, ports: Collection[int], detect: bool, union: bool = False) -> None:
        self.ports = frozenset(ports)
        self.detect = detect
        self.union = union

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
        pairs = decode_sorted_segments(batches, ports=self.ports, detect=self.detect)
        if not self.union:
            yield from pairs
            return
        for table, batch in pairs:
            yield union_batch(table, batch)


def sorted_segments(
    spark: Any,
    inputs: Iterable[str],
    *,
    glob: Optional[str] = None,
    partitions: Optional[int] = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    log: Optional[Callable[[str], None]] = None,
) -> Tuple[Any, List[str]]:
    """Planning (runs now) and stage 1 (lazy): the DataFrame of :data:`SEGMENTS` rows partitioned by
    connection key and sorted into reading order, ready for stage 2; and the notes for the summary."""
    backends: set = set()
    ranges = plan_capture_ranges(spark, inputs, glob=glob, split_bytes=split_bytes, backends=backends)
    if ranges and not backends:  # no planning job ran: ask the executors
        sc = spark.sparkContext
        tasks = max(1, sc.defaultParallelism)
        backends.update(sc.parallelize(range(tasks), tasks).map(_executor_backend).collect())
    notes = [PURE_EXECUTORS_NOTE] if "python" in backends else []
    if log is not None:
        for note in notes:
            log(f"NOTE: {note}")
        files = len({r.path for r in ranges})
        log(f"plan: {files} capture file(s), {len(ranges)} range(s) for stage 1 (split size {split_bytes} bytes)")
    sc = spark.sparkContext
    rows = sc.parallelize([tuple(r) for r in ranges], max(1, len(ranges)))
    plan = spark.createDataFrame(rows, spark_schema(RANGES))
    segments = plan.mapInArrow(_stage1, spark_schema(SEGMENTS))
    keys = list(CONNECTION_KEY)
    count = partitions or 2 * max(1, sc.defaultParallelism)
    return segments.repartition(count, *keys).sortWithinPartitions(*keys, *READING_ORDER), notes


def capture_tables(
    spark: Any,
    inputs: Iterable[str],
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    glob: Optional[str] = None,
    partitions: Optional[int] = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    log: Optional[Callable[[str], None]] = None,
) -> SparkTables:
    """The ``exchanges``, ``messages`` and ``problems`` DataFrames of the captures under ``inputs``.

    Planning runs now (a small job); the decode is lazy: nothing more runs until a table is written or
    collected, and the decode then runs once for all three (call :meth:`SparkTables.release`
    afterwards).  Files larger than ``split_bytes`` are read in ranges by several tasks.
    ``partitions`` is the number of stage 2 tasks; the default, twice the cluster's default
    parallelism, keeps every core busy without the per-task cost of ``spark.sql.shuffle.partitions``
    (200) tasks: adaptive execution does not coalesce the partitions of a persisted plan.

    To write the tables, :func:`~kproto.spark.job.run_captures` is several times faster: its tasks
    write Parquet themselves (:mod:`kproto.spark.table_writer`) instead of handing Spark a row per message.
    """
    ordered, notes = sorted_segments(spark, inputs, glob=glob, partitions=partitions, split_bytes=split_bytes, log=log)
    tables = split_union(ordered.mapInArrow(Stage2(ports, detect, union=True), union_spark_schema()))
    tables.notes.extend(notes)
    return tables
