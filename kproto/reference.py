"""A second decoder, built with ``construct`` from the same schema model: the reference and the dissector.

It shares nothing with the generated codecs but the spec files: it interprets the model at run time with
construct's declarative parsers, so agreement between the two is evidence that the generator wrote what
the specs say.  It also knows where every field sits, which the hex dump uses to label each byte range.

Construct interprets the model on every call, so this is far slower than the generated codecs; it is
never on a hot path.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import construct as c

from kproto.errors import DecodeError
from kproto.schema import FieldSpec, MessageSpec, StructSpec, load_specs
from kproto.schema.model import SchemaSet

__all__ = ["FieldRange", "reference_decode", "dissect", "schema", "message_spec"]

_INTS = {"int8": c.Int8sb, "int16": c.Int16sb, "int32": c.Int32sb, "int64": c.Int64sb, "bool": c.Int8sb}


@dataclass(frozen=True)
class FieldRange:
    """One labelled byte range: ``path`` (``topics[0].name``), ``part`` ("length", "count", "value"),
    absolute ``start``/``end`` offsets, and the decoded ``value`` for leaves (None for containers)."""

    path: str
    part: str
    start: int
    end: int
    value: Any = None


@functools.lru_cache(maxsize=1)
def schema() -> SchemaSet:
    """The loaded spec files (cached)."""
    return load_specs()


def message_spec(name: str) -> MessageSpec:
    """The spec of a message, header or embedded schema by class name (``"ProduceRequest"``)."""
    s = schema()
    for api in s.apis.values():
        for m in (api.request, api.response):
            if m.name == name:
                return m
    if name in s.headers:
        return s.headers[name]
    if name in s.data:
        return s.data[name]
    raise KeyError(name)


def _prefixed(length: Any, nullable: bool) -> c.Construct:
    return c.Struct(
        "length" / length,
        c.Check(c.this.length >= (-1 if nullable else 0)),
        "data" / c.If(c.this.length >= 0, c.Bytes(c.this.length)),
    )


def _field_con(f: FieldSpec, version: int) -> c.Construct:
    t = f.type
    if t.is_array:
        inner = t.element
        assert inner is not None
        elem = _struct_con(inner.struct, version) if inner.is_struct else _leaf_con(inner.kind, False)
        return c.PrefixedArray(c.Int32sb, c.RawCopy(elem))
    if t.is_struct:
        return _struct_con(t.struct, version)
    return _leaf_con(t.kind, f.nullable_in(version))


def _leaf_con(kind: str, nullable: bool) -> c.Construct:
    if kind in _INTS:
        return _INTS[kind]
    if kind == "string":
        return _prefixed(c.Int16sb, nullable)
    return _prefixed(c.Int32sb, nullable)


@functools.lru_cache(maxsize=None)
def _cached_struct_con(struct_id: int, version: int) -> c.Construct:
    struct = _STRUCTS[struct_id]
    return c.Struct(*[f.attr / c.RawCopy(_field_con(f, version)) for f in struct.fields_for(version)])


_STRUCTS: Dict[int, StructSpec] = {}


def _struct_con(struct: Optional[StructSpec], version: int) -> c.Construct:
    assert struct is not None
    _STRUCTS[id(struct)] = struct
    return _cached_struct_con(id(struct), version)


class _Walker:
    """Turns construct's parse tree into to_dict()-shaped values and labelled ranges."""

    def __init__(self, base: int, version: int) -> None:
        self.base = base
        self.version = version
        self.ranges: List[FieldRange] = []

    def struct(self, struct: StructSpec, parsed: Any, path: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        present = {f.attr for f in struct.fields_for(self.version)}
        for f in struct.fields:
            if f.attr not in present:
                out[f.attr] = _default(f)
                continue
            raw = parsed[f.attr]
            out[f.attr] = self.field(f, raw, f"{path}.{f.attr}" if path else f.attr)
        return out

    def field(self, f: FieldSpec, raw: Any, path: str) -> Any:
        start = self.base + raw.offset1
        t = f.type
        if t.is_array:
            inner = t.element
            assert inner is not None
            self.ranges.append(FieldRange(path, "count", start, start + 4, len(raw.value)))
            items = []
            for i, item in enumerate(raw.value):
                ipath = f"{path}[{i}]"
                if inner.is_struct:
                    assert inner.struct is not None
                    items.append(self.struct(inner.struct, item.value, ipath))
                else:
                    items.append(self.leaf(inner.kind, item, ipath))
            return items
        return self.leaf(t.kind, raw, path)

    def leaf(self, kind: str, raw: Any, path: str) -> Any:
        start, end = self.base + raw.offset1, self.base + raw.offset2
        value = raw.value
        if kind in _INTS:
            if kind == "bool":
                if value not in (0, 1):
                    raise DecodeError(f"boolean byte {value} at offset {start} is neither 0 nor 1", start, path)
                value = value == 1
            self.ranges.append(FieldRange(path, "value", start, end, value))
            return value
        width = 2 if kind == "string" else 4
        data = value.data
        if data is None:
            self.ranges.append(FieldRange(path, "length", start, end, None))
            return None
        self.ranges.append(FieldRange(path, "length", start, start + width, len(data)))
        if kind == "string":
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DecodeError(f"invalid UTF-8 at offset {start + width + exc.start}", start + width, path)
            self.ranges.append(FieldRange(path, "value", start + width, end, text))
            return text
        self.ranges.append(FieldRange(path, "value", start + width, end, bytes(data)))
        return bytes(data)


def _default(f: FieldSpec) -> Any:
    return [] if f.type.is_array else f.default


def _parse(spec: MessageSpec, version: int, data: bytes, base: int) -> Tuple[Dict[str, Any], List[FieldRange], int]:
    if version not in spec.valid_versions:
        raise DecodeError(f"{spec.name} has no version {version}", base)
    con = _struct_con(spec.root, version)
    try:
        parsed = con.parse(data)
        consumed = _consumed(parsed)
    except c.ConstructError as exc:
        raise DecodeError(f"reference decoder: {exc}", None) from None
    walker = _Walker(base, version)
    value = walker.struct(spec.root, parsed, "")
    return value, walker.ranges, consumed


def _consumed(parsed: Any) -> int:
    ends = [v.offset2 for k, v in parsed.items() if not k.startswith("_") and hasattr(v, "offset2")]
    return max(ends) if ends else 0


def reference_decode(spec: MessageSpec, version: int, data: bytes) -> Dict[str, Any]:
    """Decode a body with construct; the result has the shape of the generated class's ``to_dict()``
    (record sets as raw bytes). Trailing bytes are an error, as in the generated codecs."""
    value, _, consumed = _parse(spec, version, bytes(data), 0)
    if consumed != len(data):
        raise DecodeError(f"{len(data) - consumed} trailing bytes at offset {consumed}", consumed)
    return value


def dissect(spec: MessageSpec, version: int, data: bytes, base: int = 0) -> Tuple[Dict[str, Any], List[FieldRange]]:
    """Decode ``data`` and label every byte range; offsets are ``base`` + position in ``data``."""
    value, ranges, consumed = _parse(spec, version, bytes(data), base)
    if consumed != len(data):
        raise DecodeError(f"{len(data) - consumed} trailing bytes at offset {base + consumed}", base + consumed)
    return value, ranges
