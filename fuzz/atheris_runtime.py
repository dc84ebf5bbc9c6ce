"""What every harness does before atheris takes over: native coverage, instrumentation, corpus replay.

A harness module (``fuzz/fuzz_<name>.py``) defines ``NAME``, ``setup()`` (imports kproto and returns
nothing; called once, before any input) and ``one_input(data)`` (raises on an oracle violation), and ends
with ``atheris_runtime.main(NAME, setup, one_input)``.  :func:`main`:

1. when ``fuzz/build_native.py`` has built coverage-instrumented extensions, re-executes the process with
   their libFuzzer runtime in ``LD_PRELOAD`` and loads the instrumented ``.so`` files in place of the
   regular ones (only if each was built from the current ``.c`` file; ``KPROTO_FUZZ_NATIVE=0`` skips all
   this), so the Cython code reports coverage;
2. runs ``setup()`` and instruments the Python bytecode of every kproto function then loaded in this
   process (the pure twin of the frame codecs runs in a process of its own, see ``fuzz/twin_backends.py``,
   and guides no coverage);
3. hands ``one_input`` to atheris with the arguments given (libFuzzer flags, corpus directories); or, with
   ``--replay PATH...``, runs every file once without atheris and exits 1 if any fails.
"""

from __future__ import annotations

import gc
import glob
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import traceback
import types
from typing import Callable, Iterable, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fuzz import build_native  # noqa: E402

_KPROTO_DIR = os.path.join(ROOT, "kproto") + os.sep


def native_dir() -> Optional[str]:
    """The instrumented build directory, when it exists and has the libFuzzer runtime."""
    if os.environ.get("KPROTO_FUZZ_NATIVE") == "0":
        return None
    path = build_native.cache_dir()
    return path if os.path.exists(os.path.join(path, "libfuzzer_no_main.so")) else None


def _preloaded(lib: str) -> bool:
    return lib in os.environ.get("LD_PRELOAD", "").split(":")


def maybe_reexec_with_native() -> None:
    """Re-exec with the instrumented build's libFuzzer preloaded (atheris then uses it, not its own)."""
    path = native_dir()
    if path is None:
        return
    lib = os.path.join(path, "libfuzzer_no_main.so")
    if _preloaded(lib):
        return
    env = dict(os.environ)
    env["LD_PRELOAD"] = ":".join([lib] + [p for p in env.get("LD_PRELOAD", "").split(":") if p])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


class _InstrumentedExtensions(importlib.abc.MetaPathFinder):
    """Serve kproto's compiled modules from the instrumented build directory."""

    def __init__(self, mapping: dict) -> None:
        self.mapping = mapping

    def find_spec(self, name, path, target=None):  # type: ignore[override]
        so = self.mapping.get(name)
        if so is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(name, so)
        return importlib.util.spec_from_file_location(name, so, loader=loader)


def install_native_extensions() -> List[str]:
    """Use the instrumented extensions that match the current sources; return their module names."""
    path = native_dir()
    if path is None or not _preloaded(os.path.join(path, "libfuzzer_no_main.so")):
        return []
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    mapping = {}
    for c_file in build_native.extension_sources():
        name = build_native.module_name(c_file)
        so = os.path.join(path, name + suffix)
        stamp = so + ".sha"
        if not (os.path.exists(so) and os.path.exists(stamp)):
            continue
        with open(stamp) as f:
            want = f.read().strip()
        if build_native.source_digest(c_file, name) == want:
            mapping[name] = so
    if mapping:
        sys.meta_path.insert(0, _InstrumentedExtensions(mapping))
    return sorted(mapping)


#: Generated functions left uninstrumented: encoders (they run on values the decoders produced, so their
#: branches add no guidance the decoders' do not) and constructors (straight-line code).  With every api
#: key of Kafka 4.x the generated modules hold thousands of functions, and instrumenting them all costs a
#: minute of CPU at every harness start -- longer than a CI campaign fuzzes.
_GENERATED_DIR = os.path.join(_KPROTO_DIR, "_generated")


def _worth_instrumenting(func: types.FunctionType) -> bool:
    code = func.__code__
    if not code.co_filename.startswith(_KPROTO_DIR):
        return False
    if code.co_filename.startswith(_GENERATED_DIR):
        return not (code.co_name.startswith("_enc") or code.co_name == "__init__")
    return True


def instrument_kproto() -> int:
    """Add atheris's bytecode instrumentation to the loaded Python functions defined under ``kproto/``
    (generated encoders and constructors excepted, see :data:`_GENERATED_DIR`)."""
    import atheris

    count = 0
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and _worth_instrumenting(obj):
            try:
                atheris.instrument_func(obj)
                count += 1
            except Exception:  # noqa: BLE001 - a function atheris cannot patch just stays uninstrumented
                pass
    return count


def corpus_files(paths: Iterable[str]) -> List[str]:
    out: List[str] = []
    for p in paths:
        if os.path.isdir(p):
            out.extend(sorted(f for f in glob.glob(os.path.join(p, "*")) if os.path.isfile(f)))
        elif os.path.isfile(p):
            out.append(p)
    return out


def replay(one_input: Callable[[bytes], None], paths: Sequence[str], *, verbose: bool = True) -> int:
    """Run every file once; return the number of failures (each printed with its traceback)."""
    failures = 0
    files = corpus_files(paths)
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        try:
            one_input(data)
        except Exception:  # noqa: BLE001
            failures += 1
            print(f"FAIL {path}", file=sys.stderr)
            traceback.print_exc()
    if verbose:
        print(f"replayed {len(files)} inputs, {failures} failed", file=sys.stderr)
    return failures


def main(name: str, setup: Callable[[], None], one_input: Callable[[bytes], None]) -> None:
    args = sys.argv[1:]
    if args and args[0] == "--replay":
        setup()
        sys.exit(1 if replay(one_input, args[1:]) else 0)
    maybe_reexec_with_native()
    import atheris  # noqa: F401 - loaded before the instrumented extensions, which need its libFuzzer

    native = install_native_extensions()
    setup()
    count = instrument_kproto()
    print(
        f"INFO: harness {name}: {count} kproto Python functions instrumented; native coverage for "
        f"{len(native)} extension(s){': ' + ', '.join(native) if native else ' (run fuzz/build_native.py)'}",
        file=sys.stderr,
        flush=True,
    )
    atheris.Setup([sys.argv[0]] + args, one_input)
    atheris.Fuzz()
