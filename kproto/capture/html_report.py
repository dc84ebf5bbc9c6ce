"""One self-contained HTML file that shows a capture: traffic over time, errors, and each group's rebalances.

Why plotly: its figures are interactive (zoom, hover) and its JavaScript can be written into the page
once, so the file opens offline with no fetch of any kind.  plotly is the optional ``report`` extra:
the core of kproto does not need it, and :func:`require_plotly` says what to install.

What goes in is aggregated (:class:`~kproto.capture.traffic_stats.TrafficStats` buckets; group events
without the routine successful heartbeats), so the page's size depends on the number of buckets, APIs,
topics and group events worth seeing, not on the capture's size; plotly.js itself is about 4.7 MB.

Colours: every API keeps one colour in every figure, from a palette of 48 distinct colours (beyond 48
APIs, which no capture has, colours repeat); latency is drawn on a logarithmic axis so that one
multi-second JoinGroup does not flatten every other API to zero.

Each group is told as a story: a timeline figure (a row per member; each rebalance shaded, labelled
without overlap; a bar per member the rebalance waited for, the one that held it in red; the
group-protocol exchanges marked, failures as crosses, protocol steps such as MEMBER_ID_REQUIRED as
ordinary marks), then tables: the generations (who joined, left, expired, who was waited for and why),
each generation's assignment, the partitions without an owner and for how long, the records processed
twice, and the commits.
"""

from __future__ import annotations

import datetime
import html
from typing import Any, Dict, List, Optional, Sequence

from kproto.capture.groups import PROTOCOL_STEPS, Generation, GroupReport
from kproto.capture.heartbeat_groups import changed_steps
from kproto.capture.traffic_stats import DEFAULT_MAX_BUCKETS, Series, TrafficStats

__all__ = ["MissingExtra", "require_plotly", "render_report", "PAGE_IDS"]

#: The ids of the page's plot elements (tests and users can find them).
PAGE_IDS = ("request-rate", "latency", "topic-bytes", "topic-records", "errors")

_INSTALL = "pip install 'kproto[report]'"


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def require_plotly() -> Any:
    """The plotly package, or :class:`MissingExtra` saying how to install it."""
    try:
        import plotly
        import plotly.graph_objects  # noqa: F401
        import plotly.offline  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"the HTML report needs plotly: {_INSTALL}") from exc
    return plotly


def _when(ns: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)


def palette(plotly: Any) -> List[str]:
    """48 distinct colours (plotly's Dark24 then Light24)."""
    qualitative = plotly.colors.qualitative
    return list(qualitative.Dark24) + list(qualitative.Light24)


def api_colours(plotly: Any, stats: TrafficStats) -> Dict[str, str]:
    """One colour per API the page draws, the same in every figure."""
    apis = sorted({api for _, api in stats.requests})
    colours = palette(plotly)
    return {api: colours[i % len(colours)] for i, api in enumerate(apis)}


def _series_figure(
    go: Any, series: Series, title: str, yaxis: str, colours: Optional[Dict[str, str]] = None, log: bool = False
) -> Any:
    figure = go.Figure()
    x = [_when(t) for t in series.starts_ns]
    for name, values in series.values.items():
        api, _, quantile = name.rpartition(" ") if name.endswith((" p50", " p99")) else (name, "", "")
        line: Dict[str, Any] = {}
        if colours is not None and api in colours:
            line["color"] = colours[api]
        if quantile == "p99":
            line["dash"] = "dot"
        # markers too: a value between two empty buckets has no line to draw
        figure.add_trace(
            go.Scatter(
                x=x,
                y=values,
                name=name,
                mode="lines+markers",
                marker=dict(size=4),
                line=line,
                connectgaps=False,
                legendgroup=api,
            )
        )
    if not series.values:
        figure.add_annotation(
            text="nothing of this kind in the capture", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5
        )
    figure.update_layout(
        title=title,
        yaxis_title=yaxis + (" (log scale)" if log else ""),
        height=360,
        margin=dict(l=60, r=20, t=50, b=40),
        legend=dict(font=dict(size=10)),
    )
    if log:
        figure.update_yaxes(type="log")
    return figure


