"""Writing records as JSON Lines or as one JSON document, streamed (a large capture never sits in memory).

``--format jsonl``: one record per line, then a last ``{"record": "summary", ...}`` line.
``--format json``: one document ``{"kproto": <command>, "format_version": 1, "records": [...],
"summary": {...}}``, pretty-printed with two-space indents.

Records are written with ``json.dumps`` (C speed) unless they hold a lazy sequence (a
:class:`~kproto.cli.json_values.RecordStream` of a large record set, or any other non-list iterable):
those are written piece by piece by :func:`iter_json`, so a record whose record set decompresses to
64 MiB never exists as one string or one list of values.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, Optional, TextIO

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
    value sits at.  Every part that holds nothing lazy is written by ``json.dumps`` in one go."""
    try:
        text = json.dumps(value, indent=indent, separators=None if indent is not None else (",", ":"),
                          default=_refuse)
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
        if fmt == "json":
            stream.write('{\n  "kproto": %s,\n  "format_version": %d,\n  "records": [' % (json.dumps(command), FORMAT_VERSION))

    def write(self, record: Dict[str, Any]) -> None:
        try:
            if self.fmt == "jsonl":
                text = json.dumps(record, separators=(",", ":"), default=_refuse) + "\n"
            else:
                text = ("," if self._count else "") + "\n    " + json.dumps(record, indent=2, default=_refuse).replace(
                    "\n", "\n    ")
            self.stream.write(text)
        except _Lazy:
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
