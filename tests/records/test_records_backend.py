"""The backend switch: KPROTO_PURE, KPROTO_REQUIRE_FAST, and the warning on a silent-looking fallback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BLOCK_EXTENSION = """
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("kproto._fast._"):
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
"""


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("KPROTO_PURE", "KPROTO_REQUIRE_FAST")}
    environ.update(env)
    environ["PYTHONPATH"] = ROOT
    return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, cwd=ROOT)


def test_pure_forced():
    result = run(
        "import kproto._backend as b, kproto.records as r; print(b.BACKEND, r.LegacyRecord.__module__)", KPROTO_PURE="1"
    )
    assert result.stdout.split() == ["python", "kproto.records.legacy_records"], result.stderr
    assert "Warning" not in result.stderr


def test_fallback_warns_once():
    code = BLOCK_EXTENSION + (
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    import kproto.records as r; import kproto._backend as b; import kproto.records.codec\n"
        "print(b.BACKEND, [w.category.__name__ for w in seen])\n"
    )
    result = run(code)
    assert result.stdout.strip() == "python ['FastPathUnavailableWarning']", result.stderr


def test_require_fast_makes_missing_extension_an_error():
    code = BLOCK_EXTENSION + (
        "from kproto.errors import KprotoError\n"
        "try:\n    import kproto._backend\nexcept ImportError as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, KprotoError))\n"
    )
    result = run(code, KPROTO_REQUIRE_FAST="1")
    assert result.stdout.strip() == "FastPathMissingError True", result.stderr


def test_warning_is_a_runtime_warning():
    from kproto._backend import FastPathUnavailableWarning

    assert issubclass(FastPathUnavailableWarning, RuntimeWarning)


def test_default_uses_cython_when_built():
    result = run("import kproto._backend as b; print(b.BACKEND)")
    assert result.stdout.strip() == "cython", result.stderr


def test_the_former_name_of_the_magic_0_1_record_warns():
    import kproto.records as r

    with pytest.warns(DeprecationWarning, match="LegacyRecord"):
        assert r.Message is r.LegacyRecord
    assert "Message" not in r.__all__ and "LegacyRecord" in r.__all__
