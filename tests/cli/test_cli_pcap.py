"""``kproto pcap`` on the sample captures and on damaged ones: lines, JSON schema, filters, exit codes,
progress bar only on a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path
from typing import List

import pytest
from test_cli_usage import SAMPLES, kproto_script, run_kproto

import kproto
from kproto.pcap.writer import Impairments, TcpConversation, write_capture
from kproto.cli import main
from kproto.messages import MetadataRequest, MetadataResponse, ProduceRequest

CAPTURES = sorted(p.name for p in SAMPLES.glob("*.pcap*"))
EXCHANGE_KEYS = {
    "record",
    "connection",
    "client",
    "server",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "client_id",
    "request_time_ns",
    "response_time_ns",
    "latency_ns",
    "request_size",
    "response_size",
    "request_packet",
    "response_packet",
    "expects_response",
    "answered",
    "error_codes",
    "request_header",
    "request",
    "request_error",
    "response_header",
    "response",
    "response_error",
    "sasl_mechanism",
}
PROBLEM_KEYS = {"record", "kind", "detail", "connection", "source", "offset", "packet", "timestamp_ns", "frame"}
SUMMARY_KEYS = {"record", "exchanges", "shown", "sasl_tokens", "problems", "failures", "problems_not_listed"}


def records(capture: Path, *args: str, code: int = 0) -> List[dict]:
    proc = run_kproto("pcap", capture, "--format", "jsonl", *args, check_code=code)
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def exchanges(capture: Path, *args: str) -> List[dict]:
    return [r for r in records(capture, *args) if r["record"] == "exchange"]


def test_sample_captures_exist() -> None:
    assert CAPTURES == ["consumer_group.pcapng", "controlled_shutdown.pcap", "fetch.pcap", "produce.pcap"]


@pytest.mark.parametrize("name", CAPTURES)
def test_text_one_line_per_exchange(name: str) -> None:
    out = run_kproto("pcap", SAMPLES / name, check_code=0).stdout.decode().splitlines()
    count = len(exchanges(SAMPLES / name))
    assert len(out) == count and count > 0
    assert all(" > 10.0.0.10:9092  " in line and "corr=" in line for line in out)


@pytest.mark.parametrize("name", CAPTURES)
def test_jsonl_schema_is_stable(name: str) -> None:
    lines = records(SAMPLES / name)
    assert set(lines[-1]) == SUMMARY_KEYS and lines[-1]["failures"] == 0
    for record in lines[:-1]:
        assert set(record) == (EXCHANGE_KEYS if record["record"] == "exchange" else PROBLEM_KEYS)
    document = json.loads(run_kproto("pcap", SAMPLES / name, "--format", "json", check_code=0).stdout)
    assert set(document) == {"kproto", "format_version", "records", "summary"}
    assert document["records"] == lines[:-1]


def test_producer_capture_content() -> None:
    found = exchanges(SAMPLES / "produce.pcap")
    assert [(e["api_name"], e["api_version"], e["correlation_id"]) for e in found][:3] == [
        ("Metadata", 0, 1),
        ("Metadata", 0, 2),
        ("Produce", 1, 3),
    ]
    assert found[0]["error_codes"] == [5] and found[-1]["error_codes"] == [3]
    acks0 = [e for e in found if not e["expects_response"]]
    assert len(acks0) == 1 and acks0[0]["request"]["acks"] == 0 and acks0[0]["response"] is None
    assert all(e["client_id"] == "producer-1" for e in found)
    assert found[2]["request_header"] == {
        "api_key": 0,
        "api_version": 1,
        "correlation_id": 3,
        "client_id": "producer-1",
    }
    assert found[2]["latency_ns"] == 2_000_000


def test_verbose_expands_compressed_record_sets() -> None:
    fetch = [e for e in exchanges(SAMPLES / "fetch.pcap", "-v") if e["correlation_id"] == 3 and e["api_key"] == 1][0]
    partitions = fetch["response"]["responses"][0]["partitions"]
    p0, p1 = partitions[0]["records"], partitions[1]["records"]
    assert [m["offset"] for m in p0["messages"]] == list(range(7))
    assert [m["codec"] for m in p0["messages"]] == ["none"] * 3 + ["snappy"] * 4
    assert [m["offset"] for m in p1["messages"]] == list(range(8)) and p1["partial"] is True
    text = run_kproto("pcap", SAMPLES / "fetch.pcap", "-v", check_code=0).stdout.decode()
    assert "offset 3: [snappy] key b'p2-key-0'" in text and "partial message at the end" in text


def test_group_capture_content() -> None:
    found = exchanges(SAMPLES / "consumer_group.pcapng")
    names = {e["api_name"] for e in found}
    assert names == {
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "OffsetCommit",
        "OffsetFetch",
        "LeaveGroup",
    }
    assert sorted(c for e in found for c in e["error_codes"]) == [22, 27, 27]
    text = run_kproto("pcap", SAMPLES / "consumer_group.pcapng", check_code=0).stdout.decode()
    assert "errors REBALANCE_IN_PROGRESS(27)" in text and "errors ILLEGAL_GENERATION(22)" in text


def test_controlled_shutdown_v0_has_no_client_id() -> None:
    found = exchanges(SAMPLES / "controlled_shutdown.pcap")
    assert [(e["api_key"], e["api_version"], e["client_id"]) for e in found] == [(7, 0, None), (7, 0, None)]
    assert found[0]["response"]["remaining_partitions"] == [{"topic_name": "orders", "partition_index": 1}]


def filtered(capture: Path, expression: str, capsys: pytest.CaptureFixture) -> List[dict]:
    """Filter semantics run in-process (the console script itself is covered by the other tests)."""
    assert main(["pcap", str(capture), "--format", "jsonl", "--filter", expression]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("api=Produce", 7),
        ("api=producer", 7),
        ("api_key=0 and api_version=0", 1),
        ("api=Produce and not error", 6),
        ("error", 2),
        ("error=3 or error=LEADER_NOT_AVAILABLE", 2),
        ("topic=audit", 3),
        ("topic~\"ord*\" and partition=1", 3),
        ("(api=Metadata or api=Produce) and client_id=producer-1", 9),
        ("unanswered", 0),
        ("not answered", 1),
        ("request_size>300", 2),
        ("topic!=orders", 3),
    ],
)
def test_filters_on_the_producer_capture(expression: str, expected: int, capsys: pytest.CaptureFixture) -> None:
    lines = filtered(SAMPLES / "produce.pcap", expression, capsys)
    assert lines[-1]["shown"] == expected, expression
    assert len([r for r in lines if r["record"] == "exchange"]) == expected


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("api=Heartbeat and error=REBALANCE_IN_PROGRESS", 2),
        ("group=billing and api=OffsetCommit", 3),
        ("latency_ms>100", 1),
        ("connection=2", 7),
        ("client~'*:50402' or api=LeaveGroup", 7),
        ("port=9092", 19),
    ],
)
def test_filters_on_the_group_capture(expression: str, expected: int, capsys: pytest.CaptureFixture) -> None:
    assert filtered(SAMPLES / "consumer_group.pcapng", expression, capsys)[-1]["shown"] == expected


def test_filter_from_the_console_script() -> None:
    lines = records(SAMPLES / "produce.pcap", "--filter", "api=Produce and not error")
    assert lines[-1]["shown"] == 6 and lines[-1]["exchanges"] == 9


def write_damaged(tmp_path: Path, **options) -> Path:
    client, server = ("10.9.0.1", 40000), ("10.9.0.2", 9092)
    meta = kproto.encode_request(MetadataRequest.from_dict({"topics": [{"name": "t"}]}), 0, 1, "c")
    answer = kproto.encode_response(MetadataResponse.from_dict({"brokers": [], "topics": []}), 0, 1)
    big = kproto.encode_request(
        ProduceRequest.from_dict(
            {
                "acks": 0,
                "timeout_ms": 1,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x00" * 5000}]}],
            }
        ),
        0,
        2,
        "c",
    )
    conversation = TcpConversation(
        client,
        server,
        [("client", meta, 1.0), ("server", answer, 1.001), ("client", big, 1.002), ("client", meta, 1.003)],
    )
    path = tmp_path / "damaged.pcap"
    write_capture(path, [conversation], **options)
    return path


def test_snaplen_cut_frames_are_reported_and_decoding_goes_on(tmp_path: Path) -> None:
    path = write_damaged(tmp_path, snaplen=200)
    lines = records(path, code=1)
    kinds = {r["kind"] for r in lines if r["record"] == "problem"}
    assert "incomplete-frame" in kinds
    assert lines[-1]["failures"] >= 1
    assert sum(r["record"] == "exchange" for r in lines) >= 2


def test_dropped_segment_is_a_gap(tmp_path: Path) -> None:
    path = write_damaged(tmp_path, impairments=Impairments(drop=[3]))
    lines = records(path, code=1)
    assert {"capture-gap"} <= {r["kind"] for r in lines if r["record"] == "problem"}


def test_truncated_capture_file(tmp_path: Path) -> None:
    path = write_damaged(tmp_path)
    path.write_bytes(path.read_bytes()[:-700])
    lines = records(path, code=1)
    assert "capture" in {r["kind"] for r in lines if r["record"] == "problem"}
    text = run_kproto("pcap", path).stdout.decode()
    assert "! capture" in text


def test_not_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "garbage.pcap"
    path.write_bytes(b"this is not a capture at all" * 10)
    proc = run_kproto("pcap", path)
    assert proc.returncode == 1 and b"not-a-capture" in proc.stdout


def test_capture_from_stdin() -> None:
    data = (SAMPLES / "produce.pcap").read_bytes()
    proc = run_kproto("pcap", "-", "--format", "jsonl", stdin=data, check_code=0)
    assert json.loads(proc.stdout.decode().splitlines()[-1])["exchanges"] == 9


def test_port_option_and_detection() -> None:
    assert records(SAMPLES / "produce.pcap", "--port", "9999")[-1]["exchanges"] == 9  # found by detection
    assert records(SAMPLES / "produce.pcap", "--port", "9999", "--no-detect")[-1]["exchanges"] == 0


def test_progress_bar_only_on_a_terminal() -> None:
    piped = run_kproto("pcap", SAMPLES / "consumer_group.pcapng", check_code=0)
    assert piped.stderr == b""
    main_fd, child_fd = pty.openpty()
    try:
        proc = subprocess.run(
            [str(kproto_script()), "pcap", str(SAMPLES / "consumer_group.pcapng")],
            stdout=subprocess.PIPE,
            stderr=child_fd,
            timeout=120,
        )
        os.close(child_fd)
        child_fd = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if child_fd >= 0:
            os.close(child_fd)
        os.close(main_fd)
    assert proc.returncode == 0
    assert b"reading capture [" in drawn and b"\r" in drawn
    assert b"reading capture" not in proc.stdout
