"""Which output directories kproto may replace: only tables it wrote itself, recognised by a marker file.

``--mode overwrite`` deletes ``OUT/exchanges``, ``OUT/messages`` and ``OUT/problems`` before writing
them, and ``append`` adds files to them.  A mistyped ``--out`` must never cost a user their files, so
every table kproto writes gets a marker file (:data:`MARKER`, naming the table) once it is complete,
and an existing output directory is only replaced or appended to when it is empty or carries the
marker of the same table.  Anything else — a user's directory, another table, a plain file — is
refused with :class:`NotAKprotoTableError` before anything is deleted.

The checks go through a small file-system interface (:class:`TableFileSystem`) with a local twin
(:class:`LocalFileSystem`) and a Hadoop one (``kproto.spark.job``), so the same rule holds for local
runs and for any path Spark writes.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import List, Optional, Protocol

from kproto.errors import KprotoError

__all__ = [
    "MARKER",
    "NotAKprotoTableError",
    "TableFileSystem",
    "LocalFileSystem",
    "marker_text",
    "check_replaceable",
    "REPLACING_MODES",
]

#: The marker file in every table directory kproto wrote (Spark and Hive skip names starting with ``_``).
MARKER = "_KPROTO_TABLE"

#: Save modes that delete or add to an existing table (``error`` and ``ignore`` never touch it).
REPLACING_MODES = frozenset({"overwrite", "append"})


class NotAKprotoTableError(KprotoError, FileExistsError):
    """An output path exists and is not a table kproto wrote: kproto refuses to delete or extend it."""


class TableFileSystem(Protocol):
    """What the check needs of a file system."""

    def kind(self, path: str) -> Optional[str]:
        """``"dir"``, ``"file"``, or ``None`` when ``path`` does not exist."""

    def names(self, path: str) -> List[str]:
        """The names of the entries of directory ``path``."""

    def read_text(self, path: str, limit: int) -> str:
        """At most ``limit`` bytes of file ``path`` as text."""

    def write_text(self, path: str, text: str) -> None:
        """Create or replace file ``path``."""


class LocalFileSystem:
    """:class:`TableFileSystem` of this machine's files."""

    def kind(self, path: str) -> Optional[str]:
        if os.path.isdir(path):
            return "dir"
        return "file" if os.path.lexists(path) else None

    def names(self, path: str) -> List[str]:
        return os.listdir(path)

    def read_text(self, path: str, limit: int) -> str:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")

    def write_text(self, path: str, text: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    # What the Spark job's driver needs besides the checks (kproto.spark.table_writer.ParquetOutput).

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace file ``path``, and its directory (as Hadoop's ``create`` does)."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def delete(self, path: str) -> None:
        """Delete ``path`` (recursively); nothing happens when it does not exist."""
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)


def marker_text(table: str) -> str:
    """The content of the marker of ``table``."""
    return json.dumps({"writer": "kproto", "table": table}) + "\n"


def _marked_table(fs: TableFileSystem, path: str) -> Optional[str]:
    try:
        data = json.loads(fs.read_text(path, 4096))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("writer") == "kproto" and isinstance(data.get("table"), str):
        return str(data["table"])
    return None


def check_replaceable(fs: TableFileSystem, path: str, table: str) -> None:
    """Raise :class:`NotAKprotoTableError` unless ``path`` is absent, an empty directory, or a directory
    holding kproto's marker for ``table``."""
    kind = fs.kind(path)
    if kind is None:
        return
    if kind != "dir":
        raise NotAKprotoTableError(
            17,
            f"refusing to replace {path}: it is a file, not a kproto {table} table "
            "(move it away or choose another --out)",
            path,
        )
    names = fs.names(path)
    if not names:
        return
    if MARKER not in names:
        raise NotAKprotoTableError(
            17,
            f"refusing to replace {path}: it is not a table kproto wrote (no {MARKER} "
            "marker); move it away or choose another --out",
            path,
        )
    marked = _marked_table(fs, path.rstrip("/") + "/" + MARKER)
    if marked != table:
        what = "an unreadable marker" if marked is None else f"the marker of table {marked!r}"
        raise NotAKprotoTableError(17, f"refusing to replace {path} with the {table} table: it holds {what}", path)
