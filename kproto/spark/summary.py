"""The summary printed after a run: per api count, bytes, p50/p99 latency and errors; top topics; problems.

Computed from the tables themselves, never by a second decode: :class:`SummaryCounts` counts pyarrow
tables or batches (the single-process path counts its tables; on Spark the writing tasks count what
they write and the driver merges their counts), and :func:`summary_from_spark` aggregates Spark
DataFrames (``percentile_approx``) for the DataFrame API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import pyarrow as pa
import pyarrow.compute as pc

from kproto.capture.conversation import NOT_DAMAGE_KINDS  # a str enum: its members equal their strings

__all__ = ["ApiSummary", "TopicSummary", "Summary", "summary_from_arrow", "summary_from_spark", "SummaryCounts"]


@dataclass
class ApiSummary:
    """One api's exchanges: ``bytes`` counts request and response frames; ``errors`` counts exchanges
    with a non-zero error code (top-level or per partition) or a frame that did not decode."""

    api: str
    count: int
    bytes: int
    p50_ms: Optional[float]
    p99_ms: Optional[float]
    errors: int


@dataclass
class TopicSummary:
    """One topic's messages; ``bytes`` counts keys and values."""

    topic: Optional[str]
    messages: int
    bytes: int


@dataclass
class Summary:
    """What a run produced (see :meth:`format`)."""

    apis: List[ApiSummary] = field(default_factory=list)
    topics: List[TopicSummary] = field(default_factory=list)
    problems: Dict[str, int] = field(default_factory=dict)
    exchanges: int = 0
    messages: int = 0
    #: Warnings about the run itself (e.g. executors on the pure-Python path), printed first.
    notes: List[str] = field(default_factory=list)

    @property
    def problem_count(self) -> int:
        return sum(self.problems.values())

    @property
    def damage_count(self) -> int:
        """Problems that mean damaged input or undecodable frames (not unpaired frames or TLS: the capture
        layer's :data:`~kproto.capture.conversation.NOT_DAMAGE_KINDS`, whose string values the tables hold)."""
        return sum(n for kind, n in self.problems.items() if kind not in NOT_DAMAGE_KINDS)

    def format(self) -> str:
        """A plain-text report."""
        lines = [f"NOTE: {note}" for note in self.notes]
        lines.append(f"{self.exchanges} exchanges, {self.messages} messages, {self.problem_count} problems")
        if self.apis:
            lines.append(f"{'api':<20} {'count':>10} {'bytes':>12} {'p50 ms':>10} {'p99 ms':>10} {'errors':>8}")
            for a in self.apis:
                lines.append(
                    f"{a.api:<20} {a.count:>10} {a.bytes:>12} {_ms(a.p50_ms):>10} {_ms(a.p99_ms):>10} {a.errors:>8}"
                )
        if self.topics:
            lines.append(f"{'top topics':<32} {'messages':>10} {'bytes':>12}")
            for t in self.topics:
                lines.append(f"{str(t.topic):<32} {t.messages:>10} {t.bytes:>12}")
        if self.problems:
            lines.append("problems: " + ", ".join(f"{kind} {n}" for kind, n in sorted(self.problems.items())))
        return "\n".join(lines)


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


class SummaryCounts:
    """Mergeable partial aggregates of the tables, from which :meth:`summary` makes the :class:`Summary`.

    The single-process path counts its whole tables; on Spark each writing task counts the rows it
    wrote (:mod:`kproto.spark.table_writer`) and the driver merges the tasks' counts, so both paths
    give the same summary, with exact (nearest-rank) latency quantiles.  Latencies are kept per api as
    float64 arrays: 8 bytes per exchange reach the driver (100 MB for 12 million exchanges).
    """

    def __init__(self) -> None:
        #: api name -> [exchanges, bytes, errors, [latency arrays]]
        self.apis: Dict[str, List[Any]] = {}
        #: topic -> [messages, bytes of keys and values]
        self.topics: Dict[Optional[str], List[int]] = {}
        #: problem kind -> count
        self.kinds: Dict[str, int] = {}

    def add(self, table: str, rows: Any) -> None:
        """Count a pyarrow Table or RecordBatch of ``table`` (``exchanges``, ``messages``, ``problems``)."""
        if not rows.num_rows:
            return
        if table == "exchanges":
            frame_bytes = pc.add(rows.column("request_size"), pc.fill_null(rows.column("response_size"), 0))
            grouped = (
                pa.table(
                    {
                        "api": rows.column("api_name"),
                        "bytes": pc.cast(frame_bytes, pa.int64()),
                        "errors": pc.cast(_errored_arrow(rows), pa.int64()),
                        "latency": rows.column("latency_ms"),
                    }
                )
                .group_by("api", use_threads=False)
                .aggregate([([], "count_all"), ("bytes", "sum"), ("errors", "sum"), ("latency", "list")])
            )
            for api, count, size, errors, latencies in zip(
                *(
                    c.to_pylist()
                    for c in grouped.select(["api", "count_all", "bytes_sum", "errors_sum", "latency_list"]).columns
                )
            ):
                self.add_api(api, count, size or 0, errors or 0, [x for x in latencies if x is not None])
        elif table == "messages":
            sizes = pc.add(
                pc.fill_null(pc.binary_length(rows.column("key")), 0),
                pc.fill_null(pc.binary_length(rows.column("value")), 0),
            )
            grouped = (
                pa.table({"topic": rows.column("topic"), "size": pc.cast(sizes, pa.int64())})
                .group_by("topic", use_threads=False)
                .aggregate([([], "count_all"), ("size", "sum")])
            )
            for topic, count, size in zip(
                *(c.to_pylist() for c in grouped.select(["topic", "count_all", "size_sum"]).columns)
            ):
                self.add_topic(topic, count, size or 0)
        elif table == "problems":
            for kind in rows.column("kind").to_pylist():
                self.add_kind(kind, 1)

    def add_api(self, api: str, count: int, size: int, errors: int, latencies: Any) -> None:
        total = self.apis.setdefault(api, [0, 0, 0, []])
        total[0] += count
        total[1] += size
        total[2] += errors
        if len(latencies):
            total[3].append(pa.array(latencies, pa.float64()))

    def add_topic(self, topic: Optional[str], count: int, size: int) -> None:
        total = self.topics.setdefault(topic, [0, 0])
        total[0] += count
        total[1] += size

    def add_kind(self, kind: str, count: int) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + count

    def summary(self, *, top: int = 10) -> Summary:
        apis = []
        for api in sorted(self.apis):
            count, size, errors, latencies = self.apis[api]
            p50 = p99 = None
            if latencies:
                p50, p99 = pc.quantile(
                    pa.chunked_array(latencies, pa.float64()), q=[0.5, 0.99], interpolation="nearest"
                ).to_pylist()
            apis.append(ApiSummary(api, count, size, p50, p99, errors))
        return Summary(
            apis,
            _top_topics(self.topics, top),
            dict(self.kinds),
            sum(a.count for a in apis),
            sum(count for count, _ in self.topics.values()),
        )


