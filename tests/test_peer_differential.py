"""Differential tests against independent implementations of the same wire protocol ("peers").

For every (message, version) kproto knows, each peer that models it is checked in both directions with
hypothesis-drawn values:

1. kproto encodes -> the peer decodes all of the bytes to the same values;
2. the peer encodes the same values -> bytes identical to kproto's;
3. kproto decodes the peer's bytes -> a message equal to the drawn one.

Peers:

* ``kp-old``  kafka-python 3.x's hand-declared classes in ``kafka.protocol.old`` (the 2.x API): no keys 4-7,
  no RequestHeader v0.
* ``kp-json`` kafka-python 3.x's JSON-driven classes (``kafka.protocol.{producer,consumer,metadata,admin}``,
  Kafka 4.3 JSON with ``min_version`` forced to 0, compiled ``exec`` codecs): no keys 4-7, no RequestHeader v0.
* ``kio``     kio 0.5.0 entities (``kio.schema.*``, Kafka 3.9 JSON) with ``kio.serial.entity_reader`` /
  ``entity_writer``: the only peer with LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown,
  and with RequestHeader v0 (ControlledShutdown v0's header without client id).

``COVERAGE`` is the table of which peer covers what; ``test_every_message_version_is_covered`` fails if a
(message, version) kproto has is covered by no peer, and ``test_coverage_table_matches_peers`` fails if the
table claims something a peer cannot do (or omits something it can).

Value constraints per peer are explicit (``Peer.constrain``, only kio needs any) and documented there. A
constrained value is still a full kproto message: kproto encodes, decodes and compares exactly that value,
with no tolerance on either side.  Where a peer models the same bytes with another shape (kafka-python's
``Array(String)`` for MetadataRequest v0 topics, kio's timedelta and enum fields and renamed attributes,
kafka-python's int16 version prefix on consumer-protocol structs) the adapter converts shapes, and asserts
that the peer's field set equals kproto's, so no field is silently dropped.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import re
import struct
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto
from kproto.schema import MessageSpec
from message_strategies import message_class, message_values, spec_versions

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import kafka.protocol.admin as _kp_admin
    import kafka.protocol.consumer as _kp_consumer
    import kafka.protocol.metadata as _kp_metadata
    import kafka.protocol.producer as _kp_producer
    from kafka.protocol import api_header as _kp_api_header
    from kafka.protocol.old import api as _old_api
    from kafka.protocol.old import types as _old_types
    from kio.index import KioIndexError, load_entity_schema, load_request_schema, load_response_schema
    from kio.schema.errors import ErrorCode as KioErrorCode
    from kio.serial import entity_reader, entity_writer
    from kio.serial._introspect import EntityField, EntityTupleField, classify_field
    from kio.static.constants import EntityType

Dict_ = Dict[str, Any]
CASES = spec_versions()
SPECS = {spec.name: spec for spec, _ in CASES}
PEER_EXAMPLES = settings(max_examples=40, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _api_and_kind(spec: MessageSpec) -> Tuple[str, str]:
    """("Produce", "request") for ProduceRequest; ("RequestHeader", "header"); ("Consumer...", "data")."""
    name = spec.name
    if name in ("RequestHeader", "ResponseHeader"):
        return name, "header"
    for kind in ("Request", "Response"):
        if name.endswith(kind):
            return name[: -len(kind)], kind.lower()
    return name, "data"


def _bytes(value: Any) -> Any:
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else value


def _version_view(struct, version: int, value: Dict_) -> Dict_:
    """kproto's ``to_dict()`` lists every field the class has in any version; keep those ``version`` carries."""
    out = {}
    for f in struct.fields_for(version):
        v = value[f.attr]
        if f.type.is_array and f.type.element.is_struct:
            v = [_version_view(f.type.element.struct, version, item) for item in v]
        out[f.attr] = v
    return out


def wire_values(spec: MessageSpec, version: int, msg: Any) -> Dict_:
    """The values ``msg`` puts on the wire in ``version``, in kproto's ``to_dict()`` shape."""
    return _version_view(spec.root, version, msg.to_dict())


