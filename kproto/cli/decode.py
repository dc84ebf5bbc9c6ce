"""``kproto decode``: decode size-prefixed frames from a binary file or hex text."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Iterator, Optional, TextIO

from kproto.cli.command_options import (
    add_color_option,
    add_format_option,
    add_frame_input_options,
    add_max_records_option,
    add_show_secrets_option,
    open_binary_input,
    resolve_mode,
)
from kproto.cli.exit_codes import EXIT_FAILED, EXIT_OK
from kproto.cli.frame_decoding import DecodedFrame
from kproto.cli.frame_json import frame_json
from kproto.cli.frame_pipeline import FrameTally, decoded_frames, problem_json
from kproto.cli.frame_secrets import FrameSecrets, SecretTracker, redacted_json
from kproto.cli.frame_stream import InputProblem
from kproto.cli.json_output import RecordWriter
from kproto.cli.json_values import message_json
from kproto.cli.terminal_style import Style, wants_color
from kproto.cli.tree_view import show_bytes, tree_lines

__all__ = ["add_parser", "run", "frame_title"]

DESCRIPTION = """\
Decode Kafka frames of any version (int32 size + payload), one or many, from a raw binary file or hex text
(bare hex, 0x.., colons, xxd, hexdump -C and tshark -x dumps; detected automatically).  Requests are
decoded from their header.  A response does not name its api: give --api/--api-key (+ --api-version),
or put the request before it in the same input and it is paired by correlation id.
SASL secrets are redacted unless --show-secrets: SaslAuthenticate auth_bytes, and after a SaslHandshake v0
request the raw tokens that follow it (frames that do not decode).
Exit code: 0 all frames decoded, 1 a frame failed or the input is damaged, 2 usage error."""


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "decode",
        help="decode frames from a binary or hex file",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_frame_input_options(parser)
    add_format_option(parser)
    add_color_option(parser)
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also decode the messages of record sets and consumer-protocol bytes",
    )
    add_max_records_option(parser)
    add_show_secrets_option(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    mode, api_key, api_version = resolve_mode(parser, args)
    stream, total, owned = open_binary_input(args.file)
    tally = FrameTally()
    try:
        items = decoded_frames(
            stream,
            total,
            input_kind=args.input,
            mode=mode,
            api_key=api_key,
            api_version=api_version,
            max_frame_size=args.max_frame_size,
            tally=tally,
        )
        tracker = None if args.show_secrets else SecretTracker()
        if args.format == "text":
            style = Style(wants_color(args.color, sys.stdout))
            for line in _text_lines(items, args.verbose, style, args.max_records, tracker):
                print(line)
        else:
            writer = RecordWriter(sys.stdout, args.format, "decode")
            for item in items:
                if isinstance(item, InputProblem):
                    writer.write(problem_json(item))
                    continue
                secrets = tracker.examine(item) if tracker is not None else None
                writer.write(redact_frame_json(frame_json(item, args.verbose, args.max_records), secrets))
            writer.close(tally.summary())
    finally:
        if owned:
            stream.close()
    return _finish(tally, sys.stderr)


def _finish(tally: FrameTally, err: TextIO) -> int:
    if tally.frames == 0 and not tally.problems:
        print("kproto decode: no frames in the input", file=err)
        return EXIT_FAILED
    if not tally.ok:
        print(
            f"kproto decode: {tally.frames} frames, {tally.failed} failed to decode, {tally.problems} input problems",
            file=err,
        )
        return EXIT_FAILED
    return EXIT_OK


def redact_frame_json(record: Dict[str, Any], secrets: Optional[FrameSecrets]) -> Dict[str, Any]:
    """A frame record with its secrets replaced by :func:`~kproto.cli.frame_secrets.redacted_json`: a raw
    token's header, body and raw bytes (a header "decoded" from a token would show it), or auth_bytes."""
    if secrets is None:
        return record
    if secrets.raw_token:
        record.update(
            header=None,
            body=None,
            raw_body=redacted_json(secrets),
            error=None,
            api_key=None,
            api_name=None,
            api_version=None,
            correlation_id=None,
            kind="sasl_token",
        )
    elif isinstance(record.get("body"), dict):
        record["body"]["auth_bytes"] = redacted_json(secrets)
    elif record.get("raw_body") is not None:
        record["raw_body"] = redacted_json(secrets)
    return record


def secret_title(frame: DecodedFrame, secrets: FrameSecrets) -> str:
    """The title of a raw SASL token frame (what its first bytes would mean as a header is not said)."""
    mechanism = f" {secrets.mechanism}" if secrets.mechanism else ""
    return (
        f"frame {frame.index} @{frame.offset}: raw SASL{mechanism} token (after SaslHandshake v0), "
        f"{len(frame.data)} bytes"
    )


def frame_title(frame: DecodedFrame) -> str:
    """``frame 0 @0: request Produce v0, correlation id 2, client 'kproto', 79 bytes``."""
    what = frame.kind
    if frame.api_key is not None:
        what += f" {frame.api_name} v{frame.api_version}"
    parts = [f"frame {frame.index} @{frame.offset}: {what}"]
    if frame.correlation_id is not None:
        parts.append(f"correlation id {frame.correlation_id}")
    if frame.kind == "request" and frame.header is not None and frame.header.client_id is not None:
        parts.append(f"client {frame.header.client_id!r}")
    parts.append(f"{len(frame.data)} bytes")
    return ", ".join(parts)


def _text_lines(
    items: Iterator[object], verbose: bool, style: Style, max_records: Optional[int], tracker: Optional[SecretTracker]
) -> Iterator[str]:
    for item in items:
        if isinstance(item, InputProblem):
            where = f" @{item.offset}" if item.offset >= 0 else ""
            yield style("problem", f"problem{where}: {item.kind}: {item.detail}")
            continue
        assert isinstance(item, DecodedFrame)
        secrets = tracker.examine(item) if tracker is not None else None
        if secrets is not None and secrets.raw_token:
            yield style("title", secret_title(item, secrets))
            yield from tree_lines({"token": redacted_json(secrets)}, 2)
            continue
        yield style("title", frame_title(item))
        if item.error is not None:
            yield "  " + style("error", f"error: {type(item.error).__name__}: {item.error}")
        if item.body is not None:
            body = message_json(item.body, verbose, max_records, item.api_version)
            if secrets is not None:
                body["auth_bytes"] = redacted_json(secrets)
            yield from tree_lines(body, 2)
        elif item.raw_body and secrets is not None:
            yield from tree_lines({"raw_body": redacted_json(secrets)}, 2)
        elif item.raw_body:
            yield f"  raw_body: {show_bytes(item.raw_body)}"
