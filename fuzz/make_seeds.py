"""Build the committed seed corpora in ``fuzz/corpus/<harness>/`` (small, deterministic).

Sources:

* kproto's own encoders: one request and one response per api key and version, with every field the
  version carries set (values walked from the schema, ``kproto.reference.schema()``), JoinGroup/SyncGroup
  carrying real consumer-protocol metadata and assignments, Produce/Fetch carrying real message sets;
* message sets of every codec and magic (``encode_message_set``), plus partial and damaged ones;
* the worked frames the repository keeps: ``samples/frames.hex``, the golden frames of
  ``tests/messages/test_golden_frames.py`` and the requests real clients sent (``tests/golden/clients``) --
  requests, responses, the message sets Produce requests carry, and each client's session as a broker
  input;
* ``samples/`` captures up to 8 KiB, and small captures written with ``kproto.pcap.writer`` in
  several link types and container variants.

Each file is named after what it holds; the content is in the harness's input format (see each
``fuzz/fuzz_*.py``).  Re-running rewrites the seed files, removes ``seed-*`` files nothing makes any more,
and leaves others (added minimised crashes, ``crash-*``/``regress-*``) alone.

    python fuzz/make_seeds.py [--check]
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import struct
import sys
import uuid
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CORPUS = os.path.join(ROOT, "fuzz", "corpus")
MAX_SAMPLE_CAPTURE = 8 * 1024
_I32 = struct.Struct(">i")


class Example(NamedTuple):
    """A worked frame the repository keeps: ``kind`` is "request", "response" or "message_set"."""

    label: str
    kind: str
    api_key: Optional[int]
    version: Optional[int]
    data: bytes


# ---------------------------------------------------------------------------------------------------- values


def _leaf(kind: str, attr: str, owner: str) -> Any:
    from kproto.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
    from kproto.records import encode_message_set

    if kind in ("int8", "int16", "uint16", "int32", "int64"):
        return {"acks": 1, "max_wait_ms": 0, "min_bytes": 1, "timeout_ms": 100}.get(attr, 1)
    if kind == "float64":
        return 0.5
    if kind == "uuid":
        return uuid.UUID(int=0x1234)
    if kind == "bool":
        return True
    if kind == "string":
        names = {"protocol_type": "consumer", "name": "test", "topic": "test", "protocol_name": "range"}
        return names.get(attr, "test")
    if kind == "records":
        return encode_message_set([(None, b"hello"), (b"k", b"v")])
    if attr == "metadata" and "JoinGroup" in owner:
        sub = ConsumerProtocolSubscription(topics=["test"], user_data=b"")
        return sub.encode_embedded(0)
    if attr in ("assignment", "member_assignment") and "SyncGroup" in owner:
        A = ConsumerProtocolAssignment
        a = A(assigned_partitions=[A.TopicPartition(topic="test", partitions=[0, 1])], user_data=b"")
        return a.encode_embedded(0)
    return b"\x00\x01"


def _struct_values(struct, version: int, owner: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for f in struct.fields_for(version):  # tagged fields included: seeds carry a non-empty tag section
        t = f.type
        if t.is_array:
            inner = t.element
            if inner.is_struct:
                out[f.attr] = [_struct_values(inner.struct, version, owner)]
            else:
                out[f.attr] = [_leaf(inner.kind, f.attr, owner)]
        elif t.is_struct:
            out[f.attr] = _struct_values(t.struct, version, owner)
        else:
            out[f.attr] = _leaf(t.kind, f.attr, owner)
    return out


def sample_message(spec, version: int):
    import kproto.messages as messages

    cls = getattr(messages, spec.name)
    return cls.from_dict(_struct_values(spec.root, version, spec.name))


# ---------------------------------------------------------------------------------------------------- corpora


def request_and_response_seeds() -> Tuple[Dict[str, bytes], Dict[str, bytes]]:
    import kproto
    from fuzz.fuzz_response_frames import input_for
    from kproto.reference import schema

    requests: Dict[str, bytes] = {}
    responses: Dict[str, bytes] = {}
    for spec in schema().messages():
        for version in spec.valid_versions:
            msg = sample_message(spec, version)
            label = f"{spec.name}_v{version}"
            if spec.kind == "request":
                frame = kproto.encode_request(msg, version, 7, "kproto")
                requests[label] = b"\x00" + frame[4:]
            else:
                frame = kproto.encode_response(msg, version, 7)
                responses[label] = input_for(spec.api_key, version, frame)
    return requests, responses


def worked_examples() -> List[Example]:
    """The worked frames the repository keeps: the titled frames of ``samples/frames.hex`` and the hex
    constants of ``tests/messages/test_golden_frames.py`` (read as text, not imported), each once, classified by
    what they decode as."""
    import kproto

    seen = set()
    out: List[Example] = []

    def add(label: str, frame: bytes, response_of: Optional[Tuple[int, int]] = None) -> None:
        if frame in seen:
            return
        seen.add(frame)
        label = re.sub(r"\W+", "_", label).strip("_")[:48]
        if response_of is None:
            try:
                header, _ = kproto.decode_request(frame)
                out.append(Example(label, "request", header.api_key, header.api_version, frame))
                return
            except kproto.KprotoError:
                response_of = _response_reading(frame)
        if response_of is not None:
            out.append(Example(label, "response", response_of[0], response_of[1], frame))
        elif _is_message_set(frame):
            out.append(Example(label, "message_set", None, None, frame))

    for title, frame in _frames_hex(os.path.join(ROOT, "samples", "frames.hex")):
        named = re.search(r"(\w+)Response v(\d+)", title)
        add(
            "frames_hex_" + title.split(" (")[0], frame, _api_of(named.group(1), int(named.group(2))) if named else None
        )
    for entry in golden_client_frames():
        if entry["frame"] not in seen:
            seen.add(entry["frame"])
            label = f"client_{entry['client']}_{entry['file'].rsplit('/', 1)[-1].rsplit('.', 1)[0]}"
            out.append(
                Example(re.sub(r"\W+", "_", label), "request", entry["api_key"], entry["api_version"], entry["frame"])
            )
    golden = os.path.join(ROOT, "tests", "test_golden_frames.py")
    if os.path.exists(golden):
        tree = ast.parse(open(golden, encoding="utf-8").read())
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and re.fullmatch(r"(?:[0-9a-f]{2})+", node.value.value)
            ):
                add("golden_" + node.targets[0].id, bytes.fromhex(node.value.value))
    return out


def golden_client_frames() -> List[Dict[str, Any]]:
    """The requests real clients sent, recorded under ``tests/golden/clients`` (``index.json`` lists them
    with their api and version), in recording order; each entry gains ``frame`` (the bytes)."""
    base = os.path.join(ROOT, "tests", "golden", "clients")
    index = os.path.join(base, "index.json")
    if not os.path.exists(index):
        return []
    out = []
    for entry in json.load(open(index, encoding="utf-8")).get("frames", []):
        path = os.path.join(base, entry["file"])
        if os.path.exists(path):
            out.append(dict(entry, frame=open(path, "rb").read()))
    return out


def _frames_hex(path: str) -> List[Tuple[str, bytes]]:
    """(title, bytes) of each ``# title`` block of offset-prefixed hex lines."""
    if not os.path.exists(path):
        return []
    blocks: List[Tuple[str, bytearray]] = []
    for line in open(path, encoding="utf-8"):
        if line.startswith("#"):
            blocks.append((line[1:].strip(), bytearray()))
        elif ":" in line and blocks:
            blocks[-1][1].extend(bytes.fromhex(line.split(":", 1)[1]))
    return [(title, bytes(data)) for title, data in blocks if data]


