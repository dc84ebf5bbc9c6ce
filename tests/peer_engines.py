"""One broker per engine for the modules that run other Kafka clients (Java, franz-go, Sarama) as peers.

:data:`ENGINES` parametrises a module-scoped fixture: the mock broker (its traffic recorded) and Apache
Kafka 4.1.1, the session's shared broker from the ``kproto_apache_kafka`` fixture (the one
``kafka_broker(engine="apache-kafka")`` uses).  The ``apache_kafka`` marker makes the plugin skip those
tests with one reason line where ``java``/``mvn`` are missing.  :class:`PeerBroker` answers the questions
the tests ask of what either engine stored.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from kproto.capture.conversation import Exchange, decode_capture
from kproto.messages import ListGroupsRequest, MetadataRequest
from kproto.records import decode_records
from kproto.testing import MockBroker

KAFKA_VERSION = "4.1.1"
ENGINES = [
    pytest.param("mock", id="mock"),
    pytest.param("apache-kafka", id=f"kafka-{KAFKA_VERSION}", marks=pytest.mark.apache_kafka),
]


class PeerBroker:
    """What a test reads back from either engine after the clients ran."""

    def __init__(self, engine: str, mock: Optional[MockBroker] = None, kafka: Any = None) -> None:
        self.engine = engine
        self.mock = mock
        self.kafka = kafka
        #: The requests and responses the mock recorded, decoded; ``None`` on Apache Kafka (not recorded).
        self.exchanges: Optional[List[Exchange]] = None

    @property
    def bootstrap_servers(self) -> str:
        return self.mock.bootstrap_servers if self.mock is not None else self.kafka.bootstrap_servers

    def records(self, topic: str, partition: Optional[int] = None) -> List[Any]:
        return (self.mock or self.kafka).records(topic, partition)

    def batches(self, topic: str, partition: int) -> List[Any]:
        """The record batches of one partition's log as stored (control batches included)."""
        if self.mock is not None:
            raw = self.mock.log_bytes(topic, partition)
        else:  # one node: its segment files, in offset order, are the partition's batches back to back
            directory = Path(self.kafka.log_dirs[self.kafka.node_ids[0]]) / f"{topic}-{partition}"
            raw = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
        return list(decode_records(raw).batches)

    def committed(self, group_id: str) -> Dict[Tuple[str, int], int]:
        return {tp: offset for tp, (offset, _) in (self.mock or self.kafka).committed(group_id).items()}

    def topics(self) -> Dict[str, int]:
        return (self.mock or self.kafka).topics()

    def group_exists(self, group_id: str) -> bool:
        if self.mock is not None:
            return self.mock.group(group_id) is not None
        answer: Any = self.kafka.request(ListGroupsRequest(), self.kafka.api_version(16, 4))
        return group_id in {g.group_id for g in answer.groups}

    def cluster(self) -> Tuple[str, int]:
        """(cluster id, the node the cluster names as controller to clients)."""
        if self.mock is not None:
            return self.mock.config.cluster_id, self.mock.config.node_id
        answer: Any = self.kafka.request(MetadataRequest(topics=[]), self.kafka.api_version(3, 12))
        return answer.cluster_id, answer.controller_id


@contextmanager
def peer_broker(
    request: pytest.FixtureRequest, engine: str, topics: Dict[str, int], pcap: Path
) -> Iterator[PeerBroker]:
    """A broker of ``engine`` holding ``topics`` (name → partitions); on leaving, the mock's recorded
    traffic is decoded into :attr:`PeerBroker.exchanges` before it stops, and the topics the clients left on
    the shared Apache Kafka are deleted."""
    if engine == "mock":
        with MockBroker(topics=topics, record_pcap=pcap) as mock:
            peer = PeerBroker(engine, mock=mock)
            yield peer
        return
    from kproto.testing.jars import JavaToolMissingError

    try:
        kafka = request.getfixturevalue("kproto_apache_kafka").get(KAFKA_VERSION)
    except JavaToolMissingError as exc:
        pytest.skip(f"Apache Kafka engine: {exc}")
    before = set(kafka.topics())
    for name, partitions in topics.items():
        kafka.create_topic(name, partitions)
    try:
        yield PeerBroker(engine, kafka=kafka)
    finally:
        kafka.delete_topics(sorted(set(kafka.topics()) - before))


def record_exchanges(peer: PeerBroker, pcap: Path) -> None:
    """Decode what the mock recorded so far (nothing to do on Apache Kafka)."""
    if peer.mock is not None:
        peer.exchanges = [
            r for r in decode_capture(pcap.read_bytes(), ports=[peer.mock.port]) if isinstance(r, Exchange)
        ]
