"""Apache Kafka itself as a test engine: real KRaft brokers started from jars, on loopback ports.

``with ApacheKafka(version="4.1.1") as kafka:`` resolves the broker's jars once into kproto's jar cache
(:mod:`kproto.testing.jars`), formats a log directory per node with Kafka's ``StorageTool``, starts one
JVM per node and returns when every node has logged that it started and accepts connections.
``kafka.bootstrap_servers`` is then a real broker's address; leaving the block stops the JVMs (SIGTERM,
then SIGKILL after a bound) and removes their directories.

Layout: every node is a combined broker and controller (``process.roles=broker,controller``) and the
controllers form a static quorum (``controller.quorum.voters``).  One node is the common case; three
nodes give a three-voter quorum in three JVMs, which starts as fast as one node per JVM and survives one
node being stopped (:meth:`ApacheKafka.stop_broker` / :meth:`ApacheKafka.start_broker` keep the node's
log directory, so a restart replays its segments).

Rules this module keeps:

* **Fixed ports.**  Readiness is checked by a TCP connect, which proves something only on a port fixed in
  the configuration (a broker on port 0 opens its socket before it is ready), so each node's ports are
  chosen by binding and releasing them, below the kernel's ephemeral range (a port in that range can
  become the local end of any outgoing connection while its node is stopped for a restart).  Another
  process can still take a port before the JVM binds it: a start that fails with "Address already in
  use" is retried from scratch on new ports, a restart on the same ports after a pause.
* **Only what it created is removed.**  Every run lives in a directory of its own under one harness-owned
  root (``$TMPDIR/kproto-apache-kafka``) marked by :data:`MARKER`, which the owning process holds locked
  while it runs.  A later run removes a marked directory whose lock is free (its owner died without
  cleaning up), after killing any JVM it recorded there whose command line still names that directory,
  and says so with a warning.  Nothing unmarked is touched.
* **Typed errors.**  :class:`~kproto.testing.jars.JavaToolMissingError` when ``java``/``mvn`` is missing,
  :class:`BrokerStartError` (with the tail of the node's log) when a node exits during start-up or is not
  ready within ``start_timeout`` seconds, :class:`AdminRequestError` when an admin request is refused.

Admin requests (:meth:`ApacheKafka.create_topic`, :meth:`ApacheKafka.request`) go through kproto's own
codecs and :class:`~kproto.connection.ClientConnection` over a blocking socket; no Java tool runs per call.
"""

from __future__ import annotations

import base64
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from kproto.connection import ClientConnection, ConnectionClosed, Response
from kproto.errors import KprotoError
from kproto.message_base import Message
from kproto.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetFetchRequest,
)
from kproto.testing import jars

if TYPE_CHECKING:
    from kproto.broker.mock import StoredRecord

__all__ = [
    "AdminRequestError",
    "ApacheKafka",
    "BrokerStartError",
    "KAFKA_VERSIONS",
    "MARKER",
    "NeedsMockBrokerError",
    "broker_artifacts",
    "harness_root",
    "missing_tools",
    "remove_stale_runs",
]

#: Marks a run directory as this module's; it also holds the owner's lock and the JVMs' process ids.
MARKER = ".kproto-apache-kafka"

#: Bound on formatting one node's log directory (a short JVM run of Kafka's StorageTool).
_FORMAT_TIMEOUT_S = 120.0
_SERVER_STARTED = "Kafka Server started"
_ADDRESS_IN_USE = "Address already in use"


@dataclass(frozen=True)
class _Release:
    """What a Kafka release line needs besides ``kafka_2.13``: its logging binding and its config format."""

    binding: Tuple[str, ...]
    log_system: str  # "log4j2" or "reload4j"


# Kafka publishes its slf4j binding only in its release tarball, so the classpath from Maven logs nothing
# without one.  Both lines use slf4j 1.7: 3.9 binds it to reload4j (log4j 1 syntax), 4.x to log4j 2 at
# the log4j-core version kafka-server depends on.
_RELEASES: Mapping[str, _Release] = {
    "3.9": _Release(("org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25"), "reload4j"),
    "4.1": _Release(("org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",), "log4j2"),
}

