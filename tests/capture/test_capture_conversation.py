"""Kafka conversations over captures written with kproto.pcap.writer."""

from __future__ import annotations

import io
import struct
import subprocess
from typing import List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kproto
from kproto.capture.conversation import Exchange, KafkaConversations, Problem, ProblemKind, decode_capture
from kproto.pcap.writer import Impairments, Side, TcpConversation, plan_segments, write_capture
from kproto.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)

CLIENT = ("10.1.0.1", 51000)
SERVER = ("10.1.0.2", 9092)


def metadata_req(corr: int, topics=("orders",), client_id="kproto-test") -> bytes:
    msg = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    return kproto.encode_request(msg, 0, corr, client_id)


def metadata_resp(corr: int) -> bytes:
    broker = MetadataResponse.MetadataResponseBroker(node_id=1, host="broker-1", port=9092)
    return kproto.encode_response(MetadataResponse(brokers=[broker], topics=[]), 0, corr)


def heartbeat_req(corr: int) -> bytes:
    return kproto.encode_request(HeartbeatRequest(group_id="g", generation_id=3, member_id="m"), 0, corr, "c")


def heartbeat_resp(corr: int, code: int = 0) -> bytes:
    return kproto.encode_response(HeartbeatResponse(error_code=code), 0, corr)


def produce_req(corr: int, acks: int, payload_size: int = 0) -> bytes:
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"")
    msg = ProduceRequest(
        acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[part])]
    )
    frame = kproto.encode_request(msg, 1, corr, "p" * max(1, payload_size))
    return frame


def produce_resp(corr: int) -> bytes:
    return kproto.encode_response(ProduceResponse(responses=[], throttle_time_ms=0), 1, corr)


def decode(
    msgs,
    *,
    ports=(9092,),
    detect=True,
    impairments=None,
    mss=1460,
    client=CLIENT,
    server=SERVER,
    handshake=True,
    fmt="pcap",
    **conv_kw,
) -> Tuple[List[Exchange], List[Problem], list]:
    conv = TcpConversation(client, server, msgs, handshake=handshake, **conv_kw)
    buf = io.BytesIO()
    write_capture(buf, [conv], mss=mss, impairments=impairments, format=fmt)
    records = list(decode_capture(buf.getvalue(), ports=ports, detect=detect))
    return ([r for r in records if isinstance(r, Exchange)], [r for r in records if isinstance(r, Problem)], records)


def test_request_response_pairs_with_latency_and_sizes():
    req, resp = metadata_req(1), metadata_resp(1)
    exchanges, problems, _ = decode([(Side.CLIENT, req, 100.0), (Side.SERVER, resp, 100.25)])
    assert problems == []
    (ex,) = exchanges
    assert (ex.api_key, ex.api_name, ex.api_version, ex.correlation_id) == (3, "Metadata", 0, 1)
    assert ex.request_header.client_id == "kproto-test"
    assert [t.name for t in ex.request.topics] == ["orders"]
    assert ex.response.brokers[0].host == "broker-1" and ex.response_header.correlation_id == 1
    assert (ex.request_size, ex.response_size) == (len(req), len(resp))
    assert ex.client == CLIENT and ex.server == SERVER
    assert ex.request_time_ns == 100_000_000_000 and ex.response_time_ns == 100_250_000_000
    assert ex.latency_ns == 250_000_000
    assert ex.request_error is None and ex.response_error is None and ex.answered


def test_frames_split_over_many_segments_and_many_frames_per_segment():
    # Big requests cut at a tiny MSS, then several frames in one write (one segment).
    msgs = [
        (Side.CLIENT, metadata_req(1, topics=[f"topic-{i}" for i in range(200)]), 1.0),
        (Side.SERVER, metadata_resp(1), 1.1),
        (Side.CLIENT, heartbeat_req(2) + heartbeat_req(3) + metadata_req(4), 1.2),
        (Side.SERVER, heartbeat_resp(2) + heartbeat_resp(3, 27) + metadata_resp(4), 1.3),
    ]
    exchanges, problems, _ = decode(msgs, mss=97, impairments=Impairments(shuffle_window=6, seed=4))
    assert problems == []
    assert [(e.api_key, e.correlation_id) for e in exchanges] == [(3, 1), (12, 2), (12, 3), (3, 4)]
    assert len(exchanges[0].request.topics) == 200
    assert exchanges[2].response.error_code == 27


