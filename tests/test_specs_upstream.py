"""Each spec file's ``upstream`` holds: the Kafka release it names ships definitions it matches.

Apache Kafka ships its message definitions (``common/message/*.json``) inside the ``kafka-clients`` jar,
with the commit id of the release in ``kafka/kafka-version.properties``.  For every release the spec files
name, the jar is resolved through :mod:`kproto.testing.jars` (Maven) and each file is compared with the
definitions it names, version for version: the highest version, which versions are flexible, and every
field's path, type and tag in each version both sides have (kproto keeps versions Kafka 4.0 dropped).

Kafka's files explain versions in ``//`` comments; every version such a comment names has a note of ours
(``versionNotes``), so the protocol pages never leave a version unexplained where Kafka explains it.

Without ``mvn`` (or ``java``) the module is skipped with one line naming what to install.
"""

from __future__ import annotations

import json
import re
import zipfile
from functools import lru_cache
from typing import Dict, List, Optional, Set, Tuple

import pytest

from kproto.schema import MessageSpec, StructSpec, load_specs
from kproto.testing import jars

try:
    jars.require_tool("mvn")
except jars.JavaToolMissingError as exc:
    pytest.skip(f"comparing the specs with Kafka's own definitions needs Maven: {exc}", allow_module_level=True)

SPECS = load_specs()
UPSTREAMS = sorted(
    {
        (s.upstream.release, s.upstream.commit)
        for s in [*SPECS.apis.values(), *SPECS.headers.values(), *SPECS.data.values()]
        if s.upstream
    }
)
Layout = List[Tuple[str, str, Optional[int]]]


@lru_cache(maxsize=None)
def kafka_definitions(release: str) -> Tuple[str, Dict[str, str]]:
    """(commit id, {file name: text}) of the message definitions in kafka-clients ``release``."""
    lib = jars.resolve([f"org.apache.kafka:kafka-clients:{release}"])
    with zipfile.ZipFile(lib / f"kafka-clients-{release}.jar") as jar:
        props = dict(
            line.split("=", 1) for line in jar.read("kafka/kafka-version.properties").decode().split() if "=" in line
        )
        files = {
            name.rsplit("/", 1)[1]: jar.read(name).decode()
            for name in jar.namelist()
            if name.startswith("common/message/") and name.endswith(".json")
        }
    return props["commitId"], files


def _strip(text: str) -> dict:
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def _range(text: Optional[str], highest: int) -> Set[int]:
    if text in (None, "none"):
        return set()
    assert text is not None
    if text.endswith("+"):
        return set(range(int(text[:-1]), highest + 1))
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def kafka_layout(doc: dict, version: int) -> Layout:
    """(path, type, tag) of every field of ``version`` in one of Kafka's definitions, nested paths included."""
    common = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
    out: Layout = []

    def walk(fields: list, prefix: str) -> None:
        for f in fields:
            if version not in _range(f["versions"], 10_000):
                continue
            tagged = "tag" in f and version in _range(f.get("taggedVersions"), 10_000)
            element = f["type"][2:] if f["type"].startswith("[]") else f["type"]
            out.append((prefix + f["name"].lower(), element, f["tag"] if tagged else None))
            walk(f.get("fields") or common.get(element, []), prefix + f["name"].lower() + ".")

    walk(doc["fields"], "")
    return sorted(out)


def kproto_layout(message: MessageSpec, version: int) -> Layout:
    out: Layout = []

    def walk(struct: StructSpec, prefix: str) -> None:
        for f in struct.fields:
            if version not in f.versions:
                continue
            t = f.type.element if f.type.is_array else f.type
            out.append(
                (prefix + f.name.lower(), f.type.describe().replace("[]", ""), f.tag if f.tagged_in(version) else None)
            )
            if t is not None and t.is_struct and t.struct is not None:
                walk(t.struct, prefix + f.name.lower() + ".")

    walk(message.root, "")
    return sorted(out)


