"""A one-line progress bar on stderr for long inputs, drawn only when stderr is a terminal.

Piped or redirected stderr gets nothing (no control characters in logs).  Redraws are rate-limited, so
calling :meth:`ProgressBar.update` per record costs a clock read; the bar is erased on :meth:`close`.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

__all__ = ["ProgressBar", "CountingReader"]

_WIDTH = 30
_INTERVAL = 0.1  # seconds between redraws


class ProgressBar:
    """Shows ``done/total`` bytes as a bar; inactive when ``total`` is unknown or the stream is no TTY."""

    def __init__(
        self, total: Optional[int], label: str, stream: Optional[TextIO] = None, enabled: Optional[bool] = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.label = label
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.active = enabled and bool(total)
        self._last = 0.0
        self._drawn = False

    def update(self, done: int) -> None:
        if not self.active:
            return
        now = time.monotonic()
        if now - self._last < _INTERVAL:
            return
        self._last = now
        assert self.total
        fraction = min(1.0, done / self.total)
        filled = int(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {fraction * 100:5.1f}% {done / 1e6:,.1f}/{self.total / 1e6:,.1f} MB")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


class CountingReader:
    """A binary file wrapper counting the bytes read through it (the bar's position)."""

    def __init__(self, raw) -> None:  # type: ignore[no-untyped-def]
        self._raw = raw
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        n = self._raw.readinto(buffer)
        self.count += n or 0
        return n