def test_acks_zero_produce_expects_no_response():
    msgs = [
        (Side.CLIENT, produce_req(1, acks=0), 1.0),
        (Side.CLIENT, produce_req(2, acks=1), 1.1),
        (Side.SERVER, produce_resp(2), 1.2),
    ]
    exchanges, problems, _ = decode(msgs)
    assert problems == []
    assert [(e.correlation_id, e.expects_response, e.answered) for e in exchanges] == [
        (1, False, False),
        (2, True, True),
    ]


def test_repeated_correlation_ids_pair_with_the_oldest_outstanding_request():
    msgs = [
        (Side.CLIENT, heartbeat_req(5), 1.0),
        (Side.CLIENT, metadata_req(5), 1.1),
        (Side.SERVER, heartbeat_resp(5), 1.2),
        (Side.SERVER, metadata_resp(5), 1.3),
    ]
    exchanges, problems, _ = decode(msgs)
    assert problems == []
    assert [(e.api_key, type(e.response).__name__) for e in exchanges] == [
        (12, "HeartbeatResponse"),
        (3, "MetadataResponse"),
    ]


def test_unanswered_requests_and_responses_without_request_are_reported():
    msgs = [
        (Side.CLIENT, heartbeat_req(1), 1.0),
        (Side.CLIENT, heartbeat_req(2), 1.1),
        (Side.SERVER, heartbeat_resp(2), 1.2),  # the broker answers in order: request 1 will never be answered
        (Side.SERVER, heartbeat_resp(99), 1.3),  # answers nothing we saw
        (Side.CLIENT, metadata_req(3), 1.4),  # never answered before the capture ends
    ]
    exchanges, problems, records = decode(msgs)
    assert [(e.correlation_id, e.answered) for e in exchanges] == [(1, False), (2, True), (3, False)]
    kinds = [p.kind for p in problems]
    assert kinds == [
        ProblemKind.UNANSWERED_REQUEST,
        ProblemKind.RESPONSE_WITHOUT_REQUEST,
        ProblemKind.UNANSWERED_REQUEST,
    ]
    assert problems[1].frame == heartbeat_resp(99)
    assert problems[0].packet is not None and problems[0].offset == 0
    # Records come out in the order they became known.
    assert records.index(exchanges[0]) < records.index(exchanges[1])


def test_decode_errors_and_length_mismatch_keep_the_exchange():
    bad_body = bytearray(heartbeat_req(1))
    bad_body[-4:] = b"\x7f\xff\xff\xff"  # member_id length runs past the frame
    bad_body = bytes(bad_body)
    body = heartbeat_req(2)[4:] + b"\x00\x01"  # two extra bytes the message does not use
    long_frame = struct.pack(">i", len(body)) + body
    msgs = [
        (Side.CLIENT, bad_body, 1.0),
        (Side.SERVER, heartbeat_resp(1), 1.1),
        (Side.CLIENT, long_frame, 1.2),
        (Side.SERVER, heartbeat_resp(2) + b"", 1.3),
    ]
    exchanges, problems, _ = decode(msgs)
    assert [p.kind for p in problems] == [ProblemKind.DECODE_ERROR, ProblemKind.LENGTH_MISMATCH]
    assert [
        (e.correlation_id, e.request is None, e.request_error is not None, e.response.error_code) for e in exchanges
    ] == [(1, True, True, 0), (2, True, True, 0)]
    assert isinstance(exchanges[0].request_error, kproto.DecodeError)


def test_unknown_api_version_and_response_decode_error():
    req = bytearray(heartbeat_req(1))
    req[6:8] = b"\x00\x05"  # Heartbeat v5 does not exist in 0.9
    msgs = [
        (Side.CLIENT, bytes(req), 1.0),
        (Side.SERVER, heartbeat_resp(1), 1.1),
        (Side.CLIENT, metadata_req(2), 1.2),
        (Side.SERVER, struct.pack(">ii", 6, 2) + b"\x00\x00", 1.3),  # metadata response cut short
    ]
    exchanges, problems, _ = decode(msgs)
    assert [p.kind for p in problems] == [
        ProblemKind.UNSUPPORTED_VERSION,
        ProblemKind.UNSUPPORTED_VERSION,
        ProblemKind.DECODE_ERROR,
    ]
    assert exchanges[1].response is None and exchanges[1].response_error is not None


def api_versions_newer_req(corr: int, version: int = 5, client_id: str = "newer-client") -> bytes:
    """An ApiVersions request in a version kproto does not know: header v2, then a body of the future."""
    name = client_id.encode()
    body = struct.pack(">hhih", 18, version, corr, len(name)) + name + b"\x00" + b"\x04kgo\x08v9.9.9\x00\x00"
    return struct.pack(">i", len(body)) + body


