"""How faithfully a broker answers like Apache Kafka: the same request sequences sent to both, compared.

A *scenario* is a function that talks to a broker through a :class:`Session`: it sends requests built with
kproto's codecs over one or more connections (``session.call``, or ``session.send`` then
``session.wait`` for requests that block, such as a JoinGroup waiting for the rest of its group) and may
use what earlier answers said (a member id, a producer id) to build later requests.  :func:`run_scenario`
runs one scenario against one broker and records every answer with the moment it arrived;
:func:`compare` lines up two runs of the same scenario and compares the answers field by field.

Before comparing, an answer is flattened into ``path -> value`` pairs (``topics[0].partitions[1].
error_code``) and what legitimately differs between two brokers is normalised (:func:`normalise`):
cluster and topic ids, member and producer ids (each replaced by the order in which it first appeared, so
that "the leader is the member that joined first" still compares), ports, throttle times, error
message texts (only their presence is compared), fetch session ids and record batches (compared as their
records' offsets, keys, values, headers and timestamps rather than bytes).  Arrival times are compared
with a tolerance when the scenario says an answer's timing matters (``session.wait(..., timed=True)``).

:data:`SCENARIOS` is the corpus: the requests real clients sent at their defaults (``tests/golden``),
and generated sequences over every api the mock broker serves, error paths included.  Each scenario
names the Kafka release line it is meant for (``"3.9"`` still serves the 0.8/0.9 request versions,
``"4.1"`` is the modern reference).  ``benchmarks/fidelity.py`` runs the corpus and prints the counts.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from kproto.apis import APIS
from kproto.connection import ClientConnection, ConnectionClosed, Response
from kproto.errors import KprotoError
from kproto.message_base import Message
from kproto.records import decode_records

__all__ = [
    "DOCUMENTED",
    "KAFKA_CONFIG",
    "Answer",
    "Comparison",
    "Difference",
    "Documented",
    "FidelityError",
    "Scenario",
    "ScenarioRun",
    "Session",
    "Target",
    "comparable_mock",
    "compare",
    "documented_seen",
    "flatten",
    "kafka_target",
    "mock_target",
    "normalise",
    "normalised_answers",
    "parse_address",
    "run_and_compare",
    "run_pair",
    "run_scenario",
    "undocumented",
]

#: Seconds a response may take before the session gives up on it.
RESPONSE_TIMEOUT = 30.0


class FidelityError(KprotoError):
    """A scenario could not be run against a broker (closed connection, timeout, unknown label)."""


@dataclass
class Answer:
    """One response: the request it answers, its decoded body as a dict, and when it arrived."""

    label: str
    api_key: int
    version: int
    body: Optional[Dict[str, Any]]  # None: the broker closed the connection instead of answering
    sent_at: float
    arrived_at: float
    timed: bool = False


@dataclass
class Target:
    """A broker to run scenarios against: its address and how to create a topic on it."""

    name: str
    address: Tuple[str, int]
    create_topic: Callable[[str, int], None]


class _Conn:
    def __init__(self, address: Tuple[str, int], client_id: str) -> None:
        self.sock = socket.create_connection(address, timeout=RESPONSE_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection(client_id=client_id)
        self.ready: List[object] = []
        self.closed = False

    def receive(self) -> Optional[Response[Any]]:
        while not self.ready:
            if self.closed:
                return None
            try:
                data = self.sock.recv(1 << 16)
            except (ConnectionResetError, socket.timeout):
                data = b""
            if not data:
                self.closed = True
                return None
            self.ready.extend(self.conn.receive_data(data))
        event = self.ready.pop(0)
        if isinstance(event, ConnectionClosed):
            self.closed = True
            return None
        assert isinstance(event, Response)
        return event


class Session:
    """What a scenario talks through: named connections to one broker, and the answers so far.

    ``prefix`` is unique per scenario run; scenarios name their topics and groups with
    :meth:`name` so that runs against a broker that keeps state never meet.
    """

    def __init__(self, target: Target, prefix: str, client_id: str = "kproto-fidelity") -> None:
        self.target = target
        self.prefix = prefix
        self.client_id = client_id
        self.answers: List[Answer] = []
        self._conns: Dict[str, _Conn] = {}
        self._pending: Dict[str, Tuple[str, int, int, float]] = {}
        self.start = time.monotonic()

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def create_topic(self, suffix: str, partitions: int = 1) -> str:
        topic = self.name(suffix)
        self.target.create_topic(topic, partitions)
        return topic

    def _conn(self, name: str) -> _Conn:
        if name not in self._conns:
            self._conns[name] = _Conn(self.target.address, self.client_id)
        return self._conns[name]

    def send(self, label: str, message: Message, version: int, conn: str = "main") -> None:
        """Send without waiting; :meth:`wait` collects the answer."""
        c = self._conn(conn)
        sent = c.conn.send(message, version)
        c.sock.sendall(sent.frame)
        if sent.expects_response:
            self._pending[label] = (conn, int(message.API_KEY or 0), version, time.monotonic())

    def wait(self, label: str, timed: bool = False, record: bool = True) -> Any:
        """The answer to the request sent as ``label``: the response message of the request's api (None when
        the broker closed the connection).  ``timed``: its arrival time is compared too; ``record=False``:
        not compared at all (a keepalive whose count depends on timing)."""
        try:
            conn, api_key, version, sent_at = self._pending.pop(label)
        except KeyError:
            raise FidelityError(f"no request {label!r} is waiting for an answer") from None
        response = self._conn(conn).receive()
        now = time.monotonic()
        message = None if response is None else response.message
        if not record:
            return message
        body = None if message is None else message.to_dict()
        self.answers.append(Answer(label, api_key, version, body, sent_at - self.start, now - self.start, timed))
        return message

    def call(self, label: str, message: Message, version: int, conn: str = "main", record: bool = True) -> Any:
        """Send and wait."""
        self.send(label, message, version, conn)
        return self.wait(label, record=record)

    def close(self, conn: Optional[str] = None) -> None:
        for name in [conn] if conn else list(self._conns):
            c = self._conns.pop(name, None)
            if c is not None:
                c.sock.close()


@dataclass(frozen=True)
class Scenario:
    """A request sequence: ``run(session)`` sends it; ``kafka`` is the release line it is meant for."""

    name: str
    kafka: str
    run: Callable[[Session], None]
    #: Arrival times of timed answers may differ by this many seconds.
    tolerance_s: float = 0.5


@dataclass
class ScenarioRun:
    scenario: str
    target: str
    answers: List[Answer]
    error: Optional[str] = None


def run_scenario(scenario: Scenario, target: Target, prefix: Optional[str] = None) -> ScenarioRun:
    """Run ``scenario`` against ``target``; a scenario that fails is recorded with its error, not raised."""
    session = Session(target, prefix or f"fid-{scenario.name}-{uuid.uuid4().hex[:6]}")
    error = None
    try:
        scenario.run(session)
    except Exception as exc:  # the comparison reports it as a whole-scenario difference
        error = f"{type(exc).__name__}: {exc}"
    finally:
        session.close()
    return ScenarioRun(scenario.name, target.name, session.answers, error)


# ------------------------------------------------------------------------------------------ normalising

#: Fields that differ between any two brokers and are left out of the comparison.
DROPPED = frozenset(
    {
        "throttle_time_ms",
        "cluster_id",
        "port",
        "host",
        "rack",
        "log_append_time_ms",
        # Free text: Kafka explains many answers (even successes) in words of its own.
        "error_message",
    }
)
#: Lists whose order carries no meaning (Kafka answers from hash maps): sorted by these keys first.
_ORDER_KEYS = ("partition_index", "partition", "group_id", "name", "topic", "topic_name", "api_key", "node_id", "key")
#: Identifiers a broker makes up: compared as "the n-th distinct value seen in this run".
#: Field name -> the kind of id it holds (a leader is a member: both count in one numbering).
SYMBOLIC: Mapping[str, str] = {
    "member_id": "member",
    "leader": "member",
    "producer_id": "producer",
    "topic_id": "topic",
    "session_id": "session",
}
_ZERO_UUID = uuid.UUID(int=0)


class _Symbols:
    def __init__(self) -> None:
        self.seen: Dict[Tuple[str, Any], str] = {}

    def __call__(self, kind: str, value: Any) -> Any:
        # "None given" in each kind's own terms (0 is a real producer id: a fresh Kafka hands it out first).
        if value in (None, "", -1, _ZERO_UUID) or (value == 0 and kind != "producer"):
            return value
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"<{kind}#{sum(1 for k in self.seen if k[0] == kind)}>"
        return self.seen[key]


def _records_summary(raw: Any) -> Any:
    if raw is None:
        return None
    data = bytes(raw)
    if not data:
        return []
    try:
        decoded = decode_records(data)
    except KprotoError as exc:
        return f"<undecodable: {type(exc).__name__}>"
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers), bool(r.is_control)) for r in decoded]


def _ordered(items: List[Dict[str, Any]], symbols: Optional[Callable[[str, Any], Any]] = None) -> List[Dict[str, Any]]:
    if symbols is not None and "member_id" in items[0]:  # group members: a hash map's order in Kafka
        return sorted(items, key=lambda item: repr(symbols("member", item["member_id"])))  # type: ignore[misc]
    for key in _ORDER_KEYS:
        if key in items[0]:
            return sorted(items, key=lambda item: repr(item.get(key)))
    if symbols is not None and "topic_id" in items[0]:  # a KIP-848 assignment: topics by id alone
        return sorted(items, key=lambda item: repr(symbols("topic", item["topic_id"])))  # type: ignore[misc]
    return items


def flatten(
    value: Any, path: str = "", symbols: Optional[Callable[[str, Any], Any]] = None
) -> Iterator[Tuple[str, str, Any]]:
    """(path, leaf field name, value) for every leaf of a ``to_dict`` tree; lists of structs whose order
    means nothing come sorted (by their member's symbol when ``symbols`` names them)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten_field(key, item, f"{path}.{key}" if path else key, symbols)
    else:
        yield path, path.rsplit(".", 1)[-1], value


def _flatten_field(
    key: str, item: Any, path: str, symbols: Optional[Callable[[str, Any], Any]]
) -> Iterator[Tuple[str, str, Any]]:
    if key == "records":
        yield path, key, _records_summary(item)
    elif isinstance(item, dict):
        yield from flatten(item, path, symbols)
    elif isinstance(item, list) and item and isinstance(item[0], dict):
        yield path, key, len(item)
        for i, sub in enumerate(_ordered(item, symbols)):
            yield from flatten(sub, f"{path}[{i}]", symbols)
    else:
        yield path, key, item


def normalise(body: Optional[Mapping[str, Any]], symbols: Callable[[str, Any], Any]) -> Dict[str, Any]:
    """``path -> value`` of one answer, with what legitimately differs between brokers normalised."""
    if body is None:
        return {"<connection closed>": True}
    out: Dict[str, Any] = {}
    for path, name, value in flatten(dict(body), symbols=symbols):
        if name in DROPPED:
            continue
        if name in SYMBOLIC:
            value = symbols(SYMBOLIC[name], value)
        elif name == "members" and isinstance(value, list):
            value = [symbols("member", v) for v in value]
        elif isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value).hex()
        elif isinstance(value, uuid.UUID):
            value = str(value)
        out[path] = value
    return out


