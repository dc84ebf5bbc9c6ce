"""OffsetForLeaderEpoch after a leader change: the mock cluster answers as a three-node Apache Kafka 4.1.1.

A consumer that sees a partition's leader epoch go up asks the new leader where the epoch it fetched in
ended (KIP-320) before it fetches again; kafka-python 3 waits for that answer, so a wrong one stalls or
rewinds it.  The same steps run on both engines: five records, the leader stopped, three more records to
the new leader, then the questions -- the first epoch, the current one, one the partition never had, and a
current epoch older and newer than the leader's.  Epoch numbers are compared relative to each engine's own
(Kafka may count its epochs differently), offsets and error codes as they are.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest

from kproto.connection import ClientConnection, ConnectionClosed, Response
from kproto.messages import MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest
from kproto.records import encode_record_batch
from kproto.testing import MockBroker
from kproto.testing.apache_kafka import ApacheKafka, missing_tools

pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.apache_kafka,
    pytest.mark.skipif(missing_tools() is not None, reason=f"Apache Kafka: {missing_tools()}"),
]

TOPIC = "epochs"
Answer = Tuple[int, int, int]  # error code, leader epoch, end offset


def exchange(address: Tuple[str, int], message: Any, version: int) -> Any:
    conn = ClientConnection(client_id="kproto-epochs")
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(conn.send(message, version).frame)
        while True:
            for event in conn.receive_data(sock.recv(1 << 16)):
                if isinstance(event, ConnectionClosed):
                    raise AssertionError(f"{address} closed the connection")
                if isinstance(event, Response):
                    return event.message


def leader_and_epoch(address: Tuple[str, int]) -> Tuple[int, int]:
    answer = exchange(address, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)]), 12)
    part = answer.topics[0].partitions[0]
    return part.leader_id, part.leader_epoch


def produce(address: Tuple[str, int], values: List[bytes]) -> None:
    batch = encode_record_batch([(None, v) for v in values])
    T = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        topic_data=[T(name=TOPIC, partition_data=[T.PartitionProduceData(index=0, records=batch)])],
    )
    answer = exchange(address, request, 9)
    assert answer.responses[0].partition_responses[0].error_code == 0, answer


def ask(address: Tuple[str, int], leader_epoch: int, current_leader_epoch: int = -1) -> Answer:
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    part = T.OffsetForLeaderPartition(partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)
    answer = exchange(
        address, OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=TOPIC, partitions=[part])]), 4
    )
    p = answer.topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def scenario(
    address: Callable[[int], Tuple[str, int]], nodes: List[int], stop: Callable[[int], None]
) -> Dict[str, Any]:
    """The steps on one engine, answers with epochs relative to the first leader's (``e0``)."""
    leader, e0 = leader_and_epoch(address(nodes[0]))
    produce(address(leader), [b"a", b"b", b"c", b"d", b"e"])
    stop(leader)
    survivor = next(n for n in nodes if n != leader)
    deadline = time.monotonic() + 60
    while True:  # Kafka elects the new leader in the background
        new, e1 = leader_and_epoch(address(survivor))
        if new not in (-1, leader) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert new not in (-1, leader), f"no new leader after stopping node {leader}"
    produce(address(new), [b"f", b"g", b"h"])

    def rel(answer: Answer) -> Tuple[int, Any, int]:
        error, epoch, end = answer
        return error, (epoch - e0 if epoch >= 0 else epoch), end

    return {
        "epoch moved": e1 > e0,
        "first epoch": rel(ask(address(new), e0)),
        "current epoch": rel(ask(address(new), e1, current_leader_epoch=e1)),
        "epoch never had": rel(ask(address(new), e1 + 5)),
        "older current epoch": rel(ask(address(new), e0, current_leader_epoch=e0)),
        "newer current epoch": rel(ask(address(new), e1, current_leader_epoch=e1 + 5)),
    }


def test_offset_for_leader_epoch_after_a_leader_change_answers_as_kafka() -> None:
    with MockBroker(brokers=3, topics=[f"{TOPIC}:1"]) as broker:
        ports = dict(zip(broker.node_ids, (int(a.rsplit(":", 1)[1]) for a in broker.bootstrap_servers.split(","))))
        mock = scenario(lambda n: ("127.0.0.1", ports[n]), list(broker.node_ids), broker.stop_broker)
    with ApacheKafka("4.1.1", brokers=3, heap="384m") as kafka:
        kafka.create_topic(TOPIC, partitions=1, replication_factor=3)
        real = scenario(kafka.address, list(kafka.node_ids), kafka.stop_broker)
    assert real["epoch moved"] and real["first epoch"][2] == 5 and real["current epoch"][2] == 8, real
    assert mock == real, (mock, real)
