"""kio 0.5.0 — the last kio with the versions Kafka 4.0 removed — in a worker process.

kio 0.5 and 0.6 are the same top-level package ``kio``, so one interpreter can import only one of them.
``scripts/setup-env`` installs 0.6.x into the virtualenv and 0.5.0 with ``pip install --target`` into
``<venv>/peers/kio-0.5.0`` (override with ``KPROTO_KIO05_PATH``); this module starts one worker per test
session that puts that directory first on its import path and runs the same adapter (``kio_peer``) there.
Requests and answers are JSON lines (values through ``to_jsonable``); a failure in the worker comes back
as an ``AssertionError`` carrying the worker's traceback.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

from . import Peer, from_jsonable, shape_of, to_jsonable

KIO05_PATH = Path(os.environ.get("KPROTO_KIO05_PATH", Path(sys.prefix) / "peers" / "kio-0.5.0"))


class Kio05Worker:
    """A proxy for ``kio_peer``'s functions, executed by kio 0.5.0 in a child process."""

    def __init__(self) -> None:
        self._proc: Optional[subprocess.Popen] = None

    def _start(self) -> subprocess.Popen:
        if not (KIO05_PATH / "kio" / "__init__.py").exists():
            raise RuntimeError(f"kio 0.5.0 is not installed in {KIO05_PATH}: run scripts/setup-env")
        tests_dir = str(Path(__file__).resolve().parent.parent)
        code = "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; from peers.kio05 import serve; serve()"
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(KIO05_PATH), tests_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        atexit.register(self.close)
        return proc

    def call(self, op: str, *args: Any) -> Any:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"op": op, "args": to_jsonable(list(args))}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError("the kio 0.5.0 worker exited")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"kio 0.5.0 worker: {answer['error']}")
        return from_jsonable(answer["result"])

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()  # type: ignore[union-attr]
            self._proc.wait(timeout=10)


def serve() -> None:
    """The worker's loop: one JSON request per line on stdin, one answer per line on stdout."""
    import kio

    from . import kio_peer

    assert kio.__file__.startswith(str(KIO05_PATH)) or os.environ.get("KPROTO_KIO05_PATH"), kio.__file__
    ops = {
        name: getattr(kio_peer, name)
        for name in ("supports", "flexible", "encode", "decode", "constrain", "header_version")
    }
    for line in sys.stdin:
        request = json.loads(line)
        try:
            args = from_jsonable(request["args"])
            if request["op"] in ("supports", "flexible", "encode", "decode", "constrain", "header_version"):
                args[0] = tuple(args[0])  # the Ident
            result = {"result": to_jsonable(ops[request["op"]](*args))}
        except Exception:  # noqa: BLE001 - reported to the test process, which fails
            result = {"error": traceback.format_exc()}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


class Kio05(Peer):
    """kio 0.5.0 (through :class:`Kio05Worker`), used only for the versions kio 0.6 no longer has."""

    name = "kio-0.5"

    def __init__(self, newer: Peer) -> None:
        self._worker = Kio05Worker()
        self._newer = newer
        self._supported: dict = {}

    def _ident(self, spec: Any) -> list:
        return [spec.name, spec.kind, spec.api_key]

    def supports(self, spec, version):
        key = (spec.name, version)
        if key not in self._supported:
            self._supported[key] = not self._newer.supports(spec, version) and self._worker.call(
                "supports", self._ident(spec), version
            )
        return self._supported[key]

    def encode(self, spec, version, value):
        return self._worker.call("encode", self._ident(spec), version, value, shape_of(spec.root, version))

    def decode(self, spec, version, data):
        return self._worker.call("decode", self._ident(spec), version, data, shape_of(spec.root, version))

    def constrain(self, spec, version, value):
        return self._worker.call("constrain", self._ident(spec), version, value, shape_of(spec.root, version))

    def header_version(self, spec, version):
        return self._worker.call("header_version", self._ident(spec), version)
