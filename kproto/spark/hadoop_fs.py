"""Files through the Spark session's Hadoop FileSystem (any path Spark reads or writes), from the driver.

Listing inputs and checking output directories this way runs no Spark job (a ``binaryFile`` listing
costs one, a second or more on a small busy cluster) and sees exactly the paths, schemes and
credentials Spark itself is configured for.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple

from kproto.spark.inputs import display_path

__all__ = ["HadoopFileSystem"]


class HadoopFileSystem:
    """:class:`~kproto.spark.table_marker.TableFileSystem` of any path Spark writes (Hadoop's FileSystem,
    through the session's JVM)."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> Any:
        jpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return jpath, jpath.getFileSystem(self._conf)

    def kind(self, path: str) -> Optional[str]:
        jpath, fs = self._fs(path)
        if not fs.exists(jpath):
            return None
        return "dir" if fs.getFileStatus(jpath).isDirectory() else "file"

    def names(self, path: str) -> list:
        jpath, fs = self._fs(path)
        return [status.getPath().getName() for status in fs.listStatus(jpath)]

    def read_text(self, path: str, limit: int) -> str:
        jpath, fs = self._fs(path)
        stream = fs.open(jpath)
        try:
            buffer = self._jvm.java.io.ByteArrayOutputStream()
            self._jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buffer, limit, False)
            return str(buffer.toString("UTF-8"))[:limit]
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create or replace file ``path``."""
        jpath, fs = self._fs(path)
        stream = fs.create(jpath, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def qualify(self, path: str) -> str:
        """``path`` with the scheme and authority Spark resolves it to (``file:/...`` for local paths)."""
        jpath, fs = self._fs(path)
        return str(fs.makeQualified(jpath).toString())

    def delete(self, path: str) -> None:
        """Delete ``path`` (recursively); nothing happens when it does not exist."""
        jpath, fs = self._fs(path)
        fs.delete(jpath, True)

    def rename(self, source: str, target: str) -> None:
        """Move file ``source`` to ``target`` (whose directory exists); raises :class:`OSError` if it fails."""
        jsource, fs = self._fs(source)
        if not fs.rename(jsource, self._jvm.org.apache.hadoop.fs.Path(target)):
            raise OSError(f"could not move {source} to {target}")

    def list_files(self, inputs: Iterable[str], glob: Optional[str] = None) -> List[Tuple[str, int]]:
        """``(path, size)`` of the non-empty files under ``inputs``, sorted, paths as the tables name them:
        directories searched recursively, skipping names starting with ``_`` or ``.`` (as Spark's file
        sources do) and keeping names that match ``glob``; files named directly are always kept.
        Raises :class:`FileNotFoundError` for an input that does not exist."""
        import fnmatch

        out = []
        for item in inputs:
            jpath, fs = self._fs(item)
            if not fs.exists(jpath):
                raise FileNotFoundError(2, "No such file or directory", item)
            status = fs.getFileStatus(jpath)
            if not status.isDirectory():
                out.append((display_path(str(status.getPath().toString())), int(status.getLen())))
                continue
            files = fs.listFiles(jpath, True)
            while files.hasNext():
                status = files.next()
                name = str(status.getPath().getName())
                relative = str(status.getPath().toString())[len(str(fs.makeQualified(jpath).toString())) :]
                if any(part[:1] in ("_", ".") for part in relative.split("/") if part):
                    continue
                if glob is None or fnmatch.fnmatch(name, glob):
                    out.append((display_path(str(status.getPath().toString())), int(status.getLen())))
        return sorted(set((path, size) for path, size in out if size))