def _api_of(name: str, version: int) -> Optional[Tuple[int, int]]:
    from kproto.apis import APIS

    try:
        return APIS[name].api_key, version
    except KeyError:
        return None


def _response_reading(frame: bytes) -> Optional[Tuple[int, int]]:
    """The first (api key, version) under which ``frame`` decodes as a response and re-encodes exactly."""
    import kproto
    from kproto.apis import APIS

    for _, info in sorted(APIS.items()):
        for version in info.versions:
            try:
                header, msg = kproto.decode_response(frame, info.api_key, version)
                if kproto.encode_response(msg, version, header.correlation_id) == frame:
                    return info.api_key, version
            except kproto.KprotoError:
                continue
    return None


def _is_message_set(data: bytes) -> bool:
    from kproto.records import decode_message_set

    try:
        return bool(decode_message_set(data))
    except Exception:  # noqa: BLE001 - anything that does not decode is simply not a message set
        return False


def _produced_records(frame: bytes) -> List[bytes]:
    """The record sets a Produce request frame carries (none for other requests)."""
    import kproto

    try:
        _, msg = kproto.decode_request(frame)
    except kproto.KprotoError:
        return []
    if msg.API_KEY != 0:
        return []
    return [bytes(p.records.raw) for t in msg.topic_data for p in t.partition_data if p.records is not None]


