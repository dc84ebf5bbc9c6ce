"""Settings of the mock broker, with 0.9.0 defaults where a 0.9 broker has one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kproto.broker.append import DEFAULT_MESSAGE_MAX_BYTES
from kproto.group.coordinator import CoordinatorConfig

__all__ = ["BrokerConfig", "DEFAULT_BROKER_MAX_FRAME_SIZE"]

#: Largest request frame accepted by default: 0.9's ``socket.request.max.bytes`` (100 MiB).
DEFAULT_BROKER_MAX_FRAME_SIZE = 100 * 1024 * 1024


@dataclass
class BrokerConfig:
    """What the broker advertises and the limits it enforces.

    ``advertised_host``/``advertised_port`` go into Metadata and GroupCoordinator answers (None: the
    address the broker listens on).  ``max_frame_size`` bounds one request (``socket.request.max.bytes``),
    ``message_max_bytes`` one produced entry, ``max_fetch_bytes`` the record bytes of one fetched
    partition whatever its ``max_bytes`` says, ``max_queued_requests`` the requests read ahead of the
    one being handled on a connection.  ``coordinator`` holds the group settings; tests may lower
    ``min_session_timeout_ms`` below 0.9's 6000.
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
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
