"""Codec benchmark: kproto against kafka-python (hand-declared ``kafka.protocol.old`` classes and the 3.x
JSON-driven compiled path) and kio, encoding and decoding the same logical messages: the 0.9-era cases
(MetadataResponse v0, OffsetCommitRequest v2, HeartbeatRequest v0, a FetchRequest v1 frame) and the
flexible (KIP-482) ones (MetadataResponse v12, a FetchResponse v16 frame, a ProduceRequest v11 frame,
OffsetCommitRequest v9).

Run from the repository root::

    .venv/bin/python benchmarks/codecs.py                  # table (compiled kproto when built)
    KPROTO_PURE=1 .venv/bin/python benchmarks/codecs.py    # kproto's pure-Python path
    .venv/bin/python benchmarks/codecs.py --json           # machine-readable
    .venv/bin/python benchmarks/codecs.py --quick          # fewer repeats, for a smoke run

kio comes in two versions that cannot share one interpreter: the installed kio 0.6 measures every case it
has; FetchRequest v1, which Kafka 4.0 removed and kio 0.6 dropped, is measured by kio 0.5.0 in a worker
process started from this same script (installed by scripts/setup-env under ``<venv>/peers/kio-0.5.0``;
``KPROTO_KIO05_PATH`` overrides; without it that row is left out and the table says so).

Before anything is timed, every peer's encoding is checked to be byte-identical to kproto's, and every
peer's decoding of kproto's bytes is checked to hold the same values (so all rows time the same work).
Times are the best of ``--repeat`` runs of a ``timeit`` loop sized by ``Timer.autorange``, in µs per
operation; "ratio" is peer time / kproto time (above 1: kproto is faster).

Each case also counts the Python objects in kproto's decoded result, and the run measures a floor: the
harness calling one C function, plus CPython's cheapest allocation per object. kio 0.6 decodes natively,
so its decode time is mostly that allocation; a decode row that misses "10x kio" says whether a tenth of
kio's time is below the floor for its object count, i.e. whether any decoder returning those values could
meet it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import importlib.metadata
import io
import json
import operator
import os
import platform
import struct
import subprocess
import sys
import timeit
import uuid
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from results import Run, add_json_out

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

KIO05_PATH = os.environ.get("KPROTO_KIO05_PATH", os.path.join(sys.prefix, "peers", "kio-0.5.0"))
KIO05_WORKER = "--kio05-worker" in sys.argv
if KIO05_WORKER:  # this process measures kio 0.5.0: it must be imported instead of the installed kio
    sys.path.insert(0, KIO05_PATH)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import kproto
    import kproto.messages as km
    from kproto.records.record_set import RecordSet

    import kafka
    import kafka.protocol.admin as kp_admin
    import kafka.protocol.consumer as kp_consumer
    import kafka.protocol.metadata as kp_metadata
    from kafka.protocol.old import commit as old_commit
    from kafka.protocol.old import fetch as old_fetch
    from kafka.protocol.old import group as old_group
    from kafka.protocol.old import metadata as old_metadata
    from kafka.protocol.old import types as old_types

    import kio
    from kio.index import load_request_schema, load_response_schema

    try:
        from kio.index import UnknownEntity
    except ImportError:  # kio 0.5 raises a plain error for a version it lacks
        UnknownEntity = LookupError  # type: ignore[misc,assignment]
    from kafka.protocol import producer as kp_producer
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kio.schema.errors import ErrorCode as KioErrorCode
    from kio.serial import entity_reader, entity_writer
    from kio.serial._introspect import EntityField, EntityTupleField, classify_field

Dict_ = Dict[str, Any]


# ----------------------------------------------------------------------------------------------------------
# The workloads, as kproto messages.


def metadata_response() -> km.MetadataResponse:
    brokers = [{"node_id": b, "host": f"broker-{b}.kafka.internal", "port": 9092} for b in range(5)]
    topics = []
    for t in range(100):
        partitions = []
        for p in range(10):
            replicas = [(p + k) % 5 for k in range(3)]
            partitions.append(
                {
                    "error_code": 0,
                    "partition_index": p,
                    "leader_id": replicas[0],
                    "replica_nodes": replicas,
                    "isr_nodes": list(replicas),
                }
            )
        topics.append({"error_code": 0, "name": f"events.topic-{t:03d}", "partitions": partitions})
    return km.MetadataResponse.from_dict({"brokers": brokers, "topics": topics})


def offset_commit_request() -> km.OffsetCommitRequest:
    topics = [
        {
            "name": f"orders-{t}",
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": 1_000_000 + 97 * p,
                    "committed_metadata": "" if p % 2 else None,
                }
                for p in range(10)
            ],
        }
        for t in range(5)
    ]
    return km.OffsetCommitRequest.from_dict(
        {
            "group_id": "billing-consumers",
            "generation_id_or_member_epoch": 17,
            "member_id": "consumer-1-5a1f7c0e",
            "retention_time_ms": -1,  # the broker default retention, as clients send it
            "topics": topics,
        }
    )


def heartbeat_request() -> km.HeartbeatRequest:
    return km.HeartbeatRequest(group_id="billing-consumers", generation_id=17, member_id="consumer-1-5a1f7c0e")


def fetch_request() -> km.FetchRequest:
    topics = [
        {
            "topic": "events",
            "partitions": [
                {"partition": p, "fetch_offset": 123_456_789 + p, "partition_max_bytes": 1 << 20} for p in range(10)
            ],
        }
    ]
    return km.FetchRequest.from_dict({"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": topics})


def create_topics_request() -> km.CreateTopicsRequest:
    topics = [
        {
            "name": f"events.topic-{t:02d}",
            "num_partitions": 12,
            "replication_factor": 3,
            "configs": [{"name": f"config.key.{c}", "value": f"value-{c}"} for c in range(5)],
        }
        for t in range(10)
    ]
    return km.CreateTopicsRequest.from_dict({"topics": topics, "timeout_ms": 30000})


def describe_configs_response() -> km.DescribeConfigsResponse:
    results = [
        {
            "resource_type": 2,
            "resource_name": f"events.topic-{r}",
            "configs": [
                {"name": f"config.key.{c}", "value": f"value-{c}", "config_source": 5, "config_type": 2}
                for c in range(20)
            ],
        }
        for r in range(5)
    ]
    return km.DescribeConfigsResponse.from_dict({"results": results})


def alter_partition_reassignments_request() -> km.AlterPartitionReassignmentsRequest:
    topics = [
        {
            "name": f"events.topic-{t}",
            "partitions": [{"partition_index": p, "replicas": [p % 5, (p + 1) % 5]} for p in range(10)],
        }
        for t in range(10)
    ]
    return km.AlterPartitionReassignmentsRequest.from_dict({"timeout_ms": 60000, "topics": topics})


#: Workloads of APIs without specialised compiled codecs (compiled, they run on the field interpreter);
#: their target is 2x kafka-python 3.x.
COLD_CASES = (
    "CreateTopicsRequest v7 (10 topics x 5 configs)",
    "DescribeConfigsResponse v4 (5 resources x 20 configs)",
    "AlterPartitionReassignmentsRequest v0 (10 topics x 10 partitions)",
)

CORRELATION_ID, CLIENT_ID = 0x2A, "kproto-bench"
# The one workload whose version kio 0.6 no longer has (Kafka 4.0 removed Fetch v0-3): its kio row is measured
# by kio 0.5.0 in a worker process (see ``kio05_rows``).
LEGACY_FETCH_CASE = "FetchRequest v1 frame (header + 10 partitions)"


# ----------------------------------------------------------------------------------------------------------
# Value converters: the same logical message in each peer's own object model.


def old_build(cls: type, value: Dict_) -> Any:
    def to_tuple(schema, v):
        return tuple(
            [to_tuple(t.array_of, i) for i in v[n]]
            if isinstance(t, old_types.Array) and isinstance(t.array_of, old_types.Schema)
            else v[n]
            for n, t in zip(schema.names, schema.fields)
        )

    return cls(*to_tuple(cls.SCHEMA, value))


def old_values(cls: type, obj: Any) -> Dict_:
    def to_dict(schema, v):
        out = {}
        for i, (n, t) in enumerate(zip(schema.names, schema.fields)):
            x = v[i] if isinstance(v, tuple) else getattr(v, n)
            if isinstance(t, old_types.Array) and isinstance(t.array_of, old_types.Schema):
                x = [to_dict(t.array_of, item) for item in x]
            out[n] = x
        return out

    return to_dict(cls.SCHEMA, obj)


# kio names millisecond fields it types as timedelta without "_ms"; error codes are its ErrorCode enum.
_KIO_RENAMES = {
    "timeout": "timeout_ms",
    "max_wait": "max_wait_ms",
    "retention_time": "retention_time_ms",
    "session_timeout": "session_timeout_ms",
    "throttle_time": "throttle_time_ms",
    "request_api_key": "api_key",
    "request_api_version": "api_version",
}
_MS = datetime.timedelta(milliseconds=1)


def kio_build(entity: type, value: Dict_) -> Any:
    kwargs = {}
    for f in dataclasses.fields(entity):
        name, ktype, fc = _KIO_RENAMES.get(f.name, f.name), f.metadata.get("kafka_type"), classify_field(f)
        if f.metadata.get("tag") is not None and name not in value:
            continue  # a tagged field the workload leaves at its default
        v = value[name]
        if isinstance(fc, EntityTupleField):
            v = None if v is None else tuple(kio_build(fc.type_, item) for item in v)
        elif isinstance(fc, EntityField):
            v = None if v is None else kio_build(fc.type_, v)
        elif ktype == "error_code":
            v = KioErrorCode(v)
        elif ktype in ("timedelta_i32", "timedelta_i64"):
            v = datetime.timedelta(milliseconds=v)
        elif isinstance(v, list):
            v = tuple(v)
        kwargs[f.name] = v
    return entity(**kwargs)


def kio_values(obj: Any) -> Dict_:
    out = {}
    for f in dataclasses.fields(obj):
        name, ktype, fc = _KIO_RENAMES.get(f.name, f.name), f.metadata.get("kafka_type"), classify_field(f)
        if f.metadata.get("tag") is not None:
            continue  # tagged fields are not compared (the peers model absent ones differently)
        v = getattr(obj, f.name)
        if isinstance(fc, EntityTupleField):
            v = None if v is None else [kio_values(item) for item in v]
        elif ktype == "error_code":
            v = int(v.value)
        elif ktype in ("timedelta_i32", "timedelta_i64"):
            v = v // _MS
        elif isinstance(v, tuple):
            v = list(v)
        out[name] = v
    return out


def kio_encode(entity_cls: type) -> Callable[[Any], bytes]:
    write = entity_writer(entity_cls)

    def encode(entity: Any) -> bytes:
        buf = io.BytesIO()
        write(buf, entity)
        return buf.getvalue()

    return encode


def kio_decode(entity_cls: type) -> Callable[[bytes], Any]:
    read = entity_reader(entity_cls)

    def decode(data: bytes) -> Any:
        entity, size = read(data, 0)
        if size != len(data):
            raise ValueError(f"kio consumed {size} of {len(data)} bytes")
        return entity

    return decode


# ----------------------------------------------------------------------------------------------------------
# The flexible (KIP-482) workloads: values as kproto field names, one RecordBatch v2 per partition where a
# message carries records. Tagged fields stay at their defaults (nothing is written for them).

TOPIC_IDS = [uuid.UUID(int=(0x5EED << 96) | t) for t in range(100)]
NOT_REQUESTED_OPERATIONS = -(1 << 31)  # authorized operations "not asked for", as brokers write it


def record_batch(base_offset: int, count: int = 10, value_size: int = 100) -> bytes:
    """A RecordBatch v2 of ``count`` uncompressed records (built by kafka-python's writer; the codecs
    benchmarked here treat it as opaque bytes)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"key-%03d" % i, value=b"v" * value_size, headers=[])
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base_offset)
    return bytes(batch)