def summary_from_arrow(tables: Dict[str, pa.Table], *, top: int = 10) -> Summary:
    """The summary of pyarrow tables (the single-process path)."""
    counts = SummaryCounts()
    for name, table in tables.items():
        counts.add(name, table)
    return counts.summary(top=top)


def _errored_arrow(ex: Any) -> Any:
    code = pc.fill_null(pc.not_equal(ex.column("error_code"), 0), False)
    partitions = pc.fill_null(pc.greater(pc.list_value_length(ex.column("partition_errors")), 0), False)
    failed = pc.or_(pc.is_valid(ex.column("request_error")), pc.is_valid(ex.column("response_error")))
    return pc.or_(pc.or_(code, partitions), failed)


def summary_from_spark(frames: Dict[str, Any], *, top: int = 10) -> Summary:
    """The summary of the Spark DataFrames of the three tables.

    Three small jobs (one per table); their aggregates are tiny, so they run with as many shuffle
    partitions as the cluster has cores instead of ``spark.sql.shuffle.partitions`` (200 tasks each
    by default), which dominated the summary's time on small clusters.
    """
    from pyspark.sql import functions as F

    msgs, problems = frames["messages"], frames["problems"]
    with _few_shuffle_partitions(msgs.sparkSession):
        apis = _api_summaries(frames["exchanges"])
        size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
        topic_rows = (
            msgs.groupBy("topic").agg(F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes")).collect()
        )
        kinds = {r["kind"]: r["count"] for r in problems.groupBy("kind").count().collect()}
    topics = {r["topic"]: (r["messages"], r["bytes"] or 0) for r in topic_rows}
    return Summary(
        apis, _top_topics(topics, top), kinds, sum(a.count for a in apis), sum(r["messages"] for r in topic_rows)
    )


class _few_shuffle_partitions:
    """Within the block, as many shuffle partitions as the cluster has cores (the aggregates are tiny)."""

    _KEY = "spark.sql.shuffle.partitions"

    def __init__(self, spark: Any) -> None:
        self._spark = spark

    def __enter__(self) -> None:
        self._previous = self._spark.conf.get(self._KEY)
        self._spark.conf.set(self._KEY, str(max(1, self._spark.sparkContext.defaultParallelism)))

    def __exit__(self, *exc: Any) -> None:
        self._spark.conf.set(self._KEY, self._previous)


def _api_summaries(ex: Any) -> List[ApiSummary]:
    from pyspark.sql import functions as F

    errored = (
        (F.coalesce(F.col("error_code"), F.lit(0)) != 0)
        | (F.coalesce(F.size("partition_errors"), F.lit(0)) > 0)
        | F.col("request_error").isNotNull()
        | F.col("response_error").isNotNull()
    )
    rows = (
        ex.groupBy("api_name")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.col("request_size") + F.coalesce(F.col("response_size"), F.lit(0))).alias("bytes"),
            F.percentile_approx("latency_ms", [0.5, 0.99]).alias("latency"),
            F.sum(F.when(errored, 1).otherwise(0)).alias("errors"),
        )
        .collect()
    )
    summaries = []
    for r in sorted(rows, key=lambda r: r["api_name"]):
        p50, p99 = r["latency"] or (None, None)
        summaries.append(ApiSummary(r["api_name"], r["count"], r["bytes"] or 0, p50, p99, r["errors"] or 0))
    return summaries


def _top_topics(topics: Dict[Optional[str], Any], top: int) -> List[TopicSummary]:
    ranked = sorted(topics.items(), key=lambda item: (-item[1][0], item[0] is not None, item[0] or ""))
    return [TopicSummary(topic, count, size) for topic, (count, size) in ranked[:top]]
