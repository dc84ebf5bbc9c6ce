"""kproto.records.read_segment over log segments Apache Kafka 4.1.1 wrote itself.

Records go in through kproto's producer (every codec) and through raw transactional requests (one
transaction committed, one aborted, so the log holds control batches); the segment files in
``kafka.log_dirs`` must read back as exactly those records, offsets, headers and control markers.
A compacted topic rolls its segments by time (``segment.ms``) and the harness makes the cleaner look
often (``log.cleaner.backoff.ms``), so a cleaned segment, with its offset gaps, is read too. The Spark job
(``kproto spark segments``) reads the same codec and transaction segments into its ``messages`` table.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator, List, NamedTuple, Tuple, Union

import pytest

from kproto.client import sync
from kproto.testing import ApacheKafka
from kproto.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kproto.records import encode_record_batch, read_segment

pytestmark = [
    pytest.mark.real_clients,
    pytest.mark.apache_kafka,
    pytest.mark.kafka_broker(engine="apache-kafka", version="4.1.1"),
]

VERSION = "4.1.1"


def _retry(call: Callable[[], Any], code: Union[str, Callable[[Any], int]]) -> Any:
    deadline = time.monotonic() + 30
    while True:
        answer = call()
        error = getattr(answer, code) if isinstance(code, str) else code(answer)
        if error == 0:
            return answer
        assert error in (14, 15, 16, 51) and time.monotonic() < deadline, f"error {error}: {answer}"
        time.sleep(0.1)


def _segment_batches(kafka: Any, topic: str) -> List[Any]:
    node = kafka.leader(topic, 0)
    segments = sorted((kafka.log_dirs[node] / f"{topic}-0").glob("*.log"))
    assert segments, f"no segment of {topic}-0"
    return [batch for path in segments for batch in read_segment(path)]


class CodecLog(NamedTuple):
    """A topic written through kproto's producer with every codec, and what was sent (in offset order)."""

    topic: str
    sent: List[Tuple[bytes, bytes, Tuple[Tuple[str, bytes], ...]]]


class TxnLog(NamedTuple):
    """A topic holding one committed and one aborted transaction of producer ``pid``."""

    topic: str
    pid: int


@pytest.fixture(scope="module")
def kafka(kproto_apache_kafka: Any) -> Iterator[ApacheKafka]:
    """The session's broker; the module's topics outlive single tests (two read the same segments) and go
    at the end of the module."""
    broker = kproto_apache_kafka.get(VERSION)
    before = set(broker.topics())
    yield broker
    broker.delete_topics(sorted(set(broker.topics()) - before))


@pytest.fixture(scope="module")
def codec_log(kafka: ApacheKafka) -> CodecLog:
    topic = f"segments-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    sent = []
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        with sync.Producer(kafka.bootstrap_servers, acks="all", compression=codec, linger_ms=5) as producer:
            futures = []
            for i in range(25):
                key, value = b"%s-%d" % (str(codec).encode(), i), b"v" * i
                headers = [("codec", str(codec).encode()), ("i", b"%d" % i)]
                futures.append(producer.send(topic, value, key=key, headers=headers, partition=0))
                sent.append((key, value, tuple(headers)))
            producer.flush()
            [f.result(30) for f in futures]
    return CodecLog(topic, sent)


@pytest.fixture(scope="module")
def txn_log(kafka: ApacheKafka) -> TxnLog:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    txn_id = f"t-{uuid.uuid4().hex[:8]}"
    # The transaction state topic is created by the first FindCoordinator; until its partition has loaded
    # the coordinator answers 14/15/16, and 51 (CONCURRENT_TRANSACTIONS) while a marker is being written.
    found = _retry(lambda: kafka.request(FindCoordinatorRequest(key=txn_id, key_type=1), 3), "error_code")
    init = _retry(
        lambda: kafka.request(
            InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=30000),
            kafka.api_version(22, 4),
            found.node_id,
        ),
        "error_code",
    )
    pid, epoch = init.producer_id, init.producer_epoch
    leader = kafka.leader(topic, 0)
    sequence = 0
    for commit, values in ((True, [b"kept-1", b"kept-2"]), (False, [b"dropped"])):
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[T(name=topic, partitions=[0])],
        )
        _retry(
            lambda: kafka.request(add, 3, found.node_id),
            lambda a: a.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        )
        batch = encode_record_batch(
            [(None, v, None, [("txn", b"1")]) for v in values],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        )
        sequence += len(values)
        P = ProduceRequest.TopicProduceData
        produced = kafka.request(
            ProduceRequest(
                transactional_id=txn_id,
                acks=-1,
                timeout_ms=10000,
                topic_data=[P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])],
            ),
            11,
            leader,
        )
        assert produced.responses[0].partition_responses[0].error_code == 0
        _retry(
            lambda: kafka.request(
                EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit),
                3,
                found.node_id,
            ),
            "error_code",
        )
    deadline = time.monotonic() + 30
    while True:  # the markers are written by the transaction coordinator after EndTxn returns
        batches = _segment_batches(kafka, topic)
        if sum(1 for b in batches if b.control_type is not None) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return TxnLog(topic, pid)


