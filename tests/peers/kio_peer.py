"""kio (``kio.schema.*`` entities, ``kio.serial`` reader/writer) as a peer, whichever kio is importable.

The same adapter serves kio 0.6.x in the test process and kio 0.5.0 in its worker process (see
``kio05.py``: the two cannot share an import path, and 0.5.0 is the last to carry the versions Kafka 4.0
removed).  Everything crossing the adapter is in kproto's wire-value shape; a message is named by
``Ident`` = (kproto class name, kind, api key) so the worker needs no kproto objects.

kio's own representations, converted both ways: error codes are an ``ErrorCode`` enum; millisecond
durations and timestamps are ``timedelta``/``datetime`` (the field loses ``_ms`` from its name); arrays are
tuples; a zero uuid reads back as None (kproto keeps the zero uuid).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import re
import uuid
from typing import Any, Dict, Optional, Tuple

from kio.index import KioIndexError, load_entity_schema, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.static.constants import EntityType

from . import Peer, Shape, match_name, shape_of

Ident = Tuple[str, str, Optional[int]]  # ("FetchRequest", "request", 1), ("RequestHeader", "header", None)

_MS = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ERROR_CODES = sorted(int(code) for code in ErrorCode)
# kio converts int64 duration/timestamp fields through timedelta/datetime (microsecond floats inside):
# exact while the value stays well inside a double's mantissa and datetime's range; it rejects
# negative timestamps.  kproto values outside [0, 2**40) are folded into it for kio (see constrain).
_I64_MS_LIMIT = 1 << 40
_ZERO_UUID = uuid.UUID(int=0)


def _truncates_timestamps() -> bool:
    """kio 0.5.0 reads int64 timestamps to whole seconds (its TZAware.truncate); 0.6 keeps milliseconds."""
    from kio.serial.readers import read_datetime_i64

    return (read_datetime_i64(b"\x00" * 7 + b"\x01", 0)[0] - _EPOCH) // _MS == 0


_TRUNCATES_TIMESTAMPS = _truncates_timestamps()


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def entity(ident: Ident, version: int) -> Optional[type]:
    """kio's entity class for the message, or None when this kio does not have that version."""
    name, kind, api_key = ident
    try:
        if kind == "header":
            return load_entity_schema(_snake(name), version, EntityType.header)
        if kind == "data":
            return load_entity_schema(_snake(name), version, EntityType.data)
        assert api_key is not None
        loader = load_request_schema if kind == "request" else load_response_schema
        return loader(api_key, version)
    except (KioIndexError, ImportError):
        return None


def _fields(cls: type, shape: Shape):
    """(dataclass field, kproto name, kafka_type, field class) for every field of a kio entity; asserts
    that kio's field set and kproto's are the same."""
    rows = []
    for f in dataclasses.fields(cls):
        rows.append((f, match_name(f.name, shape), f.metadata.get("kafka_type"), classify_field(f)))
    names = sorted(r[1] for r in rows)
    assert names == sorted(shape), f"{cls.__qualname__}: kio has {names}, kproto has {sorted(shape)}"
    return rows


def _optional(f: dataclasses.Field) -> bool:
    from kio.serial._introspect import is_optional

    return is_optional(f)


def build(cls: type, value: Dict[str, Any], shape: Shape) -> Any:
    """A kio ``cls`` instance holding the wire value ``value``."""
    kwargs = {}
    for f, name, ktype, fc in _fields(cls, shape):
        v = value[name]
        if v is None:
            pass
        elif isinstance(fc, EntityTupleField):
            v = tuple(build(fc.type_, item, shape[name]) for item in v)
        elif isinstance(fc, EntityField):
            v = build(fc.type_, v, shape[name])
        elif ktype == "error_code":
            v = ErrorCode(v)
        elif ktype in ("timedelta_i32", "timedelta_i64"):
            v = datetime.timedelta(milliseconds=v)
        elif ktype == "datetime_i64":
            # kio reads -1 as None where the field is nullable in its model (Kafka's "no timestamp")
            v = None if v == -1 and _optional(f) else _EPOCH + datetime.timedelta(milliseconds=v)
        elif ktype == "uuid" and v == _ZERO_UUID and "tag" in f.metadata:
            # kio writes a tagged zero uuid (its default is None); Kafka's writer omits it as the default
            v = None
        elif isinstance(v, list):
            v = tuple(v)
        kwargs[f.name] = v
    return cls(**kwargs)


