"""Topics and error codes of one decoded exchange, found by walking the generated message structs.

The walk reads the ``_FIELDS`` tables of the generated classes, never ``to_dict()``: that would copy
every record set of a Produce request or Fetch response just to look at names.

* topics: ``topic``/``topic_name`` fields, and ``name`` in elements of ``topics``/``topic_data``/
  ``responses`` arrays (where the 0.9 schemas call the topic ``name``);
* partition context: ``partition``, ``partition_index`` and ``index`` (Produce);
* error codes: the response's root ``error_code`` is the top-level code; every non-zero ``error_code``
  below the root is a partition error, tagged with the topic and partition it sits under (either null
  when the schema nests it elsewhere, e.g. DescribeGroups' per-group codes).
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Set

from kproto.message_base import SCALAR, STRUCTS

__all__ = ["ExchangeFacts", "exchange_facts"]

_TOPIC_KEYS = frozenset({"topic", "topic_name"})
_TOPIC_ARRAYS = frozenset({"topics", "topic_data", "responses"})
_PARTITION_KEYS = frozenset({"partition", "partition_index", "index"})


class ExchangeFacts(NamedTuple):
    """What the ``exchanges`` table records about the contents of a request and its response."""

    topics: List[str]
    error_code: Optional[int]
    partition_errors: List[Dict[str, Any]]


def exchange_facts(request: Any, response: Any) -> ExchangeFacts:
    """Topics named by ``request`` and ``response`` (decoded messages or ``None``) and the response's
    error codes."""
    topics: Set[str] = set()
    errors: List[Dict[str, Any]] = []
    if request is not None:
        _walk(request, None, None, None, topics, None)
    top: List[Optional[int]] = [None]
    if response is not None:
        _walk(response, None, None, None, topics, errors, top)
    return ExchangeFacts(sorted(topics), top[0], errors)


def _walk(struct: Any, parent: Optional[str], topic: Optional[str], partition: Optional[int], topics: Set[str],
          errors: Optional[List[Dict[str, Any]]], top: Optional[List[Optional[int]]] = None) -> None:
    fields = struct._FIELDS
    # Names first: a struct's own topic/partition is the context of its error code and children.
    for name, shape, _ in fields:
        if shape != SCALAR:
            continue
        if name in _TOPIC_KEYS or (name == "name" and parent in _TOPIC_ARRAYS):
            value = getattr(struct, name)
            if isinstance(value, str):
                topic = value
                topics.add(value)
        elif name in _PARTITION_KEYS:
            value = getattr(struct, name)
            if isinstance(value, int):
                partition = value
    for name, shape, _ in fields:
        if shape == SCALAR and name == "error_code" and errors is not None:
            code = getattr(struct, name)
            if top is not None:
                top[0] = code
            elif code:
                errors.append({"topic": topic, "partition": partition, "error_code": code})
        elif shape == STRUCTS:
            for item in getattr(struct, name):
                _walk(item, name, topic, partition, topics, errors)
