"""The embedded consumer protocol (docs/protocol-notes.md, "The consumer protocol") as plain values, on top of
kproto's generated classes.

:class:`ConsumerProtocolCodec` turns a subscription (a list of topics) into JoinGroup protocol metadata
and an assignment (``{topic: [partitions]}``) into SyncGroup member-assignment bytes, and back.  Both
byte strings are an int16 version followed by that version's body (``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment`` in :mod:`kproto.messages`).  The subscription grew over versions: v1
adds the partitions the member owns (for cooperative rebalancing), v2 the generation they were owned
in, v3 the member's rack; assignments kept the v0 layout.

Two reading rules, because two are needed:

* :meth:`ConsumerProtocolCodec.decode_subscription` and ``decode_assignment`` follow 0.9.0's rule: a
  negative version is an error, any other is read as v0 and trailing bytes are ignored.  Every version
  starts with the v0 fields, so this reads the topics of any member, past and future, which is all the
  range and roundrobin assignors need.
* :meth:`ConsumerProtocolCodec.decode_subscription_details` follows today's Java rule: the version is
  read, capped at the newest one known (v3), and the body is read in full at that version; a body that
  does not fit is a :class:`~kproto.errors.DecodeError`.

Empty assignment bytes (what the coordinator gives a member the leader left out) mean "no partitions".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from kproto.errors import DecodeError
from kproto.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

__all__ = ["ConsumerProtocolCodec", "ConsumerSubscription", "SUBSCRIPTION_VERSIONS"]

_VERSION = struct.Struct(">h")

#: The subscription versions this codec writes and reads in full.
SUBSCRIPTION_VERSIONS = (0, 3)


@dataclass(frozen=True)
class ConsumerSubscription:
    """Everything a subscription carries; fields newer than ``version`` hold their defaults."""

    version: int
    topics: Tuple[str, ...]
    user_data: Optional[bytes] = None
    #: v1+: topic → partitions the member owned when it joined
    owned_partitions: Mapping[str, Tuple[int, ...]] = field(default_factory=dict)
    #: v2+: the generation those partitions were owned in (−1: none)
    generation_id: int = -1
    #: v3+: the member's rack (``client.rack``)
    rack_id: Optional[str] = None


def _body_start(data: bytes, what: str) -> int:
    if len(data) < _VERSION.size:
        raise DecodeError(f"{what}: need 2 bytes for the version, {len(data)} left", 0, "version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise DecodeError(f"{what}: negative version {version}", 0, "version")
    return _VERSION.size


class ConsumerProtocolCodec:
    """Encodes and decodes consumer-protocol subscriptions and assignments (version 0, empty user data)."""

    def encode_subscription(self, topics: Sequence[str]) -> bytes:
        """Protocol metadata for a JoinGroup entry subscribing to ``topics`` (v0)."""
        return ConsumerProtocolSubscription(topics=list(topics)).encode_embedded(0)

    def encode_subscription_details(self, subscription: ConsumerSubscription) -> bytes:
        """Protocol metadata in ``subscription.version`` (0-3); fields that version lacks are left out."""
        version = subscription.version
        if not SUBSCRIPTION_VERSIONS[0] <= version <= SUBSCRIPTION_VERSIONS[1]:
            raise ValueError(f"consumer subscription version {version} is not one of 0-3")
        owned = [
            ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=list(ps))
            for t, ps in subscription.owned_partitions.items()
        ]
        message = ConsumerProtocolSubscription(
            topics=list(subscription.topics),
            user_data=subscription.user_data,
            owned_partitions=owned,
            generation_id=subscription.generation_id,
            rack_id=subscription.rack_id,
        )
        return message.encode_embedded(version)

    def decode_subscription(self, data: bytes) -> List[str]:
        """The topics of a member's protocol metadata."""
        data = bytes(data)
        start = _body_start(data, "ConsumerProtocolSubscription")
        subscription, _ = ConsumerProtocolSubscription.decode_from(data, start, len(data), 0)
        return list(subscription.topics)

    def decode_subscription_details(self, data: bytes) -> ConsumerSubscription:
        """Every field of a member's protocol metadata, read at its version (capped at v3)."""
        data = bytes(data)
        start = _body_start(data, "ConsumerProtocolSubscription")
        (written,) = _VERSION.unpack_from(data, 0)
        version = min(written, SUBSCRIPTION_VERSIONS[1])
        subscription, _ = ConsumerProtocolSubscription.decode_from(data, start, len(data), version)
        owned = (
            {entry.topic: tuple(entry.partitions) for entry in subscription.owned_partitions} if version >= 1 else {}
        )
        user_data = None if subscription.user_data is None else bytes(subscription.user_data)
        return ConsumerSubscription(
            version=version,
            topics=tuple(subscription.topics),
            user_data=user_data,
            owned_partitions=owned,
            generation_id=subscription.generation_id if version >= 2 else -1,
            rack_id=subscription.rack_id if version >= 3 else None,
        )

    def encode_assignment(self, assignment: Mapping[str, Sequence[int]]) -> bytes:
        """Member-assignment bytes for ``{topic: partitions}`` (topics in the mapping's order)."""
        parts = [
            ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=list(ps))
            for topic, ps in assignment.items()
        ]
        return ConsumerProtocolAssignment(assigned_partitions=parts).encode_embedded(0)

    def decode_assignment(self, data: bytes) -> Dict[str, List[int]]:
        """``{topic: partitions}`` from member-assignment bytes; empty bytes give ``{}``."""
        data = bytes(data)
        if not data:
            return {}
        start = _body_start(data, "ConsumerProtocolAssignment")
        assignment, _ = ConsumerProtocolAssignment.decode_from(data, start, len(data), 0)
        result: Dict[str, List[int]] = {}
        for entry in assignment.assigned_partitions:
            result.setdefault(entry.topic, []).extend(entry.partitions)
        return result
