"""Requests recorded from real clients at their defaults (tests/golden/clients, refreshed by hand with
tests/golden/record_clients.py): kproto decodes every frame and writes it back byte for byte, and the
values that identify the conversation (client id, topic, group, member id) come out as the clients set
them. kafka-python 3.x decodes the same frames as an independent reader of the same bytes.

No network and no client runs here: the frames are committed files.
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from pathlib import Path

import pytest

import kproto

GOLDEN = Path(__file__).parent / "golden" / "clients"
INDEX = json.loads((GOLDEN / "index.json").read_text(encoding="utf-8"))
FRAMES = INDEX["frames"]
TOPIC = INDEX["topic"]
TOPIC_ID = uuid.UUID(INDEX["topic_id"])

# What each client calls itself at its defaults (producer and consumer instances may differ).
CLIENT_IDS = {
    "kafka-python": re.compile(r"^kafka-python-(producer-\d+|\d+\.\d+\.\d+)$"),
    "librdkafka": re.compile(r"^rdkafka$"),
    "aiokafka": re.compile(r"^aiokafka-(producer-\d+|\d+\.\d+\.\d+)$"),
}
# The recording broker hands out member ids as "<client id>-<uuid4>", as Kafka's brokers do.
MEMBER_ID = re.compile(r"^(?P<client_id>.+)-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
REQUIRED_APIS = {
    "ApiVersions",
    "Metadata",
    "Produce",
    "Fetch",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "OffsetCommit",
    "OffsetFetch",
}
GROUP_APIS = {"JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "LeaveGroup"}


def frame_id(entry):
    return entry["file"]


def read(entry) -> bytes:
    return (GOLDEN / entry["file"]).read_bytes()


def group_of(entry) -> str:
    return INDEX["group_prefix"] + entry["client"]


def test_every_client_sent_every_required_request():
    for client in CLIENT_IDS:
        sent = {e["api_name"] for e in FRAMES if e["client"] == client}
        assert REQUIRED_APIS <= sent, (client, sorted(REQUIRED_APIS - sent))


def test_the_frames_use_flexible_versions_where_the_clients_do():
    """At their defaults the modern clients speak flexible versions (KIP-482) for most requests."""
    flexible = [
        e
        for e in FRAMES
        if kproto.APIS[e["api_key"]].request.FLEXIBLE_VERSIONS is not None
        and e["api_version"] >= kproto.APIS[e["api_key"]].request.FLEXIBLE_VERSIONS[0]
    ]
    assert {e["client"] for e in flexible} >= {"kafka-python", "librdkafka"}


@pytest.mark.parametrize("entry", FRAMES, ids=frame_id)
def test_kproto_decodes_and_re_encodes_each_frame_byte_for_byte(entry):
    frame = read(entry)
    assert len(frame) == entry["size"] and struct.unpack_from(">i", frame)[0] == len(frame) - 4
    header, msg = kproto.decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        entry["api_key"],
        entry["api_version"],
        entry["correlation_id"],
        entry["client_id"],
    )
    assert type(msg) is kproto.APIS[entry["api_key"]].request
    again = kproto.encode_request(msg, header.api_version, header.correlation_id, header.client_id)
    assert again == frame
    check_key_fields(entry, header, msg)


def check_key_fields(entry, header, msg):
    assert CLIENT_IDS[entry["client"]].match(header.client_id), header.client_id
    name, version = entry["api_name"], entry["api_version"]
    if name == "ApiVersions" and version >= 3:
        assert msg.client_software_name and msg.client_software_version
    if name == "Metadata":  # a bootstrap request (no topic, or all) or one for the topic
        assert msg.topics is None or [t.name for t in msg.topics] in ([], [TOPIC])
    if name == "Produce":
        [topic] = msg.topic_data
        assert topic_ref(topic) in (TOPIC, TOPIC_ID)
        [part] = topic.partition_data
        assert part.index == 0 and bytes(part.records)[16] == 2  # one RecordBatch, magic 2
    if name == "Fetch":
        [topic] = msg.topics
        assert topic_ref(topic) in (TOPIC, TOPIC_ID)
        assert [p.partition for p in topic.partitions] == [0]
    if name == "FindCoordinator":
        keys = msg.coordinator_keys if version >= 4 else [msg.key]
        assert keys == [group_of(entry)]
    if name == "OffsetFetch":
        groups = [g.group_id for g in msg.groups] if version >= 8 else [msg.group_id]
        assert groups == [group_of(entry)]
    if name in GROUP_APIS:
        assert msg.group_id == group_of(entry)
        member_id = msg.members[0].member_id if name == "LeaveGroup" and version >= 3 else msg.member_id
        if name == "JoinGroup" and not member_id:
            return  # the first join: the member has no id yet
        match = MEMBER_ID.match(member_id)
        assert match and match["client_id"] == header.client_id, member_id
    if name == "JoinGroup":
        assert msg.protocol_type == "consumer" and msg.protocols
    if name == "OffsetCommit":
        assert [t.name for t in msg.topics] == [TOPIC]
        [part] = msg.topics[0].partitions
        assert part.partition_index == 0 and 1 <= part.committed_offset <= len(CLIENT_IDS)  # one record each


def topic_ref(topic):
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    return name if name else topic.topic_id


def test_each_client_asks_for_the_topics_metadata():
    for client in CLIENT_IDS:
        asked = [
            kproto.decode_request(read(e))[1].topics
            for e in FRAMES
            if e["client"] == client and e["api_name"] == "Metadata"
        ]
        assert any(topics and topics[0].name == TOPIC for topics in asked), client


def test_each_client_joins_first_without_a_member_id_then_with_the_one_it_was_given():
    for client in CLIENT_IDS:
        joins = [
            kproto.decode_request(read(e))[1] for e in FRAMES if e["client"] == client and e["api_name"] == "JoinGroup"
        ]
        assert [bool(j.member_id) for j in joins] == [False, True], client


@pytest.mark.parametrize("entry", FRAMES, ids=frame_id)
def test_kafka_python_reads_the_same_header_and_group_fields(entry, kafka_python_requests):
    """An independent decoder of the same bytes agrees on the header and the identifying fields."""
    frame = read(entry)
    cls = kafka_python_requests[entry["api_key"]]
    theirs = cls.decode(frame, version=entry["api_version"], header=True, framed=True)
    _, ours = kproto.decode_request(frame)
    assert theirs.header.client_id == entry["client_id"]
    assert theirs.header.correlation_id == entry["correlation_id"]
    for attr in (
        "group_id",
        "member_id",
        "generation_id",
        "protocol_type",
        "session_timeout_ms",
        "acks",
        "timeout_ms",
        "max_wait_ms",
        "min_bytes",
        "isolation_level",
        "transactional_id",
    ):
        if (
            hasattr(ours, attr)
            and attr in type(theirs)._struct.fields
            and type(theirs)._struct.fields[attr].for_version_q(entry["api_version"])
        ):
            assert getattr(ours, attr) == getattr(theirs, attr), attr


@pytest.fixture(scope="module")
def kafka_python_requests():
    from test_versions import kafka_python_requests as request_classes

    return request_classes()