def unbuild(obj: Any, shape: Shape) -> Dict[str, Any]:
    """The inverse of :func:`build`."""
    out = {}
    for f, name, ktype, fc in _fields(type(obj), shape):
        v = getattr(obj, f.name)
        if ktype == "uuid" and v is None and not fc.is_array:
            v = _ZERO_UUID
        elif ktype == "datetime_i64" and v is None and not fc.is_array:
            v = -1
        elif v is None:
            pass
        elif isinstance(fc, EntityTupleField):
            v = [unbuild(item, shape[name]) for item in v]
        elif isinstance(fc, EntityField):
            v = unbuild(v, shape[name])
        elif ktype == "error_code":
            v = int(v)
        elif ktype in ("timedelta_i32", "timedelta_i64"):
            v = v // _MS
        elif ktype == "datetime_i64":
            v = (v - _EPOCH) // _MS
        elif ktype == "float64":
            v = float(v)
        elif isinstance(v, tuple):
            v = [
                _ZERO_UUID
                if x is None and ktype == "uuid"
                else bytes(x)
                if isinstance(x, (bytes, bytearray, memoryview))
                else x
                for x in v
            ]
        elif isinstance(v, (bytes, bytearray, memoryview)):
            v = bytes(v)
        out[name] = v
    return out


def supports(ident: Ident, version: int) -> bool:
    return entity(ident, version) is not None


def flexible(ident: Ident, version: int) -> bool:
    cls = entity(ident, version)
    return bool(cls is not None and cls.__flexible__)


def encode(ident: Ident, version: int, value: Dict[str, Any], shape: Shape) -> bytes:
    cls = entity(ident, version)
    assert cls is not None
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, value, shape))
    return buf.getvalue()


def decode(ident: Ident, version: int, data: bytes, shape: Shape) -> Dict[str, Any]:
    cls = entity(ident, version)
    assert cls is not None
    obj, size = entity_reader(cls)(data, 0)
    assert size == len(data), f"kio {cls.__qualname__} v{version} consumed {size} of {len(data)} bytes"
    return unbuild(obj, shape)


def constrain(ident: Ident, version: int, value: Dict[str, Any], shape: Shape) -> Dict[str, Any]:
    """Map a wire value into what kio can represent; the only changes are:

    * error codes kio's ``ErrorCode`` enum lacks (it rejects them on build and on read) are folded onto
      known codes;
    * int64 durations/timestamps outside [0, 2**40) ms are folded into it (see ``_I64_MS_LIMIT``);
    * with kio 0.5.0, timestamps are whole seconds (it drops the milliseconds when reading).
    """
    cls = entity(ident, version)
    assert cls is not None

    def fix(cls: type, value: Dict[str, Any], shape: Shape) -> Dict[str, Any]:
        out = dict(value)
        for _, name, ktype, fc in _fields(cls, shape):
            v = value[name]
            if v is None:
                continue
            if isinstance(fc, EntityTupleField):
                out[name] = [fix(fc.type_, item, shape[name]) for item in v]
            elif isinstance(fc, EntityField):
                out[name] = fix(fc.type_, v, shape[name])
            elif ktype == "error_code" and v not in _ERROR_CODES:
                out[name] = _ERROR_CODES[v % len(_ERROR_CODES)]
            elif ktype in ("timedelta_i64", "datetime_i64") and not 0 <= v < _I64_MS_LIMIT:
                out[name] = v % _I64_MS_LIMIT
            if ktype == "datetime_i64" and _TRUNCATES_TIMESTAMPS:
                out[name] -= out[name] % 1000
        return out

    return fix(cls, value, shape)


def ident_of(spec: Any) -> Ident:
    return (spec.name, spec.kind, spec.api_key)


class Kio(Peer):
    """kio 0.6.x in this process: every message it generates (inter-broker, KRaft, share groups ...), in
    the versions Kafka 4.x still has."""

    name = "kio"

    def supports(self, spec, version):
        return supports(ident_of(spec), version)

    def encode(self, spec, version, value):
        return encode(ident_of(spec), version, value, shape_of(spec.root, version))

    def decode(self, spec, version, data):
        return decode(ident_of(spec), version, data, shape_of(spec.root, version))

    def constrain(self, spec, version, value):
        return constrain(ident_of(spec), version, value, shape_of(spec.root, version))

    def header_version(self, spec, version):
        return header_version(ident_of(spec), version)


def header_version(ident: Ident, version: int) -> int:
    """The header version kio pairs with a message version (its entity's ``__header_schema__``)."""
    cls = entity(ident, version)
    assert cls is not None
    return int(cls.__header_schema__.__version__)
