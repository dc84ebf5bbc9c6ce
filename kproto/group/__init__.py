"""Consumer group membership (Kafka's classic group protocol, 0.9 to 4.x): assignors and two sans-I/O state machines.

Both machines speak the generated wire messages of :mod:`kproto.messages` in the versions they name
(``kproto.group.member.REQUEST_VERSIONS``, ``kproto.group.coordinator.SERVED_VERSIONS``), so a socket
carries what they produce as it is.

* :mod:`kproto.group.assignors` — the ``range`` and ``roundrobin`` assignors of the 0.9 Java consumer;
* :mod:`kproto.group.coordinator` — the broker-side group coordinator (:class:`GroupCoordinator`);
* :mod:`kproto.group.member` — the client-side group member (:class:`GroupMember`);
* :mod:`kproto.group.offset_store` — committed offsets per group, with retention;
* :mod:`kproto.group.consumer_codec` — subscription (v0-v3)/assignment bytes of the consumer protocol;
* :mod:`kproto.group.loopback` — wires members to a coordinator in-process, for tests and demos.
"""

from kproto import ErrorCode
from kproto.group.assignors import ASSIGNORS, assign_range, assign_roundrobin, java_string_order
from kproto.group.coordinator import CoordinatorConfig, GroupCoordinator, GroupState, Reply
from kproto.group.member import GroupMember, MemberConfig, MemberState

__all__ = [
    "ASSIGNORS",
    "assign_range",
    "assign_roundrobin",
    "java_string_order",
    "ErrorCode",
    "CoordinatorConfig",
    "GroupCoordinator",
    "GroupState",
    "Reply",
    "GroupMember",
    "MemberConfig",
    "MemberState",
]
