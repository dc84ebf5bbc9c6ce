"""Wire group members to a group coordinator in-process, with a simulated clock.

The loopback is the smallest "network" that lets the two sans-I/O machines talk: it delivers each
member's :class:`~kproto.group.member.SendRequest` to the coordinator at once, routes the coordinator's
replies back by token, answers GroupCoordinator lookups itself, and answers the leader's
:class:`~kproto.group.member.MetadataNeeded` from a fixed topic → partition-count table.  Time only
moves through :meth:`Loopback.advance`, which visits every deadline either machine reports, in order.
A member can be *silenced* (it stops being ticked and its messages are dropped) to play a crashed
consumer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Mapping, Optional, Tuple, cast

from kproto import ErrorCode
from kproto.errors import ProtocolError
from kproto.group.coordinator import GroupCoordinator, Reply
from kproto.group.member import (
    Action,
    CoordinatorNode,
    GroupMember,
    MetadataNeeded,
    SendRequest,
)
from kproto.messages import GroupCoordinatorRequest, GroupCoordinatorResponse

__all__ = ["Loopback"]


@dataclass
class Loopback:
    """One coordinator, named members, and a clock starting at ``now_ms``."""

    coordinator: GroupCoordinator
    partitions_per_topic: Mapping[str, int]
    now_ms: int = 0
    node: CoordinatorNode = CoordinatorNode(0, "localhost", 9092)
    members: Dict[str, GroupMember] = field(default_factory=dict)
    silenced: set = field(default_factory=set)
    #: every non-request action the members emitted, as (member name, action), in order
    events: List[Tuple[str, Action]] = field(default_factory=list)
    _queue: Deque[Tuple[str, Action]] = field(default_factory=deque)

    def add(self, name: str, member: GroupMember, *, start: bool = True) -> GroupMember:
        """Register ``member`` under ``name`` (also its client host) and start it."""
        self.members[name] = member
        if start:
            self._enqueue(name, member.start(self.now_ms))
            self.flush()
        return member

    def silence(self, name: str) -> None:
        """The member stops: no more ticks, and nothing it sends or is sent arrives."""
        self.silenced.add(name)

    def deliver(self, name: str, actions: List[Action]) -> None:
        """Carry out ``actions`` that the member returned from a call made outside the loopback (e.g.
        :meth:`~kproto.group.member.GroupMember.poll_timeout` or ``rejoin``)."""
        self._enqueue(name, actions)
        self.flush()

    def close(self, name: str) -> None:
        """Close the member gracefully (its LeaveGroup is delivered)."""
        self._enqueue(name, self.members[name].close(self.now_ms))
        self.flush()
        self.silenced.add(name)

    def advance(self, to_ms: int) -> None:
        """Move time to ``to_ms``, stopping at every deadline on the way."""
        repeats = 0
        while True:
            deadline = self._next_deadline()
            if deadline is None or deadline > to_ms:
                break
            repeats = repeats + 1 if deadline <= self.now_ms else 0
            if repeats > 100:  # a machine keeps reporting a deadline its tick does not clear
                raise ProtocolError(f"timer stuck at {deadline} ms")
            self.now_ms = max(self.now_ms, deadline)
            self._tick_all()
        self.now_ms = to_ms
        self._tick_all()

    def flush(self) -> None:
        """Deliver queued actions until nothing is left to deliver."""
        while self._queue:
            name, action = self._queue.popleft()
            if name in self.silenced:
                continue
            if isinstance(action, SendRequest):
                self._deliver(name, action)
            elif isinstance(action, MetadataNeeded):
                self.events.append((name, action))
                counts = {t: self.partitions_per_topic[t] for t in action.topics if t in self.partitions_per_topic}
                self._enqueue(name, self.members[name].update_metadata(counts, self.now_ms))
            else:
                self.events.append((name, action))

    # ---------------------------------------------------------------- internals

    def _live(self) -> List[Tuple[str, GroupMember]]:
        return [(n, m) for n, m in self.members.items() if n not in self.silenced]

    def _next_deadline(self) -> Optional[int]:
        deadlines = [m.next_deadline_ms() for _, m in self._live()] + [self.coordinator.next_deadline_ms()]
        return min((d for d in deadlines if d is not None), default=None)

    def _tick_all(self) -> None:
        self._route_replies(self.coordinator.tick(self.now_ms))
        for name, member in self._live():
            self._enqueue(name, member.tick(self.now_ms))
        self.flush()

    def _enqueue(self, name: str, actions: List[Action]) -> None:
        self._queue.extend((name, action) for action in actions)

    def _deliver(self, name: str, send: SendRequest) -> None:
        member = self.members[name]
        if isinstance(send.request, GroupCoordinatorRequest):
            node = self.node
            answer = GroupCoordinatorResponse(
                error_code=ErrorCode.NONE, node_id=node.node_id, host=node.host, port=node.port
            )
            self._enqueue(name, member.receive(send.request_id, answer, self.now_ms))
            return
        replies = self.coordinator.handle(
            (name, send.request_id),
            send.request,
            send.api_version,
            client_id=member.config.client_id,
            client_host=f"/{name}",
            now_ms=self.now_ms,
        )
        self._route_replies(replies)

    def _route_replies(self, replies: List[Reply]) -> None:
        for reply in replies:
            name, request_id = cast(Tuple[str, int], reply.reply_to)  # what this loop gives as reply_to
            if name not in self.silenced:
                self._enqueue(name, self.members[name].receive(request_id, reply.result, self.now_ms))
