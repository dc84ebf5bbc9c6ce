"""Frames: size prefix, headers, the frame reader's chunking and limits, and error codes."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kproto
from kproto.errors import (
    BrokerError,
    DecodeError,
    EncodeError,
    KprotoError,
    LengthMismatchError,
    LimitExceededError,
    UnknownVersionError,
    UnsupportedVersionError,
)
from kproto.framing import decode_request_header
from kproto.messages import HeartbeatRequest, ListGroupsRequest, MetadataResponse, ProduceRequest

HEARTBEAT = HeartbeatRequest(group_id="g", generation_id=3, member_id="m-1")


def test_request_frame_round_trip_and_header_fields():
    frame = kproto.encode_request(HEARTBEAT, 0, 42, "client")
    header, msg = kproto.decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (12, 0, 42, "client")
    assert msg == HEARTBEAT


def test_null_client_id_is_carried():
    header, _ = kproto.decode_request(kproto.encode_request(ListGroupsRequest(), 0, 1, None))
    assert header.client_id is None


def test_size_prefix_must_match_the_bytes():
    frame = kproto.encode_request(HEARTBEAT, 0, 1)
    with pytest.raises(LengthMismatchError, match="disagrees"):
        kproto.decode_request(frame + b"\x00")
    with pytest.raises(LengthMismatchError):
        kproto.decode_request(frame[:-1])
    with pytest.raises(DecodeError, match="need 4 bytes at offset 0"):
        kproto.decode_request(b"\x00\x00")


def test_trailing_body_bytes_are_a_length_mismatch_with_frame_offset():
    frame = bytearray(kproto.encode_request(HEARTBEAT, 0, 1) + b"\xaa\xbb")
    frame[0:4] = (len(frame) - 4).to_bytes(4, "big")
    with pytest.raises(LengthMismatchError) as info:
        kproto.decode_request(bytes(frame))
    assert info.value.offset == len(frame) - 2
    assert "2 trailing bytes" in str(info.value)


def test_errors_inside_a_frame_report_frame_offsets_and_paths():
    P = ProduceRequest
    msg = P(
        acks=1,
        topic_data=[
            P.TopicProduceData(
                name="t", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=b"x" * 10)]
            )
        ],
    )
    frame = bytearray(kproto.encode_request(msg, 0, 9, "c"))
    frame[-14:-10] = (50).to_bytes(4, "big")  # records length larger than what is left
    with pytest.raises(DecodeError) as info:
        kproto.decode_request(bytes(frame))
    assert info.value.path == "topic_data[0].partition_data[0].records"
    assert info.value.offset == len(frame) - 10
    assert str(info.value) == (
        f"topic_data[0].partition_data[0].records: need 50 bytes at offset {len(frame) - 10}, 10 left"
    )


def test_unknown_api_key_and_version_are_decode_errors_with_offsets():
    frame = bytes.fromhex("0000000a70630000000000010000")
    header, pos = decode_request_header(frame)
    assert (header.api_key, pos) == (0x7063, 14)
    with pytest.raises(UnknownVersionError, match="unknown api key 28771") as info:
        kproto.decode_request(frame)
    assert (info.value.offset, info.value.path) == (4, "api_key")
    assert isinstance(info.value, DecodeError) and not isinstance(info.value, EncodeError)
    frame = bytes.fromhex("0000000a00030063000000010000")
    with pytest.raises(UnknownVersionError, match="Metadata has no version 99") as info:
        kproto.decode_request(frame)
    assert (info.value.offset, info.value.path) == (6, "api_version")
    with pytest.raises(UnknownVersionError):
        kproto.decode_response(kproto.encode_response(MetadataResponse(), 0, 1), 3, 99)
    with pytest.raises(UnsupportedVersionError):
        HEARTBEAT.encode(99)
    with pytest.raises(UnknownVersionError):
        HeartbeatRequest.decode(b"", 99)


def test_responses_need_api_key_and_version():
    msg = MetadataResponse()
    frame = kproto.encode_response(msg, 0, 77)
    header, decoded = kproto.decode_response(frame, 3, 0)
    assert header.correlation_id == 77 and decoded == msg
    with pytest.raises(EncodeError):
        kproto.encode_response(HEARTBEAT, 0, 1)
    with pytest.raises(EncodeError):
        kproto.encode_request(msg, 0, 1)


def test_field_not_carried_by_the_version_is_refused_not_dropped():
    from kproto.messages import OffsetCommitRequest as OC

    P = OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    msg = OC(
        group_id="g",
        topics=[
            OC.OffsetCommitRequestTopic(
                name="t", partitions=[P(partition_index=0, committed_offset=5, commit_timestamp=1234)]
            )
        ],
    )
    with pytest.raises(UnsupportedVersionError, match="commit_timestamp"):
        msg.encode(2)
    assert OC.decode(msg.encode(1), 1) == msg
    # Fields Kafka marks ignorable (retention_time_ms) are dropped by older versions, as Kafka does.
    assert OC(group_id="g", retention_time_ms=60000).encode(0) == OC(group_id="g").encode(0)


@pytest.mark.parametrize("value", [2**15, "not an int", None])
def test_bad_values_raise_encode_error(value):
    with pytest.raises(EncodeError):
        HeartbeatRequest(group_id="g", generation_id=value if value != 2**15 else 2**31).encode(0)


def test_string_too_long_for_int16_length():
    with pytest.raises(EncodeError, match="do not fit an int16 length"):
        HeartbeatRequest(group_id="x" * 40000).encode(0)


def test_decode_error_pickles_with_offset_and_path():
    err = DecodeError("need 8 bytes at offset 4, 3 left", 4, "a.b")
    again = pickle.loads(pickle.dumps(err))
    assert (again.offset, again.path, str(again)) == (4, "a.b", str(err))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.integers(1, 5))
def test_frame_reader_any_chunking(cuts, count):
    frames = [kproto.encode_request(HEARTBEAT, 0, i, "c" * i) for i in range(count)]
    stream = b"".join(frames)
    reader = kproto.FrameReader()
    got, pos = [], 0
    for cut in cuts:
        got += reader.feed(stream[pos : pos + cut])
        pos += cut
    got += reader.feed(stream[pos:])
    assert got == frames and reader.buffered == 0
    reader.close()


def test_frame_reader_rejects_absurd_sizes_at_once_and_stays_failed():
    reader = kproto.FrameReader(max_frame_size=1024)
    ok = kproto.encode_request(HEARTBEAT, 0, 1)
    assert reader.feed(ok) == [ok]
    with pytest.raises(LimitExceededError) as info:
        reader.feed(b"\x7f\xff\xff\xff")  # 2 GiB announced: refused before buffering it
    assert info.value.offset == len(ok)
    with pytest.raises(LimitExceededError):
        reader.feed(b"")
    with pytest.raises(LimitExceededError):
        kproto.FrameReader().feed(b"\xff\xff\xff\xfe")


def test_frame_reader_reports_a_truncated_stream():
    reader = kproto.FrameReader()
    reader.feed(kproto.encode_request(HEARTBEAT, 0, 1)[:-3])
    with pytest.raises(DecodeError, match="stream ended inside a frame"):
        reader.close()


def test_error_codes():
    E = kproto.ErrorCode
    assert E(15) is E.GROUP_COORDINATOR_NOT_AVAILABLE is E.CONSUMER_COORDINATOR_NOT_AVAILABLE
    assert E(14) is E.OFFSETS_LOAD_IN_PROGRESS
    assert E.NOT_LEADER_FOR_PARTITION.retriable and not E.ILLEGAL_GENERATION.retriable
    assert E(4).name == "INVALID_FETCH_SIZE"
    unknown = E(32000)
    assert int(unknown) == 32000 and unknown.name == "UNKNOWN_CODE_32000" and not unknown.retriable
    from kproto._generated.error_codes import error_class, name_in_context, raise_for_code

    assert name_in_context(13) == "NETWORK_EXCEPTION"
    assert name_in_context(13, "LeaderAndIsrResponse") == "STALE_LEADER_EPOCH"
    cls = error_class(27)
    assert issubclass(cls, BrokerError) and issubclass(cls, KprotoError) and cls.code == 27
    with pytest.raises(BrokerError) as info:
        raise_for_code(6, "partition moved")
    assert info.value.retriable and info.value.code == 6
    raise_for_code(0)
    assert error_class(1234).code == 1234


def test_apis_table():
    apis = kproto.APIS
    assert list(apis) == list(range(len(apis)))  # every api key from 0 up, none missing
    assert apis["Offsets"] is apis[2] is apis["listoffsets"]
    assert apis["GroupCoordinator"] is apis["FindCoordinator"] is apis[10]
    assert apis[8].versions[:3] == range(0, 3)
    assert apis[7].request_header_version(0) == 0
    metadata = apis["Metadata"]
    assert metadata.flexible_versions is not None and metadata.is_flexible(12) and not metadata.is_flexible(8)
    assert (metadata.request_header_version(12), metadata.response_header_version(12)) == (2, 1)
    assert (metadata.request_header_version(8), metadata.response_header_version(8)) == (1, 0)
    versions = apis["ApiVersions"]
    assert all(versions.response_header_version(v) == 0 for v in versions.versions)
    assert versions.request_header_version(3) == 2


def test_unknown_api_names_list_the_valid_ones():
    with pytest.raises(KeyError) as info:
        kproto.APIS["Nope"]
    assert isinstance(info.value, KprotoError)
    assert "'Nope'" in str(info.value) and "Metadata" in str(info.value) and "FindCoordinator" in str(info.value)
    assert kproto.APIS.get("Nope") is None and "Nope" not in kproto.APIS


def test_flexible_frames_carry_header_v2_and_v1():
    from kproto.messages import MetadataRequest

    frame = kproto.encode_request(MetadataRequest(topics=None), 12, 7, "c")
    # size, api key 3, version 12, correlation 7, client id "c" (int16 length), empty tag section, body
    assert frame[4:16] == bytes.fromhex("0003000c0000000700016300")
    header, msg = kproto.decode_request(frame)
    assert (header.api_version, header.client_id, msg.topics) == (12, "c", None)
    response = MetadataResponse(cluster_id="k")
    frame = kproto.encode_response(response, 12, 7)
    assert frame[4:9] == bytes.fromhex("0000000700")  # header v1: correlation id + empty tag section
    assert kproto.decode_response(frame, 3, 12)[1] == response
    from kproto.messages import ApiVersionsResponse

    frame = kproto.encode_response(ApiVersionsResponse(), 3, 7)
    assert frame[4:8] == bytes.fromhex("00000007") and frame[8:10] == b"\x00\x00"  # header v0, error code 0