def _map_dict(d: Dict_, fn: Callable[[Tuple[str, ...], Any], Any], path: Tuple[str, ...] = ()) -> Dict_:
    """Apply ``fn(path, value)`` to every leaf of a kproto ``to_dict()`` value (lists of scalars are leaves)."""
    out = {}
    for key, value in d.items():
        p = path + (key,)
        if isinstance(value, list) and value and isinstance(value[0], dict):
            out[key] = [_map_dict(item, fn, p) for item in value]
        else:
            out[key] = fn(p, value)
    return out


class Peer:
    """One independent implementation: how it names, encodes and decodes a (message, version)."""

    name = ""

    def supports(self, spec: MessageSpec, version: int) -> bool:
        raise NotImplementedError

    def encode(self, spec: MessageSpec, version: int, value: Dict_) -> bytes:
        raise NotImplementedError

    def decode(self, spec: MessageSpec, version: int, data: bytes) -> Dict_:
        """The values of ``data`` in kproto's ``to_dict()`` shape; fails unless every byte is consumed."""
        raise NotImplementedError

    def constrain(self, spec: MessageSpec, version: int, value: Dict_) -> Dict_:
        """Map a drawn value into the part of the value space this peer can represent (identity by default)."""
        return value


# --------------------------------------------------------------------------------------------------------
# kafka-python, hand-declared classes (kafka.protocol.old)

_OLD_CLASSES = {
    "Produce": "produce", "Fetch": "fetch", "ListOffsets": "list_offsets", "Metadata": "metadata",
    "OffsetCommit": "commit", "OffsetFetch": "commit", "GroupCoordinator": "find_coordinator",
    "JoinGroup": "group", "Heartbeat": "group", "LeaveGroup": "group", "SyncGroup": "group",
    "DescribeGroups": "admin", "ListGroups": "admin",
}
# kafka-python's consumer-protocol structs carry the int16 schema version as their first field
# ("version"); kproto's ConsumerProtocol* messages are the body after that prefix.
_OLD_DATA = {"ConsumerProtocolSubscription": "ConsumerProtocolMemberMetadata_v0",
             "ConsumerProtocolAssignment": "ConsumerProtocolMemberAssignment_v0"}

# MetadataRequest v0: Kafka's JSON (and kproto) has Topics as an array of MetadataRequestTopic{Name};
# kafka-python declares Array(String).  Same bytes, different shape: unwrap/rewrap the single field.
_OLD_SCALAR_STRUCTS = {"MetadataRequest_v0": {"topics": "name"}}


class KafkaPythonOld(Peer):
    name = "kp-old"

    def _cls(self, spec: MessageSpec, version: int) -> Optional[type]:
        api, kind = _api_and_kind(spec)
        if kind == "header":
            # kafka-python's RequestHeader always writes client_id: it is header v1 only.
            if spec.name == "RequestHeader":
                return _old_api.RequestHeader if version == 1 else None
            return _old_api.ResponseHeader
        if kind == "data":
            return getattr(importlib.import_module("kafka.protocol.old.consumer_protocol"), _OLD_DATA[spec.name])
        module = _OLD_CLASSES.get(api)
        if module is None:
            return None
        peer_api = "FindCoordinator" if api == "GroupCoordinator" else api
        mod = importlib.import_module(f"kafka.protocol.old.{module}")
        return getattr(mod, f"{peer_api}{kind.title()}_v{version}", None)

    def supports(self, spec, version):
        return self._cls(spec, version) is not None

    @staticmethod
    def _to_tuple(schema: _old_types.Schema, value: Dict_, wrapped: Dict[str, str] = {}) -> List[Any]:
        assert set(schema.names) == set(value), (schema.names, sorted(value))
        out = []
        for name, ftype in zip(schema.names, schema.fields):
            v = value[name]
            if isinstance(ftype, _old_types.Array) and isinstance(ftype.array_of, _old_types.Schema):
                v = [tuple(KafkaPythonOld._to_tuple(ftype.array_of, item)) for item in v]
            elif v and isinstance(v, list) and isinstance(v[0], dict):
                # A struct with one field in kproto (Kafka's JSON), a bare scalar array in kafka-python.
                v = [item[wrapped[name]] for item in v]
            out.append(v)
        return out

    @staticmethod
    def _to_dict(schema: _old_types.Schema, values: Any, wrapped: Dict[str, str] = {}) -> Dict_:
        out = {}
        for i, (name, ftype) in enumerate(zip(schema.names, schema.fields)):
            v = getattr(values, name) if not isinstance(values, tuple) else values[i]
            if isinstance(ftype, _old_types.Array) and isinstance(ftype.array_of, _old_types.Schema):
                v = [KafkaPythonOld._to_dict(ftype.array_of, item) for item in v]
            elif name in wrapped:
                v = [{wrapped[name]: item} for item in v]
            out[name] = _bytes(v)
        return out

    def build(self, cls: type, value: Dict_) -> Any:
        """An instance of kafka-python class ``cls`` holding ``value`` (kproto's dict shape)."""
        return cls(*self._to_tuple(cls.SCHEMA, value, _OLD_SCALAR_STRUCTS.get(cls.__name__, {})))

    def values(self, cls: type, obj: Any) -> Dict_:
        """The inverse of :meth:`build`."""
        return self._to_dict(cls.SCHEMA, obj, _OLD_SCALAR_STRUCTS.get(cls.__name__, {}))

    def encode(self, spec, version, value):
        cls = self._cls(spec, version)
        if spec.name in _OLD_DATA:
            data = self.build(cls, {"version": 0, **value}).encode()
            assert data[:2] == b"\x00\x00"
            return data[2:]
        return self.build(cls, value).encode()

    def decode(self, spec, version, data):
        cls = self._cls(spec, version)
        if spec.name in _OLD_DATA:
            data = b"\x00\x00" + data
        buf = io.BytesIO(data)
        obj = cls.decode(buf)
        assert buf.tell() == len(data), f"{cls.__name__} consumed {buf.tell()} of {len(data)} bytes"
        out = self.values(cls, obj)
        if spec.name in _OLD_DATA:
            assert out.pop("version") == 0
        return out