def _pairs() -> List[Tuple[MessageSpec, str, str]]:
    """(message, release, Kafka file name) for every message of every file with an upstream."""
    out = []
    for api in SPECS.apis.values():
        assert api.upstream is not None, f"{api.source} names no upstream release"
        requests, responses = (
            [f for f in api.upstream.files if "Request" in f],
            [f for f in api.upstream.files if "Response" in f],
        )
        assert len(requests) == len(responses) == 1, api.source
        out += [(api.request, api.upstream.release, requests[0]), (api.response, api.upstream.release, responses[0])]
    for message in [*SPECS.headers.values(), *SPECS.data.values()]:
        assert message.upstream is not None and len(message.upstream.files) == 1, message.source
        out.append((message, message.upstream.release, message.upstream.files[0]))
    return out


@pytest.mark.parametrize("release,commit", UPSTREAMS)
def test_named_commit_is_the_release(release: str, commit: str) -> None:
    assert kafka_definitions(release)[0] == commit


# The request header's names differ on purpose (specs/README.md): the same bytes under the names every log uses.
_RENAMED = {"RequestHeader.json": {"requestapikey": "apikey", "requestapiversion": "apiversion"}}


@pytest.mark.parametrize("message,release,name", _pairs(), ids=lambda x: getattr(x, "name", None) or str(x))
def test_spec_matches_its_upstream_definition(message: MessageSpec, release: str, name: str) -> None:
    files = kafka_definitions(release)[1]
    assert name in files, f"Kafka {release} has no {name}"
    doc = _strip(files[name])
    theirs = _range(doc["validVersions"], 10_000)
    ours = {v for v in range(0, 1 + (message.valid_versions.hi or 0)) if v in message.valid_versions}
    assert max(ours) == max(theirs), f"{message.name}: highest version {max(ours)}, Kafka {release} {max(theirs)}"
    assert theirs <= ours, f"{message.name}: Kafka {release} has versions the spec lacks"
    flexible = _range(doc.get("flexibleVersions"), max(theirs))
    assert {v for v in theirs if v in message.flexible_versions} == flexible & theirs
    renamed = _RENAMED.get(name, {})
    for version in sorted(theirs):
        kafka = sorted((renamed.get(p, p), t, tag) for p, t, tag in kafka_layout(doc, version))
        assert kproto_layout(message, version) == kafka, f"{message.name} v{version} differs from Kafka {release}"


_VERSION_MENTION = re.compile(r"\b[Vv]ersions? (\d+(?:(?:\s*-\s*|,\s*|\s+and\s+|\s+through\s+)\d+)*)(?!\d|\+)")


def kafka_explained_versions(text: str) -> Set[int]:
    """The versions other than v0 that the ``//`` comments of one of Kafka's files explain.

    Comments about removed versions and back-references ("the same as version 3") are left out.
    """
    comments: List[str] = []
    licence = True
    for line in text.splitlines():
        stripped = line.strip()
        if licence:
            licence = "limitations under the License" not in stripped
            continue
        if stripped.startswith("//"):
            comments.append(stripped[2:].strip())
    found: Set[int] = set()
    for sentence in re.split(r"(?<=[.])\s+|\n", " ".join(comments)):
        if "removed in Apache Kafka" in sentence:
            continue
        for match in _VERSION_MENTION.finditer(sentence):
            before = sentence[: match.start()].rstrip().lower()
            if before.endswith(("same as", "same with", "identical to", "matches")):
                continue
            numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
            if re.search(r"\d\s*-\s*\d|through", match.group(1)):
                numbers = list(range(numbers[0], numbers[-1] + 1))
            found.update(n for n in numbers if n > 0)
    return found


@pytest.mark.parametrize("message,release,name", _pairs(), ids=lambda x: getattr(x, "name", None) or str(x))
def test_every_version_kafka_explains_has_a_note(message: MessageSpec, release: str, name: str) -> None:
    text = kafka_definitions(release)[1][name]
    explained = {v for v in kafka_explained_versions(text) if v in message.valid_versions}
    missing = sorted(explained - set(message.version_notes))
    assert not missing, f"{message.name}: Kafka {release}'s {name} explains v{missing} and the spec has no note"
