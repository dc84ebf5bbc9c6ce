"""Load and validate the spec files into the schema model.

Every rule of ``specs/README.md`` is checked here; a violation raises :class:`SpecError` naming the file
and the field path, so a wrong spec never reaches the generator.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from kproto.schema.model import (
    FIXED_TYPES,
    NULLABLE_TYPES,
    PRIMITIVE_TYPES,
    ApiSpec,
    ErrorCodeSpec,
    FieldSpec,
    MessageSpec,
    SchemaSet,
    StructSpec,
    TypeRef,
    UpstreamSpec,
    ZERO_UUID,
)
from kproto.schema.version_ranges import EMPTY, VersionRangeError, Versions

__all__ = ["SpecError", "load_specs", "default_spec_dir", "parse_spec_text"]

_FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "nullableVersions",
    "default",
    "ignorable",
    "about",
    "fields",
    "entityType",
    "errorCodeContext",
    "tag",
    "taggedVersions",
    "oldNames",
    "flexibleVersions",
}
_SECTION_KEYS = {
    "validVersions",
    "flexibleVersions",
    "headerVersions",
    "deprecatedVersions",
    "fields",
    "commonStructs",
    "about",
    "versionNotes",
}
_API_KEYS = {"kind", "apiKey", "name", "oldNames", "about", "upstream", "request", "response"}
_HEADER_KEYS = {"kind", "name", "about", "upstream", "validVersions", "flexibleVersions", "fields", "versionNotes"}
_DATA_KEYS = {
    "kind",
    "name",
    "about",
    "upstream",
    "validVersions",
    "flexibleVersions",
    "fields",
    "versionPrefix",
    "commonStructs",
    "versionNotes",
}
_UPSTREAM_KEYS = {"release", "commit", "files"}
_RELEASE = re.compile(r"\d+\.\d+\.\d+\Z")
_COMMIT = re.compile(r"[0-9a-f]{12,40}\Z")
_ERROR_KEYS = {"code", "name", "oldNames", "modernName", "retriable", "introduced", "about", "contexts", "note"}
#: entityType values and the (element) type they may label: Kafka's values plus two kproto additions,
#: ``partitionIndex`` (partition numbers in topic-partition structures) and ``errorCode``.
_ENTITY_TYPES = {
    "topicName": "string",
    "groupId": "string",
    "brokerId": "int32",
    "transactionalId": "string",
    "producerId": "int64",
    "partitionIndex": "int32",
    "errorCode": "int16",
}
#: Spec kinds another loader reads (``releases``: kproto.schema.releases); skipped here.
_FOREIGN_KINDS = ("releases",)
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


class SpecError(ValueError):
    """A spec file that breaks the format rules; the message names the file and the field."""


def default_spec_dir() -> str:
    """The repository's ``specs/`` next to the package, or the copy shipped inside an installed package."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (os.path.join(os.path.dirname(here), "specs"), os.path.join(here, "_specs")):
        if os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError("kproto spec files not found (expected specs/ beside the package)")


def parse_spec_text(text: str, source: str) -> Dict[str, Any]:
    """Strict JSON after removing whole-line ``//`` comments."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    try:
        value = json.loads("\n".join(lines))
    except json.JSONDecodeError as exc:
        raise SpecError(f"{source}: not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SpecError(f"{source}: top level must be an object")
    return value


class _Context:
    """Where we are while loading, for error messages."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> SpecError:
        return SpecError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")


def _versions(ctx: _Context, where: str, text: Any, highest: int) -> Versions:
    try:
        parsed = Versions.parse(text)
    except VersionRangeError as exc:
        raise ctx.fail(where, str(exc)) from None
    if parsed.hi is not None and not parsed.empty and parsed.hi > highest:
        raise ctx.fail(where, f"versions {parsed} outside the enclosing versions (highest {highest})")
    return parsed.closed(highest)


def _check_keys(ctx: _Context, where: str, obj: Dict[str, Any], allowed: set, required: Tuple[str, ...]) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ctx.fail(where, f"unknown key(s) {', '.join(unknown)}")
    for key in required:
        if key not in obj:
            raise ctx.fail(where, f"missing key {key!r}")