# --------------------------------------------------------------------------------------------------------
# kafka-python 3.x, JSON-driven classes (compiled codecs)

_JSON_MODULES = (_kp_producer, _kp_consumer, _kp_metadata, _kp_admin)
# kafka-python's header JSON (Kafka 4.3) spells the first two fields RequestApiKey/RequestApiVersion.
_JSON_RENAMES = {"RequestHeader": {"request_api_key": "api_key", "request_api_version": "api_version"}}


class KafkaPythonJson(Peer):
    name = "kp-json"

    def _cls(self, spec: MessageSpec, version: int) -> Optional[type]:
        api, kind = _api_and_kind(spec)
        if kind == "header":
            cls = getattr(_kp_api_header, spec.name)
            lo, hi = cls._valid_versions
            # RequestHeader is "1-2" in 4.3's JSON: v0 (no client id) is gone; v2 is flexible.
            flo, fhi = cls._flexible_versions
            return cls if lo <= version <= hi and not flo <= version <= fhi else None
        if kind == "data":
            name = spec.name
        else:
            name = ("FindCoordinator" if api == "GroupCoordinator" else api) + kind.title()
        for mod in _JSON_MODULES:
            cls = getattr(mod, name, None)
            if cls is not None:
                break
        else:
            return None
        if not cls.min_version <= version <= cls.max_version or cls.flexible_version_q(version):
            return None
        return cls

    def supports(self, spec, version):
        return self._cls(spec, version) is not None

    def _build(self, sf, version: int, value: Dict_, renames: Dict[str, str], data_class,
               versioned: bool = False) -> Any:
        """An instance of ``data_class`` (kafka-python 3.x) holding ``value``; ``versioned`` also passes
        ``version=`` to the constructor."""
        fields = sf.untagged_fields(version)
        names = [renames.get(f.name, f.name) for f in fields]
        assert set(names) == set(value), (names, sorted(value))
        kwargs = {}
        for f, kname in zip(fields, names):
            v = value[kname]
            if f.is_struct_array():
                v = [self._build(f.array_of, version, item, {}, f.array_of.data_class) for item in v]
            kwargs[f.name] = v
        if versioned:
            kwargs["version"] = version
        return data_class(**kwargs)

    def _unbuild(self, sf, version: int, obj: Any, renames: Dict[str, str]) -> Dict_:
        out = {}
        for f in sf.untagged_fields(version):
            v = getattr(obj, f.name)
            if f.is_struct_array():
                v = [self._unbuild(f.array_of, version, item, {}) for item in v]
            out[renames.get(f.name, f.name)] = _bytes(v)
        return out

    def encode(self, spec, version, value):
        cls = self._cls(spec, version)
        renames = _JSON_RENAMES.get(spec.name, {})
        if _api_and_kind(spec)[1] == "header":
            obj = self._build(cls._struct, version, value, renames, cls)
            return obj.encode(flexible=False)
        obj = self._build(cls._struct, version, value, renames, cls)
        if _api_and_kind(spec)[1] == "data":
            return obj.encode(version=version, header=False)  # the int16 version prefix is not kproto's
        return obj.encode(version=version)

    def decode(self, spec, version, data):
        cls = self._cls(spec, version)
        kind = _api_and_kind(spec)[1]
        renames = _JSON_RENAMES.get(spec.name, {})
        if kind in ("header", "data"):
            # Reference (BytesIO) path: the header/data classes have no compiled decoder entry point.
            buf = io.BytesIO(data)
            if kind == "header":
                obj = cls.decode(buf, flexible=False)
            else:
                obj = cls.decode(buf, version=version, header=False)
            assert buf.tell() == len(data), f"{cls.__name__} consumed {buf.tell()} of {len(data)} bytes"
        else:
            # ApiMessage.decode(data, version) runs the compiled decoder but drops the end position (it never
            # checks that the body was consumed); ask the same compiled decoder for it.
            obj = cls.decode(data, version=version)
            decoder = cls._struct.compiled_decode_from(version, compact=False, tagged=False, data_class=cls[None])
            _, end = decoder(memoryview(data), 0)
            assert end == len(data), f"{cls.__name__} v{version} consumed {end} of {len(data)} bytes"
        return self._unbuild(cls._struct, version, obj, renames)


