"""Group analysis (kproto.capture.groups) against scenarios whose facts are known.

Captures come from three places: kproto's own group machines talking through a recording loopback (the
coordinator decides when to answer, so waits and expiries are the machines', not the test's), a scripted
modern-version conversation (JoinGroup v5 static membership, MEMBER_ID_REQUIRED, Fetch with records,
KIP-848 heartbeats), and the committed sample ``samples/consumer_group.pcapng``.  Damaged variants (the
capture starts mid-rebalance, a member's coordinator connection is missing) must give "unknown", never a
made-up duration.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

import kproto
from kproto.capture.conversation import decode_capture
from kproto.capture.groups import GroupAnalyzer, analyse_capture, analyse_groups, report_dict
from kproto.pcap.writer import Side, TcpConversation, write_capture
from kproto.group import GroupCoordinator, GroupMember, MemberConfig
from kproto.group.consumer_codec import ConsumerProtocolCodec
from kproto.group.coordinator import Reply
from kproto.group.loopback import Loopback
from kproto.group.member import SendRequest
from kproto.messages import GroupCoordinatorRequest
from kproto.records import encode_record_batch

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BROKER = ("10.1.0.10", 9092)
BASE = 1_700_000_000.0
CODEC = ConsumerProtocolCodec()


def ns(seconds: float) -> int:
    """Capture time of ``seconds`` after BASE (captures keep microseconds)."""
    return int(BASE) * 10**9 + round(seconds * 1e6) * 1000


class RecordingLoopback(Loopback):
    """The loopback, writing down every coordinator exchange as frames with their simulated times."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames: Dict[str, List[Tuple[Side, bytes, float]]] = {}
        self.pending: Dict[Tuple[str, int], Tuple[int, int]] = {}
        self.correlation = itertools.count(1)

    def _deliver(self, name: str, send: SendRequest) -> None:
        if not isinstance(send.request, GroupCoordinatorRequest):
            cid = next(self.correlation)
            self.pending[(name, send.request_id)] = (cid, send.api_version)
            frame = kproto.encode_request(send.request, send.api_version, cid, self.members[name].config.client_id)
            self.frames.setdefault(name, []).append((Side.CLIENT, frame, BASE + self.now_ms / 1000))
        super()._deliver(name, send)

    def _route_replies(self, replies: List[Reply]) -> None:
        for reply in replies:
            name, request_id = reply.reply_to
            known = self.pending.pop((name, request_id), None)
            if known is not None and name not in self.silenced:
                cid, version = known
                frame = kproto.encode_response(reply.result, version, cid)
                # answers leave a quarter millisecond after the decision, so they never tie with a request
                self.frames[name].append((Side.SERVER, frame, BASE + self.now_ms / 1000 + 0.00025))
        super()._route_replies(replies)

    def conversations(self) -> List[TcpConversation]:
        hosts = {name: (f"10.1.0.{20 + i}", 40000 + i) for i, name in enumerate(sorted(self.frames))}
        return [
            TcpConversation(hosts[name], BROKER, sorted(frames, key=lambda f: f[2]))
            for name, frames in sorted(self.frames.items())
        ]


def consumer(name: str) -> GroupMember:
    return GroupMember(
        MemberConfig(
            group_id="payments",
            client_id=name,
            topics=("orders",),
            session_timeout_ms=10000,
            heartbeat_interval_ms=3000,
            auto_commit=False,
        )
    )


def slow_member_capture(tmp_path: Path) -> Tuple[Path, RecordingLoopback]:
    """Three consumers: a alone is generation 1, a and b generation 2 (a rejoins at its 3 s heartbeat); b
    then hangs (stops polling) and c joins at 5 s; a rejoins at its next heartbeat, but the coordinator
    waits for b until b's 10 s session times out: generation 3 is a and c."""
    ids = itertools.count(1)
    lb = RecordingLoopback(GroupCoordinator(member_id_suffix=lambda: str(next(ids))), {"orders": 6})
    lb.add("a", consumer("consumer-a"))
    lb.add("b", consumer("consumer-b"))
    lb.advance(4000)
    lb.silence("b")
    lb.advance(5000)
    lb.add("c", consumer("consumer-c"))
    lb.advance(30000)
    path = tmp_path / "slow.pcap"
    write_capture(path, lb.conversations())
    return path, lb


