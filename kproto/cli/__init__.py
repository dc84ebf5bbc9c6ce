"""The ``kproto`` command line: decode, hexdump, pcap and encode Kafka traffic of every version.

``main(argv)`` is the console script's entry point; each command lives in its own module
(:mod:`kproto.cli.decode`, :mod:`~kproto.cli.hexdump`, :mod:`~kproto.cli.pcap`,
:mod:`~kproto.cli.encode`) and registers its parser there; :mod:`~kproto.cli.package_commands` wires
in the commands other packages provide (``broker``, ``spark``).  Exit codes: 0 success, 1 some frame failed
to decode or the input is damaged, 2 usage error (see :mod:`kproto.cli.exit_codes`).  The CLI is the
top layer: it may import all of kproto, and nothing in kproto imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

import kproto
from kproto.cli import decode, encode, groups, hexdump, package_commands, pcap, report
from kproto.cli.exit_codes import EXIT_FAILED, EXIT_USAGE

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="kproto",
        description="Decode, dump, encode and follow Apache Kafka wire protocol traffic (Kafka 0.8 to 4.x).",
        epilog="Run 'kproto COMMAND --help' for a command's options; docs/cli.md documents the JSON formats.",
    )
    parser.add_argument("--version", action="version", version=f"kproto {kproto.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (decode, hexdump, pcap, encode, groups, report):
        command = module.add_parser(commands)
        command.set_defaults(command_parser=command)  # so usage errors found later print this command's usage
    package_commands.add_parsers(commands)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 decode failures, 2 usage errors)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command in package_commands.PACKAGE_COMMANDS:
        args.package_args = extra  # parsed by the package's own parser when the command runs
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.run(args, getattr(args, "command_parser", parser))
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"kproto {args.command}: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
