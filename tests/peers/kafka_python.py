"""kafka-python 3.x as two peers: its hand-declared 0.8/0.9 classes (``kafka.protocol.old``) and its
JSON-driven classes (``kafka.protocol.{producer,consumer,metadata,admin}``, Kafka's own message JSON with
every version from 0, flexible ones included, compiled to ``exec`` codecs).

kafka-python's representations, converted both ways: ``authorized_operations`` fields are sets of bit
positions ({31}, i.e. INT32_MIN, reads as None); a zero uuid reads as None; a tagged uuid or tagged struct
defaults to None where Kafka's default is the zero uuid / the all-defaults struct, so the adapter hands
it None for Kafka's default (it would otherwise write a tag Kafka's writer omits).
"""

from __future__ import annotations

import io
import uuid
import warnings
from typing import Any, List, Optional

from . import Peer, Shape, Value, api_and_kind, match_name, shape_of

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import kafka.protocol.admin as _kp_admin
    import kafka.protocol.consumer as _kp_consumer
    import kafka.protocol.metadata as _kp_metadata
    import kafka.protocol.producer as _kp_producer
    import kafka.protocol.sasl as _kp_sasl
    from kafka.protocol import api_header as _kp_api_header
    from kafka.protocol.old import api as _old_api
    from kafka.protocol.old import types as _old_types

_ZERO_UUID = uuid.UUID(int=0)
_INT32_MIN = -(1 << 31)


def _bytes(value: Any) -> Any:
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else value


# --------------------------------------------------------------------------------------------------------
# kafka.protocol.old: the hand-declared classes of kafka-python 2.x

_OLD_MODULES = {
    "Produce": "produce",
    "Fetch": "fetch",
    "ListOffsets": "list_offsets",
    "Metadata": "metadata",
    "OffsetCommit": "commit",
    "OffsetFetch": "commit",
    "FindCoordinator": "find_coordinator",
    "GroupCoordinator": "find_coordinator",
    "JoinGroup": "group",
    "Heartbeat": "group",
    "LeaveGroup": "group",
    "SyncGroup": "group",
    "DescribeGroups": "admin",
    "ListGroups": "admin",
}
# kafka-python's consumer-protocol structs carry the int16 schema version as their first field
# ("version"); kproto's ConsumerProtocol* messages are the body after that prefix.
_OLD_DATA = {
    "ConsumerProtocolSubscription": "ConsumerProtocolMemberMetadata_v0",
    "ConsumerProtocolAssignment": "ConsumerProtocolMemberAssignment_v0",
}
# Where Kafka's JSON (and kproto) has an array of a struct with one field (MetadataRequest's topics: [{name}]),
# kafka-python may declare an array of that field's type: the same bytes in another shape, which the
# adapter unwraps and rewraps (_one_field).


def _is_old_bitfield(ftype: Any) -> bool:
    return getattr(ftype, "__name__", type(ftype).__name__) == "BitField"


def _bits(value: int) -> Optional[set]:
    """kafka-python's authorized-operations set for an int32 (INT32_MIN, "not requested", is None)."""
    return None if value == _INT32_MIN else {b for b in range(32) if (value >> b) & 1}


def _int32(bits: Optional[set]) -> int:
    return _INT32_MIN if bits is None else sum(1 << b for b in bits) - ((1 << 32) if 31 in bits else 0)


def _one_field(ftype: Any, sub: Any) -> Optional[str]:
    """The single field's name when kafka-python has a scalar array where kproto has one-field structs."""
    if (
        isinstance(ftype, _old_types.Array)
        and not isinstance(ftype.array_of, _old_types.Schema)
        and isinstance(sub, dict)
        and len(sub) == 1
    ):
        return next(iter(sub))
    return None


