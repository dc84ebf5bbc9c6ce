"""Flexible versions (KIP-482) in the generated codecs: compact encodings, tag sections, and bad input.

The byte strings here are written out by hand from the encoding rules (docs/protocol and kproto.wire's
header), so they check the generator against the rules rather than against itself.
"""

from __future__ import annotations

import uuid

import pytest

import kproto
from kproto.errors import DecodeError, EncodeError, UnsupportedVersionError
from kproto.messages import ApiVersionsResponse, MetadataRequest, MetadataResponse

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def _metadata_v12(name_bytes: bytes = b"\x02a") -> bytes:
    # topics: compact array of 1 (varint 2); topic_id; name (compact string "a"); empty tag section;
    # allow_auto_topic_creation, include_topic_authorized_operations; empty tag section of the request.
    return b"\x02" + TOPIC_ID.bytes + name_bytes + b"\x00" + b"\x01\x00" + b"\x00"


def test_compact_encoding_matches_the_rules():
    msg = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(topic_id=TOPIC_ID, name="a")], allow_auto_topic_creation=True
    )
    assert msg.encode(12) == _metadata_v12()
    assert MetadataRequest.decode(_metadata_v12(), 12) == msg
    # Null compact array (varint 0) and null compact string (varint 0) where nullable.
    assert MetadataRequest(topics=None, allow_auto_topic_creation=False).encode(12) == b"\x00\x00\x00\x00"
    assert MetadataRequest.decode(b"\x00\x00\x00\x00", 12).topics is None
    null_name = b"\x02" + TOPIC_ID.bytes + b"\x00" + b"\x00" + b"\x01\x00\x00"
    assert MetadataRequest.decode(null_name, 12).topics[0].name is None


def test_classic_versions_are_unchanged():
    msg = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="ab")])
    assert msg.encode(0) == b"\x00\x00\x00\x01\x00\x02ab"


def _api_versions_v3(tags: bytes) -> bytes:
    # error_code 0, api_keys: compact array of 1 {api_key 18, min 0, max 4, tags}, throttle 0, tags
    return b"\x00\x00" + b"\x02" + b"\x00\x12\x00\x00\x00\x04\x00" + b"\x00\x00\x00\x00" + tags


def test_known_tagged_fields_decode_into_attributes_and_unknown_ones_are_kept_in_order():
    # tag 1 (finalized_features_epoch, int64 = 7), tag 5 (unknown, 2 bytes), tag 9 (unknown, 0 bytes)
    tags = b"\x03" + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x05\x02\xab\xcd" + b"\x09\x00"
    data = _api_versions_v3(tags)
    msg = ApiVersionsResponse.decode(data, 3)
    assert msg.finalized_features_epoch == 7
    assert msg.unknown_tagged_fields == [(5, b"\xab\xcd"), (9, b"")]
    assert msg.encode(3) == data  # written back, merged with the known tag in ascending order
    msg.unknown_tagged_fields = [(4, b""), (0x7FFF, b"z")]
    msg.zk_migration_ready = True  # tag 3
    tail = msg.encode(3)[len(_api_versions_v3(b"")) :]
    assert tail == (
        b"\x04" + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x03\x01\x01" + b"\x04\x00" + b"\xff\xff\x01\x01z"
    )
    assert ApiVersionsResponse.decode(msg.encode(3), 3) == msg


def test_tagged_fields_at_their_defaults_are_not_written():
    assert ApiVersionsResponse().encode(3) == b"\x00\x00\x01\x00\x00\x00\x00\x00"


def _decode_error(cls, data: bytes, version: int) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        cls.decode(data, version)
    return info.value


@pytest.mark.parametrize(
    "tags,path,reason",
    [
        (b"\x02\x05\x00\x04\x00", "_tagged_fields[4]", "out of order"),
        (b"\x02\x05\x00\x05\x00", "_tagged_fields[5]", "repeated"),
        (b"\x01\x05\x09ab", "_tagged_fields[5]", "longer than the 2 bytes left"),
        (b"\x01\x01\x09" + bytes(9), "finalized_features_epoch", "but its size says"),
    ],
)
def test_bad_tag_sections(tags, path, reason):
    error = _decode_error(ApiVersionsResponse, _api_versions_v3(tags), 3)
    assert error.path == path and reason in str(error) and error.offset is not None


