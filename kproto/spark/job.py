"""Running a whole job: a Spark session, the tables, Parquet output, the summary.

``run_captures`` / ``run_segments`` take an existing SparkSession (or the one :func:`spark_session`
builds: ``local[*]`` by default, any master URL otherwise) and write ``OUT/exchanges``,
``OUT/messages`` and ``OUT/problems`` as Parquet: the decoding tasks write the files themselves with
pyarrow and the driver commits them (:mod:`kproto.spark.table_writer`), so ``OUT`` is any path Spark
lists and pyarrow writes (local, HDFS, S3, GCS, Azure).  :func:`write_tables` writes the DataFrames of
:func:`~kproto.spark.capture_tables.capture_tables` through Spark instead (slower: a JVM row per
message).  ``run_captures_local`` / ``run_segments_local`` do the same in one process with pyarrow
(local paths only).  Damaged input never fails a job; it ends up in ``problems``.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Callable, Collection, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.spark.capture_splits import DEFAULT_SPLIT_BYTES
from kproto.spark.hadoop_fs import HadoopFileSystem
from kproto.spark.inputs import SEGMENT_GLOB
from kproto.spark.schema import TABLES, spark_schema
from kproto.spark.summary import Summary, summary_from_arrow
from kproto.spark.table_marker import MARKER, REPLACING_MODES, LocalFileSystem, check_replaceable, marker_text
from kproto.spark.table_union import SparkTables
from kproto.spark.table_writer import PART_STATS, ParquetOutput

__all__ = [
    "DEFAULT_MASTER",
    "spark_session",
    "write_tables",
    "run_captures",
    "run_segments",
    "run_captures_local",
    "run_segments_local",
]

#: Spark master used when none is given: every core of this machine.
DEFAULT_MASTER = "local[*]"

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(f"kproto spark: {line}", file=sys.stderr, flush=True)


def spark_session(
    master: str = DEFAULT_MASTER, conf: Optional[Mapping[str, str]] = None, *, app_name: str = "kproto"
) -> Any:
    """Get or create a SparkSession for ``master`` with ``conf`` on top of kproto's defaults.

    Defaults: Spark's console progress bar on, Parquet timestamps as ``TIMESTAMP_MICROS`` (not the
    legacy INT96), and for local masters the Python workers run this interpreter (the one kproto is
    installed in) and Spark binds to 127.0.0.1 unless ``SPARK_LOCAL_IP`` says otherwise.
    """
    from pyspark.sql import SparkSession

    settings = {
        "spark.ui.showConsoleProgress": "true",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    if master.startswith("local"):
        # A session started from Python takes its workers' interpreter from the environment only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _join(out: str, name: str) -> str:
    return out.rstrip("/") + "/" + name


def write_tables(spark: Any, tables: SparkTables, out: str, *, mode: str = "overwrite", log: Log = _stderr) -> None:
    """Write the three tables as Parquet under ``out`` (``out/exchanges``, ...) with save ``mode``.

    ``overwrite`` and ``append`` only touch directories that are absent, empty or kproto's own tables
    (:mod:`kproto.spark.table_marker`); all three are checked before anything is written.
    """
    _write_frames(spark, tables.tables(), out, mode=mode, log=log)


def _check_frames_output(fs: HadoopFileSystem, names: Iterable[str], out: str, mode: str) -> None:
    if mode in REPLACING_MODES:
        for name in names:
            check_replaceable(fs, _join(out, name), name)


def _write_frames(spark: Any, frames: Mapping[str, Any], out: str, *, mode: str, log: Log) -> None:
    """Write DataFrames as kproto tables ``out/<name>`` (checked first, marked when written)."""
    fs = HadoopFileSystem(spark)
    paths = {name: _join(out, name) for name in frames}
    existed = {name: fs.kind(path) is not None for name, path in paths.items()}
    _check_frames_output(fs, frames, out, mode)
    for name, frame in frames.items():
        spark.sparkContext.setJobDescription(f"kproto: write {name}")
        log(f"writing {paths[name]}")
        frame.write.mode(mode).parquet(paths[name])
        if not (mode == "ignore" and existed[name]):
            fs.write_text(_join(paths[name], MARKER), marker_text(name))
    spark.sparkContext.setJobDescription(None)


def _write_decoded(
    spark: Any,
    frame: Any,
    decode: Callable[[Any], Any],
    output: ParquetOutput,
    out: str,
    top: int,
    notes: List[str],
    log: Log,
) -> Summary:
    """Run ``decode`` over ``frame``'s partitions with tasks writing the tables to ``output``
    (:mod:`kproto.spark.table_writer`), commit them, and summarise."""
    sc = spark.sparkContext
    try:
        sc.setJobDescription(f"kproto: decode and write {out}")
        log(f"decoding and writing {out}")
        stats = frame.mapInArrow(output.task_writer(decode), spark_schema(PART_STATS)).collect()
    except BaseException:
        output.abort()
        raise
    finally:
        sc.setJobDescription(None)
    written = output.commit(stats)
    summary = written.counts.summary(top=top)
    summary.notes.extend(notes)
    return summary


def run_captures(
    spark: Any,
    inputs: Iterable[str],
    out: str,
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    glob: Optional[str] = None,
    partitions: Optional[int] = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    mode: str = "overwrite",
    top: int = 10,
    groups: bool = False,
    log: Log = _stderr,
) -> Summary:
    """Decode the captures under ``inputs`` on Spark, write the tables under ``out``, return the summary.

    With ``groups``, also ``out/group_events`` and ``out/rebalances`` (:mod:`kproto.spark.group_tables`:
    a second pass over the captures, keyed by coordinator, so it is asked for, not done by default).

    Files larger than ``split_bytes`` are read in byte ranges by several tasks; stage 1 hands the
    connections to stage 2 through spill files beside the tables (:mod:`kproto.spark.capture_spill`);
    ``partitions`` stage 2 tasks (default: Spark's default parallelism) decode whole connections,
    placed by size, and write the Parquet files (``out`` is any path Spark lists and pyarrow writes)."""
    from kproto.spark.capture_spill import DecodePieces, SpillRanges, assign_connections
    from kproto.spark.capture_tables import PURE_EXECUTORS_NOTE, plan_capture_ranges

    inputs = list(inputs)
    output = ParquetOutput(spark, out, mode, log)  # refuses a wrong output before any work
    if groups:
        # imported here: stage tasks import this module for its helpers, and need none of the group analysis
        from kproto.spark.group_tables import GROUP_TABLES

        _check_frames_output(HadoopFileSystem(spark), GROUP_TABLES, out, mode)
    sc = spark.sparkContext
    log(f"decoding captures from {len(inputs)} input path(s) on {sc.master}")
    backends: Set[str] = set()
    ranges = plan_capture_ranges(spark, inputs, glob=glob, split_bytes=split_bytes, backends=backends)
    files = len({r.path for r in ranges})
    log(f"plan: {files} capture file(s), {len(ranges)} range(s) for stage 1 (split size {split_bytes} bytes)")
    try:
        sc.setJobDescription(f"kproto: stage 1, {len(ranges)} capture range(s)")
        total = sum(r.stop - r.start for r in ranges)
        range_groups = _range_groups(ranges, max(sc.defaultParallelism, -(-total // split_bytes)))
        results = (
            sc.parallelize(range_groups, max(1, len(range_groups)))
            .mapPartitions(_flatten)
            .mapPartitions(SpillRanges(output.scratch))
            .collect()
        )
        backends.update(r.backend for r in results)
        placed = assign_connections((p for r in results for p in r.pieces), partitions or sc.defaultParallelism)
        log(
            f"stage 1: {len(range_groups)} task(s) found {sum(len(t.connections) for t in placed)} connection key(s), "
            f"placed on {len(placed)} stage 2 task(s)"
        )
        sc.setJobDescription(f"kproto: stage 2, decode and write {out}")
        log(f"decoding and writing {out}")
        stats = (
            sc.parallelize(placed, len(placed)).mapPartitions(output.task_writer(DecodePieces(ports, detect))).collect()
        )
    except BaseException:
        output.abort()
        raise
    finally:
        sc.setJobDescription(None)
    notes = [PURE_EXECUTORS_NOTE] if "python" in backends else []
    for note in notes:
        log(f"NOTE: {note}")
    written = output.commit(row for batch in stats for row in zip(*batch.to_pydict().values()))
    summary = written.counts.summary(top=top)
    summary.notes.extend(notes)
    if groups:
        from kproto.spark.group_tables import group_tables

        frames = group_tables(spark, inputs, ports=ports, detect=detect, glob=glob, partitions=partitions)
        _write_frames(spark, frames, out, mode=mode, log=log)
        summary.notes.append(_groups_note({name: frame.count() for name, frame in frames.items()}))
        next(iter(frames.values())).unpersist()
    return summary


def _groups_note(rows: Mapping[str, int]) -> str:
    return f"consumer groups: {rows['group_events']} group_events rows, {rows['rebalances']} rebalances rows"


def _range_groups(ranges: List[Any], tasks: int) -> List[List[Tuple[Any, ...]]]:
    """``ranges`` on at most ``tasks`` stage 1 tasks, largest first onto the least loaded (each task
    costs Spark a fixed tenth of a second or so, a range of 128 MB costs seconds)."""
    count = max(1, min(tasks, len(ranges)))
    groups: List[List[Tuple[Any, ...]]] = [[] for _ in range(count)]
    loads = [0] * count
    for item in sorted(ranges, key=lambda r: r.start - r.stop):
        task = loads.index(min(loads))
        loads[task] += item.stop - item.start
        groups[task].append(tuple(item))
    return [group for group in groups if group]


def _flatten(groups: Iterable[List[Tuple[Any, ...]]]) -> Iterator[Tuple[Any, ...]]:
    for group in groups:
        yield from group


def run_segments(
    spark: Any,
    inputs: Iterable[str],
    out: str,
    *,
    glob: Optional[str] = SEGMENT_GLOB,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    mode: str = "overwrite",
    top: int = 10,
    log: Log = _stderr,
) -> Summary:
    """Decode the log segments under ``inputs`` on Spark, write the tables under ``out``, return the summary.

    Segments larger than ``split_bytes`` are decoded in ranges by several tasks, which write the files."""
    from kproto.spark.segment_tables import SegmentDecode, segment_ranges

    inputs = list(inputs)
    output = ParquetOutput(spark, out, mode, log)
    log(f"decoding log segments from {len(inputs)} input path(s) on {spark.sparkContext.master}")
    plan = segment_ranges(spark, inputs, glob=glob, split_bytes=split_bytes, log=log)
    return _write_decoded(spark, plan, SegmentDecode(), output, out, top, [], log)


def _prepare_local_out(out: str, mode: str, names: Collection[str] = tuple(TABLES)) -> None:
    if mode not in ("overwrite", "error", "errorifexists"):
        raise ValueError(f"single-process runs support mode 'overwrite' or 'error', not {mode!r}")
    fs = LocalFileSystem()
    paths = [os.path.join(out, name) for name in names]
    for name, path in zip(names, paths):
        if os.path.lexists(path) and mode != "overwrite":
            raise FileExistsError(17, "Output exists", path)
        check_replaceable(fs, path, name)
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)


def run_captures_local(
    inputs: Iterable[str],
    out: str,
    *,
    ports: Collection[int] = DEFAULT_PORTS,
    detect: bool = True,
    glob: Optional[str] = None,
    mode: str = "overwrite",
    top: int = 10,
    groups: bool = False,
    log: Log = _stderr,
) -> Summary:
    """:func:`run_captures` in one process, without Spark (local paths)."""
    from kproto.spark.group_tables import GROUP_TABLES, group_tables_local
    from kproto.spark.local import tables_from_captures_local, write_local_tables

    inputs = list(inputs)
    _prepare_local_out(out, mode, list(TABLES) + (list(GROUP_TABLES) if groups else []))
    log("decoding captures in this process")
    tables = tables_from_captures_local(inputs, ports=ports, detect=detect, glob=glob)
    log(f"writing {out}")
    tables.write_parquet(out)
    summary = summary_from_arrow(tables.tables(), top=top)
    if groups:
        log("analysing consumer groups in this process")
        group = group_tables_local(inputs, ports=ports, detect=detect, glob=glob)
        write_local_tables(group, out)
        summary.notes.append(_groups_note({name: table.num_rows for name, table in group.items()}))
    return summary


def run_segments_local(
    inputs: Iterable[str],
    out: str,
    *,
    glob: Optional[str] = SEGMENT_GLOB,
    mode: str = "overwrite",
    top: int = 10,
    log: Log = _stderr,
) -> Summary:
    """:func:`run_segments` in one process, without Spark (local paths)."""
    from kproto.spark.local import tables_from_segments_local

    _prepare_local_out(out, mode)
    log("decoding log segments in this process")
    tables = tables_from_segments_local(inputs, glob=glob)
    log(f"writing {out}")
    tables.write_parquet(out)
    return summary_from_arrow(tables.tables(), top=top)
