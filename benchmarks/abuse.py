"""Rerun the hostile-peer scenarios of docs/reliability.md against a kproto checkout, at full scale.

Usage::

    python benchmarks/abuse.py [--root DIR] [--only F1,F2,...] [--json-out out.json]

``--root`` names the kproto checkout to measure (default: this one), so the same script gives the
"before" figures on an older checkout and the "after" figures here.  Every broker scenario starts
``kproto broker`` from that checkout in its own process, attacks it from this one, and reports:

* the broker's RSS growth (``VmHWM`` - RSS at start, from /proc), the largest response the attack
  received, and the worst latency a well-behaved client saw for a Metadata request sent every 20 ms
  during the attack;
* for the CLI scenarios, the peak RSS of ``kproto pcap`` / ``kproto decode`` and the size of its output.

Nothing here asserts: the tests (tests/broker/test_broker_budgets.py, tests/cli/test_cli_budgets.py) pin the budgets;
this script measures what they buy.  Run it on an otherwise idle machine and state ``uptime`` with its
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from results import Run, add_json_out

HERE = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024


# ------------------------------------------------------------------------------------------------ plumbing


class Broker:
    """``kproto broker`` of the checkout under test, in a subprocess."""

    def __init__(self, root: Path, *args: str, nofile: Optional[int] = None) -> None:
        env = dict(os.environ, PYTHONPATH=str(root))
        code = "import sys; from kproto.cli import main; sys.exit(main())"

        def limits() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "broker", "--port", "0", *args],
            cwd=str(root),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=limits,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on "):
            raise RuntimeError(f"broker did not start: {line!r} {self.proc.stderr.read().decode()[:2000]}")
        host, port = line.split()[-1].rsplit(":", 1)
        self.address = (host, int(port))
        self.stderr_bytes = 0
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        self.rss_start = self.status("VmRSS")

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read(65536), b""):  # type: ignore[union-attr]
            self.stderr_bytes += len(chunk)

    def status(self, field: str) -> int:
        """A /proc/PID/status field in bytes (VmRSS, VmHWM)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        return 0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_growth(self) -> int:
        return self.status("VmHWM") - self.rss_start

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Client:
    """A minimal blocking client built on kproto (of this checkout) for the attacks and the probe."""

    def __init__(self, address: Any, timeout: float = 120.0) -> None:
        from kproto.connection import ClientConnection

        self.sock = socket.create_connection(address, timeout=timeout)
        self.conn = ClientConnection()
        self.largest = 0

    def request(self, message: Any, version: int) -> Any:
        sent = self.conn.send(message, version)
        self.sock.sendall(getattr(sent, "frame", sent))  # older checkouts return the frame itself
        while True:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.largest += len(data)
            for event in self.conn.receive_data(data):
                return getattr(event, "message", None)

    def close(self) -> None:
        self.sock.close()


class LatencyProbe:
    """A well-behaved client: one Metadata request every 20 ms; the worst latency seen."""

    def __init__(self, address: Any) -> None:
        from kproto.messages import MetadataRequest

        self.client = Client(address)
        self.request = MetadataRequest(topics=[])
        self.worst = 0.0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            try:
                self.client.request(self.request, 0)
            except OSError:
                self.failures += 1
                return
            self.worst = max(self.worst, time.perf_counter() - start)
            time.sleep(0.02)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(60)
        self.client.close()
        return self.worst


def _records(size: int, codec: Optional[str] = None) -> bytes:
    from kproto.records import encode_message_set

    value = b"v" * 10_000
    return encode_message_set([(None, value)] * max(size // 10_000, 1), codec=codec)


def _produce(topic: str, partition: int, records: bytes) -> Any:
    from kproto.messages import ProduceRequest

    T = ProduceRequest.TopicProduceData
    return ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])],
    )


def _attack(
    root: Path, attack: Callable[[Broker], Dict[str, Any]], *broker_args: str, nofile: Optional[int] = None
) -> Dict[str, Any]:
    broker = Broker(root, *broker_args, nofile=nofile)
    probe = LatencyProbe(broker.address)
    figures: Dict[str, Any] = {}
    try:
        time.sleep(0.2)
        figures = attack(broker)
        time.sleep(0.3)
    except Exception as exc:  # noqa: BLE001 - what an attack does to an unprotected broker is a figure
        figures = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        worst = probe.stop()
        figures.setdefault("broker_rss_growth_mib", round(broker.rss_growth() / MiB, 1))
        broker.stop()
    figures["worst_probe_latency_s"] = round(worst, 3)
    figures["probe_failures"] = probe.failures
    return figures


