"""The broker's storage: magic 2 batches kept as produced, format conversion, Fetch/ListOffsets at modern
versions.  What the broker serves is read back with kafka-python's record readers (an independent
implementation) as well as kproto's."""

from __future__ import annotations

import struct
import uuid

import pytest

from broker_client import SocketClient, first_partition
from kproto import ErrorCode
from kproto._backend import records_impl
from kproto.broker.batches import scan_batches
from kproto.broker.data_plane import SERVED_VERSIONS
from kproto.messages import FetchRequest, ListOffsetsRequest, ProduceRequest
from kproto.records import decode_records, encode_control_batch, encode_message_set, encode_record_batch
from kproto.testing import MockBroker

kafka_records = pytest.importorskip("kafka.record.memory_records")

_C = ErrorCode
T0 = 1_700_000_000_000


def _records(n: int, tag: str = "v", t0: int = T0) -> list:
    return [(f"k{i}".encode(), f"{tag}{i}".encode(), t0 + i) for i in range(n)]


def produce(topic: str, records: bytes, partition: int = 0, acks: int = 1) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=1000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])],
    )


def fetch(
    topic: str,
    offset: int,
    *,
    max_bytes: int = 1 << 20,
    partition_max: int = 1 << 20,
    topic_id: uuid.UUID = uuid.UUID(int=0),
    isolation: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[
            T(
                topic=topic,
                topic_id=topic_id,
                partitions=[T.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max)],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def list_offsets(topic: str, timestamp: int, isolation: int = 0) -> ListOffsetsRequest:
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            T(
                name=topic,
                partitions=[T.ListOffsetsPartition(partition_index=0, timestamp=timestamp, max_num_offsets=1)],
            )
        ],
    )


def oracle(raw: bytes) -> list:
    """(offset, timestamp, timestamp type, key, value, magic) of every record, read by kafka-python."""
    out = []
    records = kafka_records.MemoryRecords(raw)
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for record in batch:
            out.append((record.offset, record.timestamp, record.timestamp_type, record.key, record.value, batch.magic))
    return out


@pytest.fixture(scope="module")
def broker():
    with MockBroker(topics={"plain": 1}) as b:
        yield b


def _fetched(client: SocketClient, version: int, topic: str, offset: int = 0, **options: object):
    return first_partition(client.request(fetch(topic, offset, **options), version))


# ------------------------------------------------------------------------------------------------ storage


@pytest.mark.parametrize("codec", [None, "gzip", "zstd"])
def test_batches_are_stored_as_produced_with_offsets_patched(broker, client, codec) -> None:
    topic = f"asis-{codec}"
    sent = [encode_record_batch(_records(3, f"b{n}-"), codec=codec) for n in range(3)]
    for n, batch in enumerate(sent):
        part = first_partition(client.request(produce(topic, batch), 9))
        assert (part.error_code, part.base_offset, part.log_append_time_ms) == (0, 3 * n, -1)
    stored = broker.log_bytes(topic, 0)
    # Byte for byte what the producer sent, except the 8-byte base offset (outside the CRC).
    assert stored == b"".join(struct.pack(">q", 3 * n) + batch[8:] for n, batch in enumerate(sent))
    raw = _fetched(client, 12, topic).records.raw
    assert raw == stored
    assert [(o, v) for o, _, _, _, v, _ in oracle(raw)] == [
        (3 * n + i, f"b{n}-{i}".encode()) for n in range(3) for i in range(3)
    ]


