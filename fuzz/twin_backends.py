"""Both implementations of kproto in one fuzzing campaign: the Cython build and its pure-Python twin.

For message sets the two backends are ordinary modules already: the compiled and the pure record core
(:func:`kproto._backend.records_module`), side by side in one process; :func:`records_codecs` binds one
:class:`MessageSetCodec` to each.

Frames and message codecs have one module per name in a process: where the build compiled them,
``kproto.framing``, ``kproto.message_base`` and ``kproto.wire`` take the names of their compiled copies
(:func:`kproto._backend.adopt_compiled_copy`) and the registry binds the compiled codecs.  So the pure twin
runs in a second process, started with ``KPROTO_PURE=1`` (:class:`PureProcess`), and a harness asks each
twin to run the same function of its own module on an input (:func:`frame_twins`): the function does the
twin's own checks (round trips) and returns what the twins must agree on (plain data), which the harness
compares.  Where this process runs pure Python itself, both twins are this process.
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import subprocess
import sys
import traceback
from types import ModuleType
from typing import Any, BinaryIO, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LENGTH = struct.Struct(">I")


def is_compiled(module: ModuleType) -> bool:
    return not (getattr(module, "__file__", None) or ".py").endswith(".py")


class LocalTwin:
    """This process's build: ``compiled`` when its framing is the compiled copy, else ``python``."""

    def __init__(self) -> None:
        from fuzz.oracles import twin_name

        self.name = twin_name(importlib.import_module("kproto.framing"))

    def run(self, module: str, function: str, data: bytes) -> Any:
        return getattr(importlib.import_module(module), function)(data)


class PureProcess:
    """The pure twin: a worker process with ``KPROTO_PURE=1`` that runs ``module.function(data)`` for each
    call and sends back its result; an oracle failure there is raised here, with the worker's message."""

    name = "python"

    def __init__(self) -> None:
        path = os.environ.get("PYTHONPATH")
        env = dict(os.environ, KPROTO_PURE="1", PYTHONPATH=ROOT + (os.pathsep + path if path else ""))
        env.pop("KPROTO_REQUIRE_FAST", None)
        env.pop("LD_PRELOAD", None)  # the native-coverage runtime belongs to the compiled twin's process
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from fuzz.twin_backends import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def run(self, module: str, function: str, data: bytes) -> Any:
        from fuzz.oracles import fail

        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            _send(self._proc.stdin, (module, function, data))
            status, value = _receive(self._proc.stdout)
        except (OSError, EOFError) as exc:
            raise fail(f"the pure twin's process died ({exc}; exit status {self._proc.poll()})", data) from exc
        if status == "failure":
            raise fail(f"(pure twin) {value}", data)
        if status == "crash":
            raise fail(f"the pure twin's {module}.{function} raised:\n{value}", data)
        return value


def loaded_extensions(_data: bytes = b"") -> List[str]:
    """The kproto modules this process has loaded from anything but Python source (a twin's self-report;
    the argument is there for :meth:`PureProcess.run`)."""
    return sorted(name for name, module in sys.modules.items() if name.startswith("kproto") and is_compiled(module))


_frame_twins: Optional[Tuple[Any, Any]] = None


def frame_twins() -> Tuple[Any, Any]:
    """(this process's twin, the pure twin): a :class:`PureProcess` when this process runs the compiled build,
    this process again when it is pure itself (the comparison is then trivial, the twins' own checks are not)."""
    global _frame_twins
    if _frame_twins is None:
        local = LocalTwin()
        pure = PureProcess() if local.name == "compiled" else local
        # Wait until the worker has imported kproto (so that the first input's time is its own), and make
        # sure it runs nothing compiled.
        if pure is not local and pure.run("fuzz.twin_backends", "loaded_extensions", b"") != []:
            raise RuntimeError("the pure twin's process loaded compiled kproto modules")
        _frame_twins = (local, pure)
    return _frame_twins


def _send(stream: BinaryIO, value: Any) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def _receive(stream: BinaryIO) -> Any:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("end of stream")
    payload = stream.read(_LENGTH.unpack(head)[0])
    return pickle.loads(payload)


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """The worker's loop: until its input ends, run each requested function and send back its outcome."""
    from fuzz.oracles import OracleFailure

    while True:
        try:
            module, function, data = _receive(requests)
        except EOFError:
            return
        try:
            reply: Tuple[str, Any] = ("ok", getattr(importlib.import_module(module), function)(data))
        except OracleFailure as exc:
            reply = ("failure", str(exc))
        except Exception:  # noqa: BLE001 - reported to the harness, which fails the input
            reply = ("crash", traceback.format_exc())
        try:
            _send(replies, reply)
        except BrokenPipeError:  # the harness has gone
            return


def records_modules():
    """(compiled, pure) message set implementation modules; compiled is None when the extension is absent."""
    from kproto._backend import records_module

    pure = records_module(False)
    if os.environ.get("KPROTO_PURE") == "1":
        return None, pure
    try:
        fast = records_module(True)
    except ImportError:
        fast = None
    return fast, pure


def records_codecs():
    """(compiled, pure) :class:`MessageSetCodec` objects; compiled is None when the extension is absent."""
    from kproto.records.codec import MessageSetCodec

    fast, pure = records_modules()
    return (MessageSetCodec(fast) if fast is not None else None), MessageSetCodec(pure)


def main() -> None:
    """The pure twin's process (:class:`PureProcess` starts it): serve requests on stdin, replies on stdout."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # anything printed goes to the log, not into the replies
    serve(sys.stdin.buffer, replies)
