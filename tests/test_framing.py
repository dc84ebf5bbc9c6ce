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
    msg = P(acks=1, topic_data=[P.TopicProduceData(name="t", partition_data=[
        P.TopicProduceData.PartitionProduceData(index=0, records=b"x" * 10)])])
    frame = bytearray(kproto.encode_request(msg, 0, 9, "c"))
    frame[-14:-10] = (50).to_bytes(4, "big")  # records length larger than what is left
    with pytest.raises(DecodeError) as info:
        kproto.decode_request(bytes(frame))
    assert info.value.path == "topic_data[0].partition_data[0].records"
    assert info.value.offset == len(frame) - 10
    assert str(info.value) == (f"topic_data[0].partition_data[0].records: need 50 bytes at offset "
                               f"{len(frame) - 10}, 10 left")


def test_unknown_api_key_and_version():
    frame = bytes.fromhex("0000000a" "0063" "0000" "00000001" "0000")
    header, pos = decode_request_header(frame)
    assert (header.api_key, pos) == (99, 14)
    with pytest.raises(UnsupportedVersionError, match="unknown api key 99"):
        kproto.decode_request(frame)
    frame = bytes.fromhex("0000000a" "0003" "0007" "00000001" "0000")
    with pytest.raises(UnsupportedVersionError, match="Metadata has no version 7"):
        kproto.decode_request(frame)
    with pytest.raises(UnsupportedVersionError):
        HEARTBEAT.encode(1)
    with pytest.raises(UnsupportedVersionError):
        HeartbeatRequest.decode(b"", 5)


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
    msg = OC(group_id="g", topics=[OC.OffsetCommitRequestTopic(name="t", partitions=[
        P(partition_index=0, committed_offset=5, commit_timestamp=1234)])])
    with pytest.raises(UnsupportedVersionError, match="commit_timestamp"):
        msg.encode(2)
    assert OC.decode(msg.encode(1), 1) == msg
    # Fields Kafka marks ignorable (retention_time_ms) are dropped by older versions, as Kafka does.
    assert OC(group_id="g", retention_time_ms=60000).encode(0) == OC(group_id="g").encode(0)


@pytest.mark.parametrize("value", [2 ** 15, "not an int", None])
def test_bad_values_raise_encode_error(value):
    with pytest.raises(EncodeError):
        HeartbeatRequest(group_id="g", generation_id=value if value != 2 ** 15 else 2 ** 31).encode(0)


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
        got += reader.feed(stream[pos:pos + cut])
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
    unknown = E(99)
    assert int(unknown) == 99 and unknown.name == "UNKNOWN_CODE_99" and not unknown.retriable
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
    assert len(kproto.APIS) == 17
    assert kproto.APIS["Offsets"] is kproto.APIS[2] is kproto.APIS["listoffsets"]
    assert list(kproto.APIS[8].versions) == [0, 1, 2]
    assert kproto.APIS[7].request_header_version(0) == 0
