"""The mock cluster's topics: names, partitions and their logs, with automatic creation.

The cluster has one or more nodes (``node_ids``).  Each partition has replicas on ``replication_factor``
of them, spread round-robin from a start that moves with every topic, an in-sync replica set and a
leader with a leader epoch (:class:`Placement`).  With one node (the default) that node leads every
partition and is its only replica, so metadata never carries REPLICA_NOT_AVAILABLE and every acks level
is met at once.  Nodes stop and start, leaders move, ISRs shrink and coordinators fail over through the
cluster's own mutations (:meth:`Cluster.stop_node`, :meth:`Cluster.move_leader`, ...); each one is
recorded in :attr:`Cluster.events`.  Every node reads the same partition logs: replication is not
simulated byte by byte, only its visible effects (leaders, epochs, ISRs, acks=all waiting).

Topics are declared up front or created with ``default_partitions`` on first mention by Metadata or
Produce when ``auto_create`` is on (the 0.9 ``auto.create.topics.enable`` default).  Auto-creation stops
at ``max_topics``.  Topic names follow 0.9's rule: 1-249 characters of ``[a-zA-Z0-9._-]``, and not ``.``
or ``..``.

Every topic gets a random UUID when created (Kafka 2.8+ topic ids): Metadata v10+ shows it and Fetch
v13+ names topics by it.  A topic is CreateTime or LogAppendTime (``message.timestamp.type``); the
cluster default applies unless ``create_topic`` says otherwise.

The cluster makes every change to its topics itself (:meth:`Cluster.create_topic`,
:meth:`Cluster.delete_topic`, :meth:`Cluster.add_partitions`) and then calls its listeners
(:meth:`Cluster.on_change`): the data plane listens, so parked fetches look again when a topic they
wait on appears, grows or goes.  Its dictionaries are for reading.
"""

from __future__ import annotations

import contextvars
import re
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from kproto import ErrorCode
from kproto.broker.log import PartitionLog
from kproto.errors import KprotoError

__all__ = [
    "BrokerStarted",
    "BrokerStopped",
    "Cluster",
    "ClusterControlError",
    "ClusterEvent",
    "CoordinatorMoved",
    "Endpoint",
    "IsrChanged",
    "LeaderMoved",
    "Placement",
    "serving_node",
    "valid_topic_name",
]

#: The node whose listener received the request being handled.  The server sets it in each
#: connection's task, so handlers that answer per node (leadership, coordinators) read it without every
#: handler signature carrying it; None outside a connection (the first node is assumed).
serving_node: "contextvars.ContextVar[Optional[int]]" = contextvars.ContextVar("kproto_serving_node", default=None)

#: Coordinator key types of FindCoordinator.
GROUP_KEY, TRANSACTION_KEY = 0, 1


class ClusterControlError(KprotoError, ValueError):
    """A cluster control that names a node, topic or partition the cluster does not have, or asks for a
    state Kafka cannot reach (a leader outside the in-sync replicas, an ISR without its leader)."""


@dataclass(frozen=True)
class ClusterEvent:
    """Something the cluster did, with when (``time.monotonic()``) it happened."""

    at: float


@dataclass(frozen=True)
class BrokerStopped(ClusterEvent):
    node_id: int


@dataclass(frozen=True)
class BrokerStarted(ClusterEvent):
    node_id: int


@dataclass(frozen=True)
class LeaderMoved(ClusterEvent):
    """A partition's leader changed (``new_leader`` -1: no replica left to lead) with a new epoch."""

    topic: str
    partition: int
    old_leader: int
    new_leader: int
    leader_epoch: int


@dataclass(frozen=True)
class IsrChanged(ClusterEvent):
    topic: str
    partition: int
    isr: Tuple[int, ...]


@dataclass(frozen=True)
class CoordinatorMoved(ClusterEvent):
    """A group's (key type 0) or transactional id's (1) coordinator moved; the new one loads until
    ``loading_until`` (``time.monotonic()``)."""

    key_type: int
    key: str
    old_node: int
    new_node: int
    loading_until: float