def test_log_append_time_topics_restamp_and_recompute_the_crc() -> None:
    with (
        MockBroker(topics={"lat": 1}, log_message_timestamp_type="LogAppendTime") as broker,
        SocketClient((broker.host, broker.port)) as client,
    ):
        part = first_partition(client.request(produce("lat", encode_record_batch(_records(4), codec="lz4")), 8))
        assert part.error_code == 0 and part.log_append_time_ms > T0 + 10**6
        read = oracle(_fetched(client, 11, "lat").records.raw)  # kafka-python checks the new CRC
        assert {(ts, ts_type) for _, ts, ts_type, _, _, _ in read} == {(part.log_append_time_ms, 1)}
        # A magic 1 reader sees LogAppendTime too.
        legacy = oracle(_fetched(client, 2, "lat").records.raw)
        assert [(m, t) for _, _, t, _, _, m in legacy] == [(1, 1)] * 4


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_old_fetch_versions_get_down_converted_records(broker, client, version, magic) -> None:
    topic = f"down{version}"
    client.request(produce(topic, encode_record_batch(_records(5, "u"))), 9)
    client.request(produce(topic, encode_record_batch(_records(5, "g", T0 + 5), codec="gzip")), 9)
    raw = _fetched(client, version, topic, 2).records.raw
    read = oracle(raw)
    # The uncompressed batch starts at the fetch offset; the compressed one stays one whole wrapper.
    assert [(o, v, m) for o, _, _, _, v, m in read] == [(i, f"u{i}".encode(), magic) for i in range(2, 5)] + [
        (5 + i, f"g{i}".encode(), magic) for i in range(5)
    ]
    if magic == 1:
        assert [ts for _, ts, _, _, _, _ in read] == [T0 + i for i in range(2, 10)]
    # kproto's own reader agrees, and the cached conversion is served the same the second time.
    assert [r.offset for r in decode_records(raw)] == list(range(2, 10))
    assert _fetched(client, version, topic, 2).records.raw == raw


def test_zstd_cannot_be_down_converted(broker, client) -> None:
    client.request(produce("zstd-old", encode_record_batch(_records(2), codec="zstd")), 7)
    refused = _fetched(client, 2, "zstd-old")
    assert (refused.error_code, refused.high_watermark, refused.records) == (_C.UNSUPPORTED_COMPRESSION_TYPE, -1, None)
    # Magic 2 is served as stored from v4 on: Kafka 3.9 and 4.1 hand a v4-v9 fetcher the zstd batch.
    assert _fetched(client, 9, "zstd-old").error_code == _C.NONE
    assert _fetched(client, 10, "zstd-old").error_code == _C.NONE


@pytest.mark.parametrize("codec", [None, "gzip", "snappy"])
def test_old_message_sets_are_up_converted(broker, client, codec) -> None:
    topic = f"up-{codec}"
    magic0 = encode_message_set([(b"k", b"zero"), (None, b"one")], magic=0, codec=codec)
    magic1 = encode_message_set([(b"k", b"two", T0), (None, b"three", T0 + 1)], magic=1, codec=codec)
    assert first_partition(client.request(produce(topic, magic0), 0)).base_offset == 0
    assert first_partition(client.request(produce(topic, magic1), 2)).base_offset == 2
    read = oracle(_fetched(client, 11, topic).records.raw)
    assert [(o, ts, v, m) for o, ts, _, _, v, m in read] == [
        (0, -1, b"zero", 2),
        (1, -1, b"one", 2),
        (2, T0, b"two", 2),
        (3, T0 + 1, b"three", 2),
    ]
    # And back down for a 0.9 consumer.
    assert [v for _, _, _, _, v, _ in oracle(_fetched(client, 1, topic).records.raw)] == [
        b"zero",
        b"one",
        b"two",
        b"three",
    ]


# ------------------------------------------------------------------------------------------------ bad input


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, records_impl.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _counts(batch: bytearray, last_offset_delta: int, count: int) -> None:
    struct.pack_into(">i", batch, 23, last_offset_delta)
    struct.pack_into(">i", batch, 57, count)


def _corruptions() -> dict:
    good = encode_record_batch(_records(3))
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    wrong_count = bytearray(good)
    _counts(wrong_count, 3, 4)  # lastOffsetDelta 3, count 4: one record missing
    short_count = bytearray(good)
    _counts(short_count, 1, 2)  # the header claims 2 of the 3 records
    delta_off = bytearray(good)
    _counts(delta_off, 5, 3)  # lastOffsetDelta disagrees with the count
    long_length = bytearray(good)
    struct.pack_into(">i", long_length, 8, len(good))  # batchLength past the end
    return {
        "bad crc": (bytes(bad_crc), _C.CORRUPT_MESSAGE),
        "count past the records": (_recrc(wrong_count), _C.CORRUPT_MESSAGE),
        "records past the count": (_recrc(short_count), _C.CORRUPT_MESSAGE),
        "delta against count": (_recrc(delta_off), _C.INVALID_RECORD),
        "truncated": (good[:-5], _C.CORRUPT_MESSAGE),
        "length past the end": (bytes(long_length), _C.CORRUPT_MESSAGE),
        "header only": (good[:40], _C.CORRUPT_MESSAGE),
        "magic 1 in v3+": (encode_message_set([(None, b"x")], magic=1), _C.INVALID_RECORD),
        "two batches": (good + good, _C.INVALID_RECORD),
        "no batch": (b"", _C.INVALID_RECORD),
        "control batch": (encode_control_batch(True, producer_id=1, producer_epoch=0), _C.INVALID_RECORD),
        "transactional": (
            encode_record_batch(_records(1), producer_id=5, producer_epoch=0, base_sequence=0, transactional=True),
            _C.INVALID_TXN_STATE,
        ),
        "unknown codec": (_recrc(bytearray(good[:21]) + bytes([0, 7]) + good[23:]), _C.CORRUPT_MESSAGE),
    }


