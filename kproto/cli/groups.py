"""``kproto groups``: the consumer groups of a capture, one block per group (analysis in
:mod:`kproto.capture.groups`; this module only reads the arguments and prints)."""

from __future__ import annotations

import argparse
import datetime
import sys
from typing import Any, Dict, List, Optional

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.capture.groups import GroupReport, analyse_capture, report_dict
from kproto.capture.heartbeat_groups import changed_steps
from kproto.cli.command_options import add_capture_options, add_format_option, open_binary_input
from kproto.cli.exit_codes import EXIT_OK
from kproto.cli.json_output import RecordWriter

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Explain the consumer groups of a pcap or pcapng capture: members (member id, group instance id, client id,
host), every generation (start at the first JoinGroup, end at the last SyncGroup answer, duration, leader,
protocol, each member's assignment), the members the coordinator waited for, how long and why (the one
whose rejoin, LeaveGroup or expiry ended the hold is the "slowest member"), members that left or expired
and how (after exceeding max.poll.interval.ms, session expired), static members that restarted without a
rebalance, each partition's time without an owner (old owner's last Fetch to the new owner's first),
heartbeats answered REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID, the offsets committed
before and after each rebalance, and partitions whose new owner starts below what the old owner had
fetched (records processed twice).  KIP-848 groups (ConsumerGroupHeartbeat) show each group
epoch and its causes (member joined, left, changed its subscription, session expired or fenced), each
member's owned and assigned partitions over time, every partition move with its time without an owner
and the records read twice, and a summary per member epoch.  What the capture does not show is printed
as "unknown", never guessed."""


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "groups",
        help="explain the consumer groups and rebalances of a capture",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_capture_options(parser)
    parser.add_argument("--group", action="append", metavar="ID", help="only this group (repeatable)")
    add_format_option(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    ports = frozenset(args.port) if args.port else DEFAULT_PORTS
    stream, _, owned = open_binary_input(args.file)
    try:
        reports = analyse_capture(stream, ports=ports, detect=not args.no_detect, max_frame_size=args.max_frame_size)
    finally:
        if owned:
            stream.close()
    if args.group:
        reports = [r for r in reports if r.group_id in args.group]
    if args.format == "text":
        if not reports:
            print("no consumer group traffic in the capture")
        for report in reports:
            for line in report_lines(report):
                print(line)
        return EXIT_OK
    writer = RecordWriter(sys.stdout, args.format, "groups")
    for report in reports:
        writer.write({"record": "group", **report_dict(report)})
    writer.close(
        {
            "groups": len(reports),
            "generations": sum(len(r.generations) for r in reports),
            "problems": sum(len(r.problems) + sum(len(g.problems) for g in r.generations) for r in reports),
        }
    )
    return EXIT_OK


def _time(ns: Optional[int]) -> str:
    if ns is None:
        return "unknown"
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _ms(value: Optional[float]) -> str:
    return "unknown" if value is None else f"{value:.1f} ms"


def _assignment(value: Any) -> str:
    if value is None:  # a heartbeat answer without an assignment leaves the member's assignment as it was
        return "(unchanged)"
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        return " ".join(f"{t}{sorted(ps)}" for t, ps in sorted(value.items())) or "(nothing)"
    return str(value)


def report_lines(report: GroupReport) -> List[str]:
    """The text block of one group."""
    lines = [
        f"group {report.group_id}  coordinator {report.coordinator}  members {len(report.members)}  "
        f"generations {len(report.generations)}"
        + ("" if report.protocol == "classic" else f"  protocol {report.protocol}")
    ]
    lines.append("  members:")
    for m in report.members.values():
        status = "left" if m.left_ns is not None else "expired" if m.expired else "active"
        extra = f"  instance {m.group_instance_id}" if m.group_instance_id else ""
        errors = (
            "  heartbeat errors " + ", ".join(f"{k}×{n}" for k, n in sorted(m.heartbeat_errors.items()))
            if m.heartbeat_errors
            else ""
        )
        timeouts = f"  session {m.session_timeout_ms:,} ms" if m.session_timeout_ms is not None else ""
        if m.rebalance_timeout_ms is not None:
            timeouts += f"  rebalance {m.rebalance_timeout_ms:,} ms"
        lines.append(f"    {m.member_id}  client {m.client_id}  host {m.host}{extra}{timeouts}  {status}{errors}")
    for g in report.generations:
        lines.append(
            f"  generation {g.generation_id}: {_time(g.start_ns)} -> {_time(g.end_ns)}  "
            f"duration {_ms(g.duration_ms)}  leader {g.leader}  protocol {g.protocol_type}/{g.protocol}  "
            f"members {len(g.members)}"
        )
        for w in g.waited_for:
            lines.append(f"    waited for {w.member_id}: {_ms(w.waited_ms)} ({w.reason})")
        slowest = g.slowest
        if slowest is not None:
            lines.append(
                f"    slowest member: {slowest.member_id} (held the rebalance {_ms(slowest.waited_ms)}: "
                f"{slowest.reason})"
            )
        for member_id, assignment in sorted(g.assignments.items()):
            lines.append(f"    assigned {member_id}: {_assignment(assignment)}")
        for dep in g.departures:
            when = "during the rebalance" if dep.held else "before the rebalance began: held nobody"
            lines.append(f"    {dep.kind}: {dep.member_id} at {_time(dep.time_ns)} ({dep.cause}; {when})")
        for r in g.static_rejoins:
            lines.append(
                f"    static member {r.group_instance_id} restarted without a rebalance at "
                f"{_time(r.time_ns)}: "
                f"{r.old_member} replaced by {r.new_member}, assigned {_assignment(r.assignment)}"
            )
            for gap in r.gaps:
                lines.append(f"      without an owner {gap.topic}[{gap.partition}]: {gap.gap_ms:,.1f} ms")
        for gap in g.owner_gaps:
            lines.append(
                f"    without an owner {gap.topic}[{gap.partition}]: {gap.gap_ms:,.1f} ms "
                f"({gap.old_owner} {gap.from_what} {_time(gap.from_ns)} -> {gap.new_owner} first fetch "
                f"{_time(gap.to_ns)})"
            )
        if g.commits_before:
            lines.append("    committed before: " + _offsets(g.commits_before))
        if g.commits_after:
            lines.append("    committed after: " + _offsets(g.commits_after))
        for d in g.duplicates:
            lines.append(
                f"    PROCESSED TWICE {d.topic}[{d.partition}]: {d.old_owner} had fetched to {d.old_position}, "
                f"{d.new_owner} starts at {d.new_start} ({d.records} records)"
            )
        for problem in g.problems:
            lines.append(f"    ! {problem}")
    if report.heartbeat is not None:
        lines.extend(heartbeat_lines(report))
    for e in report.epochs:
        errors = ("  errors " + ", ".join(f"{k}×{n}" for k, n in sorted(e.errors.items()))) if e.errors else ""
        lines.append(
            f"  member {e.member_id} epoch {e.member_epoch}: {_time(e.first_ns)} -> {_time(e.last_ns)}  "
            f"heartbeats {e.heartbeats}  assignment {_assignment(e.assignment)}{errors}"
        )
    failed = [c for c in report.commits if c.error not in ("NONE", None)]
    # a KIP-848 member's OffsetCommit carries its member epoch where a classic one carries the generation
    label = "generation" if report.heartbeat is None else "member epoch"
    for c in failed:
        lines.append(
            f"  commit refused {c.topic}[{c.partition}]={c.offset} by {c.member_id} ({label} {c.generation}): {c.error}"
        )
    for problem in report.problems:
        lines.append(f"  ! {problem}")
    return lines


def heartbeat_lines(report: GroupReport) -> List[str]:
    """The KIP-848 part of a group's block: epochs, assignments over time, moves."""
    timeline = report.heartbeat
    if timeline is None:
        return []
    lines = ["  group epochs (consumer protocol):"]
    for change in timeline.epochs:
        lines.append(f"    epoch {change.epoch} first seen {_time(change.first_seen_ns)}: {'; '.join(change.causes)}")
    for member_id, steps in timeline.steps.items():
        lines.append(f"  member {member_id}: owned (its heartbeats) / assigned (the coordinator's answers)")
        for s in changed_steps(steps):
            epoch = "unknown" if s.member_epoch is None else str(s.member_epoch)
            error = f"  {s.error}" if s.error not in ("NONE", None) else ""
            note = f"  ({s.note})" if s.note else ""
            owned = "unknown" if s.owned is None else _assignment(s.owned)
            assigned = "unknown" if s.assigned is None else _assignment(s.assigned)
            lines.append(f"    {_time(s.time_ns)}  epoch {s.sent_epoch}->{epoch}  owned {owned}  assigned {assigned}")
            lines[-1] += error + note
    for d in timeline.descriptions:
        lines.append(
            f"  described {_time(d.time_ns)}: {d.state}  group epoch {d.group_epoch}  assignment epoch "
            f"{d.assignment_epoch}  assignor {d.assignor}"
        )
        for dm in d.members:
            lines.append(
                f"    {dm.member_id} ({dm.client_id}) epoch {dm.member_epoch}  assigned {_assignment(dm.assigned)}  "
                f"target {_assignment(dm.target)}"
            )
    for member_id, last in timeline.expired.items():
        lines.append(f"  expired: {member_id} (removed without leaving; last heartbeat {_time(last)})")
    for member_id, t in timeline.fenced.items():
        lines.append(f"  fenced: {member_id} at {_time(t)}")
    for m in timeline.moves:
        lines.append(
            f"  moved {m.topic}[{m.partition}] {m.old_owner} -> {m.new_owner} ({m.cause}): without an owner "
            f"{m.gap_ms:,.1f} ms ({m.from_what} {_time(m.from_ns)} -> {m.to_what} {_time(m.to_ns)})"
        )
        if m.records_twice:
            lines.append(
                f"    PROCESSED TWICE {m.topic}[{m.partition}]: {m.old_owner} had fetched to {m.old_position}, "
                f"committed {'nothing' if m.committed is None else m.committed}, {m.new_owner} starts at "
                f"{m.new_start} ({m.records_twice} records)"
            )
    return lines


def _offsets(offsets: Dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(offsets.items()))