def test_loopback_slow_member_facts(tmp_path: Path) -> None:
    path, lb = slow_member_capture(tmp_path)
    (report,) = analyse_capture(path)
    assert report.group_id == "payments" and report.coordinator == "10.1.0.10:9092"
    by_client = {m.client_id: m for m in report.members.values()}
    assert set(by_client) == {"consumer-a", "consumer-b", "consumer-c"}
    assert [g.generation_id for g in report.generations] == [1, 2, 3]
    _, gen1, gen2 = report.generations  # a+b, then a+c after b expired
    assert len(gen1.members) == 2 and len(gen2.members) == 2
    b = by_client["consumer-b"].member_id
    assert gen2.expired == [b] and by_client["consumer-b"].expired
    assert gen2.slowest is not None and gen2.slowest.member_id == b
    # c's JoinGroup at 5 s starts the rebalance; it ends when b's session (last heartbeat + 10 s) runs out
    joins = {ev.member_id: ev for ev in report.events if ev.api == "JoinGroup" and ev.generation == 3}
    c = by_client["consumer-c"].member_id
    assert gen2.start_ns == joins[c].request_time_ns == ns(5.0)
    assert gen2.end_ns is not None and gen2.duration_ms is not None
    assert gen2.duration_ms == (gen2.end_ns - gen2.start_ns) / 1e6
    b_last = max(ev.request_time_ns for ev in report.events if ev.member_id == b and ev.request_time_ns)
    assert gen2.end_ns >= b_last + 10000 * 1_000_000  # not before b's session expired
    assert 5000 < gen2.duration_ms < 15000
    assert gen2.slowest.waited_ms is not None and gen2.slowest.waited_ms >= 5000
    # the assignments are what the members themselves ended with
    owned = {
        by_client[lb.members[n].config.client_id].member_id: {t: sorted(ps) for t, ps in m.assignment.items()}
        for n, m in lb.members.items()
        if n != "b"
    }
    assert {m: {t: sorted(ps) for t, ps in a.items()} for m, a in gen2.assignments.items()} == owned
    # a's heartbeat told it about the rebalance
    assert by_client["consumer-a"].heartbeat_errors.get("REBALANCE_IN_PROGRESS", 0) >= 1


def test_capture_starting_mid_rebalance_gives_unknown(tmp_path: Path) -> None:
    _, lb = slow_member_capture(tmp_path)
    cut = BASE + 5.5  # after c's JoinGroup (5 s), before the rebalance ends
    convs = [
        TcpConversation(c.client, c.server, [m for m in c.messages if m[2] >= cut], handshake=False)
        for c in lb.conversations()
    ]
    path = tmp_path / "cut.pcap"
    write_capture(path, [c for c in convs if c.messages])
    (report,) = analyse_capture(path)
    gen2 = next(g for g in report.generations if g.generation_id == 3)
    assert gen2.start_ns is None and gen2.duration_ms is None
    assert any("start unknown" in p for p in gen2.problems)
    # a's heartbeat for generation 2, whose JoinGroups and SyncGroups came before the cut
    assert any(p.startswith("generation 2 in use, but the rebalance") for p in report.problems)
    json.dumps(report_dict(report))


def test_missing_coordinator_connection_gives_unknown(tmp_path: Path) -> None:
    _, lb = slow_member_capture(tmp_path)
    convs = lb.conversations()
    path = tmp_path / "partial.pcap"
    write_capture(path, [c for c in convs if c.client[0] != "10.1.0.22"])  # c's connection is absent
    (report,) = analyse_capture(path)
    gen2 = next(g for g in report.generations if g.generation_id == 3)
    assert gen2.start_ns is None and gen2.end_ns is None and gen2.duration_ms is None
    assert gen2.problems