# --------------------------------------------------------------------------------------------------------
# kio 0.5.0

# kio renames millisecond fields it models as timedelta (dropping "_ms"), and "id" (a builtin) to "id_".
_KIO_RENAMES = {
    "timeout": "timeout_ms", "throttle_time": "throttle_time_ms", "max_wait": "max_wait_ms",
    "retention_time": "retention_time_ms", "session_timeout": "session_timeout_ms", "id_": "id",
    "request_api_key": "api_key", "request_api_version": "api_version",
}
_KIO_ERROR_CODES = sorted(int(code) for code in KioErrorCode)
_MS = datetime.timedelta(milliseconds=1)
# kio converts timedelta_i64 fields with round(td.total_seconds() * 1000): exact only while the value fits
# a double's mantissa with room for the milliseconds, and timedelta's own range ends at ~8.6e16 ms.
_KIO_I64_MS_LIMIT = 1 << 40


def _kio_fields(entity: type):
    for f in dataclasses.fields(entity):
        yield f, _KIO_RENAMES.get(f.name, f.name), f.metadata.get("kafka_type"), classify_field(f)


class Kio(Peer):
    name = "kio"

    def _cls(self, spec: MessageSpec, version: int) -> Optional[type]:
        api, kind = _api_and_kind(spec)
        try:
            if kind == "header":
                return load_entity_schema(_snake(spec.name), version, EntityType.header)
            if kind == "data":
                return load_entity_schema(_snake(spec.name), version, EntityType.data)
            loader = load_request_schema if kind == "request" else load_response_schema
            return loader(spec.api_key, version)
        except (KioIndexError, ImportError):
            return None

    def supports(self, spec, version):
        cls = self._cls(spec, version)
        return cls is not None and not cls.__flexible__

    def _build(self, entity: type, value: Dict_) -> Any:
        kwargs = {}
        seen = []
        for f, kname, ktype, fc in _kio_fields(entity):
            seen.append(kname)
            v = value[kname]
            if isinstance(fc, EntityTupleField):
                v = tuple(self._build(fc.type_, item) for item in v)
            elif isinstance(fc, EntityField):
                v = None if v is None else self._build(fc.type_, v)
            elif ktype == "error_code":
                v = KioErrorCode(v)
            elif ktype in ("timedelta_i32", "timedelta_i64"):
                v = datetime.timedelta(milliseconds=v)
            elif isinstance(v, list):
                v = tuple(v)
            kwargs[f.name] = v
        assert set(seen) == set(value), (entity, seen, sorted(value))
        return entity(**kwargs)

    def _unbuild(self, entity: Any) -> Dict_:
        out = {}
        for f, kname, ktype, fc in _kio_fields(type(entity)):
            v = getattr(entity, f.name)
            if isinstance(fc, EntityTupleField):
                v = [self._unbuild(item) for item in v]
            elif isinstance(fc, EntityField):
                v = None if v is None else self._unbuild(v)
            elif ktype == "error_code":
                v = int(v.value)
            elif ktype in ("timedelta_i32", "timedelta_i64"):
                v = v // _MS
            elif isinstance(v, tuple):
                v = list(v)
            out[kname] = _bytes(v)
        return out

    def encode(self, spec, version, value):
        cls = self._cls(spec, version)
        buf = io.BytesIO()
        entity_writer(cls)(buf, self._build(cls, value))
        return buf.getvalue()

    def decode(self, spec, version, data):
        cls = self._cls(spec, version)
        entity, size = entity_reader(cls)(data, 0)
        assert size == len(data), f"{cls.__name__} consumed {size} of {len(data)} bytes"
        return self._unbuild(entity)

    def constrain(self, spec, version, value):
        cls = self._cls(spec, version)
        kinds: Dict[Tuple[str, ...], str] = {}

        def collect(entity: type, path: Tuple[str, ...]) -> None:
            for _, kname, ktype, fc in _kio_fields(entity):
                if isinstance(fc, (EntityTupleField, EntityField)):
                    collect(fc.type_, path + (kname,))
                else:
                    kinds[path + (kname,)] = ktype

        collect(cls, ())

        def fix(path: Tuple[str, ...], v: Any) -> Any:
            kind = kinds.get(path)
            if kind == "error_code" and v not in _KIO_ERROR_CODES:
                # kio types error codes as its ErrorCode enum (-1..127 with gaps): an int16 it does not know
                # cannot be built nor read (ValueError).  Fold unknown codes onto known ones.
                return _KIO_ERROR_CODES[v % len(_KIO_ERROR_CODES)]
            if kind == "timedelta_i64" and not -_KIO_I64_MS_LIMIT <= v <= _KIO_I64_MS_LIMIT:
                # kio models int64 millisecond fields as timedelta (see _KIO_I64_MS_LIMIT).
                return v % _KIO_I64_MS_LIMIT
            return v

        return _map_dict(value, fix)


