"""Settings of the mock broker, with 0.9.0 defaults where a 0.9 broker has one.

Every budget that protects the broker from a hostile or careless client lives here, with the Kafka
setting it mirrors where Kafka has one; docs/reliability.md lists them all with their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import resource
from typing import Mapping, Optional

from kproto.broker.append import DEFAULT_MESSAGE_MAX_BYTES
from kproto.broker.producers import DEFAULT_MAX_PRODUCER_IDS
from kproto.group.consumer_group import ConsumerGroupConfig
from kproto.group.coordinator import CoordinatorConfig

__all__ = ["BrokerConfig", "DEFAULT_BROKER_MAX_FRAME_SIZE", "default_max_connections"]

#: Largest request frame accepted by default: 0.9's ``socket.request.max.bytes`` (100 MiB).
DEFAULT_BROKER_MAX_FRAME_SIZE = 100 * 1024 * 1024
_MiB = 1024 * 1024
# File descriptors kept free for everything that is not a client connection (listening socket, the
# event loop's own, a recording file, Python's imports): at the limit, accept() fails with EMFILE.
_SPARE_DESCRIPTORS = 64


def default_max_connections() -> int:
    """Connections served at once by default: 4096, or fewer when the process may open fewer files.

    Kafka's ``max.connections`` is unlimited, but a JVM broker runs with a file limit of 100,000 or
    more; a Python process often has 1,024, and a broker that reaches it can no longer accept at all.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(1, min(4096, soft - _SPARE_DESCRIPTORS))


@dataclass
class BrokerConfig:
    """What the broker advertises and the limits it enforces.

    ``advertised_host``/``advertised_port`` go into Metadata and GroupCoordinator answers (None: the
    address the broker listens on).  ``max_frame_size`` bounds one request (``socket.request.max.bytes``),
    ``message_max_bytes`` one produced entry, ``max_fetch_bytes`` the record bytes of one fetched
    partition whatever its ``max_bytes`` says, ``max_queued_requests`` the requests read ahead of the
    one being handled on a connection.  ``coordinator`` holds the group settings; tests may lower
    ``min_session_timeout_ms`` below 0.9's 6000.

    ``cluster_id`` is what Metadata v2+ and DescribeCluster report.  ``max_partitions_per_topic`` bounds
    CreateTopics and CreatePartitions (a hostile admin request cannot allocate millions of logs).
    ``sasl_plain_users`` (user → password) makes every connection authenticate with SASL PLAIN before
    anything but ApiVersions and SaslHandshake is answered; None (the default) serves without
    authentication.  ``max_sasl_token_bytes`` bounds one authentication token.
    """

    node_id: int = 0
    advertised_host: Optional[str] = None
    advertised_port: Optional[int] = None
    auto_create_topics: bool = True
    default_partitions: int = 1
    max_frame_size: int = DEFAULT_BROKER_MAX_FRAME_SIZE
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    max_fetch_bytes: int = 64 * 1024 * 1024
    max_queued_requests: int = 16
    broker_quirks: Optional[str] = None
    fetch_max_bytes: int = 55 * _MiB
    produce_decompression_budget: int = 64 * _MiB
    max_request_bytes: int = 4 * _MiB
    max_topics: int = 10_000
    max_connections: int = field(default_factory=default_max_connections)
    max_buffered_bytes: int = 128 * _MiB
    connections_max_idle_ms: int = 600_000
    request_receive_timeout_ms: int = 30_000
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    #: The ``group.consumer.*`` settings of KIP-848 consumer groups.
    consumer_group: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)
    cluster_id: str = "kproto-mock-cluster"
    max_partitions_per_topic: int = 10_000
    sasl_plain_users: Optional[Mapping[str, str]] = None
    max_sasl_token_bytes: int = 64 * 1024
    #: Producer ids remembered (InitProducerId) before the oldest is forgotten.
    max_producer_ids: int = DEFAULT_MAX_PRODUCER_IDS
    #: ``log.message.timestamp.type`` of new topics: "CreateTime" or "LogAppendTime".
    log_message_timestamp_type: str = "CreateTime"
    brokers: int = 1
    replication_factor: Optional[int] = None
    min_insync_replicas: int = 1
    replication_lag_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError(f"brokers={self.brokers}: a cluster needs at least one")

    @property
    def node_ids(self) -> tuple:
        """The ids of the cluster's brokers."""
        return tuple(self.node_id + i for i in range(self.brokers))

    @property
    def default_replication_factor(self) -> int:
        """Replicas of each partition: as configured, else up to 3 (never more than the brokers)."""
        return self.replication_factor if self.replication_factor is not None else min(3, self.brokers)
