"""Record the request frames that real Kafka clients send at their defaults, for tests/test_golden_clients.py.

Run by hand (it needs the three clients installed, and nothing else: no broker, no network beyond
127.0.0.1) to refresh the committed frames, from the repository root::

    .venv/bin/python tests/golden/record_clients.py            # record all three clients
    .venv/bin/python tests/golden/record_clients.py --check    # record into a temporary folder and
                                                              # report the (api, version) pairs only

then review ``git diff tests/golden/clients`` and commit. The test decodes the committed files; it never runs
this tool. ``--verbose`` prints every request as it arrives; ``--answer-with kafka-python`` lets kafka-python
3.x's classes read the requests and write the answers instead of kproto's (the frames the clients send must
not change with it: a check that kproto's answers are what the clients expect).

The clients run at their defaults except for what a conversation needs: the bootstrap address, a group id,
and ``auto.offset.reset=earliest`` so that each consumer reads the record its producer wrote just before.

Why a fake broker: the frames must be what kafka-python, librdkafka (confluent-kafka) and aiokafka really
write when nobody pins their versions, so each client has to get through a whole produce + group consume +
commit conversation. A real broker would need Java; instead a small asyncio server on 127.0.0.1 answers
every request with a plausible response built with kproto's own codecs: ApiVersions lists the versions
kproto encodes (the clients then pick their newest), Metadata describes one topic with one partition led by
this server, FindCoordinator points at itself, JoinGroup first asks for a member id (as brokers since 2.2
do) and then makes the single member the leader, SyncGroup hands the leader back its own assignment,
Produce stores the client's record batch and Fetch serves it back (the client's own RecordBatch v2 bytes,
with the base offset the broker assigns), OffsetCommit/OffsetFetch keep what was committed.

Every request frame is captured; the first frame of each (client, api key, version) is kept — and for
JoinGroup both the first join and the rejoin with the assigned member id, for Metadata both a bootstrap
request and one naming the topic — as ``clients/<client>/
<ApiName>-v<version>[-<n>].bin`` (the whole frame, size prefix included), listed in ``clients/index.json``
with the client, its version, api key and name, version, correlation id and client id.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import traceback
import uuid
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import kproto  # noqa: E402
from kproto.versions import common_versions, supported_versions  # noqa: E402

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients")
TOPIC = "golden-orders"
GROUP_PREFIX = "golden-group-"  # each client joins its own group, so each starts with no committed offset
TOPIC_ID = uuid.UUID("6b0e4a8c-3f55-4d2e-9a41-7c1d2e3f4a5b")
CLUSTER_ID = "kproto-golden-cluster"
NODE_ID = 0
# The APIs the clients are expected to send; the test requires each client to have sent each of them.
EXPECTED_APIS = (18, 3, 0, 1, 10, 11, 14, 12, 8, 9)


def advertised_versions(ours: Dict[int, Tuple[int, int]]) -> Dict[int, Tuple[int, int]]:
    """What this broker lists in ApiVersions: the versions the answering codecs encode (kproto's, by
    default), within what a 4.1 broker serves."""
    return common_versions("4.1", ours)


# ----------------------------------------------------------------------------------------------------------
# The broker: state shared by all connections, one answer per api key.


class Broker:
    """Single-node broker state: one topic with one partition, one consumer group."""

    def __init__(self, host: str, port: int, versions: Dict[int, Tuple[int, int]]) -> None:
        self.host, self.port = host, port
        self.batches: List[bytes] = []  # stored RecordBatch bytes, base offsets already assigned
        self.next_offset = 0
        self.committed: Dict[Tuple[str, int], int] = {}
        self.generation = 0
        self.producer_ids = 0
        self.members: Dict[str, bytes] = {}
        self.versions = advertised_versions(versions)

    # Each handler gets (header, request message, version) and returns the response as a dict of kproto
    # field names (fields left out take their defaults).

    def api_versions(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        return {
            "error_code": 0,
            "throttle_time_ms": 0,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in self.versions.items()],
        }

    def metadata(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        names = [TOPIC] if req.topics is None else [t.name for t in req.topics if t.name]
        return {
            "throttle_time_ms": 0,
            "cluster_id": CLUSTER_ID,
            "controller_id": NODE_ID,
            "brokers": [{"node_id": NODE_ID, "host": self.host, "port": self.port, "rack": None}],
            "topics": [
                {
                    "error_code": 0 if name == TOPIC else 3,
                    "name": name,
                    "topic_id": TOPIC_ID if name == TOPIC else uuid.UUID(int=0),
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": 0,
                            "leader_id": NODE_ID,
                            "leader_epoch": 0,
                            "replica_nodes": [NODE_ID],
                            "isr_nodes": [NODE_ID],
                            "offline_replicas": [],
                        }
                    ]
                    if name == TOPIC
                    else [],
                }
                for name in names
            ],
        }

    def produce(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        responses = []
        for topic in req.topic_data:
            partitions = []
            for part in topic.partition_data:
                base = self.store(bytes(part.records or b""))
                partitions.append(
                    {
                        "index": part.index,
                        "error_code": 0,
                        "base_offset": base,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                    }
                )
            responses.append({**_topic_ref(topic), "partition_responses": partitions})
        return {"responses": responses, "throttle_time_ms": 0}

    def store(self, records: bytes) -> int:
        """Keep each RecordBatch v2 of a produced record set, rewriting its base offset (the first 8 bytes,
        outside the CRC) as a broker does; returns the first offset."""
        base, pos = self.next_offset, 0
        while pos + 61 <= len(records):
            (length,) = struct.unpack_from(">i", records, pos + 8)
            batch = bytearray(records[pos : pos + 12 + length])
            (last_delta,) = struct.unpack_from(">i", batch, 23)
            struct.pack_into(">q", batch, 0, self.next_offset)
            self.batches.append(bytes(batch))
            self.next_offset += last_delta + 1
            pos += 12 + length
        return base

    def fetch(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        responses = []
        for topic in req.topics:
            partitions = []
            for part in topic.partitions:
                records = b"".join(
                    b
                    for b in self.batches
                    if struct.unpack_from(">q", b, 0)[0] + struct.unpack_from(">i", b, 23)[0] >= part.fetch_offset
                )
                partitions.append(
                    {
                        "partition_index": part.partition,
                        "error_code": 0,
                        "high_watermark": self.next_offset,
                        "last_stable_offset": self.next_offset,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": records,
                    }
                )
            responses.append({**_topic_ref(topic), "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}

    def list_offsets(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        topics = []
        for topic in req.topics:
            partitions = [
                {
                    "partition_index": p.partition_index,
                    "error_code": 0,
                    "timestamp": -1,
                    "offset": 0 if p.timestamp == -2 else self.next_offset,
                    "leader_epoch": 0,
                    "old_style_offsets": [0 if p.timestamp == -2 else self.next_offset],
                }
                for p in topic.partitions
            ]
            topics.append({"name": topic.name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def find_coordinator(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        me = {"node_id": NODE_ID, "host": self.host, "port": self.port, "error_code": 0, "error_message": None}
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": [{"key": key, **me} for key in req.coordinator_keys]}
        return {"throttle_time_ms": 0, **me}

    def join_group(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        protocol = req.protocols[0]
        if not req.member_id and version >= 4:
            # Since 2.2 a broker first hands out a member id and asks the member to join again with it.
            return {
                "throttle_time_ms": 0,
                "error_code": 79,
                "generation_id": -1,
                "protocol_type": None,
                "protocol_name": None if version >= 7 else "",
                "leader": "",
                "member_id": f"{header.client_id}-{uuid.uuid4()}",
                "members": [],
            }
        member_id = req.member_id or f"{header.client_id}-{uuid.uuid4()}"
        self.generation += 1
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "generation_id": self.generation,
            "protocol_type": req.protocol_type,
            "protocol_name": protocol.name,
            "leader": member_id,
            "skip_assignment": False,
            "member_id": member_id,
            "members": [{"member_id": member_id, "group_instance_id": None, "metadata": protocol.metadata}],
        }

    def sync_group(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        mine = next((a.assignment for a in req.assignments if a.member_id == req.member_id), b"")
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "protocol_type": req.protocol_type,
            "protocol_name": req.protocol_name,
            "assignment": mine,
        }

    def heartbeat(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": 0}

    def leave_group(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        members = (
            [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": 0}
                for m in (req.members or [])
            ]
            if version >= 3
            else []
        )
        return {"throttle_time_ms": 0, "error_code": 0, "members": members}

    def offset_commit(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        topics = []
        for topic in req.topics:
            for p in topic.partitions:
                self.committed[(topic.name, p.partition_index)] = p.committed_offset
            topics.append(
                {
                    "name": topic.name,
                    "partitions": [{"partition_index": p.partition_index, "error_code": 0} for p in topic.partitions],
                }
            )
        return {"throttle_time_ms": 0, "topics": topics}

    def offset_fetch(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        def partitions(name: str, indexes: List[int]) -> List[Dict[str, Any]]:
            return [
                {
                    "partition_index": i,
                    "committed_offset": self.committed.get((name, i), -1),
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": 0,
                }
                for i in indexes
            ]

        if version >= 8:
            groups = []
            for group in req.groups:
                topics = [
                    {"name": t.name, "partitions": partitions(t.name, list(t.partition_indexes))}
                    for t in (group.topics or [])
                ]
                groups.append({"group_id": group.group_id, "topics": topics, "error_code": 0})
            return {"throttle_time_ms": 0, "groups": groups}
        topics = [
            {"name": t.name, "partitions": partitions(t.name, list(t.partition_indexes))} for t in (req.topics or [])
        ]
        return {"throttle_time_ms": 0, "topics": topics, "error_code": 0}

    def offset_for_leader_epoch(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "topics": [
                {
                    "topic": t.topic,
                    "partitions": [
                        {"error_code": 0, "partition": p.partition, "leader_epoch": 0, "end_offset": self.next_offset}
                        for p in t.partitions
                    ],
                }
                for t in req.topics
            ],
        }

    def init_producer_id(self, header: Any, req: Any, version: int) -> Dict[str, Any]:
        self.producer_ids += 1
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4000 + self.producer_ids, "producer_epoch": 0}

    def handler(self, api_key: int) -> Optional[Callable[[Any, Any, int], Dict[str, Any]]]:
        return {
            18: self.api_versions,
            3: self.metadata,
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            10: self.find_coordinator,
            11: self.join_group,
            14: self.sync_group,
            12: self.heartbeat,
            13: self.leave_group,
            8: self.offset_commit,
            9: self.offset_fetch,
            22: self.init_producer_id,
            23: self.offset_for_leader_epoch,
        }.get(api_key)


def _topic_ref(topic: Any) -> Dict[str, Any]:
    """A response topic entry names its topic the way the request did (by name, or by id from Produce v13
    and Fetch v13 on)."""
    ref: Dict[str, Any] = {}
    for attr in ("name", "topic", "topic_id"):
        value = getattr(topic, attr, None)
        if value is not None:
            ref[attr] = value
    return ref


# ----------------------------------------------------------------------------------------------------------
# The server: frames in, answers out, every request frame recorded.


class Recorder:
    def __init__(self) -> None:
        self.client = "?"
        self.frames: List[Dict[str, Any]] = []
        self.unanswered: List[Tuple[str, int, int]] = []
        self.failures: List[str] = []
        self.verbose = False
        self.lock = threading.Lock()

    def record(self, frame: bytes, api_key: int, version: int, correlation_id: int, client_id: Optional[str]) -> None:
        with self.lock:
            self.frames.append(
                {
                    "client": self.client,
                    "frame": frame,
                    "api_key": api_key,
                    "api_version": version,
                    "correlation_id": correlation_id,
                    "client_id": client_id,
                }
            )


class KprotoCodec:
    """Requests read and answers written with kproto's own codecs (the default)."""

    name = "kproto"

    def supported(self) -> Dict[int, Tuple[int, int]]:
        return supported_versions()

    def api_name(self, api_key: int) -> str:
        return kproto.APIS[api_key].name

    def decode_request(self, frame: bytes) -> Tuple[Any, Any]:
        return kproto.decode_request(frame)

    def encode_response(self, api_key: int, version: int, correlation_id: int, value: Dict[str, Any]) -> bytes:
        cls = kproto.APIS[api_key].response
        body = cls.from_dict(self._fit(cls, value, version))
        return kproto.encode_response(body, version, correlation_id)

    def _fit(self, cls: Any, value: Dict[str, Any], version: int) -> Dict[str, Any]:
        """The handlers write every field some version has; keep those ``version`` carries (kproto refuses
        to encode a set field that the version cannot hold)."""
        out = {}
        for info in cls.FIELDS:
            if info.name not in value or not info.versions[0] <= version <= info.versions[1]:
                continue
            v = value[info.name]
            if info.struct is not None and v is not None:
                v = (
                    [self._fit(info.struct, item, version) for item in v]
                    if info.is_array
                    else self._fit(info.struct, v, version)
                )
            out[info.name] = v
        return out


