"""Idempotent producers against the mock broker: InitProducerId and the per-partition sequence checks."""

from __future__ import annotations

import pytest

from broker_client import SocketClient, first_partition
from kproto import ErrorCode
from kproto.broker.batches import BatchHeader
from kproto.broker.producers import DUPLICATE_WINDOW, PartitionProducers, ProducerIds
from kproto.messages import InitProducerIdRequest, ProduceRequest
from kproto.records import decode_records, encode_record_batch
from kproto.testing import MockBroker

_C = ErrorCode


def produce(topic: str, records: bytes) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])],
    )


def init(transactional_id: object = None, producer_id: int = -1, epoch: int = -1) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=producer_id, producer_epoch=epoch
    )


@pytest.fixture(scope="module")
def broker():
    with MockBroker() as b:
        yield b


class Producer:
    """An idempotent producer's view: its id, epoch and next sequence per partition."""

    def __init__(self, client: SocketClient, topic: str, version: int = 5) -> None:
        self.client, self.topic = client, topic
        answer = client.request(init(), version)
        assert answer.error_code == 0
        self.id, self.epoch, self.next = answer.producer_id, answer.producer_epoch, 0

    def batch(self, count: int = 2, sequence: object = None, epoch: object = None, producer_id: object = None) -> bytes:
        base = self.next if sequence is None else sequence
        return encode_record_batch(
            [(None, f"s{base + i}".encode()) for i in range(count)],
            producer_id=self.id if producer_id is None else producer_id,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=base,
        )

    def send(self, data: bytes, version: int = 9) -> tuple:
        part = first_partition(self.client.request(produce(self.topic, data), version))
        return part.error_code, part.base_offset


def test_sequences_duplicates_and_gaps(broker, client) -> None:
    p = Producer(client, "seq")
    sent = []
    for n in range(DUPLICATE_WINDOW + 1):
        data = p.batch()
        assert p.send(data) == (0, 2 * n)
        sent.append(data)
        p.next += 2
    # A retry of any of the last five batches: NONE with its original offset, nothing stored twice.
    for n in range(1, DUPLICATE_WINDOW + 1):
        assert p.send(sent[n]) == (0, 2 * n)
    assert broker.high_watermark("seq", 0) == 2 * (DUPLICATE_WINDOW + 1)
    # Older than the window, a gap, or a batch that overlaps without matching: out of order.
    assert p.send(sent[0])[0] == _C.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.send(p.batch(sequence=p.next + 1))[0] == _C.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.send(p.batch(count=3, sequence=p.next - 2))[0] == _C.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert broker.high_watermark("seq", 0) == 2 * (DUPLICATE_WINDOW + 1)
    # Stored records keep the producer's id, epoch and sequences (kafka-python can check them too).
    records = list(decode_records(broker.log_bytes("seq", 0)))
    assert {(r.producer_id, r.producer_epoch) for r in records} == {(p.id, p.epoch)}
    assert [r.sequence for r in records] == list(range(2 * (DUPLICATE_WINDOW + 1)))


def test_unknown_ids_stale_epochs_and_bumps(broker, client) -> None:
    p = Producer(client, "epochs")
    assert p.send(p.batch(sequence=1))[0] == _C.OUT_OF_ORDER_SEQUENCE_NUMBER  # a first batch starts at 0
    assert p.send(p.batch(producer_id=p.id + 10_000))[0] == _C.UNKNOWN_PRODUCER_ID
    assert p.send(p.batch()) == (0, 0)
    p.next = 2
    # An idempotent producer may bump its epoch itself (Kafka's does after a failed batch): the new epoch
    # starts at sequence 0, and the old one is fenced from then on.
    assert p.send(p.batch(epoch=p.epoch + 1))[0] == _C.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.send(p.batch(epoch=p.epoch + 1, sequence=0)) == (0, 2)
    assert p.send(p.batch())[0] == _C.INVALID_PRODUCER_EPOCH
    p.epoch, p.next = p.epoch + 1, 2
    # v3+ without a transactional id: naming the current (or a stale) id/epoch gets a fresh id at epoch 0,
    # as from Apache Kafka; the new id starts at sequence 0 and the old one still appends where it was.
    for named_epoch in (p.epoch, p.epoch + 7):
        fresh = client.request(init(producer_id=p.id, epoch=named_epoch), 3)
        assert (fresh.error_code, fresh.producer_epoch) == (0, 0) and fresh.producer_id not in (p.id, -1)
    assert p.send(p.batch()) == (0, 4)
    p.id, p.epoch, p.next = fresh.producer_id, 0, 2
    assert p.send(p.batch())[0] == _C.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new id starts at 0
    assert p.send(p.batch(sequence=0)) == (0, 6)
    assert broker.high_watermark("epochs", 0) == 8


def test_sequences_wrap_past_int32() -> None:
    ids = ProducerIds()
    _, pid, epoch = ids.init(None, 0)
    state = PartitionProducers()

    def header(base: int, count: int) -> BatchHeader:
        return BatchHeader(0, 0, 0, count - 1, 0, 0, pid, epoch, base, count)

    state.record(header(2**31 - 2, 2), 100, ids)  # sequences 2**31 - 2 and 2**31 - 1
    assert header(2**31 - 1, 2).last_sequence == 0
    assert state.check(header(0, 3), ids) is None
    assert state.check(header(2**31, 1), ids) == _C.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.check(header(2**31 - 2, 2), ids) == 100  # the retry of the batch at the top


def test_plain_batches_are_never_checked(broker, client) -> None:
    plain = encode_record_batch([(None, b"x")])
    assert first_partition(client.request(produce("plain", plain), 3)).base_offset == 0
    assert first_partition(client.request(produce("plain", plain), 3)).base_offset == 1


def test_transactional_ids_keep_their_producer_id() -> None:
    ids = ProducerIds()
    code, first, epoch = ids.init("tx", 60_000)
    assert (code, epoch) == (_C.NONE, 0)
    assert ids.init("tx", 60_000) == (_C.NONE, first, 1)
    assert ids.init("tx", 60_000, first, 0)[0] == _C.PRODUCER_FENCED
    assert ids.init("tx", 0)[0] == _C.INVALID_TRANSACTION_TIMEOUT
    assert ids.init(None, 0)[1] not in (first, -1)


def test_forgotten_producer_ids_are_unknown() -> None:
    ids = ProducerIds(max_producer_ids=2)
    first = ids.init(None, 0)[1]
    ids.init(None, 0)
    ids.init(None, 0)
    assert ids.epoch(first) is None
    # A transactional id's epoch is bumped to a fresh id at the top of int16.
    code, pid, _ = ids.init("tx", 60_000)
    for epoch in range(32766):
        assert ids.init("tx", 60_000, pid, epoch) == (_C.NONE, pid, epoch + 1)
    code, fresh, epoch = ids.init("tx", 60_000, pid, 32766)
    assert (code, epoch) == (_C.NONE, 0) and fresh != pid and ids.epoch(pid) is None


def test_init_producer_id_at_every_version(broker, client) -> None:
    seen = set()
    for version in range(6):
        answer = client.request(init(), version)
        assert answer.error_code == 0 and answer.producer_epoch == 0
        seen.add(answer.producer_id)
    assert len(seen) == 6
