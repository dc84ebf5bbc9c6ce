"""franz-go (kgo) and Sarama at their defaults against the mock broker and, with the same scenarios and
outcomes, against Apache Kafka 4.1.1 (:mod:`peer_engines`; skipped with one reason line without java/mvn).

``tests/go`` is a Go module pinning both libraries (``go.mod``/``go.sum``); the test downloads its modules
through the Go module proxy (``go mod download``), builds it with the machine's ``go`` and runs every
scenario in one process, which prints one JSON line per step.  The tests check those lines and what the
broker stored:

* kgo's producer at its defaults (idempotent, ``acks=all``), then a kgo group consumer at its defaults
  (classic group protocol, fetch sessions requested) that reads everything back and commits;
* kgo's transactional producer commits, aborts and commits again; a ``read_committed`` consumer sees
  only the committed records;
* a kgo GroupTransactSession moves a topic into another, committing the group's offsets inside each
  transaction (AddOffsetsToTxn, TxnOffsetCommit with the member's generation);
* Sarama's SyncProducer and consumer group (its default protocol version) write and read back a topic.

The mock records the traffic (``record_pcap``) and the tests decode it with :mod:`kproto.capture` to see
what the Go clients sent at their defaults: the acks of each Produce, Fetch versions with sessions (which the
mock declines, so every fetch stays a full one).

The program is built once per session (``go_peers``, :mod:`peer_programs`); without ``go`` on ``PATH`` each
test is skipped with one line saying so.
"""

from __future__ import annotations

import json
import subprocess
from typing import Dict, List, Set

import pytest

from kproto.capture.conversation import Exchange
from peer_engines import ENGINES, PeerBroker, peer_broker, record_exchanges

pytestmark = pytest.mark.real_clients

N = 2000  # tests/go/main.go's N
RUN_TIMEOUT_S = 600.0
SCENARIOS = ["kgo-produce", "kgo-consume", "kgo-transactions", "kgo-group-transact", "sarama-produce", "sarama-group"]


@pytest.fixture(scope="module", params=ENGINES)
def go_run(request: pytest.FixtureRequest, go_peers: str, tmp_path_factory: pytest.TempPathFactory):
    """(broker, {(scenario, step): result line}) after one Go process ran every scenario against one broker
    of the engine; on the mock, ``broker.exchanges`` are the requests and responses it recorded, decoded."""
    pcap = tmp_path_factory.mktemp("go-traffic") / "go.pcap"
    with peer_broker(request, request.param, {"gt": 3, "gx": 2, "gy": 2, "st": 3}, pcap) as broker:
        done = subprocess.run(
            [go_peers, broker.bootstrap_servers, *SCENARIOS],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        results: Dict[tuple, dict] = {}
        for line in done.stdout.splitlines():
            entry = json.loads(line)
            results[(entry["scenario"], entry["step"])] = entry
        assert ("done", "all") in results, done.stdout[-2000:]
        record_exchanges(broker, pcap)
        yield broker, results


def ok(results: Dict[tuple, dict], scenario: str, step: str) -> dict:
    entry = results[(scenario, step)]
    assert entry["ok"], f"{scenario}/{step}: {entry.get('error')}"
    return entry


def check_stored(broker: PeerBroker, topic: str, per_partition: Dict[str, int], prefix: str) -> None:
    values = []
    for partition, count in per_partition.items():
        stored = broker.records(topic, int(partition))
        assert len(stored) == count and [r.offset for r in stored] == list(range(count))
        values += [r.value for r in stored]
    assert sorted(values) == sorted(f"{prefix}{i}".encode() for i in range(N))


def produce_acks(exchanges: List[Exchange], topic: str) -> Set[int]:
    return {e.request.acks for e in exchanges if e.api_key == 0 and any(t.name == topic for t in e.request.topic_data)}


def test_kgo_producer_and_group_consumer(go_run) -> None:
    broker, results = go_run
    if broker.exchanges is not None:  # the traffic is what the mock recorded; Kafka's is not recorded
        assert produce_acks(broker.exchanges, "gt") == {-1}, "kgo's default acks is all"
        fetches = [e for e in broker.exchanges if e.api_key == 1]
        assert fetches and all(e.api_version >= 7 for e in fetches), "fetch sessions are in every version used"
        # The mock declines sessions (session id 0 in every answer): kgo keeps sending full fetches.
        # A long poll still parked when a client closed has no answer.
        answered = [e for e in fetches if e.answered]
        assert answered and all(e.response.session_id == 0 and e.response.error_code == 0 for e in answered)
    sent = ok(results, "kgo-produce", "send")
    assert sent["sent"] == N
    check_stored(broker, "gt", sent["per_partition"], "g")
    batches = [b for p in range(3) for b in broker.batches("gt", p)]
    assert batches and all(b.producer_id >= 0 for b in batches), "kgo's default producer is idempotent"

    read = ok(results, "kgo-consume", "read_and_commit")
    assert sorted(read["values"]) == sorted(f"g{i}" for i in range(N)), "lost or duplicated records"
    for partition, offsets in read["offsets"].items():
        assert offsets == [r.offset for r in broker.records("gt", int(partition))]
    assert broker.committed("gg") == {("gt", int(p)): n for p, n in sent["per_partition"].items()}


def test_kgo_transactions_read_committed(go_run) -> None:
    broker, results = go_run
    ok(results, "kgo-transactions", "commit_abort_commit")
    seen = ok(results, "kgo-transactions", "read_committed")["values"]
    assert seen == sorted([f"c1-{i}" for i in range(10)] + [f"c2-{i}" for i in range(10)])
    aborted = sorted(r.value for r in broker.records("gx") if r.value.startswith(b"a-"))
    assert aborted == sorted(f"a-{i}".encode() for i in range(10)), "aborted records stay in the log"


def test_kgo_group_transact_session(go_run) -> None:
    broker, results = go_run
    moved = ok(results, "kgo-group-transact", "transform")
    assert moved["moved"] == N and moved["transactions"] >= 1
    assert sorted(r.value for r in broker.records("gy")) == sorted(f"yg{i}".encode() for i in range(N))
    per_partition = {p: len(broker.records("gt", p)) for p in range(3)}
    assert broker.committed("gts") == {("gt", p): n for p, n in per_partition.items()}, (
        "the group's offsets committed with the transactions"
    )


def test_sarama_sync_producer_and_consumer_group(go_run) -> None:
    broker, results = go_run
    if broker.exchanges is not None:  # the traffic is what the mock recorded; Kafka's is not recorded
        assert produce_acks(broker.exchanges, "st") == {1}, "Sarama's default RequiredAcks is WaitForLocal"
    sent = ok(results, "sarama-produce", "send")
    assert sent["sent"] == N
    check_stored(broker, "st", sent["per_partition"], "s")
    read = ok(results, "sarama-group", "read_and_commit")
    assert sorted(read["values"]) == sorted(f"s{i}" for i in range(N))
    assert broker.committed("sg") == {("st", int(p)): n for p, n in sent["per_partition"].items()}
