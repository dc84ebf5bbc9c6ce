"""Input bytes for ``decode``/``hexdump``: a raw binary stream, or hex text in any of the usual dump forms.

Binary or hex is decided from the first block of input: hex text is printable ASCII (plus whitespace),
while a Kafka frame starts with the high bytes of its size, which are zero for any frame under 16 MiB.

Hex text accepted, line by line (a ``#`` starts a comment outside dumps; blank lines are ignored):

* bare hex: ``0000001a00030000``, ``00 00 00 1a``, ``00:00:00:1a``, ``0x00 0x00``, ``0x0000001a``,
  ``\\x00\\x00``, with commas allowed between items;
* dumps with an offset column: ``xxd`` (``00000000: 0000 001a  ....``), ``hexdump -C``
  (``00000000  00 00 00 1a  ...  |....|``), ``tshark -x`` / Wireshark "Copy as Hex Dump"
  (``0000  00 00 00 1a ...   ....``) and the ``0000: 00 00 ...`` form of docs/protocol-notes.md and
  samples/frames.hex.  The offset and
  the ASCII column are dropped;
* label lines ending in ``:`` (``Frame (74 bytes):``, as tshark prints) are skipped.

The bytes of all lines are concatenated: frames carry their own sizes, so where one ends and the next
starts does not depend on line breaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO, Iterator, List, Optional

from kproto.errors import DecodeError

__all__ = [
    "HexSyntaxError",
    "HexTextDecoder",
    "InputChunks",
    "open_input_chunks",
    "parse_hex_line",
    "looks_like_hex_text",
]

_CHUNK = 1 << 20
_SNIFF = 4096

# An offset column: 4-8 hex digits then ":" (xxd, samples/frames.hex) or two spaces (hexdump -C, tshark -x).
_DUMP_OFFSET = re.compile(r"^\s*([0-9A-Fa-f]{4,8})(?::\s?|  )")
# hexdump -C pads every line so that its |ascii| column starts at this character position.
_HEXDUMP_C_LINE = re.compile(r"^[0-9A-Fa-f]{8}  ")
_HEXDUMP_C_ASCII_COLUMN = 60
_WIDE_GAP = re.compile(r"\S(\s{2,})")
_BARE_ITEM = re.compile(r"^(?:0[xX]|\\[xX])?((?:[0-9A-Fa-f]{2})+)$")
_SEPARATORS = re.compile(r"[\s,:;]+")
# A label such as "Frame (74 bytes):" or "Reassembled TCP (120 bytes):": ends in ":", has a non-hex letter.
_LABEL_CHAR = re.compile(r"[G-WYZg-wyz(]")
_LONE_OFFSET = re.compile(r"^\s*[0-9A-Fa-f]{7,8}\s*$")


class HexSyntaxError(DecodeError):
    """A line of hex input that is neither hex nor a recognised dump line."""

    def __init__(self, line_number: int, line: str, why: str) -> None:
        self.line_number = line_number
        self._line = line
        self._why = why
        super().__init__(f"{why}: {line.strip()[:60]!r}", None, f"hex input line {line_number}")

    def __reduce__(self):
        return (self.__class__, (self.line_number, self._line, self._why))


def _is_label(text: str) -> bool:
    # Two cheap tests instead of one backtracking regex: a long non-hex line must not cost seconds.
    return text.rstrip().endswith(":") and _LABEL_CHAR.search(text) is not None


def looks_like_hex_text(head: bytes) -> bool:
    """True when ``head`` (the first bytes of the input) is printable ASCII text: hex, not binary frames."""
    if not head:
        return False
    return all(32 <= b < 127 or b in (9, 10, 13) for b in head)


def parse_hex_line(line: str, line_number: int = 0) -> bytes:
    """The bytes written on one line of hex text (see the module docs for the accepted forms)."""
    return HexTextDecoder().line(line, line_number)


class HexTextDecoder:
    """Decodes hex text line by line; remembers whether the previous line was a dump line, because the
    lone offset ``hexdump -C`` prints after its last line must not be read as four bytes."""

    def __init__(self) -> None:
        self._in_dump = False

    def line(self, line: str, line_number: int = 0) -> bytes:
        text = line.rstrip("\r\n")
        if not text.strip() or text.lstrip().startswith("#"):
            return b""
        # Dump lines first: their ASCII column may end in ":" like a label line does.
        match = _DUMP_OFFSET.match(text)
        if match and _has_hex_after(text, match.end()):
            self._in_dump = True
            return _parse_dump_line(text, match.end(), line_number, line)
        if _is_label(text):
            return b""
        if self._in_dump and _LONE_OFFSET.match(text):
            return b""
        self._in_dump = False
        return _parse_bare(text.split("#", 1)[0], line_number, line)


def _has_hex_after(text: str, pos: int) -> bool:
    rest = text[pos:].lstrip()
    return bool(rest) and rest[0] in "0123456789abcdefABCDEF"


def _parse_dump_line(text: str, start: int, line_number: int, line: str) -> bytes:
    """The hex area of a dump line (``text[start:]`` follows the offset column): for hexdump -C, what lies
    before its ``|ascii|`` column, found by position (the ASCII itself may hold ``|``); for xxd and
    tshark, what lies before the ASCII column they put after a run of two or more spaces."""
    if (
        _HEXDUMP_C_LINE.match(text)
        and len(text.rstrip()) > _HEXDUMP_C_ASCII_COLUMN
        and text[_HEXDUMP_C_ASCII_COLUMN] == "|"
        and text.rstrip().endswith("|")
    ):
        area = text[start:_HEXDUMP_C_ASCII_COLUMN]
    else:
        rest = text[start:]
        gap = _WIDE_GAP.search(rest)
        area = rest[: gap.start(1)] if gap else rest
    out = bytearray()
    for token in area.split():
        if not _is_hex_token(token):
            raise HexSyntaxError(line_number, line, f"{token!r} is not hex")
        out += bytes.fromhex(token)
    return bytes(out)


def _is_hex_token(token: str) -> bool:
    return len(token) % 2 == 0 and all(ch in "0123456789abcdefABCDEF" for ch in token)


def _parse_bare(text: str, line_number: int, line: str) -> bytes:
    text = text.replace("\\x", " ").replace("\\X", " ")
    out = bytearray()
    for item in _SEPARATORS.split(text.strip()):
        if not item:
            continue
        match = _BARE_ITEM.match(item)
        if match is None:
            raise HexSyntaxError(line_number, line, f"{item!r} is not a hex byte string")
        out += bytes.fromhex(match.group(1))
    return bytes(out)


@dataclass
class InputChunks:
    """The input as an iterator of byte chunks, and what kind of input it was (``"binary"``/``"hex"``).

    ``total`` is the input's size in bytes when it is a regular file (for a progress bar), else None;
    ``position()`` how many input bytes were read so far.  Lines of hex text that do not parse are
    skipped and collected in ``bad_lines`` (the caller reports them as it goes).
    """

    kind: str
    chunks: Iterator[bytes]
    total: Optional[int]
    _counter: List[int]
    bad_lines: List[HexSyntaxError]

    def position(self) -> int:
        return self._counter[0]


def open_input_chunks(stream: BinaryIO, total: Optional[int] = None, force: Optional[str] = None) -> InputChunks:
    """Sniff ``stream`` and return its bytes chunk by chunk, hex text decoded on the fly.

    ``force`` (``"binary"`` or ``"hex"``) skips the sniffing.  Hex text is decoded a line at a time, so
    memory stays bounded by the longest line.
    """
    counter = [0]
    bad: List[HexSyntaxError] = []
    head = _read_some(stream, _SNIFF, counter)
    kind = force or ("hex" if looks_like_hex_text(head) else "binary")
    if kind == "hex":
        return InputChunks(kind, _hex_chunks(stream, head, counter, bad), total, counter, bad)
    return InputChunks(kind, _binary_chunks(stream, head, counter), total, counter, bad)


def _read_some(stream: BinaryIO, size: int, counter: List[int]) -> bytes:
    data = stream.read(size) or b""
    counter[0] += len(data)
    return data


def _binary_chunks(stream: BinaryIO, head: bytes, counter: List[int]) -> Iterator[bytes]:
    if head:
        yield head
    while True:
        data = _read_some(stream, _CHUNK, counter)
        if not data:
            return
        yield data


def _hex_chunks(stream: BinaryIO, head: bytes, counter: List[int], bad: List[HexSyntaxError]) -> Iterator[bytes]:
    pending = head
    line_number = 0
    decoder = HexTextDecoder()
    while True:
        more = _read_some(stream, _CHUNK, counter)
        lines = (pending + more).split(b"\n")
        # Keep a line that may continue in the next read; at the end of input every line is complete.
        pending = lines.pop() if more else b""
        out = bytearray()
        for raw in lines:
            line_number += 1
            try:
                out += decoder.line(raw.decode("latin-1"), line_number)
            except HexSyntaxError as exc:
                bad.append(exc)
        if out:
            yield bytes(out)
        if not more:
            return
