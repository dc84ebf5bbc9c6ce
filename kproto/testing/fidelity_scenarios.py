"""The corpus of :mod:`kproto.testing.fidelity`: request sequences over every api the mock broker serves.

Each scenario is written once and runs unchanged against Apache Kafka and the mock broker; requests are
built from plain dicts (``Message.from_dict``).  Topics are created before a scenario's first request
(both brokers run with automatic topic creation off), and every name carries the session's prefix.

:func:`golden_scenarios` replays the requests real clients sent at their defaults (the committed frames
of ``tests/golden/clients``): each frame is decoded and re-sent with the live values its conversation
needs in place of the recorded ones (topic and group names, member id, generation, producer id and
epoch, topic id).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Type

from kproto import messages as m
from kproto.framing import decode_request
from kproto.message_base import Message
from kproto.records import decode_records, encode_message_set, encode_record_batch
from kproto.testing.fidelity import CONSUMER_SESSION_MS, Scenario, Session

__all__ = ["SCENARIOS", "GROUP_SCENARIOS", "golden_scenarios", "build"]


def build(cls: Type[Message], **fields: Any) -> Any:
    """A request from keyword fields, nested structs as dicts."""
    return cls.from_dict(fields)


TS = 1_700_000_000_000  # fixed record timestamps: compared as they are


def batch(values: List[bytes], **kw: Any) -> bytes:
    return encode_record_batch([(b"k%d" % i, v, TS + i) for i, v in enumerate(values)], **kw)


def legacy(values: List[bytes], magic: int = 0, codec: Optional[str] = None) -> bytes:
    messages = [(b"k%d" % i, v, TS + i) for i, v in enumerate(values)]  # magic 0 ignores the timestamp
    return encode_message_set(messages, magic=magic, codec=codec)


def produce(
    topic: str,
    records: bytes,
    partition: int = 0,
    acks: int = -1,
    txn: Optional[str] = None,
    topic_id: Optional[uuid.UUID] = None,
) -> Any:
    data: Dict[str, Any] = {"name": topic, "partition_data": [{"index": partition, "records": records}]}
    if topic_id is not None:
        data["topic_id"] = topic_id
    return build(m.ProduceRequest, transactional_id=txn, acks=acks, timeout_ms=5000, topic_data=[data])


def fetch(
    topic: str,
    offset: int = 0,
    partition: int = 0,
    isolation: int = 0,
    topic_id: Optional[uuid.UUID] = None,
    max_bytes: int = 1 << 20,
) -> Any:
    t: Dict[str, Any] = {
        "topic": topic,
        "partitions": [
            {
                "partition": partition,
                "fetch_offset": offset,
                "partition_max_bytes": max_bytes,
                "current_leader_epoch": -1,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
            }
        ],
    }
    if topic_id is not None:
        t["topic_id"] = topic_id
    return build(
        m.FetchRequest,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 24,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[t],
    )


def list_offsets(topic: str, timestamp: int, partition: int = 0, isolation: int = 0) -> Any:
    return build(
        m.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "timestamp": timestamp,
                        "max_num_offsets": 1,
                        "current_leader_epoch": -1,
                    }
                ],
            }
        ],
    )


def metadata(*topics: str, ids: Optional[List[uuid.UUID]] = None, version: int = 12) -> Any:
    """A Metadata request; from v4 it says not to create the topics it names."""
    entries: List[Dict[str, Any]] = [{"name": t} for t in topics]
    entries += [{"name": None, "topic_id": i} for i in (ids or [])]
    if version < 4:
        return build(m.MetadataRequest, topics=entries)
    return build(m.MetadataRequest, topics=entries, allow_auto_topic_creation=False)


def topic_id_of(s: Session, topic: str) -> uuid.UUID:
    answer = s.call(f"metadata-id-{topic}", metadata(topic), 12)
    return answer.topics[0].topic_id  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------- data plane, 3.9


def old_produce_fetch(s: Session) -> None:
    """0.9-era Metadata/Produce/Fetch/ListOffsets, and their error paths."""
    topic = s.create_topic("t", 2)
    s.call("metadata-v0", metadata(topic, version=0), 0)
    s.call("metadata-v0-unknown", metadata(s.name("missing"), version=0), 0)
    s.call("produce-v0-magic0", produce(topic, legacy([b"a", b"b"]), acks=1), 0)
    s.call("produce-v1-magic0", produce(topic, legacy([b"c"]), acks=1), 1)
    s.call("produce-v2-magic1", produce(topic, legacy([b"d", b"e"], magic=1), acks=1), 2)
    s.call("produce-v2-magic1-gzip", produce(topic, legacy([b"f", b"g"], magic=1, codec="gzip"), acks=1), 2)
    s.call("produce-v1-unknown-partition", produce(topic, legacy([b"x"]), partition=7, acks=1), 1)
    s.call("produce-v1-unknown-topic", produce(s.name("missing"), legacy([b"x"]), acks=1), 1)
    s.call("fetch-v0", fetch(topic, 0), 0)
    s.call("fetch-v1-middle", fetch(topic, 3), 1)
    s.call("fetch-v2", fetch(topic, 0), 2)
    s.call("fetch-v1-out-of-range", fetch(topic, 100), 1)
    s.call("fetch-v4-out-of-range", fetch(topic, 100), 4)
    s.call("fetch-v11-out-of-range", fetch(topic, 100), 11)
    s.call("fetch-v1-empty-partition", fetch(topic, 0, partition=1), 1)
    s.call("fetch-v1-unknown-partition", fetch(topic, 0, partition=9), 1)
    s.call("fetch-v1-unknown-topic", fetch(s.name("missing"), 0), 1)
    s.call("list-offsets-v0-latest", list_offsets(topic, -1), 0)
    s.call("list-offsets-v0-earliest", list_offsets(topic, -2), 0)
    s.call("list-offsets-v1-latest", list_offsets(topic, -1), 1)
    s.call("list-offsets-v1-unknown-partition", list_offsets(topic, -1, partition=5), 1)


def _damage(frame: bytes, at: int) -> bytes:
    data = bytearray(frame)
    data[at] ^= 0xFF
    return bytes(data)


def crc_damage(s: Session) -> None:
    """A produced entry whose checksum does not match its bytes, in each record format."""
    topic = s.create_topic("crc")
    s.call("produce-v1-magic0-bad-crc", produce(topic, _damage(legacy([b"hello"]), -1), acks=1), 1)
    s.call("produce-v3-batch-bad-crc", produce(topic, _damage(batch([b"hello"]), -1)), 3)
    s.call("fetch-v4-after", fetch(topic, 0), 4)


def zstd_old_fetch(s: Session) -> None:
    """zstd batches: Produce below v7 refuses them; a fetch that must down-convert them too."""
    topic = s.create_topic("zstd")
    s.call("produce-v7-zstd", produce(topic, batch([b"z1", b"z2"], codec="zstd")), 7)
    s.call("produce-v6-zstd", produce(topic, batch([b"z3"], codec="zstd")), 6)
    s.call("fetch-v2-zstd", fetch(topic, 0), 2)
    s.call("fetch-v4-zstd", fetch(topic, 0), 4)
    s.call("fetch-v9-zstd", fetch(topic, 0), 9)
    s.call("fetch-v10-zstd", fetch(topic, 0), 10)


def group_v0(s: Session) -> None:
    """A one-member group at the 0.9 versions, then the member errors."""
    topic = s.create_topic("g")
    group = s.name("group")
    s.call("group-coordinator-v0", build(m.FindCoordinatorRequest, key=group), 0)
    join = s.call(
        "join-v0",
        build(
            m.JoinGroupRequest,
            group_id=group,
            session_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b"\0\0"}],
        ),
        0,
    )
    me, gen = join.member_id, join.generation_id
    s.call(
        "sync-v0",
        build(
            m.SyncGroupRequest,
            group_id=group,
            generation_id=gen,
            member_id=me,
            assignments=[{"member_id": me, "assignment": b"\0\1"}],
        ),
        0,
    )
    s.call("heartbeat-v0", build(m.HeartbeatRequest, group_id=group, generation_id=gen, member_id=me), 0)
    s.call(
        "heartbeat-v0-wrong-generation",
        build(m.HeartbeatRequest, group_id=group, generation_id=gen + 5, member_id=me),
        0,
    )
    s.call(
        "heartbeat-v0-unknown-member",
        build(m.HeartbeatRequest, group_id=group, generation_id=gen, member_id="nobody"),
        0,
    )
    commit = {
        "name": topic,
        "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m", "commit_timestamp": -1}
        ],
    }
    s.call(
        "commit-v2",
        build(
            m.OffsetCommitRequest,
            group_id=group,
            generation_id_or_member_epoch=gen,
            member_id=me,
            retention_time_ms=-1,
            topics=[commit],
        ),
        2,
    )
    s.call(
        "commit-v2-stale-generation",
        build(
            m.OffsetCommitRequest,
            group_id=group,
            generation_id_or_member_epoch=gen - 1,
            member_id=me,
            retention_time_ms=-1,
            topics=[commit],
        ),
        2,
    )
    s.call(
        "commit-v2-unknown-member",
        build(
            m.OffsetCommitRequest,
            group_id=group,
            generation_id_or_member_epoch=gen,
            member_id="nobody",
            retention_time_ms=-1,
            topics=[commit],
        ),
        2,
    )
    s.call(
        "offset-fetch-v1",
        build(m.OffsetFetchRequest, group_id=group, topics=[{"name": topic, "partition_indexes": [0, 1]}]),
        1,
    )
    s.call("describe-groups-v0", build(m.DescribeGroupsRequest, groups=[group, s.name("nogroup")]), 0)
    s.call("leave-v0", build(m.LeaveGroupRequest, group_id=group, member_id=me), 0)
    s.call("leave-v0-again", build(m.LeaveGroupRequest, group_id=group, member_id=me), 0)
    s.call("describe-groups-v0-after", build(m.DescribeGroupsRequest, groups=[group]), 0)
    s.call(
        "offset-fetch-v1-after",
        build(m.OffsetFetchRequest, group_id=group, topics=[{"name": topic, "partition_indexes": [0]}]),
        1,
    )


# ------------------------------------------------------------------------------------- data plane, 4.1


def modern_metadata(s: Session) -> None:
    topic = s.create_topic("meta", 3)
    tid = topic_id_of(s, topic)
    s.call("metadata-v12-by-id", metadata(ids=[tid]), 12)
    s.call("metadata-v12-unknown-id", metadata(ids=[uuid.UUID(int=12345)]), 12)
    s.call("metadata-v12-unknown-name", metadata(s.name("missing")), 12)
    s.call("metadata-v9", metadata(topic), 9)
    s.call(
        "find-coordinator-v4-batch",
        build(m.FindCoordinatorRequest, key_type=0, coordinator_keys=[s.name("a"), s.name("b")]),
        4,
    )
    s.call(
        "find-coordinator-v4-bad-type", build(m.FindCoordinatorRequest, key_type=5, coordinator_keys=[s.name("a")]), 4
    )


def modern_produce_fetch(s: Session) -> None:
    """Produce and Fetch at the newest versions: topic ids, ranges, log start and stable offsets."""
    topic = s.create_topic("pf", 2)
    tid = topic_id_of(s, topic)
    s.call("produce-v9", produce(topic, batch([b"a", b"b", b"c"], codec="lz4")), 9)
    s.call("produce-v9-acks1", produce(topic, batch([b"d"]), acks=1), 9)
    s.call("produce-v9-unknown-topic", produce(s.name("missing"), batch([b"x"])), 9)
    s.call("fetch-v12", fetch(topic, 0), 12)
    s.call("fetch-v12-out-of-range", fetch(topic, 50), 12)
    s.call("fetch-v12-negative-offset", fetch(topic, -5), 12)
    s.call("fetch-v4-out-of-range", fetch(topic, 50), 4)
    s.call("fetch-v13-topic-id", fetch("", 1, topic_id=tid), 13)
    s.call("fetch-v13-unknown-topic-id", fetch("", 0, topic_id=uuid.UUID(int=777)), 13)
    s.call("fetch-v15-unknown-partition", fetch("", 0, partition=4, topic_id=tid), 15)
    s.call("produce-v9-zstd", produce(topic, batch([b"z"], codec="zstd"), partition=1), 9)
    s.call("fetch-v4-zstd", fetch(topic, 0, partition=1), 4)
    s.call("fetch-v9-zstd", fetch(topic, 0, partition=1), 9)
    s.call("list-offsets-v7-latest", list_offsets(topic, -1), 7)
    s.call("list-offsets-v7-earliest", list_offsets(topic, -2), 7)
    s.call("list-offsets-v7-by-time", list_offsets(topic, TS + 1), 7)
    s.call("list-offsets-v7-max-timestamp", list_offsets(topic, -3), 7)
    s.call("list-offsets-v7-future", list_offsets(topic, TS + 10**6), 7)


def offset_for_leader_epoch(s: Session) -> None:
    """OffsetForLeaderEpoch, which clients send to check their position after a leader change: the current
    epoch, an epoch the partition never had, a fenced and an unknown current epoch, a missing partition."""
    topic = s.create_topic("ofle")
    s.call("produce-v9", produce(topic, batch([b"a", b"b", b"c"])), 9)

    def ask(label: str, leader_epoch: int, current_leader_epoch: int = -1, partition: int = 0, name: str = "") -> None:
        part = {"partition": partition, "current_leader_epoch": current_leader_epoch, "leader_epoch": leader_epoch}
        request = build(
            m.OffsetForLeaderEpochRequest, replica_id=-1, topics=[{"topic": name or topic, "partitions": [part]}]
        )
        s.call(label, request, 4)

    ask("ofle-v4-current-epoch", 0, current_leader_epoch=0)
    ask("ofle-v4-no-current-epoch", 0)
    ask("ofle-v4-later-epoch", 5)
    ask("ofle-v4-fenced", 0, current_leader_epoch=-2)
    ask("ofle-v4-unknown-current-epoch", 0, current_leader_epoch=7)
    ask("ofle-v4-unknown-partition", 0, partition=9)
    ask("ofle-v4-unknown-topic", 0, name=s.name("missing"))


def idempotent_sequences(s: Session) -> None:
    """An idempotent producer: in-order, duplicate, gap, stale epoch."""
    topic = s.create_topic("idem")
    init = s.call(
        "init-producer-id-v4",
        build(
            m.InitProducerIdRequest,
            transactional_id=None,
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        ),
        4,
    )
    pid, epoch = init.producer_id, init.producer_epoch

    def send(label: str, seq: int, values: List[bytes], ep: int = epoch) -> None:
        s.call(label, produce(topic, batch(values, producer_id=pid, producer_epoch=ep, base_sequence=seq)), 9)

    send("produce-seq0", 0, [b"a", b"b"])
    send("produce-seq2", 2, [b"c"])
    send("produce-seq2-duplicate", 2, [b"c"])
    send("produce-seq9-gap", 9, [b"d"])
    send("produce-unissued-epoch", 3, [b"e"], ep=epoch + 5)
    # Naming the id and epoch does not bump them without a transactional id: a fresh id comes back.
    s.call(
        "init-producer-id-v4-named",
        build(
            m.InitProducerIdRequest,
            transactional_id=None,
            transaction_timeout_ms=60000,
            producer_id=pid,
            producer_epoch=epoch,
        ),
        4,
    )
    send("produce-old-id-continues", 3, [b"f"])
    s.call("fetch-after", fetch(topic, 0), 12)


def transactions_aborted(s: Session) -> None:
    """A transaction aborted, then one committed; read_committed and read_uncommitted fetches."""
    topic = s.create_topic("txn")
    group = s.name("txn-group")
    txn = s.name("tx")
    s.call("find-txn-coordinator-v3", build(m.FindCoordinatorRequest, key=txn, key_type=1), 3)
    init = s.call(
        "init-producer-id-v4",
        build(
            m.InitProducerIdRequest,
            transactional_id=txn,
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        ),
        4,
    )
    pid, epoch = init.producer_id, init.producer_epoch
    add = {
        "v3_and_below_transactional_id": txn,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }
    s.call(
        "produce-before-add",
        produce(
            topic,
            batch([b"early"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True),
            txn=txn,
        ),
        9,
    )
    s.call("add-partitions-v3", build(m.AddPartitionsToTxnRequest, **add), 3)
    s.call(
        "produce-txn",
        produce(
            topic,
            batch([b"t1", b"t2"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True),
            txn=txn,
        ),
        9,
    )
    s.call("fetch-read-committed-open", fetch(topic, 0, isolation=1), 12)
    s.call("list-offsets-committed-open", list_offsets(topic, -1, isolation=1), 7)
    s.call(
        "end-txn-abort",
        build(m.EndTxnRequest, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=False),
        3,
    )
    _settle()
    s.call("fetch-read-committed-aborted", fetch(topic, 0, isolation=1), 12)
    s.call("fetch-read-uncommitted-aborted", fetch(topic, 0, isolation=0), 12)
    s.call(
        "end-txn-again",
        build(m.EndTxnRequest, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True),
        3,
    )
    s.call("add-partitions-v3-second", build(m.AddPartitionsToTxnRequest, **add), 3)
    s.call(
        "add-offsets-v3",
        build(m.AddOffsetsToTxnRequest, transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group),
        3,
    )
    s.call(
        "produce-txn-2",
        produce(
            topic, batch([b"t3"], producer_id=pid, producer_epoch=epoch, base_sequence=2, transactional=True), txn=txn
        ),
        9,
    )
    s.call(
        "txn-offset-commit-v3",
        build(
            m.TxnOffsetCommitRequest,
            transactional_id=txn,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 4,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        ),
        3,
    )
    s.call(
        "end-txn-commit",
        build(m.EndTxnRequest, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True),
        3,
    )
    _settle()
    s.call("fetch-read-committed-done", fetch(topic, 0, isolation=1), 12)
    s.call(
        "offset-fetch-v7-after",
        build(
            m.OffsetFetchRequest,
            group_id=group,
            topics=[{"name": topic, "partition_indexes": [0]}],
            require_stable=True,
        ),
        7,
    )
    # A second InitProducerId bumps the epoch: the old one is fenced.
    s.call(
        "init-producer-id-v4-again",
        build(
            m.InitProducerIdRequest,
            transactional_id=txn,
            transaction_timeout_ms=60000,
            producer_id=-1,
            producer_epoch=-1,
        ),
        4,
    )
    s.call("add-partitions-v3-stale-epoch", build(m.AddPartitionsToTxnRequest, **add), 3)
    s.call(
        "produce-stale-epoch",
        produce(
            topic, batch([b"old"], producer_id=pid, producer_epoch=epoch, base_sequence=3, transactional=True), txn=txn
        ),
        9,
    )
    s.call(
        "end-txn-stale-epoch",
        build(m.EndTxnRequest, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True),
        4,
    )


def _settle() -> None:
    """Kafka writes transaction markers asynchronously after EndTxn: give the end marker time to land."""
    time.sleep(0.5)


def group_modern(s: Session) -> None:
    """A one-member group at the newest classic versions, with the member-id round trip."""
    topic = s.create_topic("gm")
    group = s.name("group")
    s.call("find-coordinator-v3", build(m.FindCoordinatorRequest, key=group, key_type=0), 3)
    join = dict(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\0\0"}],
        reason="test",
    )
    first = s.call("join-v9-member-id-required", build(m.JoinGroupRequest, **join), 9)
    join["member_id"] = first.member_id
    ans = s.call("join-v9", build(m.JoinGroupRequest, **join), 9)
    me, gen = ans.member_id, ans.generation_id
    s.call(
        "sync-v5-wrong-protocol",
        build(
            m.SyncGroupRequest,
            group_id=group,
            generation_id=gen,
            member_id=me,
            protocol_type="consumer",
            protocol_name="roundrobin",
            assignments=[],
        ),
        5,
    )
    s.call(
        "sync-v5",
        build(
            m.SyncGroupRequest,
            group_id=group,
            generation_id=gen,
            member_id=me,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": me, "assignment": b"\0\1"}],
        ),
        5,
    )
    s.call("heartbeat-v4", build(m.HeartbeatRequest, group_id=group, generation_id=gen, member_id=me), 4)
    commit = {
        "name": topic,
        "partitions": [
            {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1, "committed_metadata": "x"}
        ],
    }
    s.call(
        "commit-v9",
        build(m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=gen, member_id=me, topics=[commit]),
        9,
    )
    s.call(
        "commit-v9-stale",
        build(
            m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=gen + 1, member_id=me, topics=[commit]
        ),
        9,
    )
    s.call(
        "offset-fetch-v8",
        build(
            m.OffsetFetchRequest,
            groups=[
                {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
                {"group_id": s.name("nogroup"), "topics": None},
            ],
        ),
        8,
    )
    s.call("describe-groups-v5", build(m.DescribeGroupsRequest, groups=[group], include_authorized_operations=False), 5)
    s.call("list-groups-v4-stable", build(m.ListGroupsRequest, states_filter=["Stable"]), 4)
    s.call("delete-groups-v2-nonempty", build(m.DeleteGroupsRequest, groups_names=[group, s.name("nogroup")]), 2)
    s.call(
        "leave-v5",
        build(
            m.LeaveGroupRequest,
            group_id=group,
            members=[{"member_id": me, "reason": "bye"}, {"member_id": "nobody", "reason": None}],
        ),
        5,
    )
    s.call(
        "offset-delete-v0",
        build(m.OffsetDeleteRequest, group_id=group, topics=[{"name": topic, "partitions": [{"partition_index": 0}]}]),
        0,
    )
    s.call("delete-groups-v2", build(m.DeleteGroupsRequest, groups_names=[group]), 2)


def admin(s: Session) -> None:
    """CreateTopics, CreatePartitions, DeleteTopics and their error paths."""
    name = s.name("adm")
    topic = {"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
    s.call(
        "create-topics-v7-validate",
        build(m.CreateTopicsRequest, topics=[topic], timeout_ms=5000, validate_only=True),
        7,
    )
    s.call("create-topics-v7", build(m.CreateTopicsRequest, topics=[topic], timeout_ms=5000), 7)
    s.call("create-topics-v7-exists", build(m.CreateTopicsRequest, topics=[topic], timeout_ms=5000), 7)
    s.call(
        "create-topics-v7-bad-rf",
        build(m.CreateTopicsRequest, topics=[dict(topic, name=s.name("rf"), replication_factor=3)], timeout_ms=5000),
        7,
    )
    s.call(
        "create-topics-v7-bad-config",
        build(
            m.CreateTopicsRequest,
            topics=[dict(topic, name=s.name("cfg"), configs=[{"name": "no.such.config", "value": "1"}])],
            timeout_ms=5000,
        ),
        7,
    )
    s.call(
        "create-partitions-v3",
        build(m.CreatePartitionsRequest, topics=[{"name": name, "count": 4, "assignments": None}], timeout_ms=5000),
        3,
    )
    s.call(
        "create-partitions-v3-shrink",
        build(m.CreatePartitionsRequest, topics=[{"name": name, "count": 1, "assignments": None}], timeout_ms=5000),
        3,
    )
    s.call(
        "create-partitions-v3-unknown",
        build(
            m.CreatePartitionsRequest,
            topics=[{"name": s.name("missing"), "count": 3, "assignments": None}],
            timeout_ms=5000,
        ),
        3,
    )
    s.call(
        "delete-topics-v6",
        build(m.DeleteTopicsRequest, topics=[{"name": name}, {"name": s.name("missing")}], timeout_ms=5000),
        6,
    )


def control_misc(s: Session) -> None:
    """DescribeConfigs, DescribeCluster and a SASL handshake on a listener without SASL."""
    topic = s.create_topic("cfg")
    s.call(
        "describe-configs-v4",
        build(
            m.DescribeConfigsRequest,
            resources=[
                {"resource_type": 2, "resource_name": topic, "configuration_keys": ["cleanup.policy", "retention.ms"]},
                {"resource_type": 2, "resource_name": s.name("missing"), "configuration_keys": ["retention.ms"]},
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
    )
    s.call(
        "describe-cluster-v1",
        build(m.DescribeClusterRequest, include_cluster_authorized_operations=False, endpoint_type=1),
        1,
    )
    s.call("sasl-handshake-v1", build(m.SaslHandshakeRequest, mechanism="PLAIN"), 1)


def zookeeper_era_offsets(s: Session) -> None:
    """OffsetCommit v0/v1 and OffsetFetch v0, the versions from before group management."""
    topic = s.create_topic("zk")
    group = s.name("zk-group")
    part = {"partition_index": 0, "committed_offset": 9, "committed_metadata": "zk", "commit_timestamp": -1}
    s.call("commit-v0", build(m.OffsetCommitRequest, group_id=group, topics=[{"name": topic, "partitions": [part]}]), 0)
    s.call(
        "fetch-v0", build(m.OffsetFetchRequest, group_id=group, topics=[{"name": topic, "partition_indexes": [0]}]), 0
    )
    s.call(
        "commit-v1-simple",
        build(
            m.OffsetCommitRequest,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[{"name": topic, "partitions": [part]}],
        ),
        1,
    )
    s.call(
        "fetch-v1", build(m.OffsetFetchRequest, group_id=group, topics=[{"name": topic, "partition_indexes": [0]}]), 1
    )
    s.call("list-groups-v0", build(m.ListGroupsRequest), 0)


def api_versions(s: Session) -> None:
    s.call(
        "api-versions-v3", build(m.ApiVersionsRequest, client_software_name="kproto", client_software_version="1.0"), 3
    )
    s.call(
        "api-versions-v3-bad-name",
        build(m.ApiVersionsRequest, client_software_name="bad name!", client_software_version="1.0"),
        3,
    )


# ------------------------------------------------------------------------------- KIP-848 consumer groups

#: Member ids of the KIP-848 scenarios: v1 members choose their own, so both brokers see the same ones.
_MEMBER_IDS = {name: f"kproto-{name}-member-id-0000000" for name in ("a", "b", "c", "d", "e", "f", "x")}
#: ConsumerGroupHeartbeat v1: the version Kafka 4 clients send (client-chosen member ids, regexes).
_HEARTBEAT_V = 1
#: Partitions of the consumer group's topic: four, so that two members split them two and two.
_CG_PARTITIONS = 4


def _cg_heartbeat(
    group: str,
    member: str,
    epoch: int,
    topics: Optional[List[str]] = None,
    owned: Optional[List[Dict[str, Any]]] = None,
    regex: Optional[str] = None,
    instance: Optional[str] = None,
    assignor: Optional[str] = None,
) -> Any:
    """A ConsumerGroupHeartbeat: a join (epoch 0) carries the subscription and the rebalance timeout, a
    heartbeat only what changed (None: unchanged)."""
    return build(
        m.ConsumerGroupHeartbeatRequest,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=instance,
        rack_id=None,
        rebalance_timeout_ms=10000 if epoch == 0 else -1,
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=[] if owned is None and epoch == 0 else owned,
    )


def _owned(answer: Any) -> Optional[List[Dict[str, Any]]]:
    """The partitions a heartbeat answer assigned, as the next heartbeat's owned partitions."""
    if answer is None or answer.assignment is None:
        return None
    return [{"topic_id": t.topic_id, "partitions": list(t.partitions)} for t in answer.assignment.topic_partitions]


