"""Codec benchmark: kproto against kafka-python (hand-declared ``kafka.protocol.old`` classes and the 3.x
JSON-driven compiled path) and kio 0.5, encoding and decoding the same logical messages.

Run from the repository root::

    .venv/bin/python benchmarks/codecs.py            # table
    .venv/bin/python benchmarks/codecs.py --json     # machine-readable
    .venv/bin/python benchmarks/codecs.py --quick    # fewer repeats, for a smoke run

Before anything is timed, every peer's encoding is checked to be byte-identical to kproto's, and every
peer's decoding of kproto's bytes is checked to hold the same values (so all rows time the same work).
Times are the best of ``--repeat`` runs of a ``timeit`` loop sized by ``Timer.autorange``, in µs per
operation; "ratio" is peer time / kproto time (above 1: kproto is faster).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import importlib.metadata
import io
import json
import os
import platform
import struct
import sys
import timeit
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import kproto
    import kproto.messages as km
    from kproto.reference import schema as kproto_schema

    import kafka
    import kafka.protocol.consumer as kp_consumer
    import kafka.protocol.metadata as kp_metadata
    from kafka.protocol.old import commit as old_commit
    from kafka.protocol.old import fetch as old_fetch
    from kafka.protocol.old import group as old_group
    from kafka.protocol.old import metadata as old_metadata
    from kafka.protocol.old import types as old_types

    import kio
    from kio.index import load_request_schema, load_response_schema
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
            partitions.append({"error_code": 0, "partition_index": p, "leader_id": replicas[0],
                               "replica_nodes": replicas, "isr_nodes": list(replicas)})
        topics.append({"error_code": 0, "name": f"events.topic-{t:03d}", "partitions": partitions})
    return km.MetadataResponse.from_dict({"brokers": brokers, "topics": topics})


def offset_commit_request() -> km.OffsetCommitRequest:
    topics = [{"name": f"orders-{t}", "partitions": [
        {"partition_index": p, "committed_offset": 1_000_000 + 97 * p, "committed_metadata": "" if p % 2 else None}
        for p in range(10)]} for t in range(5)]
    return km.OffsetCommitRequest.from_dict({
        "group_id": "billing-consumers", "generation_id_or_member_epoch": 17, "member_id": "consumer-1-5a1f7c0e",
        "retention_time_ms": -1,  # the broker default retention, as clients send it
        "topics": topics})


def heartbeat_request() -> km.HeartbeatRequest:
    return km.HeartbeatRequest(group_id="billing-consumers", generation_id=17, member_id="consumer-1-5a1f7c0e")


def fetch_request() -> km.FetchRequest:
    topics = [{"topic": "events", "partitions": [
        {"partition": p, "fetch_offset": 123_456_789 + p, "partition_max_bytes": 1 << 20} for p in range(10)]}]
    return km.FetchRequest.from_dict({"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": topics})


CORRELATION_ID, CLIENT_ID = 0x2A, "kproto-bench"


def wire_values(msg: Any, version: int) -> Dict_:
    """kproto's ``to_dict()`` restricted to the fields ``version`` carries."""
    spec = next(s for s in kproto_schema().messages() if s.name == type(msg).__name__)

    def view(struct_spec, value):
        out = {}
        for f in struct_spec.fields_for(version):
            v = value[f.attr]
            if f.type.is_array and f.type.element.is_struct:
                v = [view(f.type.element.struct, item) for item in v]
            out[f.attr] = v
        return out

    return view(spec.root, msg.to_dict())


# ----------------------------------------------------------------------------------------------------------
# Value converters: the same logical message in each peer's own object model.

def old_build(cls: type, value: Dict_) -> Any:
    def to_tuple(schema, v):
        return tuple(
            [to_tuple(t.array_of, i) for i in v[n]]
            if isinstance(t, old_types.Array) and isinstance(t.array_of, old_types.Schema) else v[n]
            for n, t in zip(schema.names, schema.fields))

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


def json_build(cls: type, version: int, value: Dict_) -> Any:
    def build(sf, data_class, v, **extra):
        kwargs = {}
        for f in sf.untagged_fields(version):
            x = v[f.name]
            if f.is_struct_array():
                x = [build(f.array_of, f.array_of.data_class, item) for item in x]
            kwargs[f.name] = x
        return data_class(**kwargs, **extra)

    return build(cls._struct, cls, value, version=version)


def json_values(cls: type, version: int, obj: Any) -> Dict_:
    def unbuild(sf, o):
        out = {}
        for f in sf.untagged_fields(version):
            x = getattr(o, f.name)
            if f.is_struct_array():
                x = [unbuild(f.array_of, item) for item in x]
            out[f.name] = bytes(x) if isinstance(x, memoryview) else x
        return out

    return unbuild(cls._struct, obj)


# kio names millisecond fields it types as timedelta without "_ms"; error codes are its ErrorCode enum.
_KIO_RENAMES = {"timeout": "timeout_ms", "max_wait": "max_wait_ms", "retention_time": "retention_time_ms",
                "session_timeout": "session_timeout_ms", "throttle_time": "throttle_time_ms",
                "request_api_key": "api_key", "request_api_version": "api_version"}