def test_segments_of_every_codec_read_back_exactly(kafka: ApacheKafka, codec_log: CodecLog) -> None:
    batches = _segment_batches(kafka, codec_log.topic)
    got = [(r.offset, r.key, r.value, tuple(r.headers)) for b in batches for r in b.records]
    assert got == [(i, k, v, h) for i, (k, v, h) in enumerate(codec_log.sent)]
    assert {b.attributes & 7 for b in batches} == {0, 1, 2, 3, 4}  # every codec reached the log as sent


def test_segments_with_committed_and_aborted_transactions(kafka: ApacheKafka, txn_log: TxnLog) -> None:
    batches = _segment_batches(kafka, txn_log.topic)
    data = [(r.offset, r.value) for b in batches if b.control_type is None for r in b.records]
    assert data == [(0, b"kept-1"), (1, b"kept-2"), (3, b"dropped")]
    controls = [(b.base_offset, b.control_type, b.producer_id) for b in batches if b.control_type is not None]
    assert controls == [(2, 1, txn_log.pid), (4, 0, txn_log.pid)]  # 1: COMMIT after the first transaction, 0: ABORT
    assert all(b.attributes & 0x10 for b in batches)  # every batch is transactional


@pytest.mark.spark
def test_the_spark_job_reads_the_same_segments(
    kafka: ApacheKafka, codec_log: CodecLog, txn_log: TxnLog, tmp_path: Any
) -> None:
    import pyarrow.parquet as pq

    from kproto.spark.job import run_segments, spark_session

    partitions = [
        str(kafka.log_dirs[kafka.leader(topic, 0)] / f"{topic}-0") for topic in (codec_log.topic, txn_log.topic)
    ]
    spark = spark_session(
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        },
    )
    try:
        run_segments(spark, partitions, str(tmp_path / "tables"), log=lambda line: None)
    finally:
        spark.stop()
    rows = pq.read_table(str(tmp_path / "tables" / "messages")).to_pylist()
    assert pq.read_table(str(tmp_path / "tables" / "problems")).num_rows == 0

    def of(topic: str) -> List[Any]:
        return sorted((r for r in rows if r["topic"] == topic and r["partition"] == 0), key=lambda r: r["offset"])

    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    assert [
        (
            r["offset"],
            r["key"],
            r["value"],
            tuple((h["key"], h["value"]) for h in r["headers"]),
            r["codec"],
            r["is_control"],
        )
        for r in of(codec_log.topic)
    ] == [(i, k, v, h, codecs[i // 25], False) for i, (k, v, h) in enumerate(codec_log.sent)]
    txn = of(txn_log.topic)
    # Transaction markers are rows flagged is_control; the data records keep their offsets around them.
    assert [
        (r["offset"], r["value"], [(h["key"], h["value"]) for h in r["headers"]]) for r in txn if not r["is_control"]
    ] == [(0, b"kept-1", [("txn", b"1")]), (1, b"kept-2", [("txn", b"1")]), (3, b"dropped", [("txn", b"1")])]
    assert [r["offset"] for r in txn if r["is_control"]] == [2, 4]
    assert all(r["is_transactional"] and r["producer_id"] == txn_log.pid for r in txn)


def test_a_compacted_segment_keeps_the_latest_record_of_each_key(kafka_broker) -> None:
    kafka = kafka_broker.kafka
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(
        topic,
        1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": 100,
            "min.cleanable.dirty.ratio": 0.01,
            "min.compaction.lag.ms": 0,
            "delete.retention.ms": 100,
        },
    )
    with sync.Producer(kafka_broker.bootstrap_servers, acks="all") as producer:
        for round_ in range(3):
            for key in range(4):
                producer.send(topic, b"%d-%d" % (key, round_), key=b"k%d" % key, partition=0).result(30)
        time.sleep(0.3)  # older than segment.ms: the next append rolls a new segment
        producer.send(topic, b"tail", key=b"tail", partition=0).result(30)
    deadline = time.monotonic() + 60
    while True:
        records = [(r.offset, r.key, r.value) for b in _segment_batches(kafka, topic) for r in b.records]
        if len(records) == 5 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert records == [
        (8, b"k0", b"0-2"),
        (9, b"k1", b"1-2"),
        (10, b"k2", b"2-2"),
        (11, b"k3", b"3-2"),
        (12, b"tail", b"tail"),
    ]
