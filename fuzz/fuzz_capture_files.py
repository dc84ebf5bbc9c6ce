"""Fuzz harness: whole capture files (pcap / pcapng) through ``kproto.capture.decode_capture``.

The input is the file.  ``decode_capture`` runs the container reader, link/IP/TCP decoding, reassembly and
Kafka conversation tracking, so one input exercises every capture layer.

Oracles: the capture layer turns damage into diagnostics and problems, so *no* exception may escape
(not even a ``KprotoError``); every record ``str()``-ingifies; reading the same bytes through a file
object that returns short reads (a pipe, stdin) gives the same records as reading them from ``bytes``.
Budget: 64·n + 1 MiB, 1 s CPU.

    python fuzz/fuzz_capture_files.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.oracles import Budget, fail, outcome  # noqa: E402

NAME = "capture_files"
_decode_capture = None


def setup() -> None:
    global _decode_capture
    from kproto.capture.conversation import decode_capture

    _decode_capture = decode_capture


class ShortReads(io.RawIOBase):
    """A binary stream that returns at most ``step`` bytes per read, like a pipe."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = data
        self._pos = 0
        self._step = max(1, step)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = len(self._data)
        take = min(n, self._step)
        out = self._data[self._pos : self._pos + take]
        self._pos += len(out)
        return out

    def readinto(self, b) -> int:  # pragma: no cover - read() is what the reader uses
        out = self.read(len(b))
        b[: len(out)] = out
        return len(out)


def _records(source) -> list:
    return [str(r) for r in _decode_capture(source, max_record_bytes=1 << 16)]


def one_input(data: bytes) -> None:
    if _decode_capture is None:
        setup()
    with Budget(len(data), what="decode_capture", data=data):
        whole = outcome(_records, data, allowed=(), what="decode_capture(bytes)", data=data)[1]
    step = 1 + (data[-1] % 61 if data else 0)
    pieces = outcome(_records, ShortReads(data, step), allowed=(), what="decode_capture(short reads)", data=data)[1]
    if whole != pieces:
        diff = next(i for i, (a, b) in enumerate(zip(whole + [None], pieces + [None])) if a != b)
        raise fail(
            f"decode_capture differs between bytes and a stream of {step}-byte reads at record {diff}:\n"
            f"  bytes:  {(whole + [None])[diff]!r:.300}\n  stream: {(pieces + [None])[diff]!r:.300}",
            data,
        )


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