PEERS: Dict[str, Peer] = {p.name: p for p in (KafkaPythonOld(), KafkaPythonJson(), Kio())}

# --------------------------------------------------------------------------------------------------------
# The coverage table: (message, version) -> peers that check it, in both directions.

_ALL = ("kp-old", "kp-json", "kio")
COVERAGE: Dict[Tuple[str, int], Tuple[str, ...]] = {
    ("ProduceRequest", 0): _ALL, ("ProduceRequest", 1): _ALL,
    ("ProduceResponse", 0): _ALL, ("ProduceResponse", 1): _ALL,
    ("FetchRequest", 0): _ALL, ("FetchRequest", 1): _ALL,
    ("FetchResponse", 0): _ALL, ("FetchResponse", 1): _ALL,
    ("ListOffsetsRequest", 0): _ALL, ("ListOffsetsResponse", 0): _ALL,
    ("MetadataRequest", 0): _ALL, ("MetadataResponse", 0): _ALL,
    # Keys 4-7 are inter-broker APIs: kafka-python has neither generation of them, kio has them all.
    ("LeaderAndIsrRequest", 0): ("kio",), ("LeaderAndIsrResponse", 0): ("kio",),
    ("StopReplicaRequest", 0): ("kio",), ("StopReplicaResponse", 0): ("kio",),
    ("UpdateMetadataRequest", 0): ("kio",), ("UpdateMetadataRequest", 1): ("kio",),
    ("UpdateMetadataResponse", 0): ("kio",), ("UpdateMetadataResponse", 1): ("kio",),
    ("ControlledShutdownRequest", 0): ("kio",), ("ControlledShutdownRequest", 1): ("kio",),
    ("ControlledShutdownResponse", 0): ("kio",), ("ControlledShutdownResponse", 1): ("kio",),
    ("OffsetCommitRequest", 0): _ALL, ("OffsetCommitRequest", 1): _ALL, ("OffsetCommitRequest", 2): _ALL,
    ("OffsetCommitResponse", 0): _ALL, ("OffsetCommitResponse", 1): _ALL, ("OffsetCommitResponse", 2): _ALL,
    ("OffsetFetchRequest", 0): _ALL, ("OffsetFetchRequest", 1): _ALL,
    ("OffsetFetchResponse", 0): _ALL, ("OffsetFetchResponse", 1): _ALL,
    ("GroupCoordinatorRequest", 0): _ALL, ("GroupCoordinatorResponse", 0): _ALL,
    ("JoinGroupRequest", 0): _ALL, ("JoinGroupResponse", 0): _ALL,
    ("HeartbeatRequest", 0): _ALL, ("HeartbeatResponse", 0): _ALL,
    ("LeaveGroupRequest", 0): _ALL, ("LeaveGroupResponse", 0): _ALL,
    ("SyncGroupRequest", 0): _ALL, ("SyncGroupResponse", 0): _ALL,
    ("DescribeGroupsRequest", 0): _ALL, ("DescribeGroupsResponse", 0): _ALL,
    ("ListGroupsRequest", 0): _ALL, ("ListGroupsResponse", 0): _ALL,
    # RequestHeader v0 (no client id, ControlledShutdown v0 only) exists in kio alone.
    ("RequestHeader", 0): ("kio",), ("RequestHeader", 1): _ALL, ("ResponseHeader", 0): _ALL,
    ("ConsumerProtocolSubscription", 0): _ALL, ("ConsumerProtocolAssignment", 0): _ALL,
}