#: The release lines this harness knows how to run (any patch release of them).
KAFKA_VERSIONS: Tuple[str, ...] = tuple(sorted(_RELEASES))

_LOG_CONFIG = {
    "log4j2": (
        "status = warn\n"
        "appender.out.type = Console\n"
        "appender.out.name = out\n"
        "appender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.out.ref = out\n"
        "logger.state.name = state.change.logger\n"
        "logger.state.level = WARN\n"
    ),
    "reload4j": (
        "log4j.rootLogger=INFO, out\n"
        "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.state.change.logger=WARN\n"
    ),
}


class BrokerStartError(KprotoError):
    """A node exited during start-up or was not ready in time; the message ends with its log's last lines."""

    def __init__(self, message: str, log_tail: str = "", *, port_taken: bool = False) -> None:
        self.log_tail = log_tail
        #: The node could not bind a port (another process took it): a start on new ports may succeed.
        self.port_taken = port_taken
        super().__init__(f"{message}\n--- last lines of the broker's log ---\n{log_tail}" if log_tail else message)


class AdminRequestError(KprotoError):
    """A broker refused an admin request made by the harness (the message names the request and code)."""


class NeedsMockBrokerError(KprotoError):
    """Asked of a real broker something only :class:`~kproto.testing.MockBroker` does (injecting faults)."""


def _release(version: str) -> _Release:
    line = ".".join(version.split(".")[:2])
    try:
        return _RELEASES[line]
    except KeyError:
        raise ValueError(
            f"Apache Kafka {version!r}: this harness runs the release lines {', '.join(KAFKA_VERSIONS)}"
        ) from None


def broker_artifacts(version: str) -> List[str]:
    """The Maven coordinates of Kafka ``version``'s broker classpath (the broker plus its log binding)."""
    return [f"org.apache.kafka:kafka_2.13:{version}", *_release(version).binding]


def missing_tools() -> Optional[str]:
    """None when ``java`` and ``mvn`` are on ``PATH``; otherwise what to install (a test's skip reason)."""
    for tool in ("java", "mvn"):
        try:
            jars.require_tool(tool)
        except jars.JavaToolMissingError as exc:
            return str(exc)
    return None


def harness_root() -> Path:
    """The directory every run's directory is created under (``$TMPDIR/kproto-apache-kafka``)."""
    root = Path(tempfile.gettempdir()) / "kproto-apache-kafka"
    root.mkdir(parents=True, exist_ok=True)
    return root


_RANDOM = random.Random()  # its own generator: the process's random state is the application's