# ------------------------------------------------------------------------------------------------ scenarios


def f1_fetch(root: Path) -> Dict[str, Any]:
    from kproto.messages import FetchRequest

    def attack(broker: Broker) -> Dict[str, Any]:
        c = Client(broker.address)
        for _ in range(8):
            c.request(_produce("big", 0, _records(1 * MiB)), 1)
        T = FetchRequest.FetchTopic
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=0,
            topics=[
                T(
                    topic="big",
                    partitions=[
                        T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=8 * MiB) for _ in range(100)
                    ],
                )
            ],
        )
        c.largest = 0
        try:
            c.request(request, 1)
        except OSError as exc:
            return {"error": str(exc)}
        finally:
            c.close()
        return {"largest_response_mib": round(c.largest / MiB, 1)}

    return _attack(root, attack, "--topic", "big:1")


def f2_metadata(root: Path) -> Dict[str, Any]:
    from kproto.messages import MetadataRequest

    def attack(broker: Broker) -> Dict[str, Any]:
        c = Client(broker.address)
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")] * 3_000_000)
        c.largest = 0
        c.request(request, 0)
        c.close()
        return {"largest_response_mib": round(c.largest / MiB, 2)}

    return _attack(root, attack, "--topic", "t:1")


def f5_produce(root: Path) -> Dict[str, Any]:
    from kproto.messages import ProduceRequest
    from kproto.records import encode_message_set

    def attack(broker: Broker) -> Dict[str, Any]:
        wrapper = encode_message_set([(None, bytes(64 * 1024))] * 1024, codec="gzip")  # 64 MiB of zeros
        T = ProduceRequest.TopicProduceData
        request = ProduceRequest(
            acks=1,
            timeout_ms=60_000,
            topic_data=[
                T(name="t", partition_data=[T.PartitionProduceData(index=i, records=wrapper) for i in range(20)])
            ],
        )
        c = Client(broker.address)
        c.request(request, 1)
        c.close()
        return {"wrapper_kib": round(len(wrapper) / 1024)}

    return _attack(root, attack, "--topic", "t:20")


def f6_accept(root: Path) -> Dict[str, Any]:
    def attack(broker: Broker) -> Dict[str, Any]:
        socks: List[socket.socket] = []
        cpu0 = broker.cpu_seconds()
        err0 = broker.stderr_bytes
        for _ in range(400):
            try:
                socks.append(socket.create_connection(broker.address, timeout=5))
            except OSError:
                break
        time.sleep(10)
        figures = {
            "connections_opened": len(socks),
            "stderr_kib_per_10s": round((broker.stderr_bytes - err0) / 1024, 1),
            "broker_cpu_percent": round((broker.cpu_seconds() - cpu0) / 10 * 100, 1),
        }
        for s in socks:
            s.close()
        return figures

    return _attack(root, attack, nofile=256)


def f7_buffers(root: Path) -> Dict[str, Any]:
    def attack(broker: Broker) -> Dict[str, Any]:
        socks = []
        for _ in range(10):
            s = socket.create_connection(broker.address)
            s.setblocking(False)
            s.send(struct.pack(">i", 100 * MiB - 1))
            socks.append(s)
        chunk = bytes(256 * 1024)
        sent = [0] * len(socks)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            progress = False
            for i, s in enumerate(socks):
                if sent[i] >= 100 * MiB - 1 - len(chunk):
                    continue
                try:
                    sent[i] += s.send(chunk)
                    progress = True
                except (BlockingIOError, OSError):
                    pass
            if not progress:
                time.sleep(0.05)
        growth = broker.rss_growth()
        for s in socks:
            s.close()
        return {"bytes_sent_mib": round(sum(sent) / MiB, 1), "broker_rss_growth_mib": round(growth / MiB, 1)}

    return _attack(root, attack)


def f8_record(root: Path) -> Dict[str, Any]:
    """300 MB of traffic through a recording broker whose log stays at 1 MB: the fetches are read
    from memory the broker already holds, so RSS growth is what the recording costs."""
    from kproto.messages import FetchRequest

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.pcap"

        def attack(broker: Broker) -> Dict[str, Any]:
            c = Client(broker.address)
            c.request(_produce("t", 0, _records(1 * MiB)), 1)
            T = FetchRequest.FetchTopic
            fetch = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                topics=[
                    T(
                        topic="t",
                        partitions=[T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=2 * MiB)],
                    )
                ],
            )
            for _ in range(300):
                c.request(fetch, 1)
            c.close()
            size = path.stat().st_size if path.exists() else 0  # older brokers wrote the file at exit
            return {"traffic_mib": 300, "file_mib_while_running": round(size / MiB, 1)}

        return _attack(root, attack, "--topic", "t:1", "--record", str(path))


