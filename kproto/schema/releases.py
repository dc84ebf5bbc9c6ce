"""Load ``specs/BrokerReleases.json``: which versions of which api keys each Kafka broker release serves.

Why a data file and not code: the table is a list of facts about other people's software (gathered from
the releases' own protocol definitions and cross-checked against an independent client's table), and it
grows by one line per Kafka release. Keeping it beside the API specs, in the same commented-JSON form and
the same version-range grammar, lets it be reviewed as data and checked by the same loader rules; the
negotiation logic that uses it lives in :mod:`kproto.versions`.

The file has ``"kind": "releases"`` and a ``releases`` list, oldest first; each entry names a release line
(``"0.9.0"`` for the 0.x lines, whose third number mattered, ``"2.8"`` from 1.0 on) and maps api keys
(decimal strings) to closed version ranges (``"0"``, ``"0-12"``). Any violation is a :class:`SpecError`
naming the file and the entry.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, Tuple

from kproto.schema.loader import SpecError, default_spec_dir, parse_spec_text
from kproto.schema.version_ranges import VersionRangeError, Versions

__all__ = ["BrokerRelease", "RELEASES_FILE", "load_releases", "release_sort_key"]

RELEASES_FILE = "BrokerReleases.json"

_RELEASE_NAME = re.compile(r"^(0\.\d+\.\d+|[1-9]\d*\.\d+)$")


@dataclass(frozen=True)
class BrokerRelease:
    """One broker release line: ``name`` (``"0.10.2"``, ``"3.9"``) and, per api key it serves, the
    inclusive ``(min, max)`` version range."""

    name: str
    apis: Mapping[int, Tuple[int, int]]


def release_sort_key(name: str) -> Tuple[int, ...]:
    """Numeric order of release names: ``"0.10.0"`` after ``"0.9.0"``, ``"1.0"`` after both."""
    return tuple(int(part) for part in name.split("."))


def load_releases(path: Optional[str] = None) -> Tuple[BrokerRelease, ...]:
    """Read and validate the releases file (default: ``BrokerReleases.json`` in the project's specs)."""
    path = path or os.path.join(default_spec_dir(), RELEASES_FILE)
    source = os.path.basename(path)
    with open(path, encoding="utf-8") as handle:
        doc = parse_spec_text(handle.read(), source)
    if doc.get("kind") != "releases":
        raise SpecError(f"{source}: kind must be 'releases', not {doc.get('kind')!r}")
    unknown = set(doc) - {"kind", "about", "releases"}
    if unknown:
        raise SpecError(f"{source}: unknown keys {sorted(unknown)}")
    entries = doc.get("releases")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{source}: 'releases' must be a non-empty list")
    out = []
    for index, entry in enumerate(entries):
        out.append(_release(source, index, entry))
    names = [r.name for r in out]
    if names != sorted(set(names), key=release_sort_key):
        raise SpecError(f"{source}: releases must be unique and listed oldest first, got {names}")
    return tuple(out)


def _release(source: str, index: int, entry: Any) -> BrokerRelease:
    where = f"{source}: releases[{index}]"
    if not isinstance(entry, dict) or set(entry) != {"release", "apis"}:
        raise SpecError(f"{where}: expected an object with exactly 'release' and 'apis'")
    name = entry["release"]
    if not isinstance(name, str) or not _RELEASE_NAME.match(name):
        raise SpecError(f"{where}.release: {name!r} is not a release line such as '0.9.0' or '2.8'")
    raw = entry["apis"]
    if not isinstance(raw, dict) or not raw:
        raise SpecError(f"{where} ({name}).apis: must be a non-empty object")
    apis: Dict[int, Tuple[int, int]] = {}
    for key_text, range_text in raw.items():
        if not (isinstance(key_text, str) and key_text.isdigit() and str(int(key_text)) == key_text):
            raise SpecError(f"{where} ({name}).apis: api key {key_text!r} must be a decimal number")
        try:
            versions = Versions.parse(range_text)
        except VersionRangeError as exc:
            raise SpecError(f"{where} ({name}).apis.{key_text}: {exc}") from None
        if versions.empty or versions.hi is None:
            raise SpecError(f"{where} ({name}).apis.{key_text}: range {range_text!r} must be closed and non-empty")
        apis[int(key_text)] = (versions.lo, versions.hi)
    return BrokerRelease(name=name, apis=MappingProxyType(dict(sorted(apis.items()))))
