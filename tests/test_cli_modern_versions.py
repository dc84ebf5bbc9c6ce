"""The CLI at every Kafka version: flexible encodings and magic 2 record batches labelled byte by byte in
``hexdump``, record headers and producer facts in ``decode``/``pcap -v``, flexible response headers,
``encode`` the inverse of ``decode``, and the fast JSON Lines writer of record sets held against the
generic one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
from test_cli_hexdump import assert_exact_cover
from test_cli_usage import SAMPLES

import kproto
from kproto.cli import main
from kproto.cli.json_values import record_set_json
from kproto.records import encode_message_set, encode_record_batch

MODERN = SAMPLES / "modern"
HEADERS = [("trace-id", b"t-1"), ("empty", None)]


def batch(**options: Any) -> bytes:
    return encode_record_batch(
        [(b"k", b"v1", 1_700_000_000_000, HEADERS), (None, b"v2", 1_700_000_000_001, [])],
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
        **options,
    )


def frames() -> bytes:
    """ApiVersions v3 (flexible, header v0 answer), Produce v9 with a plain transactional batch and a gzip
    one, its answer (flexible response header), and a Fetch v12 answer carrying a batch."""
    out = []
    api = kproto.APIS["ApiVersions"]
    out.append(
        kproto.encode_request(api.request(client_software_name="kproto", client_software_version="1"), 3, 1, "c")
    )
    out.append(kproto.encode_response(api.response(api_keys=[]), 3, 1))
    produce = kproto.APIS["Produce"]
    out.append(
        kproto.encode_request(
            produce.request.from_dict(
                {
                    "acks": -1,
                    "timeout_ms": 1000,
                    "topic_data": [
                        {
                            "name": "orders",
                            "partition_data": [
                                {"index": 0, "records": batch(transactional=True)},
                                {"index": 1, "records": batch(codec="gzip")},
                            ],
                        }
                    ],
                }
            ),
            9,
            2,
            "c",
        )
    )
    out.append(
        kproto.encode_response(
            produce.response.from_dict(
                {"responses": [{"name": "orders", "partition_responses": [{"index": 0, "base_offset": 5}]}]}
            ),
            9,
            2,
        )
    )
    fetch = kproto.APIS["Fetch"]
    out.append(
        kproto.encode_request(
            fetch.request.from_dict(
                {"topics": [{"topic": "orders", "partitions": [{"partition": 0, "fetch_offset": 0}]}]}
            ),
            12,
            3,
            "c",
        )
    )
    out.append(
        kproto.encode_response(
            fetch.response.from_dict(
                {
                    "responses": [
                        {
                            "topic": "orders",
                            "partitions": [{"partition_index": 0, "high_watermark": 2, "records": batch()}],
                        }
                    ]
                }
            ),
            12,
            3,
        )
    )
    return b"".join(out)


@pytest.fixture
def frame_file(tmp_path: Path) -> Path:
    path = tmp_path / "modern.bin"
    path.write_bytes(frames())
    return path


def run_jsonl(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> List[Dict[str, Any]]:
    assert main([*args, "--format", "jsonl"]) == code
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def labels(record: Dict[str, Any]) -> Dict[str, Any]:
    return {r["path"] + ("#" + r["part"] if r["part"] != "value" else ""): r["value"] for r in record["ranges"]}


def test_hexdump_labels_every_byte_of_flexible_frames_and_v2_batches(
    frame_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = run_jsonl(capsys, "hexdump", str(frame_file))
    dumps = [r for r in records if r["record"] == "hexdump"]
    assert [d["error"] for d in dumps] == [None] * 6 and len(dumps) == 6
    for record in dumps:
        assert_exact_cover(record)
    produce = labels(dumps[2])
    entry = "topic_data[0].partition_data[0].records[0]"
    assert produce[f"{entry}.producer_id"] == 7 and produce[f"{entry}.producer_epoch"] == 2
    assert produce[f"{entry}.base_sequence"] == 40 and produce[f"{entry}.records_count"] == 2
    assert produce[f"{entry}.attributes"] == "0x0010 (codec none, transactional)"
    assert produce[f"{entry}.crc"].endswith("(ok)")
    assert produce[f"{entry}.records[0].headers[0].key"] == "trace-id"
    assert produce[f"{entry}.records[0].headers[1].value#length"] is None  # a null header value
    assert produce[f"{entry}.records[1].key#length"] is None
    gzip = "topic_data[0].partition_data[1].records[0]"
    assert produce[f"{gzip}.records"] == "gzip-compressed: 2 records, offsets 0..1, 2 headers"
    by_path = {r["path"] + "#" + r["part"]: r for r in dumps[2]["ranges"]}
    assert by_path["topic_data#count"]["end"] - by_path["topic_data#count"]["start"] == 1  # compact: one varint byte
    assert by_path["_tagged_fields#count"]["end"] - by_path["_tagged_fields#count"]["start"] == 1
    # The Produce v9 answer has a flexible response header (v1); the ApiVersions answer keeps v0.
    assert "_tagged_fields#count" in {r["path"] + "#" + r["part"] for r in dumps[3]["ranges"] if r["end"] <= 9}


def test_hexdump_labels_tagged_fields_known_and_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api = kproto.APIS["ApiVersions"]
    answer = api.response(
        api_keys=[], supported_features=[], finalized_features_epoch=3, unknown_tagged_fields=[(9, b"\xab\xcd")]
    )
    path = tmp_path / "tagged.bin"
    path.write_bytes(kproto.encode_response(answer, 3, 1))
    record = run_jsonl(capsys, "hexdump", str(path), "--api", "ApiVersions", "--api-version", "3")[0]
    assert_exact_cover(record)
    found = labels(record)
    assert found["finalized_features_epoch"] == 3 and found["finalized_features_epoch#tag"] == "tag 1, 8 bytes"
    assert found["_tagged_fields[9]#raw"] == "tagged field 9 unknown to this version"


def test_decode_shows_record_headers_and_producer_facts(frame_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = run_jsonl(capsys, "decode", str(frame_file), "-v")
    assert [r["error"] for r in records if r["record"] == "frame"] == [None] * 6
    fetch = records[5]["body"]["responses"][0]["partitions"][0]["records"]
    assert fetch["batches"] == [
        {
            "base_offset": 0,
            "magic": 2,
            "records_count": 2,
            "codec": "none",
            "producer_id": 7,
            "producer_epoch": 2,
            "base_sequence": 40,
            "transactional": False,
            "control": False,
            "partition_leader_epoch": -1,
            "base_timestamp": 1_700_000_000_000,
            "max_timestamp": 1_700_000_000_001,
            "timestamp_type": 0,
        }
    ]
    first = fetch["messages"][0]
    assert first["headers"] == [{"key": "trace-id", "value": {"$bytes": "dC0x"}}, {"key": "empty", "value": None}]
    assert first["crc"] is None and fetch["messages"][1]["key"] is None
    assert main(["decode", "-v", str(SAMPLES / "frames.hex")]) == 0  # text tree of old sets still fine
    assert main(["decode", "-v", str(frame_file)]) == 0
    text = capsys.readouterr().out
    assert "batch base offset 0: 2 records, producer id 7 epoch 2 base sequence 40, transactional" in text
    assert "headers 'trace-id'=b't-1', 'empty'=None" in text


def test_encode_is_the_inverse_of_decode_at_modern_versions(
    frame_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["decode", str(frame_file), "-v", "--format", "jsonl"]) == 0
    decoded = tmp_path / "decoded.jsonl"
    decoded.write_text(capsys.readouterr().out)
    out = tmp_path / "again.bin"
    assert main(["encode", "--raw", "-o", str(out), str(decoded)]) == 0
    assert out.read_bytes() == frame_file.read_bytes()


@pytest.mark.parametrize(
    "raw",
    [
        encode_message_set([(b"k", b"v"), (None, b"w" * 300)], magic=1, codec="snappy"),
        encode_message_set([(None, b"plain")], magic=0),
        batch() + batch(codec="lz4", base_offset=2),
        encode_record_batch([(b"\x00\xff", None, 5, [("h\u00e9\"", b"")])]),
    ],
)
def test_fast_record_set_text_is_the_generic_json(raw: bytes) -> None:
    """The JSON Lines writer renders record sets straight to text: it must equal json.dumps of the values."""
    for limit in (None, 1):
        stream = record_set_json(raw, verbose=True, max_records=limit)["messages"]
        generic = json.dumps(list(stream), separators=(",", ":"))
        assert "".join(stream.json_chunks(chunk=1)) == generic == "".join(stream.json_chunks())


def test_pcap_verbose_json_of_todays_clients(capsys: pytest.CaptureFixture[str]) -> None:
    records = run_jsonl(capsys, "pcap", str(MODERN / "kafka-python-produce-consume.pcap"), "-v", "--no-progress")
    produced = [
        pd["records"]
        for r in records
        if r["record"] == "exchange" and r["api_name"] == "Produce"
        for td in r["request"]["topic_data"]
        for pd in td["partition_data"]
    ]
    messages = [m for s in produced for m in s["messages"]]
    assert len(messages) == 30 and all(m["headers"][0]["key"] == "trace-id" for m in messages)
    batches = [b for s in produced for b in s["batches"]]
    assert {b["producer_id"] for b in batches} != {-1} and all(b["base_sequence"] >= 0 for b in batches)
    assert records[-1]["failures"] == 0