PEER_CASES = [(peer, SPECS[name], v) for (name, v), peers in COVERAGE.items() for peer in peers]
PEER_IDS = [f"{peer}-{spec.name}-v{v}" for peer, spec, v in PEER_CASES]


def test_every_message_version_is_covered():
    """Every (message, version) kproto has is checked against at least one peer."""
    uncovered = [(spec.name, v) for spec, v in CASES if not COVERAGE.get((spec.name, v))]
    assert not uncovered, f"no peer covers {uncovered}"
    stale = sorted(set(COVERAGE) - {(spec.name, v) for spec, v in CASES})
    assert not stale, f"COVERAGE names messages kproto does not have: {stale}"


def test_coverage_table_matches_peers():
    """The table neither claims a peer covers something it cannot, nor leaves out a peer that could."""
    for spec, v in CASES:
        claimed = set(COVERAGE.get((spec.name, v), ()))
        actual = {name for name, peer in PEERS.items() if peer.supports(spec, v)}
        assert claimed == actual, f"{spec.name} v{v}: table says {sorted(claimed)}, peers can do {sorted(actual)}"


@pytest.mark.parametrize("peer_name,spec,version", PEER_CASES, ids=PEER_IDS)
@PEER_EXAMPLES
@given(data=st.data())
def test_peer_agrees_both_directions(peer_name, spec, version, data):
    peer = PEERS[peer_name]
    cls = message_class(spec)
    drawn = data.draw(message_values(spec, version))
    msg = cls.from_dict(peer.constrain(spec, version, wire_values(spec, version, drawn)))
    value = wire_values(spec, version, msg)

    ours = msg.encode(version)
    # 1. the peer reads kproto's bytes (all of them) back to the same values
    assert peer.decode(spec, version, ours) == value
    # 2. the peer writes the same values to the same bytes
    theirs = peer.encode(spec, version, value)
    assert theirs == ours
    # 3. kproto reads the peer's bytes back to an equal message
    assert cls.decode(theirs, version) == msg


def test_constraints_leave_kproto_values_alone_where_the_peer_is_unconstrained():
    """Only kio constrains values, and only error codes and int64 timedelta fields."""
    assert type(PEERS["kp-old"]).constrain is Peer.constrain
    assert type(PEERS["kp-json"]).constrain is Peer.constrain
    spec = SPECS["OffsetCommitRequest"]
    value = {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
             "retention_time_ms": -(1 << 62), "topics": []}
    assert PEERS["kio"].constrain(spec, 2, value)["retention_time_ms"] == (-(1 << 62)) % (1 << 40)
    spec = SPECS["HeartbeatResponse"]
    assert PEERS["kio"].constrain(spec, 0, {"error_code": 31})["error_code"] == 31
    assert PEERS["kio"].constrain(spec, 0, {"error_code": 4242})["error_code"] in _KIO_ERROR_CODES


# --------------------------------------------------------------------------------------------------------
# Whole frames: size prefix + header + body.

def _msg(name: str, **fields: Any):
    return message_class(SPECS[name]).from_dict(fields)


