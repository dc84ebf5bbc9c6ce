"""The ``kproto`` console script: help on every command, usage errors exit 2, and the helper the other
``test_cli_*`` modules use to run it as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence, Union

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
COMMANDS = ("decode", "hexdump", "pcap", "encode")


def kproto_script() -> Path:
    """The installed console script next to the interpreter running the tests."""
    script = Path(sys.executable).with_name("kproto")
    assert script.exists(), f"the kproto console script is not installed next to {sys.executable}: pip install -e ."
    return script


def run_kproto(
    *args: Union[str, Path], stdin: Optional[bytes] = None, env: Optional[dict] = None, check_code: Optional[int] = None
) -> subprocess.CompletedProcess:
    """Run ``kproto ARGS`` and return the completed process (bytes stdout/stderr)."""
    full_env = dict(os.environ)
    full_env.pop("NO_COLOR", None)
    full_env.update(env or {})
    proc = subprocess.run(
        [str(kproto_script()), *map(str, args)], input=stdin, capture_output=True, env=full_env, timeout=300
    )
    if check_code is not None:
        assert proc.returncode == check_code, (
            f"kproto {' '.join(map(str, args))} exited {proc.returncode}, expected {check_code}\n"
            f"stderr: {proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return proc


def run_args(args: Sequence[str]) -> subprocess.CompletedProcess:
    return run_kproto(*args)


def test_top_level_help_lists_every_command() -> None:
    out = run_kproto("--help", check_code=0).stdout.decode()
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    out = run_kproto(command, "--help", check_code=0).stdout.decode()
    assert f"usage: kproto {command}" in out
    assert "--format" in out


@pytest.mark.parametrize("command, option", [("broker", "--record"), ("spark", "--out")])
def test_package_commands_are_wired_in(command: str, option: str) -> None:
    out = run_kproto(command, "--help", check_code=0).stdout.decode()
    assert f"usage: kproto {command}" in out and option in out
    assert run_kproto(command, "--no-such-option").returncode == 2


def test_version() -> None:
    assert run_kproto("--version", check_code=0).stdout.decode().startswith("kproto ")


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["decode", "--format", "xml"],
        ["decode", "--response"],
        ["decode", "--api", "NoSuchApi"],
        ["decode", "--api", "Produce"],
        ["decode", "--api-key", "0", "--api-version", "99"],
        ["decode", "--api-version", "0"],
        ["decode", "--api", "Produce", "--api-key", "0"],
        ["decode", "--request", "--response"],
        ["decode", "--max-frame-size", "lots"],
        ["hexdump", "--color", "sometimes"],
        ["pcap"],
        ["pcap", str(SAMPLES / "produce.pcap"), "--filter", "api="],
        ["pcap", str(SAMPLES / "produce.pcap"), "--filter", "colour=red"],
        ["pcap", str(SAMPLES / "produce.pcap"), "--filter", "(api=Produce"],
        ["pcap", str(SAMPLES / "produce.pcap"), "--filter", "api=Nope"],
        ["pcap", str(SAMPLES / "produce.pcap"), "--port", "x"],
        ["encode", "--raw", "--format", "json"],
    ],
)
def test_usage_errors_exit_2(args) -> None:
    proc = run_args(args)
    assert proc.returncode == 2, proc.stderr
    assert b"usage:" in proc.stderr or b"error" in proc.stderr


def test_missing_file_exits_2_with_a_message(tmp_path: Path) -> None:
    proc = run_kproto("decode", tmp_path / "absent.bin")
    assert proc.returncode == 2
    assert b"No such file" in proc.stderr


@pytest.mark.parametrize("command", ["broker", "spark"])
def test_package_command_help_is_plain_text(command: str) -> None:
    """``--help`` of the package commands shows user text, not the module's reStructuredText docstring."""
    text = run_kproto(command, "--help", check_code=0).stdout.decode()
    assert "Exit status" in text
    for developer_text in ("``", ":func:", ":class:", ":mod:", "The CLI wires"):
        assert developer_text not in text


def test_spark_without_its_extra_says_which_extra_to_install(tmp_path: Path) -> None:
    fake = tmp_path / "no_extra" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'pyarrow'\", name='pyarrow')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])}
    proc = run_kproto(
        "spark", "captures", SAMPLES / "fetch.pcap", "--out", tmp_path / "out", "--local", env=env, check_code=2
    )
    assert b"pip install 'kproto[spark]'" in proc.stderr and b"Traceback" not in proc.stderr