@dataclass
class Placement:
    """Where one partition lives: its replicas, the in-sync ones, the leader (-1: none) and its epoch,
    with the offset each epoch began at, as a Kafka leader's epoch cache keeps it."""

    replicas: List[int]
    isr: List[int]
    leader: int
    leader_epoch: int = 0
    #: (leader epoch, the log end offset when it began), oldest first.
    epoch_starts: List[Tuple[int, int]] = field(default_factory=lambda: [(0, 0)])


_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def valid_topic_name(name: str) -> bool:
    """Whether 0.9 accepts ``name`` as a topic name."""
    return bool(_LEGAL.fullmatch(name)) and name not in (".", "..")


@dataclass
class Endpoint:
    """Where clients reach one broker, as Metadata and FindCoordinator advertise it; set when the broker
    starts listening (port 0 until then)."""

    host: str = "127.0.0.1"
    port: int = 0


class Cluster:
    """Topics by name, each a list of :class:`PartitionLog`."""

    def __init__(
        self,
        *,
        auto_create: bool = True,
        default_partitions: int = 1,
        max_topics: int = 10_000,
        log_append_time: bool = False,
        node_ids: Sequence[int] = (0,),
        replication_factor: int = 1,
        min_insync_replicas: int = 1,
    ) -> None:
        if default_partitions < 1:
            raise ValueError("default_partitions must be at least 1")
        if not node_ids or len(set(node_ids)) != len(node_ids):
            raise ClusterControlError(f"node ids must be distinct and at least one: {list(node_ids)}")
        if not 1 <= replication_factor <= len(node_ids):
            raise ClusterControlError(f"replication factor {replication_factor} on {len(node_ids)} broker(s)")
        if not 1 <= min_insync_replicas:
            raise ClusterControlError(f"min.insync.replicas {min_insync_replicas} is below 1")
        #: Every node of the cluster, running or stopped, in order.
        self.node_ids: Tuple[int, ...] = tuple(node_ids)
        #: The nodes serving now.
        self.live: Set[int] = set(node_ids)
        #: Where each node is reached (its port set when it first listens).
        self.endpoints: Dict[int, Endpoint] = {node: Endpoint() for node in node_ids}
        self.replication_factor = replication_factor
        #: ``min.insync.replicas`` of every topic: acks=all below it is NOT_ENOUGH_REPLICAS.
        self.min_insync_replicas = min_insync_replicas
        #: Where each partition of each topic lives, parallel to :attr:`topics`.
        self.placements: Dict[str, List[Placement]] = {}
        #: What the controls did, in order.
        self.events: List[ClusterEvent] = []
        self._coordinators: Dict[Tuple[int, str], int] = {}
        self._loading: Dict[Tuple[int, str], float] = {}
        # Every coordinator key asked about: those a stopped node held fail over with loading.
        self._seen_keys: Set[Tuple[int, str]] = set()
        self._topics_created = 0
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

    def create_topic(
        self, name: str, partitions: Optional[int] = None, *, log_append_time: Optional[bool] = None
    ) -> List[PartitionLog]:
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
            self.placements[name] = []
            self._place(name, count)
            self._topics_created += 1
            topic_id = uuid.uuid4()
            self.topic_ids[name] = topic_id
            self.topics_by_id[topic_id] = name
            self._changed()
        return self.topics[name]

    def delete_topic(self, name: str) -> uuid.UUID:
        """Remove ``name`` (it must exist) with its id; returns the id."""
        del self.topics[name]
        del self.placements[name]
        topic_id = self.topic_ids.pop(name)
        self.topics_by_id.pop(topic_id, None)
        self._changed()
        return topic_id

    def add_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` (it must exist) to ``count`` partitions, stamped as its first one is."""
        partitions = self.topics[name]
        stamp = partitions[0].log_append_time
        partitions.extend(PartitionLog(log_append_time=stamp) for _ in range(count - len(partitions)))
        self._place(name, count)
        self._changed()

    def topic_name(self, topic_id: uuid.UUID) -> Optional[str]:
        """The name of the topic with id ``topic_id``, or None."""
        return self.topics_by_id.get(topic_id)

    def lookup(self, name: str, *, create: bool = False) -> Optional[List[PartitionLog]]:
        """The partitions of ``name``; created when ``create`` and auto-creation allow it."""
        partitions = self.topics.get(name)
        if (
            partitions is None
            and create
            and self.auto_create
            and valid_topic_name(name)
            and len(self.topics) < self.max_topics
        ):
            partitions = self.create_topic(name)
        return partitions

    def partition(self, name: str, index: int) -> Optional[PartitionLog]:
        """One partition's log, or None if the topic or partition does not exist."""
        partitions = self.topics.get(name)
        if partitions is None or not 0 <= index < len(partitions):
            return None
        return partitions[index]

    # ---------------------------------------------------------------- placement

    def _place(self, name: str, count: int, replication_factor: Optional[int] = None) -> None:
        """Give partitions up to ``count`` of ``name`` their replicas: round-robin over the nodes from a
        start that moves with each topic, so leaders spread over topics as well as partitions."""
        placements = self.placements[name]
        nodes = self.node_ids
        factor = replication_factor or (len(placements[0].replicas) if placements else self.replication_factor)
        for index in range(len(placements), count):
            start = self._topics_created + index
            replicas = [nodes[(start + i) % len(nodes)] for i in range(factor)]
            isr = [node for node in replicas if node in self.live]
            placements.append(Placement(replicas, isr or replicas[:1], isr[0] if isr else -1))

    def set_replication(self, name: str, replication_factor: int) -> None:
        """Re-place a topic that was just created with another replication factor (CreateTopics)."""
        if not 1 <= replication_factor <= len(self.node_ids):
            raise ClusterControlError(f"replication factor {replication_factor} on {len(self.node_ids)} broker(s)")
        count = len(self.placements[name])
        self.placements[name] = []
        self._place(name, count, replication_factor)

    def placement(self, name: str, index: int) -> Optional[Placement]:
        """Where a partition lives, or None if it does not exist."""
        placements = self.placements.get(name)
        if placements is None or not 0 <= index < len(placements):
            return None
        return placements[index]

    def serving(self) -> int:
        """The node answering the current request (:data:`serving_node`; the first node outside one)."""
        node = serving_node.get()
        return self.node_ids[0] if node is None else node

    def require_node(self, node_id: int) -> None:
        if node_id not in self.endpoints:
            raise ClusterControlError(f"no broker {node_id}: the cluster's brokers are {list(self.node_ids)}")

    def require_placement(self, topic: str, partition: int) -> Placement:
        placement = self.placement(topic, partition)
        if placement is None:
            known = len(self.placements.get(topic, ()))
            where = f"it has {known} partition(s)" if topic in self.placements else "no such topic"
            raise ClusterControlError(f"no partition {topic}-{partition}: {where}")
        return placement

    def _record(self, event: ClusterEvent) -> None:
        self.events.append(event)

    def _elect(self, topic: str, index: int, placement: Placement, leader: int) -> None:
        old = placement.leader
        placement.leader = leader
        placement.leader_epoch += 1
        log = self.partition(topic, index)
        placement.epoch_starts.append((placement.leader_epoch, log.high_watermark if log is not None else 0))
        self._record(LeaderMoved(time.monotonic(), topic, index, old, leader, placement.leader_epoch))

    def _set_isr(self, topic: str, index: int, placement: Placement, isr: Iterable[int]) -> None:
        new = [node for node in placement.replicas if node in set(isr)]
        if new != placement.isr:
            placement.isr = new
            self._record(IsrChanged(time.monotonic(), topic, index, tuple(new)))

    def _each_placement(self) -> Iterable[Tuple[str, int, Placement]]:
        for topic, placements in self.placements.items():
            for index, placement in enumerate(placements):
                yield topic, index, placement

    def stop_node(self, node_id: int, *, coordinator_loading_ms: int = 0) -> None:
        """Take ``node_id`` out: it leaves every ISR (the last in-sync replica stays listed, as Kafka
        keeps it), each partition it led gets the next in-sync replica as leader (or none) with a new
        epoch, and the coordinators it held move to the next running node, loading for
        ``coordinator_loading_ms``."""
        self.require_node(node_id)
        if node_id not in self.live:
            return
        held = [key for key in list(self._seen_keys) if self.coordinator(*key) == node_id]
        self.live.discard(node_id)
        self._record(BrokerStopped(time.monotonic(), node_id))
        for topic, index, placement in self._each_placement():
            if node_id not in placement.replicas:
                continue
            remaining = [node for node in placement.isr if node != node_id and node in self.live]
            if placement.leader == node_id:
                self._elect(topic, index, placement, remaining[0] if remaining else -1)
            if remaining:
                self._set_isr(topic, index, placement, remaining)
        for key in held:
            self._coordinators.pop(key, None)
            target = self.coordinator(*key)
            if target >= 0:
                self._move_coordinator(key, node_id, target, coordinator_loading_ms)
        self._changed()

    def start_node(self, node_id: int) -> None:
        """Bring ``node_id`` back: it rejoins the ISR of its partitions at once (the logs are shared, so
        it has nothing to catch up) and leads those that had no leader; leadership it lost stays moved."""
        self.require_node(node_id)
        if node_id in self.live:
            return
        self.live.add(node_id)
        self._record(BrokerStarted(time.monotonic(), node_id))
        for topic, index, placement in self._each_placement():
            if node_id not in placement.replicas:
                continue
            if placement.leader < 0:
                self._set_isr(topic, index, placement, [node_id])
                self._elect(topic, index, placement, node_id)
            else:
                self._set_isr(topic, index, placement, placement.isr + [node_id])
        self._changed()

    def move_leader(self, topic: str, partition: int, to_node: int) -> None:
        """Make ``to_node`` (a running in-sync replica) the partition's leader, with a new epoch."""
        self.require_node(to_node)
        placement = self.require_placement(topic, partition)
        if to_node not in placement.isr or to_node not in self.live:
            raise ClusterControlError(
                f"broker {to_node} cannot lead {topic}-{partition}: its in-sync running "
                f"replicas are {[n for n in placement.isr if n in self.live]}"
            )
        if placement.leader != to_node:
            self._elect(topic, partition, placement, to_node)
            self._changed()

    def shrink_isr(self, topic: str, partition: int, to: Sequence[int]) -> None:
        """Set the partition's in-sync replicas to ``to`` (running replicas, the leader among them); an
        ISR may grow back the same way."""
        placement = self.require_placement(topic, partition)
        for node in to:
            self.require_node(node)
            if node not in placement.replicas or node not in self.live:
                raise ClusterControlError(
                    f"broker {node} is not a running replica of {topic}-{partition} (replicas {placement.replicas})"
                )
        if placement.leader not in to:
            raise ClusterControlError(f"the ISR of {topic}-{partition} must keep its leader {placement.leader}")
        self._set_isr(topic, partition, placement, to)
        self._changed()

    def leader_error(
        self, topic: str, partition: int, node: int, current_leader_epoch: int = -1, *, follower_ok: bool = False
    ) -> Optional[ErrorCode]:
        """Why ``node`` cannot serve the partition (Kafka's error), or None.

        As a Kafka replica checks: a ``current_leader_epoch`` older than the partition's is
        FENCED_LEADER_EPOCH (any negative one but -1, which means "not known", included), a newer one
        UNKNOWN_LEADER_EPOCH; then a node that does not lead it is
        NOT_LEADER_OR_FOLLOWER (also when it holds no replica: the partition exists in its metadata) --
        unless ``follower_ok`` and it is a running replica: Kafka lets followers serve a consumer's Fetch
        v11+ (KIP-392; the request then carries client metadata), up to the high watermark.
        """
        placement = self.placement(topic, partition)
        if placement is None:
            return None  # the caller answers an unknown partition itself
        if current_leader_epoch != -1:
            if current_leader_epoch < placement.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > placement.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if placement.leader != node and not (follower_ok and node in placement.replicas and node in self.live):
            return ErrorCode.NOT_LEADER_FOR_PARTITION  # Kafka 2.6+ calls code 6 NOT_LEADER_OR_FOLLOWER
        return None

    def epoch_end_offset(self, topic: str, index: int, epoch: int) -> Tuple[int, int]:
        """(leader epoch, end offset) answering OffsetForLeaderEpoch for ``epoch``, as Kafka's epoch
        cache does: the current epoch ends at the log end; an older one at the start of the first later
        epoch, reported under the largest known epoch not above it; an unknown or future one is (-1, -1)."""
        placement = self.placement(topic, index)
        log = self.partition(topic, index)
        if placement is None or log is None or epoch < 0 or epoch > placement.leader_epoch:
            return -1, -1
        if epoch == placement.leader_epoch:
            return epoch, log.high_watermark
        floor = max(e for e, _ in placement.epoch_starts if e <= epoch)  # epoch 0 always began at 0
        return floor, next(start for e, start in placement.epoch_starts if e > epoch)

    # ---------------------------------------------------------------- coordinators

    def coordinator(self, key_type: int, key: str) -> int:
        """The node coordinating a group (key type 0) or transactional id (1): where it was moved, or
        the node its key hashes to, or the next running one after it; -1 when every node is stopped."""
        self._seen_keys.add((key_type, key))
        pinned = self._coordinators.get((key_type, key))
        if pinned is not None and pinned in self.live:
            return pinned
        nodes = self.node_ids
        start = zlib.crc32(key.encode("utf-8", "surrogatepass")) % len(nodes)
        for step in range(len(nodes)):
            node = nodes[(start + step) % len(nodes)]
            if node in self.live:
                return node
        return -1

    def coordinator_error(self, key_type: int, key: str, node: int) -> Optional[ErrorCode]:
        """Why ``node`` cannot serve this group or transactional id now (Kafka's error), or None:
        NOT_COORDINATOR (code 16) elsewhere, COORDINATOR_LOAD_IN_PROGRESS (14) while it loads."""
        owner = self.coordinator(key_type, key)
        if owner != node:
            return ErrorCode.NOT_COORDINATOR_FOR_GROUP
        until = self._loading.get((key_type, key))
        if until is not None:
            if time.monotonic() < until:
                return ErrorCode.GROUP_LOAD_IN_PROGRESS
            del self._loading[(key_type, key)]
        return None

    def move_coordinator(self, key_type: int, key: str, to_node: int, loading_ms: int = 0) -> None:
        """Move a coordinator to ``to_node`` (running), which loads it for ``loading_ms``."""
        self.require_node(to_node)
        if to_node not in self.live:
            raise ClusterControlError(f"broker {to_node} is stopped: it cannot coordinate {key!r}")
        if loading_ms < 0:
            raise ClusterControlError(f"loading_ms {loading_ms} is negative")
        old = self.coordinator(key_type, key)
        self._move_coordinator((key_type, key), old, to_node, loading_ms)
        self._changed()

    def _move_coordinator(self, key: Tuple[int, str], old: int, new: int, loading_ms: int) -> None:
        self._coordinators[key] = new
        until = time.monotonic() + loading_ms / 1000.0
        if loading_ms > 0:
            self._loading[key] = until
        else:
            self._loading.pop(key, None)
        self._record(CoordinatorMoved(time.monotonic(), key[0], key[1], old, new, until))