FRAME_REQUESTS = [
    ("HeartbeatRequest", 0, dict(group_id="grp", generation_id=7, member_id="m-1")),
    ("MetadataRequest", 0, dict(topics=[{"name": "t1"}, {"name": "ümlaut"}])),
    ("FetchRequest", 1, dict(replica_id=-1, max_wait_ms=500, min_bytes=1, topics=[
        {"topic": "t", "partitions": [{"partition": p, "fetch_offset": 10 * p, "partition_max_bytes": 1 << 20}
                                      for p in range(3)]}])),
    ("OffsetCommitRequest", 2, dict(group_id="g", generation_id_or_member_epoch=3, member_id="m",
                                    retention_time_ms=-1, topics=[{"name": "t", "partitions": [
                                        {"partition_index": 0, "committed_offset": 42, "committed_metadata": None}]}])),
    ("ControlledShutdownRequest", 0, dict(broker_id=3)),
    ("ControlledShutdownRequest", 1, dict(broker_id=3)),
]


def _header_version(spec: MessageSpec, version: int) -> int:
    return kproto.APIS[spec.api_key].request_header_version(version)


def _peer_request_frame(peer: str, spec: MessageSpec, version: int, value: Dict_, corr: int,
                        client_id: Optional[str]) -> bytes:
    """The frame built by the peer's own header+body machinery where it has one."""
    if peer == "kp-old":
        cls = PEERS[peer]._cls(spec, version)
        obj = PEERS[peer].build(cls, value)
        obj.with_header(correlation_id=corr, client_id=client_id)
        return obj.encode(header=True, framed=True)
    if peer == "kp-json":
        cls = PEERS[peer]._cls(spec, version)
        obj = PEERS[peer]._build(cls._struct, version, value, {}, cls)
        obj.with_header(correlation_id=corr, client_id=client_id)
        return obj.encode(version=version, header=True, framed=True)
    # kio has no framing helper: the entity's own __header_schema__ (v0 for ControlledShutdown v0) + body.
    kio = PEERS["kio"]
    body_cls = kio._cls(spec, version)
    header_cls = body_cls.__header_schema__
    header = {"api_key": spec.api_key, "api_version": version, "correlation_id": corr}
    if any(f.name == "client_id" for f in dataclasses.fields(header_cls)):
        header["client_id"] = client_id
    buf = io.BytesIO()
    entity_writer(header_cls)(buf, kio._build(header_cls, header))
    entity_writer(body_cls)(buf, kio._build(body_cls, value))
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


FRAME_CASES = [(peer, name, v, value) for name, v, value in FRAME_REQUESTS for peer in COVERAGE[(name, v)]]


@pytest.mark.parametrize("peer,name,version,value", FRAME_CASES,
                         ids=[f"{p}-{n}-v{v}" for p, n, v, _ in FRAME_CASES])
@pytest.mark.parametrize("client_id", ["kproto-test", None])
def test_request_frames_match(peer, name, version, value, client_id):
    spec = SPECS[name]
    msg = _msg(name, **value)
    ours = kproto.encode_request(msg, version, correlation_id=0x01020304, client_id=client_id)
    theirs = _peer_request_frame(peer, spec, version, wire_values(spec, version, msg), 0x01020304, client_id)
    assert theirs == ours
    header, decoded = kproto.decode_request(theirs)
    assert (header.api_key, header.api_version, header.correlation_id) == (spec.api_key, version, 0x01020304)
    assert decoded == msg
    if _header_version(spec, version) == 0:
        # ControlledShutdown v0: header v0 has no client id at all, whatever the caller passed.
        assert header.client_id is None
        assert len(ours) == 4 + 8 + len(msg.encode(version))
    else:
        assert header.client_id == client_id


def test_controlled_shutdown_v0_frame_is_header_v0():
    """The Scala-only quirk, against kio's own header schema choice."""
    kio = PEERS["kio"]
    assert kio._cls(SPECS["ControlledShutdownRequest"], 0).__header_schema__ is kio._cls(SPECS["RequestHeader"], 0)
    assert kio._cls(SPECS["ControlledShutdownRequest"], 1).__header_schema__ is kio._cls(SPECS["RequestHeader"], 1)
    frame = kproto.encode_request(_msg("ControlledShutdownRequest", broker_id=9), 0, correlation_id=5,
                                  client_id="ignored")
    assert frame == b"\x00\x00\x00\x0c" + b"\x00\x07\x00\x00\x00\x00\x00\x05" + b"\x00\x00\x00\x09"


