""":class:`MockBroker`: an in-memory single-node Kafka cluster for tests, from sync or asyncio code.

Used from synchronous code it is a context manager that runs its own asyncio loop in a background
thread::

    with MockBroker(topics={"events": 4}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

From asyncio code it is an async context manager running on the caller's loop::

    async with MockBroker() as broker:
        ...

Either way the broker answers current clients at their defaults and 0.8/0.9-pinned ones alike,
advertising in ApiVersions exactly the versions it serves (see :mod:`kproto.broker.core`), can be
told to misbehave (:meth:`MockBroker.inject`), and can record every byte to a pcap (``record_pcap``),
written packet by packet as the traffic happens.  The inspection helpers (:meth:`MockBroker.messages`,
:meth:`MockBroker.committed`, ...) run on the broker's loop, so they are safe from any thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from concurrent.futures import Future
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Tuple,
    TypeVar,
    Union,
)

from kproto.broker.config import DEFAULT_BROKER_MAX_FRAME_SIZE, BrokerConfig
from kproto.broker.faults import Fault, FaultPlan
from kproto.broker.cluster import GROUP_KEY, TRANSACTION_KEY, ClusterControlError, ClusterEvent
from kproto.broker.core import BrokerCore
from kproto.broker.hooks import Hook, RequestHooks
from kproto.broker.recording import TrafficRecorder
from kproto.broker.server import BrokerServer
from kproto.connection.correlation import check_quirks
from kproto.group.coordinator import CoordinatorConfig, GroupSnapshot

if TYPE_CHECKING:  # the pure twin states the contract both record backends' record classes follow
    from kproto.records.decoded import RecordLike

__all__ = ["MockBroker", "StoredRecord", "parse_topic_spec"]

T = TypeVar("T")
PathLike = Union[str, "os.PathLike[str]"]
_START_TIMEOUT = 30.0


def parse_topic_spec(spec: str) -> Tuple[str, int]:
    """``"name:partitions"`` (or just ``"name"``, one partition) as (name, partitions)."""
    name, _, count = spec.rpartition(":") if ":" in spec else (spec, "", "1")
    if not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"topic spec {spec!r} is not name:partitions")
    return name, int(count)


class StoredRecord(NamedTuple):
    """One record a partition holds, whatever format it was produced in (control records left out)."""

    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Tuple[Tuple[str, Optional[bytes]], ...]
    timestamp: Optional[int]


class MockBroker:
    """An in-memory Kafka broker listening on ``host:port`` (port 0: a free one).

    ``topics`` declares topics up front (``{"name": partitions}`` or ``["name:partitions", ...]``);
    others are created with ``default_partitions`` on first Metadata/Produce when
    ``auto_create_topics``.  ``record_pcap`` names a pcap that receives the traffic as it happens; it is
    opened when the broker starts, so an unwritable path fails the start, and a symbolic link there is
    refused unless ``record_follow_symlinks`` (``record_server_port`` rewrites the broker's port in it).
    ``min_session_timeout_ms`` lowers the
    group coordinator's session-timeout floor (6000) for fast tests; ``coordinator_config``
    replaces the coordinator settings wholesale.  ``broker_quirks="0.8.2"`` answers GroupCoordinator v0
    with correlation id 0.  Other keywords go to :class:`~kproto.broker.config.BrokerConfig`.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        topics: Union[None, Mapping[str, int], Iterable[str]] = None,
        auto_create_topics: bool = True,
        default_partitions: int = 1,
        record_pcap: Optional[PathLike] = None,
        record_server_port: Optional[int] = None,
        record_follow_symlinks: bool = False,
        min_session_timeout_ms: Optional[int] = None,
        coordinator_config: Optional[CoordinatorConfig] = None,
        max_frame_size: int = DEFAULT_BROKER_MAX_FRAME_SIZE,
        broker_quirks: Optional[str] = None,
        **config: Any,
    ) -> None:
        # The coordinator's defaults already take modern clients' 45 s sessions (up to 30 min, as Kafka 2.3+).
        coordinator = coordinator_config or CoordinatorConfig()
        if min_session_timeout_ms is not None:
            coordinator = dataclasses.replace(coordinator, min_session_timeout_ms=min_session_timeout_ms)
        self.config = BrokerConfig(
            auto_create_topics=auto_create_topics,
            default_partitions=default_partitions,
            max_frame_size=max_frame_size,
            broker_quirks=check_quirks(broker_quirks),
            coordinator=coordinator,
            **config,
        )
        self.core = BrokerCore(self.config)
        for name, partitions in self._topic_list(topics):
            self.core.cluster.create_topic(name, partitions)
        self.faults = FaultPlan()
        #: Per-request hooks and per-broker latency, shared by every node's listener.
        self.hooks = RequestHooks()
        self.record_pcap = record_pcap
        self._record_server_port = record_server_port
        self._record_follow_symlinks = record_follow_symlinks
        self.recorder: Optional[TrafficRecorder] = None
        self._listen = (host, port)
        self._server: Optional[BrokerServer] = None
        #: The listener of each running node (the first is ``_server`` too).
        self._servers: Dict[int, BrokerServer] = {}
        self._ports: Dict[int, int] = {}
        self._bound_host = host
        self._timers: Optional["asyncio.Task[None]"] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._stopped: Optional[asyncio.Event] = None

    @staticmethod
    def _topic_list(topics: Union[None, Mapping[str, int], Iterable[str]]) -> List[Tuple[str, int]]:
        if topics is None:
            return []
        if isinstance(topics, Mapping):
            return [(name, int(count)) for name, count in topics.items()]
        return [parse_topic_spec(spec) for spec in topics]

    # ---------------------------------------------------------------- address

    @property
    def host(self) -> str:
        self._require_server()
        return self._bound_host

    @property
    def port(self) -> int:
        """The first broker's port (kept while it is stopped)."""
        self._require_server()
        return self._ports[self.core.cluster.node_ids[0]]

    @property
    def bootstrap_servers(self) -> str:
        """``"host:port"`` (with several brokers, every node's, comma-separated), ready for a client's
        bootstrap list."""
        self._require_server()
        return ",".join(f"{self._bound_host}:{self._ports[node]}" for node in self.core.cluster.node_ids)

    def _require_server(self) -> BrokerServer:
        if self._server is None:
            raise RuntimeError("the mock broker is not running")
        return self._server

    # ---------------------------------------------------------------- asyncio use

    async def __aenter__(self) -> "MockBroker":
        await self.start_async()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop_async()

    async def start_async(self) -> None:
        """Start listening on the running loop."""
        if self._server is not None:
            raise RuntimeError("the mock broker is already running")
        self._loop = asyncio.get_running_loop()
        if self.record_pcap is not None:
            self.recorder = TrafficRecorder(
                self.record_pcap, server_port=self._record_server_port, follow_symlinks=self._record_follow_symlinks
            )
        try:
            for index, node in enumerate(self.core.cluster.node_ids):
                port = self._listen[1] + index if self._listen[1] else 0
                await self._start_node(node, port)
        except BaseException:
            await self._stop_nodes()
            self._close_recording()
            raise
        self._server = self._servers[self.core.cluster.node_ids[0]]
        if len(self.core.cluster.node_ids) > 1:  # the coordinator's clock outlives any one node
            self._timers = asyncio.ensure_future(self.core.run_timers())

    async def _start_node(self, node: int, port: int) -> None:
        single = len(self.core.cluster.node_ids) == 1
        # The loop's exception handler is set once, by the first node's first start, and given back by it.
        first_start = node == self.core.cluster.node_ids[0] and node not in self._ports
        server = BrokerServer(
            self.core,
            self.faults,
            host=self._listen[0],
            port=port,
            recorder=self.recorder,
            node_id=node,
            hooks=self.hooks,
            run_timers=single,
            summarise_accept_failures=first_start,
        )
        await server.start()
        self._servers[node] = server
        self._bound_host, self._ports[node] = server.address

    async def _stop_nodes(self) -> None:
        servers, self._servers = self._servers, {}
        for node in sorted(servers, reverse=True):  # the first node restores the loop's handler last
            await servers[node].stop()

    async def stop_async(self) -> None:
        """Stop listening, close every connection, and close the recording if there is one."""
        server, self._server = self._server, None
        if server is not None:
            timers, self._timers = self._timers, None
            if timers is not None:
                timers.cancel()
                await asyncio.gather(timers, return_exceptions=True)
            await self._stop_nodes()
            self._close_recording()

    def _close_recording(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    # ---------------------------------------------------------------- synchronous use (background thread)

    def __enter__(self) -> "MockBroker":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the broker on a loop of its own in a daemon thread; returns once it listens."""
        if self._thread is not None:
            raise RuntimeError("the mock broker is already running")
        ready: Future = Future()
        self._thread = threading.Thread(target=self._thread_main, args=(ready,), name="kproto-mock-broker", daemon=True)
        self._thread.start()
        ready.result(_START_TIMEOUT)

    def _thread_main(self, ready: Future) -> None:
        async def main() -> None:
            self._stopped = asyncio.Event()
            try:
                await self.start_async()
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                ready.set_exception(exc)
                return
            ready.set_result(None)
            await self._stopped.wait()
            await self.stop_async()

        asyncio.run(main())

    def stop(self) -> None:
        """Stop the background broker (no-op if it is not running)."""
        thread, self._thread = self._thread, None
        if thread is None or self._loop is None:
            return
        stopped = self._stopped
        if stopped is not None:
            self._loop.call_soon_threadsafe(stopped.set)
        thread.join(_START_TIMEOUT)
        if thread.is_alive():
            raise RuntimeError(f"the mock broker did not stop within {_START_TIMEOUT} s")

    def restart(self) -> None:
        """Stop and start again on the same address, keeping topics, records and groups: what clients see
        of a broker restart (their connections close; the same ``bootstrap_servers`` reaches it again)."""
        self._listen = (self.host, self.port)
        self.stop()
        self.start()

    # ---------------------------------------------------------------- control and inspection

    def inject(
        self,
        api: Union[int, str],
        *,
        error: Union[None, int, str] = None,
        delay: float = 0.0,
        drop: bool = False,
        times: Optional[int] = 1,
        topic: Optional[str] = None,
        partition: Optional[int] = None,
    ) -> Fault:
        """Make the next ``times`` requests of ``api`` (key or name, e.g. ``"Produce"``) -- only those naming
        ``topic`` (and ``partition``) when given -- be answered no sooner than ``delay`` seconds after they
        arrived, and with ``error`` (a code or a name such as ``"NOT_LEADER_FOR_PARTITION"``) everywhere, or
        have their connection dropped.  The returned :class:`Fault` counts what it ``fired`` on."""
        return self.faults.inject(
            api, error=error, delay=delay, drop=drop, times=times, topic=topic, partition=partition
        )

    # ---------------------------------------------------------------- the cluster

    @property
    def node_ids(self) -> List[int]:
        """Every broker of the cluster, running or stopped."""
        return list(self.core.cluster.node_ids)

    def running(self) -> List[int]:
        """The brokers serving now."""
        return self._on_loop(lambda: sorted(self.core.cluster.live))

    @property
    def events(self) -> List[ClusterEvent]:
        """What the cluster controls did, in order (each a :class:`~kproto.broker.cluster.ClusterEvent`)."""
        return self._on_loop(lambda: list(self.core.cluster.events))

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader (-1 while no replica can lead); ClusterControlError if it does not exist."""
        return self._on_loop(lambda: self.core.cluster.require_placement(topic, partition).leader)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self._on_loop(lambda: self.core.cluster.require_placement(topic, partition).leader_epoch)

    def replicas(self, topic: str, partition: int) -> List[int]:
        return self._on_loop(lambda: list(self.core.cluster.require_placement(topic, partition).replicas))

    def isr(self, topic: str, partition: int) -> List[int]:
        return self._on_loop(lambda: list(self.core.cluster.require_placement(topic, partition).isr))

    def coordinator(self, group_id: str) -> int:
        """The broker coordinating ``group_id`` (-1 when every broker is stopped)."""
        return self._on_loop(lambda: self.core.cluster.coordinator(GROUP_KEY, group_id))

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker coordinating ``transactional_id`` (-1 when every broker is stopped)."""
        return self._on_loop(lambda: self.core.cluster.coordinator(TRANSACTION_KEY, transactional_id))

    def stop_broker(self, node_id: int, *, coordinator_loading_ms: int = 0) -> None:
        """Stop one broker while the others run: its partitions' leadership moves to another in-sync
        replica with a new leader epoch, the coordinators it held move to the next running broker
        (loading for ``coordinator_loading_ms``), then its listener and connections close.  Its port
        is kept for :meth:`start_broker`.  From the broker's own loop, await :meth:`stop_broker_async`."""
        self._run(self.stop_broker_async(node_id, coordinator_loading_ms=coordinator_loading_ms))

    async def stop_broker_async(self, node_id: int, *, coordinator_loading_ms: int = 0) -> None:
        self.core.cluster.require_node(node_id)
        if self._server is None:
            raise RuntimeError("the mock broker is not running")
        self.core.cluster.stop_node(node_id, coordinator_loading_ms=coordinator_loading_ms)
        server = self._servers.pop(node_id, None)
        if server is not None:
            await server.stop()

    def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again on its port; it rejoins the ISRs (nothing to catch up) and leads
        the partitions that had no leader.  From the broker's own loop, await :meth:`start_broker_async`."""
        self._run(self.start_broker_async(node_id))

    async def start_broker_async(self, node_id: int) -> None:
        self.core.cluster.require_node(node_id)
        if self._server is None:
            raise RuntimeError("the mock broker is not running")
        if node_id in self._servers:
            return
        await self._start_node(node_id, self._ports[node_id])
        self.core.cluster.start_node(node_id)

    def move_leader(self, topic: str, partition: int, to_node: int) -> None:
        """Make ``to_node`` (a running in-sync replica) lead the partition, with a new leader epoch."""
        self._on_loop(lambda: self.core.cluster.move_leader(topic, partition, to_node))

    def move_coordinator(self, group_id: str, to_node: int, *, loading_ms: int = 0) -> None:
        """Move ``group_id``'s coordinator to ``to_node``: the old one answers NOT_COORDINATOR, the new one
        COORDINATOR_LOAD_IN_PROGRESS for ``loading_ms``, then the group with its offsets and members."""
        self._on_loop(lambda: self.core.cluster.move_coordinator(GROUP_KEY, group_id, to_node, loading_ms))

    def move_transaction_coordinator(self, transactional_id: str, to_node: int, *, loading_ms: int = 0) -> None:
        """As :meth:`move_coordinator`, for a transactional id's coordinator."""
        self._on_loop(
            lambda: self.core.cluster.move_coordinator(TRANSACTION_KEY, transactional_id, to_node, loading_ms)
        )

    def shrink_isr(self, topic: str, partition: int, to: Iterable[int]) -> None:
        """Set the partition's in-sync replicas (running replicas, its leader among them): acks=all is
        NOT_ENOUGH_REPLICAS while fewer than ``min_insync_replicas`` remain.  Growing it back is the
        same call."""
        chosen = list(to)
        self._on_loop(lambda: self.core.cluster.shrink_isr(topic, partition, chosen))

    def set_latency(self, node_id: int, seconds: float) -> None:
        """Answer every request to ``node_id`` no sooner than ``seconds`` after it arrived (0: none)."""
        self.core.cluster.require_node(node_id)
        if seconds < 0:
            raise ClusterControlError(f"latency {seconds} s is negative")
        self.hooks.latency[node_id] = float(seconds)

    def add_hook(self, hook: Hook) -> Hook:
        """Call ``hook`` with every request any broker receives (see :mod:`kproto.broker.hooks`); returns it,
        for :meth:`remove_hook`."""
        return self.hooks.add(hook)

    def remove_hook(self, hook: Hook) -> None:
        self.hooks.remove(hook)

    def _run(self, coro: "Coroutine[Any, Any, T]") -> T:
        """Run a control coroutine on the broker's loop from another thread, and wait for it."""
        loop = self._loop
        if loop is None or self._server is None:
            coro.close()
            raise RuntimeError("the mock broker is not running")
        if self._thread is None or threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("on the broker's own loop, await the control's *_async form")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(_START_TIMEOUT)

    def faults_fired(self) -> Dict[str, int]:
        """Api name → requests an injected fault applied to so far."""
        from kproto.apis import APIS

        return {APIS[key].name: count for key, count in sorted(self.faults.fired.items())}

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Declare a topic (no-op if it exists)."""
        self._on_loop(lambda: self.core.cluster.create_topic(name, partitions))

    def topics(self) -> Dict[str, int]:
        """Topic name → partition count."""
        return self._on_loop(lambda: {name: len(ps) for name, ps in self.core.cluster.topics.items()})

    def high_watermark(self, topic: str, partition: int) -> int:
        """The next offset of a partition (−1 if it does not exist)."""

        def read() -> int:
            log = self.core.cluster.partition(topic, partition)
            return -1 if log is None else log.high_watermark

        return self._on_loop(read)

    def messages(self, topic: str, partition: int) -> List["RecordLike"]:
        """Every stored record of a partition, decoded (any codec; control records included)."""
        from kproto.records import decode_records

        return list(decode_records(self.log_bytes(topic, partition)))

    def records(self, topic: str, partition: Optional[int] = None) -> List[StoredRecord]:
        """The records of one partition (or of every partition, partition by partition), any magic,
        decompressed, in offset order; an unknown topic or partition has none."""
        from kproto.records import decode_records

        if partition is None:
            count = self.topics().get(topic, 0)
            return [record for index in range(count) for record in self.records(topic, index)]
        decoded = decode_records(self.log_bytes(topic, partition))
        return [
            StoredRecord(partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
            for batch in decoded.batches
            for r in batch.records
            if not r.is_control
        ]

    def log_bytes(self, topic: str, partition: int) -> bytes:
        """A partition's stored record batches as raw bytes (magic 2, as produced, offsets assigned)."""

        def read() -> bytes:
            log = self.core.cluster.partition(topic, partition)
            return b"" if log is None else log.batches()

        return self._on_loop(read)

    def committed(self, group_id: str) -> Dict[Tuple[str, int], Tuple[int, Optional[str]]]:
        """Offsets the group coordinator holds for ``group_id``: (topic, partition) → (offset, metadata)."""
        return self._on_loop(lambda: self.core.coordinator.committed(group_id))

    def group(self, group_id: str) -> Optional[GroupSnapshot]:
        """A snapshot of a group (state, generation, members), or None."""
        return self._on_loop(lambda: self.core.coordinator.snapshot(group_id))

    def request_counts(self) -> Dict[Tuple[int, int], int]:
        """Requests handled so far by (api key, version)."""
        return self._on_loop(lambda: dict(self.core.request_counts))

    @property
    def connections_accepted(self) -> int:
        return self._require_server().connections_accepted

    @property
    def server(self) -> BrokerServer:
        """The network side, with its budgets and counters (``budget``, ``connections_refused``, ...)."""
        return self._require_server()

    def save_pcap(self, path: PathLike) -> int:
        """Copy the traffic recorded so far to ``path`` now; returns the packet count."""
        if self.recorder is None:
            raise RuntimeError("this broker was not started with record_pcap")
        return self.recorder.save_copy(path)

    def _on_loop(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the broker's loop (directly when already there or when the broker is idle)."""
        loop = self._loop
        if loop is None or self._thread is None or threading.current_thread() is self._thread:
            return fn()

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(_START_TIMEOUT)


def run_broker(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    announce: Callable[[str], None] = lambda line: print(line, flush=True),
    **options: Any,
) -> int:
    """Run a :class:`MockBroker` in the foreground until SIGINT or SIGTERM; returns 0.

    The first line announced (printed by default) is ``listening on HOST:PORT`` (with several brokers,
    every node's ``HOST:PORT``, comma-separated: a bootstrap list); ``options`` are
    :class:`MockBroker` keywords (``topics``, ``record_pcap``, ...).  The pcap is written on the way out.
    """
    import signal

    broker = MockBroker(host, port, **options)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)  # before announcing: a signal may follow at once
            except (NotImplementedError, RuntimeError):  # not the main thread, or not Unix
                pass
        async with broker:
            announce(f"listening on {broker.bootstrap_servers}")
            await stop.wait()

    asyncio.run(serve())
    return 0
