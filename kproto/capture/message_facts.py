"""What a decoded request/response pair is about: topics, partitions, groups and error codes.

One walk over the generated classes' ``_FIELDS`` tables (never ``to_dict()``, which would copy every
record set of a Produce request or Fetch response just to read names), shared by ``kproto pcap``'s
filters and the Spark ``exchanges`` table so the two cannot disagree.  Fields are recognised by the
names the 0.9 schemas give them:

* topics: ``topic``/``topic_name`` fields, and ``name`` in elements of ``topics``/``topic_data``/
  ``responses`` arrays;
* partitions: ``partition``, ``partition_index``, ``index`` (Produce) and ``partition_indexes``;
* groups: ``group_id`` fields and, in a GroupCoordinator request, ``key``;
* error codes: the response's root ``error_code`` is the top-level code; every non-zero ``error_code``
  below the root is a partition error, tagged with the topic and partition it sits under (either None
  where the schema nests it elsewhere, e.g. DescribeGroups' per-group codes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

from kproto.message_base import SCALAR, SCALARS, STRUCTS

__all__ = ["MessageFacts", "message_facts"]

_TOPIC_KEYS = frozenset({"topic", "topic_name"})
_TOPIC_ARRAYS = frozenset({"topics", "topic_data", "responses"})
_PARTITION_KEYS = frozenset({"partition", "partition_index", "index"})
_GROUP_COORDINATOR = 10


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


def message_facts(request: Any, response: Any) -> MessageFacts:
    """Facts of a decoded request and response (either may be None)."""
    facts = MessageFacts()
    if request is not None:
        _walk(request, None, None, None, facts, errors=False)
        if request.API_KEY == _GROUP_COORDINATOR and isinstance(getattr(request, "key", None), str):
            facts.groups.add(request.key)
    if response is not None:
        _walk(response, None, None, None, facts, errors=True, root=True)
    return facts


def _walk(struct: Any, parent: Optional[str], topic: Optional[str], partition: Optional[int], facts: MessageFacts,
          errors: bool, root: bool = False) -> None:
    fields = struct._FIELDS
    # Names first: a struct's own topic/partition is the context of its error code and children.
    for name, shape, _ in fields:
        if shape == SCALARS and name == "partition_indexes":
            facts.partitions.update(getattr(struct, name))
        if shape != SCALAR:
            continue
        value = getattr(struct, name)
        if name in _TOPIC_KEYS or (name == "name" and parent in _TOPIC_ARRAYS):
            if isinstance(value, str):
                topic = value
                facts.topics.add(value)
        elif name in _PARTITION_KEYS and isinstance(value, int):
            partition = value
            facts.partitions.add(value)
        elif name == "group_id" and isinstance(value, str):
            facts.groups.add(value)
    for name, shape, _ in fields:
        if shape == SCALAR and name == "error_code" and errors:
            code = getattr(struct, name)
            if root:
                facts.error_code = code
            elif code:
                facts.partition_errors.append({"topic": topic, "partition": partition, "error_code": code})
        elif shape == STRUCTS:
            for item in getattr(struct, name):
                _walk(item, name, topic, partition, facts, errors)
