"""``kproto encode``: frame bytes from the JSON that ``kproto decode --format json/jsonl`` prints."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterator, List, TextIO

from kproto.cli.command_options import FORMATS
from kproto.cli.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from kproto.cli.frame_json import frame_from_json
from kproto.cli.json_output import RecordWriter
from kproto.cli.json_values import bytes_json
from kproto.errors import KprotoError

__all__ = ["add_parser", "run", "frame_records"]

DESCRIPTION = """\
Encode frames from JSON: the exact inverse of 'kproto decode --format json' (or jsonl).  Input is a
decode document, JSON Lines of frame records, a list of frame records, or one frame record; records
other than frames (problems, summary) are ignored.  Output is hex text, one frame a line (default),
raw bytes (--raw), or JSON records with the bytes as {"$bytes": base64} (--format json/jsonl).
Exit code: 0 every frame encoded, 1 a record could not be encoded or the input holds no frame record,
2 usage error, empty input or unreadable JSON."""


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "encode",
        help="encode frames from decode's JSON",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", nargs="?", default="-", metavar="FILE", help="JSON input; - or nothing for stdin")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: hex, one frame a line (default); json/jsonl: records with $bytes",
    )
    parser.add_argument("--raw", action="store_true", help="write the raw frame bytes instead of hex")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.raw and args.format != "text":
        parser.error("--raw writes bytes; it does not combine with --format json/jsonl")
    text = _read_text(args.file)
    if not text.strip():
        print(
            "kproto encode: the input is empty (expected the JSON that 'kproto decode --format json' prints)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        records = list(frame_records(text))
    except ValueError as exc:
        print(f"kproto encode: {exc}", file=sys.stderr)
        return EXIT_USAGE
    frames: List[bytes] = []
    failed = 0
    for record in records:
        try:
            frames.append(frame_from_json(record))
        except (KprotoError, TypeError, ValueError) as exc:
            failed += 1
            print(f"kproto encode: frame {record.get('index', len(frames) + failed - 1)}: {exc}", file=sys.stderr)
    _write(args, frames)
    return EXIT_FAILED if failed or not records else EXIT_OK


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def frame_records(text: str) -> Iterator[dict]:
    """The frame records in a decode document, a JSON list, one record, or JSON Lines."""
    try:
        document: Any = json.loads(text)
        items = _items_of(document)
    except json.JSONDecodeError:
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"line {number} is not JSON: {exc}") from None
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("every record must be a JSON object")
        if item.get("record", "frame") == "frame":
            yield item


def _items_of(document: Any) -> List[Any]:
    if isinstance(document, dict) and isinstance(document.get("records"), list):
        return document["records"]
    if isinstance(document, list):
        return document
    return [document]


def _write(args: argparse.Namespace, frames: List[bytes]) -> None:
    if args.raw:
        data = b"".join(frames)
        if args.output:
            with open(args.output, "wb") as out:
                out.write(data)
        else:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        return
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            _write_text(out, args.format, frames)
    else:
        _write_text(sys.stdout, args.format, frames)


def _write_text(out: TextIO, fmt: str, frames: List[bytes]) -> None:
    if fmt == "text":
        for frame in frames:
            out.write(frame.hex() + "\n")
        return
    writer = RecordWriter(out, fmt, "encode")
    for index, frame in enumerate(frames):
        writer.write({"record": "encoded", "index": index, "size": len(frame), "data": bytes_json(frame)})
    writer.close({"frames": len(frames)})