def test_sample_consumer_group() -> None:
    (report,) = analyse_capture(SAMPLES / "consumer_group.pcapng")
    assert report.group_id == "billing" and len(report.members) == 2
    assert [g.generation_id for g in report.generations] == [1, 2]
    gen2 = report.generations[1]
    m1 = "billing-consumer-1-6a1c-41f2"
    # consumer 2 joined at 06.584, consumer 1 (learning from its heartbeat) rejoined at 06.808
    assert gen2.start_ns == 1_452_000_006_584_000_000
    assert gen2.slowest is not None and gen2.slowest.member_id == m1
    assert round(gen2.slowest.waited_ms or 0, 3) == 224.001
    assert gen2.assignments == {m1: {"orders": [0]}, "billing-consumer-2-9b7e-02aa": {"orders": [1]}}
    assert gen2.commits_before == {"orders-0": 7, "orders-1": 10}
    assert report.members["billing-consumer-2-9b7e-02aa"].left_ns is not None
    assert report.members[m1].heartbeat_errors == {"REBALANCE_IN_PROGRESS": 2}
    assert any(c.error == "ILLEGAL_GENERATION" for c in report.commits)
    assert any("did not finish" in p for p in report.problems)


# --- a scripted modern conversation ------------------------------------------------------------------------


class Script:
    """One client connection: requests and answers at chosen times (seconds after BASE)."""

    def __init__(self, client: Tuple[str, int], client_id: str) -> None:
        self.client, self.client_id = client, client_id
        self.cid = 0
        self.messages: List[Tuple[Side, bytes, float]] = []

    def exchange(
        self, api: str, version: int, request: Dict[str, Any], response: Dict[str, Any], at: float, answered: float
    ) -> None:
        info = kproto.APIS[api]
        self.cid += 1
        self.messages.append(
            (
                Side.CLIENT,
                kproto.encode_request(info.request.from_dict(request), version, self.cid, self.client_id),
                BASE + at,
            )
        )
        self.messages.append(
            (Side.SERVER, kproto.encode_response(info.response.from_dict(response), version, self.cid), BASE + answered)
        )

    def conversation(self) -> TcpConversation:
        return TcpConversation(self.client, BROKER, self.messages)


def join_v5(member: str, instance: str) -> Dict[str, Any]:
    return {
        "group_id": "shipping",
        "session_timeout_ms": 45000,
        "rebalance_timeout_ms": 300000,
        "member_id": member,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": CODEC.encode_subscription(["parcels"])}],
    }


def join_v5_answer(
    gen: int, member: str, leader: str, members: List[Tuple[str, str]], error: int = 0
) -> Dict[str, Any]:
    return {
        "error_code": error,
        "generation_id": gen,
        "protocol_name": "range",
        "leader": leader,
        "member_id": member,
        "members": [
            {"member_id": m, "group_instance_id": i, "metadata": CODEC.encode_subscription(["parcels"])}
            for m, i in members
        ],
    }


def sync(member: str, gen: int, assignments: Dict[str, List[int]]) -> Dict[str, Any]:
    return {
        "group_id": "shipping",
        "generation_id": gen,
        "member_id": member,
        "assignments": [
            {"member_id": m, "assignment": CODEC.encode_assignment({"parcels": ps})} for m, ps in assignments.items()
        ],
    }


def fetch(partition: int, offset: int) -> Dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": "parcels",
                "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
    }


def fetch_answer(partition: int, first: int, count: int) -> Dict[str, Any]:
    batch = encode_record_batch([(None, b"x%d" % i) for i in range(count)], base_offset=first) if count else b""
    return {
        "responses": [
            {
                "topic": "parcels",
                "partitions": [
                    {"partition_index": partition, "error_code": 0, "high_watermark": first + count, "records": batch}
                ],
            }
        ]
    }


