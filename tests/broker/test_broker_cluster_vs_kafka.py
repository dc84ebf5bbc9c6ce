"""The mock cluster against Apache Kafka: the errors a client reads after a partition's leader stops.

One scenario on both engines -- three brokers, a partition with three replicas, its leader stopped -- and
what each remaining broker answers: the new leader is another in-sync replica with a newer epoch, the
stopped broker is gone from the metadata and the ISR, a non-leader answers Produce with
NOT_LEADER_OR_FOLLOWER and KIP-951's hint naming the new leader and its epoch, and Fetch is
FENCED_LEADER_EPOCH with the old epoch, UNKNOWN_LEADER_EPOCH with a future one, NOT_LEADER_OR_FOLLOWER at
a non-leader.  Node ids differ (the mock counts from 0, the harness from 1), so what is compared is each
answer's relation to the scenario, not the ids themselves.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List

import pytest

from kproto.messages import FetchRequest, MetadataRequest, ProduceRequest
from kproto.records import encode_record_batch
from kproto.testing import MockBroker
from kproto.testing.apache_kafka import ApacheKafka, missing_tools

pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.apache_kafka,
    pytest.mark.skipif(missing_tools() is not None, reason=f"Apache Kafka: {missing_tools()}"),
]

PRODUCE_VERSION = 11  # v10+ carries KIP-951's leader hint; both engines serve v11
FETCH_VERSION = 12  # the newest that still names topics (v13+ use topic ids)
Ask = Callable[[Any, int, int], Any]  # (request, version, node) -> response


def _metadata(ask: Ask, node: int) -> Any:
    return ask(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False),
        9,
        node,
    )


def _fetch_code(ask: Ask, node: int, epoch: int) -> int:
    T = FetchRequest.FetchTopic
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[
            T(
                topic="t",
                partitions=[
                    T.FetchPartition(
                        partition=0, current_leader_epoch=epoch, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    )
    return int(ask(request, FETCH_VERSION, node).responses[0].partitions[0].error_code)


def observe(ask: Ask, nodes: List[int], stop: Callable[[int], None]) -> Dict[str, Any]:
    """Stop the leader of t-0 and describe what the other brokers answer, in terms of the scenario."""
    before = _metadata(ask, nodes[0]).topics[0].partitions[0]
    old_leader, old_epoch = before.leader_id, before.leader_epoch
    stop(old_leader)
    running = [n for n in nodes if n != old_leader]
    deadline = time.monotonic() + 60
    while True:  # Kafka elects and spreads the news in a moment; the mock at once
        views = [_metadata(ask, n) for n in running]
        parts = [v.topics[0].partitions[0] for v in views]
        if all(
            p.leader_id not in (-1, old_leader) and p.leader_epoch > old_epoch and old_leader not in p.isr_nodes
            for p in parts
        ) and all(old_leader not in [b.node_id for b in v.brokers] for v in views):
            break
        assert time.monotonic() < deadline, f"no new leader after the stop: {parts}"
        time.sleep(0.1)
    after = parts[0]
    new_leader, new_epoch = after.leader_id, after.leader_epoch
    other = next(n for n in running if n != new_leader)
    T = ProduceRequest.TopicProduceData
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            T(name="t", partition_data=[T.PartitionProduceData(index=0, records=encode_record_batch([(None, b"x")]))])
        ],
    )
    refused = ask(produce, PRODUCE_VERSION, other)
    part = refused.responses[0].partition_responses[0]
    return {
        "new leader was an in-sync replica": new_leader in before.isr_nodes,
        "stopped broker left the ISR": old_leader not in after.isr_nodes,
        "brokers listed": len(views[0].brokers),
        "produce at a non-leader": part.error_code,
        "hint names the new leader and epoch": (part.current_leader.leader_id, part.current_leader.leader_epoch)
        == (new_leader, new_epoch),
        "hint endpoint is the new leader": [e.node_id for e in refused.node_endpoints] == [new_leader],
        "fetch, old epoch, new leader": _fetch_code(ask, new_leader, old_epoch),
        "fetch, future epoch, new leader": _fetch_code(ask, new_leader, new_epoch + 1),
        "fetch, current epoch, non-leader": _fetch_code(ask, other, new_epoch),
        "fetch, current epoch, new leader": _fetch_code(ask, new_leader, new_epoch),
        "produce at the new leader": ask(produce, PRODUCE_VERSION, new_leader)
        .responses[0]
        .partition_responses[0]
        .error_code,
    }


def _mock() -> Dict[str, Any]:
    from broker_client import SocketClient

    with MockBroker(brokers=3, topics={"t": 1}) as cluster:
        ports = {n: int(a.rsplit(":", 1)[1]) for n, a in zip(cluster.node_ids, cluster.bootstrap_servers.split(","))}

        def ask(request: Any, version: int, node: int) -> Any:
            with SocketClient(("127.0.0.1", ports[node])) as client:
                return client.request(request, version)

        return observe(ask, cluster.node_ids, cluster.stop_broker)


def _kafka() -> Dict[str, Any]:
    with ApacheKafka(version="4.1.1", brokers=3, heap="384m") as kafka:
        kafka.create_topic("t", partitions=1, replication_factor=3)
        return observe(
            lambda request, version, node: kafka.request(request, version, node), kafka.node_ids, kafka.stop_broker
        )


def test_a_stopped_leader_looks_the_same_to_clients_on_both_engines() -> None:
    mock = _mock()
    assert mock["produce at a non-leader"] == 6 and mock["fetch, old epoch, new leader"] == 74
    kafka = _kafka()
    assert mock == kafka