def metadata_response_v12_values() -> Dict_:
    brokers = [
        {"node_id": b, "host": f"broker-{b}.kafka.internal", "port": 9092, "rack": f"zone-{b % 3}"} for b in range(5)
    ]
    topics = []
    for t in range(100):
        partitions = []
        for p in range(10):
            replicas = [(p + k) % 5 for k in range(3)]
            partitions.append(
                {
                    "error_code": 0,
                    "partition_index": p,
                    "leader_id": replicas[0],
                    "leader_epoch": 7,
                    "replica_nodes": replicas,
                    "isr_nodes": list(replicas),
                    "offline_replicas": [],
                }
            )
        topics.append(
            {
                "error_code": 0,
                "name": f"events.topic-{t:03d}",
                "topic_id": TOPIC_IDS[t],
                "is_internal": False,
                "partitions": partitions,
                "topic_authorized_operations": NOT_REQUESTED_OPERATIONS,
            }
        )
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": "kproto-bench-cluster",
        "controller_id": 1,
        "topics": topics,
    }


def fetch_response_v16_values() -> Dict_:
    partitions = [
        {
            "partition_index": p,
            "error_code": 0,
            "high_watermark": 5_000_000 + p,
            "last_stable_offset": 5_000_000 + p,
            "log_start_offset": 0,
            "aborted_transactions": [],
            "preferred_read_replica": -1,
            "records": record_batch(4_000_000 + 10 * p),
        }
        for p in range(10)
    ]
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 1_234_567,
        "responses": [{"topic_id": TOPIC_IDS[0], "partitions": partitions}],
    }


