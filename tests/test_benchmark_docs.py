"""docs/benchmarks.md is what the benchmarks' saved JSON renders to: no figure typed by hand, none stale.

Every saved run carries what a reader needs to weigh its figures (the command, when it ran, the machine and
its load), and the document is exactly ``benchmarks/render_docs.py``'s output over those files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import render_docs  # noqa: E402
from results import RESULTS_DIR  # noqa: E402


def test_every_saved_run_says_how_it_was_measured() -> None:
    runs = sorted(RESULTS_DIR.glob("*.json"))
    assert runs, "no benchmark results saved"
    known = {name for name, _, _ in render_docs.SECTIONS}
    for path in runs:
        run = json.loads(path.read_text())
        assert path.stem in known, f"{path.name}: no section of docs/benchmarks.md renders it"
        assert "python benchmarks/" in run["command"], path.name
        assert run["started"] and run["load_start"] and run["load_end"], path.name
        assert run["machine"]["cpus"], path.name
        assert run["rows"], f"{path.name}: a run without rows"


def test_the_document_is_rendered_from_the_saved_runs() -> None:
    expected = render_docs.render()
    actual = render_docs.DOC.read_text()
    assert actual == expected, "docs/benchmarks.md is stale: run python benchmarks/render_docs.py"


def test_the_readme_figures_are_rendered_from_the_saved_runs() -> None:
    readme = render_docs.README.read_text()
    stale = "README.md's figures are stale: run python benchmarks/render_docs.py"
    assert readme == render_docs.render_readme(readme), stale
    block = render_docs.readme_figures()
    # both pipelining runs are saved, so both lines are there, each with its ratio and its command
    assert block.count("benchmarks/pipelining.py --cluster") == 2, block
    assert block.count("×**") == 2, block
