"""Fuzz harness: the CLI's input reader and hex parser (``kproto.cli.hex_input``).

Two checks per input:

* **Text as it comes.**  The whole input goes through ``open_input_chunks`` (sniffing, binary or hex),
  read whole and through a stream returning short reads; every line also goes through
  ``parse_hex_line``.  Bad lines are collected in ``bad_lines`` by design, so nothing may escape
  ``open_input_chunks``; ``parse_hex_line`` may raise only ``HexSyntaxError`` (its documented error, a
  ``ValueError``).  Both readings must give the same bytes and the same bad lines.
* **Known bytes in every dump form.**  Byte 0 picks a format (bare hex in its spellings, ``xxd``,
  ``hexdump -C``, ``tshark -x``, the ``0000:`` form of ``samples/frames.hex``), byte 1 the bytes per
  line; the rest is rendered in that form and must parse back to exactly itself with no bad line.

Budget: 64·n + 1 MiB, 1 s CPU.

    python fuzz/fuzz_hex_input.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.fuzz_capture_files import ShortReads  # noqa: E402
from fuzz.oracles import Budget, fail, outcome  # noqa: E402

NAME = "hex_input"
_hex = None


def setup() -> None:
    global _hex
    from kproto.cli import hex_input

    _hex = hex_input


def _printable(b: bytes) -> str:
    return "".join(chr(c) if 32 <= c < 127 else "." for c in b)


def render(data: bytes, fmt: int, width: int) -> str:
    """``data`` written the way one of the supported tools writes it."""
    lines = []
    rows = [data[i : i + width] for i in range(0, len(data), width)] or [b""]
    if fmt == 0:  # xxd
        for i, row in enumerate(rows):
            if not row:
                continue
            groups = " ".join(row[j : j + 2].hex() for j in range(0, len(row), 2))
            lines.append(f"{i * width:08x}: {groups.ljust(width * 2 + (width + 1) // 2 - 1)}  {_printable(row)}")
    elif fmt == 1:  # hexdump -C
        for i, row in enumerate(rows):
            if not row:
                continue
            cells = [f"{c:02x}" for c in row]
            half = " ".join(cells[:8]) + ("  " + " ".join(cells[8:]) if len(cells) > 8 else "")
            lines.append(f"{i * width:08x}  {half.ljust(3 * width + 1)} |{_printable(row)}|")
        if data:  # hexdump -C ends with the total length; for empty input it prints nothing at all
            lines.append(f"{len(data):08x}")
    elif fmt == 2:  # tshark -x / Wireshark "Copy as Hex Dump"
        for i, row in enumerate(rows):
            if not row:
                continue
            lines.append(f"{i * width:04x}  {' '.join(f'{c:02x}' for c in row).ljust(3 * width)}  {_printable(row)}")
    elif fmt == 3:  # offset and colon, as in samples/frames.hex
        for i, row in enumerate(rows):
            if row:
                lines.append(f"{i * width:04x}: " + " ".join(f"{c:02x}" for c in row))
    elif fmt == 4:
        lines = [row.hex() for row in rows if row]
    elif fmt == 5:
        lines = [" ".join("0x%02x" % c for c in row) for row in rows if row]
    elif fmt == 6:
        lines = ["".join("\\x%02x" % c for c in row) for row in rows if row]
    elif fmt == 7:
        lines = [":".join("%02x" % c for c in row) for row in rows if row]
    elif fmt == 8:
        lines = [", ".join("%02X" % c for c in row) + "  # comment" for row in rows if row]
    else:
        lines = ["0x" + row.hex() for row in rows if row]
    return "\n".join(["# rendered by fuzz_hex_input", "Frame (%d bytes):" % len(data)] + lines) + "\n"


FORMATS = 10


def _read_all(stream, force=None):
    chunks = _hex.open_input_chunks(stream, force=force)
    out = b"".join(chunks.chunks)
    return chunks.kind, out, [str(e) for e in chunks.bad_lines]


def one_input(data: bytes) -> None:
    if _hex is None:
        setup()
    with Budget(len(data), what="open_input_chunks", data=data):
        whole = outcome(_read_all, io.BytesIO(data), allowed=(), what="open_input_chunks", data=data)[1]
    step = 1 + (data[0] % 97 if data else 0)
    pieces = outcome(
        _read_all, ShortReads(data, step), whole[0], allowed=(), what="open_input_chunks(short reads)", data=data
    )[1]
    if whole != pieces:
        raise fail(
            f"open_input_chunks differs between one read and {step}-byte reads:\n  whole:  {whole!r:.400}\n"
            f"  pieces: {pieces!r:.400}",
            data,
        )
    decoder = _hex.HexTextDecoder()
    for number, line in enumerate(data.decode("latin-1").split("\n")[:200], 1):
        outcome(decoder.line, line, number, allowed=(_hex.HexSyntaxError,), what="HexTextDecoder.line", data=data)
    if len(data) >= 2:
        payload = data[2:514]
        fmt, width = data[0] % FORMATS, 1 + data[1] % 32
        if fmt == 1:
            width = 16  # hexdump -C always writes 16 bytes per line
        text = render(payload, fmt, width)
        got = outcome(_read_all, io.BytesIO(text.encode("latin-1")), "hex", allowed=(), what="hex parse", data=data)[1]
        if got[1] != payload or got[2]:
            raise fail(
                f"hex form {fmt} (width {width}) parsed to {got[1][:64].hex()} with bad lines {got[2][:3]}, "
                f"wrote {payload[:64].hex()}:\n{text[:600]}",
                data,
            )


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
