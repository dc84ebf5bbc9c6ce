"""Spark pipeline throughput: captures decoded to Parquet on local[1] and local[2] against the
single-process path, on the same rotated files.

    python benchmarks/spark.py [--size-mb 48] [--files 8] [--dir /tmp/kproto-spark-bench] [--reuse]
                               [--masters local[1],local[2]] [--profile-local]

1. Writes ~SIZE MB of Produce/Fetch-heavy 0.9 traffic (the workload of ``benchmarks/capture.py``: 4
   producers, 2 consumers, every codec) as one capture rotated into FILES pcap files.
2. Times, on those files, capture → Parquet tables (exchanges, messages, problems):
   * the single-process path (``kproto.spark.run_captures_local``: what ``kproto spark captures --local``
     runs, one reassembler, pyarrow writing Parquet);
   * ``kproto.spark.run_captures`` on each Spark master, after a warm-up run on one file (JVM and Python
     worker start-up are not counted; session start is reported separately).
3. Prints seconds and MB/s (capture bytes read per second) side by side, with each run's ratio to
   the single-process path.  Spark's scaling is bounded by the input's connections (stage 2 runs one
   connection per task at a time: 6 here) and by the cores the machine really has free.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capture import build_conversations  # noqa: E402  (the shared benchmark workload)

from kproto.capture.writer import write_capture, write_segments  # noqa: E402


def write_rotated(directory: Path, size_mb: float, files: int) -> List[Path]:
    """The workload as ``files`` rotated pcap files of about equal packet counts."""
    conversations = build_conversations(int(size_mb * 1e6))
    segments = write_capture(io.BytesIO(), conversations).segments
    step = -(-len(segments) // files)
    paths = []
    for i in range(files):
        path = directory / f"bench.pcap{i}"
        write_segments(str(path), segments[i * step:(i + 1) * step])
        paths.append(path)
    return paths


def run_local(inputs: List[Path], out: Path) -> float:
    from kproto.spark import run_captures_local

    start = time.perf_counter()
    run_captures_local([str(p) for p in inputs], str(out), log=lambda line: None)
    return time.perf_counter() - start


def run_spark(master: str, inputs: List[Path], out: Path) -> Tuple[float, float]:
    """(session start-up seconds, timed run seconds) on ``master``."""
    from kproto.spark import run_captures, spark_session

    start = time.perf_counter()
    spark = spark_session(master, {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - start
    try:
        run_captures(spark, [str(inputs[0])], str(out / "warm-up"), log=lambda line: None)
        start = time.perf_counter()
        run_captures(spark, [str(p) for p in inputs], str(out / "run"), log=lambda line: None)
        return started, time.perf_counter() - start
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=48.0, help="Kafka bytes to generate (default 48)")
    parser.add_argument("--files", type=int, default=8, help="rotated capture files (default 8)")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kproto-spark-bench"), help="where the captures go")
    parser.add_argument("--reuse", action="store_true", help="reuse the captures already in --dir")
    parser.add_argument("--masters", default="local[1],local[2]", help="comma-separated Spark masters")
    parser.add_argument("--profile-local", action="store_true", help="cProfile the single-process run")
    args = parser.parse_args()

    captures = args.dir / "captures"
    if not args.reuse or not captures.exists():
        shutil.rmtree(captures, ignore_errors=True)
        captures.mkdir(parents=True)
        write_rotated(captures, args.size_mb, args.files)
    inputs = sorted(captures.iterdir())
    total = sum(p.stat().st_size for p in inputs)
    print(f"{len(inputs)} capture files, {total / 1e6:.1f} MB")

    out = Path(tempfile.mkdtemp(prefix="kproto-spark-bench-out-"))
    try:
        if args.profile_local:
            profiler = cProfile.Profile()
            profiler.runcall(run_local, inputs, out / "profile")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        results = [("single process (run_captures_local)", None, run_local(inputs, out / "local"))]
        for master in args.masters.split(","):
            started, seconds = run_spark(master, inputs, out / master.replace("[", "_").replace("]", ""))
            results.append((f"spark {master}", started, seconds))
    finally:
        shutil.rmtree(out, ignore_errors=True)

    base = results[0][2]
    print(f"{'path':<40} {'start s':>8} {'run s':>8} {'MB/s':>8} {'vs single':>10}")
    for name, started, seconds in results:
        start_text = "-" if started is None else f"{started:.1f}"
        print(f"{name:<40} {start_text:>8} {seconds:>8.2f} {total / 1e6 / seconds:>8.2f} {base / seconds:>9.2f}x")
    print(f"(cores: {os.cpu_count()}; load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