def produce_request_v11_values() -> Dict_:
    partitions = [{"index": p, "records": record_batch(0)} for p in range(10)]
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": "events.topic-000", "partition_data": partitions}],
    }


def offset_commit_request_v9_values() -> Dict_:
    topics = [
        {
            "name": f"orders-{t}",
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": 1_000_000 + 97 * p,
                    "committed_leader_epoch": 3,
                    "committed_metadata": "" if p % 2 else None,
                }
                for p in range(10)
            ],
        }
        for t in range(5)
    ]
    return {
        "group_id": "billing-consumers",
        "generation_id_or_member_epoch": 17,
        "member_id": "consumer-1-5a1f7c0e-2b7d-4c51-9a3e-0d4f5e6a7b8c",
        "group_instance_id": None,
        "topics": topics,
    }


def fields_values(msg: Any, version: int) -> Dict_:
    """A kproto message's untagged values at ``version``, walked through the generated ``FIELDS`` tables."""

    def view(obj: Any) -> Dict_:
        out = {}
        for info in type(obj).FIELDS:
            lo, hi = info.versions
            if info.tag is not None or not lo <= version <= hi:
                continue
            v = getattr(obj, info.name)
            if info.struct is not None and v is not None:
                v = [view(item) for item in v] if info.is_array else view(v)
            elif isinstance(v, (memoryview, bytearray, RecordSet)):
                v = bytes(v)  # records compare as their wire bytes
            out[info.name] = v
        return out

    return view(msg)


