"""Clients through cluster failures, the mock cluster against a three-node Apache Kafka 4.1.1.

    python benchmarks/cluster_failover.py

Runs ``tests/broker/test_broker_cluster_failover_report.py`` (pytest; needs java, mvn and go like that
module) with ``KPROTO_CLUSTER_REPORT`` naming ``benchmarks/results/cluster-failover.json``: six clients
through a partition leader stopped mid-produce and a group's coordinator node stopped mid-consume, on both
engines, side by side -- the errors each client logged, what the log holds or the group read, and the
recovery time.  The report is written before the module's checks run, so a failing check still leaves
the table that shows why.  ``python benchmarks/render_docs.py`` renders it into docs/benchmarks.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from results import RESULTS_DIR

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "tests" / "broker" / "test_broker_cluster_failover_report.py"


def main() -> int:
    env = {**os.environ, "KPROTO_CLUSTER_REPORT": str(RESULTS_DIR / "cluster-failover.json")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(MODULE)]
    return subprocess.call(cmd, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
