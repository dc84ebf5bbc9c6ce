"""Apache Kafka's Java client (``kafka-clients`` 4.1) at its defaults against the mock broker and, with the
same scenarios and outcomes, against Apache Kafka 4.1.1 (:mod:`peer_engines`; skipped with one reason line
without java/mvn).

``tests/java/JavaClientScenarios.java`` runs every scenario in one JVM (its startup is the bulk of the
cost) and prints one JSON line per step; the tests here check those lines and what the broker stored:

* the producer at its defaults -- idempotent, ``acks=all`` -- writes keyed records over three partitions;
* each compression codec (gzip, snappy, lz4, zstd) round-trips through the broker as the client wrote it;
* a consumer in a classic-protocol group reads them back in offset order and commits;
* the Admin client creates, grows, describes and deletes topics, describes the cluster and configs, lists
  offsets, lists and describes groups, sets, deletes and lists a group's offsets and deletes the group, and
  names an unknown topic; DeleteRecords, which Kafka serves and the mock does not, is refused by the
  mock as Kafka's client refuses any api its broker does not advertise (UnsupportedVersionException,
  raised before sending);
* a transactional producer commits, aborts and commits again, each time with a group member's offsets
  (sendOffsetsToTransaction), and a ``read_committed`` consumer sees only the committed records; the
  group keeps only the committed offsets.

The mock records the traffic (``record_pcap``) and the tests decode it with :mod:`kproto.capture` to see
what the Java client sent at their defaults: the acks of each Produce, Fetch versions with sessions (which the
mock declines, so every fetch stays a full one).

The program is compiled once per session (``java_scenarios``, :mod:`peer_programs`), its jars resolved from
Maven through :mod:`kproto.testing.jars`; without ``java``/``javac``/``mvn`` each test is skipped with one
line naming the missing tool.
"""

from __future__ import annotations

import json
import subprocess
from typing import Dict, List

import pytest

from peer_engines import ENGINES, peer_broker, record_exchanges

pytestmark = pytest.mark.real_clients