# kafka-python 3.x's JSON classes name a few fields differently and read authorized operations as a set.
_KP_RENAMES = {
    "topic_authorized_operations": "authorized_operations",
    "cluster_authorized_operations": "authorized_operations",
}
_KP_BACK = {"authorized_operations": "topic_authorized_operations"}


def kp_build(cls: type, version: int, value: Dict_) -> Any:
    """A kafka-python 3.x message of ``cls`` at ``version`` from kproto-named untagged values."""

    def build(struct_: Any, data_class: Any, v: Dict_, top: bool) -> Any:
        kwargs = {}
        for name, x in v.items():
            name = _KP_RENAMES.get(name, name)
            f = struct_.fields[name]
            if f.type_str == "bitfield":
                x = None if x == NOT_REQUESTED_OPERATIONS else {b for b in range(32) if x >> b & 1}
            elif f.is_struct_array() and x is not None:
                x = [build(f.array_of, f.array_of.data_class, item, False) for item in x]
            elif f.is_struct() and x is not None:
                x = build(f, f.data_class, x, False)
            kwargs[name] = x
        return data_class(version=version, **kwargs) if top else data_class(**kwargs)

    return build(cls._struct, cls, value, True)


def kp_values(cls: type, version: int, obj: Any) -> Dict_:
    def unbuild(struct_: Any, o: Any) -> Dict_:
        out = {}
        for f in struct_.untagged_fields(version):
            x = getattr(o, f.name)
            if f.type_str == "bitfield":
                x = NOT_REQUESTED_OPERATIONS if x is None else sum(1 << b for b in x)
            elif f.is_struct_array() and x is not None:
                x = [unbuild(f.array_of, item) for item in x]
            elif isinstance(x, (memoryview, bytearray)):
                x = bytes(x)
            out[_KP_BACK.get(f.name, f.name)] = x
        return out

    return unbuild(cls._struct, obj)


# ----------------------------------------------------------------------------------------------------------
# Cases: per workload, per implementation, an encode and a decode callable plus equality checks.


class Impl:
    """One implementation of one workload: ``encode()`` -> bytes, ``decode(bytes)`` -> its own object,
    ``values(obj)`` -> the decoded values in kproto's dict shape (for the pre-timing check)."""

    def __init__(
        self, name: str, encode: Callable[[], bytes], decode: Callable[[bytes], Any], values: Callable[[Any], Dict_]
    ) -> None:
        self.name, self.encode, self.decode, self.values = name, encode, decode, values


def body_case(
    msg: Any, version: int, old_cls: Optional[type], json_cls: Optional[type], kio_cls: Optional[type]
) -> Tuple[bytes, Dict_, List[Impl]]:
    cls = type(msg)
    value = fields_values(msg, version)
    wire = msg.encode(version)
    impls = [
        Impl(
            "kproto", lambda: msg.encode(version), lambda b: cls.decode(b, version), lambda o: fields_values(o, version)
        )
    ]
    if old_cls is not None:
        old_obj = old_build(old_cls, value)
        impls.append(Impl("kafka-python old", old_obj.encode, old_cls.decode, lambda o: old_values(old_cls, o)))
    if json_cls is not None:
        json_obj = kp_build(json_cls, version, value)
        impls.append(
            Impl(
                "kafka-python 3.x json",
                lambda: bytes(json_obj.encode(version=version)),
                lambda b: json_cls.decode(b, version=version),
                lambda o: kp_values(json_cls, version, o),
            )
        )
    if kio_cls is not None:
        entity = kio_build(kio_cls, value)
        enc = kio_encode(kio_cls)
        impls.append(Impl("kio", lambda: enc(entity), kio_decode(kio_cls), kio_values))
    return wire, value, impls


