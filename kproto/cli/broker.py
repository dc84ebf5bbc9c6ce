"""``kproto broker``: the mock broker's command (options and behaviour live in :mod:`kproto.broker.cli_command`).

The broker package is large, so it is imported only when this command runs: :func:`kproto.cli.main`
hands the command's arguments over unparsed and the broker's own parser reads them then, ``--help``
included.
"""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]

_SUMMARY = "run the mock Kafka 0.9 broker in the foreground"


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> argparse.ArgumentParser:
    parser = subparsers.add_parser("broker", help=_SUMMARY, add_help=False)
    parser.set_defaults(run=run, broker_args=[])
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from kproto.broker import cli_command

    real = argparse.ArgumentParser(prog="kproto broker", description=(cli_command.__doc__ or _SUMMARY).strip(),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    cli_command.add_arguments(real)
    return cli_command.run(real.parse_args(args.broker_args))
