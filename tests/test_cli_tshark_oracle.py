"""tshark as an independent oracle on the sample captures.

For every Kafka PDU tshark finds, the ``kproto pcap --format jsonl`` exchange completed by the same packet
must agree on api key, version, correlation id and client id; responses must pair the same way.  Topic
names, partitions, offsets and error codes must agree too, field by field in wire order, wherever tshark
decoded the PDU cleanly.  tshark 4.0 misreads magic 0/1 message contents and
its JoinGroup/SyncGroup v0 bodies, so where it reports an expert error or a message set, its values must
only be found among kproto's.

tshark is a test dependency: with ``CI`` set, a missing tshark fails this module instead of skipping it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import kproto
from test_cli_usage import SAMPLES, run_kproto

CAPTURES = sorted(SAMPLES.glob("*.pcap*"))

_TOPIC_ARRAYS = {"topics", "topic_data", "responses"}
_PARTITION_KEYS = {"partition", "partition_index", "index"}
_OFFSET_KEYS = {"fetch_offset", "high_watermark", "base_offset", "committed_offset", "offset"}


def tshark_path() -> str:
    path = shutil.which("tshark")
    if path is None:
        message = "tshark is required for the oracle tests (apt-get install tshark)"
        if os.environ.get("CI"):
            pytest.fail(message + ": it must be installed in CI")
        pytest.skip(message)
    return path


def repeated_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, List[Any]]:
    """tshark's JSON repeats keys; keep every value."""
    out: Dict[str, List[Any]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _leaves(node: Any, in_message_set: bool, out: List[Tuple[bool, str, str]]) -> None:
    if isinstance(node, dict):
        for key, values in node.items():
            for value in values:
                if isinstance(value, (dict, list)):
                    _leaves(value, in_message_set or "Message Set" in key, out)
                else:
                    out.append((in_message_set, key, value))
    elif isinstance(node, list):
        for item in node:
            _leaves(item, in_message_set, out)


def tshark_pdus(capture: Path, port: int = 9092) -> List[Dict[str, Any]]:
    """One dict per Kafka PDU: packet number, fields outside message sets, and whether tshark struggled."""
    proc = subprocess.run(
        [tshark_path(), "-r", str(capture), "-d", f"tcp.port=={port},kafka", "-T", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    pdus = []
    for packet in json.loads(proc.stdout, object_pairs_hook=repeated_keys):
        layers = packet["_source"][0]["layers"][0]
        number = int(layers["frame"][0]["frame.number"][0])
        for pdu in layers.get("kafka", []):
            leaves: List[Tuple[bool, str, str]] = []
            _leaves(pdu, False, leaves)
            fields: Dict[str, List[str]] = {}
            for in_set, key, value in leaves:
                if not in_set:
                    fields.setdefault(key, []).append(value)
            troubled = any(in_set for in_set, _, _ in leaves) or "_ws.expert.message" in fields
            pdus.append({"packet": number, "fields": fields, "troubled": troubled})
    return pdus


def wire_values(body: Any) -> Dict[str, List[str]]:
    """Topics, partitions, offsets and error codes of a kproto JSON body, in wire order, as tshark strings."""
    out: Dict[str, List[str]] = {
        "kafka.topic_name": [],
        "kafka.partition_id": [],
        "kafka.offset": [],
        "kafka.error": [],
    }

    def walk(node: Any, parent: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("topic", "topic_name") or (key == "name" and parent in _TOPIC_ARRAYS):
                    out["kafka.topic_name"].append(value)
                elif key in _PARTITION_KEYS:
                    out["kafka.partition_id"].append(str(value))
                elif key == "partition_indexes":
                    out["kafka.partition_id"] += [str(v) for v in value]
                elif key in _OFFSET_KEYS:
                    out["kafka.offset"].append(str(value))
                elif key == "old_style_offsets":
                    out["kafka.offset"] += [str(v) for v in value]
                elif key == "error_code":
                    out["kafka.error"].append(str(value))
                elif isinstance(value, (dict, list)) and key != "records":
                    walk(value, key)
        elif isinstance(node, list):
            for item in node:
                walk(item, parent)

    if body is not None:
        walk(body, "")
    return out


def kproto_exchanges(capture: Path) -> List[Dict[str, Any]]:
    proc = run_kproto("pcap", capture, "--format", "jsonl", check_code=0)
    return [r for r in map(json.loads, proc.stdout.decode().splitlines()) if r["record"] == "exchange"]


def compare_body(pdu: Dict[str, Any], body: Any, where: str) -> None:
    ours = wire_values(body)
    for key, values in ours.items():
        theirs = pdu["fields"].get(key, [])
        if pdu["troubled"]:
            missing = Counter(theirs) - Counter(values)
            assert not missing, f"{where}: tshark {key} {theirs} not all in kproto's {values}"
        else:
            assert theirs == values, f"{where}: {key}: tshark {theirs} != kproto {values}"


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_kproto_agrees_with_tshark(capture: Path) -> None:
    pdus = tshark_pdus(capture)
    found = kproto_exchanges(capture)
    by_request = {e["request_packet"]: e for e in found}
    by_response = {e["response_packet"]: e for e in found if e["answered"]}
    requests = [p for p in pdus if "kafka.request_key" in p["fields"]]
    responses = [p for p in pdus if "kafka.request_key" not in p["fields"]]
    assert len(requests) == len(found), "tshark and kproto see different numbers of requests"
    assert len(responses) == len(by_response), "tshark and kproto see different numbers of responses"
    for pdu in requests:
        fields, where = pdu["fields"], f"{capture.name} packet {pdu['packet']} (request)"
        exchange = by_request[pdu["packet"]]
        assert int(fields["kafka.request_key"][0]) == exchange["api_key"], where
        assert int(fields["kafka.api_version"][0]) == exchange["api_version"], where
        assert int(fields["kafka.correlation_id"][0]) == exchange["correlation_id"], where
        assert fields.get("kafka.client_id", [None])[0] == exchange["client_id"], where
        compare_body(pdu, exchange["request"], where)
    compared_responses = 0
    for pdu in responses:
        fields, where = pdu["fields"], f"{capture.name} packet {pdu['packet']} (response)"
        exchange = by_response[pdu["packet"]]
        assert int(fields["kafka.correlation_id"][0]) == exchange["correlation_id"], where
        if "kafka.response_key" not in fields:
            continue  # tshark lost the pairing (its message-set misreads); only the correlation id is comparable
        assert int(fields["kafka.response_key"][0]) == exchange["api_key"], where
        compare_body(pdu, exchange["response"], where)
        compared_responses += 1
    assert compared_responses >= len(responses) // 2, "too few responses tshark could pair to compare bodies"


def test_oracle_compares_real_values() -> None:
    """Guard against a vacuous oracle: the clean PDUs hold the values the samples were built with."""
    pdus = tshark_pdus(SAMPLES / "consumer_group.pcapng")
    errors = [e for p in pdus if not p["troubled"] for e in p["fields"].get("kafka.error", [])]
    assert errors.count("27") == 2 and errors.count("22") == 1
    offsets = [
        o for p in tshark_pdus(SAMPLES / "fetch.pcap") if not p["troubled"] for o in p["fields"].get("kafka.offset", [])
    ]
    assert "500" in offsets and "10" in offsets


# --- today's clients (samples/modern) ----------------------------------------------------------------------
#
# tshark 4.0 knows api versions only up to about Kafka 2.x (Metadata v9, ApiVersions v3, Produce v8,
# Fetch v11, ListOffsets v5, FindCoordinator v3, InitProducerId v3): newer ones it marks "Unsupported ...
# version" and then misreads (error codes such as -26026, "Dissected message does not end at the pdu
# length"); it takes the raw SASL tokens after SaslHandshake v0 for requests with unknown api keys, and
# the empty answer token for a malformed frame.  Headers are compared everywhere; bodies where tshark
# reports no such trouble.

MODERN = sorted((SAMPLES / "modern").glob("*.pcap"))


def kproto_records(capture: Path, port: int = 9092) -> List[Dict[str, Any]]:
    proc = run_kproto("pcap", capture, "--port", str(port), "--format", "jsonl", check_code=0)
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def _unsupported(pdu: Dict[str, Any]) -> bool:
    """tshark says it does not know the api version ("Unsupported Produce version. Supports v0-8.") or key."""
    return any(
        ("Unsupported " in m and " version" in m) or "Unknown API key" in m
        for m in pdu["fields"].get("_ws.expert.message", [])
    )


def compare_with_tshark(capture: Path, port: int = 9092) -> Counter:
    """Check kproto's exchanges against every PDU tshark finds on ``port``: headers everywhere, bodies
    where tshark knows the version and reports no trouble.  Returns the tally of what was compared."""
    records = kproto_records(capture, port)
    exchanges = [r for r in records if r["record"] == "exchange"]
    tokens = [r for r in records if r["record"] == "sasl_token"]
    # One packet may complete several frames (librdkafka writes requests back to back).
    by_request = {(e["request_packet"], e["correlation_id"]): e for e in exchanges}
    by_response = {(e["response_packet"], e["correlation_id"]): e for e in exchanges if e["answered"]}
    token_packets = {t["request_packet"] for t in tokens} | {t["response_packet"] for t in tokens}
    tally: Counter = Counter()
    tally["exchanges"] = len(exchanges)
    for pdu in tshark_pdus(capture, port):
        fields, packet = pdu["fields"], pdu["packet"]
        where = f"{capture.name} packet {packet}"
        if packet in token_packets:  # tshark cannot know the token is one: a bogus request or a bare length
            key = fields.get("kafka.request_key", [None])[0]
            assert "kafka.response_key" not in fields and (key is None or int(key) not in kproto.APIS), where
            tally["sasl token misread by tshark"] += 1
            continue
        corr = int(fields["kafka.correlation_id"][0])
        if "kafka.request_key" in fields:
            exchange = by_request[packet, corr]
            assert int(fields["kafka.request_key"][0]) == exchange["api_key"], where
            assert int(fields["kafka.api_version"][0]) == exchange["api_version"], where
            assert int(fields["kafka.correlation_id"][0]) == exchange["correlation_id"], where
            assert fields.get("kafka.client_id", [None])[0] == exchange["client_id"], where
            body = exchange["request"]
        else:
            exchange = by_response[packet, corr]
            if "kafka.response_key" not in fields:
                continue
            assert int(fields["kafka.response_key"][0]) == exchange["api_key"], where
            body = exchange["response"]
        tally["headers"] += 1
        if _unsupported(pdu):
            tally["version unsupported by tshark"] += 1
        elif not pdu["troubled"]:
            compare_body(pdu, body, where)
            tally["bodies"] += 1
    return tally


@pytest.mark.parametrize("capture", MODERN, ids=lambda p: p.name)
def test_kproto_agrees_with_tshark_on_todays_clients(capture: Path) -> None:
    tally = compare_with_tshark(capture)
    if "tls" in capture.name:
        assert tally["exchanges"] == 0 and tally["headers"] == 0  # encrypted: neither tool decodes Kafka in it
        return
    assert tally["headers"] >= tally["exchanges"], f"tshark paired fewer PDUs than kproto's exchanges: {tally}"
    assert tally["bodies"] >= 4, f"too few PDUs tshark decoded cleanly to compare bodies: {tally}"
    if "v0" in capture.name:
        assert tally["sasl token misread by tshark"] >= 2