def frame_case(
    msg: Any, version: int, json_cls: type, kio_body_cls: Optional[type], old_cls: Optional[type] = None
) -> Tuple[bytes, Dict_, List[Impl]]:
    """A whole frame: size prefix, header (request header v1/v2, response header v0/v1, as the version
    requires), body; decoding reads the header first."""
    cls = type(msg)
    api_key, is_request = cls.API_KEY, cls.__name__.endswith("Request")
    value = fields_values(msg, version)
    if is_request:
        frame = kproto.encode_request(msg, version, CORRELATION_ID, CLIENT_ID)
        expected = {"header": (api_key, version, CORRELATION_ID, CLIENT_ID), "body": value}

        def kproto_values(pair: Any) -> Dict_:
            h, body = pair
            return {
                "header": (h.api_key, h.api_version, h.correlation_id, h.client_id),
                "body": fields_values(body, version),
            }

        impls = [
            Impl(
                "kproto",
                lambda: kproto.encode_request(msg, version, CORRELATION_ID, CLIENT_ID),
                kproto.decode_request,
                kproto_values,
            )
        ]
    else:
        frame = kproto.encode_response(msg, version, CORRELATION_ID)
        expected = {"header": (CORRELATION_ID,), "body": value}

        def kproto_values(pair: Any) -> Dict_:
            h, body = pair
            return {"header": (h.correlation_id,), "body": fields_values(body, version)}

        impls = [
            Impl(
                "kproto",
                lambda: kproto.encode_response(msg, version, CORRELATION_ID),
                lambda b: kproto.decode_response(b, api_key, version),
                kproto_values,
            )
        ]

    def peer_header(h: Any) -> Tuple[Any, ...]:
        if is_request:
            return (h.request_api_key, h.request_api_version, h.correlation_id, h.client_id)
        return (h.correlation_id,)

    if old_cls is not None:
        old_obj = old_build(old_cls, value)
        old_obj.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)
        impls.append(
            Impl(
                "kafka-python old",
                lambda: old_obj.encode(header=True, framed=True),
                lambda b: old_cls.decode(b, header=True, framed=True),
                lambda o: {
                    "header": (o.header.api_key, o.header.api_version, o.header.correlation_id, o.header.client_id),
                    "body": old_values(old_cls, o),
                },
            )
        )

    json_obj = kp_build(json_cls, version, value)
    if is_request:
        json_obj.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)
    else:
        json_obj.with_header(correlation_id=CORRELATION_ID)
    impls.append(
        Impl(
            "kafka-python 3.x json",
            lambda: bytes(json_obj.encode(header=True, framed=True)),
            lambda b: json_cls.decode(b, version=version, header=True, framed=True),
            lambda o: {"header": peer_header(o.header), "body": kp_values(json_cls, version, o)},
        )
    )

    if kio_body_cls is not None:
        impls.append(kio_frame_impl(kio_body_cls, is_request, api_key, version, value, peer_header))
    return frame, expected, impls


def kio_frame_impl(
    body_cls: type,
    is_request: bool,
    api_key: int,
    version: int,
    value: Dict_,
    peer_header: Callable[[Any], Tuple[Any, ...]],
) -> Impl:
    """kio has no framing helper: its header entity, then the body entity, behind an int32 size."""
    header_cls = body_cls.__header_schema__
    header_value = {"correlation_id": CORRELATION_ID}
    if is_request:
        header_value.update(api_key=api_key, api_version=version, client_id=CLIENT_ID)
    header_entity = kio_build(header_cls, header_value)
    body_entity = kio_build(body_cls, value)
    write_header, write_body = entity_writer(header_cls), entity_writer(body_cls)
    read_header, read_body = entity_reader(header_cls), entity_reader(body_cls)

    def kio_frame() -> bytes:
        buf = io.BytesIO()
        buf.write(b"\0\0\0\0")
        write_header(buf, header_entity)
        write_body(buf, body_entity)
        data = buf.getbuffer()
        struct.pack_into(">i", data, 0, len(data) - 4)
        del data
        return buf.getvalue()

    def kio_unframe(frame: bytes) -> Tuple[Any, Any]:
        (size,) = struct.unpack_from(">i", frame, 0)
        if size != len(frame) - 4:
            raise ValueError("bad frame size")
        header, n = read_header(frame, 4)
        body, m = read_body(frame, 4 + n)
        if 4 + n + m != len(frame):
            raise ValueError("trailing bytes")
        return header, body

    return Impl(
        "kio", kio_frame, kio_unframe, lambda pair: {"header": peer_header(pair[0]), "body": kio_values(pair[1])}
    )


def kio_has(api_key: int, version: int, request: bool) -> Optional[type]:
    """kio's entity for (api key, version), or None when the installed kio lacks it (0.6 dropped the
    versions Kafka 4.0 removed; 0.5 predates the newest ones)."""
    try:
        return (load_request_schema if request else load_response_schema)(api_key, version)
    except (UnknownEntity, ModuleNotFoundError):
        return None


