"""Captures read in byte ranges: the same rows as whole files, whatever the split size, damage or
payloads built to look like record headers (no Spark session: the stages run by hand)."""

from __future__ import annotations

import io
import os
import struct
import tempfile
from typing import Any, Dict, List

import pyarrow as pa
import pytest

from kproto.pcap.writer import write_capture, write_segments
from kproto.records import encode_message_set
from kproto.spark.capture_plan import ScanTask, plan_ranges, scan_task
from kproto.spark.capture_splits import RangeStream, read_head
from kproto.spark.local import tables_from_captures_local
from kproto.spark.schema import TABLES
from kproto.spark.local import tables_from_segments_local
from kproto.spark.segment_rows import segment_batches
from kproto.spark.segment_tables import plan_segment_ranges
from test_spark_data import (
    T0,
    Script,
    conversations,
    produce,
    spill_by_hand,
    stage_by_hand,
    write_rotated,
    write_segments_dir,
)


def rows(table: pa.Table) -> List[Dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: repr(sorted(r.items())))


def assert_same_rows(files: List[str], split_bytes: int, partitions: int = 2) -> Dict[str, pa.Table]:
    reference = tables_from_captures_local(files)
    staged = stage_by_hand(reference.files, partitions, seed=split_bytes, split_bytes=split_bytes)
    with tempfile.TemporaryDirectory() as directory:
        spilled = spill_by_hand(reference.files, partitions, directory, split_bytes=split_bytes)
    for name in TABLES:
        assert rows(staged[name]) == rows(reference.tables()[name]), (name, split_bytes)
        assert rows(spilled[name]) == rows(reference.tables()[name]), (name, split_bytes, "spill")
    return staged


def ranges_per_file(files: List[str], split_bytes: int) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for r in plan_ranges([(f, os.path.getsize(f)) for f in files], split_bytes=split_bytes):
        counts[r.path] = counts.get(r.path, 0) + 1
    return counts


@pytest.fixture(scope="module")
def rotated(tmp_path_factory: pytest.TempPathFactory) -> List[str]:
    return write_rotated(str(tmp_path_factory.mktemp("rotated")), conversations(), ["a.pcap", "b.pcap", "c.pcapng"])


