"""Golden bytes: the worked examples of docs/protocol-notes.md, built byte by byte
and re-checked there against kafka-python and Kafka's JSON definitions.  kproto must produce exactly these
bytes from the described values, and decode them back to those values."""

from __future__ import annotations

import pytest

import kproto
from kproto.messages import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ControlledShutdownRequest,
    FetchResponse,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
    SyncGroupRequest,
)

HELLO_SET = bytes.fromhex("00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f")

EX_7_1 = "0000001a000300000000000100066b70726f746f00000001000474657374"
EX_7_2 = (
    "0000004b000000000000000200066b70726f746f0001000003e80000000100047465737400000001000000000000001f"
    "00000000000000000000001387a77ab20000ffffffff0000000568656c6c6f"
)
EX_7_3 = (
    "00000044000b00000000000300066b70726f746f00036772700000753000000008636f6e73756d657200000001000572616e"
    "67650000001000000000000100047465737400000000"
)
EX_7_4 = (
    "0000004500000001000000010000000000096c6f63616c686f73740000238400000001000000047465737400000001000000"
    "0000000000000000000001000000000000000100000000"
)
EX_7_5 = (
    "0000004d000e00000000000400066b70726f746f00036772700000000100086b70726f746f2d310000000100086b70726f74"
    "6f2d3100000018000000000001000474657374000000010000000000000000"
)
EX_7_6A = "0000000c000700000000000500000001"
EX_7_6B = "00000014000700010000000500066b70726f746f00000001"
EX_7_7A = "000000200000000200000001000474657374000000010000000000000000000000000000"
EX_7_7B = "00000024000000020000000100047465737400000001000000000000000000000000000000000000"
EX_7_8 = (
    "0000005700000007000000010004746573740000000100000000000000000000000000020000003300000000000000000000"
    "001387a77ab20000ffffffff0000000568656c6c6f0000000000000001000000138bc0cd770000ffff"
)


def test_7_1_metadata_request():
    msg = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="test")])
    assert kproto.encode_request(msg, 0, 1, "kproto").hex() == EX_7_1
    header, decoded = kproto.decode_request(bytes.fromhex(EX_7_1))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 0, 1, "kproto")
    assert decoded == msg


def test_7_2_produce_request_with_one_message():
    P = ProduceRequest
    msg = P(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            P.TopicProduceData(
                name="test", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=HELLO_SET)]
            )
        ],
    )
    assert kproto.encode_request(msg, 0, 2, "kproto").hex() == EX_7_2
    _, decoded = kproto.decode_request(bytes.fromhex(EX_7_2))
    assert decoded == msg
    assert decoded.topic_data[0].partition_data[0].records.raw == HELLO_SET


def test_7_3_join_group_with_embedded_subscription():
    metadata = ConsumerProtocolSubscription(topics=["test"]).encode_embedded(0)
    msg = JoinGroupRequest(
        group_id="grp",
        session_timeout_ms=30000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )
    assert kproto.encode_request(msg, 0, 3, "kproto").hex() == EX_7_3
    _, decoded = kproto.decode_request(bytes.fromhex(EX_7_3))
    assert decoded == msg
    version, sub = ConsumerProtocolSubscription.decode_embedded(decoded.protocols[0].metadata)
    assert (version, sub.topics, sub.user_data) == (0, ["test"], b"")


def test_7_4_metadata_response():
    M = MetadataResponse
    msg = M(
        brokers=[M.MetadataResponseBroker(node_id=0, host="localhost", port=9092)],
        topics=[
            M.MetadataResponseTopic(
                error_code=0,
                name="test",
                partitions=[
                    M.MetadataResponseTopic.MetadataResponsePartition(
                        error_code=0, partition_index=0, leader_id=0, replica_nodes=[0], isr_nodes=[0]
                    )
                ],
            )
        ],
    )
    assert kproto.encode_response(msg, 0, 1).hex() == EX_7_4
    header, decoded = kproto.decode_response(bytes.fromhex(EX_7_4), 3, 0)
    assert header.correlation_id == 1 and decoded == msg


def test_7_5_sync_group_with_embedded_assignment():
    A = ConsumerProtocolAssignment
    assignment = A(assigned_partitions=[A.TopicPartition(topic="test", partitions=[0])]).encode_embedded(0)
    assert len(assignment) == 24
    msg = SyncGroupRequest(
        group_id="grp",
        generation_id=1,
        member_id="kproto-1",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id="kproto-1", assignment=assignment)],
    )
    assert kproto.encode_request(msg, 0, 4, "kproto").hex() == EX_7_5
    _, decoded = kproto.decode_request(bytes.fromhex(EX_7_5))
    assert decoded == msg


def test_7_6_controlled_shutdown_v0_has_no_client_id_and_v1_has_one():
    msg = ControlledShutdownRequest(broker_id=1)
    assert kproto.encode_request(msg, 0, 5, "kproto").hex() == EX_7_6A
    assert kproto.encode_request(msg, 1, 5, "kproto").hex() == EX_7_6B
    header, decoded = kproto.decode_request(bytes.fromhex(EX_7_6A))
    assert header.client_id is None and decoded.broker_id == 1
    header, decoded = kproto.decode_request(bytes.fromhex(EX_7_6B))
    assert header.client_id == "kproto" and decoded.broker_id == 1


def test_7_7_produce_response_v1_appends_throttle_time():
    R = ProduceResponse
    msg = R(
        responses=[
            R.TopicProduceResponse(
                name="test",
                partition_responses=[
                    R.TopicProduceResponse.PartitionProduceResponse(index=0, error_code=0, base_offset=0)
                ],
            )
        ]
    )
    assert kproto.encode_response(msg, 0, 2).hex() == EX_7_7A
    assert kproto.encode_response(msg, 1, 2).hex() == EX_7_7B
    assert kproto.decode_response(bytes.fromhex(EX_7_7B), 0, 1)[1] == msg


def test_7_8_fetch_response_keeps_a_truncated_trailing_message_as_raw_bytes():
    header, decoded = kproto.decode_response(bytes.fromhex(EX_7_8), 1, 0)
    part = decoded.responses[0].partitions[0]
    assert (header.correlation_id, part.partition_index, part.high_watermark) == (7, 0, 2)
    assert len(part.records.raw) == 51
    assert kproto.encode_response(decoded, 0, 7).hex() == EX_7_8


def test_fetch_v1_puts_throttle_time_first():
    msg = FetchResponse(throttle_time_ms=0x01020304, responses=[])
    assert msg.encode(1) == bytes.fromhex("01020304 00000000")
    assert msg.encode(0) == bytes.fromhex("00000000")  # ignorable: dropped silently in v0


@pytest.mark.parametrize("hex_frame", [EX_7_1, EX_7_2, EX_7_3, EX_7_5, EX_7_6A, EX_7_6B])
def test_every_golden_request_reencodes_identically(hex_frame):
    frame = bytes.fromhex(hex_frame)
    header, msg = kproto.decode_request(frame)
    assert kproto.encode_request(msg, header.api_version, header.correlation_id, header.client_id) == frame
