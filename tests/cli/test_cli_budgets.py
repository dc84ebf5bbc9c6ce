"""The CLI's and capture reader's budgets against hostile input (docs/reliability.md, findings F4, F10, F11)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from test_cli_usage import run_kproto
from kproto.capture.conversation import Exchange, Problem, decode_capture
from kproto.capture.reassembly import TcpReassembler
from kproto.capture.reader import CaptureReader
from kproto.pcap.writer import TcpConversation, write_capture
from kproto.cli.exchange_filter import MAX_FILTER_DEPTH, ExchangeFilter, FilterSyntaxError
from kproto.framing import encode_request
from kproto.messages import MetadataRequest


def _one_packet_flows(path: Path, count: int) -> None:
    """``count`` connections to port 9092, each one Metadata request and nothing else (no FIN)."""
    frame = encode_request(MetadataRequest(topics=[]), version=0, correlation_id=1, client_id="c")
    conversations = [
        TcpConversation(
            client=(f"10.1.{i // 250}.{i % 250 + 1}", 40000 + i % 20000),
            server=("10.0.0.10", 9092),
            messages=[("client", frame, 1.0 + i * 1e-4)],
            handshake=False,
            close=False,
        )
        for i in range(count)
    ]
    write_capture(path, conversations)


# ------------------------------------------------------------------------------------------------ F4 flows


def test_tracked_connections_are_capped_and_the_oldest_evicted(tmp_path: Path) -> None:
    path = tmp_path / "flows.pcap"
    _one_packet_flows(path, 400)
    reassembler = TcpReassembler(max_open_connections=50)
    most_open = 0
    for item in CaptureReader(str(path)):
        reassembler.feed(item)  # type: ignore[arg-type]
        reassembler.events()
        most_open = max(most_open, len(reassembler._connections))
    assert most_open <= 50
    assert reassembler.stats.evicted_connections == 350


def test_evicted_connections_are_reported_and_their_requests_still_count(tmp_path: Path) -> None:
    path = tmp_path / "flows.pcap"
    _one_packet_flows(path, 120)
    records = list(decode_capture(str(path), max_open_connections=20))
    evicted = [r for r in records if isinstance(r, Problem) and "max_open_connections" in r.detail]
    assert len(evicted) == 100
    # Every request was still seen: evicted ones come out as unanswered, not lost.
    requests = [r for r in records if isinstance(r, Exchange)] + [
        r for r in records if isinstance(r, Problem) and r.kind.value == "unanswered-request"
    ]
    assert len(requests) >= 120


def test_cli_max_connections_option(tmp_path: Path) -> None:
    path = tmp_path / "flows.pcap"
    _one_packet_flows(path, 60)
    result = run_kproto(
        "pcap", path, "--max-connections", "10", "--format", "jsonl", "--problems-per-kind", "0", check_code=None
    )
    assert result.stdout.decode().count("max_open_connections") == 50
    assert run_kproto("pcap", path, "--max-connections", "0", check_code=2).returncode == 2


# ------------------------------------------------------------------------------------------------ F10 filter depth


def test_deeply_nested_filters_are_a_syntax_error() -> None:
    ExchangeFilter("(" * MAX_FILTER_DEPTH + "error" + ")" * MAX_FILTER_DEPTH)
    with pytest.raises(FilterSyntaxError, match="deep"):
        ExchangeFilter("(" * 1000 + "error" + ")" * 1000)
    with pytest.raises(FilterSyntaxError, match="deep"):
        ExchangeFilter("not " * 1000 + "error")


def test_cli_deep_filter_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "flows.pcap"
    _one_packet_flows(path, 1)
    result = run_kproto("pcap", path, "--filter", "(" * 1000 + "error" + ")" * 1000, check_code=2)
    assert b"Traceback" not in result.stderr and b"deep" in result.stderr


# ------------------------------------------------------------------------------------------------ F11 problems


def _empty_records(path: Path, count: int) -> None:
    """A pcap whose records all have a zero captured length: one problem each."""
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    path.write_bytes(header + struct.pack("<IIII", 1, 0, 0, 60) * count)


def test_repeated_problems_are_summarised(tmp_path: Path) -> None:
    path = tmp_path / "empty.pcap"
    _empty_records(path, 5000)
    result = run_kproto("pcap", path, check_code=None)
    lines = result.stdout.decode().splitlines()
    assert 0 < len(lines) <= 20
    assert b"more problems counted but not listed" in result.stderr
    assert len(result.stdout) < path.stat().st_size  # the output no longer outgrows the input
    summary = run_kproto("pcap", path, "--format", "jsonl", check_code=None).stdout.decode().splitlines()[-1]
    assert '"problems_not_listed":4980' in summary


# ------------------------------------------------------------------------------------------------ F3 -v output

_MAXRSS = """import atexit, os, sys
# VmHWM, not ru_maxrss: the latter keeps the parent's RSS from before exec.
atexit.register(lambda: os.write(2, b"\\nMAXRSS %d\\n" % next(
    int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))))
from kproto.cli import main
sys.exit(main())
"""


def _peak_rss(*args: object) -> Tuple[int, bytes]:
    """Run the CLI in a child; its peak RSS (bytes) and its standard output."""
    proc = subprocess.run([sys.executable, "-c", _MAXRSS, *map(str, args)], capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stderr.rsplit(b"MAXRSS ", 1)[1].split()[0]) * 1024, proc.stdout


def _big_set_frame(path: Path, messages: int, value_size: int) -> int:
    from kproto.records import encode_message_set
    from broker_client import produce_request

    records = encode_message_set([(b"k", bytes(value_size))] * messages, codec="gzip")
    path.write_bytes(encode_request(produce_request("t", 0, records), version=1, correlation_id=1, client_id="x"))
    return messages * (26 + 1 + value_size)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "text"])
def test_verbose_output_of_a_large_compressed_set_stays_within_its_memory_budget(tmp_path: Path, fmt: str) -> None:
    small, big = tmp_path / "small.bin", tmp_path / "big.bin"
    _big_set_frame(small, 10, 100)
    decompressed = _big_set_frame(big, 100_000, 100)  # ~13 MiB decompressed from a ~60 KB frame
    baseline, _ = _peak_rss("decode", small, "-v", "--format", fmt)
    peak, out = _peak_rss("decode", big, "-v", "--format", fmt)
    assert peak - baseline <= 10 * decompressed
    assert 100_000 <= out.count(b"offset") <= 100_002  # every message, plus the frame's own offset key
    if fmt == "json":
        assert (
            json.loads(out)["records"][0]["body"]["topic_data"][0]["partition_data"][0]["records"]["partial"] is False
        )


def test_max_records_bounds_what_verbose_lists(tmp_path: Path) -> None:
    frame = tmp_path / "big.bin"
    _big_set_frame(frame, 5000, 10)
    out = run_kproto("decode", frame, "-v", "--max-records", "3", "--format", "jsonl", check_code=0).stdout
    record = json.loads(out.splitlines()[0])
    records = record["body"]["topic_data"][0]["partition_data"][0]["records"]
    assert len(records["messages"]) == 3 and records["messages_not_shown"] == 4997
    text = run_kproto("decode", frame, "-v", "--max-records", "3", check_code=0).stdout.decode()
    assert text.count("- offset") == 3 and "4997 more messages" in text
