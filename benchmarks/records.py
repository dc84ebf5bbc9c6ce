"""Records throughput: kproto (Cython and pure) against aiokafka (Cython and pure) and kafka-python, for
magic 0/1 message sets and magic 2 record batches.

Runs everything in one process, so the ratios are comparable even where absolute figures drift.  Decode
means: parse the set and touch ``offset``, ``key`` and ``value`` of every message; ``decode+h`` (magic 2)
touches ``headers`` too (every implementation builds a record's headers with the record; kproto-cython
refills the header tuples of records the loop has dropped instead of allocating new ones);
encode means: build the set from ``(key, value[, timestamp[, headers]])`` data.  Magic 2 records carry one
header (``trace``: 8 bytes); every magic 2 decoder checks the batch CRC-32C.  All decoders read the same bytes
(encoded by kproto).  The
``crc32`` row is zlib.crc32 over the uncompressed message set: the physical bound for any CRC-checking
decoder.  ``columns`` is :func:`kproto.records.decode_columns` (no per-message objects).

How it is timed (the same for every implementation; see ``measure_case``).  The machine this runs on is
often a shared VM, and a figure averaged over a fixed stretch of time mostly measures the neighbours.
Measured on the 10k x 100 B magic 2 decode (2-core VM, load ~2): the CPU time of one call (``process_time``)
ranged from 1.8 to 3.3 ms with no context switch in it, and wall time up to 10 ms when preempted, while
the fastest calls agreed to 1-2 %; no garbage collection ran during any of these calls (the objects a
record makes are freed before the next one is made) and none page-faulted.  So "best of 3 rounds of
0.2 s", the method before, swung by up to 1.6x between two ops doing identical work, and by more between
implementations timed minutes apart.  Now a case -- one set, one codec -- is timed as a whole (at load 8 on
2 cores, three runs of that case gave ratios within 5 % of each other, where wall-clock bests swung 4x):

* every (implementation, op) of the case runs once first (warm-up), and is given the number of calls that
  fills one sample of at least ``--sample`` seconds (1, 2, 5, 10, 20, ... calls);
* then rounds each take one sample of every (implementation, op), round-robin, the order rotated by one
  place each round, so drift in load, CPU clock or allocator state reaches all alike and none always runs
  first or after the same neighbour; a function leaves the rotation when it has ``--rounds`` samples, or
  (the slow pure ones) has spent ``--budget`` seconds on at least 5 samples;
* ``gc.collect()`` runs before every sample of every implementation (untimed), so each starts with an
  empty young generation; the garbage collector stays enabled throughout, so collections a decoder's own
  allocations trigger are part of its time;
* a sample is timed in CPU seconds of this process (``time.process_time``: user and system time of all its
  threads, so page faults and any helper threads count, time spent waiting for a core does not);
* the figure is the fastest sample (seconds per call; interference only ever adds time, so the minimum is
  the stable estimate of the work itself); ``spread`` is how much slower the median sample was, a
  measure of the noise in that figure.  Ratios are between those best figures.

    python benchmarks/records.py            # full matrix
    python benchmarks/records.py --quick    # 10k x 100 B, magic 0, uncompressed + lz4
    python benchmarks/records.py --codec none --magic 0 --size small --impl kproto-cython,aiokafka-cython
    python benchmarks/records.py --magic 2 --v2-codec none,lz4,zstd   # the record batch cases only
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import sys
import time
import zlib
from typing import Any, Callable, Dict, List, Optional, Tuple

from results import Run, add_json_out

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kproto._backend import records_module  # noqa: E402
from kproto.records.codec import MessageSetCodec  # noqa: E402

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
SIZES = {"small": (10_000, 100), "large": (1_000, 10_240)}
IMPLS = ["kproto-cython", "kproto-pure", "aiokafka-cython", "aiokafka-pure", "kafka-python"]


def _kproto_codec(name: str) -> Optional[MessageSetCodec]:
    if name == "kproto-pure":
        return MessageSetCodec(records_module(False))
    try:
        return MessageSetCodec(records_module(True))
    except ImportError:
        return None


def _peer_classes(name: str) -> Optional[Tuple[Any, Any]]:
    """(builder class, memory-records class) of a peer implementation, or None when not installed."""
    try:
        if name == "aiokafka-cython":
            from aiokafka.record._crecords import LegacyRecordBatchBuilder, MemoryRecords

            return LegacyRecordBatchBuilder, MemoryRecords
        if name == "aiokafka-pure":  # what aiokafka uses with AIOKAFKA_NO_EXTENSIONS=1
            from aiokafka.record.legacy_records import _LegacyRecordBatchBuilderPy
            from aiokafka.record.memory_records import _MemoryRecordsPy

            return _LegacyRecordBatchBuilderPy, _MemoryRecordsPy
        if name == "kafka-python":
            from kafka.record.legacy_records import LegacyRecordBatchBuilder
            from kafka.record.memory_records import MemoryRecords

            return LegacyRecordBatchBuilder, MemoryRecords
    except ImportError:
        return None
    return None


def make_messages(count: int, size: int, magic: int) -> List[tuple]:
    payload = os.urandom(size // 2).hex().encode()[:size]  # compressible like text, not trivially so
    base_ts = 1_700_000_000_000
    if magic:
        return [(None, payload[i % 7 :] + payload[: i % 7], base_ts + i) for i in range(count)]
    return [(None, payload[i % 7 :] + payload[: i % 7]) for i in range(count)]


def kproto_ops(
    codec: MessageSetCodec, messages: List[tuple], data: bytes, magic: int, cname: str
) -> Dict[str, Callable[[], Any]]:
    compression = None if cname == "none" else cname
    decode = codec.decode_message_set

    def run_decode() -> None:  # the CRCs aiokafka's consumer checks: top-level messages, wrappers included
        for m in decode(data, check_inner_crc=False):
            m.offset
            m.key
            m.value

    def run_decode_all() -> None:  # the default: every CRC, inner messages of compressed wrappers included
        for m in decode(data):
            m.offset
            m.key
            m.value

    def run_decode_nocrc() -> None:
        for m in decode(data, check_crc=False):
            m.offset
            m.key
            m.value

    return {
        "decode": run_decode,
        "decode-all": run_decode_all,
        "decode-nocrc": run_decode_nocrc,
        "encode": lambda: codec.encode_message_set(messages, magic=magic, codec=compression),
        "columns": lambda: codec.decode_columns(data),
    }


def peer_ops(
    classes: Tuple[Any, Any], messages: List[tuple], data: bytes, magic: int, cname: str
) -> Dict[str, Callable[[], Any]]:
    builder_cls, records_cls = classes
    ctype = CODEC_IDS[cname]

    def run_decode() -> None:
        records = records_cls(data)
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            for r in batch:
                r.offset
                r.key
                r.value

    def run_decode_crc() -> None:  # what aiokafka's consumer does with check_crcs=True (the default)
        records = records_cls(data)
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            if not batch.validate_crc():
                raise ValueError("crc")
            for r in batch:
                r.offset
                r.key
                r.value

    def run_decode_all() -> None:  # kafka-python's consumer (check_crcs=True): the batch's CRC and each record's
        records = records_cls(data)
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            if not batch.validate_crc():
                raise ValueError("crc")
            for r in batch:
                if not r.validate_crc():
                    raise ValueError("crc")
                r.offset
                r.key
                r.value

    def run_encode() -> bytes:
        builder = builder_cls(magic, ctype, 2**30)
        append = builder.append
        if magic:
            for i, (key, value, ts) in enumerate(messages):
                append(i, ts, key, value)
        else:
            for i, (key, value) in enumerate(messages):
                append(i, None, key, value)
        return bytes(builder.build())

    ops = {"decode": run_decode_crc, "decode-nocrc": run_decode, "encode": run_encode}
    try:
        per_record_crc = hasattr(next(iter(records_cls(data).next_batch())), "validate_crc")  # aiokafka's: none
    except Exception:  # a combination the peer refuses: its other ops report it
        per_record_crc = False
    if per_record_crc:
        ops["decode-all"] = run_decode_all
    return ops


def _v2_peer_classes(name: str) -> Optional[Tuple[Any, Any]]:
    try:
        if name == "aiokafka-cython":
            from aiokafka.record._crecords import DefaultRecordBatch, DefaultRecordBatchBuilder

            return DefaultRecordBatchBuilder, DefaultRecordBatch
        if name == "aiokafka-pure":
            from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy, _DefaultRecordBatchPy

            return _DefaultRecordBatchBuilderPy, _DefaultRecordBatchPy
        if name == "kafka-python":
            from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

            return DefaultRecordBatchBuilder, DefaultRecordBatch
    except ImportError:
        return None
    return None


def make_records(count: int, size: int) -> List[tuple]:
    return [
        (key, value, ts, [("trace", b"%08d" % i)]) for i, (key, value, ts) in enumerate(make_messages(count, size, 1))
    ]


def v2_kproto_ops(
    codec: MessageSetCodec, records: List[tuple], data: bytes, cname: str
) -> Dict[str, Callable[[], Any]]:
    compression = None if cname == "none" else cname
    decode = codec.decode_records

    def run_decode() -> None:
        for r in decode(data):
            r.offset
            r.key
            r.value

    def run_decode_headers() -> None:
        for r in decode(data):
            r.offset
            r.key
            r.value
            r.headers

    return {
        "decode": run_decode,
        "decode+h": run_decode_headers,
        "encode": lambda: codec.encode_record_batch(records, codec=compression),
        "columns": lambda: codec.decode_columns(data),
    }


def v2_peer_ops(
    classes: Tuple[Any, Any], records: List[tuple], data: bytes, cname: str
) -> Dict[str, Callable[[], Any]]:
    builder_cls, batch_cls = classes
    ctype = V2_CODEC_IDS[cname]

    def run_decode(headers: bool) -> None:
        batch = batch_cls(data)
        if not batch.validate_crc():  # aiokafka's consumer does this by default (check_crcs=True)
            raise ValueError("crc")
        for r in batch:
            r.offset
            r.key
            r.value
            if headers:
                r.headers

    def run_encode() -> bytes:
        builder = builder_cls(2, ctype, 0, -1, -1, -1, 2**30)
        append = builder.append
        for i, (key, value, ts, headers) in enumerate(records):
            append(i, timestamp=ts, key=key, value=value, headers=headers)
        return bytes(builder.build())

    return {"decode": lambda: run_decode(False), "decode+h": lambda: run_decode(True), "encode": run_encode}


V2_CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def run_v2(args: argparse.Namespace, impls: List[str]) -> None:
    for size_name in args.size.split(","):
        count, size = SIZES[size_name]
        records = make_records(count, size)
        for cname in args.v2_codec.split(","):
            data = MessageSetCodec(records_module(False)).encode_record_batch(
                records, codec=None if cname == "none" else cname
            )
            fns: Dict[Key, Callable[[], Any]] = {}
            for impl in impls:
                ops: Optional[Dict[str, Callable[[], Any]]] = None
                if impl.startswith("kproto"):
                    codec = _kproto_codec(impl)
                    ops = v2_kproto_ops(codec, records, data, cname) if codec else None
                else:
                    classes = _v2_peer_classes(impl)
                    ops = v2_peer_ops(classes, records, data, cname) if classes else None
                fns.update(((impl, op), fn) for op, fn in (ops or {}).items())
            label = f"{count}x{size}B m2"
            _print_rates(
                label,
                cname,
                rates_of(runnable(label, cname, fns), count, args),
                ("decode", "decode+h", "encode", "columns"),
            )


Key = Tuple[str, str]  # (implementation, op)
#: This run's rows, saved as JSON at the end (docs/benchmarks.md is rendered from them).
RUN = Run("records")
MIN_SAMPLES = 5


def calls_per_sample(fn: Callable[[], Any], sample: float) -> int:
    """Calls (1, 2, 5, 10, 20, ...) of ``fn`` that take at least ``sample`` seconds together."""
    number = 1
    while True:
        for step in (1, 2, 5):
            calls = number * step
            start = time.process_time()
            for _ in range(calls):
                fn()
            if time.process_time() - start >= sample:
                return calls
        number *= 10


def measure_case(fns: Dict[Key, Callable[[], Any]], args: argparse.Namespace) -> Dict[Key, Tuple[float, float]]:
    """(best seconds per call, median / best - 1) of every function of one case, timed in interleaved rounds.

    See the module docstring: warm-up and calibration first, then round-robin rounds (order rotated each
    round) of one sample per function, ``gc.collect()`` before each sample, until every function has
    ``args.rounds`` samples or has spent ``args.budget`` seconds on at least ``MIN_SAMPLES`` of them."""
    keys = list(fns)
    numbers = {key: calls_per_sample(fns[key], args.sample) for key in keys}
    samples: Dict[Key, List[float]] = {key: [] for key in keys}
    spent = dict.fromkeys(keys, 0.0)
    for turn in itertools.count():
        shift = turn % len(keys)
        active = [
            key
            for key in keys[shift:] + keys[:shift]
            if len(samples[key]) < args.rounds and (spent[key] < args.budget or len(samples[key]) < MIN_SAMPLES)
        ]
        if not active:
            break
        for key in active:
            fn, calls = fns[key], numbers[key]
            gc.collect()
            start = time.process_time()
            for _ in range(calls):
                fn()
            elapsed = time.process_time() - start
            samples[key].append(elapsed / calls)
            spent[key] += elapsed
    result = {}
    for key, seconds in samples.items():
        seconds.sort()
        result[key] = (seconds[0], seconds[len(seconds) // 2] / seconds[0] - 1)
    return result


def runnable(label: str, cname: str, fns: Dict[Key, Callable[[], Any]]) -> Dict[Key, Callable[[], Any]]:
    """The functions that run on this case (one warm-up call each); a refusal is printed as n/a."""
    kept = {}
    for (impl, op), fn in fns.items():
        try:
            fn()
        except Exception as exc:  # a peer that refuses a combination (aiokafka: lz4 + magic 0)
            print(f"{label:<16} {cname:<7} {op:<8} {impl:<16} {'n/a':>9}  ({type(exc).__name__}: {str(exc)[:50]})")
            continue
        kept[(impl, op)] = fn
    return kept


def rates_of(fns: Dict[Key, Callable[[], Any]], count: int, args: argparse.Namespace) -> Dict[Key, Tuple[float, float]]:
    """(M records/s, spread) of every function of a case that decodes or encodes ``count`` records per call."""
    return {key: (count / best / 1e6, spread) for key, (best, spread) in measure_case(fns, args).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10k x 100 B, magic 0, none + lz4, short rounds")
    parser.add_argument("--size", default="small,large", help="small (10k x 100 B), large (1k x 10 KiB)")
    parser.add_argument("--codec", default="none,gzip,snappy,lz4")
    parser.add_argument("--magic", default="0,1,2")
    parser.add_argument("--v2-codec", default="none,lz4,zstd", help="codecs of the magic 2 cases")
    parser.add_argument("--impl", default=",".join(IMPLS))
    parser.add_argument("--rounds", type=int, default=30, help="interleaved timing rounds per case (see above)")
    parser.add_argument("--sample", type=float, default=0.002, help="least seconds of one timed sample")
    parser.add_argument(
        "--budget",
        type=float,
        default=0.5,
        help="seconds of samples after which a slow function stops (given 5 samples)",
    )
    add_json_out(parser)
    args = parser.parse_args()
    if args.quick:
        args.size, args.codec, args.magic, args.rounds = "small", "none,lz4", "0", 10
    impls = args.impl.split(",")
    RUN.settings = {"rounds": args.rounds, "sample_s": args.sample, "budget_s": args.budget}
    print(
        f"python {sys.version.split()[0]}; keys None; values random hex text; one process; best of up to "
        f"{args.rounds} interleaved samples (spread: median sample / best - 1)"
    )
    print("magic 0/1 decode: the same CRC work on both sides, what aiokafka's consumer checks: the CRC of every")
    print("    top-level message, compressed wrappers included (a wrapper's covers its compressed bytes), not those")
    print("    of the messages inside a wrapper (kproto check_inner_crc=False; peers batch.validate_crc())")
    print("decode-all: every CRC, inner messages included (kproto's default; kafka-python batch and record")
    print("    validate_crc(), as its consumer does; aiokafka's records have no validate_crc(): no row)")
    print("decode-nocrc: no CRC checked on either side")
    header = (
        f"{'set':<16} {'codec':<7} {'op':<8} {'implementation':<16} {'M msg/s':>9} {'spread':>6}  "
        "ratios (first column / peer)"
    )
    print(header)
    print("-" * len(header))
    magics = [int(m) for m in args.magic.split(",")]
    for size_name in args.size.split(","):
        count, size = SIZES[size_name]
        for magic in (m for m in magics if m < 2):
            messages = make_messages(count, size, magic)
            plain = MessageSetCodec(records_module(False)).encode_message_set(messages, magic=magic)
            crc_rate = rates_of({("zlib", "crc32"): lambda: zlib.crc32(plain)}, count, args)[("zlib", "crc32")][0]
            RUN.add(
                set=f"{count}x{size}B m{magic}", codec="-", op="crc32", impl="zlib bound", m_per_s=crc_rate, spread=None
            )
            print(
                f"{count}x{size}B m{magic:<3} {'-':<7} {'crc32':<8} {'zlib bound':<16} {crc_rate:>9.2f}"
                f"  ({len(plain) / 1e6 * crc_rate / count * 1e6 / 1e3:.1f} GB/s)"
            )
            for cname in args.codec.split(","):
                data = MessageSetCodec(records_module(False)).encode_message_set(
                    messages, magic=magic, codec=None if cname == "none" else cname
                )
                fns: Dict[Key, Callable[[], Any]] = {}
                for impl in impls:
                    ops: Optional[Dict[str, Callable[[], Any]]] = None
                    if impl.startswith("kproto"):
                        codec = _kproto_codec(impl)
                        ops = kproto_ops(codec, messages, data, magic, cname) if codec else None
                    else:
                        classes = _peer_classes(impl)
                        ops = peer_ops(classes, messages, data, magic, cname) if classes else None
                    fns.update(((impl, op), fn) for op, fn in (ops or {}).items())
                label = f"{count}x{size}B m{magic}"
                _print_rates(label, cname, rates_of(runnable(label, cname, fns), count, args))
    if 2 in magics:
        run_v2(args, impls)
    RUN.save(args.json_out)


# kproto's columnar decode (CRC checked) is compared with the peers' CRC-checked object decode.
_PEER_OP = {
    "decode": "decode",
    "decode-all": "decode-all",
    "decode-nocrc": "decode-nocrc",
    "decode+h": "decode+h",
    "encode": "encode",
    "columns": "decode",
}


def _print_rates(
    label: str,
    cname: str,
    rates: Dict[Key, Tuple[float, float]],
    ops: Tuple[str, ...] = ("decode", "decode-all", "decode-nocrc", "encode", "columns"),
) -> None:
    for op in ops:
        for (impl, o), (rate, spread) in rates.items():
            if o != op:
                continue
            notes = []
            if impl.startswith("kproto"):
                for (peer, po), (prate, _) in rates.items():
                    if po == _PEER_OP[op] and not peer.startswith("kproto"):
                        notes.append(f"{rate / prate:.2f}x {peer}")
                if op == "columns" and ("kproto-cython", "decode") in rates and impl == "kproto-cython":
                    notes.append(f"{rate / rates[('kproto-cython', 'decode')][0]:.2f}x own decode")
            RUN.add(set=label, codec=cname, op=op, impl=impl, m_per_s=rate, spread=spread)
            print(f"{label:<16} {cname:<7} {op:<8} {impl:<16} {rate:>9.3g} {spread:>6.0%}  {', '.join(notes)}")


if __name__ == "__main__":
    main()
