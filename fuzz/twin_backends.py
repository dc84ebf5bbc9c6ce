"""Both implementations of kproto's compiled modules in one process: the Cython build and its pure twin.

The generated codecs have two targets, two modules each: ``kproto._compiled.<api>`` (the hot APIs, when
built) and ``kproto._generated.<api>`` (pure Python); the registry imports one (see
:func:`kproto._backend.load_codecs`).  ``kproto.message_base``, ``kproto.framing`` and ``kproto.wire`` are
compiled from the very ``.py`` files that sit next to the extensions (see :mod:`kproto.source_first`).
:func:`load_pure_codecs` imports the pure family (those ``.py`` twins, the pure codec targets, and the
registry, ``apis`` and ``messages`` bound to them) into a private module table, and hands back the pure
``framing``/``apis``/``messages`` modules; ``sys.modules`` is put back exactly as it was, so the rest of
the process keeps using the compiled build.  ``kproto.errors`` and
``kproto.records.*`` are shared, so error classes and record sets compare equal across twins (``RecordSet``
is compiled too, and the pure decoders build the compiled class through its constructor).

For message sets the two backends are ordinary modules already: the compiled and the pure record core
(:func:`kproto._backend.records_module`); :func:`records_codecs` binds one :class:`MessageSetCodec` to each.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType, SimpleNamespace
from typing import Dict, Optional

_COMPILED_PREFIXES = ("kproto._generated", "kproto.message_base", "kproto.framing", "kproto.wire")
# Modules that are pure Python themselves but bind names from the compiled ones at import time.
_DEPENDENTS = ("kproto.apis", "kproto.messages")

_pure: Optional[SimpleNamespace] = None


def _is_compiled_family(name: str) -> bool:
    return name.startswith(_COMPILED_PREFIXES) or name in _DEPENDENTS


def compiled_codecs() -> SimpleNamespace:
    """The codec modules as the process normally imports them (compiled when built)."""
    framing = importlib.import_module("kproto.framing")
    return SimpleNamespace(
        name="compiled" if is_compiled(framing) else "python",
        framing=framing,
        apis=importlib.import_module("kproto.apis"),
        messages=importlib.import_module("kproto.messages"),
    )


def is_compiled(module: ModuleType) -> bool:
    return not (getattr(module, "__file__", "") or "").endswith(".py")


def load_pure_codecs() -> SimpleNamespace:
    """The pure-Python twins of the codec modules (loaded once, then cached)."""
    global _pure
    if _pure is not None:
        return _pure
    compiled_codecs()  # make sure the compiled family is imported first, so we can put it back
    from kproto.source_first import install, _SourceFirst

    saved: Dict[str, ModuleType] = {n: m for n, m in sys.modules.items() if _is_compiled_family(n)}
    for name in saved:
        del sys.modules[name]
    finders_before = list(sys.meta_path)
    install()
    backend = importlib.import_module("kproto._backend")
    forced_before, backend.FORCED_PURE = backend.FORCED_PURE, True  # the registry takes the pure targets
    try:
        framing = importlib.import_module("kproto.framing")
        apis = importlib.import_module("kproto.apis")
        messages = importlib.import_module("kproto.messages")
        twins = {n: m for n, m in sys.modules.items() if _is_compiled_family(n)}
    finally:
        backend.FORCED_PURE = forced_before
        sys.meta_path[:] = [f for f in finders_before]
        assert not any(isinstance(f, _SourceFirst) for f in sys.meta_path) or any(
            isinstance(f, _SourceFirst) for f in finders_before
        )
        for name in [n for n in sys.modules if _is_compiled_family(n)]:
            del sys.modules[name]
        sys.modules.update(saved)
        # parent packages cache submodules as attributes: point them back at the compiled ones
        for name, module in saved.items():
            parent, _, leaf = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], leaf, module)
    for name, module in twins.items():
        if name.startswith(_COMPILED_PREFIXES) and not name.endswith("__init__") and name != "kproto._generated":
            if not (getattr(module, "__file__", "") or "").endswith(".py"):
                raise RuntimeError(f"pure twin of {name} came from {module.__file__}")
    _pure = SimpleNamespace(name="python", framing=framing, apis=apis, messages=messages, modules=twins)
    return _pure


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