_MS = datetime.timedelta(milliseconds=1)


def kio_build(entity: type, value: Dict_) -> Any:
    kwargs = {}
    for f in dataclasses.fields(entity):
        name, ktype, fc = _KIO_RENAMES.get(f.name, f.name), f.metadata.get("kafka_type"), classify_field(f)
        v = value[name]
        if isinstance(fc, EntityTupleField):
            v = tuple(kio_build(fc.type_, item) for item in v)
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
        v = getattr(obj, f.name)
        if isinstance(fc, EntityTupleField):
            v = [kio_values(item) for item in v]
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
# Cases: per workload, per implementation, an encode and a decode callable plus equality checks.

class Impl:
    """One implementation of one workload: ``encode()`` -> bytes, ``decode(bytes)`` -> its own object,
    ``values(obj)`` -> the decoded values in kproto's dict shape (for the pre-timing check)."""

    def __init__(self, name: str, encode: Callable[[], bytes], decode: Callable[[bytes], Any],
                 values: Callable[[Any], Dict_]) -> None:
        self.name, self.encode, self.decode, self.values = name, encode, decode, values


def body_case(msg: Any, version: int, old_cls: Optional[type], json_cls: Optional[type],
              kio_cls: Optional[type]) -> Tuple[bytes, Dict_, List[Impl]]:
    cls = type(msg)
    value = wire_values(msg, version)
    wire = msg.encode(version)
    impls = [Impl("kproto", lambda: msg.encode(version), lambda b: cls.decode(b, version),
                  lambda o: wire_values(o, version))]
    if old_cls is not None:
        old_obj = old_build(old_cls, value)
        impls.append(Impl("kafka-python old", old_obj.encode, old_cls.decode, lambda o: old_values(old_cls, o)))
    if json_cls is not None:
        json_obj = json_build(json_cls, version, value)
        impls.append(Impl("kafka-python 3.x json", lambda: json_obj.encode(version=version),
                          lambda b: json_cls.decode(b, version=version),
                          lambda o: json_values(json_cls, version, o)))
    if kio_cls is not None:
        entity = kio_build(kio_cls, value)
        enc = kio_encode(kio_cls)
        impls.append(Impl("kio", lambda: enc(entity), kio_decode(kio_cls), kio_values))
    return wire, value, impls


def fetch_frame_case() -> Tuple[bytes, Dict_, List[Impl]]:
    """A whole FetchRequest v1 frame: size prefix, request header v1, body; decoding reads the header first."""
    msg, version = fetch_request(), 1
    value = wire_values(msg, version)
    frame = kproto.encode_request(msg, version, CORRELATION_ID, CLIENT_ID)

    def kproto_values(pair):
        header, body = pair
        return {"header": (header.api_key, header.api_version, header.correlation_id, header.client_id),
                "body": wire_values(body, version)}

    impls = [Impl("kproto", lambda: kproto.encode_request(msg, version, CORRELATION_ID, CLIENT_ID),
                  kproto.decode_request, kproto_values)]

    old_cls = old_fetch.FetchRequest_v1
    old_obj = old_build(old_cls, value)
    old_obj.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)

    def old_frame_values(o):
        h = o.header
        return {"header": (h.api_key, h.api_version, h.correlation_id, h.client_id), "body": old_values(old_cls, o)}

    impls.append(Impl("kafka-python old", lambda: old_obj.encode(header=True, framed=True),
                      lambda b: old_cls.decode(b, header=True, framed=True), old_frame_values))

    json_cls = kp_consumer.FetchRequest
    json_obj = json_build(json_cls, version, value)
    json_obj.with_header(correlation_id=CORRELATION_ID, client_id=CLIENT_ID)

    def json_frame_values(o):
        h = o.header
        return {"header": (h.request_api_key, h.request_api_version, h.correlation_id, h.client_id),
                "body": json_values(json_cls, version, o)}

    impls.append(Impl("kafka-python 3.x json", lambda: json_obj.encode(header=True, framed=True),
                      lambda b: json_cls.decode(b, version=version, header=True, framed=True), json_frame_values))

    # kio has no framing helper: its header entity, then the body entity, behind an int32 size.
    body_cls = load_request_schema(1, version)
    header_cls = body_cls.__header_schema__
    header_entity = kio_build(header_cls, {"api_key": 1, "api_version": version, "correlation_id": CORRELATION_ID,
                                           "client_id": CLIENT_ID})
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

    def kio_unframe(frame: bytes):
        (size,) = struct.unpack_from(">i", frame, 0)
        if size != len(frame) - 4:
            raise ValueError("bad frame size")
        header, n = read_header(frame, 4)
        body, m = read_body(frame, 4 + n)
        if 4 + n + m != len(frame):
            raise ValueError("trailing bytes")
        return header, body

    def kio_frame_values(pair):
        h, body = pair
        return {"header": (h.request_api_key, h.request_api_version, h.correlation_id, h.client_id),
                "body": kio_values(body)}

    impls.append(Impl("kio", kio_frame, kio_unframe, kio_frame_values))
    expected = {"header": (1, version, CORRELATION_ID, CLIENT_ID), "body": value}
    return frame, expected, impls


