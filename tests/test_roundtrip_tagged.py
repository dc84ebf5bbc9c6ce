"""Round trips of every flexible (message, version) with tagged fields set, unset, and unknown.

Unknown tags (tags the schema does not name, also between known ones) are attached to the root and to
nested structs; decoding keeps them in ``unknown_tagged_fields`` and encoding writes them back in tag
order among the known ones, byte for byte.  The size invariant holds: decoding inside a larger buffer
stops exactly at the body's end.  (Non-flexible versions' round trips are in test_messages_roundtrip.)
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from message_strategies import full_value, message_class, message_values, spec_versions

FLEXIBLE = [(spec, v) for spec, v in spec_versions() if spec.flexible_versions and v in spec.flexible_versions]
IDS = [f"{spec.name}-v{v}" for spec, v in FLEXIBLE]
FEW = settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _structs(obj: Any, version: int):
    """Every struct instance of a decoded/constructed message in ``version`` (the root first)."""
    yield obj
    for f in type(obj).FIELDS:
        if f.struct is None or not f.versions[0] <= version <= f.versions[1]:
            continue
        value = getattr(obj, f.name)
        for item in (value or []) if f.is_array else [value]:
            if item is not None:
                yield from _structs(item, version)


def _known_tags(obj: Any) -> set:
    return {f.tag for f in type(obj).FIELDS if f.tag is not None}


def _unknown_tags(data: st.DataObject, obj: Any) -> list:
    known = _known_tags(obj)
    free = [t for t in range(0, max(known, default=0) + 8) if t not in known] + [300, 1 << 20]
    tags = data.draw(st.lists(st.sampled_from(free), unique=True, max_size=3))
    return sorted((t, data.draw(st.binary(max_size=5))) for t in tags)


def _check_round_trip(cls: type, msg: Any, version: int) -> bytes:
    wire = msg.encode(version)
    decoded = cls.decode(wire, version)
    assert decoded == msg
    assert [s.unknown_tagged_fields for s in _structs(decoded, version)] == [
        s.unknown_tagged_fields for s in _structs(msg, version)
    ]
    assert decoded.encode(version) == wire
    padded = b"\x07" * 3 + wire + b"\x00\xff" * 3
    again, end = cls.decode_from(padded, 3, len(padded), version)
    assert end == 3 + len(wire) and again == msg
    return wire


@pytest.mark.parametrize("spec,version", FLEXIBLE, ids=IDS)
@FEW
@given(data=st.data())
def test_round_trip_with_unknown_tags(spec, version, data):
    cls = message_class(spec)
    msg = data.draw(message_values(spec, version))
    for struct in _structs(msg, version):
        struct.unknown_tagged_fields = _unknown_tags(data, struct)
    _check_round_trip(cls, msg, version)


@pytest.mark.parametrize("spec,version", FLEXIBLE, ids=IDS)
def test_tagged_fields_set_and_unset(spec, version):
    cls = message_class(spec)
    # Unset: every tagged field at its default is left out, so the root's tag section is one zero byte.
    empty = _check_round_trip(cls, cls(), version)
    assert empty.endswith(b"\x00")
    # Set: the full value writes every tagged field of the root; each comes back.
    full = full_value(spec, version)
    wire = _check_round_trip(cls, full, version)
    root_tags = [f for f in cls.FIELDS if f.tag is not None and f.versions[0] <= version <= f.versions[1]]
    if root_tags:
        assert wire != cls().encode(version)
        for f in root_tags:
            assert getattr(cls.decode(wire, version), f.name) == getattr(full, f.name)