def _default(
    ctx: _Context, where: str, spec: Dict[str, Any], type_ref: TypeRef, nullable: Versions, versions: Versions
) -> Any:
    raw = spec.get("default")
    kind = type_ref.kind
    if raw is None:
        if kind in FIXED_TYPES:
            return {"bool": False, "float64": 0.0, "uuid": ZERO_UUID}.get(kind, 0)
        if kind == "string":
            return ""
        if kind in ("bytes", "records"):
            return b""
        if kind == "array":
            return []
        return None  # a struct: a fresh instance with its own defaults
    if raw == "null":
        if nullable != versions:
            raise ctx.fail(where, "default 'null' needs a field nullable in all its versions")
        return None
    if kind in _INT_BITS or kind == "uint16":
        try:
            value = int(str(raw), 0)
        except ValueError:
            raise ctx.fail(where, f"default {raw!r} is not an integer") from None
        lo, hi = (0, 1 << 16) if kind == "uint16" else (-(1 << (_INT_BITS[kind] - 1)), 1 << (_INT_BITS[kind] - 1))
        if not lo <= value < hi:
            raise ctx.fail(where, f"default {raw!r} does not fit {kind}")
        return value
    if kind == "float64":
        try:
            return float(str(raw))
        except ValueError:
            raise ctx.fail(where, f"default {raw!r} is not a number") from None
    if kind == "bool":
        if str(raw) not in ("true", "false"):
            raise ctx.fail(where, f"default {raw!r} is not true/false")
        return str(raw) == "true"
    if kind == "string":
        return str(raw)
    raise ctx.fail(where, f"type {kind} cannot have a default other than null")