def modern_capture(tmp_path: Path) -> Path:
    """Group 'shipping' with JoinGroup v5: x joins (MEMBER_ID_REQUIRED first), owns partitions 0 and 1 and
    fetches partition 1 up to offset 40 without committing past 20; y joins, takes partition 1 and starts
    from the committed 20: offsets 20..39 are processed twice.  A KIP-848 group 'kip848' heartbeats too."""
    x = Script(("10.1.0.31", 41001), "shipper-x")
    y = Script(("10.1.0.32", 41002), "shipper-y")
    mx, my = "shipper-x-1111", "shipper-y-2222"
    x.exchange("JoinGroup", 5, join_v5("", "host-x"), join_v5_answer(-1, mx, "", [], error=79), 0.0, 0.001)
    x.exchange("JoinGroup", 5, join_v5(mx, "host-x"), join_v5_answer(1, mx, mx, [(mx, "host-x")]), 0.010, 0.012)
    x.exchange(
        "SyncGroup",
        3,
        sync(mx, 1, {mx: [0, 1]}),
        {"error_code": 0, "assignment": CODEC.encode_assignment({"parcels": [0, 1]})},
        0.020,
        0.021,
    )
    x.exchange(
        "OffsetCommit",
        7,
        {
            "group_id": "shipping",
            "generation_id_or_member_epoch": 1,
            "member_id": mx,
            "group_instance_id": "host-x",
            "topics": [
                {
                    "name": "parcels",
                    "partitions": [{"partition_index": 1, "committed_offset": 20, "committed_metadata": ""}],
                }
            ],
        },
        {"topics": [{"name": "parcels", "partitions": [{"partition_index": 1, "error_code": 0}]}]},
        0.5,
        0.501,
    )
    x.exchange("Fetch", 4, fetch(1, 20), fetch_answer(1, 20, 20), 0.6, 0.61)
    y.exchange("JoinGroup", 5, join_v5("", "host-y"), join_v5_answer(-1, my, "", [], error=79), 1.0, 1.001)
    y.exchange("JoinGroup", 5, join_v5(my, "host-y"), join_v5_answer(2, my, mx, []), 1.010, 3.030)
    x.exchange(
        "Heartbeat",
        3,
        {"group_id": "shipping", "generation_id": 1, "member_id": mx, "group_instance_id": "host-x"},
        {"error_code": 27},
        3.0,
        3.001,
    )
    x.exchange(
        "JoinGroup", 5, join_v5(mx, "host-x"), join_v5_answer(2, mx, mx, [(mx, "host-x"), (my, "host-y")]), 3.020, 3.030
    )
    x.exchange(
        "SyncGroup",
        3,
        sync(mx, 2, {mx: [0], my: [1]}),
        {"error_code": 0, "assignment": CODEC.encode_assignment({"parcels": [0]})},
        3.040,
        3.041,
    )
    y.exchange(
        "SyncGroup",
        3,
        sync(my, 2, {}),
        {"error_code": 0, "assignment": CODEC.encode_assignment({"parcels": [1]})},
        3.035,
        3.042,
    )
    y.exchange(
        "OffsetFetch",
        5,
        {"group_id": "shipping", "topics": [{"name": "parcels", "partition_indexes": [1]}]},
        {
            "topics": [
                {
                    "name": "parcels",
                    "partitions": [{"partition_index": 1, "committed_offset": 20, "metadata": "", "error_code": 0}],
                }
            ]
        },
        3.05,
        3.051,
    )
    y.exchange("Fetch", 4, fetch(1, 20), fetch_answer(1, 20, 0), 3.06, 3.56)
    k = Script(("10.1.0.33", 41003), "kip848-client")
    topic_id = str(uuid.UUID(int=7))
    k.exchange(
        "ConsumerGroupHeartbeat",
        0,
        {
            "group_id": "kip848",
            "member_id": "",
            "member_epoch": 0,
            "rebalance_timeout_ms": 300000,
            "subscribed_topic_names": ["parcels"],
            "topic_partitions": [],
        },
        {
            "error_code": 0,
            "member_id": "k-1",
            "member_epoch": 1,
            "heartbeat_interval_ms": 5000,
            "assignment": {"topic_partitions": [{"topic_id": topic_id, "partitions": [0, 1]}]},
        },
        0.2,
        0.201,
    )
    k.exchange(
        "ConsumerGroupHeartbeat",
        0,
        {
            "group_id": "kip848",
            "member_id": "k-1",
            "member_epoch": 1,
            "rebalance_timeout_ms": -1,
            "topic_partitions": None,
        },
        {"error_code": 0, "member_id": "k-1", "member_epoch": 1, "heartbeat_interval_ms": 5000, "assignment": None},
        5.2,
        5.201,
    )
    k.exchange(
        "ConsumerGroupHeartbeat",
        0,
        {
            "group_id": "kip848",
            "member_id": "k-1",
            "member_epoch": -1,
            "rebalance_timeout_ms": -1,
            "topic_partitions": None,
        },
        {"error_code": 0, "member_id": "k-1", "member_epoch": -1, "heartbeat_interval_ms": 5000, "assignment": None},
        6.0,
        6.001,
    )
    path = tmp_path / "modern.pcapng"
    write_capture(path, [x.conversation(), y.conversation(), k.conversation()], format="pcapng")
    return path


