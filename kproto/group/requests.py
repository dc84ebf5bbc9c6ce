"""The group API requests as plain Python values, field for field as the 0.9 wire messages.

The member machine (:mod:`kproto.group.member`) emits these, and the coordinator machine
(:meth:`kproto.group.coordinator.GroupCoordinator.handle`) accepts them, so the two can be wired
together in-process; a broker or client maps them one to one onto the generated wire classes.  Field
names follow protocol.md §2.6–2.9 (e.g. ``session_timeout`` is in milliseconds, as on the wire).
Opaque ``bytes`` fields (protocol metadata, member assignments) stay opaque here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

__all__ = [
    "GroupCoordinatorRequest",
    "JoinGroupProtocol",
    "JoinGroupRequest",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "HeartbeatRequest",
    "LeaveGroupRequest",
    "OffsetCommitPartition",
    "OffsetCommitTopic",
    "OffsetCommitRequest",
    "OffsetFetchTopic",
    "OffsetFetchRequest",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "GroupRequest",
]


@dataclass(frozen=True)
class GroupCoordinatorRequest:
    """GroupCoordinator v0 (key 10): which broker coordinates ``group_id``?  Sent to any broker."""

    group_id: str


@dataclass(frozen=True)
class JoinGroupProtocol:
    """One entry of JoinGroup's ``group_protocols``: an assignor name and its opaque metadata."""

    protocol_name: str
    protocol_metadata: bytes


@dataclass(frozen=True)
class JoinGroupRequest:
    """JoinGroup v0 (key 11).  ``member_id`` is ``""`` for a member that has none yet."""

    group_id: str
    session_timeout: int
    member_id: str
    protocol_type: str
    group_protocols: Tuple[JoinGroupProtocol, ...]


@dataclass(frozen=True)
class SyncGroupAssignment:
    """One entry of SyncGroup's ``group_assignment`` (only the leader sends entries)."""

    member_id: str
    member_assignment: bytes


@dataclass(frozen=True)
class SyncGroupRequest:
    """SyncGroup v0 (key 14)."""

    group_id: str
    generation_id: int
    member_id: str
    group_assignment: Tuple[SyncGroupAssignment, ...] = ()


@dataclass(frozen=True)
class HeartbeatRequest:
    """Heartbeat v0 (key 12)."""

    group_id: str
    group_generation_id: int
    member_id: str


@dataclass(frozen=True)
class LeaveGroupRequest:
    """LeaveGroup v0 (key 13)."""

    group_id: str
    member_id: str


@dataclass(frozen=True)
class OffsetCommitPartition:
    """One partition of an OffsetCommit request."""

    partition: int
    offset: int
    metadata: Optional[str] = ""


@dataclass(frozen=True)
class OffsetCommitTopic:
    """One topic of an OffsetCommit request."""

    topic: str
    partitions: Tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True)
class OffsetCommitRequest:
    """OffsetCommit v2 (key 8).  Generation −1 and member ``""`` mean "not using group management"."""

    group_id: str
    group_generation_id: int
    member_id: str
    retention_time: int
    topics: Tuple[OffsetCommitTopic, ...]


@dataclass(frozen=True)
class OffsetFetchTopic:
    """One topic of an OffsetFetch request."""

    topic: str
    partitions: Tuple[int, ...]


@dataclass(frozen=True)
class OffsetFetchRequest:
    """OffsetFetch v1 (key 9).  An empty ``topics`` asks for every offset of the group (0.9.0)."""

    group_id: str
    topics: Tuple[OffsetFetchTopic, ...]


@dataclass(frozen=True)
class DescribeGroupsRequest:
    """DescribeGroups v0 (key 15)."""

    group_ids: Tuple[str, ...]


@dataclass(frozen=True)
class ListGroupsRequest:
    """ListGroups v0 (key 16): an empty body."""


#: Every request the group coordinator answers.
GroupRequest = Union[
    JoinGroupRequest,
    SyncGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
]
