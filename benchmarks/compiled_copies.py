"""What compiling each hand-written codec-path module buys: the codec benchmark's kproto cases, timed with
every compiled copy (``kproto/_compiled/{wire,record_set,framing}``, see ``setup.py``) and with one or all
of them left out, so that their source module runs as Python instead.

    python benchmarks/compiled_copies.py [--rounds 7] [--only TEXT]

Each variant runs in its own process (a module is loaded once per process): the process keeps the copies
left out from importing, and :func:`kproto._backend.adopt_compiled_copy` then leaves their source in place.
``kproto._compiled.message_base`` is never left out: the compiled codecs' classes extend its extension types,
so without it no compiled codec imports (the pure path's figures are ``KPROTO_PURE=1 benchmarks/codecs.py``).
Rounds run every variant once each, in an order rotated by one place per round, so drift in the machine's
load reaches all alike; an operation's time in one process is the best of 5 ``timeit`` loops of about
20 ms of CPU time each (``time.process_time``: time spent waiting for a core does not count).  The table gives,
per operation, the time with every copy compiled and, per variant, the median over rounds of
(variant's time / that round's time with every copy), with the lowest and highest such ratio.
"""

from __future__ import annotations

import argparse
import importlib.abc
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from types import FunctionType
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: Variant name → the compiled copies it leaves out.
VARIANTS = {
    "all compiled": (),
    "wire from source": ("wire",),
    "record_set from source": ("record_set",),
    "framing from source": ("framing",),
    "all three from source": ("wire", "record_set", "framing"),
}


class _LeaveOut(importlib.abc.MetaPathFinder):
    """Refuses the compiled copies a variant leaves out (this benchmark's worker process only)."""

    def __init__(self, leaves: Sequence[str]) -> None:
        self.names = {"kproto._compiled." + leaf for leaf in leaves}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name in self.names:
            raise ImportError(f"{name} is left out by this variant")
        return None


def _best(fn: Callable[[], Any], repeat: int = 5, min_time: float = 0.02) -> float:
    timer = timeit.Timer(fn, timer=time.process_time)
    number = 1
    while True:  # calls enough for 5 ms, then scaled to ``min_time``
        elapsed = timer.timeit(number)
        if elapsed >= 0.005:
            break
        number *= 4
    number = max(1, int(number * min_time / elapsed))
    return min(timer.repeat(repeat=repeat, number=number)) / number


def worker(variant: str, only: Optional[str]) -> Dict[str, float]:
    """Seconds per call of every kproto operation of ``benchmarks/codecs.py`` in this process."""
    sys.meta_path.insert(0, _LeaveOut(VARIANTS[variant]))
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import importlib.util

    import kproto.framing

    # By path: the name ``codecs`` is the standard library's.
    spec = importlib.util.spec_from_file_location("codecs_benchmark", os.path.join(HERE, "codecs.py"))
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    left_out = {leaf for leaf in ("wire", "record_set", "framing") if f"kproto._compiled.{leaf}" not in sys.modules}
    assert left_out == set(VARIANTS[variant]), (variant, left_out)
    assert isinstance(kproto.framing.encode_request, FunctionType) == ("framing" in left_out)
    times = {}
    for name, wire, _value, impls in bench.cases():
        if only and only not in name:
            continue
        impl = next(i for i in impls if i.name == "kproto")
        times[f"{name} | encode"] = _best(impl.encode)
        times[f"{name} | decode"] = _best(lambda: impl.decode(wire))
    return times


def run(rounds: int, only: Optional[str]) -> Dict[str, List[Dict[str, float]]]:
    names = list(VARIANTS)
    results: Dict[str, List[Dict[str, float]]] = {name: [] for name in names}
    env = {k: v for k, v in os.environ.items() if k != "KPROTO_PURE"}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", name] + (["--only", only] if only else [])
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
            if done.returncode != 0:
                raise SystemExit(f"variant {name!r} failed:\n{done.stderr[-2000:]}")
            results[name].append(json.loads(done.stdout))
        print(f"round {r + 1}/{rounds}, load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return results


def table(results: Dict[str, List[Dict[str, float]]]) -> List[str]:
    base, *others = list(results)
    lines = ["| operation | all compiled µs | " + " | ".join(f"{o} ×" for o in others) + " |"]
    lines.append("|---" * (2 + len(others)) + "|")
    for op in results[base][0]:
        cells = []
        for other in others:
            ratios = [b[op] and o[op] / b[op] for b, o in zip(results[base], results[other])]
            cells.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        best = min(run[op] for run in results[base]) * 1e6
        lines.append(f"| {op} | {best:.3g} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="rounds of every variant (default 7)")
    parser.add_argument("--only", help="only the cases whose name contains this text")
    parser.add_argument("--worker", choices=list(VARIANTS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.only)))
        return 0
    print(f"load average at start {os.getloadavg()[0]:.2f}")
    results = run(args.rounds, args.only)
    print("\n".join(table(results)))
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
