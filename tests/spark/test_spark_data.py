"""Test inputs for the kproto.spark tests (no tests here): scripted Kafka conversations written as a
capture rotated over several files, damaged files, and Kafka log segments; and the Spark capture
pipeline's stages run by hand in one process."""

from __future__ import annotations

import io
import os
import random
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

import kproto
from kproto.pcap.writer import Side, TcpConversation, write_capture, write_segments
from kproto.records import encode_control_batch, encode_message_set, encode_record_batch
from kproto.spark.capture_plan import plan_ranges
from kproto.spark.capture_splits import DEFAULT_SPLIT_BYTES
from kproto.spark.capture_stages import CONNECTION_KEY, SEGMENTS, decode_sorted_segments, extract_segments
from kproto.spark.inputs import capture_order_key
from kproto.spark.schema import TABLES

BROKER = ("10.9.0.10", 9092)
T0 = 1_460_000_000.0
TOPIC = "orders"


class Script:
    """One client connection: frames built with kproto's encoders, times advancing per exchange."""

    def __init__(self, client: Tuple[str, int], client_id: str, start: float) -> None:
        self.client = client
        self.client_id = client_id
        self.clock = start
        self.corr = 0
        self.frames: List[Tuple[Side, bytes, float]] = []

    def exchange(
        self,
        api: str,
        version: int,
        request: Dict[str, Any],
        response: Optional[Dict[str, Any]],
        latency: float = 0.003,
    ) -> None:
        info = kproto.APIS[api]
        self.corr += 1
        self.clock += 0.050
        self.frames.append(
            (
                Side.CLIENT,
                kproto.encode_request(info.request.from_dict(request), version, self.corr, self.client_id),
                self.clock,
            )
        )
        if response is not None:
            self.clock += latency
            self.frames.append(
                (Side.SERVER, kproto.encode_response(info.response.from_dict(response), version, self.corr), self.clock)
            )

    def conversation(self, **options: Any) -> TcpConversation:
        return TcpConversation(self.client, BROKER, self.frames, **options)


def payloads(prefix: str, count: int, size: int = 80) -> List[Tuple[Optional[bytes], bytes]]:
    return [
        (f"{prefix}-k{i % 5}".encode() if i % 3 else None, f"{prefix}-{i}".ljust(size, ".").encode())
        for i in range(count)
    ]


def metadata(topics: Sequence[str], error: int = 0) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    request = {"topics": [{"name": t} for t in topics]}
    response = {
        "brokers": [{"node_id": 0, "host": "kafka-0", "port": 9092}],
        "topics": [
            {
                "error_code": error,
                "name": t,
                "partitions": []
                if error
                else [{"error_code": 0, "partition_index": 0, "leader_id": 0, "replica_nodes": [0], "isr_nodes": [0]}],
            }
            for t in topics
        ],
    }
    return request, response


def produce(topic: str, partition: int, records: bytes, acks: int = 1, error: int = 0) -> Tuple[Dict, Dict]:
    request = {
        "acks": acks,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    response = {
        "responses": [
            {"name": topic, "partition_responses": [{"index": partition, "error_code": error, "base_offset": 0}]}
        ],
        "throttle_time_ms": 0,
    }
    return request, response


def fetch(partitions: Dict[int, bytes], error: int = 0) -> Tuple[Dict, Dict]:
    request = {
        "replica_id": -1,
        "max_wait_ms": 100,
        "min_bytes": 1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in sorted(partitions)
                ],
            }
        ],
    }
    response = {
        "throttle_time_ms": 0,
        "responses": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition_index": p, "error_code": error, "high_watermark": 100, "records": r}
                    for p, r in sorted(partitions.items())
                ],
            }
        ],
    }
    return request, response


