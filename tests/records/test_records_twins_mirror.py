"""Each compiled record core module and its pure-Python twin can be read side by side: the public functions
and classes a pair shares stand in the same order in both sources, and each twin's own public names are
only the few listed here, each for a stated reason."""

from __future__ import annotations

import importlib
import os
import re

import pytest

from kproto._backend import RECORD_MODULES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Public names only one twin of a pair has, per pair (compiled module: (compiled only, pure only)).
#: Checksums: the compiled twin exposes its CRC-32 route and says whether the CPU's CRC-32C instruction is
#: used, for the tests that compare routes (the pure twin calls zlib.crc32 and the crc32c package
#: directly); the pure twin has the byte-wise CRC-32C that serves when the crc32c package is not installed.
#: Message sets: the lazy sequence the compiled ``decode`` returns (the pure ``decode`` returns a list).
#: Record batches: the pure record section encoder and the table warm-up the tests and fuzz oracles call.
OWN_NAMES = {
    "kproto._fast._checksums": ({"crc32", "crc32c_hardware"}, {"crc32c_table"}),
    "kproto._fast._legacy_records": ({"LazyMessages"}, set()),
    "kproto._fast._default_records": (set(), {"encode_batch_records", "build_tables"}),
}

_PUBLIC = re.compile(r"^(?:def|class|cdef class) ([A-Za-z]\w*)", re.MULTILINE)
PAIRS = [pytest.param(compiled, pure, id=pure.rsplit(".", 1)[1]) for compiled, pure in RECORD_MODULES]


def _source(module: str, ext: str) -> str:
    return os.path.join(ROOT, *module.split(".")) + ext


def _public_names(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return _PUBLIC.findall(f.read())


def test_every_pair_is_listed():
    assert sorted(OWN_NAMES) == sorted(compiled for compiled, _ in RECORD_MODULES)


@pytest.mark.parametrize("compiled_name,pure_name", PAIRS)
def test_shared_names_stand_in_the_same_order(compiled_name, pure_name):
    compiled_only, pure_only = OWN_NAMES[compiled_name]
    compiled = _public_names(_source(compiled_name, ".pyx"))
    pure = _public_names(_source(pure_name, ".py"))
    assert set(compiled) - set(pure) == compiled_only
    assert set(pure) - set(compiled) == pure_only
    assert [n for n in compiled if n not in compiled_only] == [n for n in pure if n not in pure_only]


@pytest.mark.parametrize("compiled_name,pure_name", PAIRS)
def test_the_modules_export_what_their_sources_define(compiled_name, pure_name):
    compiled_only, pure_only = OWN_NAMES[compiled_name]
    shared = [n for n in _public_names(_source(pure_name, ".py")) if n not in pure_only]
    assert sorted(importlib.import_module(pure_name).__all__) == sorted(shared)
    fast = pytest.importorskip(compiled_name, reason="compiled extension not built")
    assert sorted(fast.__all__) == sorted(shared)
    for name in _public_names(_source(compiled_name, ".pyx")):
        assert callable(getattr(fast, name)), name
