"""``kproto pcap``: the Kafka conversation in a pcap/pcapng capture, one line per request/response."""

from __future__ import annotations

import argparse
import sys
from typing import Any, BinaryIO, Dict, Optional, cast

from kproto.capture.conversation import (
    DEFAULT_PORTS,
    NOT_DAMAGE_KINDS,
    Exchange,
    Problem,
    ProblemKind,
    SaslToken,
    decode_capture,
)
from kproto.capture.reassembly import DEFAULT_MAX_OPEN_CONNECTIONS
from kproto.cli.command_options import (
    add_color_option,
    add_format_option,
    add_max_frame_option,
    add_max_records_option,
    add_show_secrets_option,
    open_binary_input,
)
from kproto.cli.filter_fields import FilterFields
from kproto.cli.exchange_filter import ExchangeFilter, FilterSyntaxError
from kproto.cli.exchange_view import (
    exchange_json,
    exchange_line,
    exchange_tree,
    format_time,
    problem_json,
    problem_line,
)
from kproto.cli.exit_codes import EXIT_FAILED, EXIT_OK
from kproto.cli.json_output import RecordWriter
from kproto.cli.progress_bar import CountingReader, ProgressBar
from kproto.cli.sasl_view import sasl_token_json, sasl_token_line
from kproto.cli.terminal_style import Style, wants_color

__all__ = ["add_parser", "run", "FAILURE_KINDS", "DEFAULT_PROBLEMS_PER_KIND"]

DESCRIPTION = """\
Decode the Kafka traffic of a pcap or pcapng capture: TCP is reassembled, frames are found, requests
are paired with their responses.  One line per exchange (time, connection, api, version, correlation
id, client id, sizes, latency, error codes); capture problems are listed where they occur (marked !).
-v adds the decoded request and response, with the messages of record sets.

Filter expressions (--filter) combine tests with and/or/not and parentheses:
  api=Produce   api_key=0   version>=1   topic=orders   topic~"ord*"   partition=3   group=billing
  client_id=app-1   error   error=REBALANCE_IN_PROGRESS   failed   unanswered   latency_ms>50
Fields: api api_key api_version correlation_id client_id connection client server port request_size
response_size latency_ms topic partition group error failed answered unanswered.  Problems are always
listed.

SASL: after SaslHandshake v0 the raw tokens are shown as 'SASL <mechanism> token N' lines; SaslAuthenticate
exchanges name their mechanism.  PLAIN passwords, SCRAM client proofs, OAUTHBEARER tokens and opaque
(GSSAPI) tokens are redacted unless --show-secrets.  A connection on a Kafka port that speaks TLS is
reported once (tls-encrypted, with the SNI) and not decoded further.
Exit code: 0 clean capture, 1 a frame failed to decode or the capture is damaged, 2 usage."""

#: Problems that mean something did not decode (exit code 1): all but the conversation and connection
#: facts of :data:`~kproto.capture.conversation.NOT_DAMAGE_KINDS`.
FAILURE_KINDS = frozenset(kind for kind in ProblemKind if kind not in NOT_DAMAGE_KINDS)

#: Problems of one kind listed before the rest are only counted: a damaged capture can hold millions
#: of the same problem (a file of empty records), and a line each made the output eight times the file.
DEFAULT_PROBLEMS_PER_KIND = 20


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "pcap",
        help="decode the Kafka conversation of a capture",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="FILE", help="pcap or pcapng capture; - for stdin")
    parser.add_argument(
        "--port", type=int, action="append", metavar="P", help="a Kafka server port (repeatable; default 9092)"
    )
    parser.add_argument(
        "--no-detect",
        action="store_true",
        help="only decode connections to --port ports (default: also recognise Kafka elsewhere)",
    )
    parser.add_argument("--filter", metavar="EXPR", help="show only exchanges matching EXPR (see above)")
    add_format_option(parser)
    add_color_option(parser)
    add_max_frame_option(parser)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="full decoded tree (text) / decoded record-set messages (JSON)"
    )
    add_max_records_option(parser)
    add_show_secrets_option(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_OPEN_CONNECTIONS,
        metavar="N",
        help="TCP connections followed at once; past it the least recently active is dropped "
        f"and reported (default {DEFAULT_MAX_OPEN_CONNECTIONS})",
    )
    parser.add_argument(
        "--problems-per-kind",
        type=int,
        default=DEFAULT_PROBLEMS_PER_KIND,
        metavar="N",
        help="list at most N problems of each kind, then only count them in the summary "
        f"(default {DEFAULT_PROBLEMS_PER_KIND}; 0: no limit)",
    )
    parser.set_defaults(run=run)
    return parser


