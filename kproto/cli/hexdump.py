"""``kproto hexdump``: an annotated hex dump, every byte range labelled with its field path."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional, Tuple

from kproto.cli.command_options import (
    add_color_option,
    add_format_option,
    add_frame_input_options,
    add_show_secrets_option,
    open_binary_input,
    resolve_mode,
)
from kproto.cli.decode import frame_title, secret_title
from kproto.cli.exit_codes import EXIT_FAILED, EXIT_OK
from kproto.cli.frame_decoding import DecodedFrame
from kproto.cli.frame_layout import frame_ranges
from kproto.cli.frame_pipeline import FrameTally, decoded_frames, problem_json
from kproto.cli.frame_stream import InputProblem
from kproto.cli.frame_secrets import FrameSecrets, SecretTracker
from kproto.cli.hexdump_view import dump_lines, range_json, redact_ranges
from kproto.cli.json_output import RecordWriter
from kproto.cli.json_values import bytes_json, error_json
from kproto.cli.terminal_style import Style, wants_color
from kproto.reference import FieldRange

__all__ = ["add_parser", "run", "hexdump_json"]

DESCRIPTION = """\
Print frames as an annotated hex dump, like Wireshark's byte pane: each line is one field's bytes
(size prefix, header, body fields, and inside record sets each message's offset, size, crc, magic,
attributes, key and value) with its path and value.  Every byte of a frame carries exactly one label;
what does not decode (unknown api key or version, a broken body) is one labelled raw range.
Same input forms and options as 'kproto decode'; SASL secrets (SaslAuthenticate auth_bytes, raw tokens after
SaslHandshake v0) are shown as <redacted>, neither as hex nor as text, unless --show-secrets."""


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "hexdump",
        help="annotated hex dump of frames",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_frame_input_options(parser)
    add_format_option(parser)
    add_color_option(parser)
    add_show_secrets_option(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    mode, api_key, api_version = resolve_mode(parser, args)
    stream, total, owned = open_binary_input(args.file)
    tally = FrameTally()
    style = Style(args.format == "text" and wants_color(args.color, sys.stdout))
    writer = RecordWriter(sys.stdout, args.format, "hexdump") if args.format != "text" else None
    tracker = None if args.show_secrets else SecretTracker()
    try:
        for item in decoded_frames(
            stream,
            total,
            input_kind=args.input,
            mode=mode,
            api_key=api_key,
            api_version=api_version,
            max_frame_size=args.max_frame_size,
            tally=tally,
        ):
            secrets = None if isinstance(item, InputProblem) or tracker is None else tracker.examine(item)
            if writer is not None:
                writer.write(problem_json(item) if isinstance(item, InputProblem) else hexdump_json(item, secrets))
            elif isinstance(item, InputProblem):
                where = f" @{item.offset}" if item.offset >= 0 else ""
                print(style("problem", f"problem{where}: {item.kind}: {item.detail}"))
            else:
                _print_frame(item, style, secrets)
        if writer is not None:
            writer.close(tally.summary())
    finally:
        if owned:
            stream.close()
    if not tally.ok:
        print(
            f"kproto hexdump: {tally.frames} frames, {tally.failed} failed to decode, {tally.problems} input problems",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _ranges(frame: DecodedFrame, secrets: Optional[FrameSecrets]) -> Tuple[List[FieldRange], List[Tuple[int, int]]]:
    """The frame's labelled ranges with its secrets redacted, and where the secrets lie."""
    if secrets is None:
        return frame_ranges(frame), []
    spans = secrets.ranges(frame.data)
    facts = secrets.facts()
    what = " ".join(f"{k}={v}" for k, v in facts.items() if k != "size" and v is not None) or "SASL token"
    if secrets.raw_token:  # no header: what its bytes would "decode" to is the secret itself
        size = int.from_bytes(frame.data[:4], "big", signed=True)
        return [
            FieldRange("size", "value", 0, 4, size),
            *(
                [FieldRange("sasl_token", "raw", 4, len(frame.data), f"<redacted> ({what})")]
                if len(frame.data) > 4
                else []
            ),
        ], spans
    return redact_ranges(frame_ranges(frame), spans, what), spans


def _print_frame(frame: DecodedFrame, style: Style, secrets: Optional[FrameSecrets] = None) -> None:
    if secrets is not None and secrets.raw_token:
        print(style("title", secret_title(frame, secrets)))
    else:
        print(style("title", frame_title(frame)))
        if frame.error is not None:
            print(style("error", f"error: {type(frame.error).__name__}: {frame.error}"))
    ranges, spans = _ranges(frame, secrets)
    for line in dump_lines(frame.data, ranges, frame.header_end, style, spans):
        print(line)
    print()


def hexdump_json(frame: DecodedFrame, secrets: Optional[FrameSecrets] = None) -> Dict[str, Any]:
    """A frame's dump as JSON: identification, the frame bytes, and its labelled ``ranges``.  With
    ``secrets`` the bytes are ``{"redacted": true, "size", "spans"}`` and the secret ranges say
    ``<redacted>``."""
    ranges, spans = _ranges(frame, secrets)
    if secrets is not None and secrets.raw_token:
        return {
            "record": "hexdump",
            "index": frame.index,
            "offset": frame.offset,
            "size": len(frame.data),
            "kind": "sasl_token",
            "api_key": None,
            "api_name": None,
            "api_version": None,
            "correlation_id": None,
            "error": None,
            "data": {"redacted": True, "size": len(frame.data), "spans": [list(s) for s in spans]},
            "ranges": [range_json(r) for r in ranges],
        }
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
        "data": bytes_json(frame.data)
        if not spans
        else {"redacted": True, "size": len(frame.data), "spans": [list(s) for s in spans]},
        "ranges": [range_json(r) for r in ranges],
    }
