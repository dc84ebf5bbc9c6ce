"""``kproto spark`` on a real Spark standalone cluster: a master and two workers started from the
installed pyspark on 127.0.0.1 (no downloads), executors in their own JVMs with their own Python
workers.  The tables written through the cluster equal the single-process tables; captures are read
in byte ranges (a small split size), so ranges of one file are decoded by different executors.

Executors get kproto the way docs/spark.md recommends for a cluster: installed on every node (here
the nodes share this virtualenv, named by ``spark.pyspark.python``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pyarrow.parquet as pq
import pytest

import kproto

from kproto.spark.schema import TABLES
from test_spark_data import conversations, write_damaged, write_rotated, write_segments_dir

pytestmark = pytest.mark.spark

WORKERS = 2
_START_TIMEOUT_S = 240  # the machine may be busy: JVM start-up is slow then


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


def _wait_for(log: Path, text: str, count: int, proc: List[subprocess.Popen]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        dead = [p for p in proc if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a Spark daemon exited ({dead[0].args}); see {log}")
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} did not appear {count} time(s) in {log} within {_START_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    base = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
               PYSPARK_PYTHON=sys.executable, SPARK_WORKER_DIR=str(base / "work"))
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs: List[subprocess.Popen] = []
    logs = []
    try:
        master_log = base / "master.log"
        logs.append(open(master_log, "w"))
        procs.append(subprocess.Popen(
            [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(_free_port())], env=env, stdout=logs[-1], stderr=subprocess.STDOUT,
            start_new_session=True))
        _wait_for(master_log, "Starting Spark master", 1, procs)
        workers = []
        for n in range(WORKERS):
            work = base / f"worker{n}"
            work.mkdir()
            workers.append(work)
            logs.append(open(base / f"worker{n}.log", "w"))
            procs.append(subprocess.Popen(
                [_spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                 "--memory", "1G", "--webui-port", str(_free_port()), "--work-dir", str(work), master_url],
                env=env, stdout=logs[-1], stderr=subprocess.STDOUT, start_new_session=True))
        _wait_for(master_log, "Registering worker", WORKERS, procs)
        yield {"master": master_url, "workers": workers, "env": env}
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        for log in logs:
            log.close()


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
    conf = ["--master", cluster["master"], "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4"]
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
