"""Kafka captures and log segments to Parquet tables, on Spark or in one process (``kproto[spark]``).

Tables (:mod:`kproto.spark.schema`): ``exchanges`` (one row per request, paired response when there
is one), ``messages`` (one row per message of Produce requests, Fetch responses or log segments) and
``problems`` (gaps, unpaired frames, decode errors, damaged files, with file and position).

* On Spark, from any SparkSession: :func:`capture_tables` / :func:`segment_tables` give DataFrames;
  :func:`run_captures` / :func:`run_segments` also write Parquet and return a :class:`Summary`;
  :func:`spark_session` builds a session (``local[*]`` by default).
* In one process (the reference the Spark tables are tested against): :func:`tables_from_captures_local`
  / :func:`tables_from_segments_local` give pyarrow tables; :func:`run_captures_local` /
  :func:`run_segments_local` write them.

Names load on first use, so importing this package imports neither pyspark nor pyarrow; the
single-process path needs pyarrow only.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "capture_tables",
    "segment_tables",
    "SparkTables",
    "spark_session",
    "write_tables",
    "run_captures",
    "run_segments",
    "run_captures_local",
    "run_segments_local",
    "tables_from_captures_local",
    "tables_from_segments_local",
    "LocalTables",
    "Summary",
    "summary_from_arrow",
    "summary_from_spark",
    "EXCHANGES",
    "MESSAGES",
    "PROBLEMS",
]

_HOMES = {
    "capture_tables": "capture_tables",
    "segment_tables": "segment_tables",
    "SparkTables": "table_union",
    "spark_session": "job",
    "write_tables": "job",
    "run_captures": "job",
    "run_segments": "job",
    "run_captures_local": "job",
    "run_segments_local": "job",
    "tables_from_captures_local": "local",
    "tables_from_segments_local": "local",
    "LocalTables": "local",
    "Summary": "summary",
    "summary_from_arrow": "summary",
    "summary_from_spark": "summary",
    "EXCHANGES": "schema",
    "MESSAGES": "schema",
    "PROBLEMS": "schema",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kproto.spark' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kproto.spark.{home}"), name)


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
