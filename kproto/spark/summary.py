"""The summary printed after a run: per api count, bytes, p50/p99 latency and errors; top topics; problems.

Computed from the tables themselves, with Spark aggregations on the Spark path
(``percentile_approx``) and pyarrow on the single-process path (exact quantiles, nearest rank), so it
costs a scan of the exchanges and messages, not a second decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["ApiSummary", "TopicSummary", "Summary", "summary_from_arrow", "summary_from_spark", "summary_from_parts",
           "PAIRING_KINDS"]

#: Problem kinds that say a request or response went unpaired; the others mean damaged input.
PAIRING_KINDS = frozenset({"unanswered-request", "response-without-request"})


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
        """Problems that mean damaged input or undecodable frames (not mere unpaired frames)."""
        return sum(n for kind, n in self.problems.items() if kind not in PAIRING_KINDS)

    def format(self) -> str:
        """A plain-text report."""
        lines = [f"NOTE: {note}" for note in self.notes]
        lines.append(f"{self.exchanges} exchanges, {self.messages} messages, {self.problem_count} problems")
        if self.apis:
            lines.append(f"{'api':<20} {'count':>10} {'bytes':>12} {'p50 ms':>10} {'p99 ms':>10} {'errors':>8}")
            for a in self.apis:
                lines.append(f"{a.api:<20} {a.count:>10} {a.bytes:>12} {_ms(a.p50_ms):>10} {_ms(a.p99_ms):>10} "
                             f"{a.errors:>8}")
        if self.topics:
            lines.append(f"{'top topics':<32} {'messages':>10} {'bytes':>12}")
            for t in self.topics:
                lines.append(f"{str(t.topic):<32} {t.messages:>10} {t.bytes:>12}")
        if self.problems:
            lines.append("problems: " + ", ".join(f"{kind} {n}" for kind, n in sorted(self.problems.items())))
        return "\n".join(lines)


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


def summary_from_arrow(tables: Dict[str, pa.Table], *, top: int = 10) -> Summary:
    """The summary of pyarrow tables (the single-process path)."""
    ex, msgs, problems = tables["exchanges"], tables["messages"], tables["problems"]
    apis = []
    names = ex.column("api_name")
    frame_bytes = pc.add(ex.column("request_size"), pc.fill_null(ex.column("response_size"), 0))
    errored = _errored_arrow(ex)
    for api in sorted(set(names.to_pylist())):
        mask = pc.equal(names, api)
        latency = pc.drop_null(pc.filter(ex.column("latency_ms"), mask))
        p50 = p99 = None
        if len(latency):
            p50, p99 = pc.quantile(latency, q=[0.5, 0.99], interpolation="nearest").to_pylist()
        apis.append(ApiSummary(api, pc.sum(pc.cast(mask, pa.int64())).as_py(),
                               pc.sum(pc.filter(frame_bytes, mask)).as_py() or 0, p50, p99,
                               pc.sum(pc.cast(pc.filter(errored, mask), pa.int64())).as_py() or 0))
    topics = []
    if msgs.num_rows:
        sizes = pc.add(pc.fill_null(pc.binary_length(msgs.column("key")), 0),
                       pc.fill_null(pc.binary_length(msgs.column("value")), 0))
        grouped = pa.table({"topic": msgs.column("topic"), "size": pc.cast(sizes, pa.int64())}).group_by(
            "topic", use_threads=False).aggregate([([], "count_all"), ("size", "sum")])
        rows = sorted(grouped.to_pylist(), key=lambda r: (-r["count_all"], str(r["topic"])))[:top]
        topics = [TopicSummary(r["topic"], r["count_all"], r["size_sum"] or 0) for r in rows]
    kinds: Dict[str, int] = {}
    for kind in problems.column("kind").to_pylist():
        kinds[kind] = kinds.get(kind, 0) + 1
    return Summary(apis, topics, kinds, ex.num_rows, msgs.num_rows)


def _errored_arrow(ex: pa.Table) -> pa.ChunkedArray:
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
        topic_rows = msgs.groupBy("topic").agg(F.count(F.lit(1)).alias("messages"), F.sum(size).alias("bytes")).collect()
        kinds = {r["kind"]: r["count"] for r in problems.groupBy("kind").count().collect()}
    topics = {r["topic"]: (r["messages"], r["bytes"] or 0) for r in topic_rows}
    return Summary(apis, _top_topics(topics, top), kinds, sum(a.count for a in apis), sum(r["messages"] for r in topic_rows))


def summary_from_parts(spark: Any, exchange_files: List[str], topics: Dict[Optional[str], Any],
                       kinds: Dict[str, int], *, top: int = 10) -> Summary:
    """The summary of a run whose tasks wrote the tables themselves (:mod:`kproto.spark.table_writer`):
    the exchanges read back from the Parquet files this run wrote (one small job over a few columns),
    topics (topic → messages, bytes) and problem kinds as the tasks counted them."""
    apis: List[ApiSummary] = []
    if exchange_files:
        with _few_shuffle_partitions(spark):
            apis = _api_summaries(spark.read.parquet(*exchange_files))
    return Summary(apis, _top_topics(topics, top), dict(kinds), sum(a.count for a in apis),
                   sum(count for count, _ in topics.values()))


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

    errored = (F.coalesce(F.col("error_code"), F.lit(0)) != 0) \
        | (F.coalesce(F.size("partition_errors"), F.lit(0)) > 0) \
        | F.col("request_error").isNotNull() | F.col("response_error").isNotNull()
    rows = ex.groupBy("api_name").agg(
        F.count(F.lit(1)).alias("count"),
        F.sum(F.col("request_size") + F.coalesce(F.col("response_size"), F.lit(0))).alias("bytes"),
        F.percentile_approx("latency_ms", [0.5, 0.99]).alias("latency"),
        F.sum(F.when(errored, 1).otherwise(0)).alias("errors"),
    ).collect()
    return [ApiSummary(r["api_name"], r["count"], r["bytes"] or 0, *(r["latency"] or [None, None]), r["errors"] or 0)
            for r in sorted(rows, key=lambda r: r["api_name"])]


def _top_topics(topics: Dict[Optional[str], Any], top: int) -> List[TopicSummary]:
    ranked = sorted(topics.items(), key=lambda item: (-item[1][0], item[0] is not None, item[0] or ""))
    return [TopicSummary(topic, count, size) for topic, (count, size) in ranked[:top]]