def cases() -> List[Tuple[str, bytes, Dict_, List[Impl]]]:
    return [
        ("MetadataResponse v0 (5 brokers, 100x10 partitions)",
         *body_case(metadata_response(), 0, old_metadata.MetadataResponse_v0, kp_metadata.MetadataResponse,
                    load_response_schema(3, 0))),
        ("OffsetCommitRequest v2 (50 partitions)",
         *body_case(offset_commit_request(), 2, old_commit.OffsetCommitRequest_v2, kp_consumer.OffsetCommitRequest,
                    load_request_schema(8, 2))),
        ("HeartbeatRequest v0",
         *body_case(heartbeat_request(), 0, old_group.HeartbeatRequest_v0, kp_consumer.HeartbeatRequest,
                    load_request_schema(12, 0))),
        ("FetchRequest v1 frame (header + 10 partitions)", *fetch_frame_case()),
    ]


def check(name: str, wire: bytes, value: Dict_, impls: List[Impl]) -> None:
    """Every implementation writes kproto's bytes and reads them back to the same values."""
    for impl in impls:
        produced = impl.encode()
        if produced != wire:
            raise AssertionError(f"{name}: {impl.name} encodes {len(produced)} bytes that differ from kproto's "
                                 f"{len(wire)} (first difference at byte "
                                 f"{next((i for i, (a, b) in enumerate(zip(produced, wire)) if a != b), None)})")
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
    names = ["metadata", "offset_commit", "heartbeat", "fetch", "headers"]
    modules = {n: importlib.import_module(f"kproto._generated.{n}").__file__ for n in names}
    compiled = {n: path.endswith((".so", ".pyd")) for n, path in modules.items()}
    support = {m: importlib.import_module(m).__file__.endswith((".so", ".pyd"))
               for m in ("kproto.message_base", "kproto.framing", "kproto.wire")}
    return {
        "records_backend": kproto.backend,
        "generated_codecs": "cython" if all(compiled.values()) else ("python" if not any(compiled.values())
                                                                     else "mixed"),
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
    }


def run(repeat: int, min_time: float, only: Optional[str]) -> List[Dict_]:
    results = []
    for name, wire, value, impls in cases():
        if only and only.lower() not in name.lower():
            continue
        check(name, wire, value, impls)
        timings: Dict[str, Dict[str, float]] = {}
        for impl in impls:
            timings[impl.name] = {
                "encode": best_time(impl.encode, repeat, min_time),
                "decode": best_time(lambda impl=impl: impl.decode(wire), repeat, min_time),
            }
        for op in ("encode", "decode"):
            base = timings["kproto"][op]
            for impl in impls:
                t = timings[impl.name][op]
                results.append({"case": name, "bytes": len(wire), "op": op, "impl": impl.name,
                                "us_per_op": t * 1e6, "ratio_vs_kproto": t / base})
    return results


def print_table(env: Dict_, results: List[Dict_]) -> None:
    b = env["kproto_backend"]
    compiled_support = ", ".join(sorted(k for k, v in b["support_modules_compiled"].items() if v))
    print(f"Python {env['python']} ({env['implementation']}, {env['machine']}); kproto {env['kproto']}, "
          f"kafka-python {env['kafka-python']}, kio {env['kio']}")
    print(f"kproto backend: generated codecs = {b['generated_codecs']} "
          f"(kproto._generated.metadata from {b['metadata_module']}); "
          f"compiled support modules = {compiled_support or 'none'}; "
          f"record sets = {b['records_backend']}")
    print("All implementations checked byte-identical to kproto and decoding to the same values before timing.")
    print("peer/kproto = peer time / kproto time (> 1 means kproto is faster)\n")
    header = f"{'operation':<9} {'implementation':<22} {'µs/op':>11} {'peer/kproto':>12}"
    print(header)
    print("=" * len(header))
    last_case = None
    for r in results:
        if r["case"] != last_case:
            if last_case is not None:
                print("-" * len(header))
            print(f"{r['case']}  [{r['bytes']} bytes]")
            last_case = r["case"]
        ratio = "" if r["impl"] == "kproto" else f"{r['ratio_vs_kproto']:.2f}x"
        print(f"{r['op']:<9} {r['impl']:<22} {r['us_per_op']:>11.2f} {ratio:>12}")
    print()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--repeat", type=int, default=7, help="timeit repeats; the best is kept (default 7)")
    parser.add_argument("--min-time", type=float, default=0.2, help="minimum seconds per timeit loop (default 0.2)")
    parser.add_argument("--quick", action="store_true", help="3 repeats of >= 0.05 s (smoke run)")
    parser.add_argument("--only", help="run the cases whose name contains this text")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat, args.min_time = 3, 0.05
    env = environment()
    results = run(args.repeat, args.min_time, args.only)
    if args.json:
        json.dump({"environment": env, "repeat": args.repeat, "min_time": args.min_time, "results": results},
                  sys.stdout, indent=2)
        print()
    else:
        print_table(env, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
