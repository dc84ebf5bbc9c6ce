"""Round trips, size invariants and agreement with the construct reference decoder, for every message
and version in the spec files."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto.errors import DecodeError
from kproto.reference import reference_decode
from message_strategies import message_class, message_values, spec_versions

CASES = spec_versions()
IDS = [f"{spec.name}-v{v}" for spec, v in CASES]
# Every (message, version) is parametrised, ~730 of them, and the peer differential and tagged round trip
# tests draw their own values for each; a few examples per case here keep the suite within its CI
# budget.  KPROTO_ROUNDTRIP_EXAMPLES widens a local run.
FAST = settings(
    max_examples=int(os.environ.get("KPROTO_ROUNDTRIP_EXAMPLES", "6")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@FAST
@given(data=st.data())
def test_round_trip_and_reference(spec, version, data):
    msg = data.draw(message_values(spec, version))
    cls = message_class(spec)
    wire = msg.encode(version)
    decoded = cls.decode(wire, version)
    assert decoded == msg
    assert decoded.encode(version) == wire
    # Size invariant: decoding inside a larger buffer stops exactly at the end of the body.
    padded = b"\x07" * 3 + wire + b"\xff" * 5
    again, end = cls.decode_from(padded, 3, len(padded), version)
    assert end == 3 + len(wire) and again == msg
    # The construct reference decoder, built from the same model by other means, agrees.
    assert reference_decode(spec, version, wire) == msg.to_dict()
    assert cls.from_dict(msg.to_dict()) == msg


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@FAST
@given(data=st.data())
def test_truncated_bodies_raise_decode_error_in_both_decoders(spec, version, data):
    msg = data.draw(message_values(spec, version))
    wire = msg.encode(version)
    if not wire:
        return
    cut = data.draw(st.integers(0, len(wire) - 1))
    cls = message_class(spec)
    with pytest.raises(DecodeError) as info:
        cls.decode(wire[:cut], version)
    assert info.value.offset is not None and 0 <= info.value.offset <= len(wire)
    with pytest.raises(DecodeError):
        reference_decode(spec, version, wire[:cut])


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@FAST
@given(data=st.data())
def test_mutated_bodies_only_raise_decode_error(spec, version, data):
    msg = data.draw(message_values(spec, version))
    wire = bytearray(msg.encode(version))
    for _ in range(data.draw(st.integers(1, 4))):
        if wire:
            wire[data.draw(st.integers(0, len(wire) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        wire += data.draw(st.binary(max_size=8))
    cls = message_class(spec)
    try:
        decoded = cls.decode(bytes(wire), version)
    except DecodeError as exc:
        assert exc.offset is None or 0 <= exc.offset <= len(wire)
        return
    # Whatever decodes re-encodes to the same bytes (nothing silently dropped or altered) -- except that a
    # known tagged field the bytes carried at its default value is not written back, as Kafka's own
    # serializers write a tagged field only when it differs from its default: then the values are the same
    # and only tag sections got shorter.
    again = decoded.encode(version)
    if again != bytes(wire):
        assert len(again) < len(wire) and known_tag_at_default(decoded, version)
        assert cls.decode(again, version) == decoded
    assert comparable(reference_decode(spec, version, bytes(wire))) == comparable(decoded.to_dict())


def comparable(value):
    """``value`` with every NaN float64 replaced by its 8 bytes: a mutated float64 field can become a NaN, which
    equals nothing (not even itself), while both decoders must agree on its bits."""
    if isinstance(value, float) and value != value:
        return ("nan", struct.pack(">d", value))
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [comparable(item) for item in value]
    return value


def known_tag_at_default(obj, version) -> bool:
    """Whether ``obj`` or a struct inside it has a known tagged field of ``version`` at its default value."""
    defaults = type(obj)()
    for info in type(obj).FIELDS:
        if not info.versions[0] <= version <= info.versions[1]:
            continue
        value = getattr(obj, info.name)
        if info.tag is not None and value == getattr(defaults, info.name):
            return True
        if info.struct is not None and value is not None:
            if any(known_tag_at_default(item, version) for item in (value if info.is_array else [value])):
                return True
    return False


REQUEST_CASES = [(spec, v) for spec, v in CASES if spec.kind == "request"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_and_truncated_request_frames_only_raise_kproto_errors(data):
    import kproto
    from kproto.errors import KprotoError

    spec, version = data.draw(st.sampled_from(REQUEST_CASES))
    msg = data.draw(message_values(spec, version))
    frame = bytearray(kproto.encode_request(msg, version, data.draw(st.integers(-(2**31), 2**31 - 1)), "c"))
    action = data.draw(st.sampled_from(["flip", "cut", "grow"]))
    if action == "flip":
        for _ in range(data.draw(st.integers(1, 3))):
            frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    elif action == "cut":
        frame = frame[: data.draw(st.integers(0, len(frame) - 1))]
    else:
        frame += data.draw(st.binary(min_size=1, max_size=8))
    try:
        header, decoded = kproto.decode_request(bytes(frame))
    except KprotoError:
        return
    again = kproto.encode_request(decoded, header.api_version, header.correlation_id, header.client_id)
    assert kproto.decode_request(again) == (header, decoded) or again == bytes(frame)