class _StructBuilder:
    """Turns field lists into StructSpecs, resolving common structs and checking names."""

    def __init__(self, ctx: _Context, highest: int, common: Dict[str, Dict[str, Any]], flexible: Versions) -> None:
        self.ctx = ctx
        self.highest = highest
        self.flexible = flexible
        self.common_specs = common
        self.common_built: Dict[str, StructSpec] = {}
        self.struct_names: Dict[str, str] = {}
        self.inline_built: Dict[str, Tuple[Any, StructSpec]] = {}
        self.common_building: set = set()

    def claim_struct_name(self, name: str, where: str) -> None:
        if name in self.struct_names:
            raise self.ctx.fail(where, f"duplicate struct name {name!r} (also at {self.struct_names[name]})")
        self.struct_names[name] = where

    def struct(self, name: str, fields: List[Any], versions: Versions, where: str) -> StructSpec:
        if not isinstance(fields, list):
            raise self.ctx.fail(where, "'fields' must be a list")
        built: List[FieldSpec] = []
        names: Dict[str, int] = {}
        attrs: Dict[str, str] = {}
        tags: Dict[int, str] = {}
        for index, spec in enumerate(fields):
            fwhere = f"{where}.{spec.get('name', f'#{index}')}" if isinstance(spec, dict) else f"{where}#{index}"
            f = self.field(spec, versions, fwhere)
            if f.name in names:
                raise self.ctx.fail(fwhere, f"duplicate field name {f.name!r}")
            if f.attr in attrs:
                raise self.ctx.fail(fwhere, f"field {f.name!r} clashes with {attrs[f.attr]!r} as {f.attr!r}")
            if f.tag is not None:
                if f.tag in tags:
                    raise self.ctx.fail(fwhere, f"tag {f.tag} also used by {tags[f.tag]!r}")
                tags[f.tag] = f.name
            names[f.name] = index
            attrs[f.attr] = f.name
            built.append(f)
        return StructSpec(name=name, fields=built, versions=versions)

    def field(self, spec: Any, parent_versions: Versions, where: str) -> FieldSpec:
        ctx = self.ctx
        if not isinstance(spec, dict):
            raise ctx.fail(where, "a field must be an object")
        _check_keys(ctx, where, spec, _FIELD_KEYS, ("name", "type", "versions"))
        name = spec["name"]
        if not isinstance(name, str) or not name[:1].isupper() or not name.isidentifier():
            raise ctx.fail(where, f"field name {name!r} must be a PascalCase identifier")
        versions = _versions(ctx, where + " versions", spec["versions"], self.highest)
        if versions.empty:
            raise ctx.fail(where, "field has no versions")
        if not versions.within(parent_versions):
            raise ctx.fail(where, f"versions {versions} outside the enclosing versions {parent_versions}")
        type_ref = self.type_ref(spec, versions, where)
        nullable = _versions(ctx, where + " nullableVersions", spec.get("nullableVersions", "none"), self.highest)
        if not nullable.empty:
            if type_ref.kind not in NULLABLE_TYPES and not type_ref.is_array and not type_ref.is_struct:
                raise ctx.fail(where, f"type {type_ref.describe()} cannot be nullable")
            if not nullable.within(versions):
                raise ctx.fail(where, f"nullableVersions {nullable} outside versions {versions}")
        elif "fields" in spec and not type_ref.is_array and not type_ref.is_struct:
            raise ctx.fail(where, "'fields' given for a primitive type")
        ignorable = spec.get("ignorable", False)
        if not isinstance(ignorable, bool):
            raise ctx.fail(where, "'ignorable' must be true or false")
        entity = spec.get("entityType")
        if entity is not None:
            if entity not in _ENTITY_TYPES:
                raise ctx.fail(where, f"unknown entityType {entity!r} (known: {', '.join(sorted(_ENTITY_TYPES))})")
            labelled = type_ref.element if type_ref.is_array else type_ref
            if labelled is None or labelled.kind != _ENTITY_TYPES[entity]:
                raise ctx.fail(
                    where, f"entityType {entity!r} labels {_ENTITY_TYPES[entity]} fields, not {type_ref.describe()}"
                )
        tag, tagged = self.tagging(spec, versions, where)
        old_names = spec.get("oldNames", [])
        if not isinstance(old_names, list) or not all(
            isinstance(n, str) and n.isidentifier() and n[:1].isupper() for n in old_names
        ):
            raise ctx.fail(where, "oldNames must be a list of PascalCase names")
        field_flexible: Optional[Versions] = None
        if "flexibleVersions" in spec:
            if type_ref.kind not in ("string", "bytes"):
                raise ctx.fail(where, "a field-level flexibleVersions only applies to string and bytes fields")
            field_flexible = _versions(ctx, where + " flexibleVersions", spec["flexibleVersions"], self.highest)
        context = spec.get("errorCodeContext")
        if context is not None and (type_ref.kind != "int16" or not name.endswith("ErrorCode")):
            raise ctx.fail(where, "errorCodeContext only applies to int16 *ErrorCode fields")
        return FieldSpec(
            name=name,
            type=type_ref,
            versions=versions,
            nullable_versions=nullable,
            default=_default(ctx, where, spec, type_ref, nullable, versions),
            ignorable=ignorable,
            about=str(spec.get("about", "")),
            entity_type=entity,
            error_code_context=context,
            tag=tag,
            tagged_versions=tagged,
            old_names=list(old_names),
            flexible_versions=field_flexible,
        )

    def tagging(self, spec: Dict[str, Any], versions: Versions, where: str) -> Tuple[Optional[int], Versions]:
        """``tag`` and ``taggedVersions``: both or neither; tagged only in flexible versions of the field."""
        if ("tag" in spec) != ("taggedVersions" in spec):
            raise self.ctx.fail(where, "'tag' and 'taggedVersions' go together")
        if "tag" not in spec:
            return None, EMPTY
        tag = spec["tag"]
        if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < (1 << 31):
            raise self.ctx.fail(where, f"tag {tag!r} must be a non-negative integer")
        tagged = _versions(self.ctx, where + " taggedVersions", spec["taggedVersions"], self.highest)
        if tagged.empty or not tagged.within(versions):
            raise self.ctx.fail(where, f"taggedVersions {tagged} must be non-empty and within versions {versions}")
        if not tagged.within(self.flexible):
            raise self.ctx.fail(where, f"taggedVersions {tagged} outside the flexible versions {self.flexible}")
        return tag, tagged

    def type_ref(self, spec: Dict[str, Any], versions: Versions, where: str) -> TypeRef:
        text = spec["type"]
        if not isinstance(text, str):
            raise self.ctx.fail(where, "'type' must be a string")
        if text.startswith("[]"):
            inner = text[2:]
            if inner in PRIMITIVE_TYPES:
                if "fields" in spec:
                    raise self.ctx.fail(where, f"'fields' given for an array of {inner}")
                if inner == "records":
                    raise self.ctx.fail(where, "an array of record sets is not a type")
                return TypeRef("array", element=TypeRef(inner))
            return TypeRef("array", element=self.struct_ref(inner, spec, versions, where))
        if text in PRIMITIVE_TYPES:
            return TypeRef(text)
        if text[:1].isupper():
            return self.struct_ref(text, spec, versions, where)
        raise self.ctx.fail(where, f"unknown type {text!r}")

    def struct_ref(self, name: str, spec: Dict[str, Any], versions: Versions, where: str) -> TypeRef:
        if not name.isidentifier() or not name[:1].isupper():
            raise self.ctx.fail(where, f"unknown type {spec['type']!r}")
        if "fields" in spec:
            if name in self.common_specs:
                raise self.ctx.fail(where, f"struct {name!r} is both inline and a common struct")
            if name in self.inline_built:
                # Kafka's files repeat a struct inline where two fields share it; the repeat must say the
                # same thing, and then both fields share one struct (one class).
                first_fields, built = self.inline_built[name]
                if first_fields != spec["fields"]:
                    raise self.ctx.fail(
                        where,
                        f"duplicate struct name {name!r} with different fields (also at {self.struct_names[name]})",
                    )
                return TypeRef("struct", struct=built)
            self.claim_struct_name(name, where)
            built = self.struct(name, spec["fields"], versions, where)
            self.inline_built[name] = (spec["fields"], built)
            return TypeRef("struct", struct=built)
        if name in self.common_specs:
            if name in self.common_building:
                raise self.ctx.fail(where, f"common struct {name!r} contains itself (a struct cannot recurse)")
            if name not in self.common_built:
                common = self.common_specs[name]
                cwhere = f"commonStructs.{name}"
                cversions = _versions(self.ctx, cwhere, common.get("versions", "0+"), self.highest)
                self.claim_struct_name(name, cwhere)
                self.common_building.add(name)
                self.common_built[name] = self.struct(name, common.get("fields", []), cversions, cwhere)
                self.common_building.discard(name)
            return TypeRef("struct", struct=self.common_built[name])
        raise self.ctx.fail(where, f"unknown type {spec['type']!r} (no inline fields and no common struct)")


