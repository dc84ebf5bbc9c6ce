"""Tables written by the decoding tasks themselves: one Parquet file per task and table, committed by the driver.

Why not ``DataFrame.write``: a decode makes one row per message, and handing those rows to Spark
(Arrow → JVM rows → Parquet writer), persisting them so that three tables can be written from one
decode, and reading the persisted rows back three times cost several times the decode itself.  Here
the task that decodes a range (segments) or a partition of connections (captures) writes its rows
straight to Parquet with pyarrow, as the single-process path does, and hands Spark only a few
statistics rows (:data:`PART_STATS`): the files it wrote and the per-api, per-topic and per-problem-kind
counts the summary needs.  Messages never become JVM rows.

Commit protocol (the shape of Hadoop's file output committer, without its JVM side):

1. the driver checks the output (:func:`~kproto.spark.table_marker.check_replaceable`) before the
   inputs are planned, deletes the tables ``overwrite`` replaces once they are, and names a staging
   directory per table,
   ``OUT/<table>/_kproto_staging-<job>`` (Spark and pyarrow skip names starting with ``_``);
2. each task attempt writes ``part-<uuid>.parquet`` files there; a failed or speculative attempt's
   files stay unreferenced, because Spark returns the statistics of exactly one attempt per task;
3. the driver moves the files the returned statistics name to ``OUT/<table>/part-<n>-<job>.parquet``,
   writes an empty file with the table's schema where no task wrote any (so ``spark.read.parquet``
   always finds the schema), deletes the staging directories, and writes the table marker.

Executors write through pyarrow's file systems (local paths, ``hdfs://``, ``s3://``, ``gs://``,
``abfs://``; ``s3a://`` is written as ``s3://``); the driver qualifies ``OUT`` with the session's
Hadoop FileSystem first, so both sides mean the same directory, and then works through that
FileSystem, or, when ``OUT`` is on this machine (``file:``), with Python's own file functions (each
Hadoop call is a JVM round trip; a commit makes a few dozen).
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Set, Tuple

import pyarrow as pa

from kproto.spark.schema import TABLES
from kproto.spark.summary import SummaryCounts

__all__ = ["PART_STATS", "TaskWriter", "WrittenTables", "ParquetOutput", "pyarrow_path"]

#: What a writing task returns, one row per: file written (``what`` = "file": table, key = file name,
#: count = rows), api ("api": key = api name, count, bytes, errors, latencies), topic ("topic": key =
#: topic, count, bytes) and problem kind ("kind": key = kind, count) of the rows it wrote
#: (:class:`~kproto.spark.summary.SummaryCounts`).
PART_STATS = pa.schema(
    [
        ("what", pa.string()),
        ("table", pa.string()),
        ("key", pa.string()),
        ("count", pa.int64()),
        ("bytes", pa.int64()),
        ("errors", pa.int64()),
        ("latencies", pa.list_(pa.float64())),
    ]
)

#: Rows gathered before a table's rows are written as one Parquet row group.
_GROUP_ROWS = 1 << 17
_GROUP_BYTES = 64 << 20

#: Schemes pyarrow knows under another name than Hadoop.
_PYARROW_SCHEMES = {"s3a": "s3", "s3n": "s3"}

Pairs = Iterable[Tuple[str, pa.RecordBatch]]


def pyarrow_path(uri: str) -> Tuple[Any, str]:
    """``(pyarrow FileSystem, path in it)`` for a local path or a URI as Hadoop qualifies it."""
    import pyarrow.fs as pafs

    if "://" not in uri and not uri.startswith("file:"):
        return pafs.LocalFileSystem(), uri
    scheme, rest = uri.split(":", 1)
    fs, path = pafs.FileSystem.from_uri(_PYARROW_SCHEMES.get(scheme, scheme) + ":" + rest)
    return fs, str(path)


class _TableFile:
    """One table's Parquet file of one task, opened on its first rows."""

    def __init__(self, directory: str, schema: pa.Schema) -> None:
        self.name = f"part-{uuid.uuid4().hex}.parquet"
        self.schema = schema
        self.rows = 0
        self._directory = directory
        self._pending: List[pa.RecordBatch] = []
        self._pending_rows = self._pending_bytes = 0
        self._writer: Any = None
        self._stream: Any = None

    def add(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._pending_rows >= _GROUP_ROWS or self._pending_bytes >= _GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            import pyarrow.parquet as pq

            fs, directory = pyarrow_path(self._directory)
            fs.create_dir(directory, recursive=True)
            self._stream = fs.open_output_stream(directory.rstrip("/") + "/" + self.name)
            self._writer = pq.ParquetWriter(self._stream, self.schema)
        self._writer.write_table(pa.Table.from_batches(self._pending, schema=self.schema))
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._stream.close()


class TaskWriter:
    """A task's side (picklable; Spark ships it): ``decode`` turns the task's input batches into
    ``(table, batch)`` pairs, written to the staging directories (table name → directory URI) of the
    tables in it; the result is :data:`PART_STATS` batches."""

    def __init__(self, decode: Callable[[Iterator[Any]], Pairs], staging: Dict[str, str]) -> None:
        self.decode = decode
        self.staging = dict(staging)

    def __call__(self, batches: Iterator[Any]) -> Iterator[pa.RecordBatch]:
        files: Dict[str, _TableFile] = {}
        counts = SummaryCounts()
        try:
            for table, batch in self.decode(batches):
                if not batch.num_rows:
                    continue
                counts.add(table, batch)
                directory = self.staging.get(table)
                if directory is None:
                    continue  # a table this run does not write (mode "ignore" and it exists)
                out = files.get(table)
                if out is None:
                    out = files[table] = _TableFile(directory, TABLES[table])
                out.add(batch)
        finally:
            for out in files.values():
                out.close()
        rows: List[Tuple[Any, ...]] = [
            ("file", table, out.name, out.rows, None, None, None) for table, out in files.items()
        ]
        rows.extend(
            ("api", "exchanges", api, count, size, errors, pa.concat_arrays(latencies).to_pylist() if latencies else [])
            for api, (count, size, errors, latencies) in counts.apis.items()
        )
        rows.extend(
            ("topic", "messages", topic, count, size, None, None) for topic, (count, size) in counts.topics.items()
        )
        rows.extend(("kind", "problems", kind, count, None, None, None) for kind, count in counts.kinds.items())
        if rows:
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, f.type) for c, f in zip(zip(*rows), PART_STATS)], schema=PART_STATS
            )


