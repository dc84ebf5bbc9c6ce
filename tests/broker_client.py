"""A blocking test client: :class:`kproto.connection.ClientConnection` over a plain socket."""

from __future__ import annotations

import socket
from typing import List, Optional, Tuple

from kproto.connection import ClientConnection, ConnectionClosed, Response
from kproto.message_base import Message
from kproto.messages import (
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)

TIMEOUT = 30.0


class SocketClient:
    """Send requests and wait for their responses over one TCP connection."""

    def __init__(self, address: Tuple[str, int], **options: object) -> None:
        self.sock = socket.create_connection(address, timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(**options)  # type: ignore[arg-type]
        self._ready: List[object] = []

    def send(self, message: Message, version: int = 0) -> None:
        self.sock.sendall(self.conn.send(message, version).frame)

    def receive(self) -> Response:
        """The next response (raises if the broker closes first)."""
        while not self._ready:
            data = self.sock.recv(1 << 16)
            self._ready.extend(self.conn.receive_data(data))
        event = self._ready.pop(0)
        if isinstance(event, ConnectionClosed):
            raise ConnectionError("broker closed the connection")
        assert isinstance(event, Response)
        return event

    def request(self, message: Message, version: int = 0) -> Message:
        self.send(message, version)
        return self.receive().message

    def closed_by_peer(self) -> bool:
        """True when the broker closes without answering (waits up to TIMEOUT)."""
        try:
            return self.sock.recv(1 << 16) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "SocketClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        acks=acks,
        timeout_ms=1000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])],
    )


def fetch_request(
    topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, max_wait_ms: int = 0, min_bytes: int = 0
) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        topics=[
            T(
                topic=topic,
                partitions=[T.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)],
            )
        ],
    )


def metadata_request(*topics: str) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics])


def first_partition(response: Message) -> Message:
    """The only partition entry of a one-partition response."""
    topic = response.responses[0]
    parts: Optional[list] = getattr(topic, "partition_responses", None)
    if parts is None:
        parts = topic.partitions
    return parts[0]


def kafka_python_knows(consumer: object, topic: str) -> None:
    """Have a kafka-python group consumer fetch ``topic``'s partitions before its first poll() joins.

    kafka-python 3.0.12 sends its first JoinGroup without waiting for the metadata of the topic it
    subscribed to.  When it leads the group and assigns before that metadata arrives, it assigns
    nothing ("No partition metadata for topic") and rebalances again once the metadata comes.  If a
    poll() times out during that second rebalance, the client abandons the rebalance in flight (its
    own assignment already made the metadata look current): it never applies the assignment, consumes
    nothing, and its heartbeats stay off until the broker expires its session (UNKNOWN_MEMBER_ID at
    LeaveGroup).  The broker answers every request correctly; under load the race is likely with the
    short poll timeouts tests use.  Knowing the partitions first makes the first assignment complete.
    """
    partitions = consumer.partitions_for_topic(topic)  # type: ignore[attr-defined]  # a blocking metadata request
    assert partitions, f"no partitions for topic {topic!r}"
