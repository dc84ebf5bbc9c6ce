"""The mock broker spoken to with kproto's own sans-I/O client over real sockets."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from broker_client import SocketClient, fetch_request, first_partition, metadata_request, produce_request
from kproto import ErrorCode
from kproto.broker.append import prepare_append
from kproto.capture.conversation import Exchange, decode_capture
from kproto.messages import (
    DescribeGroupsRequest,
    GroupCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kproto.records import decode_message_set, encode_message_set
from kproto.testing import MockBroker

CODECS = [None, "gzip", "snappy", "lz4"]


def _messages(n: int, tag: str = "m") -> list:
    return [(f"k{i}".encode(), f"{tag}{i}".encode()) for i in range(n)]


@pytest.fixture
def broker():
    with MockBroker(topics={"t": 2}) as b:
        yield b


# ------------------------------------------------------------------------------------------------ produce


@pytest.mark.parametrize("codec", CODECS)
def test_produce_assigns_offsets_and_rewrites_wrappers(broker, client, codec) -> None:
    for batch in range(3):
        records = encode_message_set(_messages(5, f"b{batch}-"), codec=codec, base_offset=0)
        part = first_partition(client.request(produce_request("t", 0, records), 1))
        assert part.error_code == 0 and part.base_offset == batch * 5
    stored = broker.messages("t", 0)
    assert [m.offset for m in stored] == list(range(15))
    assert [m.value for m in stored[:5]] == [f"b0-{i}".encode() for i in range(5)]
    raw = first_partition(client.request(fetch_request("t", 0, 0), 1)).records.raw
    # Shallow entries: one per batch when compressed (wrapper offset = its last inner offset).
    shallow = []
    pos = 0
    while pos < len(raw):
        offset, size = struct.unpack_from(">qi", raw, pos)
        shallow.append((offset, raw[pos + 17] & 7))
        pos += 12 + size
    if codec is None:
        assert shallow == [(i, 0) for i in range(15)]
    else:
        assert shallow == [(4, CODECS.index(codec)), (9, CODECS.index(codec)), (14, CODECS.index(codec))]


def test_raw_snappy_from_librdkafka_is_stored_as_xerial() -> None:
    raw_snappy = encode_message_set(_messages(3), codec="snappy", snappy_framing="raw")
    prepared = prepare_append(raw_snappy, 10)
    assert not isinstance(prepared, ErrorCode)
    assert b"\x82SNAPPY\x00" in prepared.data
    assert [m.offset for m in decode_message_set(prepared.data)] == [10, 11, 12]


def test_produce_errors(broker, client) -> None:
    good = encode_message_set(_messages(1))
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert (
        first_partition(client.request(produce_request("t", 0, bytes(corrupt)), 1)).error_code
        == ErrorCode.CORRUPT_MESSAGE
    )
    assert (
        first_partition(client.request(produce_request("t", 9, good), 1)).error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        first_partition(client.request(produce_request("t", 0, good, acks=2), 1)).error_code
        == ErrorCode.INVALID_REQUIRED_ACKS
    )
    assert broker.high_watermark("t", 0) == 0


def test_message_too_large() -> None:
    with MockBroker(message_max_bytes=100) as broker, SocketClient((broker.host, broker.port)) as client:
        big = encode_message_set([(None, b"x" * 200)])
        assert (
            first_partition(client.request(produce_request("t", 0, big), 1)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        )


def test_acks_zero_gets_no_response_but_is_stored(broker, client) -> None:
    client.send(produce_request("t", 1, encode_message_set(_messages(4)), acks=0), 1)
    response = client.request(metadata_request("t"))
    assert response.topics[0].name == "t"
    assert broker.high_watermark("t", 1) == 4


def test_auto_create_on_metadata_and_produce() -> None:
    with MockBroker(default_partitions=3) as broker, SocketClient((broker.host, broker.port)) as client:
        response = client.request(metadata_request("new"))
        assert [p.partition_index for p in response.topics[0].partitions] == [0, 1, 2]
        assert response.brokers[0].port == broker.port
        client.request(produce_request("other", 2, encode_message_set(_messages(1))), 0)
        assert broker.topics() == {"new": 3, "other": 3}
        assert client.request(metadata_request("bad name!")).topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_no_auto_create() -> None:
    with MockBroker(auto_create_topics=False) as broker, SocketClient((broker.host, broker.port)) as client:
        assert client.request(metadata_request("x")).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        part = first_partition(client.request(produce_request("x", 0, encode_message_set(_messages(1)))))
        assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ------------------------------------------------------------------------------------------------ fetch


def test_fetch_truncates_at_max_bytes_with_a_partial_message(broker, client) -> None:
    client.request(produce_request("t", 0, encode_message_set(_messages(10))), 1)
    full = first_partition(client.request(fetch_request("t", 0, 0), 1)).records.raw
    cut = first_partition(client.request(fetch_request("t", 0, 3, max_bytes=70), 1))
    assert len(cut.records.raw) == 70 and cut.high_watermark == 10
    decoded = decode_message_set(cut.records.raw)
    assert decoded.partial and [m.offset for m in decoded] == [3, 4]
    entry = len(full) // 10  # ten entries of equal size
    assert cut.records.raw == full[3 * entry : 3 * entry + 70]
    assert first_partition(client.request(fetch_request("t", 0, 10), 1)).records.raw == b""
    assert first_partition(client.request(fetch_request("t", 0, 11), 1)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (
        first_partition(client.request(fetch_request("nope", 0, 0), 1)).error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_fetch_inside_a_compressed_wrapper_returns_the_whole_wrapper(broker, client) -> None:
    client.request(produce_request("t", 0, encode_message_set(_messages(5), codec="gzip")), 1)
    raw = first_partition(client.request(fetch_request("t", 0, 3), 1)).records.raw
    assert [m.offset for m in decode_message_set(raw)] == [0, 1, 2, 3, 4]


def test_fetch_long_poll_wakes_on_produce(broker) -> None:
    with SocketClient((broker.host, broker.port)) as fetcher, SocketClient((broker.host, broker.port)) as producer:
        fetcher.send(fetch_request("t", 1, 0, max_wait_ms=20_000, min_bytes=1), 1)
        later = threading.Timer(
            0.2, lambda: producer.request(produce_request("t", 1, encode_message_set(_messages(2))), 1)
        )
        later.start()
        part = first_partition(fetcher.receive().message)  # well before the 20 s max wait
        later.join(30)  # the producer's socket stays open until its answer is read
        assert [m.value for m in decode_message_set(part.records.raw)] == [b"m0", b"m1"]


def test_fetch_long_poll_times_out_empty(broker, client) -> None:
    part = first_partition(client.request(fetch_request("t", 0, 0, max_wait_ms=50, min_bytes=1), 1))
    assert part.error_code == 0 and part.records.raw == b""


def test_list_offsets(broker, client) -> None:
    client.request(produce_request("t", 0, encode_message_set(_messages(7))), 1)
    L = ListOffsetsRequest
    P = L.ListOffsetsTopic.ListOffsetsPartition
    request = L(
        replica_id=-1,
        topics=[
            L.ListOffsetsTopic(
                name="t",
                partitions=[
                    P(partition_index=0, timestamp=-1, max_num_offsets=1),
                    P(partition_index=1, timestamp=-2, max_num_offsets=1),
                    P(partition_index=5, timestamp=-1, max_num_offsets=1),
                ],
            )
        ],
    )
    parts = client.request(request).topics[0].partitions
    assert [(p.error_code, list(p.old_style_offsets)) for p in parts] == [
        (0, [7]),
        (0, [0]),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
    ]


# ------------------------------------------------------------------------------------------------ groups and offsets


def test_group_lifecycle_over_the_wire(broker, client) -> None:
    coordinator = client.request(GroupCoordinatorRequest(key="g"))
    assert (coordinator.error_code, coordinator.port) == (0, broker.port)
    join = client.request(
        JoinGroupRequest(
            group_id="g",
            session_timeout_ms=6000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")],
        )
    )
    assert join.error_code == 0 and join.generation_id == 1 and join.leader == join.member_id
    assert [m.metadata for m in join.members] == [b"m"]
    A = SyncGroupRequest.SyncGroupRequestAssignment
    sync = client.request(
        SyncGroupRequest(
            group_id="g",
            generation_id=1,
            member_id=join.member_id,
            assignments=[A(member_id=join.member_id, assignment=b"mine")],
        )
    )
    assert (sync.error_code, sync.assignment) == (0, b"mine")
    assert client.request(HeartbeatRequest(group_id="g", generation_id=1, member_id=join.member_id)).error_code == 0
    assert (
        client.request(HeartbeatRequest(group_id="g", generation_id=7, member_id=join.member_id)).error_code
        == ErrorCode.ILLEGAL_GENERATION
    )
    described = client.request(DescribeGroupsRequest(groups=["g", "unknown"])).groups
    assert [(g.group_id, g.group_state) for g in described] == [("g", "Stable"), ("unknown", "Dead")]
    assert described[0].members[0].client_host == "/127.0.0.1"
    assert [g.group_id for g in client.request(ListGroupsRequest()).groups] == ["g"]

    C = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id=join.member_id,
        retention_time_ms=-1,
        topics=[
            C(
                name="t",
                partitions=[
                    C.OffsetCommitRequestPartition(partition_index=0, committed_offset=42, committed_metadata="md")
                ],
            )
        ],
    )
    assert client.request(commit, 2).topics[0].partitions[0].error_code == 0
    F = OffsetFetchRequest.OffsetFetchRequestTopic
    fetched = client.request(OffsetFetchRequest(group_id="g", topics=[F(name="t", partition_indexes=[0, 1])]), 1)
    assert [(p.committed_offset, p.metadata, p.error_code) for p in fetched.topics[0].partitions] == [
        (42, "md", 0),
        (-1, "", 0),
    ]
    assert broker.committed("g") == {("t", 0): (42, "md")}
    assert client.request(LeaveGroupRequest(group_id="g", member_id=join.member_id)).error_code == 0
    left = broker.group("g")  # a group whose last member left is Empty and keeps its offsets (Kafka 0.10.1+)
    assert left is not None and left.state == "Empty" and left.members == ()


def test_offset_commit_v0_is_kept_apart_like_zookeeper(broker, client) -> None:
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = OffsetCommitRequest(
        group_id="zk",
        topics=[
            C(
                name="t",
                partitions=[
                    C.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="")
                ],
            )
        ],
    )
    assert client.request(commit, 0).topics[0].partitions[0].error_code == 0
    F = OffsetFetchRequest.OffsetFetchRequestTopic
    v0 = client.request(OffsetFetchRequest(group_id="zk", topics=[F(name="t", partition_indexes=[0, 1])]), 0)
    assert [(p.committed_offset, p.error_code) for p in v0.topics[0].partitions] == [
        (5, 0),
        (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert broker.committed("zk") == {}


def test_join_group_session_timeout_floor_is_configurable() -> None:
    def join(broker, timeout):
        with SocketClient((broker.host, broker.port)) as c:
            return c.request(
                JoinGroupRequest(
                    group_id="g",
                    session_timeout_ms=timeout,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
                )
            ).error_code

    with MockBroker() as default:
        assert join(default, 1000) == ErrorCode.INVALID_SESSION_TIMEOUT
    with MockBroker(min_session_timeout_ms=500) as fast:
        assert join(fast, 1000) == 0


# ------------------------------------------------------------------------------------------------ faults


def test_injected_errors_apply_n_times(broker, client) -> None:
    broker.inject("Produce", error=ErrorCode.NOT_LEADER_FOR_PARTITION, times=2)
    records = encode_message_set(_messages(1))
    codes = [first_partition(client.request(produce_request("t", 0, records), 1)).error_code for _ in range(3)]
    assert codes == [ErrorCode.NOT_LEADER_FOR_PARTITION] * 2 + [0]
    assert broker.high_watermark("t", 0) == 1


def test_injected_error_response_shapes(broker, client) -> None:
    broker.inject("Metadata", error=ErrorCode.LEADER_NOT_AVAILABLE)
    assert client.request(metadata_request("t")).topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    broker.inject(10, error=ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE)
    response = client.request(GroupCoordinatorRequest(key="g"))
    assert (response.error_code, response.node_id) == (ErrorCode.GROUP_COORDINATOR_NOT_AVAILABLE, -1)
    broker.inject("Fetch", error=ErrorCode.NOT_LEADER_FOR_PARTITION)
    assert first_partition(client.request(fetch_request("t", 0, 0), 1)).error_code == ErrorCode.NOT_LEADER_FOR_PARTITION


def test_injected_drop_closes_the_connection(broker) -> None:
    broker.inject("Metadata", drop=True)
    with SocketClient((broker.host, broker.port)) as client:
        client.send(metadata_request())
        assert client.closed_by_peer()
    with SocketClient((broker.host, broker.port)) as client:
        assert client.request(metadata_request("t")).topics[0].name == "t"


def test_injected_delay_keeps_order(broker, client) -> None:
    broker.inject("Metadata", delay=0.3)
    client.send(metadata_request("t"))
    client.send(GroupCoordinatorRequest(key="g"))
    first, second = client.receive(), client.receive()
    assert (first.api_key, second.api_key) == (3, 10)


def test_failed_acks_zero_produce_closes_the_connection(broker, client) -> None:
    broker.inject("Produce", error=ErrorCode.NOT_LEADER_FOR_PARTITION)
    client.send(produce_request("t", 0, encode_message_set(_messages(1)), acks=0), 1)
    assert client.closed_by_peer()


# ------------------------------------------------------------------------------------------------ robustness


def test_pipelined_requests_are_answered_in_order(broker) -> None:
    with SocketClient((broker.host, broker.port), max_in_flight=50) as client:
        for i in range(50):
            client.send(produce_request("t", i % 2, encode_message_set(_messages(1, f"p{i}-"))), 1)
        responses = [client.receive() for _ in range(50)]
        assert [r.correlation_id for r in responses] == list(range(50))
    assert broker.high_watermark("t", 0) + broker.high_watermark("t", 1) == 50


def test_malformed_requests_close_the_connection_not_the_broker(broker) -> None:
    garbage = [
        b"\x00\x00\x00\x04\x00\x63\x00\x00",  # unknown api key, truncated header
        struct.pack(">ihhih", 10, 3, 0, 1, 0),  # Metadata v0 missing its array
        struct.pack(">ihhih", 12, 3, 9, 1, 0) + b"\x00\x00\x00\x00",  # unknown version
        struct.pack(">i", 0x7FFFFFFF),  # frame beyond the size limit
        struct.pack(">ihhih", 14, 4, 0, 1, 0) + b"\x00" * 4,  # LeaderAndIsr: not served
    ]
    for data in garbage:
        with SocketClient((broker.host, broker.port)) as client:
            client.sock.sendall(data)
            assert client.closed_by_peer()
    with SocketClient((broker.host, broker.port)) as client:
        assert client.request(metadata_request("t")).topics[0].name == "t"


def test_thousands_of_quick_connections(broker) -> None:
    address = (broker.host, broker.port)
    for i in range(2000):
        with socket.create_connection(address, timeout=10) as sock:
            if i % 3 == 1:
                sock.sendall(b"\x00\x00\x00\x10garbage")
            elif i % 3 == 2:
                sock.sendall(b"\x00\x00")  # half a size prefix
    with SocketClient(address) as client:
        assert client.request(metadata_request("t")).topics[0].name == "t"
    deadline = time.monotonic() + 30
    while broker._server is not None and len(broker._server._tasks) > 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert broker.connections_accepted >= 2001
    assert len(broker._server._tasks) <= 2  # the timer task (and nothing left over per connection)


# ---------------------------------------------------------------------------------- recording, asyncio, quirks


def test_recorded_pcap_decodes(tmp_path: Path) -> None:
    path = tmp_path / "traffic.pcap"
    with MockBroker(record_pcap=path) as broker, SocketClient((broker.host, broker.port)) as client:
        client.request(metadata_request("t"))
        client.request(produce_request("t", 0, encode_message_set(_messages(3), codec="gzip")), 1)
        client.request(fetch_request("t", 0, 0), 1)
        port = broker.port
    exchanges = [r for r in decode_capture(str(path), ports={port}) if isinstance(r, Exchange)]
    assert [(e.api_key, e.api_version, e.answered) for e in exchanges] == [(3, 0, True), (0, 1, True), (1, 1, True)]
    assert [m.value for m in exchanges[2].response.responses[0].partitions[0].records] == [b"m0", b"m1", b"m2"]


def test_async_context_manager() -> None:
    async def main() -> list:
        async with MockBroker(topics={"a": 1}) as broker:
            reader, writer = await asyncio.open_connection(broker.host, broker.port)
            from kproto.connection import ClientConnection

            conn = ClientConnection()
            writer.write(conn.send(metadata_request("a"), 0).frame)
            events: list = []
            while not events:
                events = conn.receive_data(await reader.read(65536))
            writer.close()
            return [t.name for t in events[0].message.topics]

    assert asyncio.run(main()) == ["a"]


def test_broker_quirk_082_is_handled_by_the_quirky_client() -> None:
    with MockBroker(broker_quirks="0.8.2") as broker:
        with SocketClient((broker.host, broker.port), first_correlation_id=9, broker_quirks="0.8.2") as client:
            response = client.request(GroupCoordinatorRequest(key="g"))
            assert response.port == broker.port
            assert client.request(metadata_request("t")).topics[0].name == "t"
        with SocketClient((broker.host, broker.port), first_correlation_id=9) as strict:
            strict.send(GroupCoordinatorRequest(key="g"))
            with pytest.raises(Exception, match="correlation id 0"):
                strict.receive()
