"""The Spark pipeline on a local Spark session: every table equals the single-process tables, for
rotated captures, damaged files and log segments, through the Python API and the command."""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List

import pyarrow.parquet as pq
import pytest

from kproto.spark import cli_command
from kproto.spark.capture_tables import capture_tables
from kproto.spark.job import run_captures, spark_session
from kproto.spark.local import LocalTables, tables_from_captures_local, tables_from_segments_local
from kproto.spark.schema import TABLES
from kproto.spark.segment_tables import segment_tables
from kproto.spark.summary import summary_from_arrow
from test_spark_data import conversations, write_damaged, write_rotated, write_segments_dir

pytestmark = pytest.mark.spark


def rows(table: Any) -> List[Dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: repr(sorted(r.items())))


@pytest.fixture(scope="module")
def spark() -> Any:
    # One small session for the module: the machine is shared, two cores.
    session = spark_session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "3",
            "spark.default.parallelism": "2",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    rotated = str(tmp_path_factory.mktemp("rotated"))
    write_rotated(rotated, conversations(), ["rot.pcap9", "rot.pcap10", "rot.pcap11"])
    damaged = str(tmp_path_factory.mktemp("damaged"))
    write_damaged(damaged)
    segments = str(tmp_path_factory.mktemp("segments"))
    write_segments_dir(segments)
    return {"rotated": rotated, "damaged": damaged, "segments": segments}


@pytest.fixture(scope="module")
def local(inputs: Dict[str, str]) -> LocalTables:
    return tables_from_captures_local([inputs["rotated"], inputs["damaged"]])


def test_capture_tables_equal_the_single_process_tables(spark: Any, inputs: Dict[str, str], local: LocalTables) -> None:
    tables = capture_tables(spark, [inputs["rotated"], inputs["damaged"]])
    try:
        for name, frame in tables.tables().items():
            arrow = frame.toArrow()
            assert arrow.schema.names == TABLES[name].names
            assert rows(arrow) == rows(local.tables()[name]), name
    finally:
        tables.release()
    # The connection that spans the three files was reassembled: one ~14 kB request cut between files.
    producer = [r for r in local.exchanges.to_pylist() if r["connection"].startswith("10.9.0.21:41001>")]
    assert len({r["file"] for r in producer}) == 3 and any(r["request_size"] > 10000 for r in producer)
    assert {r["kind"] for r in local.problems.to_pylist()} == {"capture", "unanswered-request"}


def test_run_writes_parquet_and_a_summary(
    spark: Any, inputs: Dict[str, str], local: LocalTables, tmp_path: Any
) -> None:
    out = str(tmp_path / "tables")
    summary = run_captures(spark, [inputs["rotated"], inputs["damaged"]], out, log=lambda line: None)
    for name in TABLES:
        assert rows(pq.read_table(os.path.join(out, name))) == rows(local.tables()[name]), name
    expect = summary_from_arrow(local.tables())
    assert (summary.exchanges, summary.messages, summary.problems) == (
        expect.exchanges,
        expect.messages,
        expect.problems,
    )
    assert [(a.api, a.count, a.bytes, a.errors) for a in summary.apis] == [
        (a.api, a.count, a.bytes, a.errors) for a in expect.apis
    ]
    assert summary.topics == expect.topics
    metadata = next(a for a in summary.apis if a.api == "Metadata")
    assert metadata.p50_ms == pytest.approx(3.0)
    # The files the tasks wrote are Spark tables: Spark reads them with the tables' own schema, and no
    # staging directory is left behind.
    messages = spark.read.parquet(os.path.join(out, "messages"))
    assert messages.schema.names == TABLES["messages"].names and messages.count() == local.messages.num_rows
    assert not [n for name in TABLES for n in os.listdir(os.path.join(out, name)) if "staging" in n]
    assert sorted(os.listdir(out)) == sorted(TABLES)  # the group tables only when asked for (--groups)
    # append adds this run's files beside the first run's; error refuses an existing output.
    with pytest.raises(FileExistsError):
        run_captures(spark, [inputs["damaged"]], out, mode="error", log=lambda line: None)
    run_captures(spark, [inputs["damaged"]], out, mode="append", log=lambda line: None)
    appended = tables_from_captures_local([inputs["damaged"]])
    for name in TABLES:
        assert (
            pq.read_table(os.path.join(out, name)).num_rows
            == local.tables()[name].num_rows + appended.tables()[name].num_rows
        ), name


def test_the_command_and_the_local_command_agree(
    spark: Any, inputs: Dict[str, str], tmp_path: Any, capsys: pytest.CaptureFixture
) -> None:
    def cli(argv: List[str]) -> int:
        parser = argparse.ArgumentParser(prog="kproto spark")
        cli_command.add_arguments(parser)
        return cli_command.run(parser.parse_args(argv))

    spark_out, local_out = str(tmp_path / "spark"), str(tmp_path / "local")
    args = [
        "captures",
        inputs["rotated"],
        inputs["damaged"],
        "--master",
        "local[2]",
        "--conf",
        "spark.sql.shuffle.partitions=2",
    ]
    assert cli(args + ["--out", spark_out]) == 1  # damaged files: completed, and says so
    assert "completed" in capsys.readouterr().err
    assert cli(args + ["--out", local_out, "--local"]) == 1
    for name in TABLES:
        assert rows(pq.read_table(os.path.join(spark_out, name))) == rows(pq.read_table(os.path.join(local_out, name)))
    assert cli(["segments", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    # Overwriting replaces kproto's own tables, never a directory kproto did not write.
    assert cli(args + ["--out", spark_out]) == 1
    os.remove(os.path.join(spark_out, "problems", "_KPROTO_TABLE"))
    with open(os.path.join(spark_out, "problems", "notes.txt"), "w") as f:
        f.write("mine")
    capsys.readouterr()
    for mode in ("overwrite", "append"):
        assert cli(args + ["--out", spark_out, "--mode", mode]) == 2
        assert "not a table kproto wrote" in capsys.readouterr().err
    assert open(os.path.join(spark_out, "problems", "notes.txt")).read() == "mine"


def test_segment_tables_equal_the_single_process_tables(spark: Any, inputs: Dict[str, str]) -> None:
    reference = tables_from_segments_local([inputs["segments"]])
    tables = segment_tables(spark, [inputs["segments"]])
    try:
        for name, frame in tables.tables().items():
            assert rows(frame.toArrow()) == rows(reference.tables()[name]), name
    finally:
        tables.release()
    (problem,) = reference.problems.to_pylist()
    assert problem["kind"] == "truncated-segment"
    assert reference.messages.num_rows == 27 + 9 + 9 + 6
