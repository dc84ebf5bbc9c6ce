"""Spark pipeline throughput: captures decoded to Parquet on local[1], local[2] and a two-worker
standalone cluster against the single-process path, on the same rotated files; then one capture file
larger than a task (split into byte ranges).

    python benchmarks/spark.py [--size-mb 48] [--files 8] [--dir DIR] [--reuse]
                               [--masters local[1],local[2],standalone] [--big-gb 1.0]
                               [--profile-local] [--profile-stages]

1. Writes ~SIZE MB of Produce/Fetch-heavy 0.9 traffic (the workload of ``benchmarks/capture.py``: 4
   producers, 2 consumers, every codec) as one capture rotated into FILES pcap files.
2. Times, on those files, capture → Parquet tables (exchanges, messages, problems):
   * the single-process path (``kproto.spark.run_captures_local``: what ``kproto spark captures --local``
     runs, one reassembler, pyarrow writing Parquet), after a warm-up run on one file;
   * ``kproto.spark.run_captures`` on each Spark master, after a warm-up run on one file (JVM and Python
     worker start-up are not counted; session start is reported separately).
   ``standalone`` is a master and two one-core workers started from the installed pyspark
   (:class:`kproto.spark.standalone.LocalCluster`): executors in their own JVMs, as on a cluster.
3. Prints seconds and MB/s (capture bytes read per second) side by side, with each run's ratio to
   the single-process path.  Spark's scaling is bounded by the input's connections (a connection is
   decoded by one task: 6 here) and by the cores the machine really has free.
4. ``--big-gb N`` (0 to skip) writes ONE capture file of at least N GB (the workload repeated, each
   copy on other client ports and later times), times the single process and the last Spark master
   on it (its session warmed up on one of the rotated files first), prints how many byte ranges Spark
   read it in, and deletes it.
5. ``--profile-stages`` runs the two Spark stages' Python functions by hand (no Spark) under cProfile,
   stage 2 writing its Parquet files as a task does: what is left of a Spark run's time is Spark's own
   (job and task scheduling, Python workers, the driver's listing and commit).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capture import build_conversations  # noqa: E402  (the shared benchmark workload)

from results import Run, add_json_out  # noqa: E402

from kproto.pcap.writer import write_capture, write_segments  # noqa: E402

_PCAP_RECORD = struct.Struct("<IIII")


def write_rotated(directory: Path, size_mb: float, files: int) -> List[Path]:
    """The workload as ``files`` rotated pcap files of about equal packet counts."""
    conversations = build_conversations(int(size_mb * 1e6))
    segments = write_capture(io.BytesIO(), conversations).segments
    step = -(-len(segments) // files)
    paths = []
    for i in range(files):
        path = directory / f"bench.pcap{i}"
        write_segments(str(path), segments[i * step : (i + 1) * step])
        paths.append(path)
    return paths


def run_local(inputs: List[Path], out: Path, warm_up: bool = True) -> float:
    """Seconds of the single-process path on ``inputs``, after a warm-up run on one file (module
    imports are not counted, as Spark's start-up is not)."""
    from kproto.spark import run_captures_local

    if warm_up:
        run_captures_local([str(inputs[0])], str(out / "warm-up"), log=lambda line: None)
    start = time.perf_counter()
    run_captures_local([str(p) for p in inputs], str(out), log=lambda line: None)
    return time.perf_counter() - start


def write_big(path: Path, parts: List[Path], size_bytes: int) -> int:
    """One pcap of at least ``size_bytes``: the records of ``parts`` repeated, copy ``k`` with client
    ports moved by ``k`` and times by ``k`` spans (so every copy is a new set of connections)."""
    records = []
    for part in parts:
        data = part.read_bytes()
        pos = 24
        while pos + 16 <= len(data):
            caplen = _PCAP_RECORD.unpack_from(data, pos)[2]
            records.append(data[pos : pos + 16 + caplen])
            pos += 16 + caplen
    header = parts[0].read_bytes()[:24]
    first, last = _PCAP_RECORD.unpack_from(records[0])[0], _PCAP_RECORD.unpack_from(records[-1])[0]
    span = last - first + 1
    written = 24
    with open(path, "wb") as f:
        f.write(header)
        copy = 0
        while written < size_bytes:
            for record in records:
                rec = bytearray(record)
                struct.pack_into("<I", rec, 0, _PCAP_RECORD.unpack_from(rec)[0] + copy * span)
                tcp = 16 + 14 + (rec[16 + 14] & 0x0F) * 4  # Ethernet, IPv4 header length
                sport, dport = struct.unpack_from(">HH", rec, tcp)
                if sport != 9092:
                    struct.pack_into(">H", rec, tcp, (sport + copy) & 0xFFFF)
                else:
                    struct.pack_into(">H", rec, tcp + 2, (dport + copy) & 0xFFFF)
                f.write(rec)
                written += len(rec)
            copy += 1
    return written


def run_spark(
    master: str, inputs: List[Path], out: Path, warm_up: Optional[Path] = None, split_bytes: int = 128 << 20
) -> Tuple[float, float, List[str]]:
    """(session start-up seconds, timed run seconds, the run's log lines) on ``master``."""
    from kproto.spark import run_captures, spark_session

    start = time.perf_counter()
    spark = spark_session(master, {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - start
    lines: List[str] = []
    try:
        # Python workers start and import kproto on their first tasks: a run on one small file first.
        run_captures(spark, [str(warm_up or inputs[0])], str(out / "warm-up"), log=lambda line: None)
        start = time.perf_counter()
        run_captures(spark, [str(p) for p in inputs], str(out / "run"), split_bytes=split_bytes, log=lines.append)
        return started, time.perf_counter() - start, lines
    finally:
        spark.stop()


def run_master(
    name: str, inputs: List[Path], out: Path, warm_up: Optional[Path] = None, split_bytes: int = 128 << 20
) -> Tuple[float, float, List[str]]:
    """:func:`run_spark` on a Spark master URL, or on a fresh two-worker cluster for ``standalone``."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if name != "standalone":
        return run_spark(name, inputs, out, warm_up, split_bytes)
    from kproto.spark.standalone import LocalCluster

    with LocalCluster(workers=2, cores=1, memory="2G") as cluster:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        return run_spark(cluster.master, inputs, out, warm_up, split_bytes)


def profile_stages(inputs: List[Path], out: Path) -> None:
    """The Python side of both Spark stages of ``run_captures``, by hand, under cProfile: stage 1
    writing its spill files, the driver placing connections on one task, stage 2 decoding and writing
    its Parquet files as a Spark task does."""
    from kproto.capture.conversation import DEFAULT_PORTS
    from kproto.spark.capture_plan import plan_ranges
    from kproto.spark.capture_spill import DecodePieces, SpillRanges, assign_connections
    from kproto.spark.table_writer import TaskWriter

    def stage1() -> list:
        ranges = plan_ranges([(str(p), p.stat().st_size) for p in inputs])
        return list(SpillRanges(str(out / "spill"))(tuple(r) for r in ranges))

    def stage2(results: list) -> int:
        placed = assign_connections([p for r in results for p in r.pieces], 1)
        staging = {name: str(out / name) for name in ("exchanges", "messages", "problems")}
        stats = TaskWriter(DecodePieces(DEFAULT_PORTS, True), staging)(iter(placed))
        return sum(b.num_rows for b in stats)

    profiler = cProfile.Profile()
    start = time.perf_counter()
    results = profiler.runcall(stage1)
    print(
        f"== stage 1 (read, pack per connection, write spill files): {time.perf_counter() - start:.2f} s, "
        f"{sum(len(r.pieces) for r in results)} pieces"
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(8)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    rows = profiler.runcall(stage2, results)
    print(
        f"== stage 2 (read spill, reassemble, decode, write Parquet): {time.perf_counter() - start:.2f} s, "
        f"{rows} statistics rows"
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=48.0, help="Kafka bytes to generate (default 48)")
    parser.add_argument("--files", type=int, default=8, help="rotated capture files (default 8)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "kproto-spark-bench",
        help="where the captures go (default: kproto-spark-bench in the temporary directory)",
    )
    parser.add_argument("--reuse", action="store_true", help="reuse the captures already in --dir")
    parser.add_argument(
        "--masters",
        default="local[1],local[2],standalone",
        help="comma-separated Spark masters; standalone = a two-worker cluster on this machine",
    )
    parser.add_argument("--big-gb", type=float, default=1.0, help="size of the single big capture (0: skip)")
    parser.add_argument("--big-split-mb", type=float, default=128.0, help="split size for the big capture")
    parser.add_argument(
        "--no-big-single",
        action="store_true",
        help="time only Spark on the big capture (the single process takes as long again)",
    )
    parser.add_argument("--profile-local", action="store_true", help="cProfile the single-process run")
    parser.add_argument("--profile-stages", action="store_true", help="cProfile the Spark stages' Python side")
    add_json_out(parser)
    args = parser.parse_args()
    record = Run("spark")
    record.settings = {
        "size_mb": args.size_mb,
        "files": args.files,
        "big_gb": args.big_gb,
        "big_split_mb": args.big_split_mb,
    }

    captures = args.dir / "captures"
    if not args.reuse or not captures.exists():
        shutil.rmtree(captures, ignore_errors=True)
        captures.mkdir(parents=True)
        write_rotated(captures, args.size_mb, args.files)
    inputs = sorted(captures.iterdir())
    total = sum(p.stat().st_size for p in inputs)
    print(f"{len(inputs)} capture files, {total / 1e6:.1f} MB")

    out = Path(tempfile.mkdtemp(prefix="kproto-spark-bench-out-"))
    masters = [m for m in args.masters.split(",") if m]
    try:
        if args.profile_local:
            profiler = cProfile.Profile()
            profiler.runcall(run_local, inputs, out / "profile")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        if args.profile_stages:
            profile_stages(inputs, out / "profile-stages")
        print(f"[{uptime()}]")
        results = [("single process (run_captures_local)", None, run_local(inputs, out / "local"), uptime())]
        for master in masters:
            started, seconds, _ = run_master(master, inputs, out / master.replace("[", "_").replace("]", ""))
            results.append((f"spark {master}", started, seconds, uptime()))
        report(results, total, record, "rotated files")
        if args.big_gb > 0 and masters:
            big = args.dir / "big.pcap"
            try:
                size = write_big(big, inputs, int(args.big_gb * 1e9))
                print(f"\none capture file of {size / 1e6:.0f} MB [{uptime()}]")
                big_results = (
                    []
                    if args.no_big_single
                    else [
                        (
                            "single process (run_captures_local)",
                            None,
                            run_local([big], out / "big-local", warm_up=False),
                            uptime(),
                        )
                    ]
                )
                started, seconds, lines = run_master(
                    masters[-1],
                    [big],
                    out / "big-spark",
                    warm_up=inputs[0],
                    split_bytes=int(args.big_split_mb * (1 << 20)),
                )
                big_results.append((f"spark {masters[-1]}", started, seconds, uptime()))
                print("\n".join(f"  spark: {line}" for line in lines if line.startswith("plan:")))
                report(big_results, size, record, "one big file")
            finally:
                big.unlink(missing_ok=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    record.save(args.json_out)
    return 0


def report(results: List[Tuple[str, object, float, str]], total: int, record: Run, inputs: str) -> None:
    base = results[0][2] if results[0][0].startswith("single") else float("nan")
    print(f"{'path':<40} {'start s':>8} {'run s':>8} {'MB/s':>8} {'vs single':>10}  load after the run")
    for name, started, seconds, load in results:
        start_text = "-" if started is None else f"{started:.1f}"
        record.add(
            inputs=inputs,
            input_mb=round(total / 1e6, 1),
            path=name,
            start_s=started,
            run_s=seconds,
            mb_per_s=total / 1e6 / seconds,
            vs_single=None if base != base else base / seconds,
        )
        ratio = "-" if base != base else f"{base / seconds:.2f}x"  # no single-process run: no ratio
        print(
            f"{name:<40} {start_text:>8} {seconds:>8.2f} {total / 1e6 / seconds:>8.2f} {ratio:>10}  "
            f"{load.split('load average:')[-1].strip()}"
        )
    print(f"(cores: {os.cpu_count()})")


if __name__ == "__main__":
    raise SystemExit(main())