# -------------------------------------------------------------------------------------------- comparing


@dataclass
class Difference:
    scenario: str
    label: str
    api: str
    version: int
    path: str
    kafka: Any
    mock: Any

    def key(self) -> Tuple[str, str, str]:
        """What a documented difference is matched on: scenario, answer label, field path."""
        return (self.scenario, self.label, self.path)


@dataclass
class Comparison:
    """Per api name: fields compared and fields that agree; and every difference."""

    compared: Dict[str, int] = field(default_factory=dict)
    agreed: Dict[str, int] = field(default_factory=dict)
    differences: List[Difference] = field(default_factory=list)

    def add(self, other: "Comparison") -> None:
        for api, n in other.compared.items():
            self.compared[api] = self.compared.get(api, 0) + n
            self.agreed[api] = self.agreed.get(api, 0) + other.agreed.get(api, 0)
        self.differences.extend(other.differences)

    def to_json(self) -> Dict[str, Any]:
        return {
            "apis": {
                api: {"compared": n, "agreed": self.agreed.get(api, 0)} for api, n in sorted(self.compared.items())
            },
            "differences": [
                {
                    "scenario": d.scenario,
                    "label": d.label,
                    "api": d.api,
                    "version": d.version,
                    "path": d.path,
                    "kafka": _jsonable(d.kafka),
                    "mock": _jsonable(d.mock),
                }
                for d in self.differences
            ],
        }


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr))