def message_set_seeds() -> Dict[str, bytes]:
    from kproto.records import encode_message_set as enc

    msgs = [(None, b"hello"), (b"key", b"value"), (b"", None)]
    ts = [(None, b"hello", 1000), (b"key", b"value", 2000)]
    out: Dict[str, bytes] = {}
    for magic in (0, 1):
        items = msgs if magic == 0 else ts
        for codec in (None, "gzip", "snappy", "lz4"):
            name = f"magic{magic}_{codec or 'none'}"
            wire = enc(items, magic=magic, codec=codec, base_offset=5)
            out[name] = b"\x01" + wire
            out[name + "_nocrc"] = b"\x02" + wire
        out[f"magic{magic}_snappy_raw"] = b"\x01" + enc(items, magic=magic, codec="snappy", snappy_framing="raw")
    out["magic1_logappend_gzip"] = b"\x01" + enc(ts, magic=1, codec="gzip", timestamp_type=1, base_offset=9)
    plain = enc(msgs)
    out["partial_tail"] = b"\x01" + plain + plain[:20]
    out["bytearray_input"] = b"\x05" + plain
    out["memoryview_input"] = b"\x09" + plain
    inner1 = enc(ts, magic=1, base_offset=0)
    out["wrap_gzip_inner_magic0"] = bytes((0x10 | 0x02,)) + plain
    out["wrap_snappy_inner_magic0"] = bytes((0x20 | 0x02 | 0x01,)) + plain
    out["wrap_lz4_magic1_logappend"] = bytes((0x30 | 0x40 | 0x80 | 0x02 | 0x01,)) + inner1
    out["wrap_gzip_magic1"] = bytes((0x10 | 0x40 | 0x02,)) + inner1
    out["mixed_codecs"] = (
        b"\x01" + plain + enc(msgs, codec="gzip", base_offset=3) + enc(msgs, codec="lz4", base_offset=6)
    )
    return out


def small_captures() -> Dict[str, bytes]:
    import kproto
    from kproto.pcap import numbers
    from kproto.pcap.writer import Impairments, TcpConversation, write_capture
    from kproto.messages import MetadataRequest, MetadataResponse

    req = kproto.encode_request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="test")]), 0, 1, "c")
    B = MetadataResponse.MetadataResponseBroker
    resp = kproto.encode_response(MetadataResponse(brokers=[B(node_id=0, host="h", port=9092)], topics=[]), 0, 1)
    conv = TcpConversation(
        client=("10.0.0.1", 40000), server=("10.0.0.10", 9092), messages=[("client", req, 1.0), ("server", resp, 1.001)]
    )
    variants = {
        "pcap_ethernet": dict(format="pcap"),
        "pcap_ns_bigendian": dict(format="pcap", nanosecond=True, byte_order=">"),
        "pcap_raw": dict(format="pcap", link_type=numbers.LINKTYPE_RAW),
        "pcap_sll_vlan": dict(format="pcap", link_type=numbers.LINKTYPE_LINUX_SLL),
        "pcap_null": dict(format="pcap", link_type=numbers.LINKTYPE_NULL),
        "pcap_ethernet_vlan": dict(format="pcap", vlan=(100,)),
        "pcap_ipv4_options": dict(format="pcap", ipv4_options=b"\x01\x01\x01\x00"),
        "pcapng": dict(format="pcapng"),
        "pcapng_simple_blocks": dict(format="pcapng", simple_blocks=True, extra_blocks=True),
        "pcapng_sll2_bigendian": dict(format="pcapng", link_type=numbers.LINKTYPE_LINUX_SLL2, byte_order=">"),
        "pcap_snaplen_cut": dict(format="pcap", snaplen=60),
    }
    out = {}
    for name, options in variants.items():
        buf = io.BytesIO()
        write_capture(buf, [conv], **options)
        out[name] = buf.getvalue()
    buf = io.BytesIO()
    write_capture(buf, [conv], mss=8, impairments=Impairments(drop=[1], retransmit=[2], swap=[3]))
    out["pcap_impaired"] = buf.getvalue()
    samples = os.path.join(ROOT, "samples")
    for path in sorted(os.listdir(samples)) if os.path.isdir(samples) else []:
        full = os.path.join(samples, path)
        if path.endswith((".pcap", ".pcapng")) and os.path.getsize(full) <= MAX_SAMPLE_CAPTURE:
            out["sample_" + path.replace(".", "_")] = open(full, "rb").read()
    return out


