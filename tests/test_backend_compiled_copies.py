"""The hand-written modules the build also compiles (``kproto/_compiled/<name>`` copies, adopted by their source
through ``kproto._backend.adopt_compiled_copy``): ``KPROTO_PURE=1`` runs none of them compiled, and needs
no import hook; the compiled build runs the copies, each module once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The modules setup.py compiles from a copy (its COMPILED_COPIES), by the name users import, with a name each
#: defines.
COPIED = {
    "kproto.message_base": "Message",
    "kproto.wire": "read_uvarint",
    "kproto.records.record_set": "RecordSet",
    "kproto.framing": "encode_request",
}

#: Imports the layers a program uses, runs a frame and a record batch through them, and reports the
#: kproto modules loaded from anything but Python source and the import finders kproto added.
REPORT = """
import json, sys
finders = list(sys.meta_path)
import kproto, kproto.messages as km, kproto.client, kproto.broker, kproto.capture, kproto.cli
from kproto.records import RecordSet, encode_record_batch
batch = RecordSet(encode_record_batch([(b"k", b"v")]))
partition = {"index": 0, "records": batch}
values = {"acks": 1, "timeout_ms": 10, "topic_data": [{"name": "t", "partition_data": [partition]}]}
msg = km.ProduceRequest.from_dict(values)
header, back = kproto.decode_request(kproto.encode_request(msg, 9, 7, "c"))
assert [r.value for r in back.topic_data[0].partition_data[0].records.records()] == [b"v"]
km.CreateTopicsRequest.decode(km.CreateTopicsRequest(topics=[]).encode(7), 7)
print(json.dumps({
    "compiled": sorted(n for n, m in sys.modules.items()
                       if n.startswith("kproto") and not (getattr(m, "__file__", None) or ".py").endswith(".py")),
    "new_finders": [type(f).__module__ for f in sys.meta_path if f not in finders],
    "from_copy": {n: getattr(sys.modules[n], attr)
                     is getattr(sys.modules.get("kproto._compiled." + n.rpartition(".")[2]), attr, None)
                  for n, attr in %r.items()},
}))
""" % (COPIED,)


def report(**env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("KPROTO_PURE", "KPROTO_REQUIRE_FAST")}
    environ.update(env, PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", REPORT], env=environ, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_pure_path_runs_only_python_source():
    seen = report(KPROTO_PURE="1")
    assert seen["compiled"] == []
    assert seen["new_finders"] == []
    assert seen["from_copy"] == {name: False for name in COPIED}


@pytest.mark.compiled_only
def test_compiled_build_adopts_each_copy_once():
    seen = report(KPROTO_REQUIRE_FAST="1")
    for name in COPIED:
        copy = "kproto._compiled." + name.rpartition(".")[2]
        assert copy in seen["compiled"], seen["compiled"]
        assert name not in seen["compiled"]  # the source module stays the .py that adopted the copy
    assert seen["from_copy"] == {name: True for name in COPIED}
    assert seen["new_finders"] == []


@pytest.mark.compiled_only
def test_one_class_per_base_across_both_codec_targets():
    """The compiled codecs and the pure target's codecs (the APIs without a compiled one) extend the same bases."""
    import kproto
    import kproto.message_base as base
    import kproto.messages as km
    from kproto._compiled import message_base as compiled_base
    from kproto.records.record_set import RecordSet

    assert base.Message is compiled_base.Message and kproto.Message is base.Message
    assert km.ProduceRequest.__module__ == "kproto._compiled.produce"
    assert km.CreateTopicsRequest.__module__ == "kproto._generated.create_topics"
    assert issubclass(km.ProduceRequest, base.Message) and issubclass(km.CreateTopicsRequest, base.Message)
    assert type(RecordSet(b"")).__module__ == "kproto._compiled.record_set"


def test_a_copy_that_is_not_built_is_an_error_only_when_required():
    code = (
        "from kproto._backend import adopt_compiled_copy\n"
        "space = {'__name__': 'kproto.no_such_module'}\n"
        "try:\n    print(adopt_compiled_copy(space), sorted(space))\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("KPROTO_PURE", "KPROTO_REQUIRE_FAST")}
    environ["PYTHONPATH"] = ROOT
    run = lambda **env: subprocess.run(  # noqa: E731
        [sys.executable, "-c", code], env=dict(environ, **env), capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    assert run() == "False ['__name__']"
    assert run(KPROTO_REQUIRE_FAST="1") == (
        "FastPathMissingError KPROTO_REQUIRE_FAST=1 but kproto._compiled.no_such_module is not built"
    )
    assert run(KPROTO_PURE="1") == "False ['__name__']"


def test_pickles_load_in_the_other_build():
    """A record set and a message pickled by one build load in the other: pickles name the source modules."""
    import pickle

    import kproto.messages as km
    from kproto.records import RecordSet

    msg = km.CreateTopicsRequest.from_dict({"topics": [{"name": "t", "num_partitions": 1}], "timeout_ms": 5})
    data = pickle.dumps((RecordSet(b"\x01\x02"), msg)).hex()
    code = (
        "import pickle, kproto.messages as km\n"
        f"rs, msg = pickle.loads(bytes.fromhex({data!r}))\n"
        "print(bytes(rs).hex(), msg.topics[0].name, type(msg) is km.CreateTopicsRequest)\n"
    )
    other = {"KPROTO_PURE": "1"} if os.environ.get("KPROTO_PURE") != "1" else {}
    environ = {k: v for k, v in os.environ.items() if k not in ("KPROTO_PURE", "KPROTO_REQUIRE_FAST")}
    environ.update(other, PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.split() == ["0102", "t", "True"], result.stderr
