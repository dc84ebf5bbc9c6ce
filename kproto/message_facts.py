"""What a decoded message is about, read from the specs' ``entityType`` instead of guessed from names.

Why: tools above the codecs need to know which topics, partitions, groups and error codes a message
carries -- ``kproto pcap`` filters on them, the Spark ``exchanges`` table stores them, the mock broker's
fault injection answers every partition a request named.  Guessing from field names (``topic``,
``partition``, ``index``...) only works for the APIs someone listed; the spec files already say what a
field *is* (``entityType``: ``topicName``, ``groupId``, ``brokerId``, ``transactionalId``, ``producerId``, and
kproto's ``partitionIndex`` and ``errorCode``), and every generated class carries that in its ``FIELDS``
table.  Walking those tables makes every API -- the ~80 modern ones included -- yield its facts with no
per-API code.

One walk, three uses, all here so that they cannot disagree:

* :func:`entities` yields every entity-typed value of a message with the topic and partition it sits
  under;
* :func:`message_facts` sums a request and its response up as :class:`MessageFacts` (topics,
  partitions, groups, error codes): ``kproto pcap``'s filters, the traffic statistics and the Spark
  ``exchanges`` table all read an exchange this way.  An ``errorCode`` at the root of the response is
  the top-level code; every non-zero code below the root is recorded with the topic and partition it
  sits under (either None where the schema nests it elsewhere, e.g. DescribeGroups' per-group codes);
* :func:`scope_tree` folds a request into the nested scopes it names (groups → topics → partitions), which
  :mod:`kproto.broker.faults` mirrors into an error response.

Absent fields: a decoded message does not record its version, so a field the version lacks holds its
default; pass ``version`` to skip such fields, otherwise empty names (``""``) and ``None`` are not facts.
The walk reads attributes only (never ``to_dict()``, which would copy every record set).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

__all__ = [
    "TOPIC",
    "PARTITION",
    "GROUP",
    "ERROR",
    "BROKER",
    "TRANSACTIONAL_ID",
    "PRODUCER_ID",
    "Entity",
    "entities",
    "MessageFacts",
    "message_facts",
    "Scope",
    "scope_tree",
    "struct_has_entity",
]

TOPIC = "topicName"
PARTITION = "partitionIndex"
GROUP = "groupId"
ERROR = "errorCode"
BROKER = "brokerId"
TRANSACTIONAL_ID = "transactionalId"
PRODUCER_ID = "producerId"

#: Entities that open a scope: a struct carrying one of these is "about" that group, topic or partition.
SCOPE_ENTITIES = (GROUP, TOPIC, PARTITION)

# FindCoordinator (GroupCoordinator) asks about a key whose kind its key_type field gives (0: a group,
# 1: a transactional id); the spec cannot type a field whose meaning depends on another field, so this is
# the one place the walk reads fields by name.
_FIND_COORDINATOR = 10
_COORDINATOR_KEY_FIELDS = ("key", "coordinator_keys")
_KEY_TYPE_ENTITY = {0: GROUP, 1: TRANSACTIONAL_ID}


class Entity(NamedTuple):
    """One entity-typed value: ``kind`` (the spec's entityType), ``value``, the dotted ``path`` of the field
    (``topics[].partitions[].partition_index``), and the ``topic``/``partition`` it sits under (None outside
    any)."""

    kind: str
    value: Any
    path: str
    topic: Optional[str]
    partition: Optional[int]


def _present(info: Any, version: Optional[int]) -> bool:
    if version is None:
        return True
    lo, hi = info.versions
    return lo <= version <= hi


def _is_fact(value: Any) -> bool:
    return value is not None and value != ""


def _own_scope(
    struct: Any, version: Optional[int], topic: Optional[str], partition: Optional[int]
) -> Tuple[Optional[str], Optional[int]]:
    """The topic/partition a struct's own scalar fields name (they scope its other fields and children)."""
    for info in type(struct).FIELDS:
        if info.is_array or info.struct is not None or not _present(info, version):
            continue
        if info.entity_type == TOPIC:
            value = getattr(struct, info.name)
            if isinstance(value, str) and value:
                topic = value
        elif info.entity_type == PARTITION:
            value = getattr(struct, info.name)
            if isinstance(value, int):
                partition = value
    return topic, partition


def entities(message: Any, version: Optional[int] = None) -> Iterator[Entity]:
    """Every entity-typed value of ``message`` (a generated message or struct), in wire order."""
    yield from _entities(message, version, "", None, None)
    if getattr(message, "API_KEY", None) == _FIND_COORDINATOR and getattr(message, "KIND", "") == "request":
        kind = _KEY_TYPE_ENTITY.get(getattr(message, "key_type", 0))
        for name in _COORDINATOR_KEY_FIELDS if kind is not None else ():
            value = getattr(message, name, None)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and item and kind is not None:
                    yield Entity(kind, item, name, None, None)


def _entities(
    struct: Any, version: Optional[int], prefix: str, topic: Optional[str], partition: Optional[int]
) -> Iterator[Entity]:
    topic, partition = _own_scope(struct, version, topic, partition)
    for info in type(struct).FIELDS:
        if not _present(info, version):
            continue
        value = getattr(struct, info.name)
        path = prefix + info.name
        if info.struct is not None:
            items = (value or ()) if info.is_array else [value]  # a nullable array may be null
            for item in items:
                if item is not None:
                    yield from _entities(item, version, path + ("[]." if info.is_array else "."), topic, partition)
        elif info.entity_type is not None:
            for item in value if info.is_array and value is not None else [value]:
                if _is_fact(item):
                    yield Entity(info.entity_type, item, path, topic, partition)


def struct_has_entity(cls: Any, kind: str) -> bool:
    """True when struct class ``cls`` has a single-valued field of entity type ``kind`` of its own (not an
    array of them, not in a child)."""
    return any(info.entity_type == kind and info.struct is None and not info.is_array for info in cls.FIELDS)


class Scope(NamedTuple):
    """A part of a request that names a group, topic or partition: ``kind`` (an entity type), ``value``,
    the scopes nested in it, and the other entity-typed values it carries (kind → value)."""

    kind: Optional[str]
    value: Any
    children: List["Scope"]
    values: Dict[str, Any]


def scope_tree(message: Any, version: Optional[int] = None) -> Scope:
    """The scopes a request names, nested as the message nests them.

    A struct with a ``topicName`` field becomes a topic scope, one with a ``partitionIndex`` field a
    partition scope, and each element of an array of partition numbers (or of group ids) a scope of its
    own; other structs are transparent (their scopes attach to the nearest enclosing scope).
    """
    root = Scope(None, None, [], {})
    _fold(message, version, root)
    return root


def _fold(struct: Any, version: Optional[int], parent: Scope) -> None:
    fields = [info for info in type(struct).FIELDS if _present(info, version)]
    scope = parent
    for kind in SCOPE_ENTITIES:
        info = next((i for i in fields if i.entity_type == kind and i.struct is None and not i.is_array), None)
        if info is not None and parent.kind != kind:
            scope = Scope(kind, getattr(struct, info.name), [], {})
            parent.children.append(scope)
            break
    for info in fields:
        value = getattr(struct, info.name)
        if info.struct is not None:
            for item in (value if info.is_array else [value]) if value is not None else []:
                if item is not None:
                    _fold(item, version, scope)
        elif info.is_array and info.entity_type in SCOPE_ENTITIES:
            scope.children.extend(Scope(info.entity_type, item, [], {}) for item in value or [])
        elif info.entity_type is not None and _is_fact(value):
            scope.values.setdefault(info.entity_type, value)


@dataclass
class MessageFacts:
    """Topics, partitions and groups named by a request and its response, and the response's error codes."""

    topics: Set[str] = field(default_factory=set)
    partitions: Set[int] = field(default_factory=set)
    groups: Set[str] = field(default_factory=set)
    error_code: Optional[int] = None
    partition_errors: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def error_codes(self) -> Set[int]:
        """Every distinct non-zero error code of the response."""
        codes = {e["error_code"] for e in self.partition_errors}
        if self.error_code:
            codes.add(self.error_code)
        return codes


def message_facts(request: Any, response: Any, version: Optional[int] = None) -> MessageFacts:
    """Facts of a decoded request and response (either may be None) of one api ``version`` (when known,
    fields that version lacks are skipped)."""
    facts = MessageFacts()
    for message, is_response in ((request, False), (response, True)):
        if message is None:
            continue
        for entity in entities(message, version):
            if entity.kind == TOPIC:
                facts.topics.add(entity.value)
            elif entity.kind == PARTITION:
                facts.partitions.add(entity.value)
            elif entity.kind == GROUP:
                facts.groups.add(entity.value)
            elif entity.kind == ERROR and is_response:
                if "." not in entity.path:
                    facts.error_code = entity.value
                elif entity.value:
                    facts.partition_errors.append(
                        {"topic": entity.topic, "partition": entity.partition, "error_code": entity.value}
                    )
    return facts