def _first_topic_id(answer: Any) -> uuid.UUID:
    """The id of the first topic an answer assigned."""
    return answer.assignment.topic_partitions[0].topic_id  # type: ignore[no-any-return]


def _cg_commit(group: str, topic: str, member: str, epoch: int, partition: int = 0) -> Any:
    return build(
        m.OffsetCommitRequest,
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": 11,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )


def _cg_offset_fetch(group: str, topic: str, member: Optional[str], epoch: int) -> Any:
    return build(
        m.OffsetFetchRequest,
        groups=[
            {
                "group_id": group,
                "member_id": member,
                "member_epoch": epoch,
                "topics": [{"name": topic, "partition_indexes": [0, 1]}],
            }
        ],
        require_stable=True,
    )


def consumer_group_members(s: Session) -> None:
    """KIP-848 members of one group: a join, a second member whose partitions move only once the first
    revoked them, commits and fetches at current and stale epochs, the member errors, a leave, a static
    member's leave (-2) and return under its instance id, and a member expelled when its session ends."""
    topic = s.create_topic("cg", _CG_PARTITIONS)
    group = s.name("cg")
    a, b, c, d, x = (_MEMBER_IDS[k] for k in ("a", "b", "c", "d", "x"))

    def beat(label: str, conn: str, *args: Any, **kw: Any) -> Any:
        return s.call(label, _cg_heartbeat(group, *args, **kw), _HEARTBEAT_V, conn=conn)

    s.call("find-coordinator", build(m.FindCoordinatorRequest, key_type=0, coordinator_keys=[group]), 4)
    a1 = beat("a-join", "a", a, 0, topics=[topic])
    a_owned = _owned(a1)
    beat("a-heartbeat", "a", a, 1, owned=a_owned)
    b1 = beat("b-join", "b", b, 0, topics=[topic])
    s.call("describe-reconciling", build(m.ConsumerGroupDescribeRequest, group_ids=[group]), 0)
    # A must give up half its partitions: told its smaller assignment at its old epoch.
    a2 = beat("a-heartbeat-revoke", "a", a, 1, owned=a_owned)
    beat("b-heartbeat-before-release", "b", b, b1.member_epoch, owned=_owned(b1) or [])
    a3 = beat("a-heartbeat-revoked", "a", a, a2.member_epoch, owned=_owned(a2))
    b2 = beat("b-heartbeat-released", "b", b, b1.member_epoch, owned=[])
    epoch_b = b2.member_epoch
    a_epoch = a3.member_epoch
    beat("a-heartbeat-stable", "a", a, a_epoch, owned=_owned(a2))
    # Owned partitions of a topic that does not exist, and past the topic's end, are ignored.
    nowhere = [{"topic_id": uuid.UUID(int=7), "partitions": [0]}, {"topic_id": _first_topic_id(a2), "partitions": [99]}]
    beat("a-heartbeat-owning-unknown", "a", a, a_epoch, owned=(_owned(a2) or []) + nowhere)
    beat("a-heartbeat-impossible-epoch", "a", a, -3)
    s.call("describe-stable", build(m.ConsumerGroupDescribeRequest, group_ids=[group, s.name("nogroup")]), 0)
    # Offsets: the member's current epoch commits; an older one is stale; a stranger is unknown.
    s.call("commit-v9", _cg_commit(group, topic, a, a_epoch), 9)
    s.call("commit-v9-stale-epoch", _cg_commit(group, topic, a, a_epoch - 1), 9)
    s.call("commit-v9-future-epoch", _cg_commit(group, topic, a, a_epoch + 5), 9)
    s.call("commit-v9-unknown-member", _cg_commit(group, topic, x, a_epoch), 9)
    s.call("commit-v9-admin", _cg_commit(group, topic, "", -1), 9)
    s.call("commit-v8-member", _cg_commit(group, topic, a, a_epoch), 8)
    s.call("commit-v9-unknown-partition", _cg_commit(group, topic, a, a_epoch, partition=9), 9)
    s.call("offset-fetch-v9", _cg_offset_fetch(group, topic, a, a_epoch), 9)
    s.call("offset-fetch-v9-stale-epoch", _cg_offset_fetch(group, topic, a, a_epoch - 1), 9)
    s.call("offset-fetch-v9-unknown-member", _cg_offset_fetch(group, topic, x, a_epoch), 9)
    s.call("offset-fetch-v9-admin", _cg_offset_fetch(group, topic, None, -1), 9)
    # The member errors.
    beat("heartbeat-unknown-member", "x", x, 3)
    beat("heartbeat-fenced-epoch", "a", a, a_epoch + 7)
    beat("heartbeat-impossible-epoch", "x", x, -5)
    beat("heartbeat-no-member-id", "x", "", 0, topics=[topic])
    beat("heartbeat-join-without-subscription", "x", x, 0)
    beat("heartbeat-join-owning-partitions", "x", x, 0, topics=[topic], owned=_owned(a2))
    beat("heartbeat-unknown-assignor", "x", x, 0, topics=[topic], assignor="nosuch")
    beat("heartbeat-static-leave-without-instance", "x", x, -2)
    # B leaves: A gets everything back.
    beat("b-leave", "b", b, -1)
    beat("b-heartbeat-after-leave", "b", b, epoch_b)
    a4 = beat("a-heartbeat-after-leave", "a", a, a_epoch, owned=_owned(a2))
    a_epoch, a_owned = a4.member_epoch, _owned(a4) or _owned(a2)
    # A static member C: while C is in the group its instance id is taken; after C leaves with -2 a new
    # member id under the same instance id takes C's place and assignment.
    c1 = beat("c-join-static", "c", c, 0, topics=[topic], instance="inst-c")
    beat("x-join-taken-instance", "x", x, 0, topics=[topic], instance="inst-c")
    a5 = beat("a-heartbeat-static-joined", "a", a, a_epoch, owned=a_owned)
    a6 = beat("a-heartbeat-static-revoked", "a", a, a5.member_epoch, owned=_owned(a5))
    c2 = beat("c-heartbeat", "c", c, c1.member_epoch, owned=[], instance="inst-c")
    beat("c-leave-static", "c", c, -2, instance="inst-c")
    s.call("describe-static-left", build(m.ConsumerGroupDescribeRequest, group_ids=[group]), 0)
    d1 = beat("d-join-as-c", "d", d, 0, topics=[topic], instance="inst-c")
    beat("c-heartbeat-replaced", "c", c, c2.member_epoch, instance="inst-c")
    # D falls silent: at the end of its session it is expelled and A takes its partitions back.
    a_epoch, a_owned = a6.member_epoch, _owned(a6) or a_owned
    beat("a-heartbeat-before-expiry", "a", a, a_epoch, owned=a_owned)
    deadline = time.monotonic() + CONSUMER_SESSION_MS / 1000 + 1.0
    while time.monotonic() < deadline:  # A keeps its session; how many beats fit in D's is not compared
        time.sleep(0.4)
        kept = s.call(
            "a-keepalive", _cg_heartbeat(group, a, a_epoch, owned=a_owned), _HEARTBEAT_V, conn="a", record=False
        )
        a_epoch, a_owned = kept.member_epoch, _owned(kept) or a_owned
    beat("a-heartbeat-after-expiry", "a", a, a_epoch, owned=a_owned)
    beat("d-heartbeat-expired", "d", d, d1.member_epoch, instance="inst-c")
    s.call("describe-after-expiry", build(m.ConsumerGroupDescribeRequest, group_ids=[group]), 0)
    beat("a-leave", "a", a, -1)
    s.call("describe-empty", build(m.ConsumerGroupDescribeRequest, group_ids=[group]), 0)
    s.call("offset-fetch-after", _cg_offset_fetch(group, topic, None, -1), 9)


def consumer_group_subscriptions(s: Session) -> None:
    """KIP-848 subscriptions: by regular expression, with bad expressions, a huge list of names, and
    the meeting of a classic group with a consumer-protocol member (migration policy ``disabled``)."""
    topic = s.create_topic("re-one", 2)
    s.create_topic("re-two", 1)
    # Topic ids are numbered as they first appear: learn them in a fixed order before any assignment.
    s.call("metadata-ids", metadata(topic, s.name("re-two")), 12)
    group = s.name("cg-re")
    e, x = _MEMBER_IDS["e"], _MEMBER_IDS["x"]

    def beat(label: str, *args: Any, **kw: Any) -> Any:
        return s.call(label, _cg_heartbeat(*args, **kw), _HEARTBEAT_V)

    e1 = beat("e-join-regex", group, e, 0, regex=s.name("re-.*"))
    # Kafka resolves a new expression in the background: the member learns its partitions on a
    # later heartbeat.
    time.sleep(1.0)
    e2 = beat("e-heartbeat-resolved", group, e, e1.member_epoch, owned=[])
    beat("e-heartbeat-owning", group, e, e2.member_epoch, owned=_owned(e2))
    s.call("describe-regex", build(m.ConsumerGroupDescribeRequest, group_ids=[group]), 0)
    beat("e-leave", group, e, -1)
    bad = s.name("cg-bad")
    beat("regex-invalid", bad, x, 0, regex="[unclosed")
    beat("regex-lookahead", bad, x, 0, regex="(?=a)b")
    beat("regex-backreference", bad, x, 0, regex=r"(a)\1")
    beat("regex-empty", bad, x, 0, regex="")
    # A nested quantifier: exponential in a backtracking matcher, linear in RE2/J and the mock's matcher.
    nested = s.name("cg-nested")
    beat("regex-nested-quantifier", nested, x, 0, regex="(a+)+$")
    beat("regex-nested-quantifier-leave", nested, x, -1)
    many = [s.name(f"missing-{i}") for i in range(5_000)]
    beat("subscribe-many-missing", bad, x, 0, topics=many)
    beat("subscribe-many-leave", bad, x, -1)
    # Past about 1 MiB Kafka cannot write the member's record to its offsets topic.
    huge = s.name("cg-huge")
    beat("subscribe-huge", huge, x, 0, topics=[s.name(f"missing-{i:07d}") for i in range(30_000)])
    beat("subscribe-huge-leave", huge, x, -1)
    # A classic group with a member: a consumer-protocol member may not take it over.
    classic = s.name("classic")
    join = dict(
        group_id=classic,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\0\0"}],
        reason=None,
    )
    first = s.call("classic-join-member-id-required", build(m.JoinGroupRequest, **join), 9, conn="classic")
    join["member_id"] = first.member_id
    s.call("classic-join", build(m.JoinGroupRequest, **join), 9, conn="classic")
    beat("heartbeat-into-classic-group", classic, x, 0, topics=[topic])
    s.call("describe-classic", build(m.ConsumerGroupDescribeRequest, group_ids=[classic]), 0)
    # Both brokers hold at most three members in a group; an empty consumer group gives way to a classic member.
    full = s.name("cg-full")
    f, d = _MEMBER_IDS["f"], _MEMBER_IDS["d"]
    for who, label in ((e, "first"), (f, "second"), (x, "third")):
        beat(f"cg-full-join-{label}", full, who, 0, topics=[topic])
    beat("cg-full-join-group-full", full, d, 0, topics=[topic])
    for who, label in ((e, "first"), (f, "second"), (x, "third")):
        beat(f"cg-full-leave-{label}", full, who, -1)
    join.update(group_id=full, member_id="")
    again = s.call("classic-join-into-empty-consumer-group", build(m.JoinGroupRequest, **join), 9, conn="classic")
    join["member_id"] = again.member_id
    s.call("classic-join-into-empty-consumer-group-again", build(m.JoinGroupRequest, **join), 9, conn="classic")
    # An empty classic group (committed offsets only) becomes a consumer group when a member joins.
    empty = s.name("classic-empty")
    s.call("classic-empty-admin-commit", _cg_commit(empty, topic, "", -1), 9)
    joined = beat("heartbeat-into-empty-classic-group", empty, x, 0, topics=[topic])
    s.call("empty-converted-offsets", _cg_offset_fetch(empty, topic, x, joined.member_epoch), 9)
    beat("empty-converted-leave", empty, x, -1)
    # Last, as Kafka's answer names a member id the mock's refusal does not (later ids would be numbered
    # apart): a classic JoinGroup into a consumer group with members.
    taken = s.name("cg-taken")
    beat("cg-taken-join", taken, e, 0, topics=[topic])
    join.update(group_id=taken, member_id="")
    s.call("classic-join-into-consumer-group", build(m.JoinGroupRequest, **join), 9, conn="classic")
    s.call("classic-describe-consumer-group", build(m.DescribeGroupsRequest, groups=[taken]), 5)
    beat("cg-taken-leave", taken, e, -1)


SCENARIOS: List[Scenario] = [
    Scenario("old-produce-fetch", "3.9", old_produce_fetch),
    Scenario("crc-damage", "3.9", crc_damage),
    Scenario("zstd-old-fetch", "3.9", zstd_old_fetch),
    Scenario("group-v0", "3.9", group_v0),
    Scenario("modern-metadata", "4.1", modern_metadata),
    Scenario("modern-produce-fetch", "4.1", modern_produce_fetch),
    Scenario("offset-for-leader-epoch", "4.1", offset_for_leader_epoch),
    Scenario("idempotent-sequences", "4.1", idempotent_sequences),
    Scenario("transactions-aborted", "4.1", transactions_aborted),
    Scenario("group-modern", "4.1", group_modern),
    Scenario("admin", "4.1", admin),
    Scenario("api-versions", "4.1", api_versions),
    Scenario("control-misc", "4.1", control_misc),
    Scenario("zookeeper-era-offsets", "3.9", zookeeper_era_offsets),
    Scenario("consumer-group-members", "4.1", consumer_group_members),
    Scenario("consumer-group-subscriptions", "4.1", consumer_group_subscriptions),
]

GROUP_SCENARIOS: List[Scenario] = []


# ------------------------------------------------------------------------------------------ golden replay


def golden_scenarios(directory: Path) -> List[Scenario]:
    """One scenario per client recorded in ``directory`` (``tests/golden/clients``), for Kafka 4.1."""
    index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    by_client: Dict[str, List[Dict[str, Any]]] = {}
    for entry in index["frames"]:
        by_client.setdefault(entry["client"], []).append(entry)
    return [
        Scenario(f"golden-{client}", "4.1", _golden_run(directory, index, entries))
        for client, entries in by_client.items()
    ]


def _golden_run(directory: Path, index: Dict[str, Any], entries: List[Dict[str, Any]]) -> Any:
    recorded_topic = index["topic"]
    recorded_topic_id = uuid.UUID(index["topic_id"])

    def run(s: Session) -> None:
        topic = s.create_topic("golden")
        live: Dict[str, Any] = {
            "topic": topic,
            "group": s.name("group"),
            "member_id": "",
            "generation_id": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topic_id": None,
        }
        for n, entry in enumerate(entries):
            _, request = decode_request((directory / entry["file"]).read_bytes())
            if entry["api_name"] != "ApiVersions" and live["topic_id"] is None:
                answer = s.call(f"{n}-metadata", metadata(topic), 12)
                live["topic_id"] = answer.topics[0].topic_id
            body = _patch(request.to_dict(), live, recorded_topic, recorded_topic_id, index["group_prefix"])
            request = type(request).from_dict(body)
            answer = s.call(f"{n}-{entry['api_name']}-v{entry['api_version']}", request, entry["api_version"])
            _learn(answer, live)

    return run


def _patch(value: Any, live: Dict[str, Any], topic: str, topic_id: uuid.UUID, group_prefix: str, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _patch(v, live, topic, topic_id, group_prefix, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_patch(v, live, topic, topic_id, group_prefix, key) for v in value]
    if value == topic:
        return live["topic"]
    if isinstance(value, str) and value.startswith(group_prefix):
        return live["group"]
    if value == topic_id:
        return live["topic_id"]
    if key == "member_id" and value:
        return live["member_id"]
    if key in ("generation_id", "generation_id_or_member_epoch") and value != -1:
        return live["generation_id"]
    if key == "producer_id" and value != -1:
        return live["producer_id"]
    if key == "producer_epoch" and value != -1:
        return live["producer_epoch"]
    if key == "records" and value:
        return _rebatch(value, live)
    return value


def _rebatch(raw: bytes, live: Dict[str, Any]) -> bytes:
    """The recorded batch again, with the live producer id and epoch (the records' bytes unchanged)."""
    decoded = decode_records(raw)
    first = decoded.batches[0]
    if first.producer_id == -1:
        return raw
    return encode_record_batch(
        list(decoded),
        codec=first.codec,
        producer_id=live["producer_id"],
        producer_epoch=live["producer_epoch"],
        base_sequence=first.base_sequence,
    )


def _learn(answer: Any, live: Dict[str, Any]) -> None:
    if answer is None:
        return
    for name in ("member_id", "generation_id", "producer_id", "producer_epoch"):
        value = getattr(answer, name, None)
        if value not in (None, "", -1):
            live[name] = value


# ------------------------------------------------------------------------------------ group coordinator

#: Session timeout of the scripted members (the brokers' minimum is lowered to 1000 ms for them).
GROUP_SESSION_MS = 1500
_PAUSE = 0.7  # between a blocking request and the one that releases it: more than the tolerance
_SILENT_GAP = 0.5  # between the silent member's last heartbeat and the other's rejoin


def _group_script(join_v: int, sync_v: int, heartbeat_v: int, commit_v: int, leave_v: int) -> Any:
    """Two members at one set of versions: join, late join, heartbeat and commit during the rebalance,
    the leader's assignments, a stale generation, then a silent member expelled at its session timeout."""

    def join_request(group: str, member_id: str) -> Any:
        return build(
            m.JoinGroupRequest,
            group_id=group,
            session_timeout_ms=GROUP_SESSION_MS,
            rebalance_timeout_ms=GROUP_SESSION_MS * 2,
            member_id=member_id,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b"\0\1"}],
        )

    def run(s: Session) -> None:
        topic = s.create_topic("topic")
        group = s.name("group")
        s.call("find-coordinator", build(m.FindCoordinatorRequest, key=group, key_type=0), 1)

        def join(who: str, label: str, member_id: str) -> None:
            s.send(label, join_request(group, member_id), join_v, conn=who)

        def joined(label: str) -> Any:
            answer = s.wait(label, timed=True)
            if answer is not None and answer.error_code == 79:  # MEMBER_ID_REQUIRED: rejoin with the id given
                conn = "a" if label.startswith("a-") else "b"
                join(conn, label + "-again", answer.member_id)
                return s.wait(label + "-again", timed=True)
            return answer

        def sync(who: str, label: str, member_id: str, generation: int, assignments: Dict[str, bytes]) -> None:
            s.send(
                label,
                build(
                    m.SyncGroupRequest,
                    group_id=group,
                    generation_id=generation,
                    member_id=member_id,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=[{"member_id": k, "assignment": v} for k, v in assignments.items()],
                ),
                sync_v,
                conn=who,
            )

        def heartbeat(who: str, label: str, member_id: str, generation: int) -> Any:
            s.send(
                label,
                build(m.HeartbeatRequest, group_id=group, generation_id=generation, member_id=member_id),
                heartbeat_v,
                conn=who,
            )
            return s.wait(label, timed=True)

        def commit(label: str, member_id: str, generation: int) -> Any:
            s.send(
                label,
                build(
                    m.OffsetCommitRequest,
                    group_id=group,
                    generation_id_or_member_epoch=generation,
                    member_id=member_id,
                    retention_time_ms=-1,
                    topics=[
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 3,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                ),
                commit_v,
                conn="a",
            )
            return s.wait(label, timed=True)

        join("a", "a-join-unknown-member", "nobody")
        s.wait("a-join-unknown-member", timed=True)
        # A alone: its join completes at once (no initial rebalance delay), it assigns itself.
        join("a", "a-join-1", "")
        first = joined("a-join-1")
        a, gen = first.member_id, first.generation_id
        sync("a", "a-sync-1", a, gen, {a: b"A1"})
        s.wait("a-sync-1", timed=True)
        heartbeat("a", "a-heartbeat-stable", a, gen)
        # B joins late: its join waits for A to rejoin; meanwhile A's heartbeat says a rebalance is on
        # and A's commit in the current generation is still taken.
        join("b", "b-join-1", "")
        if join_v >= 4:
            got = s.wait("b-join-1", timed=True)  # MEMBER_ID_REQUIRED at once
            b = got.member_id if got is not None else ""
            join("b", "b-join-1-again", b)
        time.sleep(_PAUSE)
        heartbeat("a", "a-heartbeat-rebalancing", a, gen)
        commit("a-commit-rebalancing", a, gen)
        join("a", "a-join-2", a)
        second = s.wait("a-join-2", timed=True)
        b_answer = s.wait("b-join-1-again" if join_v >= 4 else "b-join-1", timed=True)
        b = b_answer.member_id if b_answer is not None else ""
        gen2 = second.generation_id
        # B's SyncGroup waits for the leader's.
        sync("b", "b-sync-2", b, gen2, {})
        time.sleep(_PAUSE)
        sync("a", "a-sync-2", a, gen2, {a: b"A2", b: b"B2"})
        s.wait("a-sync-2", timed=True)
        s.wait("b-sync-2", timed=True)
        commit("a-commit-stale-generation", a, gen)
        commit("a-commit", a, gen2)
        heartbeat("a", "a-heartbeat-wrong-generation", a, gen2 + 1)
        heartbeat("b", "b-heartbeat-unknown-member", "nobody", gen2)
        heartbeat("b", "b-heartbeat-last", b, gen2)
        # B falls silent.  A, still heartbeating (its session ends well after B's), rejoins; the join
        # completes when B is expelled, its session over: about a session after its last heartbeat.
        time.sleep(_SILENT_GAP)
        heartbeat("a", "a-heartbeat-before-rejoin", a, gen2)
        join("a", "a-join-3", a)
        third = s.wait("a-join-3", timed=True)
        gen3 = third.generation_id if third is not None else -1
        heartbeat("b", "b-heartbeat-expelled", b, gen2)
        sync("a", "a-sync-3", a, gen3, {a: b"A3"})
        s.wait("a-sync-3", timed=True)
        s.call("describe-stable", build(m.DescribeGroupsRequest, groups=[group]), 0)
        if leave_v >= 3:
            leave = build(m.LeaveGroupRequest, group_id=group, members=[{"member_id": a}])
        else:
            leave = build(m.LeaveGroupRequest, group_id=group, member_id=a)
        s.call("a-leave", leave, leave_v, conn="a")
        s.call("describe-empty", build(m.DescribeGroupsRequest, groups=[group]), 0)
        s.call(
            "offsets-after",
            build(m.OffsetFetchRequest, group_id=group, topics=[{"name": topic, "partition_indexes": [0]}]),
            1,
        )

    return run


GROUP_SCENARIOS[:] = [
    Scenario("group-coordinator-v0", "3.9", _group_script(0, 0, 0, 2, 0)),
    Scenario("group-coordinator-newest", "3.9", _group_script(9, 5, 4, 9, 5)),
]
