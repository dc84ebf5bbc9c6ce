"""What a client knows of the cluster: brokers, partition leaders, and one connection per broker and purpose.

Why one place: the producer and the consumer both need the same three things -- bootstrap from a list of
``host:port``, learn the leaders of some topics from Metadata, and reuse connections -- and both must
forget a leader when a broker answers NOT_LEADER_FOR_PARTITION.  A connection is keyed by (node id,
purpose): the consumer's Fetch long polls must not sit in front of its group requests (a broker handles
one request of a connection at a time), so group traffic gets a connection of its own.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from kproto import ErrorCode
from kproto.client.connection import (
    DEFAULT_REQUEST_TIMEOUT_MS,
    BrokerConnectionError,
    BrokerVersions,
    Connection,
    RequestTimeoutError,
)
from kproto.messages import MetadataRequest, MetadataResponse

__all__ = ["BrokerNode", "ClusterView", "parse_bootstrap"]

_METADATA = 3


@dataclass(frozen=True)
class BrokerNode:
    """A broker as Metadata describes it."""

    node_id: int
    host: str
    port: int


def parse_bootstrap(servers: "str | Sequence[str]") -> List[Tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or a list of ``"host:port"`` as (host, port) pairs."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no bootstrap servers")
    return out


class ClusterView:
    """Brokers, leaders and connections shared by one producer or consumer."""

    def __init__(
        self,
        bootstrap_servers: "str | Sequence[str]",
        *,
        client_id: str = "kproto",
        broker_release: Optional[BrokerVersions] = None,
        max_in_flight: int = 5,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        connect_timeout_ms: int = 10000,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        #: every connection's request bound, and the TCP handshake's (see :class:`Connection`)
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self.client_id = client_id
        self.broker_release = broker_release
        self.max_in_flight = max_in_flight
        self.retry_backoff_ms = retry_backoff_ms
        self.brokers: Dict[int, BrokerNode] = {}
        #: (topic, partition) → leader node id
        self.leaders: Dict[Tuple[str, int], int] = {}
        #: topic → partition count, for topics Metadata described without error
        self.partitions: Dict[str, int] = {}
        #: topic id -> name, from Metadata v10+ (KIP-848 assignments name topics by id)
        self.topic_names: Dict[uuid.UUID, str] = {}
        self._connections: Dict[Tuple[object, str], Connection] = {}
        self._opening: Dict[Tuple[object, str], "asyncio.Future[Connection]"] = {}
        self._metadata_lock = asyncio.Lock()

    # ---------------------------------------------------------------- connections

    async def connection(self, node_id: Optional[int], purpose: str = "data") -> Connection:
        """The open connection to ``node_id`` for ``purpose`` (None: any broker), opened on first use.

        Any broker is the first known one that accepts a connection: a stopped broker is skipped, so a
        request any broker can answer (FindCoordinator, Metadata) still goes out while one is down."""
        if node_id is None:
            for (node, kind), conn in self._connections.items():
                if kind == purpose and not conn.closed:
                    return conn
            if not self.brokers:
                return await self._open(("bootstrap", purpose), None)
            refused: Optional[BrokerConnectionError] = None
            for candidate in list(self.brokers):
                try:
                    return await self._open((candidate, purpose), candidate)
                except BrokerConnectionError as exc:
                    refused = exc
            assert refused is not None
            raise refused
        return await self._open((node_id, purpose), node_id)

    def is_open(self, node_id: int, purpose: str = "data") -> bool:
        """Whether the connection to ``node_id`` for ``purpose`` is open now (:meth:`connection` returns it
        without waiting)."""
        conn = self._connections.get((node_id, purpose))
        return conn is not None and not conn.closed

    async def _open(self, key: Tuple[object, str], node_id: Optional[int]) -> Connection:
        conn = self._connections.get(key)
        if conn is not None and not conn.closed:
            return conn
        opening = self._opening.get(key)
        if opening is not None:
            return await asyncio.shield(opening)
        future: "asyncio.Future[Connection]" = asyncio.get_running_loop().create_future()
        self._opening[key] = future
        try:
            conn = await self._dial(node_id, key[1])
            self._connections[key] = conn
            future.set_result(conn)
            return conn
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            raise
        finally:
            del self._opening[key]

    async def _dial(self, node_id: Optional[int], purpose: str) -> Connection:
        if node_id is not None and node_id in self.brokers:
            addresses = [(self.brokers[node_id].host, self.brokers[node_id].port)]
        else:
            addresses = list(self.bootstrap)
        last: Optional[BaseException] = None
        for host, port in addresses:
            try:
                return await Connection.open(
                    host,
                    port,
                    client_id=self.client_id,
                    broker_release=self.broker_release,
                    max_in_flight=self.max_in_flight if purpose == "data" else 5,
                    connect_timeout=self.connect_timeout,
                    request_timeout=self.request_timeout,
                )
            except BrokerConnectionError as exc:
                last = exc
        # the last failure's class (RequestTimeoutError for a silent broker) says what happened
        kind = type(last) if isinstance(last, BrokerConnectionError) else BrokerConnectionError
        raise kind(f"no broker reachable for node {node_id}: {last}") from last

    def forget_connection(self, conn: Connection) -> None:
        """Drop a failed connection so the next use opens a new one."""
        for key, value in list(self._connections.items()):
            if value is conn:
                del self._connections[key]

    def forget_closed(self) -> None:
        """Drop every connection that has failed or closed."""
        self._connections = {key: conn for key, conn in self._connections.items() if not conn.closed}

    async def close(self) -> None:
        conns, self._connections = list(self._connections.values()), {}
        for conn in conns:
            await conn.close()

    # ---------------------------------------------------------------- metadata

    async def refresh(self, topics: Iterable[str]) -> MetadataResponse:
        """Ask any broker for ``topics`` and update brokers, leaders and partition counts."""
        wanted = sorted(set(topics))
        async with self._metadata_lock:
            last: Optional[BrokerConnectionError] = None
            # A broker that stopped must not be the only one asked: any open connection first, then
            # every broker the last metadata named, then the bootstrap list (before any metadata, the
            # first attempt already went through it).  A broker that accepted and stayed silent spent
            # the request bound: that ends the refresh, so the caller's bound holds.
            candidates: List[object] = [None, *self.brokers, "bootstrap"] if self.brokers else [None]
            for node in candidates:
                try:
                    if node == "bootstrap":
                        conn = await self._open(("bootstrap", "data"), None)
                    else:
                        conn = await self.connection(node)  # type: ignore[arg-type]
                except RequestTimeoutError:
                    raise
                except BrokerConnectionError as exc:
                    last = exc
                    continue
                version = conn.version(_METADATA)
                Topic = MetadataRequest.MetadataRequestTopic
                request = MetadataRequest(topics=[Topic(name=t) for t in wanted])
                if version >= 4:
                    request.allow_auto_topic_creation = True
                try:
                    response = await conn.request(request, version)
                except RequestTimeoutError:
                    self.forget_connection(conn)
                    raise
                except BrokerConnectionError as exc:
                    self.forget_connection(conn)
                    last = exc
                    continue
                assert isinstance(response, MetadataResponse)
                self._apply(response)
                return response
            assert last is not None
            raise last

    def _apply(self, response: MetadataResponse) -> None:
        self.brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port) for b in response.brokers}
        for topic in response.topics:
            if topic.error_code != ErrorCode.NONE or topic.name is None:
                continue
            self.partitions[topic.name] = len(topic.partitions)
            topic_id = getattr(topic, "topic_id", None)
            if topic_id is not None and topic_id.int:
                self.topic_names[topic_id] = topic.name
            for p in topic.partitions:
                key = (topic.name, p.partition_index)
                if p.error_code == ErrorCode.NONE and p.leader_id >= 0:
                    self.leaders[key] = p.leader_id
                else:
                    self.leaders.pop(key, None)

    def leader(self, topic: str, partition: int) -> Optional[int]:
        return self.leaders.get((topic, partition))

    def forget_leader(self, topic: str, partition: int) -> None:
        """A broker said it does not lead this partition: the next send waits for fresh metadata."""
        self.leaders.pop((topic, partition), None)

    def unknown(self, topics: Iterable[str]) -> Set[str]:
        """Topics among ``topics`` without known partition counts."""
        return {t for t in topics if t not in self.partitions}
