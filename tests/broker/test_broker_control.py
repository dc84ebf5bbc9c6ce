"""The mock broker's control plane at every version it advertises: ApiVersions, Metadata, FindCoordinator,
admin requests, SASL PLAIN, version refusal and bad input (kproto's own client over real sockets)."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import uuid
from typing import Any, List

import pytest

from broker_client import SocketClient, metadata_request
from kproto import ErrorCode
from kproto.apis import APIS
from kproto.broker.config import BrokerConfig
from kproto.broker.control import CONTROL_PLANE_VERSIONS
from kproto.broker.served_versions import served_table
from kproto.broker.data_plane import SERVED_VERSIONS as DATA_PLANE_VERSIONS
from kproto.broker.core import SERVED_VERSIONS, BrokerCore
from kproto.broker.sasl import check_plain
from kproto.connection import ClientConnection
from kproto.connection.server import RequestReceived, ServerConnection
from kproto.framing import decode_response, encode_request
from kproto.group.coordinator import SERVED_VERSIONS as COORDINATOR_VERSIONS
from kproto.messages import (
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from kproto.records import encode_record_batch
from kproto.testing import MockBroker

_C = ErrorCode


@pytest.fixture
def broker():
    with MockBroker(topics={"t": 2}) as b:
        yield b


def _raw_exchange(sock: socket.socket, frame: bytes) -> bytes:
    """Send a frame, return the body of the next response frame (after the size prefix)."""
    sock.sendall(frame)
    head = _recv_exact(sock, 4)
    return _recv_exact(sock, struct.unpack(">i", head)[0])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


# ------------------------------------------------------------------------------------------------ one table


def test_served_table_is_each_owners_declaration_merged() -> None:
    for key, served in CONTROL_PLANE_VERSIONS.items():
        assert SERVED_VERSIONS[key] == served
    for key, served in DATA_PLANE_VERSIONS.items():
        assert SERVED_VERSIONS[key] == served
    for request, (low, high) in COORDINATOR_VERSIONS.items():
        assert SERVED_VERSIONS[request.API_KEY][1] == high
    assert SERVED_VERSIONS[8][0] == 0  # OffsetCommit v0 from the broker, v1+ from the coordinator
    with pytest.raises(ValueError, match="gap"):
        served_table({8: (0, 0)}, {8: (2, 3)})
    with pytest.raises(ValueError, match="outside the codecs"):
        served_table({3: (0, 99)})


def test_api_versions_every_version_advertises_the_table(broker, client) -> None:
    for version in range(5):
        request = ApiVersionsRequest(client_software_name="kproto-test", client_software_version="1.0")
        response = client.request(request, version)
        assert response.error_code == 0
        assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SERVED_VERSIONS
    bad = client.request(ApiVersionsRequest(client_software_name="-bad", client_software_version="1"), 3)
    assert bad.error_code == _C.INVALID_REQUEST


def test_api_versions_in_an_unknown_version_gets_the_v0_fallback_and_the_connection_stays(broker) -> None:
    body = struct.pack(">hhih", 18, 9, 7, 3) + b"cli" + b"\x00"  # ApiVersions v9, then junk a v9 might carry
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        answer = _raw_exchange(sock, struct.pack(">i", len(body)) + body)
        header, response = decode_response(struct.pack(">i", len(answer)) + answer, 18, 0)
        assert header.correlation_id == 7 and response.error_code == _C.UNSUPPORTED_VERSION
        assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SERVED_VERSIONS
        # The client retries in a version both know, on the same connection.
        frame = encode_request(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3, 8, "cli")
        answer = _raw_exchange(sock, frame)
        _, response = decode_response(struct.pack(">i", len(answer)) + answer, 18, 3)
        assert response.error_code == 0


def test_a_readable_version_the_broker_does_not_serve_is_unsupported_version(broker, client) -> None:
    # InitProducerId v6 (two-phase commit): the codecs read it, the broker serves up to v5.
    response = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 6)
    assert response.error_code == _C.UNSUPPORTED_VERSION
    assert client.request(metadata_request("t"), 1).topics[0].error_code == 0  # still served


def test_an_acks_0_produce_in_a_version_the_broker_does_not_serve_gets_no_answer() -> None:
    # Found by fuzz/fuzz_broker_requests.py: Produce v12 (readable, not served) with acks=0.
    records = encode_record_batch([(None, b"v")])
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=[T(name="t", partition_data=[T.PartitionProduceData(index=0, records=records)])],
    )
    frame = ClientConnection().send(request, SERVED_VERSIONS[0][1] + 1).frame
    (received,) = ServerConnection().receive_data(frame)
    assert isinstance(received, RequestReceived) and not received.expects_response
    core = BrokerCore(BrokerConfig())
    core.cluster.create_topic("t", 1)
    assert asyncio.run(core.handle(received, "/127.0.0.1")) is None
    assert core.cluster.lookup("t")[0].high_watermark == 0


def test_malformed_flexible_frame_closes_only_that_connection_with_a_logged_reason(broker, caplog) -> None:
    # Metadata v12 (flexible) whose compact array length claims more topics than the bytes hold.
    frame = encode_request(MetadataRequest(topics=[]), 12, 1, "cli")
    bad = frame[:-2] + b"\x7f\x00"
    bad = struct.pack(">i", len(bad) - 4) + bad[4:]
    with caplog.at_level(logging.INFO, logger="kproto.broker"):
        with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
            sock.sendall(bad)
            assert sock.recv(10) == b""
        with SocketClient((broker.host, broker.port)) as other:
            assert other.request(metadata_request("t"), 12).topics[0].error_code == 0
    assert any("bad request" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------------ Metadata


def test_metadata_every_version(broker, client) -> None:
    ids = set()
    for version in range(13):
        response = client.request(metadata_request("t"), version)
        (topic,) = response.topics
        assert topic.error_code == 0 and [p.partition_index for p in topic.partitions] == [0, 1]
        assert response.brokers[0].port == broker.port
        if version >= 1:
            assert response.controller_id == 0 and topic.is_internal is False
        if version >= 2:
            assert response.cluster_id == "kproto-mock-cluster"
        if version >= 10:
            ids.add(topic.topic_id)
    assert len(ids) == 1 and uuid.UUID(int=0) not in ids
    everything = client.request(MetadataRequest(topics=None), 1)
    assert [t.name for t in everything.topics] == ["t"]
    assert client.request(MetadataRequest(topics=[]), 1).topics == []


def test_metadata_auto_creation_and_topic_ids(broker, client) -> None:
    asked = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="new")], allow_auto_topic_creation=False)
    assert client.request(asked, 4).topics[0].error_code == _C.UNKNOWN_TOPIC_OR_PARTITION
    asked.allow_auto_topic_creation = True
    assert client.request(asked, 4).topics[0].error_code == 0
    topic_id = client.request(metadata_request("t"), 12).topics[0].topic_id
    by_id = client.request(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)]), 12
    )
    assert by_id.topics[0].name == "t"
    unknown = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())])
    assert client.request(unknown, 12).topics[0].error_code == _C.UNKNOWN_TOPIC_ID
    ops = MetadataRequest(
        topics=None, include_topic_authorized_operations=True, include_cluster_authorized_operations=True
    )
    answer = client.request(ops, 9)
    assert answer.topics[0].topic_authorized_operations > 0 and answer.cluster_authorized_operations > 0


# ------------------------------------------------------------------------------------------------ FindCoordinator


def test_find_coordinator_every_version(broker, client) -> None:
    for version in range(4):
        response = client.request(FindCoordinatorRequest(key="g", key_type=0), version)
        assert (response.error_code, response.node_id, response.port) == (0, 0, broker.port)
    batched = client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx1", "tx2"]), 6)
    assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == [
        ("tx1", 0, broker.port),
        ("tx2", 0, broker.port),
    ]
    bad = client.request(FindCoordinatorRequest(key="g", key_type=7), 3)
    assert bad.error_code == _C.INVALID_REQUEST and bad.node_id == -1


# ------------------------------------------------------------------------------------------------ admin


def _new_topic(name: str, partitions: int = -1, factor: int = -1, **kw) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=factor, **kw)


def test_create_topics_as_admin_clients_call_it(broker, client) -> None:
    C = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
    request = CreateTopicsRequest(timeout_ms=1000, validate_only=True, topics=[_new_topic("a", 3)])
    answer = client.request(request, 7)
    assert answer.topics[0].error_code == 0 and answer.topics[0].num_partitions == 3
    assert "a" not in broker.topics()  # validate_only
    request = CreateTopicsRequest(
        timeout_ms=1000,
        topics=[
            _new_topic("a", 3, configs=[C(name="retention.ms", value="1000")]),
            _new_topic("b"),
            _new_topic("t"),
            _new_topic("c", 1, 3),
            _new_topic("d", 0),
            _new_topic("bad/name"),
            _new_topic("e", 1, configs=[C(name="no.such.config", value="1")]),
        ],
    )
    codes = {t.name: t.error_code for t in client.request(request, 5).topics}
    assert codes == {
        "a": 0,
        "b": 0,
        "t": _C.TOPIC_ALREADY_EXISTS,
        "c": _C.INVALID_REPLICATION_FACTOR,
        "d": _C.INVALID_PARTITIONS,
        "bad/name": _C.INVALID_TOPIC_EXCEPTION,
        "e": _C.INVALID_CONFIG,
    }
    assert broker.topics() == {"t": 2, "a": 3, "b": 1}
    for version in range(8):  # every version reads and answers
        answer = client.request(CreateTopicsRequest(timeout_ms=1, topics=[_new_topic(f"v{version}", 1, 1)]), version)
        assert answer.topics[0].error_code == 0
    dup = client.request(CreateTopicsRequest(timeout_ms=1, topics=[_new_topic("x"), _new_topic("x")]), 4)
    assert [t.error_code for t in dup.topics] == [_C.INVALID_REQUEST] * 2

    R = DescribeConfigsRequest.DescribeConfigsResource
    described = client.request(
        DescribeConfigsRequest(
            resources=[
                R(resource_type=2, resource_name="a", configuration_keys=None),
                R(resource_type=4, resource_name="0"),
                R(resource_type=2, resource_name="missing"),
                R(resource_type=9, resource_name="x"),
            ],
            include_synonyms=True,
            include_documentation=True,
        ),
        4,
    )
    topic, broker_configs, missing, other = described.results
    configs = {c.name: (c.value, c.config_source) for c in topic.configs}
    assert configs["retention.ms"] == ("1000", 1) and configs["cleanup.policy"] == ("delete", 5)
    assert {c.name for c in broker_configs.configs} >= {"broker.id", "message.max.bytes", "num.partitions"}
    assert (missing.error_code, other.error_code) == (_C.UNKNOWN_TOPIC_OR_PARTITION, _C.INVALID_REQUEST)
    for version in range(5):
        keys = client.request(
            DescribeConfigsRequest(
                resources=[R(resource_type=2, resource_name="a", configuration_keys=["retention.ms"])]
            ),
            version,
        )
        assert [(c.name, c.value) for c in keys.results[0].configs] == [("retention.ms", "1000")]


def test_delete_topics_and_create_partitions(broker, client) -> None:
    client.request(CreateTopicsRequest(timeout_ms=1, topics=[_new_topic("a", 1), _new_topic("b", 1)]), 4)
    assert (
        client.request(DeleteTopicsRequest(timeout_ms=1, topic_names=["a", "nope"]), 0).responses[1].error_code
        == _C.UNKNOWN_TOPIC_OR_PARTITION
    )
    topic_id = client.request(metadata_request("b"), 12).topics[0].topic_id
    T = DeleteTopicsRequest.DeleteTopicState
    answer = client.request(DeleteTopicsRequest(timeout_ms=1, topics=[T(name=None, topic_id=topic_id)]), 6)
    assert (answer.responses[0].name, answer.responses[0].error_code) == ("b", 0)
    assert broker.topics() == {"t": 2}

    P = CreatePartitionsRequest.CreatePartitionsTopic
    answer = client.request(
        CreatePartitionsRequest(
            timeout_ms=1,
            validate_only=False,
            topics=[P(name="t", count=4, assignments=None), P(name="nope", count=2, assignments=None)],
        ),
        3,
    )
    assert [r.error_code for r in answer.results] == [0, _C.UNKNOWN_TOPIC_OR_PARTITION]
    shrink = client.request(CreatePartitionsRequest(timeout_ms=1, topics=[P(name="t", count=2)]), 0)
    assert shrink.results[0].error_code == _C.INVALID_PARTITIONS
    assert broker.topics() == {"t": 4}


def test_describe_cluster(broker, client) -> None:
    for version in range(3):
        answer = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1), version
        )
        assert answer.error_code == 0 and answer.cluster_id == "kproto-mock-cluster"
        assert [(b.broker_id, b.port) for b in answer.brokers] == [(0, broker.port)]
    assert client.request(DescribeClusterRequest(endpoint_type=2), 1).error_code == _C.UNSUPPORTED_ENDPOINT_TYPE


# ------------------------------------------------------------------------------------------------ SASL


def test_plain_token_rules() -> None:
    users = {"alice": "s3cret"}
    assert check_plain(b"\0alice\0s3cret", users) == ("alice", "")
    assert check_plain(b"alice\0alice\0s3cret", users)[0] == "alice"
    for token in (b"\0alice\0wrong", b"bob\0alice\0s3cret", b"\0alice", b"\0\xff\0x", b"\0nobody\0s3cret"):
        assert check_plain(token, users)[0] is None


@pytest.fixture
def sasl_broker():
    with MockBroker(topics={"t": 1}, sasl_plain_users={"alice": "s3cret"}) as b:
        yield b


def test_sasl_v1_handshake_then_authenticate(sasl_broker) -> None:
    with SocketClient((sasl_broker.host, sasl_broker.port)) as client:
        assert client.request(ApiVersionsRequest(), 0).error_code == 0  # allowed before authentication
        wrong = client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        assert (wrong.error_code, wrong.mechanisms) == (_C.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0s3cret"), 2)
        assert answer.error_code == 0
        assert client.request(metadata_request("t"), 9).topics[0].error_code == 0
    with SocketClient((sasl_broker.host, sasl_broker.port)) as client:
        client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"), 0)
        assert answer.error_code == _C.SASL_AUTHENTICATION_FAILED
        assert client.closed_by_peer()


def test_sasl_v0_handshake_then_bare_token(sasl_broker) -> None:
    with socket.create_connection((sasl_broker.host, sasl_broker.port), timeout=30) as sock:
        answer = _raw_exchange(sock, encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 0, 1, "old"))
        _, handshake = decode_response(struct.pack(">i", len(answer)) + answer, 17, 0)
        assert handshake.error_code == 0
        token = b"\0alice\0s3cret"
        assert _raw_exchange(sock, struct.pack(">i", len(token)) + token) == b""  # empty server token
        answer = _raw_exchange(sock, encode_request(metadata_request("t"), 1, 2, "old"))
        _, metadata = decode_response(struct.pack(">i", len(answer)) + answer, 3, 1)
        assert metadata.topics[0].error_code == 0
    with socket.create_connection((sasl_broker.host, sasl_broker.port), timeout=30) as sock:
        _raw_exchange(sock, encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 0, 1, "old"))
        sock.sendall(struct.pack(">i", 12) + b"\0alice\0wrong")
        assert sock.recv(10) == b""


def test_unauthenticated_requests_close_the_connection(sasl_broker) -> None:
    with SocketClient((sasl_broker.host, sasl_broker.port)) as client:
        client.send(metadata_request("t"), 1)
        assert client.closed_by_peer()
    with SocketClient((sasl_broker.host, sasl_broker.port)) as client:  # a hostile token size
        client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        client.sock.sendall(struct.pack(">i", 1 << 30))
        assert client.closed_by_peer()


# ------------------------------------------------------------------------------------------------ faults


def test_fault_names_are_checked_and_listed() -> None:
    broker = MockBroker()
    with pytest.raises(KeyError, match="known APIs: .*Produce"):
        broker.inject("Prodce", error=1)
    with pytest.raises(ValueError, match="known errors: .*NOT_LEADER_FOR_PARTITION"):
        broker.inject("Produce", error="NOT_A_LEADER")
    with pytest.raises(ValueError, match="known errors"):
        broker.inject("Produce", error=9999)
    with pytest.raises(ValueError, match="with its topic"):
        broker.inject("Produce", error=1, partition=0)


def test_faults_target_topics_count_and_work_in_every_version(broker, client) -> None:
    fault = broker.inject("Metadata", error="LEADER_NOT_AVAILABLE", topic="t", times=None)
    assert client.request(metadata_request("other"), 12).topics[0].error_code == 0  # not its target
    for version in range(13):
        answer = client.request(metadata_request("t"), version)
        assert answer.topics[0].error_code == _C.LEADER_NOT_AVAILABLE
    assert fault.fired == 13 and broker.faults_fired() == {"Metadata": 13}
    broker.faults.clear()
    by_partition = broker.inject("ListOffsets", error="NOT_LEADER_FOR_PARTITION", topic="t", partition=1)
    from kproto.messages import ListOffsetsRequest

    T = ListOffsetsRequest.ListOffsetsTopic
    ask = ListOffsetsRequest(
        replica_id=-1,
        topics=[T(name="t", partitions=[T.ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)])],
    )
    assert client.request(ask, 0).topics[0].partitions[0].error_code == 0
    ask.topics[0].partitions[0].partition_index = 1
    assert client.request(ask, 0).topics[0].partitions[0].error_code == _C.NOT_LEADER_FOR_PARTITION
    assert by_partition.fired == 1
    assert all(APIS[key] for key in SERVED_VERSIONS)


def test_the_cluster_makes_its_changes_and_tells_its_listeners() -> None:
    from kproto.broker.cluster import Cluster

    cluster = Cluster()
    told: List[str] = []
    cluster.on_change(lambda: told.append("changed"))
    cluster.create_topic("t", 1)
    cluster.create_topic("t", 1)  # already there: nothing changed
    cluster.add_partitions("t", 3)
    topic_id = cluster.topic_ids["t"]
    assert len(cluster.topics["t"]) == 3 and cluster.topic_name(topic_id) == "t"
    assert cluster.delete_topic("t") == topic_id
    assert cluster.topic_name(topic_id) is None and "t" not in cluster.topics
    assert told == ["changed"] * 3


def test_the_control_plane_answers_from_what_it_is_given() -> None:
    from kproto.broker.cluster import Cluster, Endpoint
    from kproto.broker.control import ControlPlane

    served = {3: (0, 12), 18: (0, 4)}
    plane = ControlPlane(BrokerConfig(), Cluster(), served, Endpoint("broker.example", 9093))

    def ask(message: Any, version: int) -> Any:
        (received,) = ServerConnection().receive_data(ClientConnection().send(message, version).frame)
        return asyncio.run(plane.handlers[received.api_key](received, "/127.0.0.1"))

    assert {(k.api_key, k.min_version, k.max_version) for k in ask(ApiVersionsRequest(), 0).api_keys} == {
        (3, 0, 12),
        (18, 0, 4),
    }
    (broker_row,) = ask(metadata_request("t"), 1).brokers
    assert (broker_row.host, broker_row.port) == ("broker.example", 9093)
