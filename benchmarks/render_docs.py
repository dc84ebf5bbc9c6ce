"""Render ``docs/benchmarks.md`` and the README's headline figures from the benchmarks' saved JSON
(``benchmarks/results/*.json``).

    python benchmarks/render_docs.py            # rewrite docs/benchmarks.md
    python benchmarks/render_docs.py --check    # exit 1 when a document differs from what the JSON gives

Each section is one benchmark: its renderer turns the saved rows into a table, and every table is stamped
with the command that produced it, the run's date and the load average at its start and end, so a figure is
never separated from how it was measured.  A benchmark that has not been run says so instead of a table.
Ratios are computed here from the saved times, never typed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from results import RESULTS_DIR, load  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
README = DOC.parent.parent / "README.md"
# The README's block of headline figures lies between these two lines; the rest of the README is by hand.
README_BEGIN = "<!-- figures: rendered by benchmarks/render_docs.py from benchmarks/results/, do not edit -->"
README_END = "<!-- end of figures -->"

Run = Dict[str, Any]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _num(value: Optional[float], digits: int = 3) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _ratio(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _stamp(run: Run) -> List[str]:
    load = " → ".join(", ".join(f"{x:.2f}" for x in run[k][:1]) for k in ("load_start", "load_end") if run.get(k))
    machine = run.get("machine", {})
    return [
        f"`{run['command']}` — {run['started']}, {machine.get('cpus', '?')} × {machine.get('cpu', '?')}, "
        f"Python {machine.get('python', '?')}, load average (1 min) {load or 'unknown'}."
    ]


def _notes(run: Run) -> List[str]:
    return [f"- {n}" for n in run.get("notes", [])]


# ---------------------------------------------------------------- one renderer per benchmark


def codecs(run: Run) -> List[str]:
    impls: List[str] = []
    for r in run["rows"]:
        if r["impl"] != "kproto" and r["impl"] not in impls:
            impls.append(r["impl"])
    table: Dict[tuple, Dict[str, Any]] = {}
    for r in run["rows"]:
        table.setdefault((r["case"], r["op"]), {})[r["impl"]] = r
    rows = []
    for (case, op), by_impl in table.items():
        own = by_impl.get("kproto")
        rows.append(
            [case, op, _num(own["us_per_op"] if own else None)]
            + [_ratio(by_impl[i]["ratio"]) if i in by_impl else "" for i in impls]
        )
    return (
        ["Generated codecs: µs per operation for kproto, and each peer's time ÷ kproto's (above 1: kproto is faster)."]
        + [""]
        + _table(["case", "op", "kproto µs"] + [f"{i} ×" for i in impls], rows)
    )


_RECORD_PEER = {"kproto-cython": "aiokafka-cython", "kproto-pure": "kafka-python"}
_PEER_OP = {"columns": "decode"}


def records(run: Run) -> List[str]:
    rates: Dict[tuple, Dict[tuple, float]] = {}
    for r in run["rows"]:
        rates.setdefault((r["set"], r["codec"]), {})[(r["impl"], r["op"])] = r["m_per_s"]
    ops = []
    for r in run["rows"]:
        if r["impl"].startswith("kproto") and r["op"] not in ops:
            ops.append(r["op"])
    out = [
        "Record sets: M records/s of kproto's compiled and pure cores, each with its ratio to its peer "
        "(compiled: aiokafka's Cython classes; pure: kafka-python), the peer doing the same operation "
        "(`columns` is kproto's columnar decode against the peer's object decode)."
    ]
    for impl in ("kproto-cython", "kproto-pure"):
        peer = _RECORD_PEER[impl]
        rows = []
        for (rset, codec), by in rates.items():
            cells = []
            for op in ops:
                own = by.get((impl, op))
                other = by.get((peer, _PEER_OP.get(op, op)))
                if own is None:
                    cells.append("")
                else:
                    cells.append(_num(own) + (f" ({own / other:.2f}×)" if other else ""))
            if any(cells):
                rows.append([rset, codec] + cells)
        if rows:
            out += ["", f"**{impl}** (ratio to {peer})", ""] + _table(["set", "codec"] + ops, rows)
    return out


def capture(run: Run) -> List[str]:
    rows = [
        [
            r["era"],
            f"{r['size_mb']:.0f}",
            r["command"],
            f"{r['wall_s']:.2f}",
            f"{r['cpu_s']:.2f}",
            f"{r['tshark_wall_s'] / r['wall_s']:.1f}×",
            f"{r['tshark_cpu_s'] / r['cpu_s']:.1f}×",
        ]
        for r in run["rows"]
    ]
    return (
        [
            "Generated captures decoded by `kproto pcap` against `tshark -T json` on the same file (medians of "
            "the rounds; ratio = tshark time ÷ kproto time)."
        ]
        + [""]
        + _table(["traffic", "MB", "kproto command", "wall s", "CPU s", "vs tshark (wall)", "vs tshark (CPU)"], rows)
    )


def pipelining(run: Run) -> List[str]:
    by = {(r["requests"], r["in_flight"]): r for r in run["rows"]}
    rows = []
    for (kind, window), r in by.items():
        base = by.get((kind, 1))
        rows.append(
            [
                kind,
                str(window),
                _num(r["requests_per_s"]),
                _ratio(r["requests_per_s"] / base["requests_per_s"]) if base else "–",
            ]
        )
    s = run.get("settings", {})
    return (
        [
            f"Requests in flight on one connection (kproto's sans-I/O `ClientConnection`) against the mock broker "
            f"with {s.get('delay_ms', '?')} ms injected per Produce, {s.get('batch', '?')} records per request."
        ]
        + [""]
        + _table(["requests", "in flight", "requests/s", "vs 1 in flight"], rows)
    )


def _round_ratios(run: Run) -> List[float]:
    """The 5-against-1-in-flight ratio of each round of a pipelining-cluster run (one round in older runs)."""
    by: Dict[Any, Dict[int, float]] = {}
    for r in run["rows"]:
        by.setdefault(r.get("round", 1), {})[r["in_flight"]] = r["records_per_s"]
    return [rates[5] / rates[1] for rates in by.values() if 1 in rates and 5 in rates]


def pipelining_cluster(run: Run) -> List[str]:
    base = {r.get("round", 1): r for r in run["rows"] if r["in_flight"] == 1}
    rows = []
    for r in run["rows"]:
        b = base.get(r.get("round", 1))
        rows.append(
            [
                str(r.get("round", 1)),
                r["client"],
                str(r["in_flight"]),
                _num(r["records_per_s"]),
                _ratio(r["records_per_s"] / b["records_per_s"]) if b else "–",
                "yes" if r["order_kept"] else "NO",
            ]
        )
    s = run.get("settings", {})
    engine = s.get("engine", "mock")
    if engine == "mock":
        where = f"a {s.get('brokers', '?')}-broker mock cluster, {s.get('delay_ms', '?')} ms latency at every broker"
    else:
        where = (
            f"a {s.get('brokers', '?')}-node {engine} cluster, three replicas per partition, no injected latency "
            "(Kafka's own, replication included, is what pipelining hides)"
        )
    return (
        [
            f"kproto's `Producer` (idempotent, acks=all) against {where}, {s.get('partitions', '?')} partitions, "
            f"{s.get('batch_bytes', '?')}-byte batches of {s.get('value_size', '?')}-byte records; every partition "
            "read back to check the order records were sent in."
        ]
        + [""]
        + _table(["round", "client", "in flight per broker", "records/s", "vs 1 in flight", "order kept"], rows)
        + ["", _median_gain(run)]
    )


def _median_gain(run: Run) -> str:
    ratios = _round_ratios(run)
    if len(ratios) == 1:
        return f"5 in flight against 1: **{_ratio(ratios[0])}** (one round)."
    return (
        f"5 in flight against 1: **{_ratio(statistics.median(ratios))}**, the median of {len(ratios)} rounds "
        f"({_ratio(min(ratios))} to {_ratio(max(ratios))})."
    )


def broker_ingest(run: Run) -> List[str]:
    rows = [
        [
            r["path"],
            _num(r["messages_per_s"]),
            "–" if r.get("broker_us_per_request") is None else f"{r['broker_us_per_request']:.0f}",
        ]
        for r in run["rows"]
    ]
    s = run.get("settings", {})
    return (
        [
            f"The mock broker ingesting Produce v{s.get('produce_version', '?')} requests of {s.get('batch', '?')} "
            f"records (RecordBatch v2) from one pipelined kproto connection."
        ]
        + [""]
        + _table(["path", "records/s", "broker µs per request"], rows)
    )


def spark(run: Run) -> List[str]:
    rows = [
        [
            r["inputs"],
            f"{r['input_mb']:.0f}",
            r["path"],
            "–" if r["start_s"] is None else f"{r['start_s']:.1f}",
            f"{r['run_s']:.2f}",
            f"{r['mb_per_s']:.1f}",
            _ratio(r["vs_single"]),
        ]
        for r in run["rows"]
    ]
    return (
        ["The Spark job against the single-process pipeline on the same captures (start-up excluded)."]
        + [""]
        + _table(["input", "MB", "path", "start s", "run s", "MB/s", "vs single process"], rows)
    )


def abuse(run: Run) -> List[str]:
    keys: List[str] = []
    for r in run["rows"]:
        keys += [k for k in r if k != "scenario" and k not in keys]
    rows = [[r["scenario"]] + [str(r.get(k, "")) for k in keys] for r in run["rows"]]
    return (
        [
            "Hostile-peer scenarios of [reliability.md](reliability.md#budgets-of-the-running-tools): what each "
            "costs the broker or the CLI."
        ]
        + [""]
        + _table(["scenario"] + keys, rows)
    )


def client(run: Run) -> List[str]:
    keys: List[str] = []
    for r in run["rows"]:
        keys += [k for k in r if k not in keys]
    rows = [[_num(r[k]) if isinstance(r.get(k), float) else str(r.get(k, "")) for k in keys] for r in run["rows"]]
    return ["Clients producing and consuming through one broker."] + [""] + _table(keys, rows)


def fidelity(run: Run) -> List[str]:
    apis = [r for r in run["rows"] if r["kind"] == "api"]
    documented = [r for r in run["rows"] if r["kind"] == "documented"]
    agreed, compared = sum(r["agreed"] for r in apis), sum(r["compared"] for r in apis)
    s = run.get("settings", {})
    rows = [[r["name"], f"{r['agreed']:,}", f"{r['compared']:,}"] for r in apis]
    rows.append(["all", f"{agreed:,}", f"{compared:,}"])
    return (
        [
            f"Answers of the mock broker and of Apache Kafka {' and '.join(s.get('releases', []))} to the corpus of "
            "`kproto.testing.fidelity_scenarios`, compared field by field (docs/broker.md: what is normalised); "
            f"{s.get('undocumented', '?')} differing fields are undocumented."
        ]
        + [""]
        + _table(["api", "fields agreeing", "fields compared"], rows)
        + ["", "Differing fields per documented difference (docs/broker.md):", ""]
        + _table(["documented difference", "fields"], [[r["name"], f"{r['compared']:,}"] for r in documented])
    )


def _failover_log(r: Optional[Run]) -> str:
    if r is None:
        return "–"
    if r.get("failed"):
        return f"FAILED: {str(r['failed'])[:80]}"
    if r["scenario"] == "produce":
        order = "in order" if r["order_kept"] else "OUT OF ORDER"
        return f"{r['stored']} stored, {r['lost']} lost, {r['duplicated']} duplicated, {order}"
    resumed = "resumed from the commits" if r["resumed"] else "did NOT resume from the commits"
    return f"{r['consumed']} read, {r['lost']} lost, {r['duplicated']} duplicated; {resumed}"


def cluster_failover(run: Run) -> List[str]:
    mock = {(r["client"], r["scenario"]): r for r in run["rows"] if r["engine"] == "mock"}
    kafka = {(r["client"], r["scenario"]): r for r in run["rows"] if r["engine"] != "mock"}
    failures = {"produce": "leader stopped mid-produce", "consume": "coordinator stopped mid-consume"}
    rows = []
    for key in sorted(set(mock) | set(kafka), key=lambda k: (k[1] != "produce", k[0])):
        pair = (mock.get(key), kafka.get(key))
        rows.append(
            [key[0], failures[key[1]]]
            + [(r.get("errors") or "none logged") if r else "–" for r in pair]
            + [_failover_log(r) for r in pair]
            + ["–" if r is None or r.get("recovery_ms") is None else str(r["recovery_ms"]) for r in pair]
        )
    s = run.get("settings", {})
    return (
        [
            f"Each client at its defaults (idempotence and acks=all for producers) on a three-node mock cluster and "
            f"on a three-node Apache Kafka {s.get('kafka', '?')}, {s.get('records', '?')} records over "
            f"{s.get('partitions', '?')} partitions with {s.get('replicas', '?')} replicas "
            "([the scenarios](broker.md#clients-through-failures-against-apache-kafka)). Errors: the Kafka error "
            "names the client logged, however spelled, and `connection` for a refused or lost connection. "
            "Recovery: produce, from the stop to the first acknowledgement on the stopped leader's partition; "
            "consume, the first commit after the coordinator's node stopped."
        ]
        + [""]
        + _table(
            [
                "client",
                "failure",
                "errors logged, mock",
                "errors logged, Kafka",
                "log or group, mock",
                "log or group, Kafka",
                "recovery ms, mock",
                "recovery ms, Kafka",
            ],
            rows,
        )
    )


#: (results file stem, section title, renderer), in the document's order.
SECTIONS: List[tuple] = [
    ("codecs", "Generated codecs, compiled", codecs),
    ("codecs-pure", "Generated codecs, pure Python", codecs),
    ("records", "Record sets", records),
    ("client", "Clients against the mock broker", client),
    ("client-apache-kafka", "Clients against Apache Kafka", client),
    ("pipelining", "Pipelining", pipelining),
    ("pipelining-cluster", "Pipelining to a mock cluster", pipelining_cluster),
    ("pipelining-cluster-apache-kafka", "Pipelining to an Apache Kafka cluster", pipelining_cluster),
    ("cluster-failover", "Clients through cluster failures: the mock against Apache Kafka", cluster_failover),
    ("broker_ingest", "Mock broker ingest", broker_ingest),
    ("capture", "Capture decoding", capture),
    ("spark", "Spark", spark),
    ("abuse", "Hostile peers", abuse),
    ("fidelity", "Fidelity to Apache Kafka", fidelity),
]


def render(directory: Optional[Path] = None) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Rendered by `python benchmarks/render_docs.py` from the JSON each benchmark writes to `benchmarks/results/`;",
        "do not edit by hand.  Every table names the command that produced it, when it ran and the machine's load:",
        "absolute figures move with the machine and its load, ratios measured in one run much less.  Peers run at",
        "their defaults unless a row says which settings were equalised.",
    ]
    for name, title, renderer in SECTIONS:
        lines += ["", f"## {title}", ""]
        run = load(name, directory)
        if run is None:
            lines.append(f"Not run yet: `benchmarks/results/{name}.json` is missing.")
            continue
        lines += _stamp(run) + [""] + renderer(run)
        notes = _notes(run)
        if notes:
            lines += [""] + notes
    return "\n".join(lines) + "\n"


def _in_flight_gain(run: Run) -> Optional[str]:
    """What 5 in flight gained over 1 in a pipelining-cluster run, None when it has no complete round."""
    ratios = _round_ratios(run)
    if not ratios:
        return None
    fastest = max(r["records_per_s"] for r in run["rows"] if r["in_flight"] == 5)
    return f"{_median_gain(run)[:-1]}; up to {_num(fastest)} records/s"


def readme_figures(directory: Optional[Path] = None) -> str:
    """The README's headline figures: the pipelining gain of kproto's producer on three brokers."""
    mock = load("pipelining-cluster", directory)
    kafka = load("pipelining-cluster-apache-kafka", directory)
    lines = [README_BEGIN]
    for run, where in (
        (mock, "a 3-broker mock cluster with {delay} ms injected per request"),
        (kafka, "a 3-node {engine} cluster (no injected latency)"),
    ):
        gain = None if run is None else _in_flight_gain(run)
        if run is None or gain is None:
            continue
        s = run.get("settings", {})
        text = where.format(delay=_num(s.get("delay_ms")), engine=s.get("engine", "Apache Kafka"))
        machine_load = " → ".join(f"{run[k][0]:.2f}" for k in ("load_start", "load_end") if run.get(k))
        lines.append(
            f"- {text}, {s.get('partitions', '?')} partitions: {gain} "
            f"(`{run['command']}`, {run['started']}, load average {machine_load or 'unknown'})."
        )
    lines.append(README_END)
    return "\n".join(lines)


def render_readme(text: str, directory: Optional[Path] = None) -> str:
    """``text`` (the README) with its block of figures rendered again."""
    head, begin, rest = text.partition(README_BEGIN)
    if not begin:
        raise SystemExit(f"{README}: no line {README_BEGIN!r}")
    _, end, tail = rest.partition(README_END)
    if not end:
        raise SystemExit(f"{README}: no line {README_END!r} after the figures")
    return head + readme_figures(directory) + tail


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when docs/benchmarks.md is out of date")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where the JSON files are")
    args = parser.parse_args(argv)
    outputs = {DOC: render(args.results), README: render_readme(README.read_text(), args.results)}
    if args.check:
        stale = [path for path, text in outputs.items() if not path.is_file() or path.read_text() != text]
        for path in stale:
            print(f"{path} is out of date: run python benchmarks/render_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