#: Header versions derived from flexibility when a message states none: (classic, flexible) per kind.
DERIVED_HEADER_VERSIONS = {"request": (1, 2), "response": (0, 1)}


def _header_versions(
    ctx: _Context, where: str, raw: Any, valid: Versions, flexible: Versions, kind: str
) -> List[Tuple[Versions, int]]:
    if raw is None:
        classic, compact = DERIVED_HEADER_VERSIONS[kind]
        per_version = [(Versions(v, v), compact if v in flexible else classic) for v in valid]
        merged: List[Tuple[Versions, int]] = []
        for versions, header in per_version:  # adjacent versions with the same header share one range
            if merged and merged[-1][1] == header:
                merged[-1] = (Versions(merged[-1][0].lo, versions.hi), header)
            else:
                merged.append((versions, header))
        return merged
    if not isinstance(raw, dict) or not raw:
        raise ctx.fail(where, "headerVersions must be a non-empty object")
    out: List[Tuple[Versions, int]] = []
    highest = valid.hi if valid.hi is not None else valid.lo
    for key, header in raw.items():
        versions = _versions(ctx, where, key, highest)
        if not isinstance(header, int) or header < 0:
            raise ctx.fail(where, f"header version for {key!r} must be a non-negative integer")
        for seen, _ in out:
            if not seen.intersect(versions).empty:
                raise ctx.fail(where, f"header version ranges {seen} and {versions} overlap")
        out.append((versions, header))
    for version in valid:
        if not any(version in v for v, _ in out):
            raise ctx.fail(where, f"version {version} has no header version")
    return out


def _version_notes(ctx: _Context, where: str, notes: Any, valid: Versions) -> Dict[int, str]:
    """``versionNotes``: version range → text, each version at most once, inside ``validVersions``."""
    if not isinstance(notes, dict):
        raise ctx.fail(where, "must be an object mapping version ranges to text")
    out: Dict[int, str] = {}
    for key, text in notes.items():
        versions = _versions(ctx, f"{where}[{key!r}]", key, valid.hi if valid.hi is not None else 0)
        if versions.empty or not versions.within(valid):
            raise ctx.fail(where, f"versions {key!r} not within validVersions {valid}")
        if not isinstance(text, str) or not text.strip():
            raise ctx.fail(where, f"note for {key!r} must be non-empty text")
        for version in range(versions.lo, (versions.hi if versions.hi is not None else 0) + 1):
            if version in out:
                raise ctx.fail(where, f"version {version} has two notes")
            out[version] = text.strip()
    return dict(sorted(out.items()))


