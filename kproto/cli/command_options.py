"""Options several commands share (output format, colour, frame limit, which api a response answers),
and opening the input file (``-`` is stdin)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, Optional, Tuple

import kproto
from kproto.cli.terminal_style import COLOR_CHOICES
from kproto.framing import DEFAULT_MAX_FRAME_SIZE

__all__ = [
    "FORMATS",
    "add_capture_options",
    "add_format_option",
    "add_color_option",
    "add_frame_input_options",
    "add_show_secrets_option",
    "add_max_frame_option",
    "add_max_records_option",
    "open_binary_input",
    "resolve_mode",
]

FORMATS = ("text", "json", "jsonl")


def add_capture_options(parser: argparse.ArgumentParser) -> None:
    """FILE, --port and --no-detect: the capture input of ``groups`` and ``report``."""
    parser.add_argument("file", metavar="FILE", help="pcap or pcapng capture; - for stdin")
    parser.add_argument(
        "--port", type=int, action="append", metavar="P", help="a Kafka server port (repeatable; default 9092)"
    )
    parser.add_argument(
        "--no-detect",
        action="store_true",
        help="only decode connections to --port ports (default: also recognise Kafka elsewhere)",
    )
    add_max_frame_option(parser)


def add_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="output format: text for people, json (one document) or jsonl (one record a line); "
        "see docs/cli.md for the JSON schema (default: text)",
    )


def add_color_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default="auto",
        help="ANSI colours in text output: auto = only on a terminal (default)",
    )


def _byte_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale != 1 else text
    try:
        value = int(digits) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1048576, 512k, 100m)") from None
    if value < 8 or value > 0x7FFFFFFF:
        raise argparse.ArgumentTypeError("the frame size limit must be between 8 bytes and 2 GiB")
    return value


def add_max_frame_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-frame-size",
        type=_byte_size,
        default=DEFAULT_MAX_FRAME_SIZE,
        metavar="BYTES",
        help="largest frame accepted; a bigger size prefix is reported and skipped, and memory "
        "stays below it (suffixes k, m, g; default 100m, Kafka's socket.request.max.bytes)",
    )


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def add_max_records_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-records",
        type=_count,
        default=None,
        metavar="N",
        help="with -v, list at most N messages of each record set (the rest are counted)",
    )


def add_frame_input_options(parser: argparse.ArgumentParser) -> None:
    """FILE, input kind, request/response choice and the api of responses (decode, hexdump)."""
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE",
        help="size-prefixed frames, raw binary or hex text (detected); - or nothing for stdin",
    )
    parser.add_argument(
        "--input",
        choices=("auto", "binary", "hex"),
        default="auto",
        help="input kind: auto-detect (default), raw binary frames, or hex text",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--request", dest="mode", action="store_const", const="request", help="every frame is a request")
    mode.add_argument(
        "--response",
        dest="mode",
        action="store_const",
        const="response",
        help="every frame is a response (needs --api or --api-key, and --api-version)",
    )
    api = parser.add_mutually_exclusive_group()
    api.add_argument("--api", metavar="NAME", help="the api responses answer, by name (Produce, Metadata, ...)")
    api.add_argument("--api-key", type=int, metavar="N", help="the api responses answer, by key")
    parser.add_argument(
        "--api-version",
        type=int,
        metavar="V",
        help="version of the request the responses answer (optional when the api has one version)",
    )
    add_max_frame_option(parser)


def add_show_secrets_option(parser: argparse.ArgumentParser) -> None:
    """``--show-secrets``: SASL secrets are redacted in every command's output unless it is given."""
    parser.add_argument(
        "--show-secrets",
        action="store_true",
        help="show SASL secrets (passwords, SCRAM proofs, bearer tokens, opaque tokens) instead of redacting them",
    )


def resolve_mode(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Tuple[str, Optional[int], Optional[int]]:
    """(mode, api key, api version) from the options; usage errors exit with code 2.

    Without ``--request``/``--response`` frames are classified automatically, except that naming an api
    (``--api``/``--api-key``) says the frames are responses of it.
    """
    api_key = args.api_key
    if args.api is not None:
        info = kproto.APIS.get(int(args.api)) if args.api.isdigit() else kproto.APIS.get(args.api)
        if info is None:
            names = ", ".join(kproto.APIS[k].name for k in kproto.APIS)
            parser.error(f"unknown api {args.api!r}; known: {names}")
        api_key = info.api_key
    mode = args.mode or ("response" if api_key is not None else "auto")
    if api_key is None:
        if mode == "response":
            parser.error("--response needs --api NAME or --api-key N")
        if args.api_version is not None:
            parser.error("--api-version needs --api or --api-key")
        return mode, None, None
    info = kproto.APIS.get(api_key)
    if info is None:
        parser.error(f"unknown api key {api_key}")
    version = args.api_version
    if version is None:
        if len(info.versions) != 1:
            parser.error(f"{info.name} has versions {info.min_version}-{info.max_version}: give --api-version")
        version = info.min_version
    elif version not in info.versions:
        parser.error(f"{info.name} has no version {version} (known: {info.min_version}-{info.max_version})")
    return mode, api_key, version


def open_binary_input(path: str) -> Tuple[BinaryIO, Optional[int], bool]:
    """(stream, size in bytes when known, whether the caller must close it); ``-`` is stdin."""
    if path == "-":
        return sys.stdin.buffer, None, False
    stream = open(path, "rb")
    try:
        size: Optional[int] = os.fstat(stream.fileno()).st_size
    except OSError:
        size = None
    return stream, size, True
