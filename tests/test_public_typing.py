"""The public surface as a user meets it: ``mypy --strict`` on a small consumer program, then the program
run for real against the mock broker.

mypy runs with ``--follow-imports=silent``, as it treats an installed package: kproto's own modules are
analysed for their types, and only the consumer program's errors are reported.  mypy comes with the
dev extra (``pip install -e '.[dev]'``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent / "typing" / "consumer_program.py"
REPO = PROGRAM.parent.parent.parent


def test_consumer_program_passes_mypy_strict() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", str(PROGRAM)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_consumer_program_runs() -> None:
    proc = subprocess.run([sys.executable, str(PROGRAM)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "[('typed', 0), ('typed', 1), ('typed', 2)]"
