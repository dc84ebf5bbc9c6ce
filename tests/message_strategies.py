"""Hypothesis strategies for every generated message, derived from the schema model.

``message_values(spec, version)`` draws a value for every field the version carries (fields the version
lacks keep their defaults), so ``encode(version)`` of the result never needs to drop anything.
"""

from __future__ import annotations

from typing import Dict, List, Tuple, Type

from hypothesis import strategies as st

import kproto.messages as messages
from kproto.reference import schema
from kproto.schema import FieldSpec, MessageSpec, StructSpec

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def all_message_specs() -> List[MessageSpec]:
    s = schema()
    return s.messages() + sorted(s.headers.values(), key=lambda m: m.name) + sorted(s.data.values(),
                                                                                   key=lambda m: m.name)


def message_class(spec: MessageSpec) -> Type[messages.Message]:
    return getattr(messages, spec.name)


def spec_versions() -> List[Tuple[MessageSpec, int]]:
    return [(spec, v) for spec in all_message_specs() for v in spec.valid_versions]


def _leaf(kind: str, nullable: bool) -> st.SearchStrategy:
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        base = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    elif kind == "bool":
        base = st.booleans()
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
    if t.is_array:
        inner = t.element
        assert inner is not None
        elem = _struct(inner.struct, version) if inner.is_struct else _leaf(inner.kind, False)
        return st.lists(elem, max_size=3)
    return _leaf(t.kind, f.nullable_in(version))


def message_values(spec: MessageSpec, version: int) -> st.SearchStrategy:
    """Instances of the generated class for ``spec`` with every field of ``version`` drawn."""
    cls = message_class(spec)
    return _struct(spec.root, version).map(cls.from_dict)


def any_message() -> st.SearchStrategy:
    """(spec, version, message) over every message and version."""
    return st.sampled_from(spec_versions()).flatmap(
        lambda sv: message_values(*sv).map(lambda m: (sv[0], sv[1], m)))

