"""A pytest plugin: a running Kafka broker as a fixture, for an application's own test suite.

Installed with kproto (``pytest11`` entry point), so a test needs only a fixture argument::

    def test_orders_are_published(kafka_broker):
        kafka_broker.create_topic("orders", partitions=3)
        publish_orders(bootstrap_servers=kafka_broker.bootstrap_servers)   # the application's own code
        assert [m.value for m in kafka_broker.messages("orders")] == [b"order-1"]

``kafka_broker`` is a fresh :class:`~kproto.testing.MockBroker` per test (in memory, on a free port of
127.0.0.1, started in a background thread), wrapped in :class:`KafkaBroker`: the bootstrap string,
topic creation, the records produced, :meth:`KafkaBroker.fail` to inject faults, and with
``@pytest.mark.kafka_broker(brokers=3)`` a cluster whose brokers stop and start, whose leaders and
coordinators move (:meth:`KafkaBroker.stop_broker`, ...).  A test that wants
other broker settings marks itself ``@pytest.mark.kafka_broker(default_partitions=3, ...)``: the keywords
go to :class:`~kproto.testing.MockBroker`.

Why a plugin rather than a helper to copy: the broker must stop after every test even when it fails,
and the fixture's teardown is the one place that always runs.  The broker is imported only when a test
asks for the fixture, so the plugin costs nothing to suites that never use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Union

import pytest

if TYPE_CHECKING:
    from kproto.broker.cluster import ClusterEvent
    from kproto.broker.faults import Fault
    from kproto.broker.mock import MockBroker, StoredRecord

__all__ = ["KafkaBroker", "kafka_broker"]


class KafkaBroker:
    """The ``kafka_broker`` fixture's value: a running mock broker and what a test asks of it."""

    def __init__(self, broker: "MockBroker") -> None:
        #: The underlying :class:`~kproto.testing.MockBroker` (groups, committed offsets, counters, pcap).
        self.broker = broker

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"``, for a client's ``bootstrap_servers`` / ``bootstrap.servers``."""
        return self.broker.bootstrap_servers

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic (no-op if it exists)."""
        self.broker.create_topic(name, partitions)

    def topics(self) -> Dict[str, int]:
        """Topic name → partition count."""
        return self.broker.topics()

    def messages(self, topic: str, partition: Optional[int] = None) -> List["StoredRecord"]:
        """What was produced to ``topic`` (one partition, or all of them partition by partition), in
        offset order: ``partition``, ``offset``, ``key``, ``value``, ``headers``, ``timestamp``."""
        return self.broker.records(topic, partition)

    def fail(
        self,
        api: Union[int, str],
        error: Union[None, int, str] = None,
        *,
        times: Optional[int] = 1,
        topic: Optional[str] = None,
        partition: Optional[int] = None,
        delay: float = 0.0,
        drop: bool = False,
    ) -> "Fault":
        """Answer the next ``times`` requests of ``api`` (e.g. ``"Produce"``) with ``error`` (e.g.
        ``"NOT_LEADER_FOR_PARTITION"``), only those naming ``topic``/``partition`` when given; ``delay``
        holds each answer back that many seconds after the request arrived; ``drop`` closes the
        connection instead.  The returned fault's ``fired`` counts the requests it applied to."""
        return self.broker.inject(api, error=error, times=times, topic=topic, partition=partition, delay=delay,
                                  drop=drop)

    # The cluster controls (``@pytest.mark.kafka_broker(brokers=3)``), as MockBroker has them.

    def stop_broker(self, node_id: int, *, coordinator_loading_ms: int = 0) -> None:
        """Stop one broker: its partitions get new leaders, its coordinators move (see docs/broker.md)."""
        self.broker.stop_broker(node_id, coordinator_loading_ms=coordinator_loading_ms)

    def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again on its port."""
        self.broker.start_broker(node_id)

    def move_leader(self, topic: str, partition: int, to_node: int) -> None:
        """Give a partition to another in-sync replica, with a new leader epoch."""
        self.broker.move_leader(topic, partition, to_node)

    def move_coordinator(self, group_id: str, to_node: int, *, loading_ms: int = 0) -> None:
        """Move a group's coordinator; the new one loads for ``loading_ms``."""
        self.broker.move_coordinator(group_id, to_node, loading_ms=loading_ms)

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader (-1: none)."""
        return self.broker.leader(topic, partition)

    def coordinator(self, group_id: str) -> int:
        """The broker coordinating ``group_id``."""
        return self.broker.coordinator(group_id)

    @property
    def events(self) -> List["ClusterEvent"]:
        """What the cluster controls did, in order."""
        return self.broker.events

    def committed(self, group_id: str) -> Dict[Any, Any]:
        """The offsets ``group_id`` committed: (topic, partition) → (offset, metadata)."""
        return self.broker.committed(group_id)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_broker(**options): MockBroker keywords for the kafka_broker fixture")


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[KafkaBroker]:
    """A running in-memory Kafka broker for one test (see :class:`KafkaBroker`)."""
    from kproto.broker.mock import MockBroker

    marker = request.node.get_closest_marker("kafka_broker")
    options: Dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    with MockBroker(**options) as broker:
        yield KafkaBroker(broker)
