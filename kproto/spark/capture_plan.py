"""The reading plan of a set of capture files: which task reads which byte range, in which order.

Files not larger than the split size are read whole and need no planning: the plan is their size,
from the listing, and stage 1 reads their first packet time as it opens them.  Files larger than the
split size are planned by one light parallel pass (:func:`scan_task` per nominal range: the file's
head and first packet time, and the guessed walk of :mod:`kproto.spark.capture_splits`), then
:func:`plan_ranges` settles the boundaries on the driver.
The result, one :class:`CaptureRange` per task, carries everything stage 1 needs to number packets
and order files exactly as a single-process read of the whole files does.  ``run`` is how the scan
tasks are run: the builtin ``map`` in one process, a Spark job on a cluster.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from kproto.capture.files import DEFAULT_MAX_RECORD_BYTES
from kproto.spark.capture_splits import (
    DEFAULT_SPLIT_BYTES,
    MIN_SPLIT_BYTES,
    FileHead,
    RangeWalk,
    read_head,
    scan_range,
    settle_boundaries,
)
from kproto.spark.inputs import first_packet_time, open_input

__all__ = ["CaptureRange", "ScanTask", "scan_task", "plan_ranges", "check_split_bytes"]


class CaptureRange(NamedTuple):
    """One stage 1 task: bytes ``[start, stop)`` of ``path`` read after ``prefix`` (whole file when
    ``prefix`` is empty and ``start`` is 0), its first packet numbered ``first_packet``."""

    path: str  # as the tables name it (a local path or a URI)
    file_time: Optional[int]  # the file's first packet time, ns (orders rotated files); whole files: found in stage 1
    start: int
    stop: int
    first_packet: int
    prefix: bytes


class ScanTask(NamedTuple):
    """One nominal range of a file to scan."""

    path: str
    size: int
    index: int  # type: ignore[assignment]  # the range's number; shadows tuple.index, unused here
    start: int
    end: int
    split: bool  # the file has more than one range
    max_record_bytes: int


class ScanResult(NamedTuple):
    task: ScanTask
    file_time: Optional[int]
    head: Optional[FileHead]
    walk: Optional[RangeWalk]
    backend: str  # kproto.backend where the task ran ("cython" or "python")


def check_split_bytes(split_bytes: int) -> int:
    """``split_bytes`` if usable, else :class:`ValueError`."""
    if split_bytes < MIN_SPLIT_BYTES:
        raise ValueError(f"split size must be at least {MIN_SPLIT_BYTES} bytes, not {split_bytes}")
    return split_bytes


def _reader(stream: Any) -> Callable[[int, int], bytes]:
    def read_at(offset: int, n: int) -> bytes:
        stream.seek(offset)
        return bytes(stream.read(n))

    return read_at


def scan_task(task: ScanTask) -> ScanResult:
    """Step 1 of one range (runs in a task): the head and first packet time for range 0, the guessed
    (range 0: exact) walk when the file is split."""
    with open_input(task.path) as stream:
        read_at = _reader(stream)
        head = read_head(read_at, task.size, task.max_record_bytes)
        file_time = None
        if task.index == 0:
            stream.seek(0)
            file_time = first_packet_time(stream)
        walk = None
        if task.split and head.format is not None:
            start = head.data_start if task.index == 0 else task.start
            walk = scan_range(
                read_at, task.size, head, start, task.end, exact=task.index == 0, max_record_bytes=task.max_record_bytes
            )
    import kproto

    return ScanResult(task, file_time, head if task.index == 0 else None, walk, kproto.backend)


def _tasks(files: Iterable[Tuple[str, int]], split_bytes: int, max_record_bytes: int) -> List[ScanTask]:
    tasks = []
    for path, size in files:
        if size <= split_bytes:
            continue  # read whole: stage 1 finds the file's first packet time itself
        # Nominal ranges; the first one's start moves past the head once the head is known.
        for index, start in enumerate(range(0, size, split_bytes)):
            tasks.append(ScanTask(path, size, index, start, min(size, start + split_bytes), True, max_record_bytes))
    return tasks


def plan_ranges(
    files: Sequence[Tuple[str, int]],
    *,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    run: Callable[[Callable[[ScanTask], ScanResult], List[ScanTask]], Iterable[ScanResult]] = map,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
) -> List[CaptureRange]:
    """The stage 1 ranges of ``files`` (``(path, size)`` pairs, paths as the tables name them)."""
    check_split_bytes(split_bytes)
    by_file: dict = {}
    for result in run(scan_task, _tasks(files, split_bytes, max_record_bytes)):
        by_file.setdefault(result.task.path, []).append(result)
    ranges: List[CaptureRange] = []
    for path, size in files:
        results = sorted(by_file.get(path, ()), key=lambda r: r.task.index)
        whole = CaptureRange(path, None, 0, size, 1, b"")
        if not results:
            ranges.append(whole)
            continue
        first = results[0]
        head = first.head
        if len(results) == 1 or head is None or head.format is None:
            ranges.append(whole)
            continue
        nominal = [(max(r.task.start, head.data_start), r.task.end) for r in results]
        walks = [r.walk or RangeWalk(None, start, 0) for r, (start, _) in zip(results, nominal)]
        settled = settle_boundaries(nominal, walks, _rescan(path, size, head, max_record_bytes))
        if settled is None:
            ranges.append(whole)
            continue
        for start, stop, number in settled:
            ranges.append(CaptureRange(path, first.file_time, start, stop, number, head.prefix))
    return ranges


def _rescan(path: str, size: int, head: FileHead, max_record_bytes: int) -> Callable[[int, int], RangeWalk]:
    def rescan(start: int, end: int) -> RangeWalk:
        with open_input(path) as stream:
            return scan_range(_reader(stream), size, head, start, end, exact=True, max_record_bytes=max_record_bytes)

    return rescan
