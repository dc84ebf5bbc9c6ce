"""Stage 1's packed connections handed to stage 2 through spill files, and connections placed by the driver.

Why not Spark's shuffle: the packed rows of stage 1 are nearly all payload bytes, and a shuffle moves
every one of them Python → Arrow → JVM rows → compressed shuffle files → sort → Arrow → Python, and
hashes connection keys onto tasks blindly (6 connections on 2 tasks can land 5 and 1).  Measured on
the benchmark's captures, that hand-off and its sort cost about as much as the decode itself.  So
:func:`run_captures <kproto.spark.job.run_captures>` runs two plain jobs instead:

1. **Stage 1** (:class:`SpillRanges`, one task per capture range): the range's
   :data:`~kproto.spark.capture_stages.SEGMENTS` rows are written end to end to one spill file of the
   task (``OUT/_kproto_spill-<job>/<uuid>.seg``, beside the tables, so every node reaches it) and the
   task returns only a :class:`Piece` per row — connection key, reading order, where its bytes are.
2. **On the driver** (:func:`assign_connections`): the pieces are sorted into reading order per
   connection key and whole keys are placed on the stage 2 tasks, largest first onto the least loaded
   (by bytes), so the tasks finish together.  Capture diagnostics go to the first task.
3. **Stage 2** (:class:`DecodePieces`, one task per placement): each key's pieces are read back from
   the spill files in order and decoded by :func:`~kproto.spark.capture_stages.decode_packed_rows`,
   the same decode as the shuffled path, so the rows are the same.

The spill directory is removed when the job commits or fails.  The pieces are small (one per
connection per range), so the driver holds a few per connection and range; the bytes stay on the
shared file system.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import pyarrow as pa

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.spark.capture_plan import CaptureRange
from kproto.spark.capture_stages import PackedRow, decode_packed_rows, segment_rows
from kproto.spark.inputs import capture_order_key

__all__ = ["Piece", "RangePieces", "SpillRanges", "TaskPieces", "assign_connections", "DecodePieces"]

#: Bytes a piece counts for in the balance besides its own (a connection's fixed cost).
_PIECE_WEIGHT = 4096

Key = Tuple[str, int, str, int]


class Piece(NamedTuple):
    """One stage 1 row, without its bytes: a connection's packed segments of one range (``key`` set,
    ``records`` and then ``payloads`` bytes at ``offset`` of ``spill``), or a capture diagnostic."""

    key: Optional[Key]
    file: str
    file_time: Optional[int]
    packet: Optional[int]
    spill: Optional[str]
    offset: int
    records: int
    payloads: int
    diagnostic: Optional[str]
    file_offset: Optional[int]


class RangePieces(NamedTuple):
    """What a stage 1 task returns for one range: its pieces and the kproto backend it ran on."""

    pieces: List[Piece]
    backend: str


class SpillRanges:
    """Stage 1 (picklable; Spark ships it): :class:`~kproto.spark.capture_plan.CaptureRange` tuples in,
    one :class:`RangePieces` per range out, the bytes written to a spill file in ``directory`` (a local
    path or a URI pyarrow writes)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory.rstrip("/")

    def __call__(self, ranges: Iterable[Tuple[Any, ...]]) -> Iterator[RangePieces]:
        import kproto
        from kproto.spark.table_writer import pyarrow_path

        fs, directory = pyarrow_path(self.directory)
        for item in ranges:
            pieces: List[Piece] = []
            leaf = f"{uuid.uuid4().hex}.seg"
            name = f"{self.directory}/{leaf}"  # as stage 2 opens it
            stream: Any = None
            at = 0
            try:
                for (
                    lo_ip,
                    lo_port,
                    hi_ip,
                    hi_port,
                    file,
                    file_time,
                    packet,
                    records,
                    payloads,
                    diagnostic,
                    file_offset,
                ) in segment_rows(CaptureRange(*item)):
                    if diagnostic is not None:
                        pieces.append(Piece(None, file, file_time, packet, None, 0, 0, 0, diagnostic, file_offset))
                        continue
                    if stream is None:
                        fs.create_dir(directory, recursive=True)
                        stream = fs.open_output_stream(f"{directory.rstrip('/')}/{leaf}")
                    stream.write(records)
                    stream.write(payloads)
                    pieces.append(
                        Piece(
                            (lo_ip, lo_port, hi_ip, hi_port),
                            file,
                            file_time,
                            packet,
                            name,
                            at,
                            len(records),
                            len(payloads),
                            None,
                            None,
                        )
                    )
                    at += len(records) + len(payloads)
            finally:
                if stream is not None:
                    stream.close()
            yield RangePieces(pieces, kproto.backend)


