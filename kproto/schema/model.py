"""The schema model: what the spec files say, validated and with every version range closed.

The generator, the construct reference decoder and the tools that index traffic all read this model; none
of them reads the JSON files directly.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from kproto.schema.version_ranges import Versions

#: Fixed-width primitive types and their struct format characters (``uuid`` is 16 raw bytes).
FIXED_TYPES: Dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
    "bool": "?",
    "uuid": "16s",
}
#: Length-prefixed primitive types.
VARIABLE_TYPES = ("string", "bytes", "records")
PRIMITIVE_TYPES = tuple(FIXED_TYPES) + VARIABLE_TYPES
#: Types that may carry ``nullableVersions`` (besides arrays and structs).
NULLABLE_TYPES = ("string", "bytes", "records")
#: Smallest number of bytes any value of the type occupies on the wire in a non-flexible version
#: (bounds array counts); flexible versions use :data:`MIN_COMPACT_SIZE` for length-prefixed types.
MIN_WIRE_SIZE: Dict[str, int] = {
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "int64": 8,
    "float64": 8,
    "bool": 1,
    "uuid": 16,
    "string": 2,
    "bytes": 4,
    "records": 4,
}
#: The default of a uuid field (Kafka's "no topic id").
ZERO_UUID = uuid.UUID(int=0)
#: A compact (unsigned-varint) length or count takes at least one byte.
MIN_COMPACT_SIZE = 1


def snake_case(name: str) -> str:
    """``PartitionIndex`` → ``partition_index``; ``ISR`` style runs stay together (``IsrReplicas`` →
    ``isr_replicas``)."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return text.lower()


@dataclass
class TypeRef:
    """A field's type: a primitive, an array of something, or a struct."""

    kind: str  # a primitive name, "array" or "struct"
    element: Optional["TypeRef"] = None
    struct: Optional["StructSpec"] = None

    @property
    def is_array(self) -> bool:
        return self.kind == "array"

    @property
    def is_struct(self) -> bool:
        return self.kind == "struct"

    @property
    def is_fixed(self) -> bool:
        return self.kind in FIXED_TYPES

    def min_wire_size(self, version: int, flexible: bool = False) -> int:
        """Fewest bytes a value takes in ``version`` (``flexible``: compact lengths, tag sections)."""
        if self.kind == "array" or self.kind in VARIABLE_TYPES:
            return MIN_COMPACT_SIZE if flexible else MIN_WIRE_SIZE.get(self.kind, 4)
        if self.kind == "struct":
            assert self.struct is not None
            return self.struct.min_wire_size(version, flexible)
        return MIN_WIRE_SIZE[self.kind]

    def describe(self) -> str:
        if self.kind == "array":
            assert self.element is not None
            return "[]" + self.element.describe()
        if self.kind == "struct":
            assert self.struct is not None
            return self.struct.name
        return self.kind


@dataclass
class FieldSpec:
    """One field of a struct, with the versions that carry it."""

    name: str
    type: TypeRef
    versions: Versions
    nullable_versions: Versions
    default: Union[int, bool, str, bytes, None, list]
    ignorable: bool
    about: str
    entity_type: Optional[str] = None
    error_code_context: Optional[str] = None
    #: Tagged fields (KIP-482): the tag number and the versions in which the field travels tagged;
    #: a tagged field never appears among the ordered fields.
    tag: Optional[int] = None
    tagged_versions: Versions = field(default_factory=lambda: Versions(1, 0))
    #: Earlier names of the field (a later Kafka renamed it); the attribute uses :attr:`name`.
    old_names: List[str] = field(default_factory=list)
    #: A field-level override of the message's flexible versions (``"none"`` keeps the request header's
    #: client id a classic int16-length string in header v2); None: follow the message.
    flexible_versions: Optional[Versions] = None

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def compact_in(self, version: int, message_flexible: bool) -> bool:
        """Whether lengths of this field are unsigned varints in ``version``."""
        if self.flexible_versions is not None:
            return version in self.flexible_versions
        return message_flexible


