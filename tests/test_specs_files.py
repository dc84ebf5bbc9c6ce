"""Sanity checks on the raw schema files in ``specs/``.

Pure JSON: nothing from ``kproto`` is imported, so these tests still run (and point at the
broken file) when the schema loader or the generated code is broken.
"""
import json
import pathlib
import re

import pytest

SPECS = pathlib.Path(__file__).resolve().parent.parent / "specs"

# protocol.md §8 item 4 (versions by 0.9.0), by api key.
EXPECTED_VERSIONS = {
    0: ("Produce", "0-1"),
    1: ("Fetch", "0-1"),
    2: ("ListOffsets", "0"),  # "Offsets" in 0.8/0.9
    3: ("Metadata", "0"),
    4: ("LeaderAndIsr", "0"),
    5: ("StopReplica", "0"),
    6: ("UpdateMetadata", "0-1"),
    7: ("ControlledShutdown", "0-1"),
    8: ("OffsetCommit", "0-2"),
    9: ("OffsetFetch", "0-1"),
    10: ("GroupCoordinator", "0"),
    11: ("JoinGroup", "0"),
    12: ("Heartbeat", "0"),
    13: ("LeaveGroup", "0"),
    14: ("SyncGroup", "0"),
    15: ("DescribeGroups", "0"),
    16: ("ListGroups", "0"),
}

PRIMITIVES = {"int8", "int16", "int32", "int64", "bool", "string", "bytes", "records"}
NULLABLE = {"string", "bytes", "records"}
RANGE = re.compile(r"^(none|\d+|\d+-\d+|\d+\+)$")


def load(path):
    text = "\n".join(
        line for line in path.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("//")
    )
    return json.loads(text)


def spec_files():
    return sorted(SPECS.glob("*.json"))


def api_specs():
    out = []
    for path in spec_files():
        doc = load(path)
        if doc.get("kind") == "api":
            out.append((path, doc))
    return out


def to_set(rng, top):
    """Versions named by a range string, with ``N+`` running up to ``top``."""
    if rng == "none":
        return set()
    if rng.endswith("+"):
        return set(range(int(rng[:-1]), top + 1))
    if "-" in rng:
        lo, hi = rng.split("-")
        return set(range(int(lo), int(hi) + 1))
    return {int(rng)}


def walk(fields, path=()):
    for field in fields:
        yield path + (field["name"],), field
        yield from walk(field.get("fields", []), path + (field["name"],))


@pytest.mark.parametrize("path", spec_files(), ids=lambda p: p.name)
def test_parses(path):
    doc = load(path)
    assert isinstance(doc, dict)
    assert doc["kind"] in {"api", "header", "data", "errors"}


def test_every_api_key_once():
    keys = [doc["apiKey"] for _, doc in api_specs()]
    assert sorted(keys) == list(range(17)), keys


def test_file_name_is_api_name():
    for path, doc in api_specs():
        assert path.stem == doc["name"]


@pytest.mark.parametrize("key", sorted(EXPECTED_VERSIONS))
def test_valid_versions_match_protocol_md(key):
    name, versions = EXPECTED_VERSIONS[key]
    matches = [doc for _, doc in api_specs() if doc["apiKey"] == key]
    assert len(matches) == 1
    doc = matches[0]
    assert doc["name"] == name
    assert doc["request"]["validVersions"] == versions
    assert doc["response"]["validVersions"] == versions
    assert doc["request"]["flexibleVersions"] == "none"
    assert doc["response"]["flexibleVersions"] == "none"


def _sections():
    for path in spec_files():
        doc = load(path)
        if doc["kind"] == "api":
            yield path.name + ":request", doc["request"]
            yield path.name + ":response", doc["response"]
        elif doc["kind"] in {"header", "data"}:
            yield path.name, doc


@pytest.mark.parametrize("label,section", list(_sections()), ids=lambda x: x if isinstance(x, str) else "")
def test_fields_are_well_formed(label, section):
    top = max(to_set(section["validVersions"], 99))
    valid = to_set(section["validVersions"], top)
    for fields in [section["fields"]] + [f.get("fields", []) for _, f in walk(section["fields"])]:
        names = [f["name"] for f in fields]
        assert len(names) == len(set(names)), (label, names)
    for fpath, field in walk(section["fields"]):
        where = (label, ".".join(fpath))
        assert re.match(r"^[A-Z][A-Za-z0-9]*$", field["name"]), where
        assert RANGE.match(field["versions"]), where
        versions = to_set(field["versions"], top)
        assert versions and versions <= valid, where
        ftype = field["type"]
        if ftype.startswith("[]"):
            inner = ftype[2:]
            assert (inner in PRIMITIVES) == ("fields" not in field), where
        else:
            assert ftype in PRIMITIVES and "fields" not in field, where
        if "nullableVersions" in field:
            assert ftype in NULLABLE, where
            assert to_set(field["nullableVersions"], top) <= versions, where


def test_error_codes():
    doc = load(SPECS / "ErrorCodes.json")
    assert doc["kind"] == "errors"
    codes = [c["code"] for c in doc["codes"]]
    assert codes == list(range(-1, 32))
    names = [c["name"] for c in doc["codes"]]
    assert len(names) == len(set(names))
    for entry in doc["codes"]:
        assert entry["name"] not in entry.get("oldNames", []), entry["code"]
        assert entry.get("modernName") != entry["name"], entry["code"]
        assert isinstance(entry["retriable"], bool), entry["code"]
        for name in entry.get("contexts", {}).values():
            assert name == entry["name"] or name in entry.get("oldNames", []), entry["code"]
    by_code = {c["code"]: c for c in doc["codes"]}
    assert by_code[13]["contexts"] == {"LeaderAndIsrResponse": "STALE_LEADER_EPOCH"}


def test_error_code_contexts_exist():
    """Every errorCodeContext used by a field is a context that ErrorCodes.json defines."""
    contexts = set()
    for entry in load(SPECS / "ErrorCodes.json")["codes"]:
        contexts.update(entry.get("contexts", {}))
    for label, section in _sections():
        for fpath, field in walk(section["fields"]):
            if "errorCodeContext" in field:
                assert field["errorCodeContext"] in contexts, (label, fpath)