def cases() -> List[Tuple[str, bytes, Dict_, List[Impl]]]:
    """Every workload: (name, kproto's bytes, the values every implementation must read back, impls)."""
    return [
        (
            "MetadataResponse v0 (5 brokers, 100x10 partitions)",
            *body_case(
                metadata_response(),
                0,
                old_metadata.MetadataResponse_v0,
                kp_metadata.MetadataResponse,
                kio_has(3, 0, False),
            ),
        ),
        (
            "OffsetCommitRequest v2 (50 partitions)",
            *body_case(
                offset_commit_request(),
                2,
                old_commit.OffsetCommitRequest_v2,
                kp_consumer.OffsetCommitRequest,
                kio_has(8, 2, True),
            ),
        ),
        (
            "HeartbeatRequest v0",
            *body_case(
                heartbeat_request(),
                0,
                old_group.HeartbeatRequest_v0,
                kp_consumer.HeartbeatRequest,
                kio_has(12, 0, True),
            ),
        ),
        (
            LEGACY_FETCH_CASE,
            *frame_case(fetch_request(), 1, kp_consumer.FetchRequest, kio_has(1, 1, True), old_fetch.FetchRequest_v1),
        ),
        (
            "MetadataResponse v12 (5 brokers, 100x10 partitions)",
            *body_case(
                km.MetadataResponse.from_dict(metadata_response_v12_values()),
                12,
                None,
                kp_metadata.MetadataResponse,
                kio_has(3, 12, False),
            ),
        ),
        (
            "FetchResponse v16 frame (header + 10 partitions x 10 records)",
            *frame_case(
                km.FetchResponse.from_dict(fetch_response_v16_values()),
                16,
                kp_consumer.FetchResponse,
                kio_has(1, 16, False),
            ),
        ),
        (
            "ProduceRequest v11 frame (header + 10 partitions x 10 records)",
            *frame_case(
                km.ProduceRequest.from_dict(produce_request_v11_values()),
                11,
                kp_producer.ProduceRequest,
                kio_has(0, 11, True),
            ),
        ),
        (
            "OffsetCommitRequest v9 (50 partitions)",
            *body_case(
                km.OffsetCommitRequest.from_dict(offset_commit_request_v9_values()),
                9,
                None,
                kp_consumer.OffsetCommitRequest,
                kio_has(8, 9, True),
            ),
        ),
        (
            COLD_CASES[0],
            *body_case(create_topics_request(), 7, None, kp_admin.CreateTopicsRequest, kio_has(19, 7, True)),
        ),
        (
            COLD_CASES[1],
            *body_case(describe_configs_response(), 4, None, kp_admin.DescribeConfigsResponse, kio_has(32, 4, False)),
        ),
        (
            COLD_CASES[2],
            *body_case(
                alter_partition_reassignments_request(),
                0,
                None,
                kp_admin.AlterPartitionReassignmentsRequest,
                kio_has(45, 0, True),
            ),
        ),
    ]


def check(name: str, wire: bytes, value: Dict_, impls: List[Impl]) -> None:
    """Every implementation writes kproto's bytes and reads them back to the same values."""
    for impl in impls:
        produced = impl.encode()
        if produced != wire:
            raise AssertionError(
                f"{name}: {impl.name} encodes {len(produced)} bytes that differ from kproto's "
                f"{len(wire)} (first difference at byte "
                f"{next((i for i, (a, b) in enumerate(zip(produced, wire)) if a != b), None)})"
            )
        got = impl.values(impl.decode(wire))
        if got != value:
            raise AssertionError(f"{name}: {impl.name} decodes kproto's bytes to different values")


def best_time(fn: Callable[[], Any], repeat: int, min_time: float) -> float:
    """Best seconds per call over ``repeat`` timeit loops, each at least ``min_time`` long."""
    timer = timeit.Timer(fn)
    number, elapsed = timer.autorange()
    if elapsed < min_time:
        number = max(1, int(number * min_time / max(elapsed, 1e-9)))
    return min(timer.repeat(repeat=repeat, number=number)) / number


# ----------------------------------------------------------------------------------------------------------
# Environment report.


def kproto_backend() -> Dict_:
    import kproto.messages as km

    # The module each class comes from: the compiled target where built, else the pure one.
    classes = {
        "metadata": km.MetadataRequest,
        "offset_commit": km.OffsetCommitRequest,
        "heartbeat": km.HeartbeatRequest,
        "fetch": km.FetchRequest,
        "headers": km.RequestHeader,
    }
    modules = {n: sys.modules[cls.__module__].__file__ for n, cls in classes.items()}
    compiled = {n: path.endswith((".so", ".pyd")) for n, path in modules.items()}
    support = {
        m: importlib.import_module(m).__file__.endswith((".so", ".pyd"))
        for m in ("kproto.message_base", "kproto.framing", "kproto.wire", "kproto.records.record_set")
    }
    return {
        "records_backend": kproto.backend,
        "generated_codecs": "cython"
        if all(compiled.values())
        else ("python" if not any(compiled.values()) else "mixed"),
        "generated_modules_compiled": compiled,
        "support_modules_compiled": support,
        "metadata_module": os.path.relpath(modules["metadata"], ROOT),
    }


def environment() -> Dict_:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "kproto": kproto.__version__,
        "kafka-python": kafka.__version__,
        "kio": getattr(kio, "__version__", None) or importlib.metadata.version("kio"),
        "kproto_backend": kproto_backend(),
        "loadavg": list(os.getloadavg()),
    }


def time_impl(impl: Impl, wire: bytes, repeat: int, min_time: float) -> Dict[str, float]:
    return {
        "encode": best_time(impl.encode, repeat, min_time),
        "decode": best_time(lambda: impl.decode(wire), repeat, min_time),
    }