@dataclass
class StructSpec:
    """A struct: the root of a message, an array element, or a common struct."""

    name: str
    fields: List[FieldSpec]
    versions: Versions

    def fields_for(self, version: int) -> List[FieldSpec]:
        """Every field present in ``version``, tagged ones included, in declaration order."""
        return [f for f in self.fields if version in f.versions]

    def ordered_fields(self, version: int) -> List[FieldSpec]:
        """The fields written in wire order in ``version`` (tagged fields excluded)."""
        return [f for f in self.fields if version in f.versions and not f.tagged_in(version)]

    def tagged_fields(self, version: int) -> List[FieldSpec]:
        """The tagged fields of ``version``, in ascending tag order."""
        return sorted(
            (f for f in self.fields if version in f.versions and f.tagged_in(version)), key=lambda f: f.tag or 0
        )

    def min_wire_size(self, version: int, flexible: bool) -> int:
        size = sum(
            1 if f.type.is_struct and f.nullable_in(version) else f.type.min_wire_size(version, flexible)
            for f in self.ordered_fields(version)
        )
        return size + (MIN_COMPACT_SIZE if flexible else 0)  # the (empty) tag section

    def nested_structs(self) -> List["StructSpec"]:
        """Every struct reachable from this one, depth first, each once."""
        seen: List[StructSpec] = []

        def walk(struct: StructSpec) -> None:
            for f in struct.fields:
                t = f.type.element if f.type.is_array else f.type
                if t is not None and t.is_struct and t.struct is not None and t.struct not in seen:
                    seen.append(t.struct)
                    walk(t.struct)

        walk(self)
        return seen


@dataclass(frozen=True)
class UpstreamSpec:
    """Where a spec file's layouts come from: the Apache Kafka release they match, version for version.

    ``commit`` is the commit id that release's build stamps into its ``kafka-clients`` jar
    (``kafka/kafka-version.properties``); ``files`` are Kafka's message definition files the spec was
    compared with (``clients/src/main/resources/common/message/``).
    """

    release: str
    commit: str
    files: Tuple[str, ...] = ()


@dataclass
class MessageSpec:
    """A request, response, header or embedded data schema."""

    name: str  # class name, e.g. "ProduceRequest"
    kind: str  # "request", "response", "header", "data"
    api_key: Optional[int]
    valid_versions: Versions
    flexible_versions: Versions
    header_versions: List[Tuple[Versions, int]]
    root: StructSpec
    about: str
    source: str
    version_prefix: Optional[str] = None
    #: Versions Kafka 4.0 stopped serving (KIP-896); kproto still encodes and decodes them.
    deprecated_versions: Versions = field(default_factory=lambda: Versions(1, 0))
    #: Why a version exists, where Kafka's definitions say (a KIP, a new error code, a behaviour), by
    #: version; documentation only, like ``about``.
    version_notes: Dict[int, str] = field(default_factory=dict)
    #: The release a header or embedded schema file matches (for an API: :attr:`ApiSpec.upstream`).
    upstream: Optional[UpstreamSpec] = None

    def flexible_in(self, version: int) -> bool:
        return version in self.flexible_versions

    def header_version(self, version: int) -> int:
        for versions, header in self.header_versions:
            if version in versions:
                return header
        raise KeyError(version)


@dataclass
class ApiSpec:
    """One API: its key, names and the request/response pair."""

    api_key: int
    name: str
    old_names: List[str]
    about: str
    request: MessageSpec
    response: MessageSpec
    source: str
    #: The Apache Kafka release whose definitions the file matches.
    upstream: Optional[UpstreamSpec] = None


@dataclass
class ErrorCodeSpec:
    code: int
    name: str
    old_names: List[str]
    modern_name: Optional[str]
    retriable: bool
    introduced: Optional[str]
    about: str
    contexts: Dict[str, str] = field(default_factory=dict)
    note: Optional[str] = None


@dataclass
class SchemaSet:
    """Everything loaded from a spec directory."""

    apis: Dict[int, ApiSpec]
    headers: Dict[str, MessageSpec]
    data: Dict[str, MessageSpec]
    errors: List[ErrorCodeSpec]

    def messages(self) -> List[MessageSpec]:
        out: List[MessageSpec] = []
        for api in sorted(self.apis.values(), key=lambda a: a.api_key):
            out += [api.request, api.response]
        return out
