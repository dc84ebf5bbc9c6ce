"""The client programs the tests drive, built once per session: Kafka's Java client (``tests/java``) and
franz-go/Sarama (``tests/go``).

Each builder skips the requesting test with one line naming what is missing (a JDK and Maven; the Go
toolchain), so a module that needs a program states why it did not run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

from kproto.testing import jars

TESTS = Path(__file__).resolve().parent
#: The Java client the scenarios run, and slf4j's simple binding: without a binding the client logs nothing,
#: and what it logs is where a test reads the errors it met.
JAVA_ARTIFACTS = ["org.apache.kafka:kafka-clients:4.1.1", "org.slf4j:slf4j-simple:1.7.36"]
BUILD_TIMEOUT_S = 900.0


def _run(cmd: List[str], **kwargs: object) -> None:
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(cmd[:2])} failed:\n{done.stdout[-4000:]}"


def java_scenarios(directory: Path) -> Tuple[str, str]:
    """(java, classpath) running ``tests/java/JavaClientScenarios.java``, compiled into ``directory``."""
    try:
        java, javac, _ = (jars.require_tool(tool) for tool in ("java", "javac", "mvn"))
    except jars.JavaToolMissingError as exc:
        pytest.skip(f"Java client tests need a JDK and Maven: {exc}")
    lib = jars.resolve(JAVA_ARTIFACTS)
    source = TESTS / "java" / "JavaClientScenarios.java"
    _run([javac, "-nowarn", "-d", str(directory), "-cp", f"{lib}/*", str(source)], timeout=BUILD_TIMEOUT_S)
    return java, f"{directory}:{lib}/*"


def go_peers(directory: Path) -> str:
    """The ``tests/go`` program (franz-go and Sarama scenarios) built into ``directory``, its modules
    downloaded through the Go module proxy."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("franz-go/Sarama tests need the Go toolchain (1.26+) on PATH: https://go.dev/dl/")
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    binary = directory / "peers"
    for cmd in ([go, "mod", "download"], [go, "build", "-o", str(binary), "."]):
        _run(cmd, cwd=TESTS / "go", env=env, timeout=BUILD_TIMEOUT_S)
    return str(binary)
