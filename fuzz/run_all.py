"""Run every fuzz harness: replay its committed corpus, then fuzz it for a bounded time.

    python fuzz/run_all.py                     # every harness, 20 s each (CI)
    python fuzz/run_all.py --seconds 120       # a longer campaign
    python fuzz/run_all.py --only message_sets --seconds 600

For each harness, ``fuzz/fuzz_<name>.py --replay fuzz/corpus/<name>`` runs the committed inputs through
the oracles without atheris, then atheris fuzzes for ``--seconds`` with the committed corpus as seeds.
New inputs go to a scratch directory (``--work-dir``, default a temporary one), never into
``fuzz/corpus``; crashes, timeouts and out-of-memory inputs go to ``--artifacts`` (default
``fuzz/artifacts``, created only when something is found).  A table of executions, coverage (libFuzzer's
``cov``: covered edges of kproto's Python code and, when ``fuzz/build_native.py`` has run, of the
Cython extensions; ``ft``: features) and findings is printed, and written as JSON with ``--json``.
Exit status 1 when any replay fails or any harness finds a crash.

Harnesses run one after another (one core).  ``-timeout`` is a wall-clock backstop for hangs
(``--timeout``, default 10 s); the 1 s CPU budget per input is checked inside the oracles, which is
robust on a loaded machine.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")
HARNESSES = [
    "request_frames",
    "response_frames",
    "message_sets",
    "capture_files",
    "tcp_reassembly",
    "hex_input",
    "broker_requests",
]
#: libFuzzer -max_len per harness (inputs beyond it are not generated; seeds may be longer).
MAX_LEN = {"capture_files": 8192, "hex_input": 4096}
_DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")
_STATUS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+)")
_STAT = re.compile(r"stat::(\w+):\s+(\d+)")


def replay(name: str, python: str) -> Dict[str, object]:
    corpus = os.path.join(FUZZ, "corpus", name)
    proc = subprocess.run(
        [python, os.path.join(FUZZ, f"fuzz_{name}.py"), "--replay", corpus], capture_output=True, text=True
    )
    m = re.search(r"replayed (\d+) inputs, (\d+) failed", proc.stderr)
    ok = proc.returncode == 0
    if not ok:
        sys.stderr.write(proc.stderr[-4000:])
    return {"replayed": int(m.group(1)) if m else 0, "replay_failures": int(m.group(2)) if m else -1, "replay_ok": ok}


def fuzz(
    name: str, python: str, seconds: int, timeout: int, work: str, artifacts: str, extra: List[str]
) -> Dict[str, object]:
    corpus = os.path.join(FUZZ, "corpus", name)
    scratch = os.path.join(work, name)
    os.makedirs(scratch, exist_ok=True)
    prefix_dir = tempfile.mkdtemp(prefix=f"artifacts-{name}-", dir=work)
    cmd = [
        python,
        os.path.join(FUZZ, f"fuzz_{name}.py"),
        f"-max_total_time={seconds}",
        f"-timeout={timeout}",
        "-rss_limit_mb=2048",
        f"-max_len={MAX_LEN.get(name, 4096)}",
        "-print_final_stats=1",
        f"-artifact_prefix={prefix_dir}/",
        *extra,
        scratch,
        corpus,
    ]
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.time() - started
    log = proc.stderr + proc.stdout
    result: Dict[str, object] = {"seconds": round(elapsed, 1), "exit": proc.returncode}
    m = _DONE.search(log) or (list(_STATUS.finditer(log)) or [None])[-1]
    if m:
        result.update(executions=int(m.group(1)), cov=int(m.group(2)), ft=int(m.group(3)), corpus=int(m.group(4)))
    for key, value in _STAT.findall(log):
        result[key] = int(value)
    if "number_of_executed_units" in result:
        result["executions"] = result["number_of_executed_units"]
    native = re.search(r"native coverage for (\d+) extension", log)
    result["native_modules"] = int(native.group(1)) if native else 0
    found = sorted(glob.glob(os.path.join(prefix_dir, "*")))
    kept = []
    if found:
        os.makedirs(artifacts, exist_ok=True)
        for path in found:
            dest = os.path.join(artifacts, f"{name}-{os.path.basename(path)}")
            shutil.move(path, dest)
            kept.append(os.path.relpath(dest, ROOT))
        log_path = os.path.join(artifacts, f"{name}.log")
        with open(log_path, "w") as f:
            f.write(log)
        kept.append(os.path.relpath(log_path, ROOT))
    shutil.rmtree(prefix_dir, ignore_errors=True)
    result["crashes"] = len([p for p in found])
    result["artifacts"] = kept
    if proc.returncode != 0 and not found:
        result["crashes"] = 1  # died without an artifact (e.g. a harness error): count it, show the log
        sys.stderr.write(log[-4000:])
    return result


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20, help="fuzzing time per harness (default 20)")
    parser.add_argument("--only", nargs="*", choices=HARNESSES, help="run only these harnesses")
    parser.add_argument("--timeout", type=int, default=10, help="libFuzzer -timeout, wall seconds per input")
    parser.add_argument("--no-replay", action="store_true")
    parser.add_argument("--no-fuzz", action="store_true", help="only replay the corpora")
    parser.add_argument("--work-dir", help="where new corpus entries go (default: a temporary directory)")
    parser.add_argument("--artifacts", default=os.path.join(FUZZ, "artifacts"))
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("libfuzzer_args", nargs="*", help="extra libFuzzer flags, after --")
    args = parser.parse_args(argv)
    names = args.only or HARNESSES
    work = args.work_dir or tempfile.mkdtemp(prefix="kproto-fuzz-")
    os.makedirs(work, exist_ok=True)
    results: Dict[str, Dict[str, object]] = {}
    failed = False
    for name in names:
        row: Dict[str, object] = {}
        if not args.no_replay:
            row.update(replay(name, args.python))
            failed |= not row["replay_ok"]
        if not args.no_fuzz:
            row.update(fuzz(name, args.python, args.seconds, args.timeout, work, args.artifacts, args.libfuzzer_args))
            failed |= bool(row["crashes"])
        results[name] = row
        print(_line(name, row), flush=True)
    print(_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds_per_harness": args.seconds, "harnesses": results}, f, indent=2, sort_keys=True)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def _line(name: str, row: Dict[str, object]) -> str:
    parts = [f"{name}:"]
    if "replayed" in row:
        parts.append(f"replayed {row['replayed']} ({row['replay_failures']} failed)")
    if "exit" in row:
        parts.append(
            f"{row.get('executions', '?')} execs in {row['seconds']} s, cov {row.get('cov', '?')}, "
            f"ft {row.get('ft', '?')}, corpus {row.get('corpus', '?')}, native modules "
            f"{row.get('native_modules')}, crashes {row['crashes']}"
        )
        if row.get("artifacts"):
            parts.append("-> " + ", ".join(row["artifacts"]))  # type: ignore[arg-type]
    return " ".join(parts)


def _table(results: Dict[str, Dict[str, object]]) -> str:
    head = f"{'harness':<18}{'replayed':>9}{'execs':>10}{'cov':>7}{'ft':>7}{'corpus':>8}{'crashes':>9}"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        lines.append(
            f"{name:<18}{r.get('replayed', '-')!s:>9}{r.get('executions', '-')!s:>10}{r.get('cov', '-')!s:>7}"
            f"{r.get('ft', '-')!s:>7}{r.get('corpus', '-')!s:>8}{r.get('crashes', '-')!s:>9}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
