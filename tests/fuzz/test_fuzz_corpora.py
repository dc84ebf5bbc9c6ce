"""Replay every committed fuzz corpus (``fuzz/corpus/<harness>/``) through its harness's oracles.

Fast (no fuzzing, no atheris needed): each input runs once through ``one_input`` of ``fuzz/fuzz_<harness>.py``,
which checks that only kproto's errors escape, that decode/encode round trips hold, that the Cython and
pure-Python twins agree, and the per-input memory and CPU budgets (``fuzz/oracles.py``).  Under
``KPROTO_PURE=1`` the "compiled" side is the pure code too, so the twin comparison is trivial there but
every other oracle still runs.  Longer fuzzing: ``python fuzz/run_all.py``.
"""

from __future__ import annotations

import importlib
import os
import sys
import tracemalloc

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

HARNESSES = [
    "request_frames",
    "response_frames",
    "message_sets",
    "capture_files",
    "tcp_reassembly",
    "hex_input",
    "broker_requests",
]


def _cases():
    for name in HARNESSES:
        d = os.path.join(ROOT, "fuzz", "corpus", name)
        for entry in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            yield pytest.param(name, os.path.join(d, entry), id=f"{name}/{entry}")


@pytest.fixture(scope="module", autouse=True)
def _stop_tracemalloc():
    """The budget oracle starts tracemalloc; do not leave it slowing down the rest of the suite."""
    was = tracemalloc.is_tracing()
    yield
    if not was and tracemalloc.is_tracing():
        tracemalloc.stop()


_loaded = {}


def harness(name: str):
    if name not in _loaded:
        module = importlib.import_module(f"fuzz.fuzz_{name}")
        module.setup()
        _loaded[name] = module
    return _loaded[name]


def test_every_harness_has_a_corpus():
    for name in HARNESSES:
        d = os.path.join(ROOT, "fuzz", "corpus", name)
        assert os.path.isdir(d) and os.listdir(d), f"fuzz/corpus/{name} is empty: run python fuzz/make_seeds.py"


@pytest.mark.parametrize("name,path", list(_cases()))
def test_corpus_input_passes_oracles(name, path):
    with open(path, "rb") as f:
        data = f.read()
    harness(name).one_input(data)


@pytest.mark.compiled_only
def test_twins_really_differ_when_built():
    """The differential oracle is only meaningful when one side is compiled: check that it is, and that the
    other side runs nothing compiled."""
    from fuzz.twin_backends import frame_twins, is_compiled, records_modules

    compiled, pure = frame_twins()
    assert (compiled.name, pure.name) == ("compiled", "python")
    import kproto
    import kproto.messages as km

    frame = kproto.encode_request(km.ApiVersionsRequest(), 3, 7, "c")
    for twin in (compiled, pure):
        assert twin.run("fuzz.fuzz_request_frames", "twin_checks", b"\x01" + frame)[0][1][0] == "ok"
    loaded = compiled.run("fuzz.twin_backends", "loaded_extensions", b"")
    assert {"kproto._compiled.framing", "kproto._compiled.produce"} <= set(loaded), loaded
    assert pure.run("fuzz.twin_backends", "loaded_extensions", b"") == []
    from kproto._backend import RECORD_MODULES

    fast, slow = records_modules()
    assert fast is not None and slow is not None
    for compiled_name, pure_name in RECORD_MODULES:
        assert is_compiled(sys.modules[compiled_name]) and not is_compiled(sys.modules[pure_name])


def test_every_api_version_has_request_and_response_seeds():
    """The frame corpora grow with the protocol: a seed for each (api, version), request and response, that
    the harness reads as exactly that api and version."""
    import kproto
    from fuzz import fuzz_response_frames

    fuzz_response_frames.setup()
    missing = []
    for _, info in sorted(kproto.APIS.items()):
        for version in info.versions:
            for kind, cls in (("request_frames", info.request), ("response_frames", info.response)):
                path = os.path.join(ROOT, "fuzz", "corpus", kind, f"seed-{cls.__name__}_v{version}")
                if not os.path.exists(path):
                    missing.append(f"{kind}/seed-{cls.__name__}_v{version}")
                    continue
                data = open(path, "rb").read()
                if kind == "request_frames":
                    header, msg = kproto.decode_request(
                        data[1:] if data[0] & 1 else len(data[1:]).to_bytes(4, "big") + data[1:]
                    )
                    got = (header.api_key, header.api_version)
                else:
                    got = fuzz_response_frames.select(data)[:2]
                assert got == (info.api_key, version), f"{path} holds api {got[0]} v{got[1]}"
    assert not missing, f"{len(missing)} seeds missing (run python fuzz/make_seeds.py): {missing[:10]}"
