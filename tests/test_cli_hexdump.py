"""``kproto hexdump``: every byte of every frame carries exactly one label, record-set internals are
labelled where the worked examples of docs/protocol-notes.md put them, colour only on request or on a terminal."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import List

import pytest
from test_cli_encode import STREAMS, stream_path
from test_cli_usage import SAMPLES, run_kproto

RANGE_KEYS = {"start", "end", "path", "part", "value"}
HEXDUMP_KEYS = {
    "record",
    "index",
    "offset",
    "size",
    "kind",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "error",
    "data",
    "ranges",
}


def dumps(path: Path, *args: str, code: int = 0) -> List[dict]:
    proc = run_kproto("hexdump", path, "--format", "jsonl", *args, check_code=code)
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def assert_exact_cover(record: dict) -> None:
    ranges = record["ranges"]
    assert ranges, record
    position = 0
    for r in ranges:
        assert set(r) == RANGE_KEYS
        assert r["start"] == position, f"frame {record['index']}: gap or overlap at {position}: {r}"
        assert r["end"] > r["start"] and r["path"]
        position = r["end"]
    assert position == record["size"], f"frame {record['index']}: labels end at {position} of {record['size']}"


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_every_byte_of_every_sample_frame_has_exactly_one_label(tmp_path: Path, name: str) -> None:
    records = dumps(stream_path(tmp_path, name))
    frames = [r for r in records if r["record"] == "hexdump"]
    assert frames and records[-1]["record"] == "summary" and records[-1]["failed"] == 0
    for record in frames:
        assert set(record) == HEXDUMP_KEYS
        assert_exact_cover(record)


def test_every_byte_labelled_for_frames_that_do_not_decode(tmp_path: Path) -> None:
    unknown_api = struct.pack(">ihhih", 15, 99, 0, 42, 1) + b"x" + b"\x01\x02\x03\x04"
    bad_body = struct.pack(">ihhih", 15, 3, 0, 7, 1) + b"y" + b"\x00\x00\x00\x09"  # 9 topics announced, none there
    bad_header = struct.pack(">i", 6) + b"\x00\x03\x00\x00\xff\xff"
    path = tmp_path / "odd.bin"
    path.write_bytes(unknown_api + bad_body + bad_header)
    records = [r for r in dumps(path, code=1) if r["record"] == "hexdump"]
    assert len(records) == 3
    for record in records:
        assert_exact_cover(record)
        assert record["ranges"][-1]["part"] == "raw"
    paths = [r["path"] for r in records[0]["ranges"]]
    assert paths == ["size", "api_key", "api_version", "correlation_id", "client_id", "client_id", "body"]


def test_record_set_internals_at_protocol_md_offsets() -> None:
    produce = [r for r in dumps(SAMPLES / "frames.hex") if r.get("api_name") == "Produce" and r["kind"] == "request"][0]
    by_path = {(r["path"], r["part"]): (r["start"], r["end"], r["value"]) for r in produce["ranges"]}
    prefix = "topic_data[0].partition_data[0].records"
    # worked example 7.2 (docs/protocol-notes.md): offset 48, message_size 56, crc 60, magic 64, attributes 65, key
    # 66, value 70/74.
    assert by_path[(prefix, "length")] == (44, 48, 31)
    assert by_path[(f"{prefix}[0].offset", "value")] == (48, 56, 0)
    assert by_path[(f"{prefix}[0].message_size", "value")] == (56, 60, 19)
    assert by_path[(f"{prefix}[0].crc", "value")] == (60, 64, "0x87a77ab2 (ok)")
    assert by_path[(f"{prefix}[0].magic", "value")] == (64, 65, 0)
    assert by_path[(f"{prefix}[0].attributes", "value")][:2] == (65, 66)
    assert by_path[(f"{prefix}[0].key", "length")] == (66, 70, None)
    assert by_path[(f"{prefix}[0].value", "length")] == (70, 74, 5)
    assert by_path[(f"{prefix}[0].value", "value")] == (74, 79, {"$bytes": "aGVsbG8="})


def test_truncated_fetch_tail_and_compressed_wrappers_are_labelled(tmp_path: Path) -> None:
    records = dumps(stream_path(tmp_path, "fetch.pcap#0"))
    labels = [r for rec in records if rec["record"] == "hexdump" for r in rec["ranges"]]
    assert any(r["path"].endswith(".truncated") for r in labels)
    summaries = [r["value"] for r in labels if r["path"].endswith(".value") and isinstance(r["value"], str)]
    assert any(s.startswith("snappy-compressed: 4 inner messages") for s in summaries)
    assert any(s.startswith("gzip-compressed: 5 inner messages") for s in summaries)
    assert any(s.startswith("lz4-compressed: 3 inner messages") for s in summaries)


def test_text_dump_lines_and_colour() -> None:
    plain = run_kproto("hexdump", SAMPLES / "frames.hex", check_code=0).stdout.decode()
    assert "\x1b[" not in plain
    assert "0000  00 00 00 1a" in plain and "size: 26" in plain
    assert "api_key: 3 (Metadata)" in plain
    assert "client_id: 'kproto'" in plain
    assert "records[0].crc: 0x87a77ab2 (ok)" in plain
    coloured = run_kproto("hexdump", SAMPLES / "frames.hex", "--color", "always", check_code=0).stdout.decode()
    assert "\x1b[36m00 00 00 1a\x1b[0m" in coloured
    assert run_kproto("hexdump", SAMPLES / "frames.hex", "--color", "never", check_code=0).stdout.decode() == plain


def test_hexdump_json_document() -> None:
    proc = run_kproto("hexdump", SAMPLES / "frames.hex", "--format", "json", check_code=0)
    document = json.loads(proc.stdout)
    assert document["kproto"] == "hexdump" and len(document["records"]) == 13
