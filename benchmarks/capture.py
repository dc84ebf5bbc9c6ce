"""Capture decoding throughput: ``kproto pcap --format jsonl`` (with and without ``-v``) against
``tshark -T json`` on the same files.

    python benchmarks/capture.py [--size-mb 100] [--era 0.9|modern|both] [--output-dir DIR] [--reuse] [--profile]
                                 [--repeat N]

1. Writes ~100 MB pcaps of Produce/Fetch-heavy traffic with ``kproto.pcap.writer`` (producers sending
   64 KiB-256 KiB record sets, consumers fetching up to 1 MiB per partition, in every codec, with the odd
   Heartbeat between them), MSS 1460 as on an Ethernet link.  Era ``0.9``: Produce v1 / Fetch v1 with
   magic 0 message sets.  Era ``modern``: Produce v8 / Fetch v11 with magic 2 record batches (idempotent
   producer ids and sequences, a header on every record) -- the newest versions tshark 4.0 still decodes
   (it gives up on the flexible v9+ bodies, which would make its side of the comparison do less).
2. Times ``kproto pcap --format jsonl FILE``, ``kproto pcap --format jsonl -v FILE`` (every record
   decoded into the output) and ``tshark -r FILE -d tcp.port==9092,kafka -T json``, output to
   /dev/null, and prints MB/s for each and the ratios (target: kproto -v at least 5x faster), with
   ``uptime`` (the machine may be shared: state the load with the figures).  ``--repeat N`` runs the three
   in turn N times and compares the medians (one run's ratio moves with the load).
3. ``--profile`` also runs ``kproto pcap --format jsonl -v`` in-process under cProfile (top functions).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import kproto
from results import Run, add_json_out
from kproto.pcap.writer import Side, TcpConversation, write_capture
from kproto.records import encode_message_set, encode_record_batch

BROKER = ("10.1.0.10", 9092)
TOPIC = "clickstream"
CODECS = (None, "gzip", "snappy", "lz4")


#: Request versions of Produce and Fetch per era (see the module docs).
VERSIONS = {"0.9": (1, 1), "modern": (8, 11)}


def message_sets(rng: random.Random, era: str = "0.9") -> List[bytes]:
    """A pool of realistic record sets (JSON-ish values, keyed), some compressed; reused across frames."""
    pool = []
    for n, codec in enumerate(CODECS * 3):
        count = rng.choice((300, 600, 1200))
        messages = []
        for i in range(count):
            value = (
                f'{{"user":{rng.randrange(10**6)},"page":"/p/{rng.randrange(5000)}","ts":{1452000000000 + i},'
                f'"ref":"{rng.choice(["search", "direct", "mail", "social"])}","pad":"{"x" * rng.randrange(40, 160)}"}}'
            )
            messages.append((f"user-{rng.randrange(1000)}".encode(), value.encode()))
        if era == "0.9":
            pool.append(encode_message_set(messages, codec=codec, base_offset=n * 10_000))
        else:
            records = [
                (k, v, 1_700_000_000_000 + i, [("trace-id", b"%016x" % rng.getrandbits(64))])
                for i, (k, v) in enumerate(messages)
            ]
            pool.append(
                encode_record_batch(
                    records,
                    codec=codec,
                    base_offset=n * 10_000,
                    producer_id=4000 + n,
                    producer_epoch=0,
                    base_sequence=n * 10_000,
                )
            )
    return pool


def produce_frame(corr: int, partition: int, records: bytes, version: int = 1) -> bytes:
    request = kproto.APIS["Produce"].request.from_dict(
        {
            "acks": 1,
            "timeout_ms": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}],
        }
    )
    return kproto.encode_request(request, version, corr, "bench-producer")


def produce_answer(corr: int, partition: int, offset: int, version: int = 1) -> bytes:
    response = kproto.APIS["Produce"].response.from_dict(
        {
            "responses": [
                {"name": TOPIC, "partition_responses": [{"index": partition, "error_code": 0, "base_offset": offset}]}
            ],
            "throttle_time_ms": 0,
        }
    )
    return kproto.encode_response(response, version, corr)


def fetch_frame(corr: int, offsets: List[int], version: int = 1) -> bytes:
    request = kproto.APIS["Fetch"].request.from_dict(
        {
            "replica_id": -1,
            "max_wait_ms": 100,
            "min_bytes": 1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
                        for p, o in enumerate(offsets)
                    ],
                }
            ],
        }
    )
    return kproto.encode_request(request, version, corr, "bench-consumer")


def fetch_answer(corr: int, sets: List[bytes], version: int = 1) -> bytes:
    response = kproto.APIS["Fetch"].response.from_dict(
        {
            "throttle_time_ms": 0,
            "responses": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {"partition_index": p, "error_code": 0, "high_watermark": 10**7, "records": s}
                        for p, s in enumerate(sets)
                    ],
                }
            ],
        }
    )
    return kproto.encode_response(response, version, corr)


def heartbeat(corr: int) -> Tuple[bytes, bytes]:
    info = kproto.APIS["Heartbeat"]
    req = info.request.from_dict({"group_id": "bench", "generation_id": 3, "member_id": "bench-consumer-1"})
    answer = info.response.from_dict({"error_code": 0})
    return kproto.encode_request(req, 0, corr, "bench-consumer"), kproto.encode_response(answer, 0, corr)


def build_conversations(target_bytes: int, seed: int = 7, era: str = "0.9") -> List[TcpConversation]:
    rng = random.Random(seed)
    pool = message_sets(rng, era)
    pv, fv = VERSIONS[era]
    producers = [[] for _ in range(4)]  # type: List[List[Tuple[Side, bytes, float]]]
    consumers = [[] for _ in range(2)]  # type: List[List[Tuple[Side, bytes, float]]]
    total, clock, corr = 0, 1_452_000_000.0, 0
    while total < target_bytes:
        corr += 1
        clock += 0.002
        conv = producers[corr % len(producers)]
        partition = corr % 8
        records = pool[corr % len(pool)]
        req, resp = produce_frame(corr, partition, records, pv), produce_answer(corr, partition, corr * 1000, pv)
        conv += [(Side.CLIENT, req, clock), (Side.SERVER, resp, clock + 0.001)]
        total += len(req) + len(resp)
        if corr % 3 == 0:
            fetcher = consumers[corr % len(consumers)]
            sets = [pool[(corr + k) % len(pool)] for k in range(4)]
            req, resp = fetch_frame(corr, [corr * 100 + k for k in range(4)], fv), fetch_answer(corr, sets, fv)
            fetcher += [(Side.CLIENT, req, clock), (Side.SERVER, resp, clock + 0.003)]
            total += len(req) + len(resp)
            if corr % 30 == 0:
                req, resp = heartbeat(corr)
                fetcher += [(Side.CLIENT, req, clock + 0.004), (Side.SERVER, resp, clock + 0.005)]
    conversations = []
    for i, messages in enumerate(producers + consumers):
        client = (f"10.1.0.{20 + i}", 40000 + i)
        conversations.append(TcpConversation(client, BROKER, messages))
    return conversations


def timed(command: List[str]) -> Tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of one run; CPU time is what a loaded machine distorts least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.run(command, stdout=sink, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{command[0]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def profile_kproto(path: Path) -> None:
    from kproto.cli import main

    profiler = cProfile.Profile()
    saved = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        profiler.runcall(main, ["pcap", str(path), "--format", "jsonl", "-v", "--no-progress"])
    finally:
        sys.stdout.close()
        sys.stdout = saved
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue())


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def compare(path: Path, era: str, repeat: int = 1, run: Optional[Run] = None) -> None:
    """Time both tools on one capture and print the figures (wall and CPU time; ratios of both).

    With ``repeat`` > 1 the commands run in turn that many times (so each round sees the same load) and
    the ratios are of the median times."""
    size_mb = path.stat().st_size / 1e6
    kproto_cli = str(Path(sys.executable).with_name("kproto"))
    print(f"--- era {era}: {path} ({size_mb:.1f} MB); {uptime()}")
    runs = {
        "kproto pcap --format jsonl": [kproto_cli, "pcap", "--format", "jsonl", "--no-progress", str(path)],
        "kproto pcap --format jsonl -v": [kproto_cli, "pcap", "--format", "jsonl", "-v", "--no-progress", str(path)],
    }
    tshark = shutil.which("tshark")
    if tshark is not None:
        runs["tshark -T json"] = [tshark, "-r", str(path), "-d", "tcp.port==9092,kafka", "-T", "json"]
    rounds: Dict[str, List[Tuple[float, float]]] = {name: [] for name in runs}
    for n in range(repeat):
        if repeat > 1:
            print(f"round {n + 1}/{repeat}; {uptime()}")
        for name, command in runs.items():
            wall, cpu = timed(command)
            rounds[name].append((wall, cpu))
            print(
                f"{name:30s}: {wall:7.2f} s wall {size_mb / wall:7.1f} MB/s, {cpu:7.2f} s CPU {size_mb / cpu:7.1f} MB/s"
                + (f"  (backend {kproto.backend})" if name.startswith("kproto") else "")
            )
    if tshark is None:
        print("tshark not installed: no comparison")
        return
    times = {
        name: (statistics.median(w for w, _ in found), statistics.median(c for _, c in found))
        for name, found in rounds.items()
    }
    tshark_wall, tshark_cpu = times["tshark -T json"]
    for name in ("kproto pcap --format jsonl -v", "kproto pcap --format jsonl"):
        wall, cpu = times[name]
        if run is not None:
            run.add(
                era=era,
                size_mb=round(size_mb, 1),
                command=name,
                wall_s=wall,
                cpu_s=cpu,
                tshark_wall_s=tshark_wall,
                tshark_cpu_s=tshark_cpu,
                rounds=repeat,
            )
        print(
            f"ratio tshark / {name}{' (medians)' if repeat > 1 else ''}: {tshark_wall / wall:.1f}x wall, "
            f"{tshark_cpu / cpu:.1f}x CPU" + ("  (target >= 5x)" if name.endswith("-v") else "")
        )
    print(uptime())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--size-mb", type=float, default=100.0, help="Kafka bytes to generate per capture (default 100)"
    )
    parser.add_argument(
        "--era", choices=("0.9", "modern", "both"), default="both", help="which capture(s) (default both)"
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the captures go (default: the system's temporary directory)",
    )
    parser.add_argument("--reuse", action="store_true", help="reuse existing captures in --output-dir")
    parser.add_argument("--profile", action="store_true", help="cProfile kproto pcap -v")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the commands in turn this many times and compare medians (default 1)"
    )
    add_json_out(parser)
    args = parser.parse_args()
    run = Run("capture")
    run.settings = {"backend": kproto.backend}
    for era in ("0.9", "modern") if args.era == "both" else (args.era,):
        path = args.output_dir / f"kproto-bench-{era}.pcap"
        if not (args.reuse and path.exists()):
            start = time.perf_counter()
            written = write_capture(path, build_conversations(int(args.size_mb * 1e6), era=era))
            print(
                f"wrote {path}: {path.stat().st_size / 1e6:.1f} MB, {written.packets} packets "
                f"in {time.perf_counter() - start:.1f} s"
            )
        compare(path, era, max(1, args.repeat), run)
        if args.profile:
            profile_kproto(path)
    if run.rows:
        run.save(args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