class KafkaPythonOld(Peer):
    name = "kp-old"

    def cls(self, spec: Any, version: int) -> Optional[type]:
        import importlib

        api, kind = api_and_kind(spec)
        if kind == "header":
            # kafka-python's old RequestHeader always writes client_id: it is header v1 only.
            if spec.name == "RequestHeader":
                return _old_api.RequestHeader if version == 1 else None
            return _old_api.ResponseHeader if version == 0 else None
        if kind == "data":
            if spec.name not in _OLD_DATA or version != 0:
                return None
            return getattr(importlib.import_module("kafka.protocol.old.consumer_protocol"), _OLD_DATA[spec.name])
        module = _OLD_MODULES.get(api)
        if module is None:
            return None
        peer_api = "FindCoordinator" if api == "GroupCoordinator" else api
        mod = importlib.import_module(f"kafka.protocol.old.{module}")
        return getattr(mod, f"{peer_api}{kind.title()}_v{version}", None)

    def supports(self, spec, version):
        return self.cls(spec, version) is not None

    @staticmethod
    def _to_tuple(schema: Any, value: Value, shape: Shape) -> List[Any]:
        names = [match_name(n, shape) for n in schema.names]
        assert sorted(names) == sorted(value), (schema.names, sorted(value))
        out = []
        for name, ftype in zip(names, schema.fields):
            v = value[name]
            if isinstance(ftype, _old_types.Array) and isinstance(ftype.array_of, _old_types.Schema):
                v = (
                    None
                    if v is None
                    else [tuple(KafkaPythonOld._to_tuple(ftype.array_of, item, shape[name])) for item in v]
                )
            elif _one_field(ftype, shape[name]) and v is not None:
                v = [item[_one_field(ftype, shape[name])] for item in v]
            elif _is_old_bitfield(ftype):
                v = _bits(v)
            out.append(v)
        return out

    @staticmethod
    def _to_dict(schema: Any, values: Any, shape: Shape) -> Value:
        out = {}
        for i, (pname, ftype) in enumerate(zip(schema.names, schema.fields)):
            name = match_name(pname, shape)
            v = getattr(values, pname) if not isinstance(values, tuple) else values[i]
            if isinstance(ftype, _old_types.Array) and isinstance(ftype.array_of, _old_types.Schema):
                v = None if v is None else [KafkaPythonOld._to_dict(ftype.array_of, item, shape[name]) for item in v]
            elif _one_field(ftype, shape[name]) and v is not None:
                v = [{_one_field(ftype, shape[name]): item} for item in v]
            elif _is_old_bitfield(ftype):
                v = _int32(v)
            out[name] = _bytes(v)
        return out

    def build(self, cls: type, value: Value, shape: Shape) -> Any:
        """An instance of kafka-python class ``cls`` holding ``value``."""
        return cls(*self._to_tuple(cls.SCHEMA, value, shape))

    def values(self, cls: type, obj: Any, shape: Shape) -> Value:
        """The inverse of :meth:`build`."""
        return self._to_dict(cls.SCHEMA, obj, shape)

    def encode(self, spec, version, value):
        cls = self.cls(spec, version)
        shape = shape_of(spec.root, version)
        if spec.name in _OLD_DATA:
            data = self.build(cls, {"version": 0, **value}, {"version": None, **shape}).encode()
            assert data[:2] == b"\x00\x00"
            return data[2:]
        return self.build(cls, value, shape).encode()

    def decode(self, spec, version, data):
        cls = self.cls(spec, version)
        shape = shape_of(spec.root, version)
        if spec.name in _OLD_DATA:
            data = b"\x00\x00" + data
            shape = {"version": None, **shape}
        buf = io.BytesIO(data)
        obj = cls.decode(buf)
        assert buf.tell() == len(data), f"{cls.__name__} consumed {buf.tell()} of {len(data)} bytes"
        out = self.values(cls, obj, shape)
        if spec.name in _OLD_DATA:
            assert out.pop("version") == 0
        return out


# --------------------------------------------------------------------------------------------------------
# kafka-python 3.x JSON-driven classes

_JSON_MODULES = (_kp_producer, _kp_consumer, _kp_metadata, _kp_admin, _kp_sasl)


def _is_bitfield(f: Any) -> bool:
    return getattr(getattr(f, "_type", None), "__name__", "") == "BitField"


def _is_uuid(f: Any) -> bool:
    return getattr(getattr(f, "_type", None), "__name__", "") == "UUID"


