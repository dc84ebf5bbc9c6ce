"""The HTML report: aggregation (kproto.capture.traffic_stats), the page (kproto.capture.html_report),
and the page rendered in a real headless browser (Debian's chromium) without console errors."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from kproto.capture.conversation import decode_capture
from kproto.capture.groups import analyse_groups
from kproto.capture.html_report import PAGE_IDS, MissingExtra, render_report, require_plotly
from kproto.capture.traffic_stats import TrafficStats, percentile, _bin
from test_groups_analysis import SAMPLES, modern_capture, slow_member_capture


def stats_of(path: Path) -> TrafficStats:
    stats = TrafficStats()
    for record in decode_capture(path):
        stats.feed(record)
    return stats


def test_latency_histogram_percentiles_are_within_one_bin() -> None:
    histogram: dict = {}
    latencies_ms = [1.0] * 50 + [10.0] * 49 + [250.0]
    for ms in latencies_ms:
        b = _bin(int(ms * 1e6))
        histogram[b] = histogram.get(b, 0) + 1
    p50, p99, p100 = (percentile(histogram, q) for q in (0.5, 0.99, 1.0))
    assert p50 is not None and 1.0 <= p50 < 1.0 * 10 ** (1 / 20) + 1e-9
    assert p99 is not None and 10.0 <= p99 < 10.0 * 10 ** (1 / 20) + 1e-9
    assert p100 is not None and 250.0 <= p100 < 250.0 * 10 ** (1 / 20) + 1e-9
    assert percentile({}, 0.5) is None


def test_buckets_are_bounded_and_counts_add_up(tmp_path: Path) -> None:
    path, _ = slow_member_capture(tmp_path)
    stats = stats_of(path)
    rate = stats.request_rate(max_buckets=7)
    assert len(rate.starts_ns) <= 7
    width_s = rate.bucket_ns / 1e9
    total = sum(v or 0 for values in rate.values.values() for v in values) * width_s
    assert round(total) == stats.exchanges
    errors = stats.error_series(max_buckets=7)
    assert "Heartbeat REBALANCE_IN_PROGRESS" not in errors.values  # how a member learns of a rebalance
    steps = stats.protocol_step_series(max_buckets=7)
    assert sum(v or 0 for v in steps.values["Heartbeat REBALANCE_IN_PROGRESS"]) >= 1


def test_records_and_bytes_per_topic(tmp_path: Path) -> None:
    stats = stats_of(modern_capture(tmp_path))
    records = stats.topic_records_series()
    assert sum(v or 0 for v in records.values["parcels"]) == 20  # one Fetch answer of 20 records
    assert sum(v or 0 for v in stats.topic_bytes_series().values["parcels"]) > 0
    fetch = stats_of(SAMPLES / "fetch.pcap").topic_records_series()
    assert sum(v or 0 for series in fetch.values.values() for v in series) > 0


def page(tmp_path: Path) -> str:
    path, _ = slow_member_capture(tmp_path)
    records = list(decode_capture(path))
    stats = TrafficStats()
    for record in records:
        stats.feed(record)
    return render_report(stats, analyse_groups(records), title="slow member")


def test_page_is_self_contained(tmp_path: Path) -> None:
    html = page(tmp_path)
    for pid in PAGE_IDS + ("group-0",):
        assert f'id="{pid}"' in html
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)=', html)
    assert len(html) < 6_000_000  # plotly.js (~4.7 MB) and aggregated data


def test_missing_plotly_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(MissingExtra, match=r"pip install 'kproto\[report\]'"):
        require_plotly()


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "chromium is required for the browser test (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + ": scripts/test installs it")
        pytest.skip(message)
    return path


def run_chromium(tmp_path: Path, name: str, args: List[str]) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{name}"
    profile.mkdir()
    return subprocess.run(
        [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=180
    )


@pytest.mark.compiled_only
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    capture, _ = slow_member_capture(tmp_path)
    subprocess.run(
        [str(Path(sys.executable).with_name("kproto")), "report", str(capture), "-o", str(out), "--no-progress"],
        check=True,
        capture_output=True,
    )
    # the page as written, plus a probe at its end that lists every resource the page fetched
    probed = tmp_path / "probed.html"
    probed.write_text(out.read_text(encoding="utf-8") + FETCH_PROBE, encoding="utf-8")
    dom = run_chromium(
        tmp_path,
        "dom",
        [
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            probed.as_uri(),
        ],
    )
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # chromium logs every console message (errors, exceptions) this way
    assert '<pre id="fetched">[]</pre>' in dom.stdout  # nothing fetched
    # every figure was drawn by plotly.js: one plot container with its SVG per figure
    ids = PAGE_IDS + ("group-0",)
    for pid in ids:
        assert re.search(rf'<div id="{pid}" class="plotly-graph-div[^"]*js-plotly-plot', dom.stdout), pid
    assert dom.stdout.count('class="main-svg"') >= 2 * len(ids)
    assert "consumer-a-1" in dom.stdout  # the rebalance timeline's member rows
    shot = tmp_path / "report.png"
    run_chromium(
        tmp_path,
        "shot",
        ["--window-size=1280,2600", "--virtual-time-budget=10000", f"--screenshot={shot}", out.as_uri()],
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a blank page of this size is ~10 KB


#: Appended to a copy of a page: after load, writes the URLs of every resource the page fetched into the DOM.
FETCH_PROBE = (
    "<script>window.addEventListener('load', function () { setTimeout(function () {"
    "var p = document.createElement('pre'); p.id = 'fetched'; p.textContent = JSON.stringify("
    "performance.getEntriesByType('resource').map(function (e) { return e.name; }));"
    "document.body.appendChild(p); }, 500); });</script>"
)


@pytest.mark.compiled_only
def test_bad_browser_page_is_caught(tmp_path: Path) -> None:
    """The checks above can fail: a script error reaches the console log, a fetch the probe's list."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<html><body><script src='https://cdn.example.invalid/x.js'></script>"
        "<script>undefinedFunction();</script></body></html>" + FETCH_PROBE
    )
    dom = run_chromium(
        tmp_path,
        "bad",
        [
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            bad.as_uri(),
        ],
    )
    assert any(":CONSOLE" in line and "undefinedFunction" in line for line in dom.stderr.splitlines())
    assert "cdn.example.invalid" in dom.stdout.split('<pre id="fetched">', 1)[1]