def _api_name(api_key: int) -> str:
    info = APIS.get(api_key)
    return info.name if info is not None else str(api_key)


def compare(scenario: Scenario, kafka: ScenarioRun, mock: ScenarioRun) -> Comparison:
    """Compare two runs of ``scenario`` answer by answer and field by field."""
    result = Comparison()
    if kafka.error or mock.error:  # a scenario that stopped early compared less than it should: always reported
        result.compared["<run>"] = result.compared.get("<run>", 0) + 1
        result.differences.append(Difference(scenario.name, "<run>", "<run>", 0, "error", kafka.error, mock.error))
    k_symbols, m_symbols = _Symbols(), _Symbols()
    k_answers = {a.label: a for a in kafka.answers}
    m_answers = {a.label: a for a in mock.answers}
    for label in list(dict.fromkeys([a.label for a in kafka.answers] + [a.label for a in mock.answers])):
        ka, ma = k_answers.get(label), m_answers.get(label)
        ref = ka or ma
        assert ref is not None
        api = _api_name(ref.api_key)
        k_fields: Dict[str, Any] = normalise(ka.body, k_symbols) if ka else {"<no answer>": True}
        m_fields: Dict[str, Any] = normalise(ma.body, m_symbols) if ma else {"<no answer>": True}
        if ka is not None and ma is not None and ref.timed:
            k_fields["<arrival s>"] = round(ka.arrived_at - ka.sent_at, 1)
            m_fields["<arrival s>"] = round(ma.arrived_at - ma.sent_at, 1)
        for path in dict.fromkeys(list(k_fields) + list(m_fields)):
            kv, mv = k_fields.get(path, "<absent>"), m_fields.get(path, "<absent>")
            result.compared[api] = result.compared.get(api, 0) + 1
            same = kv == mv
            if path == "<arrival s>" and isinstance(kv, float) and isinstance(mv, float):
                same = abs(kv - mv) <= scenario.tolerance_s
            if same:
                result.agreed[api] = result.agreed.get(api, 0) + 1
            else:
                result.differences.append(Difference(scenario.name, label, api, ref.version, path, kv, mv))
    return result


