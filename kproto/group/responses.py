"""The group API responses as plain Python values, field for field as the 0.9 wire messages.

The coordinator machine produces these (inside :class:`kproto.group.coordinator.Reply`) and the member
machine consumes them.  Field names follow protocol.md §2.6–2.9 so that a broker can map each one onto
its generated wire class without translation; ``error_code`` is an ``int`` (an
:class:`kproto.ErrorCode`, which is an ``IntEnum``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

__all__ = [
    "GroupCoordinatorResponse",
    "JoinGroupMember",
    "JoinGroupResponse",
    "SyncGroupResponse",
    "HeartbeatResponse",
    "LeaveGroupResponse",
    "OffsetCommitPartitionResponse",
    "OffsetCommitTopicResponse",
    "OffsetCommitResponse",
    "OffsetFetchPartitionResponse",
    "OffsetFetchTopicResponse",
    "OffsetFetchResponse",
    "DescribedMember",
    "DescribedGroup",
    "DescribeGroupsResponse",
    "ListedGroup",
    "ListGroupsResponse",
    "GroupResponse",
]


@dataclass(frozen=True)
class GroupCoordinatorResponse:
    """GroupCoordinator v0.  On error the broker still sends a node, written as (−1, "", −1)."""

    error_code: int
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True)
class JoinGroupMember:
    """One entry of the leader's JoinGroup ``members``: a member and its metadata for the chosen protocol."""

    member_id: str
    member_metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    """JoinGroup v0.  ``members`` is non-empty only in the leader's response."""

    error_code: int
    generation_id: int
    group_protocol: str
    leader_id: str
    member_id: str
    members: Tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResponse:
    """SyncGroup v0: the caller's own assignment (opaque bytes)."""

    error_code: int
    member_assignment: bytes = b""


@dataclass(frozen=True)
class HeartbeatResponse:
    """Heartbeat v0."""

    error_code: int


@dataclass(frozen=True)
class LeaveGroupResponse:
    """LeaveGroup v0."""

    error_code: int


@dataclass(frozen=True)
class OffsetCommitPartitionResponse:
    """One partition of an OffsetCommit response."""

    partition: int
    error_code: int


@dataclass(frozen=True)
class OffsetCommitTopicResponse:
    """One topic of an OffsetCommit response."""

    topic: str
    partition_responses: Tuple[OffsetCommitPartitionResponse, ...]


@dataclass(frozen=True)
class OffsetCommitResponse:
    """OffsetCommit v0–v2 (identical layout)."""

    responses: Tuple[OffsetCommitTopicResponse, ...]


@dataclass(frozen=True)
class OffsetFetchPartitionResponse:
    """One partition of an OffsetFetch response; offset −1 and metadata "" when nothing is committed."""

    partition: int
    offset: int
    metadata: Optional[str]
    error_code: int


@dataclass(frozen=True)
class OffsetFetchTopicResponse:
    """One topic of an OffsetFetch response."""

    topic: str
    partition_responses: Tuple[OffsetFetchPartitionResponse, ...]


@dataclass(frozen=True)
class OffsetFetchResponse:
    """OffsetFetch v0/v1 (identical layout)."""

    responses: Tuple[OffsetFetchTopicResponse, ...]


@dataclass(frozen=True)
class DescribedMember:
    """One member in DescribeGroups; metadata and assignment are empty unless the group is Stable."""

    member_id: str
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    """One group in DescribeGroups; ``state`` is one of the §6.1 names, ``protocol`` set only when Stable."""

    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: Tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class DescribeGroupsResponse:
    """DescribeGroups v0."""

    groups: Tuple[DescribedGroup, ...]


@dataclass(frozen=True)
class ListedGroup:
    """One group in ListGroups."""

    group_id: str
    protocol_type: str


@dataclass(frozen=True)
class ListGroupsResponse:
    """ListGroups v0."""

    error_code: int
    groups: Tuple[ListedGroup, ...] = ()


#: Every response the group coordinator produces.
GroupResponse = Union[
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
]
