"""The mock cluster: several brokers, leaders that move, coordinators that fail over (docs/broker.md).

Each broker is asked directly over a socket, so every test sees exactly the error a client would read
from that node: NOT_LEADER_OR_FOLLOWER (code 6) from a non-leader, FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH for a stale or future epoch, the KIP-951 leader hint, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS around a coordinator move, NOT_ENOUGH_REPLICAS below min.insync.replicas,
and what hooks and bad controls do.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, List, Tuple

import pytest

from broker_client import SocketClient, fetch_request, metadata_request, produce_request
from kproto import ErrorCode
from kproto.broker.cluster import BrokerStopped, ClusterControlError, CoordinatorMoved, LeaderMoved
from kproto.broker.hooks import Intercept, InterceptedRequest
from kproto.messages import (
    FindCoordinatorRequest,
    JoinGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
)
from kproto.records import encode_record_batch
from kproto.testing import MockBroker

_C = ErrorCode


@pytest.fixture
def cluster() -> Iterator[MockBroker]:
    with MockBroker(brokers=3, topics={"t": 6}) as broker:
        yield broker


def address(broker: MockBroker, node: int) -> Tuple[str, int]:
    host, port = broker.bootstrap_servers.split(",")[broker.node_ids.index(node)].rsplit(":", 1)
    return host, int(port)


def batch(value: bytes = b"v") -> bytes:
    return encode_record_batch([(None, value)])


def produce_code(broker: MockBroker, node: int, partition: int, version: int = 9, acks: int = 1) -> Any:
    with SocketClient(address(broker, node)) as client:
        answer = client.request(produce_request("t", partition, batch(), acks=acks), version)
        return answer.responses[0].partition_responses[0]


def fetch_answer(broker: MockBroker, node: int, partition: int, version: int, epoch: int = -1) -> Any:
    request = fetch_request("t", partition, 0)
    request.topics[0].partitions[0].current_leader_epoch = epoch
    if version >= 13:  # topics by id
        request.topics[0].topic_id = broker.core.cluster.topic_ids["t"]
    with SocketClient(address(broker, node)) as client:
        return client.request(request, version)


def test_metadata_names_every_broker_and_spreads_leaders(cluster: MockBroker) -> None:
    with SocketClient(address(cluster, 1)) as client:
        meta = client.request(metadata_request("t"), 9)
    assert sorted(b.node_id for b in meta.brokers) == [0, 1, 2]
    assert len({b.port for b in meta.brokers}) == 3
    (topic,) = meta.topics
    leaders = [p.leader_id for p in topic.partitions]
    assert sorted(set(leaders)) == [0, 1, 2] and leaders == [cluster.leader("t", i) for i in range(6)]
    for p in topic.partitions:
        assert sorted(p.replica_nodes) == [0, 1, 2] and p.replica_nodes[0] == p.leader_id
        assert sorted(p.isr_nodes) == [0, 1, 2] and p.leader_epoch == 0


def test_one_broker_is_the_single_node_it_always_was() -> None:
    with MockBroker(topics={"t": 2}) as broker:
        assert "," not in broker.bootstrap_servers and broker.node_ids == [0]
        with SocketClient(address(broker, 0)) as client:
            meta = client.request(metadata_request("t"), 9)
        assert [(b.node_id, b.port) for b in meta.brokers] == [(0, broker.port)]
        assert [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in meta.topics[0].partitions] == [
            (0, 0, [0], [0])
        ] * 2


def test_a_non_leader_answers_not_leader_with_the_current_leader(cluster: MockBroker) -> None:
    leader = cluster.leader("t", 0)
    other = next(n for n in cluster.node_ids if n != leader)
    assert produce_code(cluster, leader, 0).error_code == _C.NONE
    refused = produce_code(cluster, other, 0)
    assert refused.error_code == _C.NOT_LEADER_FOR_PARTITION
    with SocketClient(address(cluster, other)) as client:  # Produce v10+: KIP-951's hint and endpoint
        answer = client.request(produce_request("t", 0, batch()), 10)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == _C.NOT_LEADER_FOR_PARTITION
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, 0)
    assert [(e.node_id, e.port) for e in answer.node_endpoints] == [(leader, address(cluster, leader)[1])]
    assert cluster.high_watermark("t", 0) == 1  # the refused records were not stored


def test_leader_epochs_after_a_move_as_a_kafka_replica_checks_them(cluster: MockBroker) -> None:
    old = cluster.leader("t", 1)
    new = next(n for n in cluster.isr("t", 1) if n != old)
    cluster.move_leader("t", 1, new)
    assert cluster.leader("t", 1) == new and cluster.leader_epoch("t", 1) == 1
    moved = [e for e in cluster.events if isinstance(e, LeaderMoved)]
    assert [(e.topic, e.partition, e.old_leader, e.new_leader, e.leader_epoch) for e in moved] == [
        ("t", 1, old, new, 1)
    ]

    def code(node: int, epoch: int, version: int = 12) -> int:
        return fetch_answer(cluster, node, 1, version, epoch).responses[0].partitions[0].error_code

    assert code(old, 0) == _C.FENCED_LEADER_EPOCH  # the client's epoch is older than the partition's
    assert code(old, 1, version=10) == _C.NOT_LEADER_FOR_PARTITION  # current epoch, not the leader
    assert code(old, -1, version=10) == _C.NOT_LEADER_FOR_PARTITION
    assert code(old, 1) == _C.NONE  # Fetch v11+: a follower serves consumers, as Kafka's do (KIP-392)
    assert code(new, 2) == _C.UNKNOWN_LEADER_EPOCH  # newer than the broker knows
    assert code(new, 1) == _C.NONE
    assert code(new, 0) == _C.FENCED_LEADER_EPOCH
    assert code(old, 0, version=8) == _C.NOT_LEADER_FOR_PARTITION  # no epoch before Fetch v9
    hinted = fetch_answer(cluster, old, 1, 16, 0)  # Fetch v16+: the leader hint and its endpoint
    part = hinted.responses[0].partitions[0]
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (new, 1)
    assert [e.node_id for e in hinted.node_endpoints] == [new]
    P = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    lookup = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="t", partitions=[P(partition_index=1, current_leader_epoch=0, timestamp=-1)]
            )
        ],
    )
    with SocketClient(address(cluster, new)) as client:
        assert client.request(lookup, 5).topics[0].partitions[0].error_code == _C.FENCED_LEADER_EPOCH
        lookup.topics[0].partitions[0].current_leader_epoch = 1
        found = client.request(lookup, 5).topics[0].partitions[0]
        assert (found.error_code, found.leader_epoch) == (_C.NONE, 1)


def test_a_stopped_broker_hands_its_leadership_to_an_in_sync_replica(cluster: MockBroker) -> None:
    led = [p for p in range(6) if cluster.leader("t", p) == 1]
    cluster.stop_broker(1)
    assert cluster.running() == [0, 2]
    for p in led:
        assert cluster.leader("t", p) in (0, 2) and cluster.leader_epoch("t", p) == 1
        assert 1 not in cluster.isr("t", p)
    with pytest.raises(OSError):
        SocketClient(address(cluster, 1))
    with SocketClient(address(cluster, 0)) as client:
        meta = client.request(metadata_request("t"), 9)
    assert sorted(b.node_id for b in meta.brokers) == [0, 2]
    assert all(p.offline_replicas == [1] for p in meta.topics[0].partitions)
    assert isinstance(cluster.events[0], BrokerStopped)
    cluster.start_broker(1)
    assert cluster.running() == [0, 1, 2] and all(1 in cluster.isr("t", p) for p in range(6))
    assert produce_code(cluster, cluster.leader("t", led[0]), led[0]).error_code == _C.NONE
    with SocketClient(address(cluster, 1)) as client:  # the same port again
        assert len(client.request(metadata_request("t"), 9).brokers) == 3


def test_a_partition_whose_replicas_all_stopped_has_no_leader() -> None:
    with MockBroker(brokers=2, replication_factor=1, topics={"solo": 2}) as broker:
        gone = broker.leader("solo", 0)
        broker.stop_broker(gone)
        assert broker.leader("solo", 0) == -1
        alive = next(n for n in broker.node_ids if n != gone)
        with SocketClient(address(broker, alive)) as client:
            (topic,) = client.request(metadata_request("solo"), 9).topics
        assert topic.partitions[0].error_code == _C.LEADER_NOT_AVAILABLE and topic.partitions[0].leader_id == -1
        broker.start_broker(gone)
        assert broker.leader("solo", 0) == gone and broker.leader_epoch("solo", 0) == 2


def _commit(group: str, offset: int) -> OffsetCommitRequest:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])],
    )


def _fetch_offsets(group: str) -> OffsetFetchRequest:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(group_id=group, topics=[T(name="t", partition_indexes=[0])])


def test_a_moved_coordinator_loads_then_serves_the_committed_offsets(cluster: MockBroker) -> None:
    old = cluster.coordinator("g")
    with SocketClient(address(cluster, 0)) as client:
        found = client.request(FindCoordinatorRequest(key="g"), 1)
    assert (found.error_code, found.node_id, found.port) == (_C.NONE, old, address(cluster, old)[1])
    with SocketClient(address(cluster, old)) as client:
        assert client.request(_commit("g", 42), 2).topics[0].partitions[0].error_code == _C.NONE
    new = next(n for n in cluster.node_ids if n != old)
    cluster.move_coordinator("g", new, loading_ms=400)
    assert cluster.coordinator("g") == new
    moved = [e for e in cluster.events if isinstance(e, CoordinatorMoved)]
    assert [(e.key_type, e.key, e.old_node, e.new_node) for e in moved] == [(0, "g", old, new)]
    with SocketClient(address(cluster, old)) as client:
        refused = client.request(_fetch_offsets("g"), 3)
        assert refused.error_code == _C.NOT_COORDINATOR_FOR_GROUP  # NOT_COORDINATOR
        assert client.request(FindCoordinatorRequest(key="g"), 1).node_id == new
    with SocketClient(address(cluster, new)) as client:
        loading = client.request(_fetch_offsets("g"), 3)
        assert loading.error_code == _C.GROUP_LOAD_IN_PROGRESS  # COORDINATOR_LOAD_IN_PROGRESS
        deadline = time.monotonic() + 10
        while True:
            served = client.request(_fetch_offsets("g"), 3)
            if served.error_code != _C.GROUP_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert served.error_code == _C.NONE and served.topics[0].partitions[0].committed_offset == 42


def test_group_requests_to_a_non_coordinator_are_not_coordinator(cluster: MockBroker) -> None:
    other = next(n for n in cluster.node_ids if n != cluster.coordinator("g2"))
    join = JoinGroupRequest(
        group_id="g2",
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[],
    )
    with SocketClient(address(cluster, other)) as client:
        assert client.request(join, 5).error_code == _C.NOT_COORDINATOR_FOR_GROUP


def test_transaction_coordinator_moves_too(cluster: MockBroker) -> None:
    from kproto.messages import InitProducerIdRequest

    old = cluster.transaction_coordinator("tx")
    new = next(n for n in cluster.node_ids if n != old)
    cluster.move_transaction_coordinator("tx", new, loading_ms=60_000)
    init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=10000)
    with SocketClient(address(cluster, old)) as client:
        assert client.request(init, 1).error_code == _C.NOT_COORDINATOR_FOR_GROUP
        found = client.request(FindCoordinatorRequest(key="tx", key_type=1), 1)
        assert found.node_id == new
    with SocketClient(address(cluster, new)) as client:
        assert client.request(init, 1).error_code == _C.GROUP_LOAD_IN_PROGRESS


def test_acks_all_below_min_insync_replicas_is_not_enough_replicas() -> None:
    with MockBroker(brokers=3, min_insync_replicas=2, topics={"t": 1}) as broker:
        leader = broker.leader("t", 0)
        broker.shrink_isr("t", 0, [leader])
        assert broker.isr("t", 0) == [leader]
        assert produce_code(broker, leader, 0, acks=-1).error_code == _C.NOT_ENOUGH_REPLICAS
        assert broker.high_watermark("t", 0) == 0  # refused before the append, as Kafka does
        assert produce_code(broker, leader, 0, acks=1).error_code == _C.NONE
        broker.shrink_isr("t", 0, broker.replicas("t", 0))  # grown back
        assert produce_code(broker, leader, 0, acks=-1).error_code == _C.NONE


def test_acks_all_waits_for_the_simulated_replication_lag() -> None:
    with MockBroker(brokers=3, replication_lag_ms=300, topics={"t": 1}) as broker:
        leader = broker.leader("t", 0)
        start = time.monotonic()
        assert produce_code(broker, leader, 0, acks=-1).error_code == _C.NONE
        assert time.monotonic() - start >= 0.3
        start = time.monotonic()
        assert produce_code(broker, leader, 0, acks=1).error_code == _C.NONE
        assert time.monotonic() - start < 0.3 + 5  # acks=1 does not wait for followers (generous slack)


def test_hooks_see_typed_requests_and_decide(cluster: MockBroker) -> None:
    seen: List[InterceptedRequest] = []
    leader = cluster.leader("t", 0)

    def hook(request: InterceptedRequest) -> Any:
        seen.append(request)
        if request.api_name == "Produce" and request.node_id == leader:
            return Intercept(error="NOT_ENOUGH_REPLICAS")
        if request.api_name == "ListOffsets":
            raise RuntimeError("a bug in the test's hook")
        if request.api_name == "DescribeGroups":
            return Intercept(close=True)
        return None

    cluster.add_hook(hook)
    assert produce_code(cluster, leader, 0).error_code == _C.NOT_ENOUGH_REPLICAS
    produce = next(r for r in seen if r.api_name == "Produce")
    assert produce.request.topic_data[0].name == "t" and produce.api_version == 9 and produce.api_key == 0
    P = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    lookup = ListOffsetsRequest(
        replica_id=-1,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[P(partition_index=0, timestamp=-1)])],
    )
    with SocketClient(address(cluster, leader)) as client:
        assert client.request(lookup, 1).topics[0].partitions[0].error_code == _C.UNKNOWN  # UNKNOWN_SERVER_ERROR
        from kproto.messages import DescribeGroupsRequest

        client.send(DescribeGroupsRequest(groups=["g"]), 0)
        assert client.closed_by_peer()
    cluster.remove_hook(hook)
    assert produce_code(cluster, leader, 0).error_code == _C.NONE


def test_a_dropped_request_leaves_the_connection_silent(cluster: MockBroker) -> None:
    cluster.add_hook(lambda r: Intercept(drop=True) if r.api_name == "Metadata" else None)
    with SocketClient(address(cluster, 0)) as client:
        client.sock.settimeout(0.5)
        client.send(metadata_request("t"), 1)
        with pytest.raises(OSError):  # socket.timeout: nothing comes back
            client.receive()


def test_per_broker_latency(cluster: MockBroker) -> None:
    cluster.set_latency(2, 0.3)
    for node, slow in ((2, True), (0, False)):
        with SocketClient(address(cluster, node)) as client:
            start = time.monotonic()
            client.request(metadata_request("t"), 1)
            took = time.monotonic() - start
        assert took >= 0.3 if slow else took < 0.3 + 5


def test_controls_naming_what_does_not_exist_are_refused(cluster: MockBroker) -> None:
    before = cluster.events
    with pytest.raises(ClusterControlError, match="no broker 7"):
        cluster.stop_broker(7)
    with pytest.raises(ClusterControlError, match="no broker 9"):
        cluster.move_leader("t", 0, 9)
    with pytest.raises(ClusterControlError, match="no partition t-6"):
        cluster.move_leader("t", 6, 0)
    with pytest.raises(ClusterControlError, match="no such topic"):
        cluster.leader("missing", 0)
    with pytest.raises(ClusterControlError, match="must keep its leader"):
        cluster.shrink_isr("t", 0, [n for n in cluster.node_ids if n != cluster.leader("t", 0)])
    with pytest.raises(ClusterControlError):
        cluster.move_coordinator("g", 5)
    with pytest.raises(ClusterControlError):
        cluster.set_latency(3, 0.1)
    with pytest.raises(ValueError, match="unknown Kafka error"):
        Intercept(error="NO_SUCH_ERROR")
    with pytest.raises(ClusterControlError, match="replication factor 4"):
        MockBroker(brokers=3, replication_factor=4)
    assert cluster.events == before == []  # refused controls change nothing
    cluster.stop_broker(2)
    with pytest.raises(ClusterControlError, match="cannot lead"):
        cluster.move_leader("t", 2, 2)
    assert isinstance(cluster.events[0], BrokerStopped) and not any(
        isinstance(e, LeaderMoved) and e.new_leader == 2 for e in cluster.events
    )


def test_a_loading_coordinator_answers_heartbeats_as_kafka_does(cluster: MockBroker) -> None:
    from kproto.messages import HeartbeatRequest

    new = next(n for n in cluster.node_ids if n != cluster.coordinator("hb"))
    cluster.move_coordinator("hb", new, loading_ms=60_000)
    beat = HeartbeatRequest(group_id="hb", generation_id=1, member_id="m")
    with SocketClient(address(cluster, new)) as client:
        assert client.request(beat, 1).error_code == _C.NONE  # "blindly", while the group loads
        assert client.request(_fetch_offsets("hb"), 3).error_code == _C.GROUP_LOAD_IN_PROGRESS


def test_offset_for_leader_epoch_tells_where_each_epoch_ended(cluster: MockBroker) -> None:
    # What a consumer validates its position with after a leader change (KIP-320): an answer it must
    # get, or its partition is never fetched again.
    old = cluster.leader("t", 1)
    for _ in range(3):
        assert produce_code(cluster, old, 1).error_code == _C.NONE
    new = next(n for n in cluster.isr("t", 1) if n != old)
    cluster.move_leader("t", 1, new)
    for _ in range(2):
        assert produce_code(cluster, new, 1).error_code == _C.NONE
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic

    def ask(node: int, epoch: int, current: int = -1, partition: int = 1, version: int = 4) -> Any:
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                Topic(
                    topic="t",
                    partitions=[
                        Topic.OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=current, leader_epoch=epoch
                        )
                    ],
                )
            ],
        )
        with SocketClient(address(cluster, node)) as client:
            part = client.request(request, version).topics[0].partitions[0]
        return part.error_code, part.leader_epoch, part.end_offset

    assert ask(new, 0, current=1) == (_C.NONE, 0, 3)  # epoch 0 ended where epoch 1 began
    assert ask(new, 1, current=1) == (_C.NONE, 1, 5)  # the current epoch ends at the log end
    assert ask(new, 2)[1:] == (-1, -1)  # an epoch the partition never had
    assert ask(new, 0, current=0)[0] == _C.FENCED_LEADER_EPOCH
    assert ask(new, 0, current=2)[0] == _C.UNKNOWN_LEADER_EPOCH
    assert ask(old, 0)[0] == _C.NOT_LEADER_FOR_PARTITION  # only the leader answers
    assert ask(new, 0, partition=99)[0] == _C.UNKNOWN_TOPIC_OR_PARTITION
    assert ask(new, 0, version=0) == (_C.NONE, -1, 3)  # v0 carries the end offset only
