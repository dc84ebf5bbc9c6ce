"""Fault injection for the mock broker: per api key, answer an error code, delay, or drop the connection.

A :class:`Fault` applies to the next ``times`` requests of one api (``times=None``: until removed).
Faults of one api are used in the order they were injected.  :class:`FaultPlan` is shared between the
thread that injects and the broker's event loop, hence the lock.

:func:`error_response` builds the response a broker sends when ``code`` applies to everything a request
asks about: every partition (Produce, Fetch, ListOffsets, OffsetCommit, OffsetFetch), every topic
(Metadata), every group (DescribeGroups), or the request as a whole (the group APIs).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

from kproto.apis import APIS
from kproto.message_base import Message
from kproto.messages import (
    DescribeGroupsResponse,
    FetchResponse,
    GroupCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    ProduceResponse,
    SyncGroupResponse,
)

__all__ = ["Fault", "FaultPlan", "error_response"]


@dataclass
class Fault:
    """What to do to requests of ``api_key``: wait ``delay`` seconds, then drop the connection
    (``drop``) or answer ``error`` (an error code) instead of handling the request."""

    api_key: int
    error: Optional[int] = None
    delay: float = 0.0
    drop: bool = False
    times: Optional[int] = 1


class FaultPlan:
    """The faults waiting to fire, per api key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: Dict[int, List[Fault]] = {}

    def inject(
        self,
        api: Union[int, str],
        *,
        error: Optional[int] = None,
        delay: float = 0.0,
        drop: bool = False,
        times: Optional[int] = 1,
    ) -> Fault:
        """Add a fault for ``api`` (an api key or a name such as ``"Produce"``)."""
        info = APIS[api]
        if error is None and not drop and delay <= 0:
            raise ValueError("a fault needs an error, a delay or drop=True")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (or None for every request)")
        fault = Fault(info.api_key, None if error is None else int(error), float(delay), drop, times)
        with self._lock:
            self._faults.setdefault(info.api_key, []).append(fault)
        return fault

    def take(self, api_key: int) -> Optional[Fault]:
        """The fault that applies to the next request of ``api_key``, counted as used."""
        with self._lock:
            faults = self._faults.get(api_key)
            if not faults:
                return None
            fault = faults[0]
            if fault.times is not None:
                fault.times -= 1
                if fault.times == 0:
                    faults.pop(0)
            return fault

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults.clear()


def _per_partition(topics: Any, name_attr: str, partitions_attr: str, make: Callable[[Any], Any]) -> list:
    return [(getattr(t, name_attr), [make(p) for p in getattr(t, partitions_attr)]) for t in topics]


def error_response(api_key: int, request: Message, code: int) -> Message:
    """The response to ``request`` in which ``code`` applies everywhere (see the module docstring)."""
    build = _BUILDERS.get(api_key)
    if build is None:
        raise ValueError(f"no error response for api key {api_key}")
    return build(request, code)


def _produce(req: Any, code: int) -> Message:
    T, P = ProduceResponse.TopicProduceResponse, ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    return ProduceResponse(responses=[
        T(name=name, partition_responses=parts) for name, parts in _per_partition(
            req.topic_data, "name", "partition_data", lambda p: P(index=p.index, error_code=code, base_offset=-1))
    ])


def _fetch(req: Any, code: int) -> Message:
    T, P = FetchResponse.FetchableTopicResponse, FetchResponse.FetchableTopicResponse.PartitionData
    return FetchResponse(responses=[
        T(topic=name, partitions=parts) for name, parts in _per_partition(
            req.topics, "topic", "partitions",
            lambda p: P(partition_index=p.partition, error_code=code, high_watermark=-1, records=b""))
    ])


def _list_offsets(req: Any, code: int) -> Message:
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    return ListOffsetsResponse(topics=[
        T(name=name, partitions=parts) for name, parts in _per_partition(
            req.topics, "name", "partitions", lambda p: P(partition_index=p.partition_index, error_code=code))
    ])


def _metadata(req: Any, code: int) -> Message:
    T = MetadataResponse.MetadataResponseTopic
    return MetadataResponse(brokers=[], topics=[T(error_code=code, name=t.name, partitions=[]) for t in req.topics])


def _offset_commit(req: Any, code: int) -> Message:
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    return OffsetCommitResponse(topics=[
        T(name=name, partitions=parts) for name, parts in _per_partition(
            req.topics, "name", "partitions", lambda p: P(partition_index=p.partition_index, error_code=code))
    ])


def _offset_fetch(req: Any, code: int) -> Message:
    T = OffsetFetchResponse.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    return OffsetFetchResponse(topics=[
        T(name=t.name, partitions=[
            P(partition_index=i, committed_offset=-1, metadata="", error_code=code) for i in t.partition_indexes])
        for t in req.topics
    ])


def _describe_groups(req: Any, code: int) -> Message:
    G = DescribeGroupsResponse.DescribedGroup
    return DescribeGroupsResponse(groups=[
        G(error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="") for g in req.groups])


_BUILDERS: Dict[int, Callable[[Any, int], Message]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: lambda req, code: GroupCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1),
    11: lambda req, code: JoinGroupResponse(
        error_code=code, generation_id=0, protocol_name="", leader="", member_id=req.member_id),
    12: lambda req, code: HeartbeatResponse(error_code=code),
    13: lambda req, code: LeaveGroupResponse(error_code=code),
    14: lambda req, code: SyncGroupResponse(error_code=code, assignment=b""),
    15: _describe_groups,
    16: lambda req, code: ListGroupsResponse(error_code=code, groups=[]),
}
