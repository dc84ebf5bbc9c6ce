"""Sans-I/O client and server connections, driven byte by byte."""

from __future__ import annotations

import pytest

from kproto import LimitExceededError, ProtocolError
from kproto.connection import (
    CLIENT_TRANSITIONS,
    SERVER_TRANSITIONS,
    BadRequest,
    ClientClosed,
    ClientConnection,
    ClientEvent,
    ClientState,
    ConnectionClosed,
    InFlightLimitError,
    RequestReceived,
    Response,
    ServerConnection,
    ServerState,
)
from kproto.framing import encode_response
from kproto.messages import (
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from kproto.records import encode_message_set

# Worked example 7.1 (docs/protocol-notes.md): MetadataRequest v0, topics ['test'], client_id 'kproto',
# correlation_id 1.
EXAMPLE_7_1 = bytes.fromhex("0000001a000300000000000100066b70726f746f000000010004" + "test".encode().hex())


def _metadata_request(*topics: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics])


def _produce(acks: int) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    records = encode_message_set([(None, b"hello")])
    return ProduceRequest(
        acks=acks, timeout_ms=1000, topic_data=[T(name="test", partition_data=[P(index=0, records=records)])]
    )


def _produce_response() -> ProduceResponse:
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    return ProduceResponse(responses=[T(name="test", partition_responses=[P(index=0, error_code=0, base_offset=0)])])


def _feed_bytewise(conn, data: bytes) -> list:
    events = []
    for i in range(len(data)):
        events.extend(conn.receive_data(data[i : i + 1]))
    return events


def _answer(server: ServerConnection, request: RequestReceived) -> bytes:
    if request.api_key == 3:
        return server.send_response(request, MetadataResponse(brokers=[], topics=[]))
    if request.api_key == 0:
        return server.send_response(request, _produce_response())
    if request.api_key == 10:
        return server.send_response(request, GroupCoordinatorResponse(error_code=0, node_id=0, host="h", port=9092))
    return server.send_response(request, HeartbeatResponse(error_code=0))


# ------------------------------------------------------------------------------------------------ client


def test_client_frames_match_the_worked_example() -> None:
    client = ClientConnection(first_correlation_id=1)
    assert client.send(_metadata_request("test"), 0).frame == EXAMPLE_7_1
    assert client.state is ClientState.AWAITING


def test_client_decodes_a_response_fed_one_byte_at_a_time() -> None:
    client = ClientConnection(first_correlation_id=1)
    request = _metadata_request("test")
    client.send(request, 0)
    response = encode_response(
        MetadataResponse(
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=0, host="localhost", port=9092)], topics=[]
        ),
        0,
        1,
    )
    events = _feed_bytewise(client, response)
    assert len(events) == 1
    (event,) = events
    assert isinstance(event, Response)
    assert event.request is request and event.correlation_id == 1 and event.api_key == 3
    assert event.message.brokers[0].host == "localhost"
    assert client.state is ClientState.IDLE and client.in_flight == 0


def test_pipelined_requests_are_paired_in_order_and_decoded_with_their_own_version() -> None:
    client, server = ClientConnection(), ServerConnection()
    requests = [
        _metadata_request("a"),
        _produce(1),
        GroupCoordinatorRequest(key="g"),
        HeartbeatRequest(group_id="g", generation_id=1, member_id="m"),
    ]
    versions = [0, 1, 0, 0]
    wire = b"".join(client.send(r, v).frame for r, v in zip(requests, versions))
    assert client.in_flight == 4
    received = _feed_bytewise(server, wire)
    assert [r.correlation_id for r in received] == [0, 1, 2, 3]
    assert [r.api_version for r in received] == versions
    answers = b"".join(_answer(server, r) for r in received)
    assert server.state is ServerState.IDLE
    events = _feed_bytewise(client, answers)
    assert [e.request for e in events] == requests
    assert type(events[1].message) is ProduceResponse and events[1].api_version == 1
    assert events[1].message.throttle_time_ms == 0  # v1 layout decoded: throttle time present
    assert client.state is ClientState.IDLE


def test_acks_zero_produce_is_not_tracked_and_gets_no_response() -> None:
    client, server = ClientConnection(), ServerConnection()
    one_way, answered = client.send(_produce(0), 1), client.send(_metadata_request(), 0)
    assert (one_way.correlation_id, one_way.expects_response) == (0, False)
    assert (answered.correlation_id, answered.expects_response) == (1, True)
    wire = bytes(one_way) + bytes(answered)
    assert client.in_flight == 1
    received = _feed_bytewise(server, wire)
    assert [r.expects_response for r in received] == [False, True]
    with pytest.raises(ProtocolError, match="acks=0"):
        server.send_response(received[0], _produce_response())
    events = _feed_bytewise(client, _answer(server, received[1]))
    assert events[0].correlation_id == 1 and events[0].api_key == 3


