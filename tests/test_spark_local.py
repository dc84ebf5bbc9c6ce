"""kproto.spark without a Spark session: the single-process tables, the two pipeline stages run by
hand, log segments, the summary and the ``--local`` command."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any, Dict, List

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kproto.capture.conversation import Exchange, Problem, ProblemKind, decode_capture
from kproto.records import decode_message_set
from kproto.spark import cli_command
from kproto.spark.inputs import capture_order_key, display_path, topic_partition
from kproto.message_facts import message_facts
from kproto.spark.local import LocalTables, tables_from_captures_local, tables_from_segments_local
from kproto.spark.schema import TABLES
from kproto.spark.segment_rows import segment_batches
from kproto.spark.summary import summary_from_arrow
from test_spark_data import (
    capture_bytes,
    conversations,
    stage_by_hand,
    write_damaged,
    write_rotated,
    write_segments_dir,
)

pytestmark = pytest.mark.spark

NAMES = ["rot.pcap9", "rot.pcap10", "rot.pcap11"]  # time order differs from name order


def rows(table: pa.Table, drop: tuple = ()) -> List[Dict[str, Any]]:
    """Rows in a canonical order (the pipelines promise the same rows, not the same order)."""
    out = [{k: v for k, v in r.items() if k not in drop} for r in table.to_pylist()]
    return sorted(out, key=lambda r: repr(sorted(r.items())))


@pytest.fixture(scope="module")
def rotated(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = str(tmp_path_factory.mktemp("rotated"))
    write_rotated(directory, conversations(), NAMES)
    return directory


@pytest.fixture(scope="module")
def local(rotated: str) -> LocalTables:
    return tables_from_captures_local([rotated])


def test_rotated_files_are_read_in_capture_time_order(local: LocalTables, rotated: str) -> None:
    assert local.files == [os.path.join(rotated, n) for n in NAMES]


def test_rotated_files_decode_like_the_unsplit_capture(local: LocalTables, tmp_path: Any) -> None:
    whole = tmp_path / "whole.pcap"
    whole.write_bytes(capture_bytes(conversations()))
    single = tables_from_captures_local([str(whole)])
    where = ("file", "packet", "response_file", "response_packet")
    assert rows(local.exchanges, where) == rows(single.exchanges, where)
    assert rows(local.messages, ("file",)) == rows(single.messages, ("file",))
    assert rows(local.problems, ("file", "packet")) == rows(single.problems, ("file", "packet"))
    # The ~14 kB Produce request was cut between the first two files and still decoded.
    big = [r for r in local.exchanges.to_pylist() if r["request_size"] > 10000]
    assert len(big) == 1 and big[0]["file"].endswith("rot.pcap10") and big[0]["response_size"]
    assert sum(1 for r in local.messages.to_pylist() if r["exchange_id"] == big[0]["exchange_id"]) == 60


def test_exchanges_match_the_library_decode(local: LocalTables) -> None:
    records = list(decode_capture(capture_bytes(conversations())))
    exchanges = [r for r in records if isinstance(r, Exchange)]
    expect = sorted(
        (
            str(e.client),
            str(e.server),
            e.api_key,
            e.api_name,
            e.api_version,
            e.correlation_id,
            e.request_size,
            e.response_size,
            None if e.latency_ns is None else e.latency_ns / 1e6,
            e.expects_response,
        )
        for e in exchanges
    )
    got = sorted(
        (
            r["client"],
            r["server"],
            r["api_key"],
            r["api_name"],
            r["api_version"],
            r["correlation_id"],
            r["request_size"],
            r["response_size"],
            r["latency_ms"],
            r["expects_response"],
        )
        for r in local.exchanges.to_pylist()
    )
    assert got == expect
    problems = sorted((p.kind.value, p.detail, p.offset) for p in records if isinstance(p, Problem))
    assert sorted((r["kind"], r["detail"], r["stream_offset"]) for r in local.problems.to_pylist()) == problems


def test_messages_match_the_library_decode(local: LocalTables) -> None:
    expect = []
    for e in decode_capture(capture_bytes(conversations())):
        if not isinstance(e, Exchange):
            continue
        if e.api_key == 0 and e.request is not None:
            sets = [(t.name, p.index, p.records, "request") for t in e.request.topic_data for p in t.partition_data]
        elif e.api_key == 1 and e.response is not None:
            sets = [
                (t.topic, p.partition_index, p.records, "response") for t in e.response.responses for p in t.partitions
            ]
        else:
            continue
        for topic, partition, records, direction in sets:
            for m in decode_message_set(records.raw):
                expect.append((topic, partition, direction, m.offset, m.key, m.value, m.magic))
    got = [
        (r["topic"], r["partition"], r["direction"], r["offset"], r["key"], r["value"], r["magic"])
        for r in local.messages.to_pylist()
    ]
    assert sorted(got, key=repr) == sorted(expect, key=repr)
    assert {r["codec"] for r in local.messages.to_pylist()} == {"none", "gzip", "snappy", "lz4"}
    assert all(r["crc_ok"] for r in local.messages.to_pylist())


def test_exchange_facts_carry_topics_and_error_codes(local: LocalTables) -> None:
    by_api: Dict[str, List[Dict[str, Any]]] = {}
    for r in local.exchanges.to_pylist():
        by_api.setdefault(r["api_name"], []).append(r)
    assert [r["error_code"] for r in by_api["Heartbeat"]] == [27]
    assert {"topic": "orders", "partition": 0, "error_code": 1} in sum(
        (r["partition_errors"] for r in by_api["Fetch"]), []
    )
    assert {"topic": "missing", "partition": 0, "error_code": 3} in sum(
        (r["partition_errors"] for r in by_api["Produce"]), []
    )
    assert {"topic": "audit", "partition": None, "error_code": 5} in sum(
        (r["partition_errors"] for r in by_api["Metadata"]), []
    )
    assert ["audit", "orders"] in [r["topics"] for r in by_api["Metadata"]]
    empty = message_facts(None, None)
    assert (sorted(empty.topics), empty.error_code, empty.partition_errors) == ([], None, [])


def test_connection_reuse_gets_a_second_name(local: LocalTables) -> None:
    names = {r["connection"] for r in local.exchanges.to_pylist() if ":41004>" in r["connection"]}
    assert names == {"10.9.0.24:41004>10.9.0.10:9092#1", "10.9.0.24:41004>10.9.0.10:9092#2"}


@pytest.mark.parametrize("partitions,seed", [(1, 1), (3, 2)])
def test_the_two_stages_give_the_local_rows(
    local: LocalTables, rotated: str, tmp_path: Any, partitions: int, seed: int
) -> None:
    damaged = write_damaged(str(tmp_path))
    reference = tables_from_captures_local([rotated, str(tmp_path)])
    staged = stage_by_hand(reference.files, partitions, seed=seed)
    for name in TABLES:
        assert rows(staged[name]) == rows(reference.tables()[name]), name
    assert {r["file"] for r in reference.problems.to_pylist() if r["kind"] == "capture"} == {
        damaged["truncated"],
        damaged["text"],
    }


def test_damaged_files_become_problems(tmp_path: Any, rotated: str) -> None:
    damaged = write_damaged(str(tmp_path))
    tables = tables_from_captures_local([rotated, str(tmp_path)])
    capture = {r["file"]: r for r in tables.problems.to_pylist() if r["kind"] == "capture"}
    assert set(capture) == {damaged["truncated"], damaged["text"]}  # empty files are not read (as in Spark)
    assert damaged["empty"] not in tables.files
    assert capture[damaged["text"]]["detail"].startswith("not-a-capture")
    assert capture[damaged["truncated"]]["detail"].startswith("truncated-file")
    assert capture[damaged["truncated"]]["file_offset"] is not None
    # The truncated file's complete packets still decoded (its heartbeat exchange is there).
    assert any(r["file"] == damaged["truncated"] for r in tables.exchanges.to_pylist())


def test_segments_decode_and_report_a_truncated_tail(tmp_path: Any) -> None:
    files = write_segments_dir(str(tmp_path))
    tables = tables_from_segments_local([str(tmp_path)])
    assert sorted(tables.files) == sorted(files.values())  # .index files skipped
    counts: Dict[Any, int] = {}
    for r in tables.messages.to_pylist():
        counts[(r["topic"], r["partition"])] = counts.get((r["topic"], r["partition"]), 0) + 1
        assert r["exchange_id"] is None and r["direction"] is None and r["time"] is None
    assert counts == {("orders", 0): 27, ("clicks-stream", 3): 9, ("orders", 1): 6 + 3, ("events", 2): 5 + 1}
    (problem,) = tables.problems.to_pylist()
    assert problem["kind"] == "truncated-segment" and problem["file"] == files["truncated"]
    assert problem["file_offset"] is not None and problem["file_offset"] > 0
    offsets = [r["offset"] for r in tables.messages.to_pylist() if r["topic"] == "clicks-stream"]
    assert offsets == list(range(100, 109))
    # Magic 2: the producer facts and headers the batch was written with; the commit marker is a control row.
    events = [r for r in tables.messages.to_pylist() if r["topic"] == "events"]
    assert [(r["offset"], r["sequence"], r["is_control"], r["codec"]) for r in events] == [
        (40 + i, 17 + i, False, "zstd") for i in range(5)
    ] + [(45, -1, True, "none")]
    assert {(r["producer_id"], r["producer_epoch"], r["is_transactional"]) for r in events} == {(4242, 3, True)}
    assert [r["headers"] for r in events[:3]] == [
        [],
        [{"key": "trace", "value": b"t1"}],
        [{"key": "trace", "value": b"t2"}, {"key": "empty", "value": None}],
    ]
    older = [r for r in tables.messages.to_pylist() if r["magic"] < 2]
    assert {(r["producer_id"], r["sequence"], r["is_transactional"], len(r["headers"])) for r in older} == {
        (-1, -1, False, 0)
    }


def test_segment_chunks_give_the_same_rows(tmp_path: Any) -> None:
    path = write_segments_dir(str(tmp_path))["good0"]
    data = open(path, "rb").read()
    whole = pa.Table.from_batches([b for _, b in segment_batches(path, data)])
    chunked = pa.Table.from_batches([b for _, b in segment_batches(path, data, chunk_bytes=64)])
    assert chunked.to_pylist() == whole.to_pylist() and whole.num_rows == 27


def test_corrupt_segment_skips_the_damaged_entry_by_its_length(tmp_path: Any) -> None:
    path = write_segments_dir(str(tmp_path))["good0"]
    data = bytearray(open(path, "rb").read())
    first = 12 + int.from_bytes(data[8:12], "big")
    data[first + 12 + 4 + 1] = 0x07  # attributes of the second message: unknown codec
    out = list(segment_batches(path, bytes(data)))
    messages = pa.Table.from_batches([b for name, b in out if name == "messages"])
    problems = [b for name, b in out if name == "problems"]
    assert messages.num_rows == 26 and 1 not in messages.column("offset").to_pylist()
    assert problems[0].column("kind").to_pylist() == ["corrupt-segment"]
    assert problems[0].column("file_offset").to_pylist() == [first]
    # A damaged length leaves no boundary to trust: the rest of the file is skipped.
    data[first + 8 : first + 12] = (1 << 30).to_bytes(4, "big")
    data[first + 12 + 4] = 9  # and the magic byte, so the decoder refuses the entry
    out = list(segment_batches(path, bytes(data)))
    assert sum(b.num_rows for name, b in out if name == "messages") == 1


def test_paths_and_names() -> None:
    assert display_path("file:/data/cap/a.pcap") == "/data/cap/a.pcap"
    assert display_path("file:///data/cap/a.pcap") == "/data/cap/a.pcap"
    assert display_path("hdfs://nn:8020/cap/a.pcap") == "hdfs://nn:8020/cap/a.pcap"
    assert topic_partition("/logs/my-topic-12/00000000000000000000.log") == ("my-topic", 12)
    assert topic_partition("s3a://b/logs/weird/0.log") == (None, None)
    assert sorted([(5, "b"), (None, "z"), (1, "c")], key=lambda t: capture_order_key(*t)) == [
        (None, "z"),
        (1, "c"),
        (5, "b"),
    ]


def test_summary_of_the_local_tables(local: LocalTables) -> None:
    summary = summary_from_arrow(local.tables())
    apis = {a.api: a for a in summary.apis}
    assert apis["Produce"].count == 9 and apis["Produce"].errors == 1
    assert apis["Heartbeat"].errors == 1 and apis["Fetch"].errors == 1
    assert apis["Metadata"].p50_ms == pytest.approx(3.0)
    assert summary.topics[0].topic == "orders"
    assert summary.problems == {"unanswered-request": 1} and summary.damage_count == 0
    text = summary.format()
    assert "Produce" in text and "unanswered-request 1" in text and "top topics" in text


def test_tls_and_unpaired_frames_are_not_damage() -> None:
    """What makes ``kproto spark`` exit 1 is what makes ``kproto pcap`` exit 1: a TLS connection on a Kafka
    port (the bundled TLS sample) or an unpaired frame is a fact about the traffic, not damaged input."""
    from kproto.cli.pcap import FAILURE_KINDS
    from kproto.spark.summary import Summary

    problems = {"tls-encrypted": 1, "tls-mismatch": 1, "unanswered-request": 2, "response-without-request": 1}
    assert Summary(problems=problems).damage_count == 0
    assert Summary(problems={**problems, "decode-error": 3}).damage_count == 3
    assert {kind.value for kind in FAILURE_KINDS} | set(problems) == {kind.value for kind in ProblemKind}


def _cli(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="kproto spark")
    cli_command.add_arguments(parser)
    return cli_command.run(parser.parse_args(argv))


def test_local_command_writes_the_tables(
    rotated: str, local: LocalTables, tmp_path: Any, capsys: pytest.CaptureFixture
) -> None:
    out = str(tmp_path / "out")
    assert _cli(["captures", rotated, "--out", out, "--local"]) == 0
    for name in TABLES:
        assert rows(pq.read_table(os.path.join(out, name))) == rows(local.tables()[name])
    captured = capsys.readouterr()
    assert "Produce" in captured.out and "completed" in captured.err
    assert _cli(["captures", rotated, "--out", out, "--local", "--mode", "error"]) == 2


def test_local_command_reports_damage_and_missing_inputs(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    os.makedirs(tmp_path / "in")
    write_damaged(str(tmp_path / "in"))
    assert _cli(["captures", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--local"]) == 1
    assert "problems" in capsys.readouterr().err
    assert _cli(["segments", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2"), "--local"]) == 2


def test_importing_kproto_imports_neither_pyspark_nor_pyarrow() -> None:
    code = "import sys, kproto, kproto.spark; print('pyspark' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_overwrite_replaces_only_kproto_tables(rotated: str, tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    assert _cli(["captures", rotated, "--out", str(out), "--local"]) == 0
    assert _cli(["captures", rotated, "--out", str(out), "--local"]) == 0  # its own tables: replaced
    # A user's directory where a table would go: refused before anything is deleted.
    (out / "messages" / "_KPROTO_TABLE").unlink()
    (out / "messages" / "thesis.tex").write_text("years of work")
    capsys.readouterr()
    assert _cli(["captures", rotated, "--out", str(out), "--local"]) == 2
    assert "not a table kproto wrote" in capsys.readouterr().err
    assert (out / "messages" / "thesis.tex").read_text() == "years of work"
    assert (out / "exchanges" / "part-00000.parquet").exists()  # nothing else was deleted either
    # Another table's marker, or a plain file, is refused too.
    other = tmp_path / "other"
    (other / "problems").mkdir(parents=True)
    (other / "problems" / "_KPROTO_TABLE").write_text('{"writer": "kproto", "table": "messages"}')
    (other / "problems" / "keep").write_text("x")
    assert _cli(["captures", rotated, "--out", str(other), "--local"]) == 2
    (other / "exchanges").write_text("a file")
    assert _cli(["captures", rotated, "--out", str(other), "--local"]) == 2
    assert (other / "exchanges").read_text() == "a file" and (other / "problems" / "keep").exists()


def test_captures_command_skips_files_that_are_not_captures(
    rotated: str, tmp_path: Any, capsys: pytest.CaptureFixture
) -> None:
    inputs = tmp_path / "in"
    os.makedirs(inputs)
    for name in os.listdir(rotated):
        with open(os.path.join(rotated, name), "rb") as src, open(inputs / name, "wb") as dst:
            dst.write(src.read())
    (inputs / "NOTES.txt").write_text("where these captures come from\n")
    out = str(tmp_path / "out")
    assert _cli(["captures", str(inputs), "--out", out, "--local"]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if line.startswith("kproto spark: skipping")]
    assert len(skipped) == 1 and "NOTES.txt" in skipped[0] and "not a pcap or pcapng capture" in skipped[0]
    problems = pq.read_table(os.path.join(out, "problems")).to_pylist()
    assert not any("NOTES.txt" in (r["file"] or "") for r in problems)


def test_a_writing_task_writes_the_rows_and_counts_the_summary(local: LocalTables, tmp_path: Any) -> None:
    # Stage 2 as a Spark task runs it (no Spark): decode, write one Parquet file per table, return
    # statistics; tasks' counts merged in any order give the single-process summary.
    from kproto.spark.capture_plan import plan_ranges
    from kproto.spark.capture_stages import CONNECTION_KEY, READING_ORDER, SEGMENTS, extract_segments
    from kproto.spark.capture_tables import Stage2
    from kproto.spark.summary import SummaryCounts
    from kproto.spark.table_writer import TaskWriter

    ranges = plan_ranges([(f, os.path.getsize(f)) for f in local.files], split_bytes=4096)
    segments = pa.Table.from_batches([b for r in ranges for b in extract_segments(r)], schema=SEGMENTS)
    segments = segments.sort_by([(k, "ascending") for k in CONNECTION_KEY + READING_ORDER])
    half = segments.num_rows // 2
    cut = next(
        i
        for i in range(half, segments.num_rows)  # two tasks: a connection is never cut
        if segments.slice(i, 1).select(list(CONNECTION_KEY)).to_pylist()
        != segments.slice(i - 1, 1).select(list(CONNECTION_KEY)).to_pylist()
    )
    staging = {name: str(tmp_path / name) for name in TABLES}
    stats = []
    for part in (segments.slice(cut), segments.slice(0, cut)):
        stats.extend(b for b in TaskWriter(Stage2([9092], True), staging)(iter(part.to_batches(max_chunksize=3))))
    counts = SummaryCounts()
    files: Dict[str, int] = {}
    for row in pa.Table.from_batches(stats).to_pylist():
        if row["what"] == "file":
            files[row["table"]] = files.get(row["table"], 0) + 1
            assert pq.read_table(os.path.join(staging[row["table"]], row["key"])).num_rows == row["count"]
        elif row["what"] == "api":
            counts.add_api(row["key"], row["count"], row["bytes"], row["errors"], row["latencies"])
        elif row["what"] == "topic":
            counts.add_topic(row["key"], row["count"], row["bytes"])
        else:
            counts.add_kind(row["key"], row["count"])
    assert files == {"exchanges": 2, "messages": 2, "problems": 1}
    for name in TABLES:
        assert rows(pq.read_table(staging[name], schema=TABLES[name])) == rows(local.tables()[name]), name
    assert counts.summary() == summary_from_arrow(local.tables())