@pytest.mark.parametrize("case", sorted(_corruptions()))
def test_bad_batches_get_kafkas_error_and_nothing_is_stored(broker, client, case) -> None:
    data, code = _corruptions()[case]
    topic = "bad-" + case.replace(" ", "-").replace("+", "")
    good = encode_record_batch(_records(1))
    assert first_partition(client.request(produce(topic, good), 9)).error_code == 0
    assert first_partition(client.request(produce(topic, data), 9)).error_code == code
    assert broker.high_watermark(topic, 0) == 1 and broker.log_bytes(topic, 0)[8:] == good[8:]
    # The connection and the broker go on serving.
    assert first_partition(client.request(produce(topic, good), 3)).base_offset == 1


def test_zstd_needs_produce_v7_and_size_is_bounded() -> None:
    with MockBroker(message_max_bytes=200) as broker, SocketClient((broker.host, broker.port)) as client:
        zstd = encode_record_batch(_records(2), codec="zstd")
        assert first_partition(client.request(produce("z", zstd), 6)).error_code == _C.UNSUPPORTED_COMPRESSION_TYPE
        assert first_partition(client.request(produce("z", zstd), 7)).error_code == _C.NONE
        big = encode_record_batch([(None, b"x" * 300)])
        assert first_partition(client.request(produce("z", big), 9)).error_code == _C.MESSAGE_TOO_LARGE
        assert broker.high_watermark("z", 0) == 2


def test_scan_batches_reports_each_header() -> None:
    data = encode_record_batch(_records(2), producer_id=7, producer_epoch=1, base_sequence=10) + encode_record_batch(
        _records(3), codec="gzip"
    )
    headers = scan_batches(data, message_max_bytes=1 << 20)
    assert not isinstance(headers, ErrorCode)
    assert [(h.count, h.producer_id, h.base_sequence, h.last_sequence, h.codec) for h in headers] == [
        (2, 7, 10, 11, 0),
        (3, -1, -1, 1, 1),
    ]
    assert sum(h.size for h in headers) == len(data)


# ------------------------------------------------------------------------------------------------ Fetch


def test_fetch_modern_fields_sessions_and_topic_ids(broker, client) -> None:
    client.request(produce("modern", encode_record_batch(_records(3))), 9)
    part = _fetched(client, 5, "modern", isolation=1)
    assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (3, 3, 0)
    assert part.aborted_transactions == []
    assert _fetched(client, 4, "modern").aborted_transactions is None
    # Sessions are declined: session id 0 in every answer, a named session is not found.
    response = client.request(fetch("modern", 0, session_epoch=0), 7)
    assert (response.error_code, response.session_id) == (0, 0)
    assert (
        client.request(fetch("modern", 0, session_id=42, session_epoch=1), 7).error_code
        == _C.FETCH_SESSION_ID_NOT_FOUND
    )
    assert client.request(fetch("modern", 0, session_epoch=3), 7).error_code == _C.INVALID_FETCH_SESSION_EPOCH
    # v13+: topics by id.
    topic_id = broker.core.cluster.topic_ids["modern"]
    response = client.request(fetch("", 1, topic_id=topic_id), 13)
    assert response.responses[0].topic_id == topic_id
    assert [r.offset for r in decode_records(response.responses[0].partitions[0].records.raw)] == [0, 1, 2]
    unknown = client.request(fetch("", 0, topic_id=uuid.uuid4()), 17).responses[0].partitions[0]
    assert unknown.error_code == _C.UNKNOWN_TOPIC_ID
    assert _fetched(client, 11, "modern", 4).error_code == _C.OFFSET_OUT_OF_RANGE