def kio05_rows(repeat: int, min_time: float) -> Optional[Dict[str, float]]:
    """kio 0.5.0's timings of the legacy Fetch case, from a worker process (None when not installed)."""
    if not os.path.isfile(os.path.join(KIO05_PATH, "kio", "__init__.py")):
        return None
    out = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--kio05-worker",
            "--repeat",
            str(repeat),
            "--min-time",
            str(min_time),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def kio05_worker(repeat: int, min_time: float) -> int:
    """In the worker: check kio 0.5.0 against kproto on the legacy Fetch case, then time it."""
    for name, wire, value, impls in cases():
        if name == LEGACY_FETCH_CASE:
            kio_impls = [impl for impl in impls if impl.name == "kio"]
            check(name, wire, value, kio_impls)
            json.dump(time_impl(kio_impls[0], wire, repeat, min_time), sys.stdout)
            return 0
    raise AssertionError("no legacy Fetch case")


def run(repeat: int, min_time: float, only: Optional[str]) -> Tuple[List[Dict_], List[str]]:
    results, notes = [], []
    for name, wire, value, impls in cases():
        if only and only.lower() not in name.lower():
            continue
        check(name, wire, value, impls)
        timings: Dict[str, Dict[str, float]] = {impl.name: time_impl(impl, wire, repeat, min_time) for impl in impls}
        if name == LEGACY_FETCH_CASE and "kio" not in timings:
            legacy = kio05_rows(repeat, min_time)
            if legacy is None:
                notes.append(f"{name}: no kio row (kio 0.5.0 is not installed in {KIO05_PATH})")
            else:
                timings["kio 0.5.0"] = legacy
                impls = impls + [Impl("kio 0.5.0", bytes, bytes, dict)]  # for the row order only
        objects = result_objects(impls[0].decode(wire))
        for op in ("encode", "decode"):
            base = timings["kproto"][op]
            for impl in impls:
                t = timings[impl.name][op]
                results.append(
                    {
                        "case": name,
                        "bytes": len(wire),
                        "op": op,
                        "impl": impl.name,
                        "us_per_op": t * 1e6,
                        "ratio_vs_kproto": t / base,
                        "result_objects": objects,
                    }
                )
    return results, notes


# ----------------------------------------------------------------------------------------------------------
# The allocation floor. kio 0.6 decodes in a compiled (Rust) extension that builds the same Python objects
# kproto's compiled decoders build; once parsing is native on both sides, what is left is CPython allocating
# the result. A decoder 10x faster than kio would have to create each object of its result in a tenth of
# kio's time per object; this section counts the objects and measures CPython's cheapest allocation in the
# same run, so that a missed "10x kio" decode row says whether any decoder returning these values could
# meet it.


def result_objects(obj: Any) -> int:
    """The Python objects a decoder must allocate to return ``obj``: messages and structs, lists, strings
    and bytes longer than one character (shorter ones are interned singletons), ints outside CPython's
    small-int cache, UUIDs (with the int inside), record sets (with their bytes)."""
    if obj is None or isinstance(obj, bool):
        return 0
    if isinstance(obj, int):
        return 0 if -5 <= obj <= 256 else 1
    if isinstance(obj, (str, bytes)):
        return 1 if len(obj) > 1 else 0
    if isinstance(obj, uuid.UUID):
        return 2
    if isinstance(obj, RecordSet):
        return 2
    if isinstance(obj, (list, tuple)):
        return 1 + sum(result_objects(x) for x in obj)
    fields = getattr(type(obj), "FIELDS", None)
    if fields is None:
        return 1
    return 1 + sum(result_objects(getattr(obj, info.name)) for info in fields)


def allocation_floor(repeat: int, min_time: float) -> Tuple[float, float]:
    """(seconds per timed call, seconds per object) at best in CPython: the timing harness calling one C
    function and nothing else, and a C-level loop creating large ints, the cheapest allocation there is (no
    Python frame, no attribute stores). A decode cannot take less than the first plus the second times the
    objects it returns."""
    data = b"x"
    call = best_time(lambda: len(data), repeat, min_time)
    big = list(range(1 << 40, (1 << 40) + 1000))  # small enough to stay in cache
    per_object = best_time(lambda: list(map(operator.neg, big)), repeat, min_time) / len(big)
    return call, per_object