def api_versions_refusal(corr: int, code: int = 35) -> bytes:
    """Kafka's answer to an ApiVersions version it does not serve: the v0 layout, its own range."""
    body = struct.pack(">ihi", corr, code, 1) + struct.pack(">hhh", 18, 0, 4)
    return struct.pack(">i", len(body)) + body


def test_apiversions_newer_than_kproto_refused_in_v0_is_a_negotiation_not_a_problem():
    # A client newer than kproto and than the broker opens with its newest ApiVersions (franz-go does);
    # the broker answers UNSUPPORTED_VERSION in the v0 layout and the client retries in a version it lists.
    msgs = [
        (Side.CLIENT, api_versions_newer_req(0), 1.0),
        (Side.SERVER, api_versions_refusal(0), 1.1),
        (Side.CLIENT, metadata_req(1), 1.2),
        (Side.SERVER, metadata_resp(1), 1.3),
    ]
    for server, ports in ((SERVER, (9092,)), (("10.1.0.2", 19092), ())):  # also recognised on another port
        exchanges, problems, _ = decode(msgs, server=server, ports=ports)
        assert problems == []
        first, second = exchanges
        assert (first.api_key, first.api_version, first.request_header.client_id) == (18, 5, "newer-client")
        assert first.request is None and first.request_error is not None  # the body of a future version
        assert first.response_version == 0 and first.response.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in first.response.api_keys] == [(18, 0, 4)]
        assert second.response is not None and second.response_version is None
    # Any other answer leaves the request a version kproto cannot read, reported as such.
    for answer in (api_versions_refusal(0, code=0), struct.pack(">ii", 6, 0) + b"\x00\x00"):
        exchanges, problems, _ = decode([(Side.CLIENT, api_versions_newer_req(0), 1.0), (Side.SERVER, answer, 1.1)])
        assert ProblemKind.UNSUPPORTED_VERSION in [p.kind for p in problems]
        assert exchanges[0].response_version is None
    exchanges, problems, _ = decode([(Side.CLIENT, api_versions_newer_req(0), 1.0)])  # never answered
    assert [p.kind for p in problems] == [ProblemKind.UNSUPPORTED_VERSION, ProblemKind.UNANSWERED_REQUEST]


def test_controlled_shutdown_v0_header_without_client_id():
    req = kproto.encode_request(ControlledShutdownRequest(broker_id=1), 0, 5, None)
    resp = kproto.encode_response(ControlledShutdownResponse(), 0, 5)
    exchanges, problems, _ = decode([(Side.CLIENT, req, 1.0), (Side.SERVER, resp, 1.1)])
    assert problems == []
    assert exchanges[0].request.broker_id == 1 and exchanges[0].request_header.client_id is None


def _data_indices_of(msgs, mss: int):
    conv = TcpConversation(CLIENT, SERVER, msgs)
    return [
        (s.data_index, s.from_client, len(s.payload)) for s in plan_segments(conv, mss=mss) if s.data_index is not None
    ]


def test_loss_inside_a_request_keeps_the_pairing():
    big = metadata_req(1, topics=[f"t{i}" for i in range(100)])
    msgs = [
        (Side.CLIENT, big, 1.0),
        (Side.SERVER, metadata_resp(1), 1.1),
        (Side.CLIENT, heartbeat_req(2), 1.2),
        (Side.SERVER, heartbeat_resp(2), 1.3),
    ]
    # Segment 1 of the big request (bytes 200..399) is lost; its header (segment 0) survived.
    exchanges, problems, _ = decode(msgs, mss=200, impairments=Impairments(drop={1}))
    kinds = [p.kind for p in problems]
    assert kinds == [ProblemKind.CAPTURE_GAP, ProblemKind.INCOMPLETE_FRAME]
    assert problems[0].offset == 200
    assert [(e.correlation_id, e.request is None, e.response is not None) for e in exchanges] == [
        (1, True, True),
        (2, False, True),
    ]
    assert "missing from the capture" in str(exchanges[0].request_error)