def test_modern_versions_static_members_and_records_processed_twice(tmp_path: Path) -> None:
    reports = {r.group_id: r for r in analyse_capture(modern_capture(tmp_path))}
    shipping = reports["shipping"]
    assert {m.group_instance_id for m in shipping.members.values()} == {"host-x", "host-y"}
    gen1, gen2 = shipping.generations
    assert gen1.start_ns == ns(0.010)  # the join with its member id, after MEMBER_ID_REQUIRED
    assert gen2.start_ns == ns(1.010) and gen2.end_ns == ns(3.042)
    assert gen2.duration_ms is not None and abs(gen2.duration_ms - 2032.0) < 1e-6
    assert gen2.slowest is not None and gen2.slowest.member_id == "shipper-x-1111"
    assert abs((gen2.slowest.waited_ms or 0) - 2010.0) < 1e-6
    leader_wait = [w for w in gen2.waited_for if "leader" in w.reason]
    assert leader_wait and abs((leader_wait[0].waited_ms or 0) - 5.0) < 1e-6
    (dup,) = gen2.duplicates
    assert (dup.topic, dup.partition, dup.old_owner, dup.new_owner) == (
        "parcels",
        1,
        "shipper-x-1111",
        "shipper-y-2222",
    )
    assert (dup.old_position, dup.new_start, dup.records) == (40, 20, 20)
    errors = [e.error for e in shipping.events if e.api == "JoinGroup"]
    assert errors.count("MEMBER_ID_REQUIRED") == 2
    kip = reports["kip848"]
    (epoch,) = kip.epochs
    assert (epoch.member_id, epoch.member_epoch, epoch.heartbeats) == ("k-1", 1, 2)
    assert epoch.assignment == {str(uuid.UUID(int=7)): [0, 1]}
    assert kip.members["k-1"].left_ns == ns(6.0)


def test_analysis_does_not_depend_on_record_order(tmp_path: Path) -> None:
    records = list(decode_capture(modern_capture(tmp_path)))
    forward = [report_dict(r) for r in analyse_groups(records)]
    analyzer = GroupAnalyzer()
    for record in reversed(records):
        analyzer.feed(record)
    assert [report_dict(r) for r in analyzer.finish()] == forward


def test_undecodable_group_frames_are_reported_not_fatal(tmp_path: Path) -> None:
    frames: List[Tuple[Side, bytes, float]] = []
    bad = kproto.encode_request(kproto.APIS["JoinGroup"].request.from_dict(join_v5("", "i")), 5, 1, "c")
    frames.append((Side.CLIENT, bad[:-3] + b"\xff\xff\xff", BASE))  # damaged protocols array
    frames.append((Side.SERVER, b"\x00\x00\x00\x06\x00\x00\x00\x01\x00\x00", BASE + 0.01))
    path = tmp_path / "bad.pcap"
    write_capture(path, [TcpConversation(("10.1.0.40", 40100), BROKER, frames)])
    reports = analyse_capture(path)
    assert all(not r.generations for r in reports)
    for r in reports:
        json.dumps(report_dict(r))


