"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

Kafka's coordinator computes a group's target assignment itself; a member may name the assignor it
wants (``server_assignor``), and the group uses the one most of its members name, else the first
configured (``group.consumer.assignors``, ``uniform`` first).

**range** gives each member contiguous ranges of every topic it subscribes to.  Members are ordered
with static members first (by instance id), then the others by member id; for each topic, the
``partitions // members`` quota goes to every subscribed member in that order, and the first
``partitions % members`` get one more.  With the same members subscribed to co-partitioned topics,
each member gets the same partition numbers of every topic.  This is Kafka's output exactly.

**uniform** balances the partition count across members (sizes differ by at most one) and keeps as
much of the previous target as balance allows.  When every member subscribes to the same topics:
each member, in order, keeps up to its quota (``total // members``, one more for the first
``total % members`` members) of its previous partitions that are still subscribed; the freed and new
partitions then fill the members below quota, in order.  Kafka walks members and topics in its hash
maps' order; here the order is sorted (member ids, topic names, partition numbers), so where Kafka's
choice depends on that order the partitions chosen may differ, never the sizes.  When subscriptions
differ, each partition (topic by topic, in order) goes to the subscribed member that keeps it if it
held it and is not above the balanced share of its topics, else to the subscribed member holding the
fewest partitions; this keeps sizes as even as the subscriptions allow, but is simpler than Kafka's
heterogeneous builder, which also moves partitions between members afterwards to even them out.

Inputs are plain values: ``members`` maps a member id to its (instance id, subscribed topic names),
``partitions`` maps a topic name to its partition count, ``previous`` is the previous target
(member id → topic → partitions).  Output: member id → topic → sorted partition list (every member
present, possibly with nothing).
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

__all__ = ["Assignment", "MemberSpec", "ASSIGNORS", "range_assign", "uniform_assign", "member_order"]

#: member id → topic → partitions.
Assignment = Dict[str, Dict[str, List[int]]]
#: (instance id or None, subscribed topic names)
MemberSpec = Tuple[Optional[str], Sequence[str]]


def member_order(members: Mapping[str, MemberSpec]) -> List[str]:
    """Static members first by instance id, then the others by member id (Kafka's range order)."""
    return sorted(members, key=lambda m: (0, members[m][0], "") if members[m][0] is not None else (1, "", m))


def range_assign(
    members: Mapping[str, MemberSpec],
    partitions: Mapping[str, int],
    previous: Mapping[str, Mapping[str, Sequence[int]]],
) -> Assignment:
    """Kafka's server-side ``range`` assignor (``previous`` is not used: range is not sticky)."""
    order = member_order(members)
    result: Assignment = {m: {} for m in order}
    subscribers: Dict[str, List[str]] = {}
    for m in order:
        for topic in members[m][1]:
            if topic in partitions:
                subscribers.setdefault(topic, []).append(m)
    for topic, subs in subscribers.items():
        count = partitions[topic]
        quota, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            end = min(start + quota + (1 if i < extra else 0), count)
            if start < end:
                result[m][topic] = list(range(start, end))
            start = end
    return result


def uniform_assign(
    members: Mapping[str, MemberSpec],
    partitions: Mapping[str, int],
    previous: Mapping[str, Mapping[str, Sequence[int]]],
) -> Assignment:
    """Kafka's server-side ``uniform`` assignor (sticky, balanced; see the module docstring)."""
    order = sorted(members)
    if not order:
        return {}
    subscriptions = [frozenset(t for t in members[m][1] if t in partitions) for m in order]
    if all(s == subscriptions[0] for s in subscriptions):
        return _uniform_homogeneous(order, sorted(subscriptions[0]), partitions, previous)
    return _uniform_heterogeneous(order, dict(zip(order, subscriptions)), partitions, previous)


def _uniform_homogeneous(
    order: List[str],
    topics: List[str],
    partitions: Mapping[str, int],
    previous: Mapping[str, Mapping[str, Sequence[int]]],
) -> Assignment:
    result: Assignment = {m: {} for m in order}
    if not topics:
        return result
    subscribed = set(topics)
    held: Set[Tuple[str, int]] = set()
    total = sum(partitions[t] for t in topics)
    quota, extra = divmod(total, len(order))
    unfilled: List[Tuple[str, int]] = []
    for i, m in enumerate(order):
        room = quota + (1 if i < extra else 0)
        for topic in sorted(previous.get(m, {})):
            if topic not in subscribed:
                continue
            for p in sorted(previous[m][topic]):
                if room > 0 and p < partitions[topic] and (topic, p) not in held:
                    result[m].setdefault(topic, []).append(p)
                    held.add((topic, p))
                    room -= 1
        if room > 0:
            unfilled.append((m, room))
    free = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in held]
    cursor = 0
    for m, room in unfilled:
        for t, p in free[cursor : cursor + room]:
            result[m].setdefault(t, []).append(p)
        cursor += room
    for assigned in result.values():
        for ps in assigned.values():
            ps.sort()
    return result


def _uniform_heterogeneous(
    order: List[str],
    subscriptions: Mapping[str, FrozenSet[str]],
    partitions: Mapping[str, int],
    previous: Mapping[str, Mapping[str, Sequence[int]]],
) -> Assignment:
    result: Assignment = {m: {} for m in order}
    load = {m: 0 for m in order}
    holder = {(t, p): m for m, assigned in previous.items() if m in load for t, ps in assigned.items() for p in ps}
    for topic in sorted(set().union(*subscriptions.values())):
        subs = [m for m in order if topic in subscriptions[m]]
        share = -(-sum(partitions[t] for t in subscriptions[subs[0]]) // len(order))  # a rough ceiling
        for p in range(partitions[topic]):
            keeper = holder.get((topic, p))
            if keeper in subs and load[keeper] < max(share, min(load[s] for s in subs) + 1):
                chosen = keeper
            else:
                chosen = min(subs, key=lambda s: (load[s], s))
            result[chosen].setdefault(topic, []).append(p)
            load[chosen] += 1
    return result


#: Assignor name → function, in the order of ``group.consumer.assignors`` (the first is the default).
ASSIGNORS: Mapping[
    str, Callable[[Mapping[str, MemberSpec], Mapping[str, int], Mapping[str, Mapping[str, Sequence[int]]]], Assignment]
] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