def conversations() -> List[TcpConversation]:
    """A producer (every codec, a request larger than many packets, acks=0, an error), a consumer, a
    group member with an error, a 4-tuple used twice, and a request left unanswered."""
    p = Script(("10.9.0.21", 41001), "producer-1", T0)
    p.exchange("Metadata", 0, *metadata([TOPIC, "audit"]))
    for n, codec in enumerate([None, "gzip", "snappy", "lz4", None, "gzip"]):
        p.exchange("Produce", 1, *produce(TOPIC, n % 2, encode_message_set(payloads(f"p{n}", 4 + n), codec=codec)))
    p.exchange("Produce", 1, *produce(TOPIC, 0, encode_message_set(payloads("big", 60, 200))))  # ~15 kB
    p.exchange("Produce", 1, produce("audit", 0, encode_message_set(payloads("a", 2)), acks=0)[0], None)
    p.exchange("Produce", 0, *produce("missing", 0, encode_message_set(payloads("m", 1)), error=3))
    c = Script(("10.9.0.22", 41002), "consumer-1", T0 + 0.01)
    p0 = encode_message_set(payloads("f0", 5), magic=1, codec="gzip")
    p1 = encode_message_set(payloads("f1", 3)) + encode_message_set(payloads("cut", 2), base_offset=3)[:30]
    c.exchange("Fetch", 1, *fetch({0: p0, 1: p1}))
    c.exchange("Fetch", 1, *fetch({0: b""}, error=1))
    g = Script(("10.9.0.23", 41003), "member-1", T0 + 0.02)
    g.exchange("Heartbeat", 0, {"group_id": "g", "generation_id": 1, "member_id": "m"}, {"error_code": 27})
    first = Script(("10.9.0.24", 41004), "reuse", T0 + 0.03)
    first.exchange("Metadata", 0, *metadata([TOPIC]))
    again = Script(("10.9.0.24", 41004), "reuse", T0 + 0.40)
    again.exchange("Metadata", 0, *metadata(["audit"], error=5))
    lost = Script(("10.9.0.25", 41005), "lost", T0 + 0.05)
    lost.exchange("Metadata", 0, metadata([TOPIC])[0], None)
    return [
        p.conversation(),
        c.conversation(),
        g.conversation(),
        first.conversation(),
        again.conversation(client_isn=7_000_000),
        lost.conversation(),
    ]


def capture_bytes(convs: Sequence[TcpConversation], impairments: Any = None) -> bytes:
    buf = io.BytesIO()
    write_capture(buf, convs, mss=1400, impairments=impairments)
    return buf.getvalue()


