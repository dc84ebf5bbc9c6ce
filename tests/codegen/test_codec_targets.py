"""The codec generator's two targets: the committed pure one has no compiled branch, the compiled one
(written at build time) has no pure branch, and the registry imports exactly one of them per module."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kproto.codegen import generate_all, generate_compiled
from kproto.codegen.targets import COMPILED_MODULES, drop_unused, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def pure_files():
    return {name: text for name, text in generate_all().items() if name.endswith(".py")}


@pytest.fixture(scope="module")
def compiled_files():
    return generate_compiled()


def test_pure_target_is_plain_python(pure_files):
    for name, text in pure_files.items():
        assert "cython" not in text, f"{name} names cython"
        compile(text, name, "exec")


def test_compiled_target_keeps_only_its_guard(compiled_files):
    modules = sorted(name[:-3] for name in compiled_files if name.endswith(".py") and name != "__init__.py")
    assert modules == sorted(COMPILED_MODULES)
    for name, text in compiled_files.items():
        if name.endswith(".py") and name != "__init__.py":
            assert text.count("cython.compiled") == 1 and "if not cython.compiled:\n    raise ImportError" in text
            assert "_new = Struct.__new__" not in text  # a pure-only helper
            compile(text, name, "exec")


def _fold(source: str, compiled: bool) -> str:
    return "\n".join(resolve(source.strip("\n").split("\n"), compiled))


CHAIN = """
if pos < end and buf[pos] < 128:
    n = buf[pos]
elif cython.compiled:
    n = c_read()
    if cython.compiled or n:
        a = 1
elif two_bytes:
    n = two()
else:
    n = slow()
x = 1
"""


def test_resolve_drops_the_other_targets_arms():
    assert _fold(CHAIN, compiled=True) == (
        "if pos < end and buf[pos] < 128:\n    n = buf[pos]\nelse:\n    n = c_read()\n    a = 1\nx = 1"
    )
    assert _fold(CHAIN, compiled=False) == (
        "if pos < end and buf[pos] < 128:\n    n = buf[pos]\nelif two_bytes:\n    n = two()\n"
        "else:\n    n = slow()\nx = 1"
    )


def test_resolve_unwraps_a_leading_test():
    source = "if cython.compiled:\n    a = c()\nelse:\n    a = p()\n    b = 2\nif not cython.compiled:\n    c = 3"
    assert _fold(source, compiled=True) == "a = c()"
    assert _fold(source, compiled=False) == "a = p()\nb = 2\nc = 3"


def test_drop_unused_keeps_what_is_called():
    head = ["from m import A, B, C", "_S_x = 1", "_S_y = 2"]
    body = ["def _dec_root(b):", "    return _dec_used(b) + _S_x", "", "", "def _dec_used(b):", "    return A", "", ""]
    body += ["def _dec_dead(b):", "    return B + _S_y"]
    new_head, new_body = drop_unused(head, body, ["_dec_root"])
    assert new_head == ["from m import A", "_S_x = 1"]
    assert "def _dec_dead(b):" not in new_body and "def _dec_used(b):" in new_body


def test_every_class_builds_without_its_constructor():
    """A decoder (or an interpreter over field tables) builds a message with ``cls.__new__(cls)`` and sets
    the fields, named as the schema's snake_case names, as attributes; nested classes hang off their parent."""
    import kproto.messages as km
    from kproto.message_base import Struct

    for name in km.__all__:
        cls = getattr(km, name)
        if not (isinstance(cls, type) and issubclass(cls, Struct)):
            continue
        obj, default = cls.__new__(cls), cls()
        for info in cls.FIELDS:
            setattr(obj, info.name, getattr(default, info.name))
        if hasattr(default, "unknown_tagged_fields"):
            obj.unknown_tagged_fields = []
        assert obj == default, name
    assert km.FetchRequest.FetchTopic.FetchPartition().partition == 0


def _loaded(env_pure: bool) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("KPROTO_PURE", None)
    if env_pure:
        env["KPROTO_PURE"] = "1"
    code = (
        "import sys, kproto.messages as km; "
        "print(km.FetchRequest.__module__, km.CreateTopicsRequest.__module__, "
        "sorted({m.split('.')[1] for m in sys.modules if m.startswith(('kproto._compiled.', 'kproto._generated.'))"
        " and m.split('.')[2] == 'fetch'}))"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_pure_path_never_imports_the_compiled_target():
    assert _loaded(env_pure=True).split() == [
        "kproto._generated.fetch",
        "kproto._generated.create_topics",
        "['_generated']",
    ]


@pytest.mark.compiled_only
def test_compiled_path_imports_only_the_compiled_hot_modules():
    assert _loaded(env_pure=False).split() == [
        "kproto._compiled.fetch",
        "kproto._generated.create_topics",
        "['_compiled']",
    ]
