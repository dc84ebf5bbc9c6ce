"""Rendering labelled byte ranges as an annotated hex dump (text) or as JSON ranges.

Text layout, one range per line (long ranges continue on following lines, 16 bytes each)::

    0000  00 00 00 4b                                        size: 75
    000c  00 06                                              client_id (length): 6
    000e  6b 70 72 6f 74 6f                                  client_id: 'kproto'

Offsets are frame offsets (the size prefix is at 0), as in the worked examples of docs/protocol-notes.md.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import kproto
from kproto._generated.error_codes import name_in_context
from kproto.cli.json_values import bytes_json
from kproto.cli.terminal_style import Style
from kproto.reference import FieldRange

__all__ = ["dump_lines", "range_json", "range_label", "redact_ranges", "BYTES_PER_ROW", "REDACTED_HEX"]

BYTES_PER_ROW = 16
_HEX_WIDTH = BYTES_PER_ROW * 3 - 1
_MAX_SHOWN = 48  # bytes of a value repeated in its label
#: What stands in the hex column for a secret's bytes.
REDACTED_HEX = "<redacted>"


def range_label(r: FieldRange) -> str:
    """``path (part): value`` in words: counts and lengths say so, raw ranges give their reason."""
    if r.part == "count":
        return f"{r.path} (count): {r.value}"
    if r.part == "length":
        return f"{r.path} (length): " + ("-1 (null)" if r.value is None else str(r.value))
    if r.part == "raw":
        return f"{r.path} ({r.end - r.start} bytes): {r.value}"
    if r.part == "tag":
        return f"{r.path} (tag): {r.value}"
    # Strings the message-set walker writes (crc check, codec, wrapper summary) are descriptions, not data.
    described = ".records[" in r.path and isinstance(r.value, str)
    return f"{r.path}: {r.value if described else _show_value(r.value)}{_value_name(r)}"


def _value_name(r: FieldRange) -> str:
    """The name behind a number where there is one: api keys and error codes."""
    leaf = r.path.rsplit(".", 1)[-1]
    if leaf == "api_key" and isinstance(r.value, int):
        info = kproto.APIS.get(r.value)
        return f" ({info.name})" if info is not None else " (unknown api)"
    if leaf == "error_code" and isinstance(r.value, int):
        return f" ({name_in_context(r.value)})"
    return ""


def _show_value(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        shown = bytes(value[:_MAX_SHOWN])
        return repr(shown) + (f"... ({len(value)} bytes)" if len(value) > _MAX_SHOWN else "")
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _role(r: FieldRange, header_end: int) -> str:
    if r.part == "raw":
        return "raw"
    if r.end <= header_end:
        return "header"
    if r.part in ("count", "length", "tag"):
        return "count"
    if ".records[" in r.path or r.path.startswith("records["):
        return "records"
    return "value"


def redact_ranges(ranges: List[FieldRange], spans: Sequence[Tuple[int, int]], what: str) -> List[FieldRange]:
    """``ranges`` with every range that touches a secret span replaced by one raw range saying
    ``<redacted>`` (and ``what`` the secret is), so neither its value nor its bytes are shown."""
    if not spans:
        return ranges
    out: List[FieldRange] = []
    for r in ranges:
        if any(r.start < end and start < r.end for start, end in spans):
            out.append(FieldRange(r.path, "raw", r.start, r.end, f"<redacted> ({what})"))
        else:
            out.append(r)
    return out


def dump_lines(
    data: bytes,
    ranges: List[FieldRange],
    header_end: int,
    style: Style,
    secret_spans: Optional[Sequence[Tuple[int, int]]] = None,
) -> Iterator[str]:
    """The text lines of the dump of ``data`` annotated by ``ranges``; the bytes inside ``secret_spans``
    are shown as :data:`REDACTED_HEX`, once per range, never as hex."""
    width = max(4, len(f"{max(len(data) - 1, 0):x}"))
    for r in ranges:
        role = _role(r, header_end)
        label = style(role, range_label(r))
        if secret_spans and any(r.start < end and start < r.end for start, end in secret_spans):
            marker = f"{REDACTED_HEX} {r.end - r.start} bytes"
            yield (
                f"{r.start:0{width}x}  {style('error', marker)}" + " " * max(1, _HEX_WIDTH - len(marker)) + "  " + label
            )
            continue
        for row_start in range(r.start, r.end, BYTES_PER_ROW):
            chunk = data[row_start : min(r.end, row_start + BYTES_PER_ROW)]
            hex_text = " ".join(f"{b:02x}" for b in chunk)
            line = f"{row_start:0{width}x}  {style(role, hex_text)}"
            if row_start == r.start:
                line += " " * (_HEX_WIDTH - len(hex_text)) + "  " + label
            yield line


def range_json(r: FieldRange) -> Dict[str, Any]:
    """One range as JSON: ``start``, ``end``, ``path``, ``part``, ``value`` (bytes as ``{"$bytes"}``)."""
    value = r.value
    if isinstance(value, (bytes, bytearray)):
        value = bytes_json(bytes(value))
    return {"start": r.start, "end": r.end, "path": r.path, "part": r.part, "value": value}
