"""The single-process twin of the Spark pipeline: same files, same order, same rows, no Spark.

It is what the Spark tables are checked against, and what ``kproto spark ... --local`` runs when one
process is enough.  Captures go through one :class:`~kproto.spark.capture_rows.CaptureTableDecoder`
(one reassembler for all files, in :func:`~kproto.spark.inputs.capture_order_key` order), exactly
like a single ``decode_capture`` over the concatenated files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Collection, Dict, Iterable, List, Mapping, Optional

import pyarrow as pa

from kproto.capture.conversation import DEFAULT_PORTS
from kproto.capture.packets import TcpSegment
from kproto.capture.reader import CaptureReader
from kproto.spark.capture_rows import CaptureTableDecoder
from kproto.spark.inputs import SEGMENT_GLOB, capture_order_key, first_packet_time, list_local_files
from kproto.spark.schema import TABLES
from kproto.spark.segment_rows import segment_batches
from kproto.spark.table_marker import MARKER, LocalFileSystem, marker_text

__all__ = ["LocalTables", "tables_from_captures_local", "tables_from_segments_local", "write_local_tables"]

# Rows held in Python tuples before they are turned into Arrow batches.
_FLUSH_ROWS = 65536


@dataclass
class LocalTables:
    """The three tables as pyarrow Tables, and the input files read (in reading order)."""

    exchanges: pa.Table
    messages: pa.Table
    problems: pa.Table
    files: List[str]

    def tables(self) -> Dict[str, pa.Table]:
        return {"exchanges": self.exchanges, "messages": self.messages, "problems": self.problems}

    def write_parquet(self, out: str) -> None:
        """Write ``out/<table>/part-00000.parquet`` for each table (the layout Spark writes), each
        with kproto's table marker (:mod:`kproto.spark.table_marker`)."""
        write_local_tables(self.tables(), out)


def write_local_tables(tables: Mapping[str, pa.Table], out: str) -> None:
    """Write each table as ``out/<name>/part-00000.parquet`` with kproto's table marker."""
    import pyarrow.parquet as pq

    for name, table in tables.items():
        directory = os.path.join(out, name)
        os.makedirs(directory, exist_ok=True)
        pq.write_table(table, os.path.join(directory, "part-00000.parquet"))
        LocalFileSystem().write_text(os.path.join(directory, MARKER), marker_text(name))


class _Collector:
    def __init__(self) -> None:
        self.batches: Dict[str, List[pa.RecordBatch]] = {name: [] for name in TABLES}

    def add(self, pairs: Iterable) -> None:
        for name, batch in pairs:
            self.batches[name].append(batch)

    def result(self, files: List[str]) -> LocalTables:
        tables = {name: pa.Table.from_batches(self.batches[name], schema=schema) for name, schema in TABLES.items()}
        return LocalTables(files=files, **tables)


def tables_from_captures_local(
    inputs: Iterable[str], *, ports: Collection[int] = DEFAULT_PORTS, detect: bool = True, glob: Optional[str] = None
) -> LocalTables:
    """Decode pcap/pcapng files (directories searched recursively) into the three tables, in one process.

    ``ports``/``detect`` choose which connections are Kafka (see :mod:`kproto.capture.conversation`);
    ``glob`` keeps only matching file names inside directories.
    """
    files = list_local_files(inputs, glob)
    files.sort(key=lambda f: capture_order_key(first_packet_time(f), f))
    decoder = CaptureTableDecoder(ports=ports, detect=detect)
    out = _Collector()
    for file in files:
        tag = decoder.file_tag(file)
        for item in CaptureReader(file):
            if type(item) is TcpSegment:
                decoder.feed(item._replace(number=tag + item.number))
            else:
                decoder.diagnostic(item, file)  # type: ignore[arg-type]
            if decoder.pending() >= _FLUSH_ROWS:
                out.add(decoder.take())
    decoder.finish()
    out.add(decoder.take())
    return out.result(files)


def tables_from_segments_local(inputs: Iterable[str], *, glob: Optional[str] = SEGMENT_GLOB) -> LocalTables:
    """Decode Kafka log segment files (directories searched recursively for ``glob``) into the tables
    (``exchanges`` is empty), in one process."""
    files = list_local_files(inputs, glob)
    out = _Collector()
    for file in files:
        with open(file, "rb") as f:
            data = f.read()
        out.add(segment_batches(file, data))
    return out.result(files)
