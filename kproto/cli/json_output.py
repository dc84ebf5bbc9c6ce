"""Writing records as JSON Lines or as one JSON document, streamed (a large capture never sits in memory).

``--format jsonl``: one record per line, then a last ``{"record": "summary", ...}`` line.
``--format json``: one document ``{"kproto": <command>, "format_version": 1, "records": [...],
"summary": {...}}``, pretty-printed with two-space indents.
"""

from __future__ import annotations

import json
from typing import Any, Dict, TextIO

__all__ = ["FORMAT_VERSION", "RecordWriter"]

#: Bumped when a key changes meaning or disappears (adding keys does not bump it).
FORMAT_VERSION = 1


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
        if self.fmt == "jsonl":
            self.stream.write(json.dumps(record, separators=(",", ":")) + "\n")
        else:
            text = json.dumps(record, indent=2)
            self.stream.write(("," if self._count else "") + "\n    " + text.replace("\n", "\n    "))
        self._count += 1

    def close(self, summary: Dict[str, Any]) -> None:
        """Write the summary and end the document."""
        if self.fmt == "jsonl":
            self.stream.write(json.dumps({"record": "summary", **summary}, separators=(",", ":")) + "\n")
            return
        tail = json.dumps(summary, indent=2).replace("\n", "\n  ")
        self.stream.write(("\n  " if self._count else "") + "],\n  \"summary\": " + tail + "\n}\n")
