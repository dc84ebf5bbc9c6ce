"""Hypothesis strategies for every generated message, derived from the schema model.

``message_values(spec, version)`` draws a value for every field the version carries (fields the version
lacks keep their defaults), so ``encode(version)`` of the result never needs to drop anything.
``full_value(spec, version)`` is the one deterministic value with every optional part present: each
array holds two elements, each nullable field and each nullable struct is set, and each tagged field
differs from its default (so it is written).  Values are in ``to_dict()`` shape.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, List, Tuple, Type

from hypothesis import strategies as st

import kproto.messages as messages
from kproto.reference import schema
from kproto.schema import FieldSpec, MessageSpec, StructSpec

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UNSIGNED_BITS = {"uint16": 16, "uint32": 32}


def all_message_specs() -> List[MessageSpec]:
    s = schema()
    return (
        s.messages() + sorted(s.headers.values(), key=lambda m: m.name) + sorted(s.data.values(), key=lambda m: m.name)
    )


def message_class(spec: MessageSpec) -> Type[messages.Message]:
    return getattr(messages, spec.name)


def spec_versions() -> List[Tuple[MessageSpec, int]]:
    return [(spec, v) for spec in all_message_specs() for v in spec.valid_versions]


def _leaf(kind: str, nullable: bool) -> st.SearchStrategy:
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        base = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif kind in _UNSIGNED_BITS:
        base = st.integers(0, (1 << _UNSIGNED_BITS[kind]) - 1)
    elif kind == "bool":
        base = st.booleans()
    elif kind == "float64":
        # NaN is not equal to itself: values are compared, so draw only comparable floats.
        base = st.floats(allow_nan=False)
    elif kind == "uuid":
        base = st.one_of(st.just(uuid.UUID(int=0)), st.uuids(allow_nil=True))
    elif kind == "string":
        base = st.text(max_size=12)
    else:  # bytes, records (raw record-set bytes round-trip as they are)
        base = st.binary(max_size=24)
    return st.one_of(st.none(), base) if nullable else base


def _struct(struct: StructSpec, version: int) -> st.SearchStrategy:
    fields: Dict[str, st.SearchStrategy] = {}
    for f in struct.fields_for(version):
        fields[f.attr] = _field(f, version)
    return st.fixed_dictionaries(fields)


def _field(f: FieldSpec, version: int) -> st.SearchStrategy:
    t = f.type
    nullable = f.nullable_in(version)
    if t.is_array:
        inner = t.element
        assert inner is not None
        elem = _struct(inner.struct, version) if inner.is_struct else _leaf(inner.kind, False)
        values = st.lists(elem, max_size=3)
        return st.one_of(st.none(), values) if nullable else values
    if t.is_struct:
        value = _struct(t.struct, version)
        return st.one_of(st.none(), value) if nullable else value
    return _leaf(t.kind, nullable)


def message_values(spec: MessageSpec, version: int) -> st.SearchStrategy:
    """Instances of the generated class for ``spec`` with every field of ``version`` drawn."""
    cls = message_class(spec)
    return _struct(spec.root, version).map(cls.from_dict)


def any_message() -> st.SearchStrategy:
    """(spec, version, message) over every message and version."""
    return st.sampled_from(spec_versions()).flatmap(lambda sv: message_values(*sv).map(lambda m: (sv[0], sv[1], m)))


# ----------------------------------------------------------------------------------------------------
# The "full" example: every optional part present, every value away from its default.


def _full_leaf(kind: str, seed: int) -> Any:
    if kind in _INT_BITS:
        return (seed * 7919 + 3) % (1 << (_INT_BITS[kind] - 1))
    if kind in _UNSIGNED_BITS:
        return (seed * 7919 + 3) % (1 << _UNSIGNED_BITS[kind])
    if kind == "bool":
        return seed % 2 == 0
    if kind == "float64":
        return seed + 0.5
    if kind == "uuid":
        return uuid.UUID(int=(seed * 0x9E3779B97F4A7C15 + 1) % (1 << 128))
    if kind == "string":
        return f"s{seed}-ü"
    return bytes([seed % 256, 0, 255]) * 2


def _full_struct(struct: StructSpec, version: int, seed: int) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for i, f in enumerate(struct.fields_for(version)):
        s = seed * 31 + i + 1
        t = f.type
        if t.is_array:
            inner = t.element
            assert inner is not None
            out[f.attr] = [
                _full_struct(inner.struct, version, s + k) if inner.is_struct else _full_leaf(inner.kind, s + k)
                for k in range(2)
            ]
        elif t.is_struct:
            out[f.attr] = _full_struct(t.struct, version, s)
        else:
            out[f.attr] = _full_leaf(t.kind, s)
    return out


def full_value(spec: MessageSpec, version: int) -> messages.Message:
    """The deterministic instance with every optional part of ``version`` present (see the module doc)."""
    return message_class(spec).from_dict(_full_struct(spec.root, version, 1))
