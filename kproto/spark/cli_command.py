"""``kproto spark captures|segments INPUT... --out DIR``: the Spark pipeline from the command line.

The CLI wires this module in as the ``spark`` command through :func:`add_arguments` and :func:`run`.
``--master`` (default ``local[*]``) and ``--conf KEY=VALUE`` go to Spark unchanged; ``--local`` runs
the single-process path instead (no Spark, local paths).  Exit status: 0 when every input decoded,
1 when the job completed but the ``problems`` table holds damage (unpaired frames alone do not count:
captures routinely start or end mid-conversation), 2 for bad arguments or missing inputs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List

__all__ = ["DESCRIPTION", "add_arguments", "run"]

#: What ``kproto spark --help`` says (plain text; the module docstring is for developers).
DESCRIPTION = """\
Decode pcap/pcapng captures or Kafka log segments into Parquet tables with Spark.

  kproto spark captures INPUT... --out DIR     exchanges, messages and problems of captures
  kproto spark segments INPUT... --out DIR     messages and problems of .log segments

--master (default local[*]) and --conf KEY=VALUE go to Spark unchanged; --local decodes in this process
without Spark (local paths only).  Needs the spark extra: pip install 'kproto[spark]'.

Exit status: 0 every input decoded, 1 the job completed but the problems table holds damage (frames
left unpaired at the edges of a capture do not count), 2 bad arguments, missing inputs or a missing
extra."""

#: Modules of the ``spark`` extra; importing one that is missing means the extra is not installed.
_EXTRA_MODULES = ("pyspark", "pyarrow")

# The kproto exit codes (kproto.cli.exit_codes; not imported: the CLI sits above this package).
_EXIT_OK, _EXIT_FAILED, _EXIT_USAGE = 0, 1, 2


def _conf_item(value: str) -> str:
    if "=" not in value or value.startswith("="):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return value


def _common(parser: argparse.ArgumentParser, glob_default: str | None) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories (any path Spark reads)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory for the Parquet tables")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        type=_conf_item,
        metavar="KEY=VALUE",
        help="Spark configuration (repeatable)",
    )
    parser.add_argument(
        "--glob",
        default=glob_default,
        metavar="PATTERN",
        help="only files whose name matches, inside directories"
        + (f" (default {glob_default})" if glob_default else ""),
    )
    parser.add_argument(
        "--mode",
        default="overwrite",
        choices=("overwrite", "append", "error", "ignore"),
        help="what to do when the output tables exist (default overwrite)",
    )
    parser.add_argument("--top", type=int, default=10, metavar="N", help="topics listed in the summary (default 10)")
    parser.add_argument("--local", action="store_true", help="decode in this process, without Spark (local paths)")
    parser.add_argument(
        "--split-mb",
        type=float,
        default=128.0,
        metavar="MB",
        help="files larger than this are read in ranges of this size by several tasks (default 128)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``captures`` and ``segments`` subcommands to ``parser``."""
    commands = parser.add_subparsers(dest="spark_command", metavar="WHAT", required=True)
    captures = commands.add_parser("captures", help="pcap/pcapng captures to exchanges, messages, problems")
    _common(captures, None)
    captures.add_argument(
        "--port",
        type=int,
        action="append",
        default=[],
        metavar="P",
        help="Kafka server port (repeatable; default 9092)",
    )
    captures.add_argument(
        "--no-detect",
        action="store_true",
        help="only connections to --port are Kafka (no detection by request headers)",
    )
    captures.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help="tasks decoding connections (default: Spark's default parallelism, one per core)",
    )
    captures.add_argument(
        "--groups",
        action="store_true",
        help="also write group_events and rebalances (consumer-group analysis per coordinator; "
        "a second pass over the captures)",
    )

    segments = commands.add_parser("segments", help="Kafka log segments (.log) to messages, problems")
    _common(segments, "*.log")


def _conf(items: List[str]) -> Dict[str, str]:
    return dict(item.split("=", 1) for item in items)


def run(args: argparse.Namespace) -> int:
    """Run ``kproto spark`` with parsed ``args``; returns the exit status."""
    try:
        return _run(args)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _EXTRA_MODULES:
            raise
        print(f"kproto spark: needs {exc.name}, part of the spark extra: pip install 'kproto[spark]'", file=sys.stderr)
        return _EXIT_USAGE


def _run(args: argparse.Namespace) -> int:
    from kproto.capture.conversation import DEFAULT_PORTS
    from kproto.spark import job
    from kproto.spark.inputs import local_capture_files

    captures = args.spark_command == "captures"
    options = {"glob": args.glob, "mode": args.mode, "top": args.top}
    if captures:
        options.update(
            ports=frozenset(args.port) if args.port else DEFAULT_PORTS, detect=not args.no_detect, groups=args.groups
        )
    inputs = args.inputs
    if captures:
        # Files that are not captures at all (notes, indexes beside the captures) are skipped with a line
        # each rather than failing the job; local inputs only (Spark lists remote ones itself).
        files = local_capture_files(inputs, args.glob, lambda line: print(f"kproto spark: {line}", file=sys.stderr))
        if files is not None:
            if not files:
                print(f"kproto spark: no pcap or pcapng captures in {' '.join(inputs)}", file=sys.stderr)
                return _EXIT_USAGE
            inputs, options["glob"] = files, None
    try:
        if args.local:
            local_runner = job.run_captures_local if captures else job.run_segments_local
            summary = local_runner(inputs, args.out, **options)
        else:
            options["split_bytes"] = int(args.split_mb * (1 << 20))
            if captures:
                options["partitions"] = args.partitions
            spark = job.spark_session(args.master, _conf(args.conf))
            runner = job.run_captures if captures else job.run_segments
            summary = runner(spark, inputs, args.out, **options)
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        print(f"kproto spark: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    except Exception as exc:  # Spark's AnalysisException (missing path, existing output) lands here
        if type(exc).__name__ != "AnalysisException":
            raise
        print(f"kproto spark: {exc}", file=sys.stderr)
        return _EXIT_USAGE
    print(summary.format())
    if summary.damage_count:
        print(
            f"kproto spark: completed; {summary.damage_count} problems from damaged input or undecodable frames "
            f"are in {args.out.rstrip('/')}/problems",
            file=sys.stderr,
        )
        return _EXIT_FAILED
    print(f"kproto spark: completed; tables in {args.out}", file=sys.stderr)
    return _EXIT_OK