FRAME_RESPONSES = [
    ("HeartbeatResponse", 0, dict(error_code=27)),
    ("GroupCoordinatorResponse", 0, dict(error_code=0, node_id=1, host="broker-1", port=9092)),
    ("ControlledShutdownResponse", 0, dict(error_code=0, remaining_partitions=[
        {"topic_name": "t", "partition_index": 1}])),
]
RESPONSE_FRAME_CASES = [(peer, name, v, value) for name, v, value in FRAME_RESPONSES
                        for peer in COVERAGE[(name, v)]]


@pytest.mark.parametrize("peer,name,version,value", RESPONSE_FRAME_CASES,
                         ids=[f"{p}-{n}-v{v}" for p, n, v, _ in RESPONSE_FRAME_CASES])
def test_response_frames_match(peer, name, version, value):
    spec = SPECS[name]
    msg = _msg(name, **value)
    ours = kproto.encode_response(msg, version, correlation_id=77)
    if peer == "kp-old":
        cls = PEERS[peer]._cls(spec, version)
        obj = PEERS[peer].build(cls, wire_values(spec, version, msg))
        obj.with_header(correlation_id=77)
        theirs = obj.encode(header=True, framed=True)
        back = cls.decode(ours, header=True, framed=True)
        assert back.header.correlation_id == 77 and PEERS[peer].values(cls, back) == wire_values(spec, version, msg)
    elif peer == "kp-json":
        cls = PEERS[peer]._cls(spec, version)
        # Built with version= and encoded without it: ApiMessage.encode(version=...) runs the API_VERSION
        # setter, which assigns header.request_api_version -- an AttributeError on a ResponseHeader
        # (kafka-python 3.0.12 bug; requests are unaffected).
        obj = PEERS[peer]._build(cls._struct, version, wire_values(spec, version, msg), {}, cls,
                                 versioned=True)
        obj.with_header(correlation_id=77)
        theirs = obj.encode(header=True, framed=True)
        back = cls.decode(ours, version=version, header=True, framed=True)
        assert back.header.correlation_id == 77
        assert PEERS[peer]._unbuild(cls._struct, version, back, {}) == wire_values(spec, version, msg)
    else:
        kio = PEERS["kio"]
        body_cls = kio._cls(spec, version)
        buf = io.BytesIO()
        entity_writer(body_cls.__header_schema__)(buf, kio._build(body_cls.__header_schema__, {"correlation_id": 77}))
        entity_writer(body_cls)(buf, kio._build(body_cls, wire_values(spec, version, msg)))
        theirs = struct.pack(">i", len(buf.getvalue())) + buf.getvalue()
        header, size = entity_reader(body_cls.__header_schema__)(ours, 4)
        body, body_size = entity_reader(body_cls)(ours, 4 + size)
        assert header.correlation_id == 77 and 4 + size + body_size == len(ours)
        assert kio._unbuild(body) == wire_values(spec, version, msg)
    assert theirs == ours
    header, decoded = kproto.decode_response(theirs, spec.api_key, version)
    assert header.correlation_id == 77 and decoded == msg


@pytest.mark.parametrize("peer,name,version,value", [c for c in FRAME_CASES if c[0] != "kio"],
                         ids=[f"{p}-{n}-v{v}" for p, n, v, _ in FRAME_CASES if p != "kio"])
def test_peers_decode_kproto_request_frames(peer, name, version, value):
    """kafka-python parses kproto's whole request frame (size, header, body) with its own header reader."""
    spec = SPECS[name]
    msg = _msg(name, **value)
    frame = kproto.encode_request(msg, version, correlation_id=99, client_id="cid")
    cls = PEERS[peer]._cls(spec, version)
    if peer == "kp-old":
        back = cls.decode(frame, header=True, framed=True)
        assert (back.header.api_key, back.header.api_version, back.header.client_id) == (spec.api_key, version, "cid")
        assert PEERS[peer].values(cls, back) == wire_values(spec, version, msg)
    else:
        back = cls.decode(frame, version=version, header=True, framed=True)
        assert (back.header.request_api_key, back.header.request_api_version) == (spec.api_key, version)
        assert back.header.client_id == "cid" and back.header.correlation_id == 99
        assert PEERS[peer]._unbuild(cls._struct, version, back, {}) == wire_values(spec, version, msg)
