"""The two partition assignors of the 0.9 Java consumer: ``range`` and ``roundrobin``.

The group leader runs an assignor on the subscriptions it receives in its JoinGroup response and hands
the result back in SyncGroup.  Every consumer of a group must agree on the outcome bit for bit, so these
functions reproduce the 0.9.0 Java classes exactly, sort orders included (docs/protocol-notes.md, "The consumer
protocol and its assignors"):

* member ids and topic names are ordered as Java's ``String.compareTo`` orders them, i.e. by UTF-16
  code unit, which is *not* Python's code point order once characters outside the BMP appear
  (a surrogate pair sorts below U+E000..U+FFFF in Java, above it in Python);
* ``range`` works topic by topic: the subscribers of a topic, sorted, get contiguous ranges and the
  first ``n % m`` of them one partition more;
* ``roundrobin`` walks every partition of every subscribed topic (topics sorted, partitions ascending)
  and deals them out with a circular iterator over the sorted member ids, skipping members that are not
  subscribed to the partition's topic.

Inputs are plain values: ``subscriptions`` maps member id → subscribed topics, ``partitions_per_topic``
maps topic → partition count.  A subscribed topic without an entry in ``partitions_per_topic`` is
skipped, as Java's ``AbstractPartitionAssignor`` does for topics without metadata (0.9.0.0's round robin
threw a NullPointerException there instead; KAFKA-3661 fixed that in 0.10.0, and we follow the fix).
The output maps *every* member id to ``{topic: [partitions]}``; a member that got nothing maps to ``{}``,
and a topic appears in a member's map only when it received at least one partition.
"""

from __future__ import annotations

from typing import Callable, Collection, Dict, Iterable, List, Mapping, Tuple

__all__ = [
    "Assignment",
    "AssignorFunction",
    "ASSIGNORS",
    "assign_range",
    "assign_roundrobin",
    "java_string_order",
]

#: member id → {topic: [partition, ...]}
Assignment = Dict[str, Dict[str, List[int]]]

#: The signature every assignor shares: (subscriptions, partitions_per_topic) → assignment.
AssignorFunction = Callable[[Mapping[str, Collection[str]], Mapping[str, int]], Assignment]


def java_string_order(text: str) -> bytes:
    """Sort key that orders strings as Java's ``String.compareTo`` does (by UTF-16 code unit).

    Big-endian UTF-16 bytes compare exactly as the sequence of 16-bit code units, and a proper prefix
    sorts first in both worlds, so ``sorted(xs, key=java_string_order)`` is Java's ``Collections.sort``.
    """
    return text.encode("utf-16-be", "surrogatepass")


def _java_sorted(texts: Iterable[str]) -> List[str]:
    return sorted(texts, key=java_string_order)


def _empty_assignment(subscriptions: Mapping[str, Collection[str]]) -> Assignment:
    return {member_id: {} for member_id in subscriptions}


def _give(assignment: Assignment, member_id: str, topic: str, partitions: Iterable[int]) -> None:
    partitions = list(partitions)
    if partitions:
        assignment[member_id].setdefault(topic, []).extend(partitions)


def _subscribers_by_topic(subscriptions: Mapping[str, Collection[str]]) -> Dict[str, List[str]]:
    subscribers: Dict[str, List[str]] = {}
    for member_id, topics in subscriptions.items():
        for topic in set(topics):
            subscribers.setdefault(topic, []).append(member_id)
    return subscribers


def assign_range(subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]) -> Assignment:
    """The 0.9 ``RangeAssignor``: per topic, contiguous ranges over the sorted subscribers.

    With ``n`` partitions and ``m`` subscribers, subscriber ``i`` (in Java string order) gets
    ``n // m`` partitions starting at ``(n // m) * i + min(i, n % m)``, plus one more if ``i < n % m``.
    """
    assignment = _empty_assignment(subscriptions)
    for topic, members in _subscribers_by_topic(subscriptions).items():
        if topic not in partitions_per_topic:
            continue  # no metadata for the topic: Java logs and skips it
        count = partitions_per_topic[topic]
        members = _java_sorted(members)
        per_member, extra = divmod(count, len(members))
        for index, member_id in enumerate(members):
            start = per_member * index + min(index, extra)
            length = per_member + (1 if index < extra else 0)
            _give(assignment, member_id, topic, range(start, start + length))
    return assignment


def _sorted_topic_partitions(
    subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> List[Tuple[str, int]]:
    topics = {topic for topics in subscriptions.values() for topic in topics}
    return [
        (topic, partition)
        for topic in _java_sorted(topics)
        if topic in partitions_per_topic
        for partition in range(partitions_per_topic[topic])
    ]


def assign_roundrobin(
    subscriptions: Mapping[str, Collection[str]], partitions_per_topic: Mapping[str, int]
) -> Assignment:
    """The 0.9 ``RoundRobinAssignor``: deal sorted partitions to sorted members, skipping non-subscribers.

    The position in the member ring persists across topics (Java's ``CircularIterator``): after a
    partition is given, the ring advances by one; before giving, it advances past members not
    subscribed to that partition's topic.
    """
    assignment = _empty_assignment(subscriptions)
    ring = _java_sorted(subscriptions)
    subscribed = {member_id: set(topics) for member_id, topics in subscriptions.items()}
    position = 0
    for topic, partition in _sorted_topic_partitions(subscriptions, partitions_per_topic):
        # Some member is subscribed to ``topic`` (it came from a subscription), so this terminates.
        while topic not in subscribed[ring[position]]:
            position = (position + 1) % len(ring)
        _give(assignment, ring[position], topic, (partition,))
        position = (position + 1) % len(ring)
    return assignment


#: Assignors by the protocol name the Java consumer advertises in JoinGroup.
ASSIGNORS: Mapping[str, AssignorFunction] = {
    "range": assign_range,
    "roundrobin": assign_roundrobin,
}