def write_rotated(
    directory: str,
    convs: Sequence[TcpConversation],
    names: Sequence[str],
    impairments: Any = None,
    pcapng_last: bool = True,
) -> List[str]:
    """The capture of ``convs`` cut into ``len(names)`` files as a rotating capture writes them (the
    last in pcapng when ``pcapng_last``).  The first cut falls inside the largest request, so one frame
    is split between two files; the others split the rest evenly."""
    buf = io.BytesIO()
    segments = write_capture(buf, convs, mss=1400, impairments=impairments).segments
    full = [i for i, seg in enumerate(segments) if len(seg.payload) == 1400]
    cuts = [full[len(full) // 2]] if full else []
    rest = len(segments) - (cuts[0] if cuts else 0)
    start = cuts[0] if cuts else 0
    cuts += [start + rest * k // (len(names) - len(cuts)) for k in range(1, len(names) - len(cuts))]
    bounds = [0] + sorted(cuts) + [len(segments)]
    paths = []
    for i, name in enumerate(names):
        path = os.path.join(directory, name)
        fmt = "pcapng" if pcapng_last and i == len(names) - 1 else "pcap"
        write_segments(path, segments[bounds[i] : bounds[i + 1]], format=fmt)
        paths.append(path)
    return paths


def write_damaged(directory: str) -> Dict[str, str]:
    """A truncated capture, a text file and an empty file."""
    whole = capture_bytes(conversations()[2:3])
    paths = {
        "truncated": os.path.join(directory, "cut.pcap"),
        "text": os.path.join(directory, "notes.txt"),
        "empty": os.path.join(directory, "empty.pcap"),
    }
    with open(paths["truncated"], "wb") as f:
        f.write(whole[: len(whole) - 7])
    with open(paths["text"], "wb") as f:
        f.write(b"not a capture at all\n")
    open(paths["empty"], "wb").close()
    return paths


def write_segments_dir(directory: str) -> Dict[str, str]:
    """A Kafka log directory: three good segments (magic 0 and 1 compressed; magic 2: a transactional
    batch whose records carry headers, then its commit marker), a truncated one, and the index files a
    broker keeps beside them."""
    files = {}
    layout = {
        "good0": (
            "orders-0",
            0,
            encode_message_set(payloads("s0", 20))
            + encode_message_set(payloads("s1", 7), codec="snappy", base_offset=20),
        ),
        "good1": ("clicks-stream-3", 100, encode_message_set(payloads("c", 9), magic=1, codec="lz4", base_offset=100)),
        "good2": (
            "events-2",
            40,
            encode_record_batch(
                [
                    (k, v, int(T0 * 1000) + i, [("trace", f"t{i}".encode()), ("empty", None)][: i % 3])
                    for i, (k, v) in enumerate(payloads("e", 5))
                ],
                base_offset=40,
                codec="zstd",
                producer_id=4242,
                producer_epoch=3,
                base_sequence=17,
                transactional=True,
            )
            + encode_control_batch(True, producer_id=4242, producer_epoch=3, base_offset=45, timestamp=int(T0 * 1000)),
        ),
        "truncated": (
            "orders-1",
            0,
            encode_message_set(payloads("t", 6), codec="gzip")
            + encode_message_set(payloads("u", 4), base_offset=6)[:-11],
        ),
    }
    for label, (dirname, base, data) in layout.items():
        os.makedirs(os.path.join(directory, dirname), exist_ok=True)
        path = os.path.join(directory, dirname, f"{base:020d}.log")
        with open(path, "wb") as f:
            f.write(data)
        with open(os.path.join(directory, dirname, f"{base:020d}.index"), "wb") as f:
            f.write(b"\0" * 16)
        files[label] = path
    return files


def stage_by_hand(
    files: List[str], partitions: int, seed: int, split_bytes: int = DEFAULT_SPLIT_BYTES
) -> Dict[str, pa.Table]:
    """What Spark does, in one process: plan ranges, stage 1 per range, hash partition by key, sort,
    stage 2 in arbitrary batch sizes per partition."""
    ranges = plan_ranges([(f, os.path.getsize(f)) for f in files], split_bytes=split_bytes)
    stage1 = pa.Table.from_batches([b for r in ranges for b in extract_segments(r)], schema=SEGMENTS)
    rows_ = stage1.to_pylist()
    parts: List[List[Dict[str, Any]]] = [[] for _ in range(partitions)]
    for r in rows_:
        key = tuple(r[k] for k in CONNECTION_KEY)
        parts[zlib.crc32(repr(key).encode()) % partitions].append(r)
    out: Dict[str, List[pa.RecordBatch]] = {name: [] for name in TABLES}
    rng = random.Random(seed)
    for part in parts:
        part.sort(
            key=lambda r: (
                tuple((v is not None, v) for v in (r[k] for k in CONNECTION_KEY)),
                capture_order_key(r["file_time"], r["file"]),
                r["packet"] or 0,
            )
        )
        table = pa.Table.from_pylist(part, schema=SEGMENTS)
        batches, pos = [], 0
        while pos < table.num_rows:
            n = rng.randint(1, 9)
            batches.extend(table.slice(pos, n).to_batches())
            pos += n
        for name, batch in decode_sorted_segments(batches, flush_rows=5):
            out[name].append(batch)
    return {name: pa.Table.from_batches(out[name], schema=schema) for name, schema in TABLES.items()}


def spill_by_hand(
    files: List[str], tasks: int, directory: str, split_bytes: int = DEFAULT_SPLIT_BYTES
) -> Dict[str, pa.Table]:
    """What ``run_captures`` does, in one process: plan ranges, stage 1 writing spill files (ranges in
    reverse, two per call), connections placed on ``tasks`` stage 2 tasks, each decoded alone."""
    from kproto.spark.capture_spill import DecodePieces, SpillRanges, assign_connections

    ranges = [tuple(r) for r in plan_ranges([(f, os.path.getsize(f)) for f in files], split_bytes=split_bytes)][::-1]
    spill = SpillRanges(os.path.join(directory, "spill"))
    results = [r for i in range(0, len(ranges), 2) for r in spill(iter(ranges[i : i + 2]))]
    placed = assign_connections([p for r in results for p in r.pieces], tasks)
    assert len(placed) == min(tasks, len({p.key for r in results for p in r.pieces if p.key is not None}) or 1)
    out: Dict[str, List[pa.RecordBatch]] = {name: [] for name in TABLES}
    for task in placed:
        for name, batch in DecodePieces()(iter([task])):
            out[name].append(batch)
    return {name: pa.Table.from_batches(out[name], schema=schema) for name, schema in TABLES.items()}
