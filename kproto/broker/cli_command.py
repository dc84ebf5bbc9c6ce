"""``kproto broker``: run the mock broker in the foreground until interrupted.

``kproto broker --host 127.0.0.1 --port 0 [--brokers N] [--topic name:partitions]... [--record FILE]`` prints
``listening on HOST:PORT`` as its first line of standard output, then serves until SIGINT/SIGTERM;
with ``--record`` it writes every byte exchanged to a pcap as it happens (an unwritable path or a
symbolic link there stops it before it listens, exit 2).  The CLI wires this module
in as a subcommand through :func:`add_arguments` and :func:`run`.
"""

from __future__ import annotations

import argparse
import sys

from kproto.broker.mock import parse_topic_spec, run_broker

__all__ = ["DESCRIPTION", "add_arguments", "run"]

#: What ``kproto broker --help`` says (plain text; the module docstring is for developers).
DESCRIPTION = """\
Run a mock Kafka broker in the foreground until interrupted (Ctrl-C or SIGTERM).  Current clients
connect at their defaults (it answers ApiVersions); 0.8/0.9-pinned clients are served too.

The first line on standard output is "listening on HOST:PORT"; with --port 0 it names the port that was
picked.  With --brokers N it is a cluster of N brokers on N ports and the line lists them all,
comma-separated (a bootstrap list); partitions get replicas and leaders spread over the brokers.
Topics named with --topic exist from the start; others are created when a client asks for them (unless
--no-auto-create).  With --record FILE every byte exchanged is written to a pcap when the
broker stops.  With --sasl-plain-user every client must log in with SASL PLAIN first.

Exit status: 0 after a clean stop, 2 for bad arguments."""


def _topic(value: str) -> str:
    try:
        parse_topic_spec(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _user(value: str) -> str:
    user, sep, password = value.partition(":")
    if not sep or not user:
        raise argparse.ArgumentTypeError(f"{value!r} is not USER:PASSWORD")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the broker's options to ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9092, help="port to listen on; 0 picks a free one (default 9092)")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        type=_topic,
        metavar="NAME:PARTITIONS",
        help="declare a topic (repeatable); others are auto-created with --partitions",
    )
    parser.add_argument("--partitions", type=int, default=1, help="partitions of auto-created topics (default 1)")
    parser.add_argument("--no-auto-create", action="store_true", help="answer unknown topics with an error")
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="write all traffic to this pcap as it happens (opened at start; a symlink is refused)",
    )
    parser.add_argument(
        "--record-follow-symlinks", action="store_true", help="allow --record to write through a symbolic link"
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=None,
        help="clients served at once; more are closed at once (default: 4096 or the file limit)",
    )
    parser.add_argument(
        "--max-buffered-bytes",
        type=int,
        default=None,
        help="bytes of requests held for all clients together (default 128 MiB)",
    )
    parser.add_argument(
        "--idle-timeout-ms",
        type=int,
        default=None,
        help="close connections idle this long (default 600000, Kafka's connections.max.idle.ms)",
    )
    parser.add_argument(
        "--min-session-timeout-ms",
        type=int,
        default=None,
        help="lowest session timeout the group coordinator accepts (default 6000)",
    )
    parser.add_argument("--advertised-host", default=None, help="host name given to clients in Metadata")
    parser.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="brokers in the mock cluster, each on its own port (--port P: P, P+1, ...; default 1)",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        help="replicas per partition (default: up to 3, never more than --brokers)",
    )
    parser.add_argument(
        "--min-insync-replicas",
        type=int,
        default=1,
        help="min.insync.replicas: acks=all below it is NOT_ENOUGH_REPLICAS (default 1)",
    )
    parser.add_argument(
        "--sasl-plain-user",
        action="append",
        default=[],
        type=_user,
        metavar="USER:PASSWORD",
        help="require SASL PLAIN and accept this user (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the broker with parsed ``args``; returns the exit status."""
    if args.partitions < 1:
        print("kproto broker: --partitions must be at least 1", file=sys.stderr)
        return 2
    budgets = {
        name: value
        for name, value in (
            ("max_connections", args.max_connections),
            ("max_buffered_bytes", args.max_buffered_bytes),
            ("connections_max_idle_ms", args.idle_timeout_ms),
        )
        if value is not None
    }
    for name, value in budgets.items():
        if value < 1:
            print(f"kproto broker: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.brokers < 1:
        print("kproto broker: --brokers must be at least 1", file=sys.stderr)
        return 2
    if args.replication_factor is not None and not 1 <= args.replication_factor <= args.brokers:
        print(f"kproto broker: --replication-factor must be between 1 and --brokers ({args.brokers})", file=sys.stderr)
        return 2
    if args.min_insync_replicas < 1:
        print("kproto broker: --min-insync-replicas must be at least 1", file=sys.stderr)
        return 2
    cluster = (
        {
            "brokers": args.brokers,
            "replication_factor": args.replication_factor,
            "min_insync_replicas": args.min_insync_replicas,
        }
        if args.brokers > 1
        else {}
    )
    users = dict(spec.split(":", 1) for spec in args.sasl_plain_user) or None
    try:
        return run_broker(
            args.host,
            args.port,
            topics=list(args.topic),
            default_partitions=args.partitions,
            auto_create_topics=not args.no_auto_create,
            record_pcap=args.record,
            record_follow_symlinks=args.record_follow_symlinks,
            min_session_timeout_ms=args.min_session_timeout_ms,
            advertised_host=args.advertised_host,
            sasl_plain_users=users,
            **budgets,
            **cluster,
        )
    except OSError as exc:
        print(f"kproto broker: {exc}", file=sys.stderr)
        return 2
