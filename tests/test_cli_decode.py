"""``kproto decode``: input forms, request/response classification, JSON schema, bad input, exit codes."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import List

import pytest
from test_cli_usage import SAMPLES, run_kproto

# Worked examples 7.1 (MetadataRequest v0) and 7.4 (its response), docs/protocol-notes.md.
METADATA_REQUEST = bytes.fromhex("0000001a000300000000000100066b70726f746f00000001000474657374")
METADATA_RESPONSE = bytes.fromhex(
    "0000004500000001000000010000000000096c6f63616c686f737400002384000000010000000474657374000000010000"
    "000000000000000000000001000000000000000100000000"
)
# Example 7.6a: ControlledShutdown v0, no client id.
SHUTDOWN_V0 = bytes.fromhex("0000000c000700000000000500000001")

FRAME_KEYS = {
    "record",
    "index",
    "offset",
    "size",
    "kind",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "header",
    "body",
    "raw_body",
    "error",
}
PROBLEM_KEYS = {"record", "kind", "offset", "detail"}
SUMMARY_KEYS = {"input", "frames", "failed", "problems"}
ERROR_KEYS = {"type", "message", "reason", "offset", "path"}


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def decode_json(path: Path, *args: str, code: int = 0) -> dict:
    proc = run_kproto("decode", path, "--format", "json", *args, check_code=code)
    return json.loads(proc.stdout)


def frames_of(document: dict) -> List[dict]:
    return [r for r in document["records"] if r["record"] == "frame"]


def test_sanity_of_the_test_vectors() -> None:
    assert len(METADATA_REQUEST) == 30 and len(METADATA_RESPONSE) == 73 and len(SHUTDOWN_V0) == 16


def test_frames_hex_sample_decodes_completely() -> None:
    proc = run_kproto("decode", SAMPLES / "frames.hex", check_code=0)
    text = proc.stdout.decode()
    assert "frame 0 @0: request Metadata v0, correlation id 1, client 'kproto', 30 bytes" in text
    assert "response Metadata v0, correlation id 1, 73 bytes" in text
    assert "request ControlledShutdown v0, correlation id 5, 16 bytes" in text
    assert "response Fetch v0, correlation id 7" in text
    assert "error" not in text.replace("error_code", "")


def test_json_document_schema(tmp_path: Path) -> None:
    document = decode_json(SAMPLES / "frames.hex")
    assert set(document) == {"kproto", "format_version", "records", "summary"}
    assert document["kproto"] == "decode" and document["format_version"] == 1
    assert set(document["summary"]) == SUMMARY_KEYS
    assert document["summary"] == {"input": "hex", "frames": 13, "failed": 0, "problems": 0}
    for record in document["records"]:
        assert set(record) == FRAME_KEYS
        assert record["error"] is None and record["raw_body"] is None
    first = document["records"][0]
    assert first["header"] == {"api_key": 3, "api_version": 0, "correlation_id": 1, "client_id": "kproto"}
    assert first["body"] == {"topics": [{"name": "test"}]}
    assert first["api_name"] == "Metadata" and first["kind"] == "request" and first["size"] == 30


def test_jsonl_is_one_record_per_line_then_summary() -> None:
    proc = run_kproto("decode", SAMPLES / "frames.hex", "--format", "jsonl", check_code=0)
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [set(r) for r in lines[:-1]] == [FRAME_KEYS] * 13
    assert lines[-1] == {"record": "summary", "input": "hex", "frames": 13, "failed": 0, "problems": 0}


def test_bytes_are_base64_objects_and_record_sets_verbose(tmp_path: Path) -> None:
    document = decode_json(SAMPLES / "frames.hex", "-v")
    produce = frames_of(document)[2]
    records = produce["body"]["topic_data"][0]["partition_data"][0]["records"]
    assert set(records) == {"$bytes", "messages", "valid_bytes", "partial"}
    assert records["messages"] == [
        {
            "offset": 0,
            "magic": 0,
            "attributes": 0,
            "codec": "none",
            "timestamp": None,
            "timestamp_type": None,
            "crc": 0x87A77AB2,
            "key": None,
            "value": {"$bytes": "aGVsbG8="},
        }
    ]
    fetch = frames_of(document)[11]
    fetched = fetch["body"]["responses"][0]["partitions"][0]["records"]
    assert fetched["partial"] is True and fetched["valid_bytes"] == 31 and len(fetched["messages"]) == 1
    join = frames_of(document)[4]
    assert join["body"]["protocols"][0]["metadata"]["consumer_protocol"] == {
        "version": 0,
        "topics": ["test"],
        "user_data": {"$bytes": ""},
    }


def write_text(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "input.txt"
    path.write_text(text)
    return path


def xxd_form(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        groups = " ".join(chunk[i : i + 2].hex() for i in range(0, len(chunk), 2))
        ascii_col = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}: {groups:<39}  {ascii_col}")
    return "\n".join(lines) + "\n"


def hexdump_c_form(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        left = " ".join(f"{b:02x}" for b in chunk[:8])
        right = " ".join(f"{b:02x}" for b in chunk[8:])
        ascii_col = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {left:<23}  {right:<23}  |{ascii_col}|")
    lines.append(f"{len(data):08x}")
    return "\n".join(lines) + "\n"


def tshark_x_form(data: bytes) -> str:
    lines = [f"Reassembled TCP ({len(data)} bytes):"]
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        hex_col = " ".join(f"{b:02x}" for b in chunk)
        ascii_col = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:04x}  {hex_col:<47}   {ascii_col}")
    return "\n".join(lines) + "\n"


HEX_FORMS = {
    "continuous": lambda d: d.hex() + "\n",
    "spaced": lambda d: " ".join(f"{b:02x}" for b in d) + "\n",
    "upper-colons": lambda d: ":".join(f"{b:02X}" for b in d) + "\n",
    "0x-bytes": lambda d: " ".join(f"0x{b:02x}" for b in d) + "\n",
    "0x-commas": lambda d: ", ".join(f"0x{b:02x}" for b in d) + ",\n",
    "0x-words": lambda d: "0x" + d.hex() + "\n",
    "escaped": lambda d: "".join(f"\\x{b:02x}" for b in d) + "\n",
    "lines-with-comments": lambda d: (
        "# a comment\n\n" + "\n".join(d[i : i + 7].hex(" ") + "  # part" for i in range(0, len(d), 7)) + "\n"
    ),
    "offset-colon": lambda d: "\n".join(f"{i:04x}: " + d[i : i + 16].hex(" ") for i in range(0, len(d), 16)) + "\n",
    "xxd": xxd_form,
    "hexdump-C": hexdump_c_form,
    "tshark-x": tshark_x_form,
}


@pytest.mark.parametrize("form", sorted(HEX_FORMS))
def test_hex_input_forms(tmp_path: Path, form: str) -> None:
    data = METADATA_REQUEST + METADATA_RESPONSE + SHUTDOWN_V0
    document = decode_json(write_text(tmp_path, HEX_FORMS[form](data)))
    assert document["summary"] == {"input": "hex", "frames": 3, "failed": 0, "problems": 0}
    kinds = [(r["kind"], r["api_name"], r["correlation_id"]) for r in frames_of(document)]
    assert kinds == [("request", "Metadata", 1), ("response", "Metadata", 1), ("request", "ControlledShutdown", 5)]


def test_binary_input_from_stdin() -> None:
    proc = run_kproto("decode", "-", "--format", "jsonl", stdin=METADATA_REQUEST + SHUTDOWN_V0, check_code=0)
    lines = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert lines[-1]["input"] == "binary" and lines[-1]["frames"] == 2
    assert lines[1]["header"] == {"api_key": 7, "api_version": 0, "correlation_id": 5, "client_id": None}
    assert lines[1]["body"] == {"broker_id": 1}


def test_forced_input_kind(tmp_path: Path) -> None:
    path = tmp_path / "frames.bin"
    path.write_bytes(METADATA_REQUEST)
    run_kproto("decode", path, "--input", "binary", check_code=0)
    assert run_kproto("decode", path, "--input", "hex").returncode == 1


@pytest.mark.parametrize(
    "options", [["--api", "Metadata"], ["--api", "metadata"], ["--api-key", "3"], ["--response", "--api", "3"]]
)
def test_lone_response_with_api_options(tmp_path: Path, options: List[str]) -> None:
    # Metadata has many versions now: a lone response needs the version as well as the api.
    options = options + ["--api-version", "0"]
    path = tmp_path / "response.bin"
    path.write_bytes(METADATA_RESPONSE)
    record = frames_of(decode_json(path, *options))[0]
    assert record["kind"] == "response" and record["api_key"] == 3 and record["api_version"] == 0
    assert record["body"]["brokers"] == [{"node_id": 0, "host": "localhost", "port": 9092}]


def test_lone_response_of_a_many_versioned_api_needs_its_version(tmp_path: Path) -> None:
    path = tmp_path / "response.bin"
    path.write_bytes(METADATA_RESPONSE)
    proc = run_kproto("decode", path, "--api", "Metadata", check_code=2)
    assert b"give --api-version" in proc.stderr


def test_lone_response_without_api_fails_with_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "response.bin"
    path.write_bytes(METADATA_RESPONSE)
    proc = run_kproto("decode", path)
    assert proc.returncode == 1
    assert b"failed to decode" in proc.stderr


def test_request_mode_does_not_pair(tmp_path: Path) -> None:
    path = tmp_path / "pair.bin"
    path.write_bytes(METADATA_REQUEST + METADATA_RESPONSE)
    document = decode_json(path, "--request", code=1)
    assert [r["kind"] for r in frames_of(document)] == ["request", "request"]
    assert frames_of(document)[1]["error"] is not None


def unknown_api_frame() -> bytes:
    # api key 99 v0, correlation id 42, client id "x", then 5 body bytes nobody knows.
    return frame(struct.pack(">hhih", 99, 0, 42, 1) + b"x" + b"\x01\x02\x03\x04\x05")


def test_unknown_api_key_header_decoded_body_raw_and_decoding_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "unknown.bin"
    path.write_bytes(unknown_api_frame() + METADATA_REQUEST)
    document = decode_json(path, code=1)
    unknown, metadata = frames_of(document)
    assert unknown["header"] == {"api_key": 99, "api_version": 0, "correlation_id": 42, "client_id": "x"}
    assert unknown["body"] is None and unknown["raw_body"] == {"$bytes": "AQIDBAU="}
    assert set(unknown["error"]) == ERROR_KEYS and unknown["error"]["type"] == "UnsupportedVersionError"
    assert metadata["error"] is None and metadata["api_name"] == "Metadata"
    assert document["summary"]["failed"] == 1


def test_unknown_version_of_a_known_api(tmp_path: Path) -> None:
    path = tmp_path / "v99.bin"  # Kafka 4.1's Metadata stops at version 13
    path.write_bytes(frame(struct.pack(">hhih", 3, 99, 1, 0) + b"\x00\x00\x00\x00"))
    record = frames_of(decode_json(path, code=1))[0]
    assert record["api_name"] == "Metadata" and record["api_version"] == 99
    assert "no version 99" in record["error"]["message"]


def problems_of(document: dict) -> List[dict]:
    return [r for r in document["records"] if r["record"] == "problem"]


def test_garbage_between_frames_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(METADATA_REQUEST + b"\xff\xfe garbage \x00\x01" * 3 + METADATA_REQUEST)
    document = decode_json(path, code=1)
    assert [r["api_name"] for r in frames_of(document)] == ["Metadata", "Metadata"]
    problems = problems_of(document)
    assert problems and all(set(p) == PROBLEM_KEYS for p in problems)
    assert {p["kind"] for p in problems} <= {"bad-size", "skipped"}
    assert problems[0]["offset"] == 30


def test_two_gigabyte_size_prefix_is_rejected_without_buffering(tmp_path: Path) -> None:
    path = tmp_path / "huge.bin"
    path.write_bytes(b"\x7f\xff\xff\xff" + b"\x00" * 100 + METADATA_REQUEST)
    document = decode_json(path, code=1)
    assert problems_of(document)[0]["kind"] == "bad-size"
    assert "2147483647" in problems_of(document)[0]["detail"]
    assert [r["api_name"] for r in frames_of(document)] == ["Metadata"]


def test_max_frame_size_option(tmp_path: Path) -> None:
    big = frame(struct.pack(">hhih", 3, 0, 9, 1) + b"c" + struct.pack(">i", 0) + b"\x00" * 3000)
    path = tmp_path / "big.bin"
    path.write_bytes(big + METADATA_REQUEST)
    document = decode_json(path, "--max-frame-size", "2k", code=1)
    assert problems_of(document)[0]["kind"] == "bad-size" and "..2048" in problems_of(document)[0]["detail"]
    assert frames_of(document)[-1]["api_name"] == "Metadata"


def test_truncated_last_frame(tmp_path: Path) -> None:
    path = tmp_path / "cut.bin"
    path.write_bytes(METADATA_REQUEST + METADATA_REQUEST[:17])
    document = decode_json(path, code=1)
    assert len(frames_of(document)) == 1
    assert problems_of(document)[-1]["kind"] == "truncated-frame"
    assert "13 missing" in problems_of(document)[-1]["detail"]


def test_frame_cut_short_inside_its_body(tmp_path: Path) -> None:
    # A size prefix that claims 4 bytes less than the body needs: the frame is reported, the next one decodes.
    short = struct.pack(">i", 22) + METADATA_REQUEST[4:26]
    path = tmp_path / "short.bin"
    path.write_bytes(short + METADATA_REQUEST)
    document = decode_json(path, code=1)
    first, second = frames_of(document)
    assert first["error"]["type"] == "DecodeError" and first["raw_body"] is not None
    assert second["error"] is None


def test_bad_hex_line_is_reported_and_the_rest_decodes(tmp_path: Path) -> None:
    text = METADATA_REQUEST.hex() + "\nthis is not hex\n" + SHUTDOWN_V0.hex() + "\n"
    document = decode_json(write_text(tmp_path, text), code=1)
    assert [r["api_name"] for r in frames_of(document)] == ["Metadata", "ControlledShutdown"]
    assert problems_of(document)[0]["kind"] == "bad-hex" and "line 2" in problems_of(document)[0]["detail"]


def test_empty_input_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    proc = run_kproto("decode", path)
    assert proc.returncode == 1 and b"no frames" in proc.stderr


def test_text_output_names_error_codes_and_is_plain_when_piped() -> None:
    out = run_kproto("decode", SAMPLES / "frames.hex", check_code=0).stdout
    assert b"\x1b[" not in out
    assert b"error_code: 0 (NONE)" in out
    coloured = run_kproto("decode", SAMPLES / "frames.hex", "--color", "always", check_code=0).stdout
    assert b"\x1b[" in coloured