def test_max_in_flight_refuses_with_a_clear_error_and_frees_up_on_response() -> None:
    client, server = ClientConnection(max_in_flight=2), ServerConnection()
    wire = client.send(_metadata_request(), 0).frame
    assert client.state is ClientState.AWAITING
    wire += client.send(_metadata_request(), 0).frame
    assert client.state is ClientState.FULL
    with pytest.raises(InFlightLimitError, match="max_in_flight=2"):
        client.send(_metadata_request(), 0)
    client.send(_produce(0), 0)  # acks=0 needs no slot
    received = _feed_bytewise(server, wire)
    _feed_bytewise(client, _answer(server, received[0]))
    assert client.state is ClientState.AWAITING
    client.send(_metadata_request(), 0)
    assert client.in_flight == 2


def test_out_of_order_response_raises() -> None:
    client = ClientConnection()
    client.send(_metadata_request(), 0)
    client.send(_metadata_request(), 0)
    with pytest.raises(ProtocolError, match="out of order"):
        _feed_bytewise(client, encode_response(MetadataResponse(brokers=[], topics=[]), 0, 1))
    assert client.state is ClientState.FAILED
    with pytest.raises(ProtocolError):
        client.receive_data(b"\x00")


def test_unknown_correlation_id_raises() -> None:
    client = ClientConnection()
    client.send(_metadata_request(), 0)
    with pytest.raises(ProtocolError, match="unknown correlation id 77"):
        client.receive_data(encode_response(MetadataResponse(brokers=[], topics=[]), 0, 77))


def test_response_with_nothing_in_flight_raises() -> None:
    client = ClientConnection()
    with pytest.raises(ProtocolError, match="no request is in flight"):
        client.receive_data(encode_response(MetadataResponse(brokers=[], topics=[]), 0, 0))
    assert client.state is ClientState.FAILED


def test_over_long_response_frame_raises_before_buffering() -> None:
    client = ClientConnection(max_frame_size=1000)
    client.send(_metadata_request(), 0)
    with pytest.raises(LimitExceededError):
        _feed_bytewise(client, (1001).to_bytes(4, "big"))
    assert client.state is ClientState.FAILED


def test_good_responses_before_a_violation_are_delivered_then_the_error_raises() -> None:
    client = ClientConnection()
    client.send(_metadata_request(), 0)
    client.send(_metadata_request(), 0)
    good = encode_response(MetadataResponse(brokers=[], topics=[]), 0, 0)
    bad = encode_response(MetadataResponse(brokers=[], topics=[]), 0, 9)
    events = client.receive_data(good + bad)
    assert [e.correlation_id for e in events] == [0]
    assert client.state is ClientState.FAILED
    with pytest.raises(ProtocolError, match="unknown correlation id 9"):
        client.receive_data(b"")


def test_peer_close_reports_the_unanswered_requests() -> None:
    client = ClientConnection()
    first = _metadata_request("x")
    client.send(first, 0)
    (event,) = client.receive_data(b"")
    assert isinstance(event, ConnectionClosed)
    assert [p.request for p in event.unanswered] == [first]
    assert client.state is ClientState.CLOSED
    with pytest.raises(ProtocolError, match="CLOSED"):
        client.send(first, 0)


def test_gcoordinator_correlation_id_zero_needs_the_082_quirk() -> None:
    response = encode_response(GroupCoordinatorResponse(error_code=0, node_id=1, host="b", port=9092), 0, 0)
    strict = ClientConnection(first_correlation_id=5)
    strict.send(GroupCoordinatorRequest(key="g"), 0)
    with pytest.raises(ProtocolError):
        _feed_bytewise(strict, response)

    quirky = ClientConnection(first_correlation_id=5, broker_quirks="0.8.2")
    request = GroupCoordinatorRequest(key="g")
    quirky.send(request, 0)
    (event,) = _feed_bytewise(quirky, response)
    assert event.request is request and event.correlation_id == 0 and event.message.node_id == 1


def test_082_quirk_applies_only_to_group_coordinator() -> None:
    quirky = ClientConnection(first_correlation_id=5, broker_quirks="0.8.2")
    quirky.send(_metadata_request(), 0)
    with pytest.raises(ProtocolError):
        quirky.receive_data(encode_response(MetadataResponse(brokers=[], topics=[]), 0, 0))


def test_unknown_quirk_is_refused() -> None:
    with pytest.raises(ValueError):
        ClientConnection(broker_quirks="0.7")


