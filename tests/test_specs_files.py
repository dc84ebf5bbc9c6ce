"""Sanity checks on the raw schema files in ``specs/``.

Pure JSON: nothing from ``kproto`` is imported, so these tests still run (and point at the
broken file) when the schema loader or the generated code is broken. The tables below restate
facts the files must keep: which api keys exist, their names, the version range of each up to the
pinned release (Kafka 4.1), the versions Kafka 4.0 removed, and what 0.8/0.9 already had. A change
to a range in a spec file has to be made here too, on purpose.
"""

import json
import pathlib
import re

import pytest

SPECS = pathlib.Path(__file__).resolve().parent.parent / "specs"

#: The highest api key of the pinned release (Kafka 4.1). Kafka assigned every key from 0 to it.
HIGHEST_API_KEY = 92

#: validVersions per api key, through Kafka 4.1 (including the versions 4.0 removed and the early-access
#: share-group v0 of 3.9 and 4.0).
VALID_VERSIONS = {
    0: "0-13",
    1: "0-18",
    2: "0-11",
    3: "0-13",
    4: "0-7",
    5: "0-4",
    6: "0-8",
    7: "0-3",
    8: "0-10",
    9: "0-10",
    10: "0-6",
    11: "0-9",
    12: "0-4",
    13: "0-5",
    14: "0-5",
    15: "0-6",
    16: "0-5",
    17: "0-1",
    18: "0-4",
    19: "0-7",
    20: "0-6",
    21: "0-2",
    22: "0-6",
    23: "0-4",
    24: "0-5",
    25: "0-4",
    26: "0-5",
    27: "0-2",
    28: "0-5",
    29: "0-3",
    30: "0-3",
    31: "0-3",
    32: "0-4",
    33: "0-2",
    34: "0-2",
    35: "0-5",
    36: "0-2",
    37: "0-3",
    38: "0-3",
    39: "0-2",
    40: "0-2",
    41: "0-3",
    42: "0-2",
    43: "0-2",
    44: "0-1",
    45: "0-1",
    46: "0",
    47: "0",
    48: "0-1",
    49: "0-1",
    50: "0",
    51: "0",
    52: "0-2",
    53: "0-1",
    54: "0-1",
    55: "0-2",
    56: "0-3",
    57: "0-2",
    58: "0",
    59: "0-1",
    60: "0-2",
    61: "0",
    62: "0-4",
    63: "0-2",
    64: "0",
    65: "0",
    66: "0-2",
    67: "0",
    68: "0-1",
    69: "0-1",
    70: "0",
    71: "0",
    72: "0",
    73: "0",
    74: "0-1",
    75: "0",
    76: "0-1",
    77: "0-1",
    78: "0-2",
    79: "0-2",
    80: "0-1",
    81: "0",
    82: "0",
    83: "0",
    84: "0",
    85: "0-1",
    86: "0",
    87: "0-1",
    88: "0",
    89: "0",
    90: "0-1",
    91: "0",
    92: "0",
}

#: The versions Kafka 4.0 removed (KIP-896), plus the ZooKeeper-mode keys 4-7 it removed entirely.
DEPRECATED_VERSIONS = {
    0: "0-2",
    1: "0-3",
    2: "0",
    4: "0-7",
    5: "0-4",
    6: "0-8",
    7: "0-3",
    8: "0-1",
    9: "0",
    19: "0-1",
    20: "0",
    23: "0-1",
    27: "0",
    29: "0",
    30: "0",
    31: "0",
    32: "0",
    34: "0",
    35: "0",
    38: "0",
    39: "0",
    40: "0",
    41: "0",
    56: "0-1",
}