def _error_figure(go: Any, series: Series) -> Any:
    figure = go.Figure()
    x = [_when(t) for t in series.starts_ns]
    for name, values in series.values.items():
        points = [(t, v) for t, v in zip(x, values) if v]
        if points:
            figure.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[name] * len(points),
                    mode="markers",
                    name=name,
                    text=[f"{int(p[1])}" for p in points],
                    marker=dict(size=[min(30, 6 + 2 * int(p[1]) ** 0.5) for p in points]),
                    hovertemplate="%{y}: %{text} at %{x}<extra></extra>",
                )
            )
    if not figure.data:
        figure.add_annotation(
            text="no error answers and no capture problems", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5
        )
    figure.update_layout(
        title="Errors and capture problems",
        height=max(260, 60 + 28 * len(series.values)),
        margin=dict(l=260, r=20, t=50, b=40),
        showlegend=False,
    )
    return figure


def _group_figure(go: Any, report: GroupReport) -> Any:
    members = list(report.members)
    figure = go.Figure()
    for i, gen in enumerate(report.generations):
        # labels of neighbouring generations take turns over three heights, so close rebalances stay readable
        label = dict(yshift=-15 * (i % 3), font=dict(size=10))
        if gen.start_ns is not None and gen.end_ns is not None:
            figure.add_vrect(
                x0=_when(gen.start_ns),
                x1=_when(gen.end_ns),
                fillcolor="orange",
                opacity=0.18,
                line_width=0,
                annotation_text=f"gen {gen.generation_id}: {gen.duration_ms:.0f} ms",
                annotation_position="top left",
                annotation=label,
            )
        elif gen.joins_ns:
            first = min(gen.joins_ns.values())
            figure.add_vline(
                x=_when(first).timestamp() * 1000,
                line_dash="dot",
                line_color="gray",
                annotation_text=f"gen {gen.generation_id}: duration unknown",
                annotation=label,
            )
        slowest = gen.slowest
        for wait in gen.waited_for:
            if wait.waited_ms is None or gen.start_ns is None:
                continue
            is_slowest = slowest is not None and wait.member_id == slowest.member_id
            figure.add_trace(
                go.Scatter(
                    x=[_when(gen.start_ns), _when(gen.start_ns + int(wait.waited_ms * 1e6))],
                    y=[wait.member_id, wait.member_id],
                    mode="lines",
                    line=dict(color="crimson" if is_slowest else "goldenrod", width=10 if is_slowest else 5),
                    name=f"gen {gen.generation_id} waited for {wait.member_id}",
                    hovertemplate=f"gen {gen.generation_id}: waited {wait.waited_ms:.1f} ms "
                    f"({html.escape(wait.reason)})<extra></extra>",
                    showlegend=False,
                )
            )
    if report.heartbeat is not None:
        _heartbeat_shapes(go, figure, report)
    departures = [(gen.generation_id, d) for gen in report.generations for d in gen.departures if d.time_ns is not None]
    for kind, symbol in (("left", "triangle-left"), ("expired", "x-thin-open")):
        shown = [(g, d) for g, d in departures if d.kind == kind]
        if shown:
            figure.add_trace(
                go.Scatter(
                    x=[_when(d.time_ns) for _, d in shown if d.time_ns is not None],
                    y=[d.member_id for _, d in shown],
                    mode="markers",
                    name=kind,
                    marker=dict(symbol=symbol, size=12, color="black", line=dict(width=2)),
                    text=[html.escape(f"gen {g}: {d.cause}" + ("" if d.held else "; held nobody")) for g, d in shown],
                    hovertemplate=f"{kind} %{{x}}: %{{text}}<extra></extra>",
                )
            )
    kinds: Dict[str, List[Any]] = {}
    for event in report.events:
        if event.request_time_ns is None or event.member_id is None:
            continue
        if event.api in ("Heartbeat", "ConsumerGroupHeartbeat", "OffsetFetch") and event.error == "NONE":
            continue  # routine: thousands in a long capture, nothing to see
        if event.error in ("NONE", None):
            key = event.api
        elif (event.api, event.error) in PROTOCOL_STEPS:
            key = f"{event.api} ({event.error}, a protocol step)"
        else:
            key = f"{event.api} {event.error}"
        kinds.setdefault(key, []).append(event)
    for key, events in sorted(kinds.items()):
        failed = " " in key and "(" not in key
        figure.add_trace(
            go.Scatter(
                x=[_when(e.request_time_ns) for e in events],
                y=[e.member_id for e in events],
                mode="markers",
                name=key,
                marker=dict(symbol="x" if failed else "circle", size=9 if failed else 7),
                hovertemplate=f"{html.escape(key)} gen %{{text}} at %{{x}}<extra></extra>",
                text=[str(e.generation) for e in events],
            )
        )
    figure.update_layout(
        title=f"Group {report.group_id}: rebalances (coordinator {report.coordinator})",
        height=160 + 40 * max(1, len(members)),
        margin=dict(l=260, r=20, t=80, b=40),
        yaxis=dict(categoryorder="array", categoryarray=members, type="category"),
    )
    return figure


