"""The compiled record core and its pure-Python twin can be read side by side: the public functions and
classes they share stand in the same order in both sources, and each twin's own public names are only the
few listed here, each for a stated reason."""

from __future__ import annotations

import os
import re

import pytest

from kproto.records import _pure

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPILED_SOURCE = os.path.join(ROOT, "kproto", "_fast", "_records.pyx")
PURE_SOURCE = os.path.join(ROOT, "kproto", "records", "_pure.py")

#: Public only in the compiled source: its CRC routes exposed for the tests that compare them with zlib and
#: the crc32c package (the pure twin calls those directly), and the lazy sequence its ``decode`` returns
#: (the pure ``decode`` returns a list).
COMPILED_ONLY = {"crc32", "crc32c_hardware", "LazyMessages"}
#: Public only in the pure source: the record section encoder and the table warm-up the tests and the fuzz
#: oracles call, and the byte-wise CRC-32C that serves when the crc32c package is not installed.
PURE_ONLY = {"encode_batch_records", "build_tables", "crc32c_table"}

_PUBLIC = re.compile(r"^(?:def|class|cdef class) ([A-Za-z]\w*)", re.MULTILINE)


def _public_names(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return _PUBLIC.findall(f.read())


def test_shared_names_stand_in_the_same_order():
    compiled, pure = _public_names(COMPILED_SOURCE), _public_names(PURE_SOURCE)
    assert set(compiled) - set(pure) == COMPILED_ONLY
    assert set(pure) - set(compiled) == PURE_ONLY
    assert [n for n in compiled if n not in COMPILED_ONLY] == [n for n in pure if n not in PURE_ONLY]


def test_the_modules_export_what_their_sources_define():
    shared = [n for n in _public_names(PURE_SOURCE) if n not in PURE_ONLY]
    assert sorted(_pure.__all__) == sorted(shared)
    fast = pytest.importorskip("kproto._fast._records", reason="compiled extension not built")
    for name in _public_names(COMPILED_SOURCE):
        assert callable(getattr(fast, name)), name
