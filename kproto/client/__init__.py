"""kproto.client: an asyncio producer and group consumer built on kproto's sans-I/O core.

* :class:`Connection` -- one awaitable broker connection, versions from ApiVersions or a named release;
* :class:`Producer` -- pipelined: per-partition batches, one Produce per broker, many in flight;
* :class:`Consumer` -- group membership (:class:`~kproto.group.member.GroupMember`) and fetching;
* :mod:`kproto.client.sync` -- the same for scripts, without asyncio;
* :mod:`kproto.client.partitioner` -- the Java client's murmur2 partitioner.

Example::

    async with Producer("localhost:9092") as producer:
        await (await producer.send("events", b"hello", key=b"k"))
"""

from kproto.client.cluster import ClusterView
from kproto.client.connection import (
    CLIENT_VERSIONS,
    BrokerConnectionError,
    ClientTimeoutError,
    Connection,
    RequestTimeoutError,
)
from kproto.client.consumer import Consumer, ConsumerRecord, RebalanceListener
from kproto.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from kproto.client.producer import (
    BufferFullError,
    InvalidRecordError,
    Producer,
    ProducerClosedError,
    RecordFuture,
    RecordMetadata,
    RecordTooLargeError,
)

__all__ = [
    "CLIENT_VERSIONS",
    "BrokerConnectionError",
    "BufferFullError",
    "ClientTimeoutError",
    "ClusterView",
    "Connection",
    "Consumer",
    "ConsumerRecord",
    "DefaultPartitioner",
    "InvalidRecordError",
    "Producer",
    "ProducerClosedError",
    "RebalanceListener",
    "RecordFuture",
    "RecordMetadata",
    "RecordTooLargeError",
    "RequestTimeoutError",
    "murmur2",
    "partition_for_key",
]
