"""One self-contained HTML file that shows a capture: traffic over time, errors, and each group's rebalances.

Why plotly: its figures are interactive (zoom, hover) and its JavaScript can be written into the page
once, so the file opens offline with no fetch of any kind.  plotly is the optional ``report`` extra:
the core of kproto does not need it, and :func:`require_plotly` says what to install.

What goes in is aggregated (:class:`~kproto.capture.traffic_stats.TrafficStats` buckets; group events
without the routine successful heartbeats), so the page's size depends on the number of buckets, APIs,
topics and group events worth seeing, not on the capture's size; plotly.js itself is about 4.7 MB.

Rebalance timelines: one figure per group, a row per member.  Each generation's rebalance (start to end,
when both are known) is shaded, the time each member waited between the start and its JoinGroup is a bar,
the member the rebalance waited for longest is drawn in red, and the group-protocol exchanges are
marked (errors in their own colour).
"""

from __future__ import annotations

import datetime
import html
from typing import Any, Dict, List, Optional, Sequence

from kproto.capture.groups import GroupReport
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


def _series_figure(go: Any, series: Series, title: str, yaxis: str) -> Any:
    figure = go.Figure()
    x = [_when(t) for t in series.starts_ns]
    for name, values in series.values.items():
        # markers too: a value between two empty buckets has no line to draw
        figure.add_trace(go.Scatter(x=x, y=values, name=name, mode="lines+markers", marker=dict(size=4),
                                    connectgaps=False))
    if not series.values:
        figure.add_annotation(text="nothing of this kind in the capture", showarrow=False,
                              xref="paper", yref="paper", x=0.5, y=0.5)
    figure.update_layout(title=title, yaxis_title=yaxis, height=360, margin=dict(l=60, r=20, t=50, b=40),
                         legend=dict(font=dict(size=10)))
    return figure


def _error_figure(go: Any, series: Series) -> Any:
    figure = go.Figure()
    x = [_when(t) for t in series.starts_ns]
    for name, values in series.values.items():
        points = [(t, v) for t, v in zip(x, values) if v]
        if points:
            figure.add_trace(go.Scatter(x=[p[0] for p in points], y=[name] * len(points), mode="markers",
                                        name=name, text=[f"{int(p[1])}" for p in points],
                                        marker=dict(size=[min(30, 6 + 2 * int(p[1]) ** 0.5) for p in points]),
                                        hovertemplate="%{y}: %{text} at %{x}<extra></extra>"))
    if not figure.data:
        figure.add_annotation(text="no error answers and no capture problems", showarrow=False,
                              xref="paper", yref="paper", x=0.5, y=0.5)
    figure.update_layout(title="Errors and capture problems", height=max(260, 60 + 28 * len(series.values)),
                         margin=dict(l=260, r=20, t=50, b=40), showlegend=False)
    return figure


