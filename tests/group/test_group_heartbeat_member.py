"""The KIP-848 member (kproto.group.heartbeat_member) driven by hand: requests, reconciliation, errors."""

from __future__ import annotations

import uuid

from kproto import ErrorCode
from kproto.group.heartbeat_member import (
    HeartbeatMember,
    HeartbeatMemberConfig,
    PartitionsAdded,
    StopFetching,
)
from kproto.group.member import MemberState, PartitionsRevoked, SendRequest
from kproto.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupCoordinatorResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)

T = uuid.UUID(int=7)
VERSIONS = {8: 9, 9: 7, 10: 3, 11: 9, 12: 4, 13: 5, 14: 5, 68: 1}


def joined(auto_commit: bool = False, instance_id: str | None = None):
    member = HeartbeatMember(
        HeartbeatMemberConfig(
            group_id="g",
            client_id="c",
            topics=("t",),
            auto_commit=auto_commit,
            group_instance_id=instance_id,
            rebalance_timeout_ms=9000,
        )
    )
    member.set_api_versions(VERSIONS)
    member.update_topic_ids({T: "t"}, 0)
    [find] = member.start(0)
    [join] = member.receive(find.request_id, GroupCoordinatorResponse(node_id=1, host="h", port=1), 0)
    return member, join


def answer(member, send, now=0, epoch=1, parts=None, code=0):
    assignment = None
    if parts is not None:
        assignment = ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions(topic_id=T, partitions=list(parts))
            ]
        )
    return member.receive(
        send.request_id,
        ConsumerGroupHeartbeatResponse(
            error_code=code, member_epoch=epoch, heartbeat_interval_ms=500, assignment=assignment
        ),
        now,
    )


def sends(actions):
    return [a for a in actions if isinstance(a, SendRequest)]


def test_the_first_heartbeat_is_full_and_later_ones_send_only_what_changed() -> None:
    member, join = joined()
    request = join.request
    assert isinstance(request, ConsumerGroupHeartbeatRequest) and join.api_version == 1
    assert (
        request.member_epoch,
        request.rebalance_timeout_ms,
        request.subscribed_topic_names,
        request.topic_partitions,
    ) == (0, 9000, ["t"], [])
    assert request.member_id == member.member_id != ""
    actions = answer(member, join, parts=[0, 1])
    assert [type(a) for a in actions] == [PartitionsAdded, SendRequest]  # the acknowledgement goes at once
    ack = actions[1].request
    assert ack.member_epoch == 1 and ack.subscribed_topic_names is None and ack.rebalance_timeout_ms == -1
    assert [(tp.topic_id, tp.partitions) for tp in ack.topic_partitions] == [(T, [0, 1])]
    assert answer(member, actions[1], now=10) == []
    assert member.next_deadline_ms() == 510
    [beat] = member.tick(510)
    assert beat.request.topic_partitions is None and beat.request.subscribed_topic_names is None


def test_revoked_partitions_stop_then_commit_then_revoke_then_acknowledge() -> None:
    member, join = joined(auto_commit=True)
    [added, ack] = answer(member, join, parts=[0, 1])
    answer(member, ack, epoch=1)
    member.set_position("t", 0, 5)
    member.set_position("t", 1, 8)
    [beat] = member.tick(600)
    actions = answer(member, beat, now=600, epoch=2, parts=[0])
    assert isinstance(actions[0], StopFetching) and actions[0].partitions == (("t", 1),)
    [commit] = sends(actions)
    assert isinstance(commit.request, OffsetCommitRequest)
    assert (commit.request.generation_id_or_member_epoch, commit.request.member_id) == (2, member.member_id)
    assert [(p.partition_index, p.committed_offset) for p in commit.request.topics[0].partitions] == [(1, 8)]
    Topic = OffsetCommitResponse.OffsetCommitResponseTopic
    done = member.receive(
        commit.request_id,
        OffsetCommitResponse(
            topics=[Topic(name="t", partitions=[Topic.OffsetCommitResponsePartition(partition_index=1)])]
        ),
        610,
    )
    revoked = [a for a in done if isinstance(a, PartitionsRevoked)]
    assert revoked and revoked[0].partitions == (("t", 1),)
    [ack2] = sends(done)
    assert [tp.partitions for tp in ack2.request.topic_partitions] == [[0]]


def test_a_fenced_member_loses_its_partitions_and_joins_again_at_epoch_0() -> None:
    member, join = joined()
    [_, ack] = answer(member, join, parts=[0, 1])
    actions = answer(member, ack, code=ErrorCode.FENCED_MEMBER_EPOCH)
    assert [type(a) for a in actions] == [StopFetching, PartitionsRevoked, SendRequest]
    rejoin = actions[2].request
    assert rejoin.member_epoch == 0 and rejoin.subscribed_topic_names == ["t"] and rejoin.topic_partitions == []
    assert member.owned == set()


def test_leaving_sends_epoch_minus_1_and_a_static_member_minus_2() -> None:
    for instance_id, epoch in ((None, -1), ("i1", -2)):
        member, join = joined(instance_id=instance_id)
        answer(member, join)
        [leave] = member.close(100)
        assert (leave.request.member_epoch, leave.request.instance_id) == (epoch, instance_id)
        assert member.state is MemberState.CLOSED


def test_a_poll_timeout_leaves_and_the_next_poll_rejoins() -> None:
    member, join = joined(instance_id="i1")
    [_, ack] = answer(member, join, parts=[3])
    actions = member.poll_timeout(50)
    assert [type(a) for a in actions] == [SendRequest, StopFetching, PartitionsRevoked]
    assert actions[0].request.member_epoch == -1  # the partitions go to others now, even for a static member
    assert member.state is MemberState.LEFT and member.next_deadline_ms() is None
    [find] = member.rejoin(60)
    [again] = member.receive(find.request_id, GroupCoordinatorResponse(node_id=1, host="h", port=1), 60)
    assert again.request.member_epoch == 0
