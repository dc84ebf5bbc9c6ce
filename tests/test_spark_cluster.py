"""``kproto spark`` on a real Spark standalone cluster: a master and two workers started from the
installed pyspark on 127.0.0.1 (no downloads), executors in their own JVMs with their own Python
workers.  The tables written through the cluster equal the single-process tables; captures are read
in byte ranges (a small split size), so ranges of one file are decoded by different executors.

Executors get kproto the way docs/spark.md recommends for a cluster: installed on every node (here
the nodes share this virtualenv, named by ``spark.pyspark.python``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pyarrow.parquet as pq
import pytest

import kproto
from kproto.spark.schema import TABLES
from kproto.spark.standalone import LocalCluster
from test_spark_data import conversations, write_damaged, write_rotated, write_segments_dir

pytestmark = pytest.mark.spark

WORKERS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    with LocalCluster(WORKERS, directory=str(tmp_path_factory.mktemp("cluster"))) as running:
        yield {"master": running.master, "workers": running.work_dirs, "env": running.env}


def _kproto(args: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    kproto = str(Path(sys.executable).parent / "kproto")
    return subprocess.run([kproto, "spark", *args], env=env, capture_output=True, text=True, timeout=900)


def _rows(path: str) -> List[Dict[str, Any]]:
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: repr(sorted(r.items())))


def test_a_standalone_cluster_writes_the_single_process_tables(cluster: Dict[str, Any], tmp_path: Any) -> None:
    captures, segments = tmp_path / "captures", tmp_path / "segments"
    captures.mkdir()
    segments.mkdir()
    write_rotated(str(captures), conversations(), ["rot.pcap9", "rot.pcap10", "rot.pcap11"])
    write_damaged(str(captures))
    write_segments_dir(str(segments))
    conf = [
        "--master",
        cluster["master"],
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.executor.cores=1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=4",
    ]
    for what, inputs, extra in (("captures", captures, ["--split-mb", "0.004"]), ("segments", segments, [])):
        on_cluster, single = str(tmp_path / f"{what}-cluster"), str(tmp_path / f"{what}-local")
        done = _kproto([what, str(inputs), "--out", on_cluster, *conf, *extra], cluster["env"])
        assert done.returncode in (0, 1), done.stderr[-3000:]
        assert "completed" in done.stderr
        if what == "captures":  # the summary says loudly when executors lack the compiled extension
            assert ("PURE-PYTHON" in done.stdout) == (kproto.backend == "python"), done.stdout
        local = _kproto([what, str(inputs), "--out", single, "--local"], cluster["env"])
        assert local.returncode == done.returncode, local.stderr[-3000:]
        counts = [line for line in done.stdout.splitlines() if line.endswith(" problems")]
        assert counts and counts[0] in local.stdout  # the same counts in the summary
        for name in TABLES:
            assert _rows(os.path.join(on_cluster, name)) == _rows(os.path.join(single, name)), (what, name)
    # The executors ran on both workers (each keeps a directory per application it ran executors for).
    for work in cluster["workers"]:
        assert any(p.name.startswith("app-") for p in work.iterdir()), work
