"""Transactions on the mock broker: AddPartitionsToTxn, EndTxn markers, the last stable offset and
read_committed fetches.  Control batches are read back with kafka-python's record reader too."""

from __future__ import annotations

import time

import pytest

from broker_client import SocketClient, first_partition
from kproto import ErrorCode
from kproto.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from kproto.records import decode_records, encode_record_batch
from kproto.testing import MockBroker

kafka_records = pytest.importorskip("kafka.record.memory_records")

_C = ErrorCode


def produce(topic: str, records: bytes, transactional_id: object = None) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=1000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])],
    )


def fetch(topic: str, isolation: int) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=[
            T(topic=topic, partitions=[T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])
        ],
    )


class Txn:
    def __init__(self, client: SocketClient, transactional_id: str) -> None:
        self.client, self.tid = client, transactional_id
        self.init()

    def init(self) -> None:
        answer = self.client.request(
            InitProducerIdRequest(
                transactional_id=self.tid, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
            ),
            3,
        )
        assert answer.error_code == 0
        self.id, self.epoch, self.sequence = answer.producer_id, answer.producer_epoch, 0

    def add(self, topic: str, version: int = 3, epoch: object = None, producer_id: object = None) -> int:
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        answer = self.client.request(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.tid,
                v3_and_below_producer_id=self.id if producer_id is None else producer_id,
                v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
                v3_and_below_topics=[T(name=topic, partitions=[0])],
            ),
            version,
        )
        return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

    def send(self, topic: str, values: list) -> tuple:
        batch = encode_record_batch(
            [(None, v) for v in values],
            producer_id=self.id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            transactional=True,
        )
        part = first_partition(self.client.request(produce(topic, batch, self.tid), 9))
        if part.error_code == 0:
            self.sequence += len(values)
        return part.error_code, part.base_offset

    def end(self, commit: bool, version: int = 3) -> int:
        return self.client.request(
            EndTxnRequest(transactional_id=self.tid, producer_id=self.id, producer_epoch=self.epoch, committed=commit),
            version,
        ).error_code


def test_commit_abort_and_read_committed() -> None:
    with MockBroker(topics={"tx": 1}) as broker, SocketClient((broker.host, broker.port)) as client:
        txn = Txn(client, "app-1")
        assert txn.send("tx", [b"early"])[0] == _C.INVALID_TXN_STATE  # not added to the transaction
        assert txn.add("tx") == 0
        assert txn.send("tx", [b"a", b"b"]) == (0, 0)
        plain = encode_record_batch([(None, b"plain")])
        assert first_partition(client.request(produce("tx", plain), 9)).base_offset == 2

        def committed() -> object:
            return first_partition(client.request(fetch("tx", 1), 11))

        open_view = committed()
        assert (open_view.high_watermark, open_view.last_stable_offset, open_view.records.raw) == (3, 0, b"")
        latest = client.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="tx",
                        partitions=[
                            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)
                        ],
                    )
                ],
            ),
            5,
        )
        assert latest.topics[0].partitions[0].offset == 0
        assert txn.end(commit=True) == 0
        after = committed()
        assert (after.high_watermark, after.last_stable_offset, after.aborted_transactions) == (4, 4, [])
        assert [
            (r.offset, None if r.is_control else r.value, r.is_control) for r in decode_records(after.records.raw)
        ] == [(0, b"a", False), (1, b"b", False), (2, b"plain", False), (3, None, True)]
        # kafka-python reads the marker as a control batch with a valid CRC.
        memory = kafka_records.MemoryRecords(after.records.raw)
        batches = []
        while memory.has_next():
            batch = memory.next_batch()
            assert batch.validate_crc()
            batches.append((batch.is_transactional, batch.is_control_batch))
        assert batches == [(True, False), (False, False), (True, True)]

        # An aborted transaction: read_committed gets its range to drop.
        assert txn.add("tx") == 0
        assert txn.send("tx", [b"doomed"]) == (0, 4)
        assert txn.end(commit=False) == 0
        aborted = committed()
        assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(txn.id, 4)]
        assert aborted.last_stable_offset == 6
        assert txn.end(commit=True) == _C.INVALID_TXN_STATE  # nothing open
        # Down-converted for an old consumer, the markers are gone.
        old = first_partition(client.request(fetch("tx", 0), 2))
        assert [r.value for r in decode_records(old.records.raw)] == [b"a", b"b", b"plain", b"doomed"]


