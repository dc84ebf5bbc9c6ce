"""The one switch between kproto's Cython extensions and their pure-Python twins.

``BACKEND`` is ``"cython"`` when the compiled modules load and ``"python"`` otherwise.  The fallback is
never silent: it emits :class:`FastPathUnavailableWarning` once, at first import.  Two environment
variables steer the choice:

* ``KPROTO_PURE=1`` uses the pure-Python twins even when the extension is built (no warning: it was asked for);
* ``KPROTO_REQUIRE_FAST=1`` turns a missing or broken extension into :class:`FastPathMissingError`
  (CI and wheel builds use it so a broken build cannot pass unnoticed).

``records_impl`` implements message sets and record batches: one module object holding the public names
(``__all__``) of the record core's twin modules of one backend (:data:`RECORD_MODULES`: checksums, magic
0/1 message sets, magic 2 record batches; :func:`records_module` builds it), compiled or pure.  Both expose
``LegacyRecord``, ``Record``, ``crc32c``, ``decode``, ``decode_columns``, ``encode_plain``, ``decode_records``,
``decode_record_columns``, ``record_rows`` and ``encode_batch``.
``batch_builder_impl`` encodes magic 2 batches from columns: ``kproto._fast._batch_builder`` or
``kproto.records.batch_builder`` (``check_columns``, ``section``, ``encode_columns``), by the same choice.

A few hand-written modules (``COMPILED_COPIES`` in ``setup.py``) are compiled by Cython from their own
source: the build copies ``kproto/wire.py`` to ``kproto/_compiled/wire.py`` (and its ``.pxd``) and compiles the copy.
The source module ends with :func:`adopt_compiled_copy`, which binds the copy's names in its place when
the copy is built and the pure path was not asked for; so ``KPROTO_PURE=1`` runs the source itself, no
import hook is needed, and no module is imported twice.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import warnings
from types import ModuleType
from typing import Any, Dict, Optional

from kproto.errors import KprotoError

__all__ = [
    "BACKEND",
    "FORCED_PURE",
    "FastPathMissingError",
    "FastPathUnavailableWarning",
    "RECORD_MODULES",
    "adopt_compiled_copy",
    "batch_builder_impl",
    "load_codecs",
    "records_impl",
    "records_module",
]


class FastPathUnavailableWarning(RuntimeWarning):
    """The Cython extension could not be imported; kproto runs on its (slower) pure-Python twins."""


class FastPathMissingError(KprotoError, ImportError):
    """``KPROTO_REQUIRE_FAST=1`` was set but the Cython extension could not be imported."""


FORCED_PURE = os.environ.get("KPROTO_PURE") == "1"
_REQUIRE_FAST = os.environ.get("KPROTO_REQUIRE_FAST") == "1"
#: The record core, a (compiled, pure) pair of twin modules per concern, lower modules first.
RECORD_MODULES = (
    ("kproto._fast._checksums", "kproto.records.checksums"),
    ("kproto._fast._legacy_records", "kproto.records.legacy_records"),
    ("kproto._fast._default_records", "kproto.records.default_records"),
)
_FAST_RECORDS = "kproto._fast"  # stands for the compiled modules of RECORD_MODULES
_FAST_BATCH_BUILDER = "kproto._fast._batch_builder"
_PURE_BATCH_BUILDER = "kproto.records.batch_builder"


def records_module(compiled: bool) -> ModuleType:
    """One module object with the public names of the record core's modules of one backend (``compiled``:
    the Cython ones, which raises :class:`ImportError` when they are not built; else the pure ones)."""
    names = [pair[0 if compiled else 1] for pair in RECORD_MODULES]
    combined = ModuleType(
        "kproto._fast[records]" if compiled else "kproto.records[pure]",
        "The record core's public names: " + ", ".join(names) + ".",
    )
    exported = []
    for name in names:
        module = importlib.import_module(name)
        for attr in module.__all__:
            setattr(combined, attr, getattr(module, attr))
        exported += module.__all__
    combined.__all__ = exported  # type: ignore[attr-defined]
    return combined


def _compiled_copy(module: str) -> Optional[ModuleType]:
    if FORCED_PURE or module.startswith("kproto._compiled."):
        return None
    name = "kproto._compiled." + module.rpartition(".")[2]
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:
        spec = None
    # Only the extension: the copied source, left over from a build whose compile failed, is no twin.
    if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            problem = f"{name} does not import: {exc}"
    else:
        problem = f"{name} is not built"
    if _REQUIRE_FAST:
        raise FastPathMissingError(f"KPROTO_REQUIRE_FAST=1 but {problem}")
    return None


def adopt_compiled_copy(namespace: Dict[str, Any]) -> bool:
    """Called last, with its ``globals()``, by each hand-written module the build also compiles: bind every name of its
    compiled copy (``kproto._compiled.<name>``) in the module's place when the copy is built and
    ``KPROTO_PURE`` is not 1, so that every user of the module runs the compiled code; the source's own
    definitions then serve nobody.  The functions and plain classes adopted say they belong to the module
    itself (``__module__``), so that what pickles them loads in either build.  True when the copy was
    adopted.  The compiled copy itself, which runs
    the same last line, adopts nothing."""
    copy = _compiled_copy(namespace["__name__"])
    if copy is None:
        return False
    for name, value in vars(copy).items():
        if name.startswith("__"):
            continue
        namespace[name] = value
        if getattr(value, "__module__", None) == copy.__name__:
            # Pickles name the source module, which both builds define (extension types keep theirs).
            try:
                value.__module__ = namespace["__name__"]
            except (AttributeError, TypeError):
                pass
    return True


def _load_fast(name: str) -> Optional[ModuleType]:
    if FORCED_PURE:
        return None
    try:
        return records_module(True) if name == _FAST_RECORDS else importlib.import_module(name)
    except ImportError as exc:
        if _REQUIRE_FAST:
            raise FastPathMissingError(f"KPROTO_REQUIRE_FAST=1 but {name} does not import: {exc}") from exc
        warnings.warn(
            f"kproto's Cython extension is unavailable ({exc}); using the pure-Python implementation, "
            "which is several times slower (install the `kproto[pure]` extra for the C CRC-32C, zstd and lz4 it "
            "calls). Build it with `python setup.py build_ext --inplace`, or set KPROTO_PURE=1 to choose the "
            "pure path explicitly.",
            FastPathUnavailableWarning,
            stacklevel=3,
        )
        return None


_fast = _load_fast(_FAST_RECORDS)
records_impl: ModuleType = _fast if _fast is not None else records_module(False)
BACKEND: str = "cython" if _fast is not None else "python"
_fast_builder = _load_fast(_FAST_BATCH_BUILDER) if _fast is not None else None
batch_builder_impl: ModuleType = (
    _fast_builder if _fast_builder is not None else importlib.import_module(_PURE_BATCH_BUILDER)
)


def load_codecs(module: str, compiled: bool) -> ModuleType:
    """The codecs of one generated module: its compiled target ``kproto._compiled.<module>`` when it has
    one (``compiled``), it is built and the pure path was not asked for; else its pure target
    ``kproto._generated.<module>``.  Only one of the two is ever imported."""
    if compiled and not FORCED_PURE:
        try:
            return importlib.import_module("kproto._compiled." + module)
        except ImportError as exc:
            if _REQUIRE_FAST:
                raise FastPathMissingError(
                    f"KPROTO_REQUIRE_FAST=1 but kproto._compiled.{module} does not import: {exc}"
                ) from exc
    return importlib.import_module("kproto._generated." + module)
