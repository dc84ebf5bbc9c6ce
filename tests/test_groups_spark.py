"""The Spark ``group_events`` / ``rebalances`` tables equal the single-process twin's rows."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest

from kproto.spark.group_tables import GROUP_TABLES, group_tables, group_tables_local, server_key
from test_groups_analysis import SAMPLES, modern_capture, slow_member_capture


def rows(table: Any) -> List[Dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: repr(sorted(r.items())))


def captures(tmp_path: Path, modern: bool = True) -> Path:
    directory = tmp_path / "captures"
    directory.mkdir()
    slow, _ = slow_member_capture(tmp_path)
    shutil.copy(slow, directory / "slow.pcap")
    if modern:
        shutil.copy(modern_capture(tmp_path), directory / "modern.pcapng")
    shutil.copy(SAMPLES / "consumer_group.pcapng", directory / "sample.pcapng")
    return directory


def test_local_rows_hold_the_known_facts(tmp_path: Path) -> None:
    tables = group_tables_local([str(captures(tmp_path))])
    rebalances = {(r["group_id"], r["generation"]): r for r in tables["rebalances"].to_pylist()}
    assert set(rebalances) == {
        ("payments", 1),
        ("payments", 2),
        ("payments", 3),
        ("shipping", 1),
        ("shipping", 2),
        ("billing", 1),
        ("billing", 2),
    }
    assert rebalances[("payments", 3)]["waited_for"] == "consumer-b-2"
    assert rebalances[("payments", 3)]["expired"] == ["consumer-b-2"]
    assert rebalances[("shipping", 2)]["duration_ms"] == pytest.approx(2032.0)
    assert rebalances[("billing", 2)]["waited_ms"] == pytest.approx(224.001)
    events = tables["group_events"].to_pylist()
    assert {e["api_name"] for e in events} >= {
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "OffsetCommit",
        "LeaveGroup",
        "ConsumerGroupHeartbeat",
    }
    assert tables["group_events"].schema == GROUP_TABLES["group_events"]


def test_server_key() -> None:
    assert server_key("10.0.0.1", 9092, "10.0.0.9", 51000, {9092}) == "10.0.0.1:9092"
    assert server_key("10.0.0.1", 51000, "10.0.0.9", 9092, {9092}) == "10.0.0.9:9092"
    assert server_key("10.0.0.1", 51000, "10.0.0.9", 9093, {9092}) == "10.0.0.9:9093"  # lower port


@pytest.mark.spark
def test_spark_group_tables_equal_the_single_process_rows(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from kproto.spark.job import run_captures, run_captures_local, spark_session
    from kproto.spark.table_marker import MARKER

    directory = captures(tmp_path, modern=False)  # two coordinators, two files: enough for Spark's part
    local = group_tables_local([str(directory)])
    spark = spark_session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "3",
            "spark.default.parallelism": "2",
        },
    )
    try:
        frames = group_tables(spark, [str(directory)], partitions=2)
        for name, frame in frames.items():
            arrow = frame.toArrow()
            assert arrow.schema.names == local[name].schema.names, name
            assert rows(arrow) == rows(local[name]), name
            assert len(arrow), name
        # the job (kproto spark captures --groups) writes them beside the other tables, as --local does
        summaries = {}
        for where, run in (
            ("spark", lambda out: run_captures(spark, [str(directory)], out, groups=True, log=quiet)),
            ("local", lambda out: run_captures_local([str(directory)], out, groups=True, log=quiet)),
        ):
            out = str(tmp_path / where)
            summaries[where] = run(out)
            for name in GROUP_TABLES:
                written = pq.read_table(f"{out}/{name}")
                assert rows(written.select(local[name].schema.names)) == rows(local[name]), (where, name)
                assert (Path(out) / name / MARKER).exists()
        counts = f"{len(local['group_events'])} group_events rows, {len(local['rebalances'])} rebalances rows"
        assert all(any(counts in note for note in s.notes) for s in summaries.values())
    finally:
        spark.stop()


def quiet(line: str) -> None:
    pass
