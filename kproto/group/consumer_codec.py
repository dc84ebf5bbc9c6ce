"""The embedded consumer protocol (docs/protocol-notes.md, "The consumer protocol") as plain values, on top of kproto's generated classes.

:class:`ConsumerProtocolCodec` turns a subscription (a list of topics) into JoinGroup protocol metadata
and an assignment (``{topic: [partitions]}``) into SyncGroup member-assignment bytes, and back.  Both
byte strings are an int16 version followed by the v0 body (``ConsumerProtocolSubscription`` /
``ConsumerProtocolAssignment`` in :mod:`kproto.messages`).  Reading follows 0.9.0's rule: a negative
version is an error, any other is read as v0 and trailing bytes are ignored.  Empty assignment bytes
(what the coordinator gives a member the leader left out) mean "no partitions".
"""

from __future__ import annotations

import struct
from typing import Dict, List, Mapping, Sequence

from kproto._generated.consumer_protocol import ConsumerProtocolAssignment_TopicPartition
from kproto.errors import DecodeError
from kproto.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

__all__ = ["ConsumerProtocolCodec"]

_VERSION = struct.Struct(">h")


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
        """Protocol metadata for a JoinGroup entry subscribing to ``topics``."""
        return ConsumerProtocolSubscription(topics=list(topics)).encode_embedded(0)

    def decode_subscription(self, data: bytes) -> List[str]:
        """The topics of a member's protocol metadata."""
        data = bytes(data)
        start = _body_start(data, "ConsumerProtocolSubscription")
        subscription, _ = ConsumerProtocolSubscription.decode_from(data, start, len(data), 0)
        return list(subscription.topics)

    def encode_assignment(self, assignment: Mapping[str, Sequence[int]]) -> bytes:
        """Member-assignment bytes for ``{topic: partitions}`` (topics in the mapping's order)."""
        parts = [ConsumerProtocolAssignment_TopicPartition(topic=topic, partitions=list(ps)) for topic, ps in assignment.items()]
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
