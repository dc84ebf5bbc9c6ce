"""Commands whose options and behaviour live in other kproto packages: ``broker`` (the mock broker,
:mod:`kproto.broker.cli_command`) and ``spark`` (the Spark pipeline, :mod:`kproto.spark.cli_command`).

Each such module offers ``add_arguments(parser)``, ``run(args) -> int`` and ``DESCRIPTION``, the plain
text ``--help`` shows (module docstrings are written for developers, in reStructuredText).  Those packages are large
(and
Spark is optional), so they are imported only when their command runs: :func:`kproto.cli.main` hands the
command's arguments over unparsed and the package's own parser reads them then, ``--help`` included.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Dict, Tuple

__all__ = ["PACKAGE_COMMANDS", "add_parsers", "run"]

#: command -> (module providing add_arguments/run, one-line help)
PACKAGE_COMMANDS: Dict[str, Tuple[str, str]] = {
    "broker": ("kproto.broker.cli_command", "run the mock Kafka broker (clients of 0.8 to 4.x) in the foreground"),
    "spark": ("kproto.spark.cli_command", "decode captures or segments to Parquet tables with Spark"),
}


def add_parsers(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    for name, (_, summary) in PACKAGE_COMMANDS.items():
        parser = subparsers.add_parser(name, help=summary, add_help=False)
        parser.set_defaults(run=run, package_args=[])


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    module_name, summary = PACKAGE_COMMANDS[args.command]
    module = importlib.import_module(module_name)
    real = argparse.ArgumentParser(
        prog=f"kproto {args.command}",
        description=module.DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(real)
    return module.run(real.parse_args(args.package_args))