def test_loss_of_a_frame_boundary_resynchronises():
    msgs = [
        (Side.CLIENT, heartbeat_req(1) + heartbeat_req(2) + heartbeat_req(3), 1.0),
        (Side.SERVER, heartbeat_resp(1) + heartbeat_resp(2) + heartbeat_resp(3), 1.1),
    ]
    hb = len(heartbeat_req(1))  # 25 bytes
    # With an MSS of 37 bytes, lost segment 1 (stream bytes 37..73) holds the tail of request 2 and all but
    # the last byte of request 3, size prefix included.
    exchanges, problems, _ = decode(msgs, mss=hb + hb // 2, impairments=Impairments(drop={1}))
    assert [(p.kind, p.offset) for p in problems] == [
        (ProblemKind.CAPTURE_GAP, 37),
        (ProblemKind.INCOMPLETE_FRAME, 25),  # request 2: its header survived, so it still pairs
        (ProblemKind.RESPONSE_WITHOUT_REQUEST, 20),  # response 3: its request was lost whole
        (ProblemKind.RESYNC_SKIPPED, 74),  # the one captured byte of request 3
    ]
    assert [(e.correlation_id, e.answered, e.request_error is None, e.response_error is None) for e in exchanges] == [
        (1, True, True, True),
        (2, True, False, True),
    ]


def test_midstream_capture_resynchronises_on_the_next_request():
    tail_of_previous = heartbeat_req(7)[9:]  # the end of a request whose start was not captured
    msgs = [
        (Side.CLIENT, tail_of_previous, 1.0),
        (Side.SERVER, heartbeat_resp(7), 1.1),  # answers the request we did not see: skipped while resyncing
        (Side.CLIENT, metadata_req(8), 1.2),
        (Side.SERVER, metadata_resp(8), 1.3),
    ]
    exchanges, problems, _ = decode(msgs, handshake=False, close=False)
    assert [(e.correlation_id, e.answered) for e in exchanges] == [(8, True)]
    assert {p.kind for p in problems} == {ProblemKind.RESYNC_SKIPPED}
    skipped = {p.direction: p.detail for p in problems}
    assert len(skipped) == 2


def test_huge_size_prefix_is_a_problem_and_reading_resumes():
    msgs = [(Side.CLIENT, b"\x7f\xff\xff\xf0" + b"junk" + metadata_req(1), 1.0), (Side.SERVER, metadata_resp(1), 1.1)]
    exchanges, problems, _ = decode(msgs)
    assert [p.kind for p in problems][:1] == [ProblemKind.FRAME_TOO_LARGE]
    assert [p.kind for p in problems][1:] == [ProblemKind.RESYNC_SKIPPED]
    assert [(e.correlation_id, e.answered) for e in exchanges] == [(1, True)]


def test_stream_ending_inside_a_frame():
    msgs = [(Side.CLIENT, metadata_req(1)[:-3], 1.0)]
    exchanges, problems, _ = decode(msgs)
    assert exchanges == []
    assert [p.kind for p in problems] == [ProblemKind.STREAM_ENDED_IN_FRAME]


def test_detection_on_other_ports_and_ignoring_other_traffic():
    msgs = [(Side.CLIENT, metadata_req(1), 1.0), (Side.SERVER, metadata_resp(1), 1.1)]
    server = ("10.1.0.2", 19092)
    exchanges, problems, _ = decode(msgs, server=server)
    assert [(e.correlation_id, e.server) for e in exchanges] == [(1, server)] and problems == []
    exchanges, problems, _ = decode(msgs, server=server, detect=False)
    assert exchanges == [] and problems == []
    exchanges, _, _ = decode(msgs, server=server, ports={19092}, detect=False)
    assert len(exchanges) == 1
    http = [(Side.CLIENT, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1.0), (Side.SERVER, b"HTTP/1.1 200 OK\r\n\r\n", 1.1)]
    exchanges, problems, _ = decode(http, server=("10.1.0.2", 80))
    assert exchanges == [] and problems == []
    # Without handshake on an unknown port, the side that sends plausible requests is the client.
    exchanges, problems, _ = decode(
        msgs + [(Side.CLIENT, heartbeat_req(2), 1.2), (Side.SERVER, heartbeat_resp(2), 1.3)],
        server=server,
        handshake=False,
    )
    assert [(e.correlation_id, e.client) for e in exchanges] == [(1, CLIENT), (2, CLIENT)]


def test_capture_damage_becomes_problems_in_order():
    conv = TcpConversation(CLIENT, SERVER, [(Side.CLIENT, metadata_req(1), 1.0), (Side.SERVER, metadata_resp(1), 1.1)])
    buf = io.BytesIO()
    write_capture(buf, [conv])
    data = buf.getvalue()[:-7]  # the final packet record cut short
    records = list(decode_capture(data))
    assert isinstance(records[0], Exchange)
    assert records[-1].kind is ProblemKind.CAPTURE and "truncated-file" in records[-1].detail


def test_max_outstanding_bounds_waiting_requests():
    conv = TcpConversation(CLIENT, SERVER, [(Side.CLIENT, b"".join(heartbeat_req(i) for i in range(10)), 1.0)])
    buf = io.BytesIO()
    write_capture(buf, [conv])
    records = list(decode_capture(buf.getvalue(), max_outstanding=3))
    early = [r for r in records if isinstance(r, Problem)]
    assert len(early) == 10 and all(p.kind is ProblemKind.UNANSWERED_REQUEST for p in early)
    assert "more than 3" in early[0].detail


def test_sans_io_interface_and_limits():
    with pytest.raises(ValueError):
        KafkaConversations(max_outstanding=0)
    k = KafkaConversations()
    assert k.records() == []
    k.finish()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 12),
    mss=st.integers(5, 400),
    seed=st.integers(0, 1000),
    window=st.integers(0, 6),
)
def test_any_segmentation_and_reordering_decodes_every_exchange(n, mss, seed, window):
    msgs = []
    for i in range(n):
        req = metadata_req(i, topics=[f"t{j}" for j in range(i % 5)]) if i % 2 else heartbeat_req(i)
        resp = metadata_resp(i) if i % 2 else heartbeat_resp(i, i)
        msgs += [(Side.CLIENT, req, 1.0 + i), (Side.SERVER, resp, 1.5 + i)]
    exchanges, problems, _ = decode(
        msgs, mss=mss, impairments=Impairments(shuffle_window=window, seed=seed), fmt="pcapng" if seed % 2 else "pcap"
    )
    assert problems == []
    assert [(e.correlation_id, e.answered, e.request_error, e.response_error) for e in exchanges] == [
        (i, True, None, None) for i in range(n)
    ]