_CLI = """import atexit, os, sys
# VmHWM, not ru_maxrss: the latter keeps the parent's RSS from before exec.
atexit.register(lambda: os.write(2, b"\\nMAXRSS %d\\n" % next(
    int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))))
from kproto.cli import main
sys.exit(main())
"""


def _cli(root: Path, *args: str) -> Dict[str, Any]:
    """Run the CLI of ``root``; its own peak RSS comes back on its last line of stderr."""
    env = dict(os.environ, PYTHONPATH=str(root))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CLI, *args], cwd=str(root), env=env, capture_output=True)
    stderr = proc.stderr.decode(errors="replace")
    head, _, tail = stderr.rpartition("MAXRSS ")
    return {
        "exit": proc.returncode,
        "seconds": round(time.perf_counter() - start, 1),
        "peak_rss_mib": round(int(tail.split()[0]) / 1024, 1) if tail.strip() else None,
        "stdout_mib": round(len(proc.stdout) / MiB, 2),
        "stderr_tail": head[-200:],
    }


def f3_verbose(root: Path) -> Dict[str, Any]:
    from kproto.framing import encode_request
    from kproto.records import encode_message_set

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "frame.bin"
        count = 500_000  # 100-byte values: 63 MiB decompressed, just under the 64 MiB decompression cap
        records = encode_message_set([(None, bytes(100))] * count, codec="gzip")
        path.write_bytes(encode_request(_produce("t", 0, records), version=1, correlation_id=1, client_id="x"))
        figures = {"frame_kib": round(path.stat().st_size / 1024), "decompressed_mib": round(count * 126 / MiB, 1)}
        for fmt in ("text", "json"):
            run = _cli(root, "decode", str(path), "-v", "--format", fmt)
            run.pop("stderr_tail")
            figures[fmt] = run
        return figures


def f4_flows(root: Path) -> Dict[str, Any]:
    from kproto.pcap.writer import PcapWriter, PlannedSegment, build_frame

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flows.pcap"
        with open(path, "wb") as f:
            writer = PcapWriter(f, 1)
            for i in range(300_000):
                seg = PlannedSegment(
                    i,
                    True,
                    (f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", 40000),
                    ("10.0.0.10", 9092),
                    1,
                    0,
                    0x18,
                    b"\x00\x00\x00\x05junk!",
                    1_000_000_000 + i,
                    0,
                )
                writer.write(seg.timestamp_ns, build_frame(seg))
        figures = _cli(root, "pcap", str(path), "--format", "jsonl", "--no-progress")
        figures["capture_mib"] = round(path.stat().st_size / MiB, 1)
        return figures


def f10_filter(root: Path) -> Dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".pcap") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        f.flush()
        figures = _cli(root, "pcap", f.name, "--filter", "(" * 1000 + "error" + ")" * 1000)
        figures["traceback"] = "Traceback" in figures.pop("stderr_tail")
        return figures


def f11_problems(root: Path) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "empty.pcap"
        with open(path, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
            record = struct.pack("<IIII", 1, 0, 0, 60) * 65536
            for _ in range(128):  # 128 MiB of empty records
                f.write(record)
        figures = _cli(root, "pcap", str(path), "--no-progress")
        figures["capture_mib"] = round(path.stat().st_size / MiB, 1)
        figures.pop("stderr_tail")
        return figures


SCENARIOS: Dict[str, Callable[[Path], Dict[str, Any]]] = {
    "F1": f1_fetch,
    "F2": f2_metadata,
    "F3": f3_verbose,
    "F4": f4_flows,
    "F5": f5_produce,
    "F6": f6_accept,
    "F7": f7_buffers,
    "F8": f8_record,
    "F10": f10_filter,
    "F11": f11_problems,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=HERE, help="kproto checkout to measure (default: this one)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    add_json_out(parser)
    args = parser.parse_args()
    record = Run("abuse")
    sys.path.insert(0, str(args.root))
    print(f"root {args.root}  load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    results = {}
    for name in args.only.split(","):
        try:
            results[name] = SCENARIOS[name](args.root)
        except Exception as exc:  # noqa: BLE001 - a scenario that breaks the old code is a figure too
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(name, json.dumps(results[name]), flush=True)
        record.add(scenario=name, **{k: v for k, v in results[name].items() if isinstance(v, (str, int, float))})
    record.save(args.json_out)


if __name__ == "__main__":
    main()
