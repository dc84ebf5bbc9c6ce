"""A small program written the way a kproto user would write it; the test suite runs ``mypy --strict`` on
it (tests/test_public_typing.py), so the public names it touches must stay typed and importable without
private paths.  It is also run for real there, against the mock broker.
"""

from __future__ import annotations

import socket
from typing import Dict, List, Optional

from kproto.broker import MockBroker
from kproto.connection import ClientConnection, ConnectionClosed, Response, SentRequest
from kproto.errors import KprotoError
from kproto import ErrorCode
from kproto.group import GroupCoordinator, GroupMember, GroupState, MemberConfig
from kproto.group.member import PartitionsAssigned, SendRequest
from kproto.messages import (
    GroupCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    Message,
    MetadataRequest,
    MetadataResponse,
)


def partition_counts(address: tuple[str, int], topics: List[str]) -> Dict[str, int]:
    """Ask a broker for the partition count of ``topics`` over one socket."""
    connection = ClientConnection(client_id="typed-consumer")
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    # send() is typed per request class: a MetadataRequest gives a SentRequest[MetadataResponse] ...
    sent: SentRequest[MetadataResponse] = connection.send(request, 0)
    assert sent.expects_response
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(sent.frame)
        while True:
            events = connection.receive_data(sock.recv(65536))
            for event in events:
                if isinstance(event, ConnectionClosed):
                    raise ConnectionError("broker closed the connection")
                # ... and answered_by() narrows the event to Response[MetadataResponse]: no cast, no isinstance.
                if sent.answered_by(event):
                    return counts_of(event)


def counts_of(response: Response[MetadataResponse]) -> Dict[str, int]:
    # Topic names are nullable from Metadata v12 on (topics may be named by id only).
    return {
        t.name: len(t.partitions)
        for t in response.message.topics
        if t.error_code == ErrorCode.NONE and t.name is not None
    }


def any_response(response: Response) -> str:
    """A bare ``Response`` (as code written before it was generic has it) is a ``Response[Message]``."""
    return type(response.message).__name__


def join_alone(topics: List[str], counts: Dict[str, int]) -> Optional[PartitionsAssigned]:
    """Run one member against an in-process coordinator until it owns its partitions."""
    member = GroupMember(MemberConfig(group_id="typed", client_id="typed-consumer", topics=tuple(topics)))
    coordinator = GroupCoordinator()
    member.update_metadata(counts, 0)
    actions = member.start(0)
    for _ in range(10):
        next_actions = []
        for action in actions:
            if isinstance(action, PartitionsAssigned):
                return action
            if not isinstance(action, SendRequest):
                continue
            answer: Message
            if action.destination is None:  # coordinator discovery: answered by "any broker", here
                answer = GroupCoordinatorResponse(error_code=ErrorCode.NONE, node_id=0, host="localhost", port=9092)
                next_actions += member.receive(action.request_id, answer, 0)
                continue
            for reply in coordinator.handle(
                action.request_id,
                action.request,
                action.api_version,
                client_id="typed-consumer",
                client_host="/127.0.0.1",
                now_ms=0,
            ):
                assert isinstance(reply.reply_to, int)
                next_actions += member.receive(reply.reply_to, reply.result, 0)
        actions = next_actions
    return None


def main() -> int:
    with MockBroker(topics={"typed": 3}) as broker:
        counts = partition_counts((broker.host, broker.port), ["typed"])
        heartbeat: SentRequest[HeartbeatResponse] = ClientConnection().send(
            HeartbeatRequest(group_id="typed", generation_id=1, member_id="m"), 0
        )
        assigned = join_alone(["typed"], counts)
        stored = broker.messages("typed", 0)
        keys: List[Optional[bytes]] = [message.key for message in stored]
        group = broker.group("nobody")
    state: GroupState = GroupState.STABLE
    try:
        if assigned is None or keys or group is not None or state != "Stable" or not heartbeat.expects_response:
            return 1
    except KprotoError:
        return 1
    print(sorted(assigned.partitions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
