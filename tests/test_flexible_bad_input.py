"""Bad input in flexible encodings: every case is a DecodeError that says where (offset) and what (field
path), and arbitrary mutations of flexible bodies raise nothing but kproto errors.

The hand-built bodies use ApiVersionsRequest v3 (two compact strings and the root tag section) and
MetadataRequest v12 (a compact nullable array of structs with their own tag sections).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto
from kproto.errors import DecodeError, KprotoError, UnknownVersionError
from kproto.messages import ApiVersionsRequest, MetadataRequest
from message_strategies import message_class, message_values, spec_versions

NAME, VERSION = b"\x04abc", b"\x021"  # compact strings "abc" and "1" (length + 1 as an unsigned varint)


def _error(cls, body: bytes, version: int) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        cls.decode(body, version)
    err = info.value
    assert err.offset is not None and 0 <= err.offset <= len(body), err
    assert err.path, err
    return err


def test_the_hand_built_body_is_valid():
    msg = ApiVersionsRequest.decode(NAME + VERSION + b"\x00", 3)
    assert (msg.client_software_name, msg.client_software_version) == ("abc", "1")
    assert msg.encode(3) == NAME + VERSION + b"\x00"


@pytest.mark.parametrize("varint", [b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\xff\xff\xff\x01"])
def test_varint_longer_than_five_bytes(varint):
    err = _error(ApiVersionsRequest, varint + b"abc" + VERSION + b"\x00", 3)
    assert err.path == "client_software_name" and err.offset == 0 and "5 bytes" in str(err)


def test_varint_longer_than_five_bytes_in_a_tag_section():
    err = _error(ApiVersionsRequest, NAME + VERSION + b"\x81\x80\x80\x80\x80\x00", 3)
    assert "_tagged_fields" in err.path and err.offset == len(NAME + VERSION)


@pytest.mark.parametrize("length", [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x10"])
def test_compact_length_that_overflows(length):
    """2**32 - 1 (the largest 5-byte value) and 2**32 (past 32 bits): neither allocates nor wraps."""
    err = _error(ApiVersionsRequest, length + b"abc" + VERSION + b"\x00", 3)
    assert err.path == "client_software_name"


def test_compact_length_past_the_bytes_left():
    err = _error(ApiVersionsRequest, b"\x64abc", 3)
    assert err.path == "client_software_name" and err.offset == 1 and "left" in str(err)


def test_compact_array_count_past_the_bytes_left():
    # MetadataRequest v12: topics is a compact nullable array; 1000 elements cannot fit in 3 bytes.
    err = _error(MetadataRequest, b"\xe9\x07\x00\x00\x00", 12)
    assert err.path.startswith("topics")


def test_tagged_fields_out_of_order():
    section = b"\x02" + b"\x05\x01x" + b"\x03\x01y"
    err = _error(ApiVersionsRequest, NAME + VERSION + section, 3)
    assert "out of order" in str(err) and err.path == "_tagged_fields[3]"
    assert err.offset == len(NAME + VERSION) + 4


def test_tagged_field_repeated():
    section = b"\x02" + b"\x05\x01x" + b"\x05\x01y"
    err = _error(ApiVersionsRequest, NAME + VERSION + section, 3)
    assert "repeated" in str(err) and err.path == "_tagged_fields[5]"


def test_tag_section_longer_than_its_struct():
    section = b"\x01" + b"\x05\x09" + b"xy"  # a 9-byte field with 2 bytes left
    err = _error(ApiVersionsRequest, NAME + VERSION + section, 3)
    assert "longer than" in str(err) and err.path == "_tagged_fields[5]"


def test_tag_section_longer_than_a_nested_struct():
    """Inside an array element, the element's tag section is bounded by the body, with the field path."""
    good = MetadataRequest.from_dict(
        {"topics": [{"name": "t"}], "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    ).encode(12)
    # topics: count 2 (one element), topic_id (16), name "t" (compact), then the element's tag section.
    element_tags = 1 + 16 + 2
    bad = good[:element_tags] + b"\x01\x05\x7f" + good[element_tags + 1 :]
    err = _error(MetadataRequest, bad, 12)
    assert err.path.startswith("topics[0]")


def test_unknown_tags_are_kept_not_rejected():
    body = NAME + VERSION + b"\x02" + b"\x03\x01x" + b"\x07\x00"
    msg = ApiVersionsRequest.decode(body, 3)
    assert msg.unknown_tagged_fields == [(3, b"x"), (7, b"")]
    assert msg.encode(3) == body


def test_unknown_api_key_and_version_in_a_frame():
    frame = bytearray(kproto.encode_request(ApiVersionsRequest(), 3, correlation_id=1, client_id="c"))
    bad_key = bytes(frame[:4] + b"\x27\x0f" + frame[6:])
    with pytest.raises(UnknownVersionError) as info:
        kproto.decode_request(bad_key)
    assert (info.value.offset, info.value.path) == (4, "api_key")
    bad_version = bytes(frame[:6] + b"\x03\xe7" + frame[8:])
    with pytest.raises(UnknownVersionError) as info:
        kproto.decode_request(bad_version)
    assert (info.value.offset, info.value.path) == (6, "api_version")


def test_unsupported_version_on_decode_is_a_decode_error():
    with pytest.raises(DecodeError) as info:
        ApiVersionsRequest.decode(b"\x00", 99)
    assert info.value.offset is not None


FLEXIBLE = [(spec, v) for spec, v in spec_versions() if spec.flexible_versions and v in spec.flexible_versions]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_flexible_bodies_raise_only_kproto_errors(data):
    spec, version = data.draw(st.sampled_from(FLEXIBLE))
    wire = bytearray(data.draw(message_values(spec, version)).encode(version))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete", "varint"]))
        at = data.draw(st.integers(0, len(wire)))
        if op == "flip" and at < len(wire):
            wire[at] ^= data.draw(st.integers(1, 255))
        elif op == "insert":
            wire[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and at < len(wire):
            del wire[at]
        elif op == "varint":
            wire[at:at] = b"\xff\xff\xff\xff\x0f"
    try:
        message_class(spec).decode(bytes(wire), version)
    except KprotoError:
        pass
