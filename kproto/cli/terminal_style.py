"""ANSI colours for text output, on only when asked for or when writing to a terminal.

``--color auto`` (the default) colours when the stream is a TTY and ``NO_COLOR`` is not set
(https://no-color.org); ``always``/``never`` force it.
"""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["COLOR_CHOICES", "Style", "wants_color"]

COLOR_CHOICES = ("auto", "always", "never")

_CODES = {
    "header": "36",  # cyan: size prefix and request/response header
    "count": "2",  # dim: array counts and length prefixes
    "value": "32",  # green: field values
    "records": "35",  # magenta: message set internals
    "raw": "31",  # red: bytes that did not decode
    "title": "1",  # bold: frame titles
    "problem": "1;31",
    "error": "33",
}


def wants_color(choice: str, stream: TextIO) -> bool:
    """Whether to colour output written to ``stream`` for ``--color choice``."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ


class Style:
    """Wraps text in ANSI codes by role (``header``, ``count``, ``value``, ...) when enabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, role: str, text: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{_CODES.get(role, '0')}m{text}\x1b[0m"
