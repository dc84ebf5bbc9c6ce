"""Capture decoding throughput: ``kproto pcap --format jsonl`` against ``tshark -T json`` on the same file.

    python benchmarks/capture.py [--size-mb 100] [--output /tmp/kproto-bench.pcap] [--reuse] [--profile]

1. Writes a ~100 MB pcap of Produce/Fetch-heavy 0.9 traffic with ``kproto.capture.writer`` (producers
   sending 64 KiB-256 KiB message sets, consumers fetching up to 1 MiB per partition, in every codec, with
   the odd Metadata/Heartbeat/OffsetCommit between them), MSS 1460 as on an Ethernet link.
2. Times ``kproto pcap --format jsonl FILE > /dev/null`` and
   ``tshark -r FILE -d tcp.port==9092,kafka -T json > /dev/null`` in the same run, and prints MB/s for
   each and the ratio (target: kproto at least 5x faster).
3. ``--profile`` also runs the kproto side in-process under cProfile and prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import kproto
from kproto.capture.writer import Side, TcpConversation, write_capture
from kproto.records import encode_message_set

BROKER = ("10.1.0.10", 9092)
TOPIC = "clickstream"
CODECS = (None, "gzip", "snappy", "lz4")


def message_sets(rng: random.Random) -> List[bytes]:
    """A pool of realistic message sets (JSON-ish values, keyed), some compressed; reused across frames."""
    pool = []
    for n, codec in enumerate(CODECS * 3):
        count = rng.choice((300, 600, 1200))
        messages = []
        for i in range(count):
            value = (f'{{"user":{rng.randrange(10**6)},"page":"/p/{rng.randrange(5000)}","ts":{1452000000000 + i},'
                     f'"ref":"{rng.choice(["search", "direct", "mail", "social"])}","pad":"{"x" * rng.randrange(40, 160)}"}}')
            messages.append((f"user-{rng.randrange(1000)}".encode(), value.encode()))
        pool.append(encode_message_set(messages, codec=codec, base_offset=n * 10_000))
    return pool


def produce_frame(corr: int, partition: int, records: bytes) -> bytes:
    request = kproto.APIS["Produce"].request.from_dict({"acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}]})
    return kproto.encode_request(request, 1, corr, "bench-producer")


def produce_answer(corr: int, partition: int, offset: int) -> bytes:
    response = kproto.APIS["Produce"].response.from_dict({"responses": [{"name": TOPIC, "partition_responses": [
        {"index": partition, "error_code": 0, "base_offset": offset}]}], "throttle_time_ms": 0})
    return kproto.encode_response(response, 1, corr)


def fetch_frame(corr: int, offsets: List[int]) -> bytes:
    request = kproto.APIS["Fetch"].request.from_dict({"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20}
                                        for p, o in enumerate(offsets)]}]})
    return kproto.encode_request(request, 1, corr, "bench-consumer")


def fetch_answer(corr: int, sets: List[bytes]) -> bytes:
    response = kproto.APIS["Fetch"].response.from_dict({"throttle_time_ms": 0, "responses": [{"topic": TOPIC, "partitions": [
        {"partition_index": p, "error_code": 0, "high_watermark": 10**7, "records": s} for p, s in enumerate(sets)]}]})
    return kproto.encode_response(response, 1, corr)


def heartbeat(corr: int) -> Tuple[bytes, bytes]:
    info = kproto.APIS["Heartbeat"]
    req = info.request.from_dict({"group_id": "bench", "generation_id": 3, "member_id": "bench-consumer-1"})
    answer = info.response.from_dict({"error_code": 0})
    return kproto.encode_request(req, 0, corr, "bench-consumer"), kproto.encode_response(answer, 0, corr)


def build_conversations(target_bytes: int, seed: int = 7) -> List[TcpConversation]:
    rng = random.Random(seed)
    pool = message_sets(rng)
    producers = [[] for _ in range(4)]  # type: List[List[Tuple[Side, bytes, float]]]
    consumers = [[] for _ in range(2)]  # type: List[List[Tuple[Side, bytes, float]]]
    total, clock, corr = 0, 1_452_000_000.0, 0
    while total < target_bytes:
        corr += 1
        clock += 0.002
        conv = producers[corr % len(producers)]
        partition = corr % 8
        records = pool[corr % len(pool)]
        req, resp = produce_frame(corr, partition, records), produce_answer(corr, partition, corr * 1000)
        conv += [(Side.CLIENT, req, clock), (Side.SERVER, resp, clock + 0.001)]
        total += len(req) + len(resp)
        if corr % 3 == 0:
            fetcher = consumers[corr % len(consumers)]
            sets = [pool[(corr + k) % len(pool)] for k in range(4)]
            req, resp = fetch_frame(corr, [corr * 100 + k for k in range(4)]), fetch_answer(corr, sets)
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


def timed(command: List[str]) -> float:
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.run(command, stdout=sink, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{command[0]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def profile_kproto(path: Path) -> None:
    from kproto.cli import main

    profiler = cProfile.Profile()
    saved = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        profiler.runcall(main, ["pcap", str(path), "--format", "jsonl", "--no-progress"])
    finally:
        sys.stdout.close()
        sys.stdout = saved
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=100.0, help="Kafka bytes to generate (default 100)")
    parser.add_argument("--output", type=Path, default=Path("/tmp/kproto-bench.pcap"), help="capture path")
    parser.add_argument("--reuse", action="store_true", help="reuse an existing capture at --output")
    parser.add_argument("--profile", action="store_true", help="cProfile the kproto side")
    args = parser.parse_args()

    if not (args.reuse and args.output.exists()):
        start = time.perf_counter()
        written = write_capture(args.output, build_conversations(int(args.size_mb * 1e6)))
        print(f"wrote {args.output}: {args.output.stat().st_size / 1e6:.1f} MB, {written.packets} packets "
              f"in {time.perf_counter() - start:.1f} s")
    size_mb = args.output.stat().st_size / 1e6
    kproto_cli = str(Path(sys.executable).with_name("kproto"))
    kproto_s = timed([kproto_cli, "pcap", "--format", "jsonl", str(args.output)])
    print(f"kproto pcap --format jsonl : {kproto_s:7.2f} s  {size_mb / kproto_s:7.1f} MB/s  (backend {kproto.backend})")
    tshark = shutil.which("tshark")
    if tshark is None:
        print("tshark not installed: no comparison")
    else:
        tshark_s = timed([tshark, "-r", str(args.output), "-d", "tcp.port==9092,kafka", "-T", "json"])
        print(f"tshark -T json             : {tshark_s:7.2f} s  {size_mb / tshark_s:7.1f} MB/s")
        print(f"ratio (tshark time / kproto time): {tshark_s / kproto_s:.1f}x  (target >= 5x)")
    if args.profile:
        profile_kproto(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
