"""Generate the sample captures and hex frames in ``samples/`` with kproto's own encoders.

    python samples/make_samples.py [OUTPUT_DIR]      # default: the directory of this script

The traffic imitates Kafka 0.9 clients and a 0.9 broker (request versions as kafka-python and librdkafka
send them in 0.9 mode): every frame is built with ``kproto.encode_request`` /
``kproto.encode_response`` and message sets with ``kproto.records.encode_message_set``, then written by
``kproto.pcap.writer.write_capture`` as TCP conversations with handshakes.  Output is deterministic
(fixed timestamps, addresses and payloads), so re-running leaves the committed files unchanged.

This generator is kept apart from the CLI and its tests so that recorded real-client traffic can
replace the captures later without touching anything else.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import kproto
from kproto.pcap.writer import Side, TcpConversation, write_capture
from kproto.group.consumer_codec import ConsumerProtocolCodec
from kproto.records import encode_message_set

BROKER = ("10.0.0.10", 9092)
BROKER_1 = ("10.0.0.11", 9092)
START = 1_452_000_000.0  # 2016-01-05, the 0.9.0 era
TOPIC = "orders"
CONSUMER = ConsumerProtocolCodec()


@dataclass
class Connection:
    """A client connection being scripted: frames with their times, correlation ids counted per client."""

    client: Tuple[str, int]
    client_id: Optional[str]
    server: Tuple[str, int] = BROKER
    clock: float = START
    correlation_id: int = 0
    messages: List[Tuple[Side, bytes, float]] = field(default_factory=list)

    def exchange(
        self,
        api: str,
        version: int,
        request: Dict[str, Any],
        response: Optional[Dict[str, Any]],
        *,
        think: float = 0.010,
        latency: float = 0.002,
        wait: float = 0.0,
    ) -> None:
        """Request at ``clock + think``; its response ``latency`` (+ ``wait``, a broker hold) later."""
        info = kproto.APIS[api]
        self.correlation_id += 1
        self.clock += think
        frame = kproto.encode_request(info.request.from_dict(request), version, self.correlation_id, self.client_id)
        self.messages.append((Side.CLIENT, frame, self.clock))
        if response is not None:
            self.clock += latency + wait
            answer = kproto.encode_response(info.response.from_dict(response), version, self.correlation_id)
            self.messages.append((Side.SERVER, answer, self.clock))

    def conversation(self) -> TcpConversation:
        return TcpConversation(self.client, self.server, self.messages)


def messages(prefix: str, count: int, size: int = 60, keyed: bool = True) -> List[Tuple[Optional[bytes], bytes]]:
    """Deterministic JSON-ish payloads: ``(key, value)`` pairs."""
    out = []
    for i in range(count):
        key = f"{prefix}-key-{i % 7}".encode() if keyed else None
        body = f'{{"id":{i},"item":"{prefix}-{i}","amount":{(i * 37) % 1000}}}'
        out.append((key, body.ljust(size, " ").encode()))
    return out


def metadata_response(topics: Sequence[str], error: int = 0, partitions: int = 2) -> Dict[str, Any]:
    return {
        "brokers": [{"node_id": 0, "host": "kafka-0", "port": 9092}, {"node_id": 1, "host": "kafka-1", "port": 9092}],
        "topics": [
            {
                "error_code": error,
                "name": t,
                "partitions": []
                if error
                else [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": p % 2,
                        "replica_nodes": [p % 2, 1 - p % 2],
                        "isr_nodes": [p % 2, 1 - p % 2],
                    }
                    for p in range(partitions)
                ],
            }
            for t in topics
        ],
    }


def produce(topic: str, partition: int, records: bytes, acks: int = 1) -> Dict[str, Any]:
    return {
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def produce_response(topic: str, partition: int, base_offset: int, error: int = 0) -> Dict[str, Any]:
    return {
        "responses": [
            {
                "name": topic,
                "partition_responses": [{"index": partition, "error_code": error, "base_offset": base_offset}],
            }
        ],
        "throttle_time_ms": 0,
    }


def producer_conversation() -> TcpConversation:
    """A producer (kafka-python style): metadata with a leader election, produce in every codec, acks=0."""
    conn = Connection(("10.0.0.21", 50101), "producer-1")
    conn.exchange(
        "Metadata",
        0,
        {"topics": [{"name": TOPIC}, {"name": "audit"}]},
        {
            **metadata_response([TOPIC]),
            "topics": metadata_response([TOPIC])["topics"] + metadata_response(["audit"], error=5)["topics"],
        },
    )
    conn.exchange(
        "Metadata", 0, {"topics": [{"name": "audit"}]}, metadata_response(["audit"], partitions=1), think=0.100
    )
    batches = [(0, None, 3), (1, "gzip", 5), (0, "snappy", 4), (1, "lz4", 3), (0, "gzip", 12)]
    next_offset = {0: 0, 1: 0}
    for n, (partition, codec, count) in enumerate(batches):
        records = encode_message_set(messages(f"p{n}", count), codec=codec, base_offset=0)
        conn.exchange(
            "Produce", 1, produce(TOPIC, partition, records), produce_response(TOPIC, partition, next_offset[partition])
        )
        next_offset[partition] += count
    audit = encode_message_set(messages("audit", 2, keyed=False))
    conn.exchange("Produce", 1, produce("audit", 0, audit, acks=0), None)
    conn.exchange(
        "Produce",
        0,
        produce("missing", 0, encode_message_set(messages("m", 1))),
        {"responses": produce_response("missing", 0, -1, error=3)["responses"]},
    )
    return conn.conversation()


def fetch_response(partitions: List[Dict[str, Any]], version: int) -> Dict[str, Any]:
    body: Dict[str, Any] = {"responses": [{"topic": TOPIC, "partitions": partitions}]}
    if version >= 1:
        body["throttle_time_ms"] = 0
    return body


def fetch_request(offsets: Dict[int, int]) -> Dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": p, "fetch_offset": o, "partition_max_bytes": 1048576}
                    for p, o in sorted(offsets.items())
                ],
            }
        ],
    }


def consumer_fetch_conversations() -> List[TcpConversation]:
    """A simple consumer: metadata, list offsets, fetches of plain and compressed sets (one cut short);
    and an older client whose Fetch v0 asks beyond the end of the log."""
    conn = Connection(("10.0.0.22", 50202), "consumer-1", clock=START + 1)
    conn.exchange("Metadata", 0, {"topics": [{"name": TOPIC}]}, metadata_response([TOPIC]))
    conn.exchange(
        "ListOffsets",
        0,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "timestamp": -2, "max_num_offsets": 1},
                        {"partition_index": 1, "timestamp": -2, "max_num_offsets": 1},
                    ],
                }
            ],
        },
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "error_code": 0, "old_style_offsets": [0]},
                        {"partition_index": 1, "error_code": 0, "old_style_offsets": [0]},
                    ],
                }
            ]
        },
    )
    # Partition 0: 3 plain messages then a snappy wrapper; partition 1: gzip then lz4 wrappers, and the
    # fetch is cut inside a last message (max_bytes), as a broker does.
    p0 = encode_message_set(messages("p0", 3), base_offset=0) + encode_message_set(
        messages("p2", 4), codec="snappy", base_offset=3
    )
    p1 = encode_message_set(messages("p1", 5), codec="gzip", base_offset=0) + encode_message_set(
        messages("p3", 3), codec="lz4", base_offset=5
    )
    cut = encode_message_set(messages("p4", 2), base_offset=8)[:40]
    conn.exchange(
        "Fetch",
        1,
        fetch_request({0: 0, 1: 0}),
        fetch_response(
            [
                {"partition_index": 0, "error_code": 0, "high_watermark": 7, "records": p0},
                {"partition_index": 1, "error_code": 0, "high_watermark": 10, "records": p1 + cut},
            ],
            1,
        ),
    )
    conn.exchange(
        "Fetch",
        1,
        fetch_request({0: 7, 1: 8}),
        fetch_response(
            [
                {"partition_index": 0, "error_code": 0, "high_watermark": 7, "records": b""},
                {
                    "partition_index": 1,
                    "error_code": 0,
                    "high_watermark": 10,
                    "records": encode_message_set(messages("p4", 2), codec="gzip", base_offset=8),
                },
            ],
            1,
        ),
        wait=0.0,
    )
    conn.exchange(
        "Fetch",
        1,
        fetch_request({0: 7, 1: 10}),
        fetch_response(
            [
                {"partition_index": 0, "error_code": 0, "high_watermark": 7, "records": b""},
                {"partition_index": 1, "error_code": 0, "high_watermark": 10, "records": b""},
            ],
            1,
        ),
        wait=0.500,
    )
    # An older client on the same broker: Fetch v0 asking beyond the log end.
    old = Connection(("10.0.0.23", 50303), "legacy-consumer", clock=START + 2)
    old.exchange(
        "Fetch",
        0,
        fetch_request({0: 500}),
        fetch_response([{"partition_index": 0, "error_code": 1, "high_watermark": 7, "records": b""}], 0),
    )
    return [conn.conversation(), old.conversation()]


def join(member_id: str, topics: Sequence[str]) -> Dict[str, Any]:
    return {
        "group_id": "billing",
        "session_timeout_ms": 30000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": CONSUMER.encode_subscription(topics)}],
    }


def join_response(generation: int, member: str, leader: str, members: Sequence[str], error: int = 0) -> Dict[str, Any]:
    return {
        "error_code": error,
        "generation_id": generation,
        "protocol_name": "range",
        "leader": leader,
        "member_id": member,
        "members": [{"member_id": m, "metadata": CONSUMER.encode_subscription([TOPIC])} for m in members],
    }


def assignment(partitions: Sequence[int]) -> bytes:
    return CONSUMER.encode_assignment({TOPIC: list(partitions)}) if partitions else b""


def group_conversations() -> List[TcpConversation]:
    """Two consumers of group 'billing': c1 joins alone, c2 joins, heartbeats report the rebalance,
    both rejoin, sync, commit and fetch offsets; then c2 leaves."""
    c1 = Connection(("10.0.0.31", 50401), "billing-consumer-1", clock=START + 3)
    m1 = "billing-consumer-1-6a1c-41f2"
    m2 = "billing-consumer-2-9b7e-02aa"
    c1.exchange(
        "GroupCoordinator", 0, {"key": "billing"}, {"error_code": 0, "node_id": 0, "host": "kafka-0", "port": 9092}
    )
    c1.exchange("JoinGroup", 0, join("", [TOPIC]), join_response(1, m1, m1, [m1]))
    c1.exchange(
        "SyncGroup",
        0,
        {
            "group_id": "billing",
            "generation_id": 1,
            "member_id": m1,
            "assignments": [{"member_id": m1, "assignment": assignment([0, 1])}],
        },
        {"error_code": 0, "assignment": assignment([0, 1])},
    )
    c1.exchange(
        "OffsetFetch",
        1,
        {"group_id": "billing", "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]},
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": 0} for p in (0, 1)
                    ],
                }
            ]
        },
    )
    c1.exchange(
        "Heartbeat", 0, {"group_id": "billing", "generation_id": 1, "member_id": m1}, {"error_code": 0}, think=3.0
    )
    c1.exchange("OffsetCommit", 2, _commit(1, m1, {0: 7, 1: 10}), _commit_response({0: 0, 1: 0}))

    c2 = Connection(("10.0.0.32", 50402), "billing-consumer-2", clock=c1.clock + 0.5)
    c2.exchange(
        "GroupCoordinator", 0, {"key": "billing"}, {"error_code": 0, "node_id": 0, "host": "kafka-0", "port": 9092}
    )
    # c2's JoinGroup is held by the coordinator until c1 rejoins (PreparingRebalance).
    c2_join_at = c2.clock + 0.010
    c1.clock = c2_join_at
    c1.exchange(
        "Heartbeat", 0, {"group_id": "billing", "generation_id": 1, "member_id": m1}, {"error_code": 27}, think=0.200
    )
    c1.exchange("OffsetCommit", 2, _commit(1, m1, {0: 7, 1: 10}), _commit_response({0: 0, 1: 0}))
    c1.exchange("JoinGroup", 0, join(m1, [TOPIC]), join_response(2, m1, m1, [m1, m2]))
    c2.clock = c2_join_at - 0.010
    c2.exchange("JoinGroup", 0, join("", [TOPIC]), join_response(2, m2, m1, []), wait=c1.clock - c2_join_at - 0.002)
    c1.exchange(
        "SyncGroup",
        0,
        {
            "group_id": "billing",
            "generation_id": 2,
            "member_id": m1,
            "assignments": [
                {"member_id": m1, "assignment": assignment([0])},
                {"member_id": m2, "assignment": assignment([1])},
            ],
        },
        {"error_code": 0, "assignment": assignment([0])},
    )
    c2.clock = c1.clock - 0.004
    c2.exchange(
        "SyncGroup",
        0,
        {"group_id": "billing", "generation_id": 2, "member_id": m2, "assignments": []},
        {"error_code": 0, "assignment": assignment([1])},
        wait=0.004,
    )
    c2.exchange(
        "OffsetFetch",
        1,
        {"group_id": "billing", "topics": [{"name": TOPIC, "partition_indexes": [1]}]},
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [{"partition_index": 1, "committed_offset": 10, "metadata": "", "error_code": 0}],
                }
            ]
        },
    )
    c2.exchange("OffsetCommit", 2, _commit(1, m2, {1: 10}), _commit_response({1: 22}))  # stale generation
    c2.exchange(
        "Heartbeat", 0, {"group_id": "billing", "generation_id": 2, "member_id": m2}, {"error_code": 0}, think=3.0
    )
    c1.clock = c2.clock
    c1.exchange("Heartbeat", 0, {"group_id": "billing", "generation_id": 2, "member_id": m1}, {"error_code": 0})
    c2.exchange("LeaveGroup", 0, {"group_id": "billing", "member_id": m2}, {"error_code": 0})
    c1.exchange(
        "Heartbeat", 0, {"group_id": "billing", "generation_id": 2, "member_id": m1}, {"error_code": 27}, think=0.050
    )
    return [c1.conversation(), c2.conversation()]


def _commit(generation: int, member: str, offsets: Dict[int, int]) -> Dict[str, Any]:
    return {
        "group_id": "billing",
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": ""} for p, o in offsets.items()
                ],
            }
        ],
    }


def _commit_response(errors: Dict[int, int]) -> Dict[str, Any]:
    return {
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": p, "error_code": e} for p, e in errors.items()]}]
    }


def controlled_shutdown_conversation() -> TcpConversation:
    """Broker 1 asks the controller (broker 0) to move its leaders away: ControlledShutdown v0 (no client
    id in the header) answered with a partition still led by it, retried until none remain."""
    conn = Connection((BROKER_1[0], 50501), None, clock=START + 20)
    conn.exchange(
        "ControlledShutdown",
        0,
        {"broker_id": 1},
        {"error_code": 0, "remaining_partitions": [{"topic_name": TOPIC, "partition_index": 1}]},
    )
    conn.exchange("ControlledShutdown", 0, {"broker_id": 1}, {"error_code": 0, "remaining_partitions": []}, think=5.0)
    return conn.conversation()


# The worked examples of docs/protocol-notes.md (hex), followed by frames that pair with its lone responses.
PROTOCOL_EXAMPLES = [
    ("7.1 MetadataRequest v0", "0000001a000300000000000100066b70726f746f00000001000474657374"),
    (
        "7.4 MetadataResponse v0 answering 7.1",
        "000000450000000100000001000000000009"
        "6c6f63616c686f737400002384000000010000000474657374000000010000"
        "000000000000000000000001000000000000000100000000",
    ),
    (
        "7.2 ProduceRequest v0",
        "0000004b00000000000000020006"
        "6b70726f746f0001000003e80000000100047465737400000001000000000000001f"
        "00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f",
    ),
    (
        "7.7a ProduceResponse v0 answering 7.2",
        "000000200000000200000001000474657374000000010000000000000000000000000000",
    ),
    (
        "7.3 JoinGroupRequest v0",
        "00000044000b00000000000300066b70726f746f0003677270000075300000000863"
        "6f6e73756d65720000000100057261"
        "6e6765000000100000000000010004746573740000"
        "0000",
    ),
    (
        "7.5 SyncGroupRequest v0",
        "0000004d000e00000000000400066b70726f746f0003677270000000010008"
        "6b70726f746f2d3100000001"
        "00086b70726f746f2d31000000180000000000010004746573740000000100000000"
        "00000000",
    ),
    ("7.6a ControlledShutdownRequest v0 (no client id)", "0000000c000700000000000500000001"),
    ("7.6b ControlledShutdownRequest v1", "00000014000700010000000500066b70726f746f00000001"),
]

# Worked example 7.9 (docs/protocol-notes.md): a magic 0 LZ4 wrapper message set entry (not a frame; frames.hex puts
# it in a Produce).
LZ4_WRAPPER_EXAMPLE = (
    "00000000000000000000003"
    "7a92e826a0003ffffffff0000002904224d1860401a1a0000001600010"
    "0f00513"
    "87a77ab20000ffffffff0000000568656c6c6f00000000"
)


def frames_hex() -> str:
    """The text of ``frames.hex``: the worked examples plus requests that make the lone responses pair."""
    produce_v1 = kproto.encode_request(
        kproto.APIS["Produce"].request.from_dict(produce("test", 0, encode_message_set([(None, b"hello")]))),
        1,
        2,
        "kproto",
    )
    fetch_v0 = kproto.encode_request(
        kproto.APIS["Fetch"].request.from_dict(
            {
                "replica_id": -1,
                "max_wait_ms": 100,
                "min_bytes": 1,
                "topics": [
                    {"topic": "test", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 51}]}
                ],
            }
        ),
        0,
        7,
        "kproto",
    )
    lz4_request = kproto.encode_request(
        kproto.APIS["Produce"].request.from_dict(produce("test", 0, bytes.fromhex(LZ4_WRAPPER_EXAMPLE))), 0, 8, "kproto"
    )
    entries = list(PROTOCOL_EXAMPLES) + [
        ("ProduceRequest v1 (generated; 7.7b answers it)", produce_v1.hex()),
        ("7.7b ProduceResponse v1", "00000024000000020000000100047465737400000001000000000000000000000000000000000000"),
        ("FetchRequest v0 (generated; 7.8 answers it)", fetch_v0.hex()),
        (
            "7.8 FetchResponse v0 whose record set ends in a truncated message",
            "00000057000000070000000100047465737400000001000000000000000000000000000200000033"
            "00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f0000000000000001"
            "000000138bc0cd770000ffff",
        ),
        (
            "ProduceRequest v0 carrying 7.9's LZ4 wrapper (Kafka 0.8.2/0.9 broken header checksum 0x1a)",
            lz4_request.hex(),
        ),
    ]
    lines = [
        "# Kafka 0.8/0.9 frames for `kproto decode samples/frames.hex` (generated by make_samples.py).",
        "# Each frame is its int32 size prefix plus payload; responses follow the request they answer.",
    ]
    for title, hex_text in entries:
        data = bytes.fromhex(hex_text)
        lines.append(f"# {title} ({len(data)} bytes)")
        for start in range(0, len(data), 16):
            row = " ".join(f"{b:02x}" for b in data[start : start + 16])
            lines.append(f"{start:04x}: {row}")
    return "\n".join(lines) + "\n"


def captures() -> Dict[str, Tuple[List[TcpConversation], Dict[str, Any]]]:
    """Capture file name -> (conversations, write_capture options)."""
    return {
        "produce.pcap": ([producer_conversation()], {}),
        "fetch.pcap": (consumer_fetch_conversations(), {}),
        "consumer_group.pcapng": (group_conversations(), {"format": "pcapng"}),
        "controlled_shutdown.pcap": ([controlled_shutdown_conversation()], {}),
    }


def generate(out_dir: Path) -> Dict[str, int]:
    """Write every sample into ``out_dir``; returns file name -> size."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, (conversations, options) in captures().items():
        path = out_dir / name
        write_capture(path, conversations, **options)
        sizes[name] = path.stat().st_size
    (out_dir / "frames.hex").write_text(frames_hex())
    sizes["frames.hex"] = (out_dir / "frames.hex").stat().st_size
    return sizes


def main(argv: Sequence[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    for name, size in generate(out_dir).items():
        print(f"{out_dir / name}: {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