#: What 0.9.0 served, by api key: (name in 0.9.0, versions by 0.9.0). None of them is flexible.
VERSIONS_BY_0_9 = {
    0: ("Produce", 1),
    1: ("Fetch", 1),
    2: ("Offsets", 0),
    3: ("Metadata", 0),
    4: ("LeaderAndIsr", 0),
    5: ("StopReplica", 0),
    6: ("UpdateMetadata", 1),
    7: ("ControlledShutdown", 1),
    8: ("OffsetCommit", 2),
    9: ("OffsetFetch", 1),
    10: ("GroupCoordinator", 0),
    11: ("JoinGroup", 0),
    12: ("Heartbeat", 0),
    13: ("LeaveGroup", 0),
    14: ("SyncGroup", 0),
    15: ("DescribeGroups", 0),
    16: ("ListGroups", 0),
}

#: Header-version exceptions: everything else derives its header from flexibility.
HEADER_EXCEPTIONS = {
    ("ControlledShutdown", "request"): {"0": 0, "1-2": 1, "3": 2},
    ("ApiVersions", "response"): {"0+": 0},
}

PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes", "records", "uuid"}
NULLABLE = {"string", "bytes", "records"}
ENTITY_TYPES = {
    "topicName": "string",
    "groupId": "string",
    "brokerId": "int32",
    "transactionalId": "string",
    "producerId": "int64",
    "partitionIndex": "int32",
    "errorCode": "int16",
}
RANGE = re.compile(r"^(none|\d+|\d+-\d+|\d+\+)$")


