"""Consumer group membership: Kafka's classic group protocol (0.9 to 4.x) as two sans-I/O state machines
with their assignors, and the broker side of the KIP-848 consumer group protocol.

Both machines speak the generated wire messages of :mod:`kproto.messages` in the versions they name
(``kproto.group.member.REQUEST_VERSIONS``, ``kproto.group.coordinator.SERVED_VERSIONS``), so a socket
carries what they produce as it is.

* :mod:`kproto.group.assignors` — the ``range`` and ``roundrobin`` assignors of the 0.9 Java consumer;
* :mod:`kproto.group.coordinator` — the broker-side group coordinator (:class:`GroupCoordinator`);
* :mod:`kproto.group.member` — the client-side group member (:class:`GroupMember`);
* :mod:`kproto.group.offset_store` — committed offsets per group, with retention;
* :mod:`kproto.group.consumer_codec` — subscription (v0-v3)/assignment bytes of the consumer protocol;
* :mod:`kproto.group.loopback` — wires members to a coordinator in-process, for tests and demos;
* :mod:`kproto.group.consumer_group` — the KIP-848 coordinator (:class:`ConsumerGroupCoordinator`,
  ConsumerGroupHeartbeat), its rules in :mod:`kproto.group.consumer_group_rules` and its server-side
  ``uniform`` and ``range`` assignors in :mod:`kproto.group.server_assignors`;
* :mod:`kproto.group.heartbeat_member` — the client-side KIP-848 member (:class:`HeartbeatMember`), which
  reconciles the coordinator's assignments.
"""

from kproto import ErrorCode
from kproto.group.assignors import ASSIGNORS, assign_range, assign_roundrobin, java_string_order
from kproto.group.consumer_group import ConsumerGroupConfig, ConsumerGroupCoordinator
from kproto.group.coordinator import CoordinatorConfig, GroupCoordinator, GroupState, Reply
from kproto.group.heartbeat_member import HeartbeatMember, HeartbeatMemberConfig
from kproto.group.member import GroupMember, MemberConfig, MemberState

__all__ = [
    "ASSIGNORS",
    "assign_range",
    "assign_roundrobin",
    "java_string_order",
    "ErrorCode",
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "CoordinatorConfig",
    "GroupCoordinator",
    "GroupState",
    "Reply",
    "GroupMember",
    "HeartbeatMember",
    "HeartbeatMemberConfig",
    "MemberConfig",
    "MemberState",
]