class KafkaPythonJson(Peer):
    name = "kp-json"

    def cls(self, spec: Any, version: int) -> Optional[type]:
        api, kind = api_and_kind(spec)
        if kind == "header":
            cls = getattr(_kp_api_header, spec.name)
            # A header class writes exactly two versions: its lowest and its first flexible one.
            return cls if version in (cls._valid_versions[0], cls._flexible_versions[0]) else None
        name = spec.name if kind == "data" else ("FindCoordinator" if api == "GroupCoordinator" else api) + kind.title()
        for mod in _JSON_MODULES:
            cls = getattr(mod, name, None)
            if cls is not None:
                break
        else:
            return None
        if not cls.min_version <= version <= cls.max_version:
            return None
        return cls

    def supports(self, spec, version):
        return self.cls(spec, version) is not None

    @staticmethod
    def _fields(sf: Any, version: int, shape: Shape):
        fields = list(sf.untagged_fields(version)) + list(sf.tagged_fields(version)._fields)
        rows = [(f, match_name(f.name, shape), f.tagged_field_q(version)) for f in fields]
        names = sorted(r[1] for r in rows)
        assert names == sorted(shape), f"{sf.name} v{version}: kafka-python has {names}, kproto {sorted(shape)}"
        return rows

    @classmethod
    def _default_struct(cls, sf: Any, version: int, shape: Shape) -> Value:
        """Kafka's default value of a struct (every field at its default), in wire-value shape."""
        out = {}
        for f, name, _ in cls._fields(sf, version, shape):
            if f.is_struct():
                out[name] = cls._default_struct(f, version, shape[name])
            elif f.is_array():
                out[name] = []
            elif _is_uuid(f):
                out[name] = _ZERO_UUID
            elif _is_bitfield(f):
                out[name] = _INT32_MIN
            else:
                out[name] = _bytes(f.default)
        return out

    def build(self, sf: Any, version: int, value: Value, shape: Shape, data_class: Any, versioned: bool = False) -> Any:
        """An instance of ``data_class`` (a kafka-python data container) holding ``value``; ``versioned``
        also passes ``version=`` to the constructor."""
        kwargs = {}
        for f, name, tagged in self._fields(sf, version, shape):
            v = value[name]
            if v is None:
                pass
            elif f.is_struct_array():
                v = [self.build(f.array_of, version, item, shape[name], f.array_of.data_class) for item in v]
            elif f.is_struct():
                if tagged and v == self._default_struct(f, version, shape[name]):
                    v = None
                else:
                    v = self.build(f, version, v, shape[name], f.data_class)
            elif _is_bitfield(f):
                v = _bits(v)
            elif _is_uuid(f) and tagged and v == _ZERO_UUID:
                v = None
            kwargs[f.name] = v
        if versioned:
            kwargs["version"] = version
        return data_class(**kwargs)

    def unbuild(self, sf: Any, version: int, obj: Any, shape: Shape) -> Value:
        out = {}
        for f, name, tagged in self._fields(sf, version, shape):
            v = getattr(obj, f.name, None)
            if f.is_struct_array():
                v = None if v is None else [self.unbuild(f.array_of, version, item, shape[name]) for item in v]
            elif f.is_struct():
                if v is None:
                    v = self._default_struct(f, version, shape[name]) if tagged else None
                else:
                    v = self.unbuild(f, version, v, shape[name])
            elif _is_bitfield(f):
                v = _int32(v)
            elif _is_uuid(f):
                v = _ZERO_UUID if v is None else v
            elif isinstance(v, list):
                v = [_bytes(x) for x in v]
            out[name] = _bytes(v)
        return out

    def encode(self, spec, version, value):
        cls = self.cls(spec, version)
        shape = shape_of(spec.root, version)
        kind = api_and_kind(spec)[1]
        if kind == "header":
            obj = self.build(cls._struct, version, value, shape, cls)
            return bytes(obj.encode(flexible=version == cls._flexible_versions[0]))
        obj = self.build(cls._struct, version, value, shape, cls)
        if kind == "data":
            return bytes(obj.encode(version=version, header=False))  # the int16 version prefix is not kproto's
        return bytes(obj.encode(version=version))

    def decode(self, spec, version, data):
        cls = self.cls(spec, version)
        kind = api_and_kind(spec)[1]
        shape = shape_of(spec.root, version)
        if kind in ("header", "data"):
            # The reference (BytesIO) path: header/data classes have no compiled decoder entry point.
            buf = io.BytesIO(data)
            if kind == "header":
                obj = cls.decode(buf, flexible=version == cls._flexible_versions[0])
            else:
                obj = cls.decode(buf, version=version, header=False)
            assert buf.tell() == len(data), f"{cls.__name__} consumed {buf.tell()} of {len(data)} bytes"
        else:
            # The class's own compiled decoder, asked for its end position (ApiMessage.decode drops it, and
            # ApiVersionsResponse.decode would switch to v0 for a nonzero error code).
            flexible = bool(cls.flexible_version_q(version))
            decoder = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls[None])
            obj, end = decoder(memoryview(data), 0)
            assert end == len(data), f"{cls.__name__} v{version} consumed {end} of {len(data)} bytes"
        return self.unbuild(cls._struct, version, obj, shape)