def _heartbeat_shapes(go: Any, figure: Any, report: GroupReport) -> None:
    """KIP-848: a line where each group epoch was first seen, and each moved partition's time without an
    owner as a bar on its new owner's row."""
    timeline = report.heartbeat
    assert timeline is not None
    for i, change in enumerate(timeline.epochs):
        figure.add_vline(
            x=_when(change.first_seen_ns).timestamp() * 1000,
            line_dash="dot",
            line_color="steelblue",
            annotation_text=f"epoch {change.epoch}",
            annotation=dict(yshift=-15 * (i % 3), font=dict(size=10)),
        )
    for move in timeline.moves:
        figure.add_trace(
            go.Scatter(
                x=[_when(move.from_ns), _when(move.to_ns)],
                y=[move.new_owner, move.new_owner],
                mode="lines",
                line=dict(color="crimson" if move.records_twice else "goldenrod", width=6),
                name=f"{move.topic}[{move.partition}] without an owner",
                hovertemplate=f"{html.escape(move.topic)}[{move.partition}] from {html.escape(move.old_owner)} "
                f"({move.cause}): {move.gap_ms:,.1f} ms without an owner, {move.records_twice} records read "
                "twice<extra></extra>",
                showlegend=False,
            )
        )
    expired = [(m, t) for m, t in timeline.expired.items() if m in report.members]
    if expired:
        figure.add_trace(
            go.Scatter(
                x=[_when(t) for _, t in expired],
                y=[m for m, _ in expired],
                mode="markers",
                name="last heartbeat (session expired)",
                marker=dict(symbol="x-thin-open", size=12, color="black", line=dict(width=2)),
            )
        )


def _clock(ns: Optional[int]) -> str:
    return "unknown" if ns is None else _when(ns).strftime("%H:%M:%S.%f")[:-3]


def _ms(value: Optional[float]) -> str:
    return "unknown" if value is None else f"{value:,.1f} ms"


def _parts(value: Any) -> str:
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        return " ".join(f"{t}{sorted(ps)}" for t, ps in sorted(value.items())) or "(nothing)"
    return "unknown" if value is None else str(value)


