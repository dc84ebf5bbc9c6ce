"""Input files: listing local inputs, the order of rotated captures, names from paths.

Both pipelines must read the same files in the same order and write the same file names:

* **order**: rotated capture files are taken in the order of their first packet's time (files without
  a timestamped first packet first), then by name, because rotation suffixes do not sort as text
  (``cap.pcap10`` < ``cap.pcap2``);
* **names**: Spark reports local files as ``file:`` URIs; the tables name them by their plain path, as
  the single-process path does (other schemes, ``hdfs://`` or ``s3a://``, stay as they are).
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import BinaryIO, Callable, Iterable, List, Optional, Tuple

from kproto.capture.diagnostics import CaptureDiagnostic, DiagnosticKind
from kproto.capture.files import CaptureSource, PacketRecord, iter_packet_records

__all__ = [
    "list_local_files",
    "local_capture_files",
    "first_packet_time",
    "capture_order_key",
    "display_path",
    "topic_partition",
    "open_input",
    "SEGMENT_GLOB",
]

#: Kafka log segment files (``.index``/``.timeindex`` files beside them are skipped).
SEGMENT_GLOB = "*.log"

_TOPIC_PARTITION = re.compile(r"^(.+)-(\d+)$")


def list_local_files(inputs: Iterable[str], glob: Optional[str] = None) -> List[str]:
    """Absolute paths of the files named by ``inputs``, directories searched recursively (in name
    order), kept when their name matches ``glob`` (files named directly are always kept).  Empty files
    are left out, as Spark's file sources never read them (so both pipelines see the same files).

    Raises :class:`FileNotFoundError` for an input that does not exist, as Spark fails on it too.
    """
    out: List[str] = []
    for item in inputs:
        path = os.path.abspath(item)
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    if (glob is None or fnmatch.fnmatch(name, glob)) and os.path.getsize(full):
                        out.append(full)
        elif os.path.exists(path):
            if os.path.getsize(path):
                out.append(path)
        else:
            raise FileNotFoundError(2, "No such file or directory", item)
    return out


def local_capture_files(inputs: Iterable[str], glob: Optional[str], log: Callable[[str], None]) -> Optional[List[str]]:
    """The pcap/pcapng files named by ``inputs`` (as :func:`list_local_files` lists them), logging one line
    for each file left out because it is not a capture at all (no capture magic number: notes, indexes,
    stray files in a capture directory), so that such a file does not fail the job.  Damaged captures
    stay: their damage is reported as problems.  ``None`` when an input is not an existing local path
    (a remote URI, a missing path): the reader then lists, and reports, the inputs itself.
    """
    inputs = list(inputs)
    if not all(os.path.exists(item) for item in inputs):
        return None
    kept: List[str] = []
    for file in list_local_files(inputs, glob):
        first = next(iter(iter_packet_records(file)), None)
        if type(first) is CaptureDiagnostic and first.kind is DiagnosticKind.NOT_A_CAPTURE:
            log(f"skipping {file}: not a pcap or pcapng capture ({first.detail})")
        else:
            kept.append(file)
    return kept


def first_packet_time(source: CaptureSource) -> Optional[int]:
    """Capture time (ns) of the first packet of a capture; ``None`` if it has none or is unreadable."""
    for item in iter_packet_records(source):
        return item.timestamp_ns if type(item) is PacketRecord else None
    return None


def capture_order_key(first_time_ns: Optional[int], file: str) -> Tuple[bool, int, str]:
    """Sort key putting capture files in reading order (Spark sorts the same way: nulls first)."""
    return (first_time_ns is not None, first_time_ns or 0, file)


def display_path(uri: str) -> str:
    """The name of an input file in the tables: a local ``file:`` URI as its path, others unchanged."""
    if uri.startswith("file:"):
        rest = uri[5:]
        return "/" + rest.lstrip("/") if rest.startswith("//") else rest
    return uri


def open_input(path: str) -> BinaryIO:
    """Open an input file for reading, by a local path (as :func:`display_path` gives it) or by a URI
    of a file system pyarrow reads (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``).

    Tasks read byte ranges of their files themselves (so a file of any size is split, and its bytes do
    not travel through the JVM): this is pyarrow's reader, not Spark's Hadoop connectors.
    """
    if "://" not in path:
        return open(path, "rb")
    import pyarrow.fs as pafs

    fs, inner = pafs.FileSystem.from_uri(path)
    return fs.open_input_file(inner)  # type: ignore[no-any-return]


def topic_partition(file: str) -> Tuple[Optional[str], Optional[int]]:
    """Topic and partition of a log segment from its directory's name ``<topic>-<partition>``."""
    directory = file.rstrip("/").rsplit("/", 2)
    name = directory[-2] if len(directory) >= 2 else ""
    match = _TOPIC_PARTITION.match(name)
    if match is None:
        return None, None
    return match.group(1), int(match.group(2))