class _Tally:
    def __init__(self) -> None:
        self.exchanges = 0
        self.shown = 0
        self.sasl_tokens = 0
        self.problems: Dict[str, int] = {}
        self.failures = 0
        self.problems_not_listed = 0

    def summary(self) -> Dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "shown": self.shown,
            "sasl_tokens": self.sasl_tokens,
            "problems": dict(sorted(self.problems.items())),
            "failures": self.failures,
            "problems_not_listed": self.problems_not_listed,
        }


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    selector: Optional[ExchangeFilter] = None
    if args.problems_per_kind < 0:
        parser.error("--problems-per-kind must be 0 or more")
    if args.max_connections < 1:
        parser.error("--max-connections must be at least 1")
    if args.filter is not None:
        try:
            selector = ExchangeFilter(args.filter)
        except FilterSyntaxError as exc:
            parser.error(f"--filter: {exc}")
    ports = frozenset(args.port) if args.port else DEFAULT_PORTS
    stream, total, owned = open_binary_input(args.file)
    reader = CountingReader(stream)
    progress = ProgressBar(None if args.no_progress else total, "reading capture")
    tally = _Tally()
    output = _Output(args)
    try:
        for record in decode_capture(
            cast(BinaryIO, reader),  # a counting wrapper around the input file
            ports=ports,
            detect=not args.no_detect,  # type: ignore[arg-type]
            max_frame_size=args.max_frame_size,
            max_open_connections=args.max_connections,
            sasl_records=True,
        ):
            if isinstance(record, SaslToken):
                tally.sasl_tokens += 1
                if selector is None:  # a filter selects exchanges; tokens have none of their fields
                    output.sasl_token(record)
            elif isinstance(record, Exchange):
                tally.exchanges += 1
                if selector is None or selector(FilterFields(record)):
                    tally.shown += 1
                    output.exchange(record)
            else:
                seen = tally.problems[record.kind.value] = tally.problems.get(record.kind.value, 0) + 1
                tally.failures += record.kind in FAILURE_KINDS
                if args.problems_per_kind and seen > args.problems_per_kind:
                    tally.problems_not_listed += 1
                else:
                    output.problem(record)
            progress.update(reader.count)
    finally:
        progress.close()
        if owned:
            stream.close()
    output.close(tally.summary())
    if tally.problems_not_listed:
        counts = ", ".join(
            f"{count} {kind}" for kind, count in sorted(tally.problems.items()) if count > args.problems_per_kind
        )
        print(
            f"kproto pcap: {tally.problems_not_listed} more problems counted but not listed "
            f"(--problems-per-kind {args.problems_per_kind}; totals: {counts})",
            file=sys.stderr,
        )
    if tally.failures:
        print(
            f"kproto pcap: {tally.failures} problems where frames did not decode or the capture is damaged",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


class _Output:
    """Text or JSON output of exchanges and problems."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.verbose = args.verbose
        self.max_records = args.max_records
        self.show_secrets = args.show_secrets
        self.style = Style(args.format == "text" and wants_color(args.color, sys.stdout))
        self.writer = RecordWriter(sys.stdout, args.format, "pcap") if args.format != "text" else None

    def exchange(self, exchange: Exchange) -> None:
        if self.writer is not None:
            self.writer.write(exchange_json(exchange, self.verbose, self.max_records, self.show_secrets))
            return
        print(exchange_line(exchange, self.style))
        if self.verbose:
            for line in exchange_tree(exchange, max_records=self.max_records, show_secrets=self.show_secrets):
                print(line)

    def sasl_token(self, token: SaslToken) -> None:
        if self.writer is not None:
            self.writer.write(sasl_token_json(token, self.show_secrets))
        else:
            print(sasl_token_line(token, self.style, self.show_secrets, format_time(token.request_time_ns)))

    def problem(self, problem: Problem) -> None:
        if self.writer is not None:
            self.writer.write(problem_json(problem))
        else:
            print(problem_line(problem, self.style))

    def close(self, summary: Dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.close(summary)