def reassembly_seeds(examples: List[Example]) -> Dict[str, bytes]:
    from fuzz.fuzz_tcp_reassembly import build_input, setup

    setup()
    frames = [e.data for e in examples if e.kind == "request"]
    answers = [e.data for e in examples if e.kind == "response"]
    client = b"".join(frames)[:1500]
    server = b"".join(answers)[:1500]
    return {
        "handshake_in_order": build_input(client, server, flags=3, retransmit=0, window=0),
        "handshake_reordered": build_input(
            client, server, flags=3, window=4, retransmit=60, schedule=bytes(range(7, 250, 13))
        ),
        "midstream_wraparound": build_input(
            client, server, flags=0, client_isn=0xFFFFFF00, server_isn=0xFFFFFFF0, window=3
        ),
        "server_first_rst_garbage": build_input(
            client[:200], server[:200], flags=8 | 16 | 4 | 1, schedule=b"\x05\x90\x33\xf1"
        ),
    }


def hex_seeds(examples: List[Example]) -> Dict[str, bytes]:
    out = {}
    path = os.path.join(ROOT, "samples", "frames.hex")
    if os.path.exists(path):
        out["samples_frames_hex"] = open(path, "rb").read()
    for fmt in range(10):
        out[f"render_format_{fmt}"] = bytes((fmt, 15)) + (examples[0].data if examples else b"\x00\x01\x02")
    out["tshark_label_lines"] = (
        b"Frame (30 bytes):\n"
        b"0000  00 00 00 1a 00 03 00 00 00 00 00 01 00 06 6b 70   ..............kp\n"
        b"0010  72 6f 74 6f 00 00 00 01 00 04 74 65 73 74         roto......test\n"
    )
    out["hexdump_c"] = (
        b"00000000  00 00 00 1a 00 03 00 00  00 00 00 01 00 06 6b 70  |..............kp|\n"
        b"00000010  72 6f 74 6f 00 00 00 01  00 04 74 65 73 74        |roto......test|\n0000001e\n"
    )
    out["xxd"] = b"00000000: 0000 001a 0003 0000 0000 0001 0006 6b70  ..............kp\n"
    out["bare_variants"] = b"0x00 0x00, 0x00 0x1a\n\\x00\\x03\n00:00:00:00\n0x0000000100066b70 # c\n"
    out["binary_frame"] = b"\x00\x00\x00\x1a\x00\x03\x00\x00\x00\x00\x00\x01\x00\x06kproto\x00\x00\x00\x01\x00\x04test"
    return out