def _ephemeral_range() -> Tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _free_port() -> int:
    """A loopback port free now, below the kernel's ephemeral range when one is free there.

    A port from the ephemeral range can become the local end of any outgoing connection while its node is
    stopped (a restart then fails to bind); ports below the range are only ever taken by an explicit bind.
    """
    low, _ = _ephemeral_range()
    candidates = _RANDOM.sample(range(max(1024, low - 12000), low), 20) if low > 2048 else []
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _read_log(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def remove_stale_runs(root: Optional[Path] = None) -> List[Path]:
    """Remove run directories whose owner died without cleaning up; return the ones removed.

    A directory qualifies only if it carries :data:`MARKER` and nobody holds the marker's lock.  A JVM
    it recorded is killed first when its command line still names the directory (an orphan of the dead
    run).  Each removal is reported with a warning.
    """
    root = harness_root() if root is None else root
    removed = []
    for run in sorted(root.glob("run-*")):
        marker = run / MARKER
        if not marker.is_file():
            continue
        try:
            fd = os.open(marker, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its owner is alive
            killed = []
            for line in marker.read_text().splitlines():
                if line.startswith("pid ") and line[4:].isdigit():
                    pid = int(line[4:])
                    if str(run) in _cmdline(pid):
                        try:
                            os.kill(pid, signal.SIGKILL)
                            killed.append(pid)
                        except OSError:
                            pass
            shutil.rmtree(run, ignore_errors=True)
        finally:
            os.close(fd)
        removed.append(run)
        what = f" and killed its orphaned JVMs {killed}" if killed else ""
        warnings.warn(f"kproto: removed {run}, left by an Apache Kafka run that did not stop{what}", stacklevel=2)
    return removed


@dataclass
class _Node:
    node_id: int
    directory: Path
    port: int = 0
    controller_port: int = 0
    process: Optional["subprocess.Popen[bytes]"] = None
    log: Optional[IO[bytes]] = None
    starts: int = 0

    @property
    def log_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / f"server-{self.starts}.log"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"


@dataclass
class _Timing:
    resolve_s: float = 0.0
    format_s: float = 0.0
    start_s: float = 0.0
    attempts: int = 0
    extra: Dict[str, float] = field(default_factory=dict)


class ApacheKafka:
    """A real Apache Kafka cluster of ``brokers`` KRaft nodes on 127.0.0.1, for tests.

    ``version`` is a release of a line in :data:`KAFKA_VERSIONS` (``"3.9.1"`` still serves every
    0.8/0.9 request version; ``"4.1.1"`` is the modern reference).  ``heap`` is each JVM's ``-Xmx``;
    ``broker_config`` adds or overrides ``server.properties`` entries on every node.  Use it as a context
    manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        version: str = "4.1.1",
        brokers: int = 1,
        *,
        heap: str = "512m",
        broker_config: Optional[Mapping[str, object]] = None,
        start_timeout: float = 120.0,
        stop_timeout: float = 20.0,
        cache_dir: Optional["os.PathLike[str]"] = None,
        start_attempts: int = 3,
    ) -> None:
        if brokers < 1:
            raise ValueError("brokers must be at least 1")
        self.version = version
        self._release = _release(version)
        self.brokers = brokers
        self.heap = heap
        self.broker_config = dict(broker_config or {})
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.cache_dir = cache_dir
        self.start_attempts = start_attempts
        #: Seconds spent resolving jars, formatting and starting (the last attempt), and attempts made.
        self.timing = _Timing()
        self._java = ""
        self._classpath = ""
        self._run: Optional[Path] = None
        self._lock_fd: Optional[int] = None
        self._nodes: Dict[int, _Node] = {}
        self._cluster_id = ""
        self._versions: Optional[Dict[int, Tuple[int, int]]] = None

    # ------------------------------------------------------------------------------------------ public

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of every node, comma-separated."""
        return ",".join(f"127.0.0.1:{n.port}" for n in self._nodes.values())

    @property
    def log_dirs(self) -> Dict[int, Path]:
        """Node id → the directory holding that node's partition directories and segment files."""
        return {i: n.log_dir for i, n in self._nodes.items()}

    @property
    def node_ids(self) -> List[int]:
        return list(self._nodes)

    def address(self, node_id: int) -> Tuple[str, int]:
        """(host, port) of one node's client listener."""
        return ("127.0.0.1", self._nodes[node_id].port)

    def log_path(self, node_id: int) -> Path:
        """The current log file of one node's JVM (its stdout and stderr)."""
        return self._nodes[node_id].log_path

    def pid(self, node_id: int) -> int:
        """The process id of one running node's JVM: a test may signal it (SIGSTOP freezes the node, SIGCONT
        thaws it; stopping the cluster thaws a frozen node first).  ``ValueError`` when the node is stopped."""
        process = self._nodes[node_id].process
        if process is None or process.poll() is not None:
            raise ValueError(f"node {node_id} is not running")
        return process.pid

    def running(self, node_id: int) -> bool:
        process = self._nodes[node_id].process
        return process is not None and process.poll() is None

    def start(self) -> "ApacheKafka":
        """Resolve the jars (first use only), format the nodes and start them; returns when all are ready."""
        self._java = jars.require_tool("java")
        t0 = time.monotonic()
        self._classpath = str(jars.resolve(broker_artifacts(self.version), cache_dir=self.cache_dir) / "*")
        self.timing.resolve_s = time.monotonic() - t0
        remove_stale_runs()
        last: Optional[BrokerStartError] = None
        for attempt in range(1, self.start_attempts + 1):
            self.timing.attempts = attempt
            self._create_run()
            try:
                self._format_and_start()
                return self
            except BrokerStartError as exc:
                self.stop()
                if not exc.port_taken:
                    raise
                last = exc  # another process took a port between choosing and binding: new ports
        assert last is not None
        raise last

    def stop(self) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``stop_timeout``) and remove the run directory."""
        # All nodes at once: stopped one by one, the last ones wait for a quorum that is already gone.
        self._terminate(*self._nodes.values())
        if self._run is not None:
            shutil.rmtree(self._run, ignore_errors=True)
            self._run = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def stop_broker(self, node_id: int, *, kill: bool = False) -> None:
        """Stop one node, keeping its log directory (``kill``: SIGKILL at once, no clean shutdown)."""
        self._terminate(self._nodes[node_id], kill=kill)

    def start_broker(self, node_id: int) -> None:
        """Start a stopped node again on the same ports and log directory; returns when it is ready."""
        node = self._nodes[node_id]
        if self.running(node_id):
            raise ValueError(f"node {node_id} is running")
        deadline = time.monotonic() + self.start_timeout
        for attempt in range(1, self.start_attempts + 1):
            self._launch(node)
            try:
                self._wait_ready([node], deadline)
                return
            except BrokerStartError as exc:
                self._terminate(node, kill=True)
                if not exc.port_taken or attempt == self.start_attempts:
                    raise
                time.sleep(0.5)  # its ports are fixed: wait for whoever holds one to let go

    def request(self, message: Message, version: int, node_id: Optional[int] = None, timeout: float = 30.0) -> Message:
        """Send one request to a node (the first running one by default) and return its decoded response."""
        if node_id is None:
            node_id = next(i for i in self._nodes if self.running(i))
        return _exchange(self.address(node_id), [(message, version)], timeout)[0]

    def api_version(self, api_key: int, highest: int, node_id: Optional[int] = None) -> int:
        """The newest version of ``api_key`` up to ``highest`` that the broker serves."""
        if self._versions is None:  # every node runs the same release: ask one, once
            answer: Any = self.request(ApiVersionsRequest(), 0, node_id)
            self._versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        low, high = self._versions.get(api_key, (0, -1))
        if low > highest or high < 0:
            raise AdminRequestError(f"Apache Kafka {self.version} serves no version <= {highest} of api {api_key}")
        return min(highest, high)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Optional[Mapping[str, object]] = None,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic (no-op if it exists) and wait until every live node knows all its leaders and each
        leader serves its partitions (a Produce right after this returns is accepted); raises
        :class:`AdminRequestError` after ``timeout`` seconds."""
        T = CreateTopicsRequest.CreatableTopic
        configs = [T.CreatableTopicConfig(name=k, value=str(v)) for k, v in (config or {}).items()]
        request = CreateTopicsRequest(
            timeout_ms=int(timeout * 1000),
            topics=[T(name=name, num_partitions=partitions, replication_factor=replication_factor, configs=configs)],
        )
        answer: Any = self.request(request, self.api_version(19, 5))
        result = answer.topics[0]
        if result.error_code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise AdminRequestError(
                f"CreateTopics {name!r} on Apache Kafka {self.version}: error "
                f"{result.error_code} ({result.error_message})"
            )
        self.wait_for_leaders(name, partitions, timeout)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """Wait until every running node's metadata names a leader for each of ``topic``'s partitions and
        each leader answers for its partition (a node publishes leadership in its metadata a moment before
        it serves the partition)."""
        deadline = time.monotonic() + timeout
        version = self.api_version(3, 9)
        leaders: Dict[int, int] = {}
        for node_id in [i for i in self._nodes if self.running(i)]:
            while True:
                answer: Any = self.request(
                    MetadataRequest(
                        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
                    ),
                    version,
                    node_id,
                )
                found = [t for t in answer.topics if t.name == topic]
                if (
                    found
                    and found[0].error_code == 0
                    and len(found[0].partitions) >= partitions
                    and all(p.leader_id >= 0 for p in found[0].partitions)
                ):
                    leaders = {p.partition_index: p.leader_id for p in found[0].partitions}
                    break
                if time.monotonic() > deadline:
                    raise AdminRequestError(f"topic {topic!r} has no leaders on node {node_id} after {timeout} s")
                time.sleep(0.05)
        P = ListOffsetsRequest.ListOffsetsTopic
        for index, leader in sorted(leaders.items()):
            while True:
                answer = self.request(
                    ListOffsetsRequest(
                        replica_id=-1,
                        topics=[
                            P(name=topic, partitions=[P.ListOffsetsPartition(partition_index=index, timestamp=-1)])
                        ],
                    ),
                    self.api_version(2, 7),
                    leader,
                )
                code = answer.topics[0].partitions[0].error_code
                if code == 0:
                    break
                if time.monotonic() > deadline:
                    raise AdminRequestError(f"{topic}/{index}: leader {leader} answers error {code} after {timeout} s")
                time.sleep(0.05)

    def leader(self, topic: str, partition: int) -> int:
        """The node id leading ``topic``/``partition`` (per the first running node's metadata)."""
        answer: Any = self.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
            self.api_version(3, 9),
        )
        for t in answer.topics:
            for p in t.partitions if t.name == topic else ():
                if p.partition_index == partition and p.leader_id >= 0:
                    return int(p.leader_id)
        raise AdminRequestError(f"{topic}/{partition} has no leader on Apache Kafka {self.version}")

    def topics(self) -> Dict[str, int]:
        """Topic name → partition count, internal topics (``__consumer_offsets``, ...) left out."""
        answer: Any = self.request(MetadataRequest(topics=None), self.api_version(3, 9))
        return {
            t.name: len(t.partitions)
            for t in answer.topics
            if t.error_code == 0 and not t.is_internal and not t.name.startswith("__")
        }

    def delete_topics(self, names: Sequence[str], timeout: float = 30.0) -> None:
        """Delete topics and wait until no running node's metadata lists them."""
        if not names:
            return
        answer: Any = self.request(
            DeleteTopicsRequest(topic_names=list(names), timeout_ms=int(timeout * 1000)), self.api_version(20, 5)
        )
        for result in answer.responses:
            if result.error_code not in (0, 3):  # 3: UNKNOWN_TOPIC_OR_PARTITION (already gone)
                raise AdminRequestError(
                    f"DeleteTopics {result.name!r} on Apache Kafka {self.version}: error {result.error_code}"
                )
        deadline = time.monotonic() + timeout
        for node_id in [i for i in self._nodes if self.running(i)]:
            while set(names) & set(self._topic_names(node_id)):
                if time.monotonic() > deadline:
                    raise AdminRequestError(f"topics {sorted(names)} still listed by node {node_id} after {timeout} s")
                time.sleep(0.05)

    def _topic_names(self, node_id: int) -> List[str]:
        answer: Any = self.request(MetadataRequest(topics=None), self.api_version(3, 9, node_id), node_id)
        return [t.name for t in answer.topics]

    def records(self, topic: str, partition: Optional[int] = None) -> List["StoredRecord"]:
        """Every record of ``topic`` (one partition, or all partition by partition) up to the high watermark,
        read with Fetch (read_uncommitted) from each partition's leader; control records left out."""
        from kproto.broker.mock import StoredRecord
        from kproto.records import decode_records

        meta: Any = self.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
            self.api_version(3, 9),
        )
        found = [t for t in meta.topics if t.name == topic and t.error_code == 0]
        if not found:
            raise AdminRequestError(f"topic {topic!r} does not exist on Apache Kafka {self.version}")
        leaders = {p.partition_index: p.leader_id for p in found[0].partitions}
        wanted = sorted(leaders) if partition is None else [partition]
        out: List[StoredRecord] = []
        for index in wanted:
            leader = leaders[index]
            version = self.api_version(1, 12, leader)
            offset = 0
            while True:
                T = FetchRequest.FetchTopic
                request = FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=16 << 20,
                    isolation_level=0,
                    topics=[
                        T(
                            topic=topic,
                            partitions=[
                                T.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=8 << 20)
                            ],
                        )
                    ],
                )
                answer: Any = self.request(request, version, leader)
                data = answer.responses[0].partitions[0]
                if data.error_code != 0:
                    raise AdminRequestError(f"Fetch {topic}/{index} at offset {offset}: error {data.error_code}")
                if offset >= data.high_watermark:
                    break
                raw = data.records
                for record in decode_records(bytes(raw) if raw is not None else b""):
                    if record.offset < offset or record.offset >= data.high_watermark:
                        continue
                    offset = record.offset + 1
                    if record.is_control:
                        continue
                    out.append(
                        StoredRecord(
                            index,
                            record.offset,
                            record.key,
                            record.value,
                            tuple(record.headers or ()),
                            record.timestamp,
                        )
                    )
                for batch in decode_records(bytes(raw) if raw is not None else b"").batches:
                    # a batch of control records or of compacted-away records still moves the position
                    offset = max(offset, batch.base_offset + batch.last_offset_delta + 1)
        return out

    def committed(self, group_id: str, timeout: float = 30.0) -> Dict[Tuple[str, int], Tuple[int, Optional[str]]]:
        """The offsets ``group_id`` committed, from OffsetFetch to its coordinator: (topic, partition) →
        (offset, metadata)."""
        deadline = time.monotonic() + timeout
        while True:
            # 14/15/16: the coordinator is loading, not there yet (the offsets topic is created on first
            # use) or moved; all pass, so ask again until the bound.
            found: Any = self.request(FindCoordinatorRequest(key=group_id, key_type=0), self.api_version(10, 3))
            code = found.error_code
            if code == 0:
                answer: Any = self.request(
                    OffsetFetchRequest(group_id=group_id, topics=None), self.api_version(9, 7), found.node_id
                )
                code = answer.error_code
                if code == 0:
                    return {
                        (t.name, p.partition_index): (p.committed_offset, p.metadata)
                        for t in answer.topics
                        for p in t.partitions
                        if p.committed_offset >= 0
                    }
            if code not in (14, 15, 16) or time.monotonic() > deadline:
                raise AdminRequestError(f"offsets of group {group_id!r} on Apache Kafka {self.version}: error {code}")
            time.sleep(0.1)

    def __enter__(self) -> "ApacheKafka":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---------------------------------------------------------------------------------------- internals

    def _create_run(self) -> None:
        run = Path(tempfile.mkdtemp(prefix="run-", dir=harness_root()))
        # Locked before it gets its name, so no other run's clean-up ever sees this marker unlocked.
        pending = run / (MARKER + ".new")
        self._lock_fd = os.open(pending, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        os.write(self._lock_fd, f"owner {os.getpid()}\nversion {self.version}\n".encode())
        os.rename(pending, run / MARKER)
        self._run = run
        (run / "log4j.properties").write_text(_LOG_CONFIG[self._release.log_system])
        self._nodes = {}
        for node_id in range(1, self.brokers + 1):
            directory = run / f"node-{node_id}"
            directory.mkdir()
            self._nodes[node_id] = _Node(node_id, directory, _free_port(), _free_port())
        self._cluster_id = _cluster_id()
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes.values())
        replicas = min(3, self.brokers)
        for node in self._nodes.values():
            props: Dict[str, object] = {
                "process.roles": "broker,controller",
                "node.id": node.node_id,
                "controller.quorum.voters": voters,
                "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "log.dirs": node.log_dir,
                "num.partitions": 1,
                "offsets.topic.replication.factor": replicas,
                "offsets.topic.num.partitions": 1,
                "transaction.state.log.replication.factor": replicas,
                "transaction.state.log.min.isr": 1,
                "transaction.state.log.num.partitions": 1,
                "share.coordinator.state.topic.replication.factor": replicas,
                "share.coordinator.state.topic.min.isr": 1,
                "group.initial.rebalance.delay.ms": 0,
                "log.cleaner.dedupe.buffer.size": 2097152,
                # The cleaner looks for dirty compacted logs every 15 s by default; tests wait for it.
                "log.cleaner.backoff.ms": 200,
                "num.network.threads": 2,
                "num.io.threads": 2,
                "num.recovery.threads.per.data.dir": 1,
                "background.threads": 2,
            }
            props.update(self.broker_config)
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _java_cmd(self, node: _Node, main: str, *args: str, heap: str) -> List[str]:
        assert self._run is not None
        if self._release.log_system == "log4j2":
            logging = [f"-Dlog4j2.configurationFile={self._run / 'log4j.properties'}"]
        else:
            logging = [f"-Dlog4j.configuration=file:{self._run / 'log4j.properties'}"]
        return [
            self._java,
            f"-Xmx{heap}",
            "-Xss512k",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            *logging,
            "-cp",
            self._classpath,
            main,
            *args,
        ]

    def _format_and_start(self) -> None:
        t0 = time.monotonic()
        formats = []
        for node in self._nodes.values():
            cmd = self._java_cmd(
                node,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self._cluster_id,
                "-c",
                str(node.config_path),
                "--ignore-formatted",
                heap="256m",
            )
            out = (node.directory / "format.log").open("wb")
            formats.append(
                (node, out, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            )
        for node, out, process in formats:
            try:
                code = process.wait(_FORMAT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = None
            out.close()
            if code != 0:
                raise BrokerStartError(
                    f"Apache Kafka {self.version}: formatting node {node.node_id}'s log directory failed (exit {code})",
                    _tail(node.directory / "format.log"),
                )
        self.timing.format_s = time.monotonic() - t0
        t0 = time.monotonic()
        for node in self._nodes.values():
            self._launch(node)
        self._wait_ready(list(self._nodes.values()), time.monotonic() + self.start_timeout)
        self.timing.start_s = time.monotonic() - t0

    def _launch(self, node: _Node) -> None:
        node.starts += 1
        cmd = self._java_cmd(node, "kafka.Kafka", str(node.config_path), heap=self.heap)
        node.log = node.log_path.open("wb")
        node.process = subprocess.Popen(cmd, stdout=node.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        assert self._run is not None
        with (self._run / MARKER).open("a") as marker:
            marker.write(f"pid {node.process.pid}\n")

    def _wait_ready(self, nodes: Sequence[_Node], deadline: float) -> None:
        waiting = list(nodes)
        while waiting:
            for node in list(waiting):
                assert node.process is not None
                code = node.process.poll()
                # The whole log (a start writes a few hundred kilobytes): the bind failure is logged before the
                # node's long shutdown, far from the tail.
                log = _read_log(node.log_path)
                if code is not None:
                    raise BrokerStartError(
                        f"Apache Kafka {self.version} node {node.node_id} exited with {code} during start-up "
                        f"(config {node.config_path.name})",
                        _tail(node.log_path),
                        port_taken=_ADDRESS_IN_USE in log,
                    )
                if _ADDRESS_IN_USE in log:  # a lost port race: the node would take seconds to exit by itself
                    raise BrokerStartError(
                        f"Apache Kafka {self.version} node {node.node_id}: a port of "
                        f"{node.port}/{node.controller_port} is taken",
                        _tail(node.log_path),
                        port_taken=True,
                    )
                if _SERVER_STARTED in log and _connects(node.port):
                    waiting.remove(node)
            if not waiting:
                return
            if time.monotonic() > deadline:
                node = waiting[0]
                raise BrokerStartError(
                    f"Apache Kafka {self.version} node {node.node_id} was not ready within {self.start_timeout:.0f} s",
                    _tail(node.log_path),
                )
            time.sleep(0.1)

    def _terminate(self, *nodes: _Node, kill: bool = False) -> None:
        live = [n.process for n in nodes if n.process is not None and n.process.poll() is None]
        for process in live:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            if not kill:
                process.send_signal(signal.SIGCONT)  # a frozen node (SIGSTOP) handles SIGTERM only once thawed
        deadline = time.monotonic() + self.stop_timeout
        for process in live:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for node in nodes:
            node.process = None
            if node.log is not None:
                node.log.close()
                node.log = None


def _cluster_id() -> str:
    # The form StorageTool's random-uuid prints: 16 random bytes in unpadded base64url.  Like Kafka's own
    # generator, never one starting with "-", which the tool's argument parser would take for an option.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _exchange(address: Tuple[str, int], requests: Sequence[Tuple[Message, int]], timeout: float) -> List[Message]:
    """Send requests over one new connection and return their responses (kproto's codecs, blocking)."""
    conn = ClientConnection(client_id="kproto-apache-kafka")
    answers: List[Message] = []
    with socket.create_connection(address, timeout=timeout) as sock:
        for message, version in requests:
            sock.sendall(conn.send(message, version).frame)
        while len(answers) < len(requests):
            data = sock.recv(1 << 16)
            for event in conn.receive_data(data):
                if isinstance(event, ConnectionClosed):
                    raise AdminRequestError(f"broker at {address[0]}:{address[1]} closed the connection")
                if isinstance(event, Response):
                    answers.append(event.message)
    return answers