class TaskPieces(NamedTuple):
    """One stage 2 task's input: capture diagnostics, then connections, each its pieces in reading order."""

    diagnostics: List[Piece]
    connections: List[Tuple[Key, List[Piece]]]


def _reading_order(piece: Piece) -> Tuple[Any, ...]:
    return (capture_order_key(piece.file_time, piece.file), piece.packet or 0)


def assign_connections(pieces: Iterable[Piece], tasks: int) -> List[TaskPieces]:
    """The pieces placed on at most ``tasks`` stage 2 tasks: each connection key whole on one task,
    in reading order; keys largest first onto the least loaded task; no empty task (at least one)."""
    diagnostics: List[Piece] = []
    by_key: Dict[Key, List[Piece]] = {}
    for piece in pieces:
        if piece.key is None:
            diagnostics.append(piece)
        else:
            by_key.setdefault(piece.key, []).append(piece)
    weights = {key: sum(p.records + p.payloads + _PIECE_WEIGHT for p in items) for key, items in by_key.items()}
    count = max(1, min(tasks, len(by_key)))
    placed: List[TaskPieces] = [TaskPieces([], []) for _ in range(count)]
    loads = [0] * count
    for key in sorted(by_key, key=lambda k: (-weights[k], k)):
        task = loads.index(min(loads))
        loads[task] += weights[key]
        placed[task].connections.append((key, sorted(by_key[key], key=_reading_order)))
    diagnostics.sort(key=_reading_order)
    placed[0].diagnostics.extend(diagnostics)
    for placement in placed:
        placement.connections.sort(key=lambda item: item[0])
    return placed


class DecodePieces:
    """Stage 2 (picklable): :class:`TaskPieces` in, ``(table name, batch)`` pairs out (for
    :class:`~kproto.spark.table_writer.TaskWriter`); spill files are read with pyarrow."""

    def __init__(self, ports: Collection[int] = DEFAULT_PORTS, detect: bool = True) -> None:
        self.ports = frozenset(ports)
        self.detect = detect

    def __call__(self, tasks: Iterable[TaskPieces]) -> Iterator[Tuple[str, pa.RecordBatch]]:
        files: Dict[str, Any] = {}
        try:
            rows = _packed_rows(tasks, _opener(files))
            yield from decode_packed_rows(rows, ports=self.ports, detect=self.detect)
        finally:
            for handle in files.values():
                handle.close()


def _opener(files: Dict[str, Any]) -> Callable[[str], Any]:
    def open_spill(name: str) -> Any:
        handle = files.get(name)
        if handle is None:
            from kproto.spark.table_writer import pyarrow_path

            fs, path = pyarrow_path(name)
            handle = files[name] = fs.open_input_file(path)
        return handle

    return open_spill


def _packed_rows(tasks: Iterable[TaskPieces], open_spill: Callable[[str], Any]) -> Iterator[PackedRow]:
    for task in tasks:
        for p in task.diagnostics:
            yield PackedRow(None, p.file, p.packet, b"", b"", p.diagnostic, p.file_offset)
        for key, pieces in task.connections:
            for p in pieces:
                assert p.spill is not None
                data = open_spill(p.spill).read_at(p.records + p.payloads, p.offset)
                view = memoryview(data)
                yield PackedRow(key, p.file, p.packet, view[: p.records], view[p.records :], None, None)
