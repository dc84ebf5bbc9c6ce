"""``kproto report``: one offline HTML page of a capture (built by :mod:`kproto.capture.html_report`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, cast

from kproto.capture.conversation import DEFAULT_PORTS, decode_capture
from kproto.capture.groups import GroupAnalyzer
from kproto.capture.html_report import MissingExtra, render_report, require_plotly
from kproto.capture.traffic_stats import DEFAULT_MAX_BUCKETS, TrafficStats
from kproto.cli.command_options import add_capture_options, open_binary_input
from kproto.cli.exit_codes import EXIT_OK, EXIT_USAGE
from kproto.cli.progress_bar import CountingReader, ProgressBar

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Write one self-contained HTML file (no network access needed to open it) that shows a capture: request
rate and latency percentiles per API over time, record bytes and records per topic, errors on a
timeline, and each consumer group's rebalance timeline (members over time, rebalances shaded, the
member the group waited for in red).  Needs the report extra: pip install 'kproto[report]'."""


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help="write an offline HTML report of a capture",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_capture_options(parser)
    parser.add_argument("-o", "--output", required=True, metavar="HTML", help="the HTML file to write")
    parser.add_argument(
        "--buckets",
        type=int,
        default=DEFAULT_MAX_BUCKETS,
        metavar="N",
        help=f"time buckets per plot at most (default {DEFAULT_MAX_BUCKETS})",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.buckets < 1:
        parser.error("--buckets must be at least 1")
    try:
        require_plotly()
    except MissingExtra as exc:
        print(f"kproto report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    ports = frozenset(args.port) if args.port else DEFAULT_PORTS
    stream, total, owned = open_binary_input(args.file)
    reader = CountingReader(stream)
    progress = ProgressBar(None if args.no_progress else total, "reading capture")
    stats = TrafficStats()
    groups = GroupAnalyzer()
    try:
        for record in decode_capture(
            cast(BinaryIO, reader),  # a counting wrapper around the input file
            ports=ports,
            detect=not args.no_detect,  # type: ignore[arg-type]
            max_frame_size=args.max_frame_size,
        ):
            stats.feed(record)
            groups.feed(record)
            progress.update(reader.count)
    finally:
        progress.close()
        if owned:
            stream.close()
    page = render_report(
        stats, groups.finish(), title=f"kproto report: {os.path.basename(args.file)}", max_buckets=args.buckets
    )
    with open(args.output, "w", encoding="utf-8") as out:
        out.write(page)
    print(f"kproto report: wrote {args.output} ({len(page.encode()) // 1024} KiB)", file=sys.stderr)
    return EXIT_OK
