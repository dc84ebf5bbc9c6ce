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

``@pytest.mark.kafka_broker(engine="apache-kafka", version="4.1.1")`` gives the same interface on a real
Apache Kafka broker (:class:`~kproto.testing.ApacheKafka`, a JVM started from jars resolved into kproto's
cache), as :class:`ApacheKafkaBroker`.  Starting a JVM per test would be too slow, so one broker per
version is shared by the whole session (at most one runs at a time: asking for another version stops the
previous one).  Each test's new topics are deleted when it ends; group ids are not, so a test that uses
groups should name its own.  :meth:`ApacheKafkaBroker.fail` raises: injecting faults needs the mock.
Without ``java`` or ``mvn`` such a test is skipped with the reason.

Why a plugin rather than a helper to copy: the broker must stop after every test even when it fails,
and the fixture's teardown is the one place that always runs.  The broker is imported only when a test
asks for the fixture, so the plugin costs nothing to suites that never use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple, Union

import pytest

if TYPE_CHECKING:
    from kproto.broker.cluster import ClusterEvent
    from kproto.broker.faults import Fault
    from kproto.broker.mock import MockBroker, StoredRecord
    from kproto.testing.apache_kafka import ApacheKafka

__all__ = ["ApacheKafkaBroker", "ApacheKafkaSession", "KafkaBroker", "kafka_broker", "kproto_apache_kafka"]


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
        return self.broker.inject(
            api, error=error, times=times, topic=topic, partition=partition, delay=delay, drop=drop
        )

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

    def restart(self) -> None:
        """Restart the broker on the same address, keeping what it stores."""
        self.broker.restart()


class ApacheKafkaBroker:
    """The ``kafka_broker`` fixture's value on ``engine="apache-kafka"``: :class:`KafkaBroker`'s interface
    on a real broker shared by the session."""

    def __init__(self, kafka: "ApacheKafka") -> None:
        #: The running :class:`~kproto.testing.ApacheKafka` (restarts, log directories, raw requests).
        self.kafka = kafka

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"``, for a client's ``bootstrap_servers`` / ``bootstrap.servers``."""
        return self.kafka.bootstrap_servers

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic (no-op if it exists); returns when its partitions have leaders."""
        self.kafka.create_topic(name, partitions)

    def topics(self) -> Dict[str, int]:
        """Topic name → partition count (internal topics left out)."""
        return self.kafka.topics()

    def messages(self, topic: str, partition: Optional[int] = None) -> List["StoredRecord"]:
        """What ``topic`` holds (one partition, or all of them partition by partition), read back with
        Fetch, in offset order, control records left out."""
        return self.kafka.records(topic, partition)

    def fail(self, api: Union[int, str], error: Union[None, int, str] = None, **options: Any) -> "Fault":
        """Refused: a real broker cannot be told to fail (raises
        :class:`~kproto.testing.apache_kafka.NeedsMockBrokerError`)."""
        from kproto.testing.apache_kafka import NeedsMockBrokerError

        raise NeedsMockBrokerError(
            f"fail({api!r}, {error!r}): injecting faults needs the mock broker "
            f"(engine='mock'); Apache Kafka {self.kafka.version} cannot be told to fail"
        )

    def committed(self, group_id: str) -> Dict[Any, Any]:
        """The offsets ``group_id`` committed (OffsetFetch): (topic, partition) → (offset, metadata)."""
        return self.kafka.committed(group_id)

    def restart(self) -> None:
        """Restart every node (SIGTERM, then start on the same ports and log directories)."""
        for node_id in self.kafka.node_ids:
            self.kafka.stop_broker(node_id)
            self.kafka.start_broker(node_id)


class ApacheKafkaSession:
    """The session's real brokers: one :class:`~kproto.testing.ApacheKafka` per (version, nodes), started
    on first use and kept for later tests; at most one runs at a time."""

    def __init__(self) -> None:
        self._current: Optional["ApacheKafka"] = None
        self._key: Optional[Tuple[str, int]] = None

    def get(self, version: str, brokers: int = 1) -> "ApacheKafka":
        """The running cluster of ``version`` with ``brokers`` nodes (nodes a test stopped are started)."""
        from kproto.testing.apache_kafka import ApacheKafka

        if self._key != (version, brokers):
            self.close()
            kafka = ApacheKafka(version=version, brokers=brokers)
            kafka.start()
            self._current, self._key = kafka, (version, brokers)
        assert self._current is not None
        for node_id in self._current.node_ids:
            if not self._current.running(node_id):
                self._current.start_broker(node_id)
        return self._current

    def close(self) -> None:
        if self._current is not None:
            self._current.stop()
        self._current, self._key = None, None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_broker(engine='mock', **options): the kafka_broker fixture's "
        "engine ('mock', keywords for MockBroker; or 'apache-kafka', version=...)",
    )
    config.addinivalue_line("markers", "apache_kafka: runs Apache Kafka (needs java and mvn; skipped without)")


def _runs_apache_kafka(item: pytest.Item) -> bool:
    if item.get_closest_marker("apache_kafka") is not None:
        return True
    marker = item.get_closest_marker("kafka_broker")
    return marker is not None and marker.kwargs.get("engine") == "apache-kafka"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Skipped here rather than by a marker or in the fixture: a skip raised from one place is reported
    # from that place, so ``-ra`` folds every such test into one line with the reason.
    if _runs_apache_kafka(item):
        from kproto.testing.apache_kafka import missing_tools

        reason = missing_tools()
        if reason is not None:
            pytest.skip(f"Apache Kafka tests: {reason}")


@pytest.fixture(scope="session")
def kproto_apache_kafka() -> Iterator[ApacheKafkaSession]:
    """The session's real Apache Kafka brokers (see :class:`ApacheKafkaSession`); stopped at the end."""
    session = ApacheKafkaSession()
    try:
        yield session
    finally:
        session.close()


#: The Apache Kafka release ``engine="apache-kafka"`` runs unless the marker names a ``version``.
DEFAULT_APACHE_KAFKA = "4.1.1"


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[Union[KafkaBroker, ApacheKafkaBroker]]:
    """A running Kafka broker for one test: in memory by default (:class:`KafkaBroker`), or a real
    Apache Kafka shared by the session (:class:`ApacheKafkaBroker`)."""
    marker = request.node.get_closest_marker("kafka_broker")
    options: Dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    engine = options.pop("engine", "mock")
    if engine == "mock":
        from kproto.broker.mock import MockBroker

        with MockBroker(**options) as broker:
            yield KafkaBroker(broker)
        return
    if engine != "apache-kafka":
        raise pytest.UsageError(f"kafka_broker engine {engine!r}: use 'mock' or 'apache-kafka'")
    from kproto.testing.jars import JavaToolMissingError

    version = str(options.pop("version", DEFAULT_APACHE_KAFKA))
    if options:
        raise pytest.UsageError(f"kafka_broker(engine='apache-kafka') takes only version=, not {sorted(options)}")
    session: ApacheKafkaSession = request.getfixturevalue("kproto_apache_kafka")
    try:
        kafka = session.get(version)
    except JavaToolMissingError as exc:
        pytest.skip(f"Apache Kafka engine: {exc}")
    before = set(kafka.topics())
    yield ApacheKafkaBroker(kafka)
    # The broker outlives the test: its new topics go, so the next test starts from the same topics.
    kafka = session.get(version)
    kafka.delete_topics(sorted(set(kafka.topics()) - before))
