"""Writing records as JSON Lines or as one JSON document, streamed (a large capture never sits in memory).

``--format jsonl``: one record per line, then a last ``{"record": "summary", ...}`` line.
``--format json``: one document ``{"kproto": <command>, "format_version": 1, "records": [...],
"summary": {...}}``, pretty-printed with two-space indents.

Records are written with ``json.dumps`` (C speed) unless they hold a lazy value (a
:class:`~kproto.cli.json_values.RecordStream` of a record set, a
:class:`~kproto.cli.json_values.Base64Text`, or any other non-list iterable): those are written piece
by piece, so a record whose record set decompresses to 64 MiB never exists as one
string or one list of values.  In JSON Lines, a lazy value that writes its own text (``json_chunks()``,
``json_bytes()``)
is dumped as a placeholder string, and the line is written with the value's chunks in its place: the
record's structure stays at C speed.  Otherwise :func:`iter_json` walks the record.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Iterator, List, Optional, TextIO

__all__ = ["FORMAT_VERSION", "RecordWriter", "iter_json"]

#: Bumped when a key changes meaning or disappears (adding keys does not bump it).
FORMAT_VERSION = 1


class _Lazy(Exception):
    """Raised from ``json.dumps``'s ``default`` hook: the record holds a lazy sequence."""


def _refuse(value: Any) -> Any:
    raise _Lazy()


def iter_json(value: Any, indent: Optional[int] = None, level: int = 0) -> Iterator[str]:
    """``value`` as JSON text in pieces; iterables other than str/bytes/dict/list are written as lists,
    element by element, as they are iterated.  ``indent`` as in ``json.dumps``, ``level`` the depth the
    value sits at.  Every part that holds nothing lazy is written by ``json.dumps`` in one go; a value
    with a true ``json_scalar`` writes its own text (``json_chunks()``), the same at any indent."""
    if getattr(value, "json_scalar", False):
        yield from value.json_chunks()
        return
    try:
        text = json.dumps(value, indent=indent, separators=None if indent is not None else (",", ":"), default=_refuse)
    except _Lazy:
        pass
    else:
        yield text.replace("\n", "\n" + " " * (indent * level)) if indent is not None and level else text
        return
    inner = "\n" + " " * (indent * (level + 1)) if indent is not None else ""
    close = "\n" + " " * (indent * level) if indent is not None else ""
    sep = "," + inner
    if isinstance(value, dict):
        yield "{" + inner
        for n, (key, item) in enumerate(value.items()):
            if n:
                yield sep
            yield json.dumps(str(key)) + (": " if indent is not None else ":")
            yield from iter_json(item, indent, level + 1)
        yield close + "}"
        return
    first = True
    for item in value:  # a list holding something lazy, or a lazy iterable itself
        yield ("[" + inner) if first else sep
        first = False
        yield from iter_json(item, indent, level + 1)
    yield "[]" if first else close + "]"


class RecordWriter:
    """Writes records in ``fmt`` (``json`` or ``jsonl``) to ``stream`` as they come."""

    def __init__(self, stream: TextIO, fmt: str, command: str) -> None:
        if fmt not in ("json", "jsonl"):
            raise ValueError(f"not a JSON format: {fmt}")
        self.stream = stream
        self.fmt = fmt
        self.command = command
        self._count = 0
        # Placeholders for self-writing lazy values: a nonce no data can guess, as json.dumps writes it.
        self._marker = "\x00kproto-lazy-" + os.urandom(8).hex() + "-"
        self._marker_re = re.compile(
            '"' + re.escape(json.dumps(self._marker)[1:-1]) + '([0-9]+)' + re.escape(json.dumps("\x00")[1:-1]) + '"'
        )
        self._lazy: List[Any] = []
        if fmt == "json":
            stream.write(
                '{\n  "kproto": %s,\n  "format_version": %d,\n  "records": [' % (json.dumps(command), FORMAT_VERSION)
            )

    def _placeholder(self, value: Any) -> Any:
        if not hasattr(value, "json_bytes"):
            raise _Lazy()
        self._lazy.append(value)
        return f"{self._marker}{len(self._lazy) - 1}\x00"

    def _write_with_chunks(self, record: Dict[str, Any]) -> bool:
        """JSON Lines with self-writing lazy values; False when the record holds another kind of lazy value."""
        self._lazy.clear()
        try:
            text = json.dumps(record, separators=(",", ":"), default=self._placeholder)
        except _Lazy:
            return False
        binary = self._binary()
        pos = 0
        if binary is not None:  # JSON text is ASCII: bytes go straight to the file under the text layer
            for found in self._marker_re.finditer(text):
                binary.write(text[pos : found.start()].encode("ascii"))
                for chunk in self._lazy[int(found.group(1))].json_bytes():
                    binary.write(chunk)
                pos = found.end()
            binary.write(text[pos:].encode("ascii") + b"\n")
        else:
            write = self.stream.write
            for found in self._marker_re.finditer(text):
                write(text[pos : found.start()])
                for piece in self._lazy[int(found.group(1))].json_chunks():
                    write(piece)
                pos = found.end()
            write(text[pos:] + "\n")
        self._lazy.clear()
        return True

    def _binary(self) -> Optional[Any]:
        """The binary file under the text stream, flushed up to here, when its encoding keeps ASCII as is."""
        binary = getattr(self.stream, "buffer", None)
        encoding = (getattr(self.stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if binary is None or encoding not in ("utf8", "ascii", "latin1", "iso88591", "usascii"):
            return None
        self.stream.flush()
        return binary

    def write(self, record: Dict[str, Any]) -> None:
        try:
            if self.fmt == "jsonl":
                text = json.dumps(record, separators=(",", ":"), default=_refuse) + "\n"
            else:
                text = (
                    ("," if self._count else "")
                    + "\n    "
                    + json.dumps(record, indent=2, default=_refuse).replace("\n", "\n    ")
                )
            self.stream.write(text)
        except _Lazy:
            if self.fmt != "jsonl" or not self._write_with_chunks(record):
                self._write_streamed(record)
        self._count += 1

    def _write_streamed(self, record: Dict[str, Any]) -> None:
        if self.fmt == "jsonl":
            for piece in iter_json(record):
                self.stream.write(piece)
            self.stream.write("\n")
            return
        self.stream.write(("," if self._count else "") + "\n    ")
        for piece in iter_json(record, indent=2, level=2):
            self.stream.write(piece)

    def close(self, summary: Dict[str, Any]) -> None:
        """Write the summary and end the document."""
        if self.fmt == "jsonl":
            self.stream.write(json.dumps({"record": "summary", **summary}, separators=(",", ":")) + "\n")
            return
        tail = json.dumps(summary, indent=2).replace("\n", "\n  ")
        self.stream.write(("\n  " if self._count else "") + "],\n  \"summary\": " + tail + "\n}\n")
