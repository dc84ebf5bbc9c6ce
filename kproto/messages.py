"""Every message class of the 0.8/0.9 protocol, generated from ``specs/``.

``<ApiName>Request`` / ``<ApiName>Response`` for the 17 APIs, the frame headers, and the consumer
protocol's embedded schemas.  Nested structs are attributes of their message class
(``ProduceRequest.TopicProduceData.PartitionProduceData``).
"""

from kproto._generated.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kproto._generated.controlled_shutdown import ControlledShutdownRequest, ControlledShutdownResponse
from kproto._generated.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from kproto._generated.fetch import FetchRequest, FetchResponse
from kproto._generated.group_coordinator import GroupCoordinatorRequest, GroupCoordinatorResponse
from kproto._generated.headers import RequestHeader, ResponseHeader
from kproto._generated.heartbeat import HeartbeatRequest, HeartbeatResponse
from kproto._generated.join_group import JoinGroupRequest, JoinGroupResponse
from kproto._generated.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from kproto._generated.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kproto._generated.list_groups import ListGroupsRequest, ListGroupsResponse
from kproto._generated.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kproto._generated.metadata import MetadataRequest, MetadataResponse
from kproto._generated.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kproto._generated.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from kproto._generated.produce import ProduceRequest, ProduceResponse
from kproto._generated.stop_replica import StopReplicaRequest, StopReplicaResponse
from kproto._generated.sync_group import SyncGroupRequest, SyncGroupResponse
from kproto._generated.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from kproto.message_base import Message, Struct

__all__ = [
    "ConsumerProtocolAssignment", "ConsumerProtocolSubscription",
    "ControlledShutdownRequest", "ControlledShutdownResponse",
    "DescribeGroupsRequest", "DescribeGroupsResponse",
    "FetchRequest", "FetchResponse",
    "GroupCoordinatorRequest", "GroupCoordinatorResponse",
    "HeartbeatRequest", "HeartbeatResponse",
    "JoinGroupRequest", "JoinGroupResponse",
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "LeaveGroupRequest", "LeaveGroupResponse",
    "ListGroupsRequest", "ListGroupsResponse",
    "ListOffsetsRequest", "ListOffsetsResponse",
    "Message",
    "MetadataRequest", "MetadataResponse",
    "OffsetCommitRequest", "OffsetCommitResponse",
    "OffsetFetchRequest", "OffsetFetchResponse",
    "ProduceRequest", "ProduceResponse",
    "RequestHeader", "ResponseHeader",
    "StopReplicaRequest", "StopReplicaResponse",
    "Struct",
    "SyncGroupRequest", "SyncGroupResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
]
