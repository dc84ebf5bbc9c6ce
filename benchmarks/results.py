"""Benchmark results as data: what every benchmark script writes, and what ``docs/benchmarks.md`` is made from.

A figure in the documentation is only as good as what stands beside it: the command that produced it, when,
and how busy the machine was.  So no benchmark figure is typed into a document.  Each script collects the
rows it prints into a :class:`Run` and saves them as JSON (``benchmarks/results/NAME.json`` unless
``--json-out`` says otherwise); ``benchmarks/render_docs.py`` turns the saved files into
``docs/benchmarks.md``, stamping every table with its command, date and load average, and a test fails when
the document and the JSON disagree.

A row is a flat dict of plain values (str, int, float, None); what its keys mean is each script's business
and its renderer's, which sit side by side in ``render_docs.py``.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"

Row = Dict[str, Any]


def _loadavg() -> List[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not every platform has it
        return []


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Run:
    """One benchmark run: its command, its machine, its load at start and end, and its rows.

    ``name`` is the file stem under ``benchmarks/results/`` (a script with several modes names each mode's file,
    e.g. ``client-apache-kafka``).  ``argv`` defaults to the script's own arguments.
    """

    def __init__(self, name: str, argv: Optional[Sequence[str]] = None) -> None:
        self.name = name
        script = Path(sys.argv[0]).name
        args = list(sys.argv[1:] if argv is None else argv)
        # The --json-out target is where this file goes, not part of what was measured.
        shown: List[str] = []
        skip = False
        for a in args:
            if skip:
                skip = False
                continue
            if a == "--json-out":
                skip = True
                continue
            if a.startswith("--json-out="):
                continue
            shown.append(a)
        # The environment switches that change what is measured are part of the command.
        switches = [f"{k}={os.environ[k]}" for k in ("KPROTO_PURE",) if os.environ.get(k)]
        self.command = " ".join([*switches, "python", f"benchmarks/{script}", *map(shlex.quote, shown)])
        self.started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        self.load_start = _loadavg()
        self.rows: List[Row] = []
        self.notes: List[str] = []
        self.settings: Dict[str, Any] = {}

    def add(self, **row: Any) -> None:
        """Record one row (the same values the script prints)."""
        self.rows.append(row)

    def note(self, text: str) -> None:
        """A sentence the rendered table carries below it (what was equalised, a target missed, ...)."""
        self.notes.append(text)

    def save(self, path: Optional[os.PathLike] = None) -> Path:
        """Write the run as JSON and return where; prints the path so the run's log says it."""
        target = Path(path) if path is not None else RESULTS_DIR / f"{self.name}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "benchmark": self.name,
            "command": self.command,
            "started": self.started,
            "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_start": self.load_start,
            "load_end": _loadavg(),
            "machine": {
                "cpus": os.cpu_count(),
                "cpu": _cpu_model(),
                "python": platform.python_version(),
                "system": f"{platform.system()} {platform.machine()}",
            },
            "settings": self.settings,
            "rows": self.rows,
            "notes": self.notes,
        }
        target.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
        print(f"results written to {target}")
        return target


def add_json_out(parser: Any) -> None:
    """The ``--json-out PATH`` option every benchmark takes."""
    parser.add_argument(
        "--json-out",
        type=Path,
        default=None,
        help="where to write the results as JSON (default benchmarks/results/NAME.json)",
    )


def load(name: str, directory: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """A saved run, or None when the benchmark has not been run."""
    path = (directory or RESULTS_DIR) / f"{name}.json"
    if not path.is_file():
        return None
    data: Dict[str, Any] = json.loads(path.read_text())
    return data
