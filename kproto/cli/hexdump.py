"""``kproto hexdump``: an annotated hex dump, every byte range labelled with its field path."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict

from kproto.cli.command_options import (
    add_color_option,
    add_format_option,
    add_frame_input_options,
    open_binary_input,
    resolve_mode,
)
from kproto.cli.decode import frame_title
from kproto.cli.exit_codes import EXIT_FAILED, EXIT_OK
from kproto.cli.frame_decoding import DecodedFrame
from kproto.cli.frame_layout import frame_ranges
from kproto.cli.frame_pipeline import FrameTally, decoded_frames, problem_json
from kproto.cli.frame_stream import InputProblem
from kproto.cli.hexdump_view import dump_lines, range_json
from kproto.cli.json_output import RecordWriter
from kproto.cli.json_values import bytes_json, error_json
from kproto.cli.terminal_style import Style, wants_color

__all__ = ["add_parser", "run", "hexdump_json"]

DESCRIPTION = """\
Print frames as an annotated hex dump, like Wireshark's byte pane: each line is one field's bytes
(size prefix, header, body fields, and inside record sets each message's offset, size, crc, magic,
attributes, key and value) with its path and value.  Every byte of a frame carries exactly one label;
what does not decode (unknown api key or version, a broken body) is one labelled raw range.
Same input forms and options as 'kproto decode'."""


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser("hexdump", help="annotated hex dump of frames",
                                   description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_frame_input_options(parser)
    add_format_option(parser)
    add_color_option(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    mode, api_key, api_version = resolve_mode(parser, args)
    stream, total, owned = open_binary_input(args.file)
    tally = FrameTally()
    style = Style(args.format == "text" and wants_color(args.color, sys.stdout))
    writer = RecordWriter(sys.stdout, args.format, "hexdump") if args.format != "text" else None
    try:
        for item in decoded_frames(stream, total, input_kind=args.input, mode=mode, api_key=api_key,
                                   api_version=api_version, max_frame_size=args.max_frame_size, tally=tally):
            if writer is not None:
                writer.write(problem_json(item) if isinstance(item, InputProblem) else hexdump_json(item))
            elif isinstance(item, InputProblem):
                where = f" @{item.offset}" if item.offset >= 0 else ""
                print(style("problem", f"problem{where}: {item.kind}: {item.detail}"))
            else:
                _print_frame(item, style)
        if writer is not None:
            writer.close(tally.summary())
    finally:
        if owned:
            stream.close()
    if not tally.ok:
        print(f"kproto hexdump: {tally.frames} frames, {tally.failed} failed to decode, {tally.problems} input problems",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _print_frame(frame: DecodedFrame, style: Style) -> None:
    print(style("title", frame_title(frame)))
    if frame.error is not None:
        print(style("error", f"error: {type(frame.error).__name__}: {frame.error}"))
    for line in dump_lines(frame.data, frame_ranges(frame), frame.header_end, style):
        print(line)
    print()


def hexdump_json(frame: DecodedFrame) -> Dict[str, Any]:
    """A frame's dump as JSON: identification, the frame bytes, and its labelled ``ranges``."""
    return {
        "record": "hexdump",
        "index": frame.index,
        "offset": frame.offset,
        "size": len(frame.data),
        "kind": frame.kind,
        "api_key": frame.api_key,
        "api_name": frame.api_name,
        "api_version": frame.api_version,
        "correlation_id": frame.correlation_id,
        "error": error_json(frame.error),
        "data": bytes_json(frame.data),
        "ranges": [range_json(r) for r in frame_ranges(frame)],
    }