def load(path):
    text = "\n".join(
        line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("//")
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


def by_key():
    return {doc["apiKey"]: doc for _, doc in api_specs()}


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


def walk(fields, common, path=()):
    """Every field with its path, descending into inline structs and common structs."""
    for field in fields:
        yield path + (field["name"],), field
        inner = field.get("fields")
        if inner is None:
            inner = common.get(field["type"][2:] if field["type"].startswith("[]") else field["type"], {}).get(
                "fields", []
            )
        yield from walk(inner, common, path + (field["name"],))


@pytest.mark.parametrize("path", spec_files(), ids=lambda p: p.name)
def test_parses(path):
    doc = load(path)
    assert isinstance(doc, dict)
    assert doc["kind"] in {"api", "header", "data", "errors", "releases"}


def test_every_api_key_once_without_gaps():
    keys = sorted(doc["apiKey"] for _, doc in api_specs())
    assert keys == list(range(HIGHEST_API_KEY + 1)), keys


def test_names_unique_and_file_name_is_api_name():
    seen = {}
    for path, doc in api_specs():
        assert path.stem == doc["name"]
        for name in [doc["name"]] + doc.get("oldNames", []):
            assert re.match(r"^[A-Z][A-Za-z0-9]*$", name), name
            assert name not in seen, (name, path.name, seen.get(name))
            seen[name] = path.name


@pytest.mark.parametrize("key", sorted(VALID_VERSIONS))
def test_valid_and_deprecated_versions(key):
    doc = by_key()[key]
    for kind in ("request", "response"):
        section = doc[kind]
        assert section["validVersions"] == VALID_VERSIONS[key], kind
        assert section.get("deprecatedVersions", "none") == DEPRECATED_VERSIONS.get(key, "none"), kind
        top = max(to_set(section["validVersions"], 99))
        valid = to_set(section["validVersions"], top)
        deprecated = to_set(section.get("deprecatedVersions", "none"), top)
        # the removed versions are the oldest ones
        assert deprecated <= valid and all(v < min(valid - deprecated, default=top + 1) for v in deprecated)


@pytest.mark.parametrize("key", sorted(VERSIONS_BY_0_9))
def test_what_0_9_had_is_kept(key):
    """The 0.8/0.9 versions stay, non-flexible, and the 0.9 name stays reachable."""
    name, highest = VERSIONS_BY_0_9[key]
    doc = by_key()[key]
    assert name == doc["name"] or name in doc.get("oldNames", [])
    for kind in ("request", "response"):
        section = doc[kind]
        top = max(to_set(section["validVersions"], 99))
        assert set(range(highest + 1)) <= to_set(section["validVersions"], top)
        assert not set(range(highest + 1)) & to_set(section["flexibleVersions"], top)


def test_renamed_apis_keep_their_old_names():
    docs = by_key()
    assert docs[2]["name"] == "ListOffsets" and {"Offsets", "ListOffset"} <= set(docs[2]["oldNames"])
    assert docs[43]["name"] == "ElectLeaders" and "ElectPreferredLeaders" in docs[43]["oldNames"]
    assert docs[10]["name"] == "FindCoordinator"
    assert {"GroupCoordinator", "ConsumerMetadata"} <= set(docs[10]["oldNames"])
    assert docs[56]["name"] == "AlterPartition" and "AlterIsr" in docs[56]["oldNames"]
    assert docs[74]["name"] == "ListConfigResources" and "ListClientMetricsResources" in docs[74]["oldNames"]


def _field(section, path):
    common = {c["name"]: c for c in section.get("commonStructs", [])}
    fields = section["fields"]
    for name in path[:-1]:
        parent = next(f for f in fields if f["name"] == name)
        fields = parent.get("fields") or common[parent["type"].lstrip("[]")]["fields"]
    return next(f for f in fields if f["name"] == path[-1])


@pytest.mark.parametrize(
    "key,kind,path,old",
    [
        (1, "request", ("MaxWaitMs",), "MaxWait"),
        (1, "request", ("SessionEpoch",), "Epoch"),
        (1, "request", ("Topics", "Partitions"), "FetchPartitions"),
        (0, "request", ("TopicData",), "Topics"),
        (8, "request", ("GenerationIdOrMemberEpoch",), "GenerationId"),
        (4, "request", ("UngroupedPartitionStates", "PartitionEpoch"), "ZkVersion"),
        (74, "response", ("ConfigResources",), "ClientMetricsResources"),
    ],
)
def test_renamed_fields_keep_their_old_names(key, kind, path, old):
    assert old in _field(by_key()[key][kind], path).get("oldNames", [])


def test_header_versions_only_for_the_exceptions():
    for _, doc in api_specs():
        for kind in ("request", "response"):
            expected = HEADER_EXCEPTIONS.get((doc["name"], kind))
            assert doc[kind].get("headerVersions") == expected, (doc["name"], kind)


def test_headers_and_consumer_protocol():
    request = load(SPECS / "RequestHeader.json")
    assert (request["validVersions"], request["flexibleVersions"]) == ("0-2", "2+")
    client_id = [f for f in request["fields"] if f["name"] == "ClientId"][0]
    assert client_id["flexibleVersions"] == "none"  # a classic string even in header v2
    response = load(SPECS / "ResponseHeader.json")
    assert (response["validVersions"], response["flexibleVersions"]) == ("0-1", "1+")
    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment"):
        doc = load(SPECS / f"{name}.json")
        assert (doc["kind"], doc["validVersions"], doc["flexibleVersions"]) == ("data", "0-3", "none")


def _sections():
    for path in spec_files():
        doc = load(path)
        if doc["kind"] == "api":
            yield path.name + ":request", doc["request"]
            yield path.name + ":response", doc["response"]
        elif doc["kind"] in {"header", "data"}:
            yield path.name, doc


def _check_field(where, field, parent_versions, flexible, top):
    assert re.match(r"^[A-Z][A-Za-z0-9]*$", field["name"]), where
    assert RANGE.match(field["versions"]), where
    versions = to_set(field["versions"], top)
    assert versions and versions <= parent_versions, where
    ftype = field["type"]
    inner = ftype[2:] if ftype.startswith("[]") else ftype
    is_struct = inner not in PRIMITIVES
    if not ftype.startswith("[]"):
        assert inner != "records" or "fields" not in field, where
    if "nullableVersions" in field:
        assert inner in NULLABLE or ftype.startswith("[]") or is_struct, where
        assert to_set(field["nullableVersions"], top) <= versions, where
    assert ("tag" in field) == ("taggedVersions" in field), where
    if "tag" in field:
        tagged = to_set(field["taggedVersions"], top)
        assert isinstance(field["tag"], int) and field["tag"] >= 0, where
        assert tagged <= versions and tagged <= flexible, where
    if "entityType" in field:
        assert ENTITY_TYPES[field["entityType"]] == inner, where
    for old in field.get("oldNames", []):
        assert old != field["name"], where
    return versions


@pytest.mark.parametrize("label,section", list(_sections()), ids=lambda x: x if isinstance(x, str) else "")
def test_fields_are_well_formed(label, section):
    top = max(to_set(section["validVersions"], 99))
    valid = to_set(section["validVersions"], top)
    flexible = to_set(section.get("flexibleVersions", "none"), top)
    assert flexible <= valid and (not flexible or flexible == set(range(min(flexible), top + 1)))
    common = {c["name"]: c for c in section.get("commonStructs", [])}

    def check(fields, parent_versions, path):
        names = [f["name"] for f in fields]
        assert len(names) == len(set(names)), (label, path, names)
        every_name = names + [old for f in fields for old in f.get("oldNames", [])]
        assert len(every_name) == len(set(every_name)), (label, path, every_name)  # an old name stays unambiguous
        tags = {}
        for field in fields:
            where = (label, ".".join(path + (field["name"],)))
            versions = _check_field(where, field, parent_versions, flexible, top)
            if "tag" in field:
                for v in to_set(field["taggedVersions"], top):
                    assert (v, field["tag"]) not in tags, where  # one tag, one field, per version
                    tags[(v, field["tag"])] = field["name"]
            inner = field["type"][2:] if field["type"].startswith("[]") else field["type"]
            if inner in PRIMITIVES:
                assert "fields" not in field, where
            elif "fields" in field:
                check(field["fields"], versions, path + (field["name"],))
            else:
                assert inner in common, where

    check(section["fields"], valid, ())
    for struct in common.values():
        check(struct["fields"], to_set(struct["versions"], top), (struct["name"],))


def test_error_and_partition_fields_are_labelled():
    """Every int16 *ErrorCode field says entityType errorCode (tools walk on it instead of on names)."""
    for label, section in _sections():
        common = {c["name"]: c for c in section.get("commonStructs", [])}
        for fpath, field in walk(section["fields"], common):
            if field["type"] == "int16" and field["name"].endswith("ErrorCode"):
                assert field.get("entityType") == "errorCode", (label, fpath)
            if field["type"] == "int32" and field["name"] in ("PartitionIndex", "Partition"):
                assert field.get("entityType") == "partitionIndex", (label, fpath)


def test_error_codes():
    doc = load(SPECS / "ErrorCodes.json")
    assert doc["kind"] == "errors"
    codes = [c["code"] for c in doc["codes"]]
    assert codes == list(range(-1, 134))
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
    # the 0.8/0.9 names stay; later names of the same codes are their modernName
    assert by_code[15]["name"] == "GROUP_COORDINATOR_NOT_AVAILABLE"
    assert by_code[15]["modernName"] == "COORDINATOR_NOT_AVAILABLE"
    assert by_code[6]["modernName"] == "NOT_LEADER_OR_FOLLOWER"
    assert by_code[133]["name"] == "SHARE_SESSION_LIMIT_REACHED"


def test_error_code_contexts_exist():
    """Every errorCodeContext used by a field is a context that ErrorCodes.json defines."""
    contexts = set()
    for entry in load(SPECS / "ErrorCodes.json")["codes"]:
        contexts.update(entry.get("contexts", {}))
    for label, section in _sections():
        common = {c["name"]: c for c in section.get("commonStructs", [])}
        for fpath, field in walk(section["fields"], common):
            if "errorCodeContext" in field:
                assert field["errorCodeContext"] in contexts, (label, fpath)


def test_specs_stand_alone():
    """No spec points outside the repository (machine paths, the old protocol notes)."""
    for path in SPECS.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "protocol.md" not in text and "/work/" not in text, path.name
