"""What every test folder shares: the folders importable by module name, a check that the selected backend
is the one the environment asked for (``KPROTO_REQUIRE_FAST=1`` → cython, ``KPROTO_PURE=1`` → python), the
records fixtures that run both message set backends in one run, and tshark as a required tool."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import kproto._backend
from kproto._backend import records_module


# Tests are laid out by package (tests/broker, tests/cli, ...) and a few modules share helpers across them
# (the CLI runner, the tshark comparison, the group captures): every folder is importable by module name,
# whichever test file is collected first.
_TESTS = Path(__file__).resolve().parent
for _folder in sorted(p for p in _TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KPROTO_PURE") == "1":
        assert kproto._backend.BACKEND == "python", "KPROTO_PURE=1 but the cython backend is active"
    elif os.environ.get("KPROTO_REQUIRE_FAST") == "1":
        assert kproto._backend.BACKEND == "cython", "KPROTO_REQUIRE_FAST=1 but the cython backend is not active"


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    # The CLI tests run the kproto command in subprocesses; what they check (arguments, output formats,
    # exit codes) is the same on both backends, and on the pure path every subprocess spends ~1.5 s
    # importing the codecs of all 93 APIs from source.  They run once, on the compiled build.
    for item in items:
        if item.fspath.basename.startswith("test_cli_"):
            item.add_marker(pytest.mark.cli_process)


def _records_module(name: str):
    if name == "python":
        return records_module(False)
    try:
        return records_module(True)
    except ImportError:
        if os.environ.get("KPROTO_PURE") == "1":
            pytest.skip("KPROTO_PURE=1 run without the compiled extension")
        raise


@pytest.fixture(scope="module", params=["cython", "python"])
def records_impl(request: pytest.FixtureRequest):
    """One record core implementation module (:func:`kproto._backend.records_module`, compiled or pure)."""
    return _records_module(request.param)


@pytest.fixture(scope="module", params=["cython", "python"])
def records_codec(request: pytest.FixtureRequest):
    """The public message set API bound to one implementation."""
    from kproto.records.codec import MessageSetCodec

    return MessageSetCodec(_records_module(request.param))


@pytest.fixture(scope="module")
def both_codecs():
    """(cython, python) codecs, for differential tests."""
    from kproto.records.codec import MessageSetCodec

    return MessageSetCodec(_records_module("cython")), MessageSetCodec(_records_module("python"))


@pytest.fixture
def tshark_required() -> str:
    """tshark is a test dependency (scripts/test installs it); in CI its absence fails, never skips."""
    import shutil

    path = shutil.which("tshark")
    if path is None:
        message = "tshark is required (scripts/test installs Debian's tshark package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