def test_fetch_limits_with_the_first_batch_whole(broker, client) -> None:
    for n in range(3):
        client.request(produce("limits", encode_record_batch(_records(10, f"{n}-"))), 9)
    size = len(broker.log_bytes("limits", 0)) // 3
    # v3+: the first batch comes whole even past both limits; later ones are cut at the limit.
    assert len(_fetched(client, 11, "limits", max_bytes=10, partition_max=10).records.raw) == size
    assert len(_fetched(client, 11, "limits", partition_max=size + 10).records.raw) == size + 10
    # v2 (magic 1, down-converted) is cut at the limit even in its first message.
    assert len(_fetched(client, 2, "limits", partition_max=30).records.raw) == 30


# ------------------------------------------------------------------------------------------------ ListOffsets


def test_list_offsets_by_timestamp_and_specials(broker, client) -> None:
    client.request(produce("times", encode_record_batch(_records(5, t0=T0))), 9)
    client.request(
        produce("times", encode_record_batch([(None, b"late", T0 + 100), (None, b"early", T0 + 50)], codec="gzip")), 9
    )

    def answer(timestamp: int, version: int = 9, isolation: int = 0) -> tuple:
        part = client.request(list_offsets("times", timestamp, isolation), version).topics[0].partitions[0]
        return part.error_code, part.timestamp, part.offset

    assert answer(T0 + 2) == (0, T0 + 2, 2)
    assert answer(T0 + 60) == (0, T0 + 100, 5)  # the first record at or past the time, not the closest
    assert answer(T0 + 101) == (0, -1, -1)
    assert answer(-1) == (0, -1, 7) and answer(-1, 2, isolation=1) == (0, -1, 7)
    assert answer(-2) == (0, -1, 0) and answer(-4, 8) == (0, -1, 0)
    assert answer(-3, 7) == (0, T0 + 100, 5)
    assert answer(-3, 6) == (_C.INVALID_REQUEST, -1, -1)
    v0 = client.request(list_offsets("times", -1), 0).topics[0].partitions[0]
    assert v0.old_style_offsets == [7]


def test_a_version_past_the_served_table_is_unsupported(broker, client) -> None:
    produced = client.request(produce("past", encode_record_batch(_records(1))), SERVED_VERSIONS[0][1] + 1)
    assert first_partition(produced).error_code == _C.UNSUPPORTED_VERSION
    listed = client.request(list_offsets("past", -1), SERVED_VERSIONS[2][1] + 1)
    assert listed.topics[0].partitions[0].error_code == _C.UNSUPPORTED_VERSION
    assert broker.high_watermark("past", 0) <= 0


def test_every_served_version_answers_what_the_client_decodes() -> None:
    # A field the version does not carry must keep its default: the decoded answer equals the built one.
    import asyncio

    from kproto.broker.config import BrokerConfig
    from kproto.broker.core import BrokerCore
    from kproto.connection.server import ServerConnection
    from kproto.framing import decode_response, encode_request
    from kproto.messages import InitProducerIdRequest

    core = BrokerCore(BrokerConfig())
    core.cluster.create_topic("v", 1)
    requests = {
        0: lambda v: produce("v", encode_record_batch(_records(2)) if v >= 3 else encode_message_set([(None, b"x")])),
        1: lambda v: fetch("v", 0, isolation=v % 2, topic_id=core.cluster.topic_ids["v"]),
        2: lambda v: list_offsets("v", -1 if v == 0 else T0),
        22: lambda v: InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000),
    }

    async def check() -> None:
        for key, make in requests.items():
            low, high = SERVED_VERSIONS[key]
            for version in range(low, high + 1):
                conn = ServerConnection()
                (request,) = conn.receive_data(encode_request(make(version), version, correlation_id=version))
                built = await core.handle(request, "127.0.0.1")
                _, decoded = decode_response(conn.send_response(request, built), key, version)
                assert decoded == built, (key, version)

    asyncio.run(check())
