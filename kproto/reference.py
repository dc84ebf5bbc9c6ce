"""A second decoder, built with ``construct`` from the same schema model: the reference and the dissector.

It shares nothing with the generated codecs but the spec files: it interprets the model at run time with
construct's declarative parsers, so agreement between the two is evidence that the generator wrote what
the specs say.  It also knows where every field sits, which the hex dump uses to label each byte range.

Construct interprets the model on every call, so this is far slower than the generated codecs; it is
never on a hot path.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

import construct as c

from kproto.errors import DecodeError
from kproto.schema import FieldSpec, MessageSpec, StructSpec, load_specs
from kproto.schema.model import SchemaSet

__all__ = ["FieldRange", "reference_decode", "dissect", "schema", "message_spec"]

_INTS = {
    "int8": c.Int8sb,
    "int16": c.Int16sb,
    "uint16": c.Int16ub,
    "int32": c.Int32sb,
    "int64": c.Int64sb,
    "bool": c.Int8sb,
    "float64": c.Float64b,
}


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


#: A compact (KIP-482) length or count: an unsigned varint holding the value plus one (0: null).
_COMPACT = c.ExprAdapter(c.VarInt, lambda obj, ctx: obj - 1, lambda obj, ctx: obj + 1)


def _length(kind: str, compact: bool) -> c.Construct:
    if compact:
        return _COMPACT
    return c.Int16sb if kind == "string" else c.Int32sb


def _prefixed(length: Any, nullable: bool) -> c.Construct:
    return c.Struct(
        "length" / length,
        c.Check(c.this.length >= (-1 if nullable else 0)),
        "data" / c.If(c.this.length >= 0, c.Bytes(c.this.length)),
    )


def _field_con(f: FieldSpec, version: int, flexible: bool) -> c.Construct:
    t = f.type
    compact = f.compact_in(version, flexible)
    nullable = f.nullable_in(version)
    if t.is_array:
        inner = t.element
        assert inner is not None
        elem = (
            _struct_con(inner.struct, version, flexible) if inner.is_struct else _leaf_con(inner.kind, False, compact)
        )
        return c.Struct(
            "count" / (_COMPACT if compact else c.Int32sb),
            c.Check(c.this.count >= (-1 if nullable else 0)),
            "items" / c.If(c.this.count >= 0, c.Array(c.this.count, c.RawCopy(elem))),
        )
    if t.is_struct:
        body = _struct_con(t.struct, version, flexible)
        if not nullable:
            return body
        return c.Struct(
            "marker" / c.Int8sb,
            c.Check((c.this.marker == -1) | (c.this.marker == 1)),
            "value" / c.If(c.this.marker == 1, body),
        )
    return _leaf_con(t.kind, nullable, compact)


def _leaf_con(kind: str, nullable: bool, compact: bool) -> c.Construct:
    if kind in _INTS:
        return _INTS[kind]
    if kind == "uuid":
        return c.Bytes(16)
    return _prefixed(_length(kind, compact), nullable)


#: The tag section closing every struct of a flexible version: tagged fields as (tag, raw bytes).
_TAGS = c.PrefixedArray(c.VarInt, c.Struct("tag" / c.VarInt, "size" / c.VarInt, "data" / c.Bytes(c.this.size)))


@functools.lru_cache(maxsize=None)
def _cached_struct_con(struct_id: int, version: int, flexible: bool) -> c.Construct:
    struct = _STRUCTS[struct_id]
    fields = [f.attr / c.RawCopy(_field_con(f, version, flexible)) for f in struct.ordered_fields(version)]
    if flexible:
        fields.append("_tags" / c.RawCopy(_TAGS))
    return c.Struct(*fields)


_STRUCTS: Dict[int, StructSpec] = {}


def _struct_con(struct: Optional[StructSpec], version: int, flexible: bool) -> c.Construct:
    assert struct is not None
    _STRUCTS[id(struct)] = struct
    return _cached_struct_con(id(struct), version, flexible)


class _Walker:
    """Turns construct's parse tree into to_dict()-shaped values and labelled ranges."""

    def __init__(self, base: int, version: int, flexible: bool) -> None:
        self.base = base
        self.version = version
        self.flexible = flexible
        self.ranges: List[FieldRange] = []

    def struct(self, struct: StructSpec, parsed: Any, path: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        ordered = {f.attr for f in struct.ordered_fields(self.version)}
        tagged = {f.tag: f for f in struct.tagged_fields(self.version) if f.tag is not None} if self.flexible else {}
        values: Dict[str, Any] = {}
        for f in struct.fields:
            if f.attr in ordered:
                values[f.attr] = self.field(f, parsed[f.attr], f"{path}.{f.attr}" if path else f.attr)
        if self.flexible:
            refused = {f.tag for f in struct.fields if f.tag is not None and f.tag not in tagged}
            values.update(self.tags(parsed["_tags"], tagged, path, refused))
        for f in struct.fields:
            out[f.attr] = values[f.attr] if f.attr in values else _default(f)
        return out

    def tags(self, raw: Any, tagged: Dict[int, FieldSpec], path: str, refused: Set[int]) -> Dict[str, Any]:
        """Known tagged fields decoded from their bytes (each parsed on its own, then placed).

        Every byte of the section gets its own label: the entry count, each entry's tag and size
        varints, then the field's value (known tags) or the raw bytes (tags this version does not know).
        """
        start = self.base + raw.offset1
        section = bytes(raw.data)
        prefix = f"{path}." if path else ""
        count, pos = _varint(section, 0)
        self.ranges.append(FieldRange(f"{prefix}_tagged_fields", "count", start, start + pos, count))
        out: Dict[str, Any] = {}
        last = -1
        for entry in raw.value:
            if entry.tag <= last:
                raise DecodeError(f"tag {entry.tag} out of order or repeated", start, path)
            last = entry.tag
            if entry.tag in refused:  # a field of other versions: refused, as kproto.wire refuses it
                raise DecodeError(f"tag {entry.tag} is a field this version does not have", start, path)
            entry_start = pos
            _, pos = _varint(section, pos)
            _, pos = _varint(section, pos)
            data_start, pos = pos, pos + entry.size
            f = tagged.get(entry.tag)
            name = f.attr if f is not None else f"_tagged_fields[{entry.tag}]"
            self.ranges.append(
                FieldRange(
                    f"{prefix}{name}",
                    "tag",
                    start + entry_start,
                    start + data_start,
                    f"tag {entry.tag}, {entry.size} bytes",
                )
            )
            if f is None:
                if entry.size:
                    self.ranges.append(
                        FieldRange(
                            f"{prefix}{name}",
                            "raw",
                            start + data_start,
                            start + pos,
                            f"tagged field {entry.tag} unknown to this version",
                        )
                    )
                continue
            con = c.RawCopy(_field_con(f, self.version, True))
            try:
                parsed = con.parse(entry.data)
            except c.ConstructError as exc:
                raise DecodeError(f"reference decoder: tagged field {entry.tag}: {exc}", start, path) from None
            if parsed.offset2 != len(entry.data):
                raise DecodeError(f"tagged field {entry.tag} has trailing bytes", start, path)
            saved, self.base = self.base, start + data_start  # the field was parsed from its own bytes
            try:
                out[f.attr] = self.field(f, parsed, f"{prefix}{f.attr}")
            finally:
                self.base = saved
        return out

    def field(self, f: FieldSpec, raw: Any, path: str) -> Any:
        start = self.base + raw.offset1
        t = f.type
        if t.is_array:
            inner = t.element
            assert inner is not None
            items_raw = raw.value["items"]
            # An int32 count, or a compact varint one (then as wide as the varint): up to the first item.
            count_end = self.base + (items_raw[0].offset1 if items_raw else raw.offset2)
            self.ranges.append(
                FieldRange(path, "count", start, count_end, None if items_raw is None else len(items_raw))
            )
            if items_raw is None:
                return None
            items = []
            for i, item in enumerate(items_raw):
                ipath = f"{path}[{i}]"
                if inner.is_struct:
                    assert inner.struct is not None
                    items.append(self.struct(inner.struct, item.value, ipath))
                else:
                    items.append(self.leaf(inner.kind, item, ipath))
            return items
        if t.is_struct:
            assert t.struct is not None
            value = raw.value
            if f.nullable_in(self.version):
                if value["value"] is None:
                    return None
                value = value["value"]
            return self.struct(t.struct, value, path)
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
        if kind == "uuid":
            value = uuid.UUID(bytes=bytes(value))
            self.ranges.append(FieldRange(path, "value", start, end, value))
            return value
        data = value.data
        if data is None:
            self.ranges.append(FieldRange(path, "length", start, end, None))
            return None
        width = (end - start) - len(data)
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


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    """An unsigned varint at ``pos`` (the section already parsed, so it is complete): (value, next position)."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _default(f: FieldSpec) -> Any:
    if f.type.is_array:
        return None if f.default is None else []
    if f.type.is_struct:
        assert f.type.struct is not None
        return (
            None
            if f.default is None and not f.nullable_versions.empty and f.nullable_versions == f.versions
            else {g.attr: _default(g) for g in f.type.struct.fields}
        )
    return f.default


def _parse(spec: MessageSpec, version: int, data: bytes, base: int) -> Tuple[Dict[str, Any], List[FieldRange], int]:
    if version not in spec.valid_versions:
        raise DecodeError(f"{spec.name} has no version {version}", base)
    flexible = spec.flexible_in(version)
    con = _struct_con(spec.root, version, flexible)
    try:
        parsed = con.parse(data)
        consumed = _consumed(parsed)
    except c.ConstructError as exc:
        raise DecodeError(f"reference decoder: {exc}", None) from None
    walker = _Walker(base, version, flexible)
    value = walker.struct(spec.root, parsed, "")
    return value, walker.ranges, consumed


def _consumed(parsed: Any) -> int:
    ends = [v.offset2 for k, v in parsed.items() if (k == "_tags" or not k.startswith("_")) and hasattr(v, "offset2")]
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
