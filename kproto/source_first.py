"""``KPROTO_PURE=1``: import kproto's few hand-written compiled modules from their Python source instead.

``kproto.message_base``, ``kproto.wire``, ``kproto.framing`` and ``kproto.records.record_set`` are the
same ``.py`` files whether Cython compiled them or not; Python prefers an extension module over a source
file of the same name, so choosing the pure path needs an import hook.  The hook only ever returns source
that sits next to the extension, so both paths run exactly the same code text.  (The generated codecs
need no hook: their two targets are two modules, and :func:`kproto._backend.load_codecs` picks one.)
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import Optional, Sequence

__all__ = ["install", "PREFIXES"]

#: Modules that may be compiled; everything else in kproto is pure Python anyway.
PREFIXES = ("kproto.message_base", "kproto.framing", "kproto.wire", "kproto.records.record_set")


class _SourceFirst(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Optional[Sequence[str]], target: object = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if not name.startswith(PREFIXES) or path is None:
            return None
        leaf = name.rpartition(".")[2]
        for entry in path:
            candidate = os.path.join(entry, leaf + ".py")
            if os.path.isfile(candidate):
                return importlib.util.spec_from_file_location(name, candidate)
        return None


def install() -> None:
    """Put the source-first finder in front of the import system (idempotent)."""
    if not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst())