def _upstream(ctx: _Context, value: Any) -> UpstreamSpec:
    """``upstream``: the Apache Kafka release (and its commit id) the file's layouts match."""
    if not isinstance(value, dict):
        raise ctx.fail("upstream", "must be an object")
    _check_keys(ctx, "upstream", value, _UPSTREAM_KEYS, ("release", "commit"))
    release, commit, files = value["release"], value["commit"], value.get("files", [])
    if not isinstance(release, str) or not _RELEASE.match(release):
        raise ctx.fail("upstream.release", f"{release!r} is not a release like '4.1.0'")
    if not isinstance(commit, str) or not _COMMIT.match(commit):
        raise ctx.fail("upstream.commit", f"{commit!r} is not a lowercase hex commit id (12-40 digits)")
    if not isinstance(files, list) or not all(isinstance(f, str) and f.endswith(".json") for f in files):
        raise ctx.fail("upstream.files", "must be a list of Kafka message definition file names")
    return UpstreamSpec(release=release, commit=commit, files=tuple(files))


def _message(
    ctx: _Context,
    section: Any,
    name: str,
    kind: str,
    api_key: Optional[int],
    where: str,
    version_prefix: Optional[str] = None,
) -> MessageSpec:
    if not isinstance(section, dict):
        raise ctx.fail(where, "must be an object")
    allowed = _SECTION_KEYS if kind in ("request", "response") else (_HEADER_KEYS | _DATA_KEYS)
    _check_keys(ctx, where, section, allowed, ("validVersions", "fields"))
    valid = Versions.parse(section["validVersions"]) if isinstance(section["validVersions"], str) else None
    if valid is None or valid.empty or valid.hi is None:
        raise ctx.fail(where, "validVersions must be a closed, non-empty range like '0-2'")
    highest = valid.hi
    flexible = _versions(ctx, where + " flexibleVersions", section.get("flexibleVersions", "none"), highest)
    if not flexible.within(valid):
        raise ctx.fail(where, f"flexibleVersions {flexible} outside validVersions {valid}")
    deprecated = _versions(ctx, where + " deprecatedVersions", section.get("deprecatedVersions", "none"), highest)
    if not deprecated.within(valid):
        raise ctx.fail(where, f"deprecatedVersions {deprecated} outside validVersions {valid}")
    common_list = section.get("commonStructs", [])
    if not isinstance(common_list, list):
        raise ctx.fail(where, "commonStructs must be a list")
    common: Dict[str, Dict[str, Any]] = {}
    for item in common_list:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ctx.fail(where + ".commonStructs", "each common struct needs a name")
        if item["name"] in common:
            raise ctx.fail(where + ".commonStructs", f"duplicate struct name {item['name']!r}")
        common[item["name"]] = item
    builder = _StructBuilder(ctx, highest, common, flexible)
    builder.claim_struct_name(name, where)
    root = builder.struct(name, section["fields"], valid, where)
    unused = sorted(set(common) - set(builder.common_built))
    if unused:
        raise ctx.fail(where + ".commonStructs", f"unused common struct(s) {', '.join(unused)}")
    headers: List[Tuple[Versions, int]] = []
    if kind in DERIVED_HEADER_VERSIONS:
        headers = _header_versions(ctx, where + ".headerVersions", section.get("headerVersions"), valid, flexible, kind)
    elif "headerVersions" in section:
        raise ctx.fail(where, "headerVersions only applies to requests and responses")
    notes = _version_notes(ctx, (where + ".versionNotes").lstrip("."), section.get("versionNotes", {}), valid)
    upstream = _upstream(ctx, section["upstream"]) if kind in ("header", "data") and "upstream" in section else None
    return MessageSpec(
        name=name,
        kind=kind,
        api_key=api_key,
        valid_versions=valid,
        flexible_versions=flexible,
        header_versions=headers,
        root=root,
        about=str(section.get("about", "")),
        source=ctx.source,
        version_prefix=version_prefix,
        deprecated_versions=deprecated,
        version_notes=notes,
        upstream=upstream,
    )


def _api(ctx: _Context, doc: Dict[str, Any]) -> ApiSpec:
    _check_keys(ctx, "", doc, _API_KEYS, ("kind", "apiKey", "name", "request", "response"))
    key = doc["apiKey"]
    if not isinstance(key, int) or not 0 <= key < 32768:
        raise ctx.fail("apiKey", f"{key!r} is not a valid api key")
    name = doc["name"]
    if not isinstance(name, str) or not name.isidentifier() or not name[:1].isupper():
        raise ctx.fail("name", f"{name!r} must be a PascalCase identifier")
    old = doc.get("oldNames", [])
    if not isinstance(old, list) or not all(isinstance(n, str) for n in old):
        raise ctx.fail("oldNames", "must be a list of strings")
    request = _message(ctx, doc["request"], name + "Request", "request", key, "request")
    response = _message(ctx, doc["response"], name + "Response", "response", key, "response")
    if request.valid_versions != response.valid_versions:
        raise ctx.fail(
            "response", f"validVersions {response.valid_versions} differ from the request's {request.valid_versions}"
        )
    about = str(doc.get("about", ""))
    for message, role in ((request, "request"), (response, "response")):
        if not message.about:
            message.about = f"The {role} of {name} (api key {key}). {about}".strip()
    upstream = _upstream(ctx, doc["upstream"]) if "upstream" in doc else None
    return ApiSpec(
        api_key=key,
        name=name,
        old_names=list(old),
        about=str(doc.get("about", "")),
        request=request,
        response=response,
        source=ctx.source,
        upstream=upstream,
    )