#: Appended to a copy of a page: after load, writes what plotly drew (trace names and colours per figure)
#: into the DOM, read from the figure divs plotly.js rendered.
FIGURE_PROBE = (
    "<script>window.addEventListener('load', function () { setTimeout(function () {"
    "var out = {}; document.querySelectorAll('.js-plotly-plot').forEach(function (d) {"
    "out[d.id] = (d.data || []).map(function (t) { return [t.name, (t.line || {}).color || null,"
    " t.visible === undefined ? true : t.visible]; }); });"
    "out.yaxis_latency = document.getElementById('latency').layout.yaxis.type;"
    "var p = document.createElement('pre'); p.id = 'drawn'; p.textContent = JSON.stringify(out);"
    "document.body.appendChild(p); }, 500); });</script>"
)


def report_drawn(tmp_path: Path, capture: Path) -> Tuple[subprocess.CompletedProcess, Dict[str, Any]]:
    """``kproto report`` of ``capture`` rendered in chromium: the dumped page, and what each figure drew
    (FIGURE_PROBE); no console message allowed."""
    out = tmp_path / "report.html"
    command = [str(Path(sys.executable).with_name("kproto")), "report", str(capture), "-o", str(out), "--no-progress"]
    subprocess.run(command, check=True, capture_output=True)
    probed = tmp_path / "probed.html"
    probed.write_text(out.read_text(encoding="utf-8") + FIGURE_PROBE, encoding="utf-8")
    flags = ["--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", "--host-resolver-rules=MAP * ~NOTFOUND"]
    dom = run_chromium(tmp_path, "story", [*flags, "--dump-dom", probed.as_uri()])
    assert [line for line in dom.stderr.splitlines() if ":CONSOLE" in line] == []
    found = re.search(r'<pre id="drawn">(.*?)</pre>', dom.stdout, re.S)
    assert found is not None
    return dom, json.loads(html.unescape(found.group(1)))