def test_fencing_and_reinit_aborts_the_open_transaction() -> None:
    with MockBroker(topics={"f": 1}) as broker, SocketClient((broker.host, broker.port)) as client:
        old = Txn(client, "app-2")
        assert old.add("f") == 0 and old.send("f", [b"x"]) == (0, 0)
        new = Txn(client, "app-2")  # a new instance: the open transaction is aborted, the old epoch fenced
        assert new.id == old.id and new.epoch == old.epoch + 1
        part = first_partition(client.request(fetch("f", 1), 11))
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(old.id, 0)]
        assert part.last_stable_offset == part.high_watermark == 2
        assert old.add("f", version=2) == _C.PRODUCER_FENCED
        assert old.add("f", version=1) == _C.INVALID_PRODUCER_EPOCH
        assert old.end(True, version=1) == _C.INVALID_PRODUCER_EPOCH
        assert new.add("f", producer_id=new.id + 1) == _C.INVALID_PRODUCER_ID_MAPPING
        assert new.add("nope-never") == _C.UNKNOWN_TOPIC_OR_PARTITION
        assert new.add("f") == 0
        assert old.send("f", [b"zombie"])[0] == _C.INVALID_PRODUCER_EPOCH
        assert new.send("f", [b"y"]) == (0, 2)
        assert new.end(True) == 0
        assert broker.high_watermark("f", 0) == 4


@pytest.mark.real_clients
def test_confluent_kafka_transactions_at_defaults() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with MockBroker(topics={"ctx": 2}) as broker:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "kproto-tx"}
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(100):
            producer.produce("ctx", value=f"keep{i}".encode(), partition=i % 2)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(50):
            producer.produce("ctx", value=f"drop{i}".encode(), partition=i % 2)
        producer.flush(30)
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.produce("ctx", value=b"last", partition=0)
        producer.commit_transaction(30)

        def consume(isolation: str, want: int) -> list:
            consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": broker.bootstrap_servers,
                    "group.id": f"reader-{isolation}",
                    "isolation.level": isolation,
                    "enable.auto.commit": False,
                }
            )
            consumer.assign([confluent_kafka.TopicPartition("ctx", p, 0) for p in range(2)])
            values: list = []
            deadline = time.monotonic() + 60
            while len(values) < want and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    values.append(message.value())
            consumer.close()
            return values

        committed = consume("read_committed", 101)
        assert sorted(committed) == sorted([f"keep{i}".encode() for i in range(100)] + [b"last"])
        assert len(consume("read_uncommitted", 151)) == 151
        # Three markers per partition it touched: two commits and an abort.
        markers = [r for p in range(2) for r in decode_records(broker.log_bytes("ctx", p)) if r.is_control]
        assert len(markers) == 5
        del producer  # librdkafka's handle goes before the broker does


@pytest.mark.real_clients
def test_kafka_python_transactions_at_defaults() -> None:
    kafka = pytest.importorskip("kafka")
    with MockBroker(topics={"ktx": 1}) as broker:
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="kp-tx")
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(20):
            producer.send("ktx", f"keep{i}".encode())
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send("ktx", b"drop")
        producer.flush()
        producer.abort_transaction()
        producer.close()
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, isolation_level="read_committed", auto_offset_reset="earliest"
        )
        consumer.assign([kafka.TopicPartition("ktx", 0)])
        values: list = []
        deadline = time.monotonic() + 60
        while len(values) < 20 and time.monotonic() < deadline:
            values += [m.value for batch in consumer.poll(200).values() for m in batch]
        values += [m.value for batch in consumer.poll(300).values() for m in batch]  # nothing of the abort
        consumer.close()
        assert values == [f"keep{i}".encode() for i in range(20)]


def test_offsets_in_a_transaction_land_only_on_commit() -> None:
    from kproto.messages import AddOffsetsToTxnRequest, TxnOffsetCommitRequest

    with MockBroker(topics={"src": 1}) as broker, SocketClient((broker.host, broker.port)) as client:
        txn = Txn(client, "ctp")

        def add_offsets(group: str) -> int:
            return client.request(
                AddOffsetsToTxnRequest(
                    transactional_id=txn.tid, producer_id=txn.id, producer_epoch=txn.epoch, group_id=group
                ),
                3,
            ).error_code

        def commit_offsets(group: str, offset: int) -> int:
            T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            answer = client.request(
                TxnOffsetCommitRequest(
                    transactional_id=txn.tid,
                    group_id=group,
                    producer_id=txn.id,
                    producer_epoch=txn.epoch,
                    topics=[
                        T(
                            name="src",
                            partitions=[
                                T.TxnOffsetCommitRequestPartition(
                                    partition_index=0, committed_offset=offset, committed_metadata="m"
                                )
                            ],
                        )
                    ],
                ),
                3,
            )
            return answer.topics[0].partitions[0].error_code

        assert commit_offsets("g", 5) == _C.INVALID_TXN_STATE  # the group was not added
        assert add_offsets("g") == 0 and commit_offsets("g", 5) == 0
        assert broker.committed("g") == {}
        assert txn.end(commit=False) == 0
        assert broker.committed("g") == {}  # aborted: dropped
        assert add_offsets("g") == 0 and commit_offsets("g", 7) == 0
        assert txn.end(commit=True) == 0
        assert broker.committed("g") == {("src", 0): (7, "m")}