@dataclass
class WrittenTables:
    """What a run wrote: the committed Parquet files per table (URIs), their rows, the summary's counts."""

    files: Dict[str, List[str]] = field(default_factory=dict)
    rows: Dict[str, int] = field(default_factory=dict)
    counts: SummaryCounts = field(default_factory=SummaryCounts)


class ParquetOutput:
    """The driver's side: prepare ``out`` for ``mode``, hand out a :class:`TaskWriter`, commit."""

    def __init__(self, spark: Any, out: str, mode: str, log: Callable[[str], None]) -> None:
        from kproto.spark.hadoop_fs import HadoopFileSystem
        from kproto.spark.inputs import display_path
        from kproto.spark.table_marker import REPLACING_MODES, LocalFileSystem, check_replaceable

        hadoop = HadoopFileSystem(spark)
        self._log = log
        self.job = uuid.uuid4().hex[:12]
        self.out = hadoop.qualify(out).rstrip("/")
        self._fs: Any = hadoop
        if self.out.startswith("file:"):
            # This machine's files: the driver's checks, moves and deletes need no JVM round trips.
            self.out, self._fs = display_path(self.out), LocalFileSystem()
        self.paths = {name: f"{self.out}/{name}" for name in TABLES}
        existing = {name for name, path in self.paths.items() if self._fs.kind(path) is not None}
        if mode in ("error", "errorifexists") and existing:
            first = self.paths[sorted(existing)[0]]
            raise FileExistsError(17, "Output exists (use --mode overwrite, append or ignore)", first)
        if mode in REPLACING_MODES:
            for name, path in self.paths.items():
                check_replaceable(self._fs, path, name)
        if mode not in REPLACING_MODES | {"error", "errorifexists", "ignore"}:
            raise ValueError(f"unknown save mode {mode!r}")
        self.writing: Set[str] = set(TABLES) - existing if mode == "ignore" else set(TABLES)
        self._replacing = sorted(existing) if mode == "overwrite" else []
        self.staging = {name: f"{self.paths[name]}/_kproto_staging-{self.job}" for name in sorted(self.writing)}
        #: The job's intermediate files (a directory beside the tables, removed by commit and abort).
        self.scratch = f"{self.out}/_kproto_spill-{self.job}"

    def task_writer(self, decode: Callable[[Iterator[Any]], Pairs]) -> TaskWriter:
        """The tasks' writer; ``overwrite`` deletes the old tables now, when the inputs have been planned."""
        for name in self._replacing:
            self._fs.delete(self.paths[name])
        self._replacing = []
        return TaskWriter(decode, self.staging)

    def commit(self, stats: Iterable[Any]) -> WrittenTables:
        """Move the files named by the tasks' ``stats`` rows into the tables; markers last."""
        from kproto.spark.table_marker import MARKER, marker_text

        written = WrittenTables(files={name: [] for name in TABLES}, rows={name: 0 for name in TABLES})
        numbers = {name: 0 for name in TABLES}
        counts = written.counts
        for what, table, key, count, size, errors, latencies in stats:
            if what == "api":
                counts.add_api(key, count, size or 0, errors or 0, latencies or [])
            elif what == "topic":
                counts.add_topic(key, count, size or 0)
            elif what == "kind":
                counts.add_kind(key, count)
            else:
                target = f"{self.paths[table]}/part-{numbers[table]:05d}-{self.job}.parquet"
                numbers[table] += 1
                self._fs.rename(f"{self.staging[table]}/{key}", target)
                written.files[table].append(target)
                written.rows[table] += count
        for name in sorted(self.writing):
            if not written.files[name]:
                target = f"{self.paths[name]}/part-00000-{self.job}.parquet"
                self._fs.write_bytes(target, _empty_parquet(TABLES[name]))
                written.files[name].append(target)
            self._fs.delete(self.staging[name])
            self._fs.write_text(f"{self.paths[name]}/{MARKER}", marker_text(name))
            self._log(f"wrote {self.paths[name]} ({written.rows[name]} rows, {len(written.files[name])} file(s))")
        self._fs.delete(self.scratch)
        return written

    def abort(self) -> None:
        """Delete the staging and scratch directories (after a failed job)."""
        for directory in [*self.staging.values(), self.scratch]:
            try:
                self._fs.delete(directory)
            except Exception:  # the job's own error is the one to report
                pass


def _empty_parquet(schema: pa.Schema) -> bytes:
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(schema.empty_table(), sink)
    return sink.getvalue()