def target_misses(env: Dict_, results: List[Dict_]) -> List[str]:
    """The operations below the targets: compiled kproto >= 3x kafka-python 3.x and >= 10x kio; the pure
    path >= 1x kafka-python 3.x. A decode missed against kio says what the target leaves per result object
    next to the measured allocation floor (``env["allocation_floor_ns"]``)."""
    compiled = env["kproto_backend"]["generated_codecs"] == "cython"
    floors = (
        {"kafka-python 3.x json": 3.0, "kio": 10.0, "kio 0.5.0": 10.0} if compiled else {"kafka-python 3.x json": 1.0}
    )
    misses = []
    for r in results:
        target = floors.get(r["impl"])
        if r["case"] in COLD_CASES:
            target = {"kafka-python 3.x json": 2.0 if compiled else 1.0}.get(r["impl"])
        if target is None or r["ratio_vs_kproto"] >= target:
            continue
        miss = f"{r['case']} {r['op']}: {r['impl']} {r['ratio_vs_kproto']:.2f}x < {target:g}x"
        if r["op"] == "decode" and r["impl"].startswith("kio"):
            budget_us = r["us_per_op"] / target
            floor_us = (env["call_floor_ns"] + r["result_objects"] * env["allocation_floor_ns"]) / 1e3
            verdict = "below" if budget_us < floor_us else "above"
            miss += (
                f" ({target:g}x would leave {budget_us:.3f} µs, {verdict} the floor of {floor_us:.3f} µs for "
                f"one call returning {r['result_objects']} objects)"
            )
        misses.append(miss)
    return misses


def print_table(env: Dict_, results: List[Dict_], notes: List[str]) -> None:
    b = env["kproto_backend"]
    compiled_support = ", ".join(sorted(k for k, v in b["support_modules_compiled"].items() if v))
    print(
        f"Python {env['python']} ({env['implementation']}, {env['machine']}); kproto {env['kproto']}, "
        f"kafka-python {env['kafka-python']}, kio {env['kio']}"
    )
    print(
        f"kproto backend: generated codecs = {b['generated_codecs']} "
        f"(MetadataRequest from {b['metadata_module']}); "
        f"compiled support modules = {compiled_support or 'none'}; "
        f"record sets = {b['records_backend']}"
    )
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in env["loadavg"]))
    print("All implementations checked byte-identical to kproto and decoding to the same values before timing.")
    print("peer/kproto = peer time / kproto time (> 1 means kproto is faster)")
    print(
        f"floor: {env['call_floor_ns']:.1f} ns per timed call (the harness calling len()) + "
        f"{env['allocation_floor_ns']:.1f} ns per object (CPython creating large ints in a C loop, the cheapest "
        f"allocation)\n"
    )
    header = f"{'operation':<9} {'implementation':<22} {'µs/op':>11} {'peer/kproto':>12}"
    print(header)
    print("=" * len(header))
    last_case = None
    for r in results:
        if r["case"] != last_case:
            if last_case is not None:
                print("-" * len(header))
            print(f"{r['case']}  [{r['bytes']} bytes; kproto's decoded result is {r['result_objects']} objects]")
            last_case = r["case"]
        ratio = "" if r["impl"] == "kproto" else f"{r['ratio_vs_kproto']:.2f}x"
        print(f"{r['op']:<9} {r['impl']:<22} {r['us_per_op']:>11.2f} {ratio:>12}")
    print()
    for note in notes:
        print(f"note: {note}")
    misses = target_misses(env, results)
    kind = "compiled" if b["generated_codecs"] == "cython" else "pure"
    print(f"targets ({kind}): " + ("all met" if not misses else f"{len(misses)} missed"))
    for miss in misses:
        print(f"  missed: {miss}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--repeat", type=int, default=7, help="timeit repeats; the best is kept (default 7)")
    parser.add_argument("--min-time", type=float, default=0.2, help="minimum seconds per timeit loop (default 0.2)")
    parser.add_argument("--quick", action="store_true", help="3 repeats of >= 0.05 s (smoke run)")
    parser.add_argument("--only", help="run the cases whose name contains this text")
    parser.add_argument("--kio05-worker", action="store_true", help=argparse.SUPPRESS)
    add_json_out(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.min_time = 3, 0.05
    if args.kio05_worker:
        return kio05_worker(args.repeat, args.min_time)
    env = environment()
    compiled = env["kproto_backend"]["generated_codecs"] == "cython"
    run_record = Run("codecs" if compiled else "codecs-pure", argv)
    call, per_object = allocation_floor(args.repeat, args.min_time)
    env["call_floor_ns"], env["allocation_floor_ns"] = call * 1e9, per_object * 1e9
    results, notes = run(args.repeat, args.min_time, args.only)
    if args.json:
        json.dump(
            {
                "environment": env,
                "repeat": args.repeat,
                "min_time": args.min_time,
                "results": results,
                "notes": notes,
                "target_misses": target_misses(env, results),
            },
            sys.stdout,
            indent=2,
        )
        print()
    else:
        print_table(env, results, notes)
    run_record.settings = {
        "backend": env["kproto_backend"]["generated_codecs"],
        "kafka-python": env["kafka-python"],
        "kio": env["kio"],
        "repeat": args.repeat,
        "min_time": args.min_time,
    }
    for r in results:
        run_record.add(
            case=r["case"],
            op=r["op"],
            impl=r["impl"],
            us_per_op=r["us_per_op"],
            ratio=None if r["impl"] == "kproto" else r["ratio_vs_kproto"],
        )
    for note in notes + [f"target missed: {m}" for m in target_misses(env, results)]:
        run_record.note(note)
    run_record.save(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