def run_pair(scenario: Scenario, kafka: Target, mock: Target) -> Comparison:
    """Run ``scenario`` against both brokers (with the same names: they share no state) and compare."""
    prefix = f"fid-{scenario.name}-{uuid.uuid4().hex[:6]}"
    return compare(scenario, run_scenario(scenario, kafka, prefix), run_scenario(scenario, mock, prefix))


def run_and_compare(scenarios: Sequence[Scenario], kafka: Target, mock: Target) -> Comparison:
    total = Comparison()
    for scenario in scenarios:
        total.add(run_pair(scenario, kafka, mock))
    return total


# ---------------------------------------------------------------------------------------------- targets


def kafka_target(address: Tuple[str, int], create_topic: Callable[[str, int], None], name: str = "kafka") -> Target:
    """A running Kafka broker at ``address`` whose topics ``create_topic`` makes (an
    :class:`~kproto.testing.apache_kafka.ApacheKafka`'s, which returns once every partition's leader
    serves it): returned once its coordinators and producer ids answer."""
    _wait_for_coordinators(address)
    return Target(name, address, create_topic)


def _wait_for_coordinators(address: Tuple[str, int], timeout: float = 60.0) -> None:
    """Kafka creates its offsets and transaction topics on the first FindCoordinator: wait for both."""
    from kproto.messages import FindCoordinatorRequest, InitProducerIdRequest

    conn = _Conn(address, "kproto-fidelity-admin")
    try:
        deadline = time.monotonic() + timeout
        while True:  # the producer-id manager is ready a little after the broker
            init = InitProducerIdRequest.from_dict({"transactional_id": None, "transaction_timeout_ms": 60000})
            conn.sock.sendall(conn.conn.send(init, 1).frame)
            answer = conn.receive()
            if answer is not None and answer.message.error_code == 0:
                break
            if time.monotonic() > deadline:
                raise FidelityError(f"no producer ids from {address} after {timeout} s")
            time.sleep(0.1)
        for key_type in (0, 1):
            while True:
                request = FindCoordinatorRequest.from_dict({"key": "kproto-fidelity-warm-up", "key_type": key_type})
                conn.sock.sendall(conn.conn.send(request, 1).frame)
                answer = conn.receive()
                if answer is not None and answer.message.error_code == 0:
                    break
                if time.monotonic() > deadline:
                    raise FidelityError(f"no coordinator (key type {key_type}) at {address} after {timeout} s")
                time.sleep(0.1)
    finally:
        conn.sock.close()