class KafkaPythonCodec:
    """The same conversation with kafka-python 3.x's classes reading requests and writing answers: a check
    that the recorded frames do not depend on whose codecs answer (``--answer-with kafka-python``)."""

    name = "kafka-python"

    def __init__(self) -> None:
        import importlib

        self.requests: Dict[int, Any] = {}
        self.responses: Dict[int, Any] = {}
        for module in ("admin", "consumer", "metadata", "producer"):
            mod = importlib.import_module(f"kafka.protocol.{module}")
            for attr in dir(mod):
                cls = getattr(mod, attr)
                if isinstance(cls, type) and hasattr(cls, "API_KEY") and attr.endswith(("Request", "Response")):
                    (self.requests if attr.endswith("Request") else self.responses)[cls.API_KEY] = cls

    def supported(self) -> Dict[int, Tuple[int, int]]:
        return {key: (cls.min_version, cls.max_version) for key, cls in self.requests.items()}

    def api_name(self, api_key: int) -> str:
        return self.requests[api_key].__name__[: -len("Request")]

    def decode_request(self, frame: bytes) -> Tuple[Any, Any]:
        api_key, version = struct.unpack_from(">hh", frame, 4)
        req = self.requests[api_key].decode(frame, version=version, header=True, framed=True)
        h = req.header
        return SimpleNamespace(
            api_key=h.request_api_key,
            api_version=h.request_api_version,
            correlation_id=h.correlation_id,
            client_id=h.client_id,
        ), req

    def encode_response(self, api_key: int, version: int, correlation_id: int, value: Dict[str, Any]) -> bytes:
        cls = self.responses[api_key]
        msg = self._build(cls, cls._struct, value, version)
        msg.with_header(correlation_id=correlation_id)
        return bytes(msg.encode(header=True, framed=True))

    def _build(self, data_class: Any, struct_: Any, value: Dict[str, Any], version: Optional[int] = None) -> Any:
        kwargs = {}
        for name, v in value.items():
            field = struct_.fields.get(name)
            if field is None or not field.for_version_q(version if version is not None else 0) and version:
                continue  # a field this version does not carry
            if field.is_struct_array() and v is not None:
                v = [self._build(field.array_of.data_class, field.array_of, item) for item in v]
            elif field.is_struct() and v is not None:
                v = self._build(field.data_class, field, v)
            kwargs[name] = v
        return data_class(version=version, **kwargs) if version is not None else data_class(**kwargs)