def _errors(ctx: _Context, doc: Dict[str, Any]) -> List[ErrorCodeSpec]:
    _check_keys(ctx, "", doc, {"kind", "codes", "about"}, ("kind", "codes"))
    out: List[ErrorCodeSpec] = []
    seen_codes: Dict[int, str] = {}
    seen_names: Dict[str, int] = {}
    for index, item in enumerate(doc["codes"]):
        where = f"codes[{index}]"
        if not isinstance(item, dict):
            raise ctx.fail(where, "must be an object")
        _check_keys(ctx, where, item, _ERROR_KEYS, ("code", "name", "retriable"))
        code, name = item["code"], item["name"]
        if not isinstance(code, int) or not -32768 <= code < 32768:
            raise ctx.fail(where, f"code {code!r} is not an int16")
        if code in seen_codes:
            raise ctx.fail(where, f"duplicate code {code}")
        names = [name] + list(item.get("oldNames", []))
        for n in names:
            if not isinstance(n, str) or not n.isidentifier() or n.upper() != n:
                raise ctx.fail(where, f"error name {n!r} must be UPPER_SNAKE")
            if n in seen_names:
                raise ctx.fail(where, f"duplicate error name {n!r} (code {seen_names[n]})")
            seen_names[n] = code
        seen_codes[code] = name
        if not isinstance(item["retriable"], bool):
            raise ctx.fail(where, "retriable must be true or false")
        out.append(
            ErrorCodeSpec(
                code=code,
                name=name,
                old_names=list(item.get("oldNames", [])),
                modern_name=item.get("modernName"),
                retriable=item["retriable"],
                introduced=item.get("introduced"),
                about=str(item.get("about", "")),
                contexts=dict(item.get("contexts", {})),
                note=item.get("note"),
            )
        )
    return sorted(out, key=lambda e: e.code)


def load_specs(directory: Optional[str] = None) -> SchemaSet:
    """Load and validate every ``*.json`` spec in ``directory`` (default: the project's ``specs/``)."""
    directory = directory or default_spec_dir()
    apis: Dict[int, ApiSpec] = {}
    headers: Dict[str, MessageSpec] = {}
    data: Dict[str, MessageSpec] = {}
    errors: List[ErrorCodeSpec] = []
    names: Dict[str, str] = {}
    for filename in sorted(os.listdir(directory)):
        if not filename.endswith(".json"):
            continue
        path = os.path.join(directory, filename)
        ctx = _Context(filename)
        with open(path, encoding="utf-8") as handle:
            doc = parse_spec_text(handle.read(), filename)
        kind = doc.get("kind")
        if kind == "api":
            api = _api(ctx, doc)
            if api.api_key in apis:
                raise ctx.fail("apiKey", f"api key {api.api_key} also defined in {apis[api.api_key].source}")
            for n in [api.name] + api.old_names:
                if n in names:
                    raise ctx.fail("name", f"api name {n!r} also used in {names[n]}")
                names[n] = filename
            apis[api.api_key] = api
        elif kind in ("header", "data"):
            _check_keys(ctx, "", doc, _HEADER_KEYS if kind == "header" else _DATA_KEYS, ("kind", "name"))
            prefix = doc.get("versionPrefix")
            if prefix not in (None, "int16"):
                raise ctx.fail("versionPrefix", "only 'int16' is supported")
            spec = _message(ctx, doc, doc["name"], kind, None, "", prefix)
            (headers if kind == "header" else data)[spec.name] = spec
        elif kind in _FOREIGN_KINDS:
            continue
        elif kind == "errors":
            if errors:
                raise ctx.fail("", "a second errors file")
            errors = _errors(ctx, doc)
        else:
            raise ctx.fail("kind", f"unknown kind {kind!r}")
    return SchemaSet(apis=apis, headers=headers, data=data, errors=errors)
