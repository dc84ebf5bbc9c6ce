"""The one switch between kproto's Cython extensions and their pure-Python twins.

``BACKEND`` is ``"cython"`` when the compiled modules load and ``"python"`` otherwise.  The fallback is
never silent: it emits :class:`FastPathUnavailableWarning` once, at first import.  Two environment
variables steer the choice:

* ``KPROTO_PURE=1`` uses the pure-Python twins even when the extension is built (no warning: it was asked for);
* ``KPROTO_REQUIRE_FAST=1`` turns a missing or broken extension into :class:`FastPathMissingError`
  (CI and wheel builds use it so a broken build cannot pass unnoticed).

``records_impl`` is the module implementing message sets: ``kproto._fast._records`` or
``kproto.records._pure``; both expose ``Message``, ``decode``, ``decode_columns`` and ``encode_plain``.
``batch_builder_impl`` encodes magic 2 batches from columns: ``kproto._fast._batch_builder`` or
``kproto.records.batch_builder`` (``check_columns``, ``section``, ``encode_columns``), by the same choice.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import Optional

from kproto.errors import KprotoError

__all__ = [
    "BACKEND",
    "FORCED_PURE",
    "FastPathMissingError",
    "FastPathUnavailableWarning",
    "batch_builder_impl",
    "load_codecs",
    "records_impl",
]


class FastPathUnavailableWarning(RuntimeWarning):
    """The Cython extension could not be imported; kproto runs on its (slower) pure-Python twins."""


class FastPathMissingError(KprotoError, ImportError):
    """``KPROTO_REQUIRE_FAST=1`` was set but the Cython extension could not be imported."""


FORCED_PURE = os.environ.get("KPROTO_PURE") == "1"
_REQUIRE_FAST = os.environ.get("KPROTO_REQUIRE_FAST") == "1"
_FAST_RECORDS = "kproto._fast._records"
_PURE_RECORDS = "kproto.records._pure"
_FAST_BATCH_BUILDER = "kproto._fast._batch_builder"
_PURE_BATCH_BUILDER = "kproto.records.batch_builder"


def _load_fast(name: str = _FAST_RECORDS) -> Optional[ModuleType]:
    if FORCED_PURE:
        return None
    try:
        return importlib.import_module(name)
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


_fast = _load_fast()
records_impl: ModuleType = _fast if _fast is not None else importlib.import_module(_PURE_RECORDS)
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
