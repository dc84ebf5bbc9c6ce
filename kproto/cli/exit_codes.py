"""The exit codes of every ``kproto`` command."""

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"]

#: Everything decoded (or encoded).
EXIT_OK = 0
#: At least one frame failed to decode, or the input was damaged (diagnostics say where).
EXIT_FAILED = 1
#: Bad command line (argparse's own code) or unusable input file.
EXIT_USAGE = 2