@pytest.mark.usefixtures("tshark_required")
def test_tshark_pairs_the_same_requests_and_responses(tmp_path):
    msgs = []
    for i in range(1, 6):
        msgs += [
            (Side.CLIENT, heartbeat_req(i) if i % 2 else metadata_req(i), float(i)),
            (Side.SERVER, heartbeat_resp(i) if i % 2 else metadata_resp(i), i + 0.5),
        ]
    path = tmp_path / "kafka.pcap"
    write_capture(path, [TcpConversation(CLIENT, SERVER, msgs)], mss=50)
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(path),
            "-d",
            "tcp.port==9092,kafka",
            "-Y",
            "kafka",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "kafka.request_key",
            "-e",
            "kafka.correlation_id",
            "-e",
            "kafka.request_frame",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    rows = [line.split("\t") for line in out if line.strip()]
    requests = {int(num): (int(key), int(corr)) for num, key, corr, _ in rows if key}
    # tshark marks each response with the frame of the request it pairs with.
    theirs = sorted(requests[int(req_frame)] for _, key, _, req_frame in rows if not key and req_frame)
    ours = sorted((e.api_key, e.correlation_id) for e in decode_capture(path) if isinstance(e, Exchange) and e.answered)
    assert ours == theirs and len(ours) == 5


@settings(max_examples=80, deadline=None)
@given(
    chunks=st.lists(st.tuples(st.booleans(), st.binary(min_size=1, max_size=60)), min_size=1, max_size=12),
    seed=st.integers(0, 100),
    splice=st.booleans(),
)
def test_garbage_and_spliced_streams_only_give_records(chunks, seed, splice):
    # Random bytes, optionally spliced between real frames, on the Kafka port and on a detected port.
    msgs = []
    for i, (from_client, junk) in enumerate(chunks):
        side = Side.CLIENT if from_client else Side.SERVER
        data = junk
        if splice:
            data = (heartbeat_req(i) + junk) if from_client else (heartbeat_resp(i) + junk)
        msgs.append((side, data, 1.0 + i))
    for server in (SERVER, ("10.1.0.2", 7777)):
        drop = {seed % 7} if seed % 3 == 0 else set()
        exchanges, problems, records = decode(
            msgs, server=server, mss=23, impairments=Impairments(drop=drop, seed=seed), handshake=seed % 2 == 0
        )
        assert all(isinstance(r, (Exchange, Problem)) for r in records)
        for e in exchanges:
            assert e.request_size >= 12 and (e.response_size is None or e.response_size >= 8)