def test_varints_longer_than_five_bytes_or_above_32_bits_are_refused():
    error = _decode_error(MetadataRequest, b"\x80\x80\x80\x80\x80\x01", 12)
    assert (error.path, error.offset) == ("topics", 0) and "longer than 5 bytes" in str(error)
    error = _decode_error(MetadataRequest, b"\xff\xff\xff\xff\x7f", 12)
    assert (error.path, error.offset) == ("topics", 0) and "overflows 32 bits" in str(error)
    error = _decode_error(MetadataRequest, b"\x80", 12)
    assert error.path == "topics" and "cut off" in str(error)


def test_compact_lengths_beyond_the_bytes_left_are_refused_before_allocating():
    error = _decode_error(MetadataRequest, b"\xff\xff\xff\xff\x0f", 12)  # 2**32 - 2 topics
    assert error.path == "topics" and "cannot fit" in str(error)
    error = _decode_error(MetadataRequest, _metadata_v12(b"\x7fab"), 12)  # name of 126 bytes, 2 there
    assert error.path == "topics[0].name" and error.offset == 18


def test_non_nullable_compact_string_refuses_null():
    data = bytes([0, 0, 0, 0]) + b"\x00" + b"\x00"  # throttle, brokers=null
    error = _decode_error(MetadataResponse, data, 12)
    assert error.path == "brokers"


def test_encode_errors_name_the_field_path():
    msg = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="a"), MetadataRequest.MetadataRequestTopic(name=5)]
    )  # type: ignore[arg-type]
    with pytest.raises(EncodeError) as info:
        msg.encode(12)
    assert info.value.path == "MetadataRequest.topics[1].name"
    assert str(info.value).startswith("MetadataRequest.topics[1].name: expected a string, got int")
    assert "has no attribute" not in str(info.value)
    with pytest.raises(EncodeError) as info:
        ApiVersionsResponse(error_code=1 << 15).encode(0)
    assert str(info.value).startswith("ApiVersionsResponse.error_code: expected an int16 (-32768..32767), got 32768")
    with pytest.raises(EncodeError) as info:
        MetadataRequest(topics=["a"]).encode(1)  # type: ignore[list-item]
    assert info.value.path == "MetadataRequest.topics[0]"
    assert "expected a MetadataRequest.MetadataRequestTopic, got str" in str(info.value)
    bad_tags = ApiVersionsResponse(unknown_tagged_fields=[(1, b"x")])  # tag 1 is a known field's
    bad_tags.finalized_features_epoch = 3
    with pytest.raises(EncodeError, match="tag 1 given twice"):
        bad_tags.encode(3)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest(include_cluster_authorized_operations=True).encode(11)


def test_flexible_request_round_trips_through_frames_with_unknown_header_tags():
    msg = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=TOPIC_ID, name="t")])
    frame = bytearray(kproto.encode_request(msg, 12, 5, "cli"))
    assert frame[17:18] == b"\x00"  # the header's empty tag section after the classic client id
    # Give the header an unknown tagged field: decoders keep it.
    frame[17:18] = b"\x01\x07\x01\x2a"
    frame[0:4] = (len(frame) - 4).to_bytes(4, "big")
    header, decoded = kproto.decode_request(bytes(frame))
    assert header.unknown_tagged_fields == [(7, b"\x2a")] and decoded == msg


def test_absent_struct_fields_decode_to_the_constructors_defaults():
    # The pure decoders build a struct field that is not on the wire (a tagged field left out, a field
    # of a later version) by storing its fields into a bare instance, not with the constructor: the
    # same value, and a new instance each time.
    from kproto._generated import fetch

    msg = fetch.FetchResponse(
        responses=[
            fetch.FetchResponse_FetchableTopicResponse(
                topic_id=TOPIC_ID, partitions=[fetch.FetchResponse_PartitionData(partition_index=p) for p in range(2)]
            )
        ]
    )
    first, second = fetch.FetchResponse.decode(msg.encode(16), 16).responses[0].partitions
    assert first == msg.responses[0].partitions[0]
    for name in ("diverging_epoch", "current_leader", "snapshot_id"):
        value = getattr(first, name)
        assert type(value) is type(getattr(msg.responses[0].partitions[0], name))
        assert (
            value is not getattr(second, name)
            and value.unknown_tagged_fields is not getattr(second, name).unknown_tagged_fields
        )
    old = fetch.FetchRequest.decode(fetch.FetchRequest().encode(4), 4)
    assert old.replica_state == fetch.FetchRequest_ReplicaState()