def test_correlation_ids_wrap_at_int32() -> None:
    client = ClientConnection(first_correlation_id=0x7FFFFFFF)
    client.send(_metadata_request(), 0)
    client.send(_metadata_request(), 0)
    assert [p.correlation_id for p in client.pending()] == [0x7FFFFFFF, 0]


# ------------------------------------------------------------------------------------------------ server


def test_server_parses_the_worked_example_byte_by_byte() -> None:
    server = ServerConnection()
    (event,) = _feed_bytewise(server, EXAMPLE_7_1)
    assert isinstance(event, RequestReceived)
    assert event.correlation_id == 1 and event.header.client_id == "kproto"
    assert [t.name for t in event.message.topics] == ["test"]
    assert server.state is ServerState.OWING


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 10_000])
def test_server_handles_any_chunking(chunk: int) -> None:
    client, server = ClientConnection(), ServerConnection()
    wire = b"".join(client.send(_metadata_request(f"t{i}"), 0).frame for i in range(20))
    events = []
    for i in range(0, len(wire), chunk):
        events.extend(server.receive_data(wire[i : i + chunk]))
    assert [e.message.topics[0].name for e in events] == [f"t{i}" for i in range(20)]
    assert server.buffered == 0


def test_server_enforces_in_order_answers() -> None:
    client, server = ClientConnection(), ServerConnection()
    first, second = _feed_bytewise(
        server, client.send(_metadata_request(), 0).frame + client.send(_metadata_request(), 0).frame
    )
    with pytest.raises(ProtocolError, match="request order"):
        server.send_response(second, MetadataResponse(brokers=[], topics=[]))
    server.send_response(first, MetadataResponse(brokers=[], topics=[]))
    with pytest.raises(ProtocolError, match="already answered"):
        server.send_response(first, MetadataResponse(brokers=[], topics=[]))
    with pytest.raises(ProtocolError, match="does not answer"):
        server.send_response(second, HeartbeatResponse(error_code=0))
    server.send_response(second, MetadataResponse(brokers=[], topics=[]))
    assert server.state is ServerState.IDLE


def test_server_reports_undecodable_frames_and_keeps_framing() -> None:
    server = ServerConnection()
    unknown_key = (8 + 2).to_bytes(4, "big") + bytes.fromhex("00630000 00000001 0000")
    truncated = bytes.fromhex("0000000a 0003 0000 00000002 0000")  # Metadata v0 without its topics array
    good = ClientConnection(first_correlation_id=3).send(_metadata_request(), 0).frame
    events = _feed_bytewise(server, unknown_key + truncated + good)
    assert [type(e) for e in events] == [BadRequest, BadRequest, RequestReceived]
    assert events[0].header is not None and events[0].header.api_key == 0x63
    assert events[2].correlation_id == 3
    assert server.owed == 1


def test_server_rejects_over_long_frames() -> None:
    server = ServerConnection(max_frame_size=100)
    with pytest.raises(LimitExceededError):
        server.receive_data(b"\x00\x00\x01\x00")
    assert server.state is ServerState.FAILED
    with pytest.raises(LimitExceededError):
        server.receive_data(b"")


def test_server_negative_frame_size_is_a_limit_error() -> None:
    with pytest.raises(LimitExceededError):
        ServerConnection().receive_data(b"\xff\xff\xff\xff")


def test_server_end_of_stream() -> None:
    client, server = ClientConnection(), ServerConnection()
    server.receive_data(client.send(_metadata_request(), 0).frame)
    (event,) = server.receive_data(b"")
    assert isinstance(event, ClientClosed) and event.unanswered == 1
    assert server.state is ServerState.CLOSED


def test_server_082_quirk_answers_group_coordinator_with_id_zero() -> None:
    client = ClientConnection(first_correlation_id=42, broker_quirks="0.8.2")
    server = ServerConnection(broker_quirks="0.8.2")
    (request,) = server.receive_data(client.send(GroupCoordinatorRequest(key="g"), 0).frame)
    frame = server.send_response(request, GroupCoordinatorResponse(error_code=0, node_id=0, host="h", port=1))
    assert frame[4:8] == b"\x00\x00\x00\x00"
    (event,) = _feed_bytewise(client, frame)
    assert event.message.host == "h"


def test_state_tables_cover_only_legal_moves() -> None:
    # Sending on a full or closed connection, and answers while idle, are absent from the tables.
    assert (ClientState.FULL, ClientEvent.SEND) not in CLIENT_TRANSITIONS
    assert (ClientState.IDLE, ClientEvent.ANSWER_LAST) not in CLIENT_TRANSITIONS
    assert all(state is not ClientState.CLOSED or event.name == "CLOSE" for state, event in CLIENT_TRANSITIONS)
    assert all(state is not ServerState.FAILED or event.name == "CLOSE" for state, event in SERVER_TRANSITIONS)