def broker_seeds(requests: Dict[str, bytes]) -> Dict[str, bytes]:
    """Client streams: each request type alone, and a consumer-group session."""
    import kproto
    from kproto.messages import (
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        SyncGroupRequest,
    )

    out = {}
    for label, data in requests.items():
        body = data[1:]
        frame = _I32.pack(len(body)) + body
        # make the frames talk about the topic the broker has
        out["alone_" + label] = b"\x40" + frame
    sub = ConsumerProtocolSubscription(topics=["test"], user_data=b"").encode_embedded(0)
    A = ConsumerProtocolAssignment
    asg = A(assigned_partitions=[A.TopicPartition(topic="test", partitions=[0, 1])], user_data=b"").encode_embedded(0)
    P = JoinGroupRequest.JoinGroupRequestProtocol
    join = kproto.encode_request(
        JoinGroupRequest(
            group_id="test",
            session_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[P(name="range", metadata=sub)],
        ),
        0,
        1,
        "c",
    )
    out["group_join_only"] = b"\xff" + join
    member = "test"  # not the id the broker gives: exercises UNKNOWN_MEMBER_ID (the values sample_message uses)
    S = SyncGroupRequest.SyncGroupRequestAssignment
    sync = kproto.encode_request(
        SyncGroupRequest(
            group_id="test", generation_id=1, member_id=member, assignments=[S(member_id=member, assignment=asg)]
        ),
        0,
        2,
        "c",
    )
    hb = kproto.encode_request(HeartbeatRequest(group_id="test", generation_id=1, member_id=member), 0, 3, "c")
    from kproto.reference import schema

    specs = {spec.name: spec for spec in schema().messages()}
    commit = kproto.encode_request(sample_message(specs["OffsetCommitRequest"], 2), 2, 4, "c")
    fetch = kproto.encode_request(sample_message(specs["OffsetFetchRequest"], 1), 1, 5, "c")
    leave = kproto.encode_request(LeaveGroupRequest(group_id="test", member_id=member), 0, 6, "c")
    out["group_session"] = b"\xff" + join + sync + hb + commit + fetch + leave
    sessions: Dict[str, bytes] = {}
    for entry in golden_client_frames():
        sessions[entry["client"]] = sessions.get(entry["client"], b"") + entry["frame"]
    for client, stream in sessions.items():
        out["client_session_" + re.sub(r"\W+", "_", client)] = b"\xff" + stream
    return out


def build_all() -> Dict[str, Dict[str, bytes]]:
    requests, responses = request_and_response_seeds()
    examples = worked_examples()
    from fuzz.fuzz_response_frames import input_for

    ex_requests = {"ex_" + e.label: b"\x01" + e.data for e in examples if e.kind == "request"}
    ex_responses = {"ex_" + e.label: input_for(e.api_key, e.version, e.data) for e in examples if e.kind == "response"}
    ex_sets = {"ex_" + e.label: b"\x01" + e.data for e in examples if e.kind == "message_set"}
    ex_sets.update(
        {
            "ex_records_" + e.label: b"\x01" + r
            for e in examples
            if e.kind == "request"
            for r in _produced_records(e.data)
        }
    )
    return {
        "request_frames": {**requests, **ex_requests},
        "response_frames": {**responses, **ex_responses},
        "message_sets": {**message_set_seeds(), **ex_sets},
        "capture_files": small_captures(),
        "tcp_reassembly": reassembly_seeds(examples),
        "hex_input": hex_seeds(examples),
        "broker_requests": broker_seeds(requests),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="build fuzz/corpus/* seed files")
    parser.add_argument("--check", action="store_true", help="exit 1 if any seed file is missing or different")
    args = parser.parse_args(argv)
    stale = 0
    total = 0
    for harness, seeds in build_all().items():
        d = os.path.join(CORPUS, harness)
        os.makedirs(d, exist_ok=True)
        for name, data in sorted(seeds.items()):
            path = os.path.join(d, "seed-" + name)
            total += len(data)
            old = open(path, "rb").read() if os.path.exists(path) else None
            if old != data:
                stale += 1
                if not args.check:
                    with open(path, "wb") as f:
                        f.write(data)
        wanted = {"seed-" + name for name in seeds}
        for old in sorted(n for n in os.listdir(d) if n.startswith("seed-") and n not in wanted):
            stale += 1  # a seed no source makes any more (a renamed api, a removed example)
            if not args.check:
                os.remove(os.path.join(d, old))
        print(f"{harness}: {len(seeds)} seeds")
    print(f"{total} bytes of seeds" + (f", {stale} stale" if args.check and stale else ""))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