#: ``group.consumer.session.timeout.ms`` and ``group.consumer.heartbeat.interval.ms`` of both brokers.
CONSUMER_SESSION_MS = 2000
CONSUMER_HEARTBEAT_MS = 500
#: ``group.consumer.max.size`` of both brokers: the corpus's consumer groups hold at most three members.
CONSUMER_GROUP_MAX_SIZE = 3

#: The real broker's settings the corpus relies on: no automatic topic creation (the corpus creates its topics,
#: and its unknown-topic scenarios need them unknown), short sessions, no initial rebalance delay; KIP-848
#: groups with short sessions and at most three members, and no conversion between classic and consumer
#: groups with members (the mock's policy).
KAFKA_CONFIG: Mapping[str, object] = {
    "auto.create.topics.enable": "false",
    "group.min.session.timeout.ms": 1000,
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.session.timeout.ms": CONSUMER_SESSION_MS,
    "group.consumer.min.heartbeat.interval.ms": CONSUMER_HEARTBEAT_MS,
    "group.consumer.heartbeat.interval.ms": CONSUMER_HEARTBEAT_MS,
    "group.consumer.migration.policy": "disabled",
    "group.consumer.max.size": CONSUMER_GROUP_MAX_SIZE,
}


def comparable_mock() -> Any:
    """A :class:`~kproto.testing.MockBroker` set up as the corpus expects: node id 1 (a one-node Kafka's),
    no automatic topic creation (as :data:`KAFKA_CONFIG` on the real broker), and the
    same 1000 ms session-timeout floor and KIP-848 session, heartbeat interval and group size as
    :data:`KAFKA_CONFIG`."""
    from kproto.broker.mock import MockBroker
    from kproto.group.consumer_group import ConsumerGroupConfig

    consumer_group = ConsumerGroupConfig(
        session_timeout_ms=CONSUMER_SESSION_MS,
        heartbeat_interval_ms=CONSUMER_HEARTBEAT_MS,
        max_size=CONSUMER_GROUP_MAX_SIZE,
    )
    return MockBroker(auto_create_topics=False, node_id=1, min_session_timeout_ms=1000, consumer_group=consumer_group)


def mock_target(broker: Any) -> Target:
    """The :class:`Target` of a running :class:`~kproto.testing.MockBroker`."""
    return Target("mock", parse_address(broker.bootstrap_servers), broker.create_topic)


def parse_address(text: str) -> Tuple[str, int]:
    host, _, port = text.split(",")[0].rpartition(":")
    return host, int(port)


# ------------------------------------------------------------------------------ documented differences


@dataclass(frozen=True)
class Documented:
    """A difference the mock keeps on purpose; docs/broker.md explains each under its ``name``.

    ``api``, ``label`` and ``path`` (regular expressions over the answer's label and field path) say which
    differences it covers.  ``pin`` holds the mock's side in place: in scenario ``pin[0]`` the answer
    labelled ``pin[1]`` has at ``pin[2]`` the normalised value ``pin[3]`` (or one the callable accepts),
    checked against the mock alone, so that the difference cannot change without this table.
    """

    name: str
    api: str
    label: str
    path: str
    pin: Tuple[str, str, str, Any]

    def matches(self, difference: Difference) -> bool:
        return (
            difference.api == self.api
            and re.fullmatch(self.label, difference.label) is not None
            and re.fullmatch(self.path, difference.path) is not None
        )

    def pinned(self, value: Any) -> bool:
        expected = self.pin[3]
        return bool(expected(value)) if callable(expected) else value == expected


