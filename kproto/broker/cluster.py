"""The mock cluster's topics: names, partitions and their logs, with automatic creation.

One broker (node ``node_id``) leads every partition and is its only replica, so metadata never carries
REPLICA_NOT_AVAILABLE and every acks level is met at once.  Topics are declared up front or created
with ``default_partitions`` on first mention by Metadata or Produce when ``auto_create`` is on (the
0.9 ``auto.create.topics.enable`` default).  Auto-creation stops at ``max_topics``.  Topic names follow 0.9's rule: 1-249 characters of
``[a-zA-Z0-9._-]``, and not ``.`` or ``..``.

Every topic gets a random UUID when created (Kafka 2.8+ topic ids): Metadata v10+ shows it and Fetch
v13+ names topics by it.  A topic is CreateTime or LogAppendTime (``message.timestamp.type``); the
cluster default applies unless ``create_topic`` says otherwise.

The cluster makes every change to its topics itself (:meth:`Cluster.create_topic`,
:meth:`Cluster.delete_topic`, :meth:`Cluster.add_partitions`) and then calls its listeners
(:meth:`Cluster.on_change`): the data plane listens, so parked fetches look again when a topic they
wait on appears, grows or goes.  Its dictionaries are for reading.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from kproto.broker.log import PartitionLog

__all__ = ["Cluster", "Endpoint", "valid_topic_name"]

_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def valid_topic_name(name: str) -> bool:
    """Whether 0.9 accepts ``name`` as a topic name."""
    return bool(_LEGAL.fullmatch(name)) and name not in (".", "..")


@dataclass
class Endpoint:
    """Where clients reach the cluster's one broker, as Metadata and FindCoordinator advertise it; set
    when the broker starts listening (port 0 until then)."""

    host: str = "127.0.0.1"
    port: int = 0


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
        self._listeners: List[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every topic created, deleted or grown."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

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
            self._changed()
        return self.topics[name]

    def delete_topic(self, name: str) -> uuid.UUID:
        """Remove ``name`` (it must exist) with its id; returns the id."""
        del self.topics[name]
        topic_id = self.topic_ids.pop(name)
        self.topics_by_id.pop(topic_id, None)
        self._changed()
        return topic_id

    def add_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` (it must exist) to ``count`` partitions, stamped as its first one is."""
        partitions = self.topics[name]
        stamp = partitions[0].log_append_time
        partitions.extend(PartitionLog(log_append_time=stamp) for _ in range(count - len(partitions)))
        self._changed()

    def topic_name(self, topic_id: uuid.UUID) -> Optional[str]:
        """The name of the topic with id ``topic_id``, or None."""
        return self.topics_by_id.get(topic_id)

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
