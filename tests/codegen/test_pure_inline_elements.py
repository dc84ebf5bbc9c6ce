"""The pure-Python decoders read each element of an array of structs inline, in the array's loop; the
compiled build calls the element's own decoder instead.  The two shapes must agree on everything: values,
kept unknown tags, and for bad input the error class, its offset and its field path (the fuzz oracles
compare class and offset only).  Checked twin against twin on nested, flexible and classic bodies, cut
short at every byte and with every byte overwritten by a few hostile values.
"""

from __future__ import annotations

import importlib
import uuid
from types import FunctionType

import pytest

import kproto.messages as km
from kproto.errors import KprotoError

pytestmark = pytest.mark.compiled_only  # under KPROTO_PURE=1 both twins are the same code


def _bodies():
    commit = {
        "group_id": "g",
        "generation_id_or_member_epoch": 3,
        "member_id": "m",
        "group_instance_id": None,
        "topics": [
            {
                "name": f"t{t}",
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 100 + p,
                        "committed_leader_epoch": 2,
                        "committed_metadata": ["", None, "meta"][p % 3],
                    }
                    for p in range(3)
                ],
            }
            for t in range(2)
        ],
    }
    yield km.OffsetCommitRequest, 9, km.OffsetCommitRequest.from_dict(commit)
    yield (
        km.OffsetCommitRequest,
        2,
        km.OffsetCommitRequest.from_dict(
            dict(
                commit,
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[
                    {
                        "name": "t",
                        "partitions": [{"partition_index": 1, "committed_offset": 5, "committed_metadata": "x"}],
                    }
                ],
            )
        ),
    )
    partitions = [
        {
            "partition_index": p,
            "error_code": 0,
            "high_watermark": 10,
            "last_stable_offset": 10,
            "log_start_offset": 0,
            "preferred_read_replica": -1,
            "records": b"\x00" * 5,
            "aborted_transactions": [{"producer_id": 7, "first_offset": 3}] if p else [],
            "current_leader": {"leader_id": 2, "leader_epoch": 4} if p else {"leader_id": -1, "leader_epoch": -1},
        }
        for p in range(2)
    ]
    fetch = km.FetchResponse.from_dict(
        {"session_id": 1, "responses": [{"topic_id": uuid.UUID(int=5), "partitions": partitions}]}
    )
    fetch.responses[0].partitions[0].unknown_tagged_fields = [(9, b"\x01\x02")]  # kept by an inlined element
    yield km.FetchResponse, 16, fetch
    metadata = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "name": "t",
                "topic_id": uuid.UUID(int=1),
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
            }
        ],
    }
    yield km.MetadataResponse, 12, km.MetadataResponse.from_dict(metadata)


def _outcome(cls, data, version):
    try:
        return ("ok", cls.decode(data, version).to_dict())
    except KprotoError as exc:
        return ("error", type(exc).__name__, getattr(exc, "offset", None), getattr(exc, "path", None))


@pytest.mark.parametrize(
    "cls,version,msg", [pytest.param(*case, id=f"{case[0].__name__}-v{case[1]}") for case in _bodies()]
)
def test_inline_elements_agree_with_the_element_decoders(cls, version, msg):
    # The pure target of the class's module: a module of its own beside the compiled target (the bases are
    # the compiled build's, which both targets share).
    pure_cls = getattr(importlib.import_module("kproto._generated." + cls.__module__.rpartition(".")[2]), cls.__name__)
    assert cls.__module__.startswith("kproto._compiled.")
    assert all(type(fn) is FunctionType for fn in pure_cls._DECODERS.values())
    body = msg.encode(version)
    assert _outcome(pure_cls, body, version) == _outcome(cls, body, version) == ("ok", msg.to_dict())
    inputs = [body[:cut] for cut in range(len(body))]
    inputs += [body[:i] + bytes([b]) + body[i + 1 :] for i in range(len(body)) for b in (0x00, 0x7F, 0x80, 0xFF)]
    errors = 0
    for data in inputs:
        compiled, pure = _outcome(cls, data, version), _outcome(pure_cls, data, version)
        assert pure == compiled, data.hex()
        errors += compiled[0] == "error"
    assert errors > len(body)  # the nested paths were really exercised, not only accepted