N = 3000  # JavaClientScenarios.N
RUN_TIMEOUT_S = 600.0
CODECS = ["gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module", params=ENGINES)
def java_run(request: pytest.FixtureRequest, java_scenarios, tmp_path_factory: pytest.TempPathFactory):
    """(broker, {(scenario, step): result line}) after one JVM ran every scenario against one broker of the
    engine; on the mock, ``broker.exchanges`` are the requests and responses it recorded, decoded."""
    pcap = tmp_path_factory.mktemp("java-traffic") / "java.pcap"
    topics = {"jt": 3, "jx": 2, **{f"jc-{codec}": 1 for codec in CODECS}}
    with peer_broker(request, request.param, topics, pcap) as broker:
        done = subprocess.run(
            [
                java_scenarios[0],
                "-cp",
                java_scenarios[1],
                "JavaClientScenarios",
                broker.bootstrap_servers,
                "produce",
                "codecs",
                "consume",
                "admin",
                "transactions",
            ],
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
    assert entry["ok"], f"{scenario}/{step}: {entry.get('error')}: {entry.get('message')}"
    return entry


def test_idempotent_producer_at_defaults(java_run) -> None:
    broker, results = java_run
    if broker.exchanges is not None:  # the traffic is what the mock recorded; Kafka's is not recorded
        produces = [e for e in broker.exchanges if e.api_key == 0 and any(t.name == "jt" for t in e.request.topic_data)]
        assert produces and all(e.request.acks == -1 for e in produces), "acks=all is the default"
        assert all(p.error_code == 0 for e in produces for t in e.response.responses for p in t.partition_responses)
        assert any(e.api_key == 22 for e in broker.exchanges), "InitProducerId: an idempotent producer"
    sent = ok(results, "produce", "send")
    assert sent["sent"] == N and sum(sent["per_partition"].values()) == N
    for partition in range(3):
        stored = broker.records("jt", partition)
        assert len(stored) == sent["per_partition"][str(partition)]
        batches = broker.batches("jt", partition)
        assert batches and all(b.producer_id >= 0 for b in batches), "the default producer is idempotent"
        sequences = [b.base_sequence for b in batches]
        assert sequences == sorted(sequences) and sequences[0] == 0, "sequences per partition from 0, in order"


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_round_trip(java_run, codec: str) -> None:
    broker, results = java_run
    expected = [f"{codec}-{i}" for i in range(500)]
    assert ok(results, "codecs", codec)["values"] == expected
    batches = broker.batches(f"jc-{codec}", 0)
    assert batches and all(b.codec == codec for b in batches), "stored as the client compressed it"
    assert [r.value for r in broker.records(f"jc-{codec}", 0)] == [v.encode() for v in expected]


def test_group_consumer_reads_and_commits(java_run) -> None:
    broker, results = java_run
    if broker.exchanges is not None:  # the traffic is what the mock recorded; Kafka's is not recorded
        fetches = [e for e in broker.exchanges if e.api_key == 1]
        assert fetches and all(e.api_version >= 7 for e in fetches), "fetch sessions are in every version used"
        # The mock declines sessions (session id 0 in every answer): the client keeps sending full fetches.
        # A long poll still parked when a client closed has no answer.
        answered = [e for e in fetches if e.answered]
        assert answered and all(e.response.session_id == 0 and e.response.error_code == 0 for e in answered)
    read = ok(results, "consume", "read_and_commit")
    assert sorted(read["values"]) == sorted(f"v{i}" for i in range(N)), "lost or duplicated records"
    for partition, offsets in read["offsets"].items():
        assert offsets == [r.offset for r in broker.records("jt", int(partition))]
    expected = {str(p): len(broker.records("jt", p)) for p in range(3)}
    assert read["committed"] == expected
    assert broker.committed("jg") == {("jt", int(p)): n for p, n in expected.items()}


def test_admin_client(java_run) -> None:
    broker, results = java_run
    ok(results, "admin", "create_topics")
    duplicate = results[("admin", "create_topics_duplicate")]
    assert not duplicate["ok"] and duplicate["error"].endswith(".TopicExistsException")
    ok(results, "admin", "create_partitions")
    described = ok(results, "admin", "describe_topics")
    assert described["partitions"] == {"ja": 4, "jt": 3} and described["topic_id_set"]
    cluster = ok(results, "admin", "describe_cluster")
    assert (cluster["cluster_id"], cluster["controller"]) == broker.cluster() and cluster["nodes"] == 1
    assert ok(results, "admin", "describe_configs")["cleanup.policy"] == "delete"

    offsets = ok(results, "admin", "list_offsets")
    stored = broker.records("jt", 0)
    assert (offsets["earliest"], offsets["latest"]) == (0, len(stored))
    newest = max(r.timestamp for r in stored)
    assert offsets["max_timestamp"] == next(r.offset for r in stored if r.timestamp == newest)

    # Apache Kafka is shared by the session: groups of other modules are listed too; this module's start "j".
    assert [g for g in ok(results, "admin", "list_groups")["groups"] if g.startswith("j")] == ["jg:Empty"]
    group = ok(results, "admin", "describe_groups")
    assert (group["state"], group["members"], group["type"]) == ("Empty", 0, "Classic")
    group_offsets = ok(results, "admin", "list_group_offsets")
    assert (group_offsets["partitions"], group_offsets["total"]) == (3, N)
    # Offsets committed by the Admin client to a group nobody joined create it (Empty), as on Kafka.
    assert ok(results, "admin", "alter_group_offsets")["offsets"] == {"jt-0": 1, "jt-1": 5, "jt-2": 9}
    assert ok(results, "admin", "delete_group_offsets")["left"] == ["jt-0", "jt-1"]
    left = ok(results, "admin", "delete_groups")["groups"]
    assert [g for g in left if g.startswith("j")] == ["jg"] and not broker.group_exists("jadm")
    unknown = results[("admin", "describe_unknown_topic")]
    assert not unknown["ok"] and unknown["error"].endswith(".UnknownTopicOrPartitionException")
    deleted = results[("admin", "delete_records")]
    if broker.engine == "mock":
        # The mock does not serve DeleteRecords (nor advertise it): the client refuses before sending.
        assert not deleted["ok"] and deleted["error"].endswith(".UnsupportedVersionException")
        assert "DELETE_RECORDS" in deleted["message"]
    else:
        # Kafka serves it (on the empty "ja": the log start stays 0).
        assert ok(results, "admin", "delete_records")["low_watermark"] == 0
    assert ok(results, "admin", "delete_topics")["still_listed"] is False
    assert "ja" not in broker.topics()


def test_transactions_read_committed(java_run) -> None:
    broker, results = java_run
    assert ok(results, "transactions", "commit_abort_commit")["generation"] >= 1
    seen: List[str] = ok(results, "transactions", "read_committed")["values"]
    assert seen == sorted([f"c1-{i}" for i in range(10)] + [f"c2-{i}" for i in range(10)])
    stored = [r.value for r in broker.records("jx")]
    assert sorted(v for v in stored if v.startswith(b"a-")) == sorted(f"a-{i}".encode() for i in range(10)), (
        "the aborted records are in the log, hidden by the abort marker"
    )
    assert broker.committed("jxo") == {("jt", 0): 7}, "the last committed transaction's offsets, not the aborted one's"