def _served_versions() -> Mapping[int, Tuple[int, int]]:
    from kproto.broker.core import SERVED_VERSIONS

    return SERVED_VERSIONS


def _offsets(expected: List[int]) -> Callable[[Any], bool]:
    def check(records: Any) -> bool:
        return isinstance(records, list) and [r[0] for r in records] == expected

    return check


#: Every difference between the mock and Kafka 3.9/4.1 that the corpus shows and the mock keeps.
DOCUMENTED: Tuple[Documented, ...] = (
    Documented(
        "api-versions-table",
        "ApiVersions",
        r".*",
        r"api_keys.*",
        ("api-versions", "api-versions-v3", "api_keys", lambda n: n == len(_served_versions())),
    ),
    Documented(
        "feature-set",
        "ApiVersions",
        r".*",
        r"(supported_features|finalized_features)(\[.*|)|finalized_features_epoch",
        ("api-versions", "api-versions-v3", "finalized_features_epoch", 1),
    ),
    Documented(
        "topic-config-set",
        "CreateTopics",
        r".*",
        r"topics\[\d+\]\.configs(\[.*|)",
        ("admin", "create-topics-v7", "topics[0].configs", 8),
    ),
    Documented(
        "no-fetch-sessions", "Fetch", r".*", r"session_id", ("golden-kafka-python", "11-Fetch-v12", "session_id", 0)
    ),
    Documented(
        "fetch-fills-the-response",
        "Fetch",
        r"fetch-read-.*",
        r"responses\[0\]\.partitions\[0\]\.records",
        (
            "transactions-aborted",
            "fetch-read-committed-done",
            "responses[0].partitions[0].records",
            _offsets([0, 1, 2, 3, 4]),
        ),
    ),
    Documented(
        "zookeeper-era-offsets",
        "OffsetCommit",
        r"commit-v0",
        r"topics\[0\]\.partitions\[0\]\.error_code",
        ("zookeeper-era-offsets", "commit-v0", "topics[0].partitions[0].error_code", 0),
    ),
    Documented(
        "zookeeper-era-offsets",
        "OffsetFetch",
        r"fetch-v0",
        r"topics\[0\]\.partitions\[0\]\.(error_code|committed_offset|metadata)",
        ("zookeeper-era-offsets", "fetch-v0", "topics[0].partitions[0].committed_offset", 9),
    ),
    Documented(
        "empty-groups-vanish",
        "DeleteGroups",
        r"delete-groups-v2",
        r"results\[0\]\.error_code",
        ("group-modern", "delete-groups-v2", "results[0].error_code", 69),
    ),
    Documented(
        "classic-members-in-consumer-groups",
        "JoinGroup",
        r"classic-join-into-consumer-group",
        r"error_code|member_id",
        ("consumer-group-subscriptions", "classic-join-into-consumer-group", "error_code", 23),
    ),
    Documented(
        "huge-subscriptions",
        "ConsumerGroupHeartbeat",
        r"subscribe-huge.*",
        r".*",
        ("consumer-group-subscriptions", "subscribe-huge", "error_code", 0),
    ),
)


def undocumented(differences: Sequence[Difference]) -> List[Difference]:
    """The differences no :data:`DOCUMENTED` entry covers."""
    return [d for d in differences if not any(doc.matches(d) for doc in DOCUMENTED)]


def documented_seen(differences: Sequence[Difference]) -> Dict[str, int]:
    """How many differences each documented entry covered."""
    return {doc.name: sum(1 for d in differences if doc.matches(d)) for doc in DOCUMENTED}


def normalised_answers(run: ScenarioRun) -> Dict[str, Dict[str, Any]]:
    """label -> normalised ``path -> value`` of every answer of one run (ids numbered within the run)."""
    symbols = _Symbols()
    return {a.label: normalise(a.body, symbols) for a in run.answers}