def _group_figure(go: Any, report: GroupReport) -> Any:
    members = list(report.members)
    figure = go.Figure()
    for gen in report.generations:
        if gen.start_ns is not None and gen.end_ns is not None:
            figure.add_vrect(x0=_when(gen.start_ns), x1=_when(gen.end_ns), fillcolor="orange", opacity=0.18,
                             line_width=0, annotation_text=f"gen {gen.generation_id}: {gen.duration_ms:.0f} ms",
                             annotation_position="top left")
        elif gen.joins_ns:
            first = min(gen.joins_ns.values())
            figure.add_vline(x=_when(first).timestamp() * 1000, line_dash="dot", line_color="gray",
                             annotation_text=f"gen {gen.generation_id}: duration unknown")
        slowest = gen.slowest
        for wait in gen.waited_for:
            if wait.waited_ms is None or gen.start_ns is None:
                continue
            is_slowest = slowest is not None and wait.member_id == slowest.member_id
            figure.add_trace(go.Scatter(
                x=[_when(gen.start_ns), _when(gen.start_ns + int(wait.waited_ms * 1e6))],
                y=[wait.member_id, wait.member_id], mode="lines",
                line=dict(color="crimson" if is_slowest else "goldenrod", width=10 if is_slowest else 5),
                name=f"gen {gen.generation_id} waited for {wait.member_id}",
                hovertemplate=f"gen {gen.generation_id}: waited {wait.waited_ms:.1f} ms ({html.escape(wait.reason)})"
                              "<extra></extra>", showlegend=False))
    kinds: Dict[str, List[Any]] = {}
    for event in report.events:
        if event.request_time_ns is None or event.member_id is None:
            continue
        if event.api in ("Heartbeat", "ConsumerGroupHeartbeat", "OffsetFetch") and event.error == "NONE":
            continue  # routine: thousands in a long capture, nothing to see
        key = event.api if event.error in ("NONE", None) else f"{event.api} {event.error}"
        kinds.setdefault(key, []).append(event)
    for key, events in sorted(kinds.items()):
        failed = " " in key
        figure.add_trace(go.Scatter(
            x=[_when(e.request_time_ns) for e in events], y=[e.member_id for e in events], mode="markers",
            name=key, marker=dict(symbol="x" if failed else "circle", size=9 if failed else 7),
            hovertemplate=f"{html.escape(key)} gen %{{text}} at %{{x}}<extra></extra>",
            text=[str(e.generation) for e in events]))
    figure.update_layout(title=f"Group {report.group_id}: rebalances (coordinator {report.coordinator})",
                         height=140 + 40 * max(1, len(members)), margin=dict(l=260, r=20, t=60, b=40),
                         yaxis=dict(categoryorder="array", categoryarray=members, type="category"))
    return figure


def render_report(stats: TrafficStats, groups: Sequence[GroupReport], *, title: str,
                  max_buckets: int = DEFAULT_MAX_BUCKETS, problems: Optional[List[str]] = None) -> str:
    """The HTML page (a string) for ``stats`` and ``groups``; plotly.js is inlined once."""
    plotly = require_plotly()
    go = plotly.graph_objects
    figures = [
        ("request-rate", _series_figure(go, stats.request_rate(max_buckets), "Requests per second by API", "req/s")),
        ("latency", _series_figure(go, stats.latency_percentiles(max_buckets=max_buckets),
                                   "Latency percentiles by API (request to response)", "ms")),
        ("topic-bytes", _series_figure(go, stats.topic_bytes_series(max_buckets), "Record bytes by topic", "bytes")),
        ("topic-records", _series_figure(go, stats.topic_records_series(max_buckets), "Records by topic", "records")),
        ("errors", _error_figure(go, stats.error_series(max_buckets))),
    ]
    for i, report in enumerate(groups):
        figures.append((f"group-{i}", _group_figure(go, report)))
    parts = [f'<section class="plot" data-kind="{fid.split("-")[0]}">'
             + figure.to_html(full_html=False, include_plotlyjs=False, div_id=fid, config={"responsive": True})
             + "</section>" for fid, figure in figures]
    width_s = stats.bucket_ns(max_buckets) // 1_000_000_000
    summary = (f"{stats.exchanges} exchanges, {stats.problems} problems, {len(groups)} consumer groups; "
               f"buckets of {width_s} s")
    notes = "".join(f"<li>{html.escape(p)}</li>" for p in problems or [])
    group_notes = "".join(
        f"<li>group {html.escape(r.group_id)}: {html.escape(p)}</li>"
        for r in groups for p in r.problems + [q for g in r.generations for q in g.problems])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:1em 2em}section.plot{margin-bottom:1.5em}"
        "h1{font-size:1.4em}</style>"
        f"<script type=\"text/javascript\">{plotly.offline.get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1><p id=\"summary\">{html.escape(summary)}</p>"
        + (f"<h2>Problems</h2><ul id=\"problems\">{notes}{group_notes}</ul>" if notes or group_notes else "")
        + "".join(parts) + "</body></html>\n"
    )
