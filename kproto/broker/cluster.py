"""The mock cluster's topics: names, partitions and their logs, with automatic creation.

One broker (node ``node_id``) leads every partition and is its only replica, so metadata never carries
REPLICA_NOT_AVAILABLE and every acks level is met at once.  Topics are declared up front or created
with ``default_partitions`` on first mention by Metadata or Produce when ``auto_create`` is on (the
0.9 ``auto.create.topics.enable`` default).  Auto-creation stops at ``max_topics``.  Topic names follow 0.9's rule: 1-249 characters of
``[a-zA-Z0-9._-]``, and not ``.`` or ``..``.

Every topic gets a random UUID when created (Kafka 2.8+ topic ids): Metadata v10+ shows it and Fetch
v13+ names topics by it.  A topic is CreateTime or LogAppendTime (``message.timestamp.type``); the
cluster default applies unless ``create_topic`` says otherwise.
"""

from __future__ import annotations

import re
import uuid
from typing import Dict, List, Optional

from kproto.broker.log import PartitionLog

__all__ = ["Cluster", "valid_topic_name"]

_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def valid_topic_name(name: str) -> bool:
    """Whether 0.9 accepts ``name`` as a topic name."""
    return bool(_LEGAL.fullmatch(name)) and name not in (".", "..")


class Cluster:
    """Topics by name, each a list of :class:`PartitionLog`."""

    def __init__(self, *, auto_create: bool = True, default_partitions: int = 1, max_topics: int = 10_000,
                 log_append_time: bool = False) -> None:
        if default_partitions < 1:
            raise ValueError("default_partitions must be at least 1")
        self.auto_create = auto_create
        self.default_partitions = default_partitions
        #: Auto-creation stops at this many topics: a client naming millions of new topics cannot grow
        #: the broker without bound (declared topics are not limited).
        self.max_topics = max_topics
        self.topics: Dict[str, List[PartitionLog]] = {}
        #: Whether new topics are LogAppendTime unless created otherwise.
        self.log_append_time = log_append_time
        #: The id of each topic, and the topic of each id.
        self.topic_ids: Dict[str, uuid.UUID] = {}
        self.topics_by_id: Dict[uuid.UUID, str] = {}

    def create_topic(self, name: str, partitions: Optional[int] = None, *,
                     log_append_time: Optional[bool] = None) -> List[PartitionLog]:
        """Create ``name`` (or return it if it exists); raises ValueError for an illegal name.

        ``log_append_time``: stamp its batches with the broker's time (None: the cluster default).
        """
        if not valid_topic_name(name):
            raise ValueError(f"illegal topic name {name!r}")
        count = self.default_partitions if partitions is None else partitions
        if count < 1:
            raise ValueError("a topic needs at least one partition")
        if name not in self.topics:
            stamp = self.log_append_time if log_append_time is None else log_append_time
            self.topics[name] = [PartitionLog(log_append_time=stamp) for _ in range(count)]
            topic_id = uuid.uuid4()
            self.topic_ids[name] = topic_id
            self.topics_by_id[topic_id] = name
        return self.topics[name]

    def lookup(self, name: str, *, create: bool = False) -> Optional[List[PartitionLog]]:
        """The partitions of ``name``; created when ``create`` and auto-creation allow it."""
        partitions = self.topics.get(name)
        if (partitions is None and create and self.auto_create and valid_topic_name(name)
                and len(self.topics) < self.max_topics):
            partitions = self.create_topic(name)
        return partitions

    def partition(self, name: str, index: int) -> Optional[PartitionLog]:
        """One partition's log, or None if the topic or partition does not exist."""
        partitions = self.topics.get(name)
        if partitions is None or not 0 <= index < len(partitions):
            return None
        return partitions[index]
