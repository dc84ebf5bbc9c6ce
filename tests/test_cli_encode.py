"""``kproto encode`` is the exact inverse of ``kproto decode --format json``: decode → encode gives the
same bytes for every sample frame, decodable or not."""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
from pathlib import Path
from typing import Dict

import pytest
from test_cli_usage import SAMPLES, run_kproto


def load_generator():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_samples"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def sample_frame_streams() -> Dict[str, bytes]:
    """Per sample conversation, its frames in order (responses right after their requests)."""
    generator = load_generator()
    streams: Dict[str, bytes] = {}
    for name, (conversations, _) in generator.captures().items():
        for i, conversation in enumerate(conversations):
            streams[f"{name}#{i}"] = b"".join(data for _, data, _ in conversation.messages)
    streams["frames.hex"] = b""  # decoded from the hex file itself below
    return streams


STREAMS = sample_frame_streams()


def stream_path(tmp_path: Path, name: str) -> Path:
    if name == "frames.hex":
        return SAMPLES / "frames.hex"
    path = tmp_path / "frames.bin"
    path.write_bytes(STREAMS[name])
    return path


def input_bytes(path: Path) -> bytes:
    if path.suffix == ".hex":
        return bytes.fromhex(
            "".join(
                line.split(":", 1)[1] for line in path.read_text().splitlines() if line and not line.startswith("#")
            )
        )
    return path.read_bytes()


CASES = [(name, "json") for name in sorted(STREAMS)] + [("frames.hex", "jsonl"), ("produce.pcap#0", "jsonl")]


@pytest.mark.parametrize("name, fmt", CASES)
def test_decode_then_encode_gives_identical_bytes(tmp_path: Path, name: str, fmt: str) -> None:
    source = stream_path(tmp_path, name)
    decoded = run_kproto("decode", source, "--format", fmt, check_code=0).stdout
    json_path = tmp_path / f"decoded.{fmt}"
    json_path.write_bytes(decoded)
    out = tmp_path / "encoded.bin"
    run_kproto("encode", json_path, "--raw", "--output", out, check_code=0)
    assert out.read_bytes() == input_bytes(source)


def test_verbose_json_encodes_back_too(tmp_path: Path) -> None:
    source = stream_path(tmp_path, "fetch.pcap#0")
    decoded = run_kproto("decode", source, "--format", "json", "-v", check_code=0).stdout
    proc = run_kproto("encode", "-", "--raw", stdin=decoded, check_code=0)
    assert proc.stdout == source.read_bytes()


def test_hex_output_one_frame_a_line(tmp_path: Path) -> None:
    decoded = run_kproto("decode", SAMPLES / "frames.hex", "--format", "jsonl", check_code=0).stdout
    lines = run_kproto("encode", "-", stdin=decoded, check_code=0).stdout.decode().split()
    assert len(lines) == 13
    assert b"".join(bytes.fromhex(line) for line in lines) == input_bytes(SAMPLES / "frames.hex")
    assert lines[0] == "0000001a000300000000000100066b70726f746f00000001000474657374"


def test_json_output_of_encode(tmp_path: Path) -> None:
    decoded = run_kproto("decode", SAMPLES / "frames.hex", "--format", "json", check_code=0).stdout
    document = json.loads(run_kproto("encode", "-", "--format", "json", stdin=decoded, check_code=0).stdout)
    assert set(document) == {"kproto", "format_version", "records", "summary"}
    assert set(document["records"][0]) == {"record", "index", "size", "data"}
    assert document["summary"] == {"frames": 13}


def test_undecodable_frames_round_trip_through_raw_body(tmp_path: Path) -> None:
    unknown = struct.pack(">ihhih", 15, 99, 0, 42, 1) + b"x" + b"\x01\x02\x03\x04"
    garbage_header = struct.pack(">i", 6) + b"\x00\x03\x00\x00\xff\xff"  # Metadata v0 with a 2-byte correlation id
    path = tmp_path / "odd.bin"
    path.write_bytes(unknown + garbage_header)
    decoded = run_kproto("decode", path, "--format", "json").stdout
    proc = run_kproto("encode", "-", "--raw", stdin=decoded, check_code=0)
    assert proc.stdout == unknown + garbage_header


def test_single_record_and_hand_written_messages(tmp_path: Path) -> None:
    record = {
        "kind": "request",
        "header": {"api_key": 0, "api_version": 0, "correlation_id": 2, "client_id": "kproto"},
        "body": {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [
                {
                    "name": "test",
                    "partition_data": [{"index": 0, "records": {"messages": [{"key": None, "value": "hello"}]}}],
                }
            ],
        },
    }
    proc = run_kproto("encode", "-", stdin=json.dumps(record).encode(), check_code=0)
    # Worked example 7.2 (docs/protocol-notes.md), byte for byte.
    assert proc.stdout.decode().strip() == (
        "0000004b00000000000000020006"
        "6b70726f746f0001000003e80000000100047465737400000001000000000000001f"
        "00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f"
    )


def test_response_record_needs_its_api(tmp_path: Path) -> None:
    record = {"kind": "response", "header": {"correlation_id": 1}, "body": {"error_code": 0}}
    proc = run_kproto("encode", "-", stdin=json.dumps(record).encode())
    assert proc.returncode == 1 and b"api_key" in proc.stderr
    record.update(api_key=12, api_version=0)
    assert (
        run_kproto("encode", "-", stdin=json.dumps(record).encode(), check_code=0).stdout.strip()
        == b"0000000600000001" + b"0000"
    )


def test_field_errors_name_the_field_and_the_type_it_takes() -> None:
    record = {
        "kind": "request",
        "header": {"api_key": 3, "api_version": 1, "correlation_id": 1, "client_id": "c"},
        "body": {"topics": [{"name": "ok"}, {"name": 5}]},
    }
    proc = run_kproto("encode", "-", stdin=json.dumps(record).encode())
    assert proc.returncode == 1
    assert b"MetadataRequest.topics[1].name: expected a string, got int" in proc.stderr
    assert b"has no attribute" not in proc.stderr


@pytest.mark.parametrize(
    "text, code",
    [
        (b"{not json", 2),
        (b"[1, 2]", 2),
        (b'{"kind": "sideways"}', 1),
        (
            b'{"kind": "request", "header": {"api_key": 3, "api_version": 0, '
            b'"correlation_id": 1, "client_id": "c"}, "body": {"topics": "x"}}',
            1,
        ),
        (b'{"record": "summary"}', 1),
    ],
)
def test_bad_json_input(text: bytes, code: int) -> None:
    assert run_kproto("encode", "-", stdin=text).returncode == code


@pytest.mark.parametrize("text", [b"", b"  \n\n"])
def test_empty_input_says_so_and_exits_2(text: bytes) -> None:
    proc = run_kproto("encode", "-", stdin=text, check_code=2)
    assert b"the input is empty" in proc.stderr