@pytest.mark.parametrize("split_bytes", [1024, 2500])
def test_small_splits_give_the_rows_of_whole_files(rotated: List[str], split_bytes: int) -> None:
    # Every file (pcap and pcapng) is cut into several ranges; the connection spanning the three files
    # and the ~15 kB request cut between files and ranges decode once, in order.
    counts = ranges_per_file(rotated, split_bytes)
    assert counts == {f: -(-os.path.getsize(f) // split_bytes) for f in rotated}
    assert counts[rotated[-1]] > 1 or split_bytes > 1024
    staged = assert_same_rows(rotated, split_bytes)
    assert any(r["request_size"] > 10000 for r in staged["exchanges"].to_pylist())


def test_damage_ends_the_reading_as_in_a_whole_file(tmp_path: Any) -> None:
    data = bytearray(io_capture(conversations()))
    middle = record_offsets(bytes(data))[40]
    struct.pack_into("<I", data, middle + 8, 0x7FFFFFF0)  # caplen far beyond the record limit
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(bytes(data))
    truncated = tmp_path / "truncated.pcap"
    truncated.write_bytes(io_capture(conversations())[:-7])
    staged = assert_same_rows([str(damaged), str(truncated)], 1024)
    kinds = {r["file"]: r["detail"].split(" ")[0] for r in staged["problems"].to_pylist() if r["kind"] == "capture"}
    assert kinds == {str(damaged): "record-too-large", str(truncated): "truncated-file"}


def io_capture(convs: Any, fmt: str = "pcap") -> bytes:
    buf = io.BytesIO()
    segments = write_capture(buf, convs, mss=1400).segments
    if fmt == "pcap":
        return buf.getvalue()
    out = io.BytesIO()
    write_segments(out, segments, format=fmt)
    return out.getvalue()


def record_offsets(pcap: bytes) -> List[int]:
    offsets, pos = [], 24
    while pos + 16 <= len(pcap):
        offsets.append(pos)
        pos += 16 + struct.unpack_from("<I", pcap, pos + 8)[0]
    return offsets


def fake_pcap_records(count: int) -> bytes:
    """Bytes that read as ``count`` plausible pcap records (time in the capture's range)."""
    return b"".join(struct.pack("<IIII", int(T0), 5, 4, 4) + b"FAKE" for _ in range(count))


def fake_pcapng_blocks(count: int) -> bytes:
    """Bytes that read as ``count`` enhanced packet blocks with matching leading and trailing lengths."""
    body = struct.pack("<IIIII", 0, 0, 0, 4, 4) + b"FAKE"
    total = 12 + len(body)
    return b"".join(struct.pack("<II", 6, total) + body + struct.pack("<I", total) for _ in range(count))


@pytest.mark.parametrize("fmt,fake", [("pcap", fake_pcap_records(12)), ("pcapng", fake_pcapng_blocks(6))])
def test_payloads_that_look_like_records_do_not_move_a_boundary(tmp_path: Any, fmt: str, fake: bytes) -> None:
    for pad in range(4):  # pcapng blocks sit at multiples of 4: so must the fake ones
        value = bytes(range(256)) * 4 + b"-" * pad + fake + bytes(range(256)) * 2
        s = Script(("10.9.0.30", 42000), "tricky", T0)
        s.exchange("Produce", 1, *produce("orders", 0, encode_message_set([(b"k", value)])))
        data = io_capture([s.conversation()], fmt)
        fake_at = data.index(fake)
        if fmt == "pcap" or fake_at % 4 == 0:
            break
    path = tmp_path / f"tricky.{fmt}"
    path.write_bytes(data)
    # A range starting just before the fake records: its guess lands on them, not on a true boundary.
    split_bytes = fake_at - 8 + (-(fake_at - 8) % 4)
    assert split_bytes >= 1024
    size = len(data)
    guess = scan_task(ScanTask(str(path), size, 1, split_bytes, min(size, 2 * split_bytes), True, 1 << 20)).walk
    assert guess is not None and guess.start is not None and fake_at <= guess.start < fake_at + len(fake)
    # The check against the previous range's walk puts the boundary back; the rows are the whole file's.
    (first, second, *_) = plan_ranges([(str(path), size)], split_bytes=split_bytes)
    assert second.start == first.stop and not fake_at <= second.start < fake_at + len(fake)
    staged = assert_same_rows([str(path)], split_bytes, partitions=1)
    assert [r["value"] for r in staged["messages"].to_pylist()] == [value]


def test_range_stream_reads_prefix_then_range(tmp_path: Any) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"0123456789")
    with RangeStream(open(path, "rb"), b"ab", 3, 7) as stream:
        assert [stream.read(1), stream.read(2), stream.read(-1), stream.read(5)] == [b"a", b"b3", b"456", b""]
    assert read_head(lambda offset, n: b"short"[offset : offset + n], 5).format is None


def test_segments_split_at_entry_boundaries_give_the_rows_of_whole_files(tmp_path: Any) -> None:
    files = write_segments_dir(str(tmp_path))
    big = os.path.join(tmp_path, "orders-0", "00000000000000000000.log")
    data = bytearray(open(big, "rb").read())
    first = 12 + int.from_bytes(data[8:12], "big")
    data[first + 12 + 4 + 1] = 0x07  # a damaged entry in the middle: skipped by its length, in one range
    with open(big, "wb") as f:
        f.write(bytes(data) * 3)
    reference = tables_from_segments_local([str(tmp_path)])
    paths = [(p, os.path.getsize(p)) for p in sorted(files.values())]
    ranges = plan_segment_ranges(paths, 1024)
    assert len([r for r in ranges if r[0] == big]) > 2
    out: Dict[str, List[pa.RecordBatch]] = {"messages": [], "problems": []}
    for path, start, stop in ranges:
        with open(path, "rb") as f:
            f.seek(start)
            chunk = f.read(stop - start)
        for name, batch in segment_batches(path, chunk, base=start):
            out[name].append(batch)
    for name in out:
        assert rows(pa.Table.from_batches(out[name], schema=TABLES[name])) == rows(reference.tables()[name]), name
    kinds = sorted(r["kind"] for r in reference.problems.to_pylist())
    assert kinds == ["corrupt-segment"] * 3 + ["truncated-segment"]


def test_connections_are_placed_whole_largest_first_onto_the_least_loaded_task() -> None:
    from kproto.spark.capture_spill import Piece, assign_connections

    def piece(port: int, size: int, file: str, packet: int, file_time: int) -> Piece:
        return Piece(("10.0.0.1", port, "10.0.0.2", 9092), file, file_time, packet, "s", 0, 0, size, None, None)

    sizes = {1: 900_000, 2: 500_000, 3: 400_000, 4: 100_000}
    # Each connection in two files; b.pcap's first packet is earlier, so it is read first.
    pieces = [
        piece(port, size // 2, file, packet, time)
        for port, size in sizes.items()
        for file, packet, time in (("a.pcap", 7, 2000), ("b.pcap", 3, 1000))
    ]
    diagnostic = Piece(None, "c.pcap", None, 1, None, 0, 0, 0, "truncated", 24)
    placed = assign_connections(pieces + [diagnostic], 2)
    ports = [[key[1] for key, _ in task.connections] for task in placed]
    assert ports == [[1, 4], [2, 3]]  # 900k, then 500k and 400k onto the other, 100k onto the lighter
    for task in placed:
        for key, items in task.connections:
            assert [p.file for p in items] == ["b.pcap", "a.pcap"] and all(p.key == key for p in items)
    assert placed[0].diagnostics == [diagnostic] and not placed[1].diagnostics
    assert len(assign_connections(pieces, 8)) == 4 and len(assign_connections([], 3)) == 1