def _table(table_id: str, caption: str, head: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """An HTML table (cells escaped here), or a paragraph saying ``empty`` when there are no rows."""
    if not rows:
        return f'<p id="{table_id}" class="empty"><b>{html.escape(caption)}</b>: {html.escape(empty)}</p>'
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f'<table id="{table_id}"><caption>{html.escape(caption)}</caption><thead><tr>{header}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


#: What an OffsetCommit's generation field holds, by the group's protocol.
_COMMIT_EPOCH = {"classic": "gen", "consumer": "member epoch", "classic+consumer": "gen / member epoch"}

#: Commits listed per group at most (the rest are counted).
MAX_COMMIT_ROWS = 200


def group_story(index: int, report: GroupReport) -> str:
    """The tables that tell a group's story (see the module docs); ids ``group-<index>-<table>``."""
    gens: List[Generation] = report.generations
    before: List[List[str]] = [[]] + [g.members for g in gens[:-1]]
    rows = []
    for gen, previous in zip(gens, before):
        waits = "; ".join(f"{w.member_id} {_ms(w.waited_ms)} ({w.reason})" for w in gen.waited_for) or "nobody"
        slowest = gen.slowest
        departed = [f"{d.member_id} ({d.cause}{'' if d.held else '; held nobody'})" for d in gen.departures]
        rows.append(
            [
                str(gen.generation_id),
                _clock(gen.start_ns),
                _clock(gen.end_ns),
                _ms(gen.duration_ms),
                str(gen.leader),
                ", ".join(m for m in gen.members if m not in previous) or "-",
                "; ".join(departed) or "-",
                waits,
                slowest.member_id if slowest is not None else "-",
            ]
        )
    parts = [
        f'<section class="group" id="group-{index}-story"><h2>Group {html.escape(report.group_id)}</h2>',
        _table(
            f"group-{index}-generations",
            "Generations",
            ["gen", "start", "end", "duration", "leader", "joined", "left / expired", "waited for (cause)", "held by"],
            rows,
            "no generation",
        ),
    ]
    assignments = [
        [str(g.generation_id), member, _parts(a)] for g in gens for member, a in sorted(g.assignments.items())
    ]
    assignments += [
        [
            str(g.generation_id),
            f"{r.new_member} (static {r.group_instance_id}, replaced {r.old_member})",
            _parts(r.assignment),
        ]
        for g in gens
        for r in g.static_rejoins
    ]
    parts.append(
        _table(
            f"group-{index}-assignments",
            "Assignments",
            ["gen", "member", "partitions"],
            assignments,
            "no assignment in the capture",
        )
    )
    gaps = [
        [
            str(g.generation_id),
            f"{o.topic}[{o.partition}]",
            o.old_owner,
            o.new_owner,
            f"{o.from_what} {_clock(o.from_ns)}",
            _clock(o.to_ns),
            _ms(o.gap_ms),
        ]
        for g in gens
        for o in [*g.owner_gaps, *(x for r in g.static_rejoins for x in r.gaps)]
    ]
    parts.append(
        _table(
            f"group-{index}-gaps",
            "Partitions without an owner",
            ["gen", "partition", "old owner", "new owner", "since", "until (first fetch)", "time"],
            gaps,
            "no partition changed hands between fetches seen in the capture",
        )
    )
    twice = [
        [
            str(g.generation_id),
            f"{d.topic}[{d.partition}]",
            d.old_owner,
            str(d.old_position),
            d.new_owner,
            str(d.new_start),
            str(d.records),
        ]
        for g in gens
        for d in g.duplicates
    ]
    parts.append(
        _table(
            f"group-{index}-twice",
            "Records processed twice",
            ["gen", "partition", "old owner", "had fetched to", "new owner", "starts at", "records"],
            twice,
            "none seen",
        )
    )
    if report.protocol == "consumer":  # no classic member: the generation tables would only say "none"
        del parts[1:]
    if report.heartbeat is not None:
        parts.append(_heartbeat_story(index, report))
    commits = [
        [
            _clock(c.time_ns),
            str(c.member_id),
            str(c.generation),
            f"{c.topic}[{c.partition}]",
            str(c.offset),
            str(c.error),
        ]
        for c in report.commits[:MAX_COMMIT_ROWS]
    ]
    more = len(report.commits) - MAX_COMMIT_ROWS
    parts.append(
        _table(
            f"group-{index}-commits",
            "Commits" + (f" (first {MAX_COMMIT_ROWS}, {more} more)" if more > 0 else ""),
            ["time", "member", _COMMIT_EPOCH[report.protocol], "partition", "offset", "answer"],
            commits,
            "no OffsetCommit",
        )
    )
    parts.append("</section>")
    return "".join(parts)


def _heartbeat_story(index: int, report: GroupReport) -> str:
    """KIP-848 tables: group epochs, each member's owned and assigned partitions, partition moves."""
    timeline = report.heartbeat
    assert timeline is not None
    epochs = [[str(c.epoch), _clock(c.first_seen_ns), "; ".join(c.causes)] for c in timeline.epochs]
    steps = []
    for member_id, member_steps in timeline.steps.items():
        for s in changed_steps(member_steps):
            steps.append(
                [
                    member_id,
                    _clock(s.time_ns),
                    f"{s.sent_epoch} → {'unknown' if s.member_epoch is None else s.member_epoch}",
                    _parts(s.owned),
                    _parts(s.assigned),
                    "; ".join(x for x in (s.error if s.error != "NONE" else "", s.note) if x) or "-",
                ]
            )
    moves = [
        [
            f"{m.topic}[{m.partition}]",
            m.old_owner,
            m.new_owner,
            m.cause,
            f"{m.from_what} {_clock(m.from_ns)}",
            f"{m.to_what} {_clock(m.to_ns)}",
            _ms(m.gap_ms),
            "nothing" if m.committed is None else str(m.committed),
            "unknown" if m.old_position is None else str(m.old_position),
            "unknown" if m.new_start is None else str(m.new_start),
            str(m.records_twice),
        ]
        for m in timeline.moves
    ]
    described = [
        [
            _clock(d.time_ns),
            d.state,
            str(d.group_epoch),
            str(d.assignment_epoch),
            f"{m.member_id} ({m.client_id})",
            str(m.member_epoch),
            _parts(m.assigned),
            _parts(m.target),
        ]
        for d in timeline.descriptions
        for m in d.members
    ]
    return "".join(
        [
            _table(
                f"group-{index}-described",
                "ConsumerGroupDescribe answers (the coordinator's account)",
                ["time", "state", "group epoch", "assignment epoch", "member", "epoch", "assigned", "target"],
                described,
                "no ConsumerGroupDescribe answer in the capture",
            ),
            _table(
                f"group-{index}-epochs",
                "Group epochs (consumer protocol)",
                ["epoch", "first seen", "caused by"],
                epochs,
                "no group epoch in the capture",
            ),
            _table(
                f"group-{index}-members",
                "Members: owned (their heartbeats) and assigned (the coordinator's answers)",
                ["member", "time", "epoch sent → answered", "owned", "assigned", "note"],
                steps,
                "no heartbeat",
            ),
            _table(
                f"group-{index}-moves",
                "Partition moves",
                [
                    "partition",
                    "old owner",
                    "new owner",
                    "cause",
                    "since",
                    "until",
                    "without an owner",
                    "committed",
                    "had fetched to",
                    "starts at",
                    "read twice",
                ],
                moves,
                "no partition changed hands in the capture",
            ),
        ]
    )


def render_report(
    stats: TrafficStats,
    groups: Sequence[GroupReport],
    *,
    title: str,
    max_buckets: int = DEFAULT_MAX_BUCKETS,
    problems: Optional[List[str]] = None,
) -> str:
    """The HTML page (a string) for ``stats`` and ``groups``; plotly.js is inlined once."""
    plotly = require_plotly()
    go = plotly.graph_objects
    colours = api_colours(plotly, stats)
    figures = [
        (
            "request-rate",
            _series_figure(go, stats.request_rate(max_buckets), "Requests per second by API", "req/s", colours),
        ),
        (
            "latency",
            _series_figure(
                go,
                stats.latency_percentiles(max_buckets=max_buckets),
                "Latency percentiles by API (request to response; p99 dotted)",
                "ms",
                colours,
                log=True,
            ),
        ),
        ("topic-bytes", _series_figure(go, stats.topic_bytes_series(max_buckets), "Record bytes by topic", "bytes")),
        ("topic-records", _series_figure(go, stats.topic_records_series(max_buckets), "Records by topic", "records")),
        ("errors", _error_figure(go, stats.error_series(max_buckets))),
    ]
    for i, report in enumerate(groups):
        figures.append((f"group-{i}", _group_figure(go, report)))
    parts = [
        f'<section class="plot" data-kind="{fid.split("-")[0]}">'
        + figure.to_html(full_html=False, include_plotlyjs=False, div_id=fid, config={"responsive": True})
        + "</section>"
        + (group_story(int(fid.split("-")[1]), groups[int(fid.split("-")[1])]) if fid.startswith("group-") else "")
        for fid, figure in figures
    ]
    width_s = stats.bucket_ns(max_buckets) // 1_000_000_000
    summary = (
        f"{stats.exchanges} exchanges, {stats.problems} problems, {len(groups)} consumer groups; buckets of {width_s} s"
    )
    notes = "".join(f"<li>{html.escape(p)}</li>" for p in problems or [])
    group_notes = "".join(
        f"<li>group {html.escape(r.group_id)}: {html.escape(p)}</li>"
        for r in groups
        for p in r.problems + [q for g in r.generations for q in g.problems]
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:1em 2em}section.plot{margin-bottom:1.5em}"
        "h1{font-size:1.4em}h2{font-size:1.2em}table{border-collapse:collapse;margin:0 0 1.2em;font-size:.85em}"
        "caption{text-align:left;font-weight:bold;padding:.3em 0}th,td{border:1px solid #ccc;padding:.2em .5em;"
        "text-align:left;vertical-align:top}th{background:#f3f3f3}</style>"
        f"<script type=\"text/javascript\">{plotly.offline.get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1><p id=\"summary\">{html.escape(summary)}</p>"
        + (f"<h2>Problems</h2><ul id=\"problems\">{notes}{group_notes}</ul>" if notes or group_notes else "")
        + "".join(parts)
        + "</body></html>\n"
    )
