"""A Spark standalone cluster on this machine, started from the installed pyspark (no downloads).

A master and ``workers`` workers, each its own JVM (``spark-class org.apache.spark.deploy.master.Master``
/ ``...worker.Worker``), bound to 127.0.0.1.  Applications connected to :attr:`LocalCluster.master`
get executors in the workers' JVMs and Python workers started by those executors: the path a real
cluster takes, which ``local[*]`` never exercises (pickling of the job's functions, imports on
executors, files named by path).  Used by the tests and the benchmark; also a quick way to try
``kproto spark ... --master spark://...``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, List, Optional

__all__ = ["LocalCluster"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


class LocalCluster:
    """``with LocalCluster(workers=2) as cluster: ... cluster.master ...``; stopped on exit.

    Executors run Python workers with ``python`` (default: this interpreter), so kproto is "installed
    on every node".  ``cores``/``memory`` are per worker.  ``start_timeout`` bounds the wait for the
    daemons (JVM start-up is slow on a busy machine).
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "1G",
        python: Optional[str] = None,
        directory: Optional[str] = None,
        start_timeout: float = 240.0,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.python = python or sys.executable
        self.directory = Path(directory or tempfile.mkdtemp(prefix="kproto-spark-cluster-"))
        self.start_timeout = start_timeout
        self.port = _free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=self.python)
        self.work_dirs: List[Path] = []
        self._procs: List[subprocess.Popen] = []
        self._logs: List[IO[str]] = []

    def _start(self, name: str, args: List[str]) -> None:
        log = open(self.directory / f"{name}.log", "w")
        self._logs.append(log)
        self._procs.append(
            subprocess.Popen(
                [_spark_class(), *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    def _wait_for(self, text: str, count: int) -> None:
        log = self.directory / "master.log"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if log.read_text(errors="replace").count(text) >= count:
                return
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {proc.returncode}; logs in {self.directory}")
            time.sleep(0.5)
        raise TimeoutError(f"the Spark cluster did not start within {self.start_timeout} s; logs in {self.directory}")

    def start(self) -> "LocalCluster":
        """Start the master and the workers and wait until every worker has registered."""
        self._start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(_free_port()),
            ],
        )
        self._wait_for("Starting Spark master", 1)
        for n in range(self.workers):
            work = self.directory / f"worker{n}"
            work.mkdir(exist_ok=True)
            self.work_dirs.append(work)
            self._start(
                f"worker{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(work),
                    self.master,
                ],
            )
        self._wait_for("Registering worker", self.workers)
        return self

    def stop(self) -> None:
        """Stop the daemons this object started (and their child processes)."""
        for proc in self._procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in self._procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        for log in self._logs:
            log.close()
        self._procs, self._logs = [], []

    def __enter__(self) -> "LocalCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