def poller_capture(tmp_path: Path, shared_client_id: bool = False) -> Path:
    """x owns both partitions and stops polling (last Fetch at 3.4 s); y joins at 2 s; the coordinator holds
    the rebalance until x's client leaves, 6 s (its max.poll.interval.ms, sent as rebalance_timeout_ms)
    after its last poll.  ``shared_client_id``: both on one host with one client id, as clients at their
    defaults are."""
    if shared_client_id:
        x, y = Script(("10.1.0.41", 41011), "rdkafka"), Script(("10.1.0.41", 41012), "rdkafka")
    else:
        x, y = Script(("10.1.0.41", 41011), "poller-x"), Script(("10.1.0.42", 41012), "poller-y")
    mx, my = "poller-x-1", "poller-y-2"

    def join(member: str) -> Dict[str, Any]:
        return {
            **join_v5(member, ""),
            "group_instance_id": None,
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 6000,
        }

    x.exchange("JoinGroup", 5, join(mx), join_v5_answer(1, mx, mx, [(mx, "")]), 0.0, 0.002)
    x.exchange(
        "SyncGroup",
        3,
        sync(mx, 1, {mx: [0, 1]}),
        {"error_code": 0, "assignment": CODEC.encode_assignment({"parcels": [0, 1]})},
        0.010,
        0.011,
    )
    x.exchange(
        "Fetch",
        4,
        {
            **fetch(0, 0),
            "topics": [
                {
                    "topic": "parcels",
                    "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in (0, 1)],
                }
            ],
        },
        fetch_answer(0, 0, 5),
        3.4,
        3.41,
    )
    y.exchange("JoinGroup", 5, join(my), join_v5_answer(2, my, my, [(my, "")]), 2.0, 9.401)
    x.exchange(
        "Heartbeat",
        3,
        {"group_id": "shipping", "generation_id": 1, "member_id": mx, "group_instance_id": None},
        {"error_code": 27},
        3.0,
        3.001,
    )
    x.exchange("LeaveGroup", 1, {"group_id": "shipping", "member_id": mx}, {"error_code": 0}, 9.4, 9.4005)
    y.exchange(
        "SyncGroup",
        3,
        sync(my, 2, {my: [0, 1]}),
        {"error_code": 0, "assignment": CODEC.encode_assignment({"parcels": [0, 1]})},
        9.41,
        9.411,
    )
    y.exchange("Fetch", 4, fetch(0, 0), fetch_answer(0, 0, 5), 9.5, 9.51)
    path = tmp_path / f"poller-{shared_client_id}.pcap"
    write_capture(path, [x.conversation(), y.conversation()])
    return path


def test_member_leaving_after_its_poll_interval_held_the_rebalance(tmp_path: Path) -> None:
    """The rebalance waited 7.4 s for x, none for the newcomer y that started it."""
    (report,) = analyse_capture(poller_capture(tmp_path))
    mx, my = "poller-x-1", "poller-y-2"
    _, gen2 = report.generations
    slowest = gen2.slowest
    assert slowest is not None and slowest.member_id == mx
    assert abs((slowest.waited_ms or 0) - 7400.0) < 1e-6
    assert slowest.reason == "left after exceeding max.poll.interval.ms 6,000 ms (no Fetch for 6,000 ms)"
    assert [w.member_id for w in gen2.waited_for] == [mx]
    (departure,) = gen2.departures
    assert (departure.kind, departure.held, departure.time_ns) == ("left", True, ns(9.4))
    gaps = {(g.partition, g.old_owner, g.new_owner, g.from_what): g.gap_ms for g in gen2.owner_gaps}
    assert gaps == {(0, mx, my, "last fetch"): 6100.0}  # y fetched partition 0 only
    assert report.members[mx].rebalance_timeout_ms == 6000 and report.members[mx].session_timeout_ms == 10000
    assert report.problems == []


def test_members_sharing_host_and_client_id_are_not_told_apart_by_fetches(tmp_path: Path) -> None:
    """The same group with both consumers on one host under one client id: the coordinator exchanges still
    say who held the rebalance, but whose Fetch is whose is unknown, so neither a poll-interval cause nor a
    time without an owner is given, and a problem says why."""
    (report,) = analyse_capture(poller_capture(tmp_path, shared_client_id=True))
    mx, my = "poller-x-1", "poller-y-2"
    _, gen2 = report.generations
    assert gen2.slowest is not None and gen2.slowest.member_id == mx and gen2.slowest.reason == "left"
    assert [(g.partition, g.from_what) for g in gen2.owner_gaps] == []  # y's first Fetch is not known as y's
    (problem,) = report.problems
    assert f"members {mx}, {my} share host 10.1.0.41 and client id 'rdkafka'" in problem