@pytest.mark.compiled_only
def test_report_story_in_headless_chromium(tmp_path: Path) -> None:
    """librdkafka's capture: 12 APIs, its Fetch v16 names the topic by id, its group rebalances once."""
    dom, drawn = report_drawn(tmp_path, SAMPLES / "modern" / "librdkafka-produce-consume.pcap")
    # one series per topic: Produce names it, Fetch v16 gives its id, the capture's Metadata maps one to the other
    assert [name for name, _, _ in drawn["topic-bytes"]] == ["modern"]
    assert [name for name, _, _ in drawn["topic-records"]] == ["modern"]
    # every API drawn has a colour of its own, and keeps it in the latency figure
    rates = {name: colour for name, colour, _ in drawn["request-rate"]}
    assert len(rates) == 12 and None not in rates.values()
    assert len(set(rates.values())) == len(rates)
    for name, colour, _ in drawn["latency"]:
        assert colour == rates[name.rsplit(" ", 1)[0]]
    assert drawn["yaxis_latency"] == "log"
    # the group's story: its figure and its tables, rendered
    assert "group-0" in drawn
    assert not any("MEMBER_ID_REQUIRED" in name and "protocol step" not in name for name, _, _ in drawn["group-0"])
    for table in ("generations", "assignments", "gaps", "twice", "commits"):
        assert f'id="group-0-{table}"' in dom.stdout, table
    assert re.search(
        r'<table id="group-0-assignments">.*librdkafka-consumer-[^<]*</td><td>modern\[0, 1\]</td>', dom.stdout, re.S
    )


def test_topic_named_by_id_is_one_series_with_its_name() -> None:
    """librdkafka's Fetch v16 names topic ``modern`` by id, its Produce by name; its Metadata v12 answers
    map one to the other, so bytes and records are one series; an id no Metadata names stays an id."""
    stats = stats_of(SAMPLES / "modern" / "librdkafka-produce-consume.pcap")
    assert list(stats.topic_bytes_series().values) == ["modern"]
    assert list(stats.topic_records_series().values) == ["modern"]
    (topic_id,) = stats.topic_names.by_id
    assert stats.topic_label(topic_id) == "modern"
    stats.topic_names.by_id.clear()
    assert sorted(stats.topic_records_series().values) == ["modern", f"topic id {topic_id}"]
    assert "JoinGroup MEMBER_ID_REQUIRED" not in stats.error_series().values
    assert "JoinGroup MEMBER_ID_REQUIRED" in stats.protocol_step_series().values


@pytest.mark.compiled_only
def test_kip848_group_in_headless_chromium(tmp_path: Path) -> None:
    """The KIP-848 sample: a classic group and a consumer-protocol group, the latter with its
    ConsumerGroupDescribe answers, its epochs, its members' owned and assigned partitions and its partition
    moves, drawn without console errors."""
    dom, drawn = report_drawn(tmp_path, SAMPLES / "modern" / "kip848-session-expiry.pcap")
    assert "group-0" in drawn and "group-1" in drawn  # classic-group, kip848-group
    # each moved partition's time without an owner is a bar on its new owner's row
    assert sorted(n for n, _, _ in drawn["group-1"] if "without an owner" in n) == [
        f"orders[{p}] without an owner" for p in range(4)
    ]
    for table in ("generations", "assignments", "gaps", "twice"):  # a consumer-protocol group has none
        assert f'id="group-0-{table}"' in dom.stdout and f'id="group-1-{table}"' not in dom.stdout, table
    assert re.search(r'<table id="group-1-commits">.*?<th>member epoch</th>', dom.stdout, re.S)
    for table in ("described", "epochs", "members", "moves"):
        assert f'<table id="group-1-{table}">' in dom.stdout, table
        assert f'id="group-0-{table}"' not in dom.stdout, table
    epochs = re.search(r'<table id="group-1-epochs">(.*?)</table>', dom.stdout, re.S)
    assert epochs is not None and len(re.findall(r"<tr><td>", epochs.group(1))) == 3
    assert "session expired" in epochs.group(1)
    moves = re.search(r'<table id="group-1-moves">(.*?)</table>', dom.stdout, re.S)
    assert moves is not None
    rows = re.findall(r"<tr><td>(orders\[\d\])</td>.*?<td>(revoked|session expired)</td>", moves.group(1))
    assert sorted(rows) == [
        ("orders[0]", "session expired"),
        ("orders[1]", "session expired"),
        ("orders[2]", "revoked"),
        ("orders[3]", "revoked"),
    ]
