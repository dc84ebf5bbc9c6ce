"""docs/protocol: generated from the specs, committed, and checked here.

The drift test fails when the committed pages differ from what the specs generate.  The other tests read
the pages as a person would (the Markdown tables) and hold them against the generated classes' ``FIELDS``
tables -- a second path from the specs, through the code generator -- so a page that lists a field in a
version that does not carry it, or misses what a version added, fails.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Dict, List, Set, Tuple

import pytest

from kproto.apis import APIS
from kproto.codegen.protocol_docs import docs_dir, generate_docs, sync_docs
from kproto.reference import schema
from kproto.schema import snake_case

PAGES = docs_dir()


@functools.lru_cache(maxsize=1)
def _pages() -> Dict[str, str]:
    return generate_docs(schema())


def _paths(cls, version: int, prefix: str = "") -> List[Tuple[str, object]]:
    """(path, FieldInfo) of the fields ``version`` carries, from the generated class."""
    out: List[Tuple[str, object]] = []
    for info in cls.FIELDS:
        lo, hi = info.versions
        if not lo <= version <= hi:
            continue
        path = prefix + info.name
        out.append((path, info))
        if info.struct is not None:
            out += _paths(info.struct, version, path + ("[]." if info.is_array else "."))
    return out


def _section(page: str, message: str) -> str:
    start = page.index(f"\n## {message}\n")
    end = page.find("\n## ", start + 1)
    return page[start:] if end < 0 else page[start:end]


def _rows(table_text: str) -> List[List[str]]:
    rows = []
    for line in table_text.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def _layouts(section: str) -> Dict[int, List[List[str]]]:
    """Version -> layout rows (field, type, nullable, tag, entity type) of a message section."""
    out: Dict[int, List[List[str]]] = {}
    parts = re.split(r"\n#### v(\d+)(?:-(\d+))? \(", section)
    for i in range(1, len(parts), 3):
        lo, hi, body = int(parts[i]), int(parts[i + 1] or parts[i]), parts[i + 2]
        rows = [r for r in _rows(body) if r[0] != "field"]
        for v in range(lo, hi + 1):
            out[v] = rows
    return out


def test_committed_docs_are_current():
    stale = sync_docs(check=True)
    assert not stale, f"docs/protocol is stale ({', '.join(stale)}): run python -m kproto.codegen"


def test_index_lists_every_api_with_an_existing_page():
    index = open(os.path.join(PAGES, "README.md"), encoding="utf-8").read()
    for info in _api_infos():
        match = re.search(rf"^\| {info.api_key} \| \[{info.name}\]\(([\w.]+)\)", index, re.M)
        assert match, f"api key {info.api_key} missing from docs/protocol/README.md"
        assert os.path.exists(os.path.join(PAGES, match.group(1)))


def _api_infos():
    seen = {}
    for info in APIS.values():
        seen[info.api_key] = info
    return [seen[k] for k in sorted(seen)]


@pytest.mark.parametrize("info", _api_infos(), ids=lambda i: i.name)
def test_every_version_layout_matches_the_generated_class(info):
    page = next(text for text in _pages().values() if text.startswith("<!--") and f"(api key {info.api_key})\n" in text)
    for cls in (info.request, info.response):
        section = _section(page, cls.__name__)
        layouts = _layouts(section)
        lo, hi = cls.VALID_VERSIONS
        assert sorted(layouts) == list(range(lo, hi + 1)), f"{cls.__name__}: layouts for {sorted(layouts)}"
        previous: Set[str] = set()
        versions_table = {
            int(r[0]): r for r in _rows(section.split("### Versions", 1)[1].split("###", 1)[0]) if r[0].isdigit()
        }
        for v in range(lo, hi + 1):
            expected = _paths(cls, v)
            shown = {row[0].strip("`"): row for row in layouts[v]}
            assert set(shown) == {p for p, _ in expected}, f"{cls.__name__} v{v}"
            for path, field in expected:
                nullable = field.nullable_versions is not None and (
                    field.nullable_versions[0] <= v <= field.nullable_versions[1]
                )
                assert (shown[path][2] == "yes") == nullable, f"{cls.__name__} v{v} {path} nullable"
                assert shown[path][4] == (field.entity_type or ""), f"{cls.__name__} v{v} {path} entity type"
            flexible = cls.FLEXIBLE_VERSIONS is not None and cls.FLEXIBLE_VERSIONS[0] <= v <= cls.FLEXIBLE_VERSIONS[1]
            row = versions_table[v]
            assert (row[1] == "yes") == flexible, f"{cls.__name__} v{v} flexible column"
            now = {p for p, _ in expected}
            if v > lo:
                added = {c.strip("` ") for c in row[4].split(",") if c.strip()}
                removed = {c.strip("` ") for c in row[5].split(",") if c.strip()}
                assert added == now - previous, f"{cls.__name__} v{v} added"
                assert removed == previous - now, f"{cls.__name__} v{v} removed"
            previous = now


def test_a_page_reads_as_tables_with_the_known_fetch_facts():
    page = open(os.path.join(PAGES, "fetch.md"), encoding="utf-8").read()
    assert page.startswith("<!-- Generated by `python -m kproto.codegen`")
    assert "# Fetch (api key 1)" in page
    history = _rows(_section(page, "FetchResponse").split("### Fields and their history", 1)[1].split("###", 1)[0])
    throttle = next(r for r in history if r[0] == "`throttle_time_ms`")
    assert throttle[2].startswith("1")  # FetchResponse v1 added the throttle time (first field on the wire)


def _version_rows(section: str) -> Dict[int, List[str]]:
    """Version -> its row of the "Versions" table of a message section."""
    table = section.split("### Versions", 1)[1].split("###", 1)[0]
    return {int(r[0]): r for r in _rows(table) if r[0].isdigit()}


def test_version_notes_fill_the_other_changes_column():
    """Where the spec says why a version exists, the page says it, in the "other changes" column."""
    specs = schema()
    pages = _pages()
    for api in specs.apis.values():
        page = pages[f"{snake_case(api.name)}.md"]
        assert f"matching Apache Kafka {api.upstream.release} (commit `{api.upstream.commit}`)" in page
        for message in (api.request, api.response):
            rows = _version_rows(_section(page, message.name))
            for version, note in message.version_notes.items():
                assert note.replace("|", "\\|") in rows[version][6], f"{message.name} v{version}"
    fetch = _version_rows(_section(pages["fetch.md"], "FetchRequest"))
    assert "KIP-227" in fetch[7][6] and "KIP-320" in fetch[9][6]


def test_version_notes_agree_with_the_layouts():
    """A note saying a version keeps an earlier layout is checked against both layouts; the first flexible
    version of every message says so."""
    specs = schema()
    messages = [m for a in specs.apis.values() for m in (a.request, a.response)]
    messages += list(specs.headers.values()) + list(specs.data.values())
    from kproto.codegen.protocol_docs import _layout, _row_signature

    def layout(message, version):
        return (
            [_row_signature(message, version, p, f) for p, f in _layout(message.root, version)],
            version in message.flexible_versions,
        )

    for message in messages:
        for version, note in message.version_notes.items():
            same = re.match(r"same layout as v(\d+)", note)
            if same:
                assert layout(message, version) == layout(message, int(same.group(1))), f"{message.name} v{version}"
        first = message.flexible_versions.lo
        if not message.flexible_versions.empty and first > message.valid_versions.lo:
            assert re.search(r"flexible|tagged-field", message.version_notes.get(first, "")), (
                f"{message.name} v{first} is its first flexible version"
            )
