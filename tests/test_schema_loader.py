"""The spec loader rejects bad specs naming file and field; the generated modules are what the specs make."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from kproto.codegen import generate_all, generated_dir
from kproto.schema import SpecError, Versions, load_specs, snake_case
from kproto.schema.loader import default_spec_dir


def test_generated_modules_are_fresh():
    """Fails when a spec changed without `python -m kproto.codegen` (or generated code was edited by hand)."""
    files = generate_all()
    out = generated_dir()
    for name, text in files.items():
        with open(os.path.join(out, name), encoding="utf-8") as handle:
            assert handle.read() == text, f"kproto/_generated/{name} is stale: run python -m kproto.codegen"
    on_disk = {n for n in os.listdir(out) if n.endswith((".py", ".pxd", ".pyi"))}
    assert on_disk == {name for name in files if not os.path.dirname(name)}  # the rest sit in other packages


def test_every_api_of_the_09_era_keeps_its_versions():
    specs = load_specs()
    era = {
        0: (0, 1),
        1: (0, 1),
        2: (0, 0),
        3: (0, 0),
        4: (0, 0),
        5: (0, 0),
        6: (0, 1),
        7: (0, 1),
        8: (0, 2),
        9: (0, 1),
        10: (0, 0),
        11: (0, 0),
        12: (0, 0),
        13: (0, 0),
        14: (0, 0),
        15: (0, 0),
        16: (0, 0),
    }
    for key, (lo, hi) in era.items():
        versions = specs.apis[key].request.valid_versions
        assert versions.lo == lo and versions.hi >= hi
        assert all(specs.apis[key].request.flexible_in(v) is False for v in range(lo, hi + 1))
    assert sorted(specs.apis) == list(range(len(specs.apis)))
    assert [e.code for e in specs.errors][:33] == list(range(-1, 32))


@pytest.mark.parametrize("text,lo,hi", [("0", 0, 0), ("0-2", 0, 2), ("1+", 1, None)])
def test_version_ranges_parse(text, lo, hi):
    v = Versions.parse(text)
    assert (v.lo, v.hi) == (lo, hi)
    assert Versions.parse("none").empty


@pytest.mark.parametrize("bad", ["", "x", "2-1", "-1", "1-", "+1", "1.5"])
def test_bad_version_ranges_are_rejected(bad):
    with pytest.raises(ValueError):
        Versions.parse(bad)


def test_snake_case():
    assert snake_case("PartitionIndex") == "partition_index"
    assert snake_case("TimeoutMs") == "timeout_ms"
    assert snake_case("IsrNodes") == "isr_nodes"


def _api(fields, **request):
    return {
        "kind": "api",
        "apiKey": 0,
        "name": "Demo",
        "request": dict({"validVersions": "0-1", "fields": fields}, **request),
        "response": {"validVersions": "0-1", "fields": []},
    }


def _load_one(tmp_path, doc, name="Demo.json"):
    d = tmp_path / "specs"
    d.mkdir(exist_ok=True)
    (d / name).write_text(json.dumps(doc))
    return load_specs(str(d))


BAD_SPECS = [
    ("unknown type", [{"name": "A", "type": "int128", "versions": "0+"}], {}),
    ("bad version range", [{"name": "A", "type": "int32", "versions": "1-0"}], {}),
    ("outside the enclosing versions", [{"name": "A", "type": "int32", "versions": "0-5"}], {}),
    (
        "duplicate field name",
        [{"name": "A", "type": "int32", "versions": "0+"}, {"name": "A", "type": "int16", "versions": "1"}],
        {},
    ),
    ("cannot be nullable", [{"name": "A", "type": "int32", "versions": "0+", "nullableVersions": "0+"}], {}),
    (
        "nullableVersions 0-1 outside versions 1",
        [{"name": "A", "type": "string", "versions": "1", "nullableVersions": "0+"}],
        {},
    ),
    ("unknown key(s) Bogus", [{"name": "A", "type": "int32", "versions": "0+", "Bogus": 1}], {}),
    ("does not fit int8", [{"name": "A", "type": "int8", "versions": "0+", "default": "300"}], {}),
    ("overlap", [], {"headerVersions": {"0+": 1, "1": 0}}),
    ("no header version", [], {"headerVersions": {"0": 1}}),
    (
        "duplicate struct name",
        [
            {"name": "A", "type": "[]S", "versions": "0+", "fields": []},
            {"name": "B", "type": "[]S", "versions": "0+", "fields": [{"name": "C", "type": "int8", "versions": "0+"}]},
        ],
        {},
    ),
    ("PascalCase", [{"name": "lower", "type": "int32", "versions": "0+"}], {}),
    (
        "'tag' and 'taggedVersions' go together",
        [{"name": "A", "type": "int32", "versions": "1+", "tag": 0}],
        {"flexibleVersions": "1+"},
    ),
    (
        "outside the flexible versions",
        [{"name": "A", "type": "int32", "versions": "0+", "tag": 0, "taggedVersions": "0+"}],
        {"flexibleVersions": "1+"},
    ),
    (
        "tag 0 also used by 'A'",
        [
            {"name": "A", "type": "int32", "versions": "1+", "tag": 0, "taggedVersions": "1+"},
            {"name": "B", "type": "int32", "versions": "1+", "tag": 0, "taggedVersions": "1+"},
        ],
        {"flexibleVersions": "1+"},
    ),
    (
        "only applies to string and bytes",
        [{"name": "A", "type": "int32", "versions": "0+", "flexibleVersions": "none"}],
        {},
    ),
    ("labels string fields", [{"name": "A", "type": "int32", "versions": "0+", "entityType": "topicName"}], {}),
    ("unknown entityType", [{"name": "A", "type": "int32", "versions": "0+", "entityType": "color"}], {}),
]


@pytest.mark.parametrize("message,fields,extra", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_specs_are_rejected_with_file_and_field(tmp_path, message, fields, extra):
    with pytest.raises(SpecError) as info:
        _load_one(tmp_path, _api(fields, **extra))
    text = str(info.value)
    assert text.startswith("Demo.json: ")
    assert message in text
    if fields:
        assert "request." in text


def test_duplicate_api_keys_across_files_are_rejected(tmp_path):
    _load_one(tmp_path, _api([]), "A.json")
    doc = _api([])
    doc["name"] = "Other"
    with pytest.raises(SpecError, match="api key 0 also defined in A.json"):
        _load_one(tmp_path, doc, "B.json")


def test_comment_lines_are_allowed_and_the_real_specs_load(tmp_path):
    d = tmp_path / "specs"
    shutil.copytree(default_spec_dir(), d)
    text = (d / "Produce.json").read_text()
    (d / "Produce.json").write_text("// a comment\n   // another\n" + text)
    assert load_specs(str(d)).apis[0].name == "Produce"


BAD_PROVENANCE = [
    ("versions 2 outside the enclosing versions", {"request": {"versionNotes": {"2": "a note"}}}),
    ("version 1 has two notes", {"request": {"versionNotes": {"0-1": "a", "1": "b"}}}),
    ("must be non-empty text", {"request": {"versionNotes": {"1": " "}}}),
    ("must be an object mapping", {"request": {"versionNotes": ["1"]}}),
    ("is not a release like", {"upstream": {"release": "4.1", "commit": "a9ce3221537b8653"}}),
    ("is not a lowercase hex commit id", {"upstream": {"release": "4.1.0", "commit": "HEAD"}}),
    ("unknown key(s) tag", {"upstream": {"release": "4.1.0", "commit": "a9ce3221537b8653", "tag": "x"}}),
    ("upstream: missing key 'commit'", {"upstream": {"release": "4.1.0"}}),
]


@pytest.mark.parametrize("message,change", BAD_PROVENANCE, ids=[b[0] for b in BAD_PROVENANCE])
def test_bad_upstream_and_version_notes_are_rejected(tmp_path, message, change):
    doc = _api([])
    for key, value in change.items():
        if key == "request":
            doc["request"].update(value)
        else:
            doc[key] = value
    with pytest.raises(SpecError) as info:
        _load_one(tmp_path, doc)
    assert str(info.value).startswith("Demo.json: ") and message in str(info.value)


def test_upstream_and_version_notes_load():
    specs = load_specs()
    produce = specs.apis[0]
    assert produce.upstream is not None and produce.upstream.files == ("ProduceRequest.json", "ProduceResponse.json")
    assert "KIP-110" in produce.request.version_notes[7]
    assert specs.headers["RequestHeader"].upstream is not None


def test_upstream_and_version_notes_of_a_demo_spec(tmp_path):
    doc = _api([], versionNotes={"0-1": "same layout"})
    doc["upstream"] = {"release": "4.3.0", "commit": "a9ce3221537b8653", "files": ["DemoRequest.json"]}
    api = _load_one(tmp_path, doc).apis[0]
    assert api.request.version_notes == {0: "same layout", 1: "same layout"}
    assert (api.upstream.release, api.upstream.commit, api.upstream.files) == (
        "4.3.0",
        "a9ce3221537b8653",
        ("DemoRequest.json",),
    )
    assert api.response.version_notes == {} and api.response.upstream is None
