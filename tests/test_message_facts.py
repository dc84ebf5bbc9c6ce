"""kproto.message_facts: the entity walk, an exchange's summary and the
mock broker's generic error responses (kproto.broker.faults), all driven by the specs' entity types."""

from __future__ import annotations

import os
import sys

import pytest

import kproto
from kproto.apis import APIS
from kproto.broker.faults import error_response
from kproto.message_facts import ERROR, GROUP, PARTITION, TOPIC, entities, message_facts, scope_tree
from kproto.messages import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FetchRequest,
    GroupCoordinatorRequest,
    OffsetFetchRequest,
    ProduceRequest,
    ProduceResponse,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

P, R = ProduceRequest, ProduceResponse


def _produce():
    req = P(
        acks=1,
        timeout_ms=100,
        topic_data=[
            P.TopicProduceData(
                name="a",
                partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=0, records=b""),
                    P.TopicProduceData.PartitionProduceData(index=3, records=b""),
                ],
            ),
            P.TopicProduceData(
                name="b", partition_data=[P.TopicProduceData.PartitionProduceData(index=1, records=b"")]
            ),
        ],
    )
    resp = R(
        responses=[
            R.TopicProduceResponse(
                name="a",
                partition_responses=[
                    R.TopicProduceResponse.PartitionProduceResponse(index=0, error_code=0),
                    R.TopicProduceResponse.PartitionProduceResponse(index=3, error_code=6),
                ],
            ),
            R.TopicProduceResponse(
                name="b", partition_responses=[R.TopicProduceResponse.PartitionProduceResponse(index=1, error_code=0)]
            ),
        ]
    )
    return req, resp


def test_entities_carry_their_topic_and_partition():
    _, resp = _produce()
    errors = [(e.topic, e.partition, e.value) for e in entities(resp) if e.kind == ERROR]
    assert errors == [("a", 0, 0), ("a", 3, 6), ("b", 1, 0)]
    assert {e.path for e in entities(resp) if e.kind == PARTITION} == {"responses[].partition_responses[].index"}


def test_exchange_facts_of_a_produce():
    req, resp = _produce()
    facts = message_facts(req, resp)
    assert (facts.topics, facts.partitions, facts.groups) == ({"a", "b"}, {0, 1, 3}, set())
    assert facts.error_code is None
    assert facts.partition_errors == [{"topic": "a", "partition": 3, "error_code": 6}]
    assert facts.error_codes == {6}


def test_arrays_of_partition_numbers_and_group_ids_are_facts_too():
    req = OffsetFetchRequest(
        group_id="g", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[4, 5])]
    )
    assert message_facts(req, None).partitions == {4, 5}
    assert message_facts(req, None).groups == {"g"}
    described = DescribeGroupsResponse(groups=[DescribeGroupsResponse.DescribedGroup(error_code=16, group_id="x")])
    facts = message_facts(DescribeGroupsRequest(groups=["x", "y"]), described)
    assert facts.groups == {"x", "y"}
    assert facts.partition_errors == [{"topic": None, "partition": None, "error_code": 16}]


def test_coordinator_key_is_a_group_only_for_group_lookups():
    assert message_facts(GroupCoordinatorRequest(key="g"), None).groups == {"g"}
    if any(info.name == "key_type" for info in GroupCoordinatorRequest.FIELDS):
        assert message_facts(GroupCoordinatorRequest(key="txn", key_type=1), None).groups == set()


def test_a_version_skips_fields_it_does_not_carry():
    fields = {info.name: info for info in FetchRequest.FIELDS}
    lo, hi = fields["topics"].versions
    msg = FetchRequest(replica_id=-1, topics=[FetchRequest.FetchTopic(topic="t", partitions=[])])
    assert {e.kind for e in entities(msg, lo)} >= {TOPIC}
    assert not [e for e in entities(msg, hi + 1)]  # no field of the message exists in a later version


def test_scope_tree_nests_groups_topics_partitions():
    req, _ = _produce()
    tree = scope_tree(req)
    assert [(t.kind, t.value, [(p.kind, p.value) for p in t.children]) for t in tree.children] == [
        (TOPIC, "a", [(PARTITION, 0), (PARTITION, 3)]),
        (TOPIC, "b", [(PARTITION, 1)]),
    ]
    grouped = scope_tree(DescribeGroupsRequest(groups=["x", "y"]))
    assert [(s.kind, s.value) for s in grouped.children] == [(GROUP, "x"), (GROUP, "y")]


def test_error_response_answers_every_partition_of_a_produce():
    req, _ = _produce()
    resp = error_response(0, req, 6)
    got = [(t.name, p.index, p.error_code) for t in resp.responses for p in t.partition_responses]
    assert got == [("a", 0, 6), ("a", 3, 6), ("b", 1, 6)]


def _sample_requests():
    from kproto.reference import schema

    for spec in schema().messages():
        if spec.kind == "request":
            hi = spec.valid_versions.hi
            yield pytest.param(spec, hi, id=f"{spec.name}_v{hi}")


@pytest.mark.parametrize("spec,version", list(_sample_requests()))
def test_error_response_for_every_api(spec, version):
    """Every api gets an error response that encodes in the request's version, with the code in every
    errorCode field and only topics/partitions/groups the request named."""
    from fuzz.make_seeds import sample_message

    req = sample_message(spec, version)
    resp = error_response(spec.api_key, req, 42, version)
    assert type(resp) is APIS[spec.api_key].response
    frame = kproto.encode_response(resp, version, 1)
    _, back = kproto.decode_response(frame, spec.api_key, version)
    asked = message_facts(req, None, version)
    answered = message_facts(None, back, version)
    assert answered.topics <= asked.topics and answered.groups <= asked.groups
    assert answered.partitions <= asked.partitions
    codes = [e.value for e in entities(back, version) if e.kind == ERROR]
    assert all(code == 42 for code in codes)