async def serve_connection(
    broker: Broker, recorder: Recorder, codec: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        while True:
            size_bytes = await reader.readexactly(4)
            (size,) = struct.unpack(">i", size_bytes)
            frame = size_bytes + await reader.readexactly(size)
            header, req = codec.decode_request(frame)
            api_key, version = header.api_key, header.api_version
            recorder.record(frame, api_key, version, header.correlation_id, header.client_id)
            if recorder.verbose:
                print(
                    f"    {recorder.client} {header.client_id!r}: api {api_key} v{version} #{header.correlation_id}",
                    file=sys.stderr,
                    flush=True,
                )
            handle = broker.handler(api_key)
            if handle is None:
                recorder.unanswered.append((recorder.client, api_key, version))
                break
            if api_key == 0 and req.acks == 0:
                handle(header, req, version)
                continue
            if api_key == 1 and all(p.fetch_offset >= broker.next_offset for t in req.topics for p in t.partitions):
                await asyncio.sleep(min(req.max_wait_ms, 500) / 1000)  # a long poll with nothing new
            writer.write(codec.encode_response(api_key, version, header.correlation_id, handle(header, req, version)))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    except Exception:  # a request this broker cannot read or answer: say so, and drop the connection
        recorder.failures.append(traceback.format_exc())
        traceback.print_exc()
    finally:
        writer.close()


class Server:
    """The broker on a background thread's event loop, bound to 127.0.0.1 on a free port."""

    def __init__(self, codec: Any) -> None:
        self.codec = codec
        self.recorder = Recorder()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.broker = Broker("127.0.0.1", 0, self.codec.supported())
            server = await asyncio.start_server(
                lambda r, w: serve_connection(self.broker, self.recorder, self.codec, r, w), "127.0.0.1", 0
            )
            self.port = server.sockets[0].getsockname()[1]
            self.broker.port = self.port
            self.ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    def __enter__(self) -> "Server":
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


# ----------------------------------------------------------------------------------------------------------
# The clients: each produces one message, then consumes it in a group and commits, all at defaults.

HEARTBEAT_WAIT = 4.0  # seconds a consumer stays in the group so that at least one heartbeat goes out
DEADLINE = 30.0


def drive_kafka_python(bootstrap: str, group: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(TOPIC, key=b"order-1", value=b'{"id": 1, "amount": 12.5}').get(timeout=DEADLINE)
    producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest")
    deadline = time.monotonic() + DEADLINE
    while not any(consumer.poll(timeout_ms=500).values()):
        if time.monotonic() > deadline:
            raise TimeoutError("kafka-python consumer got no record")
    consumer.commit()
    end = time.monotonic() + HEARTBEAT_WAIT
    while time.monotonic() < end:
        consumer.poll(timeout_ms=200)
    consumer.close()


def drive_confluent_kafka(bootstrap: str, group: str) -> None:
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(TOPIC, key=b"order-1", value=b'{"id": 1, "amount": 12.5}')
    if producer.flush(DEADLINE) != 0:
        raise TimeoutError("librdkafka producer did not deliver")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + DEADLINE
    while True:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("librdkafka consumer got no record")
    consumer.commit(asynchronous=False)
    end = time.monotonic() + HEARTBEAT_WAIT
    while time.monotonic() < end:
        consumer.poll(0.2)
    consumer.close()


def drive_aiokafka(bootstrap: str, group: str) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, key=b"order-1", value=b'{"id": 1, "amount": 12.5}')
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest")
        await consumer.start()
        try:
            await asyncio.wait_for(consumer.getone(), DEADLINE)
            await consumer.commit()
            await asyncio.sleep(HEARTBEAT_WAIT)
        finally:
            await consumer.stop()

    asyncio.run(run())


CLIENTS: Dict[str, Tuple[str, Callable[[str, str], None]]] = {
    "kafka-python": ("kafka-python", drive_kafka_python),
    "librdkafka": ("confluent-kafka", drive_confluent_kafka),
    "aiokafka": ("aiokafka", drive_aiokafka),
}


def client_version(label: str) -> str:
    if label == "librdkafka":
        import confluent_kafka

        version = importlib.metadata.version("confluent-kafka")
        return f"confluent-kafka {version} / librdkafka {confluent_kafka.libversion()[0]}"
    return f"{CLIENTS[label][0]} {importlib.metadata.version(CLIENTS[label][0])}"


def keep(frames: List[Dict[str, Any]], codec: Any) -> List[Dict[str, Any]]:
    """The first frame of each (client, api, version); JoinGroup keeps the first join and the rejoin,
    Metadata the first request for no topic or all topics (bootstrap) and the first naming topics."""
    kept, seen = [], set()
    for f in frames:
        key: Tuple[Any, ...] = (f["client"], f["api_key"], f["api_version"])
        if f["api_key"] == 11:
            _, req = codec.decode_request(f["frame"])
            key += (bool(req.member_id),)
        if f["api_key"] == 3:
            _, req = codec.decode_request(f["frame"])
            key += (bool(req.topics),)
        if key not in seen:
            seen.add(key)
            kept.append(f)
    return kept


def write(frames: List[Dict[str, Any]], versions: Dict[str, str], codec: Any, out_dir: str) -> List[Dict[str, Any]]:
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    index = []
    counts: Dict[Tuple[str, str], int] = {}
    for f in frames:
        name = codec.api_name(f["api_key"])
        stem = f"{name}-v{f['api_version']}"
        n = counts[(f["client"], stem)] = counts.get((f["client"], stem), 0) + 1
        rel = f"{f['client']}/{stem}{'' if n == 1 else f'-{n}'}.bin"
        os.makedirs(os.path.join(out_dir, f["client"]), exist_ok=True)
        with open(os.path.join(out_dir, rel), "wb") as handle:
            handle.write(f["frame"])
        index.append(
            {
                "file": rel,
                "client": f["client"],
                "client_version": versions[f["client"]],
                "api_key": f["api_key"],
                "api_name": name,
                "api_version": f["api_version"],
                "correlation_id": f["correlation_id"],
                "client_id": f["client_id"],
                "size": len(f["frame"]),
            }
        )
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as handle:
        json.dump(
            {"topic": TOPIC, "topic_id": str(TOPIC_ID), "group_prefix": GROUP_PREFIX, "frames": index}, handle, indent=1
        )
        handle.write("\n")
    return index


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="record into a temporary folder; print only")
    parser.add_argument(
        "--answer-with",
        choices=("kproto", "kafka-python"),
        default="kproto",
        help="whose codecs read the requests and write the answers (default kproto)",
    )
    parser.add_argument("--verbose", action="store_true", help="print every request as it arrives")
    parser.add_argument("--client", choices=sorted(CLIENTS), action="append", help="only these clients")
    args = parser.parse_args(argv)
    labels = args.client or list(CLIENTS)
    versions = {label: client_version(label) for label in labels}
    codec = KprotoCodec() if args.answer_with == "kproto" else KafkaPythonCodec()
    with Server(codec) as server:
        server.recorder.verbose = args.verbose
        for label in labels:
            server.recorder.client = label
            print(f"driving {versions[label]} against {server.bootstrap} ...", flush=True)
            CLIENTS[label][1](server.bootstrap, GROUP_PREFIX + label)
            time.sleep(0.5)  # let the last requests (LeaveGroup, closing Metadata) arrive
        frames = list(server.recorder.frames)
        unanswered = list(server.recorder.unanswered)
        failures = list(server.recorder.failures)
    if unanswered:
        print(f"requests the recording broker cannot answer: {unanswered}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} requests failed in the recording broker (tracebacks above)", file=sys.stderr)
    kept = keep(frames, codec)
    missing = [
        (label, key)
        for label in labels
        for key in EXPECTED_APIS
        if not any(f["client"] == label and f["api_key"] == key for f in kept)
    ]
    out_dir = tempfile.mkdtemp() if args.check else GOLDEN_DIR
    index = write(kept, versions, codec, out_dir)
    for entry in index:
        print(
            f"  {entry['client']:<13} {entry['api_name']:<16} v{entry['api_version']:<3} "
            f"{entry['size']:>5} bytes  client_id={entry['client_id']!r}"
        )
    if args.check:
        shutil.rmtree(out_dir)
    if missing:
        print(f"expected requests that were not sent: {missing}", file=sys.stderr)
    return 1 if missing or failures or unanswered else 0


if __name__ == "__main__":
    sys.exit(main())
