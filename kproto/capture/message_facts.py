"""What a captured request/response pair is about: topics, partitions, groups and error codes.

``kproto pcap``'s filters and the Spark ``exchanges`` table both summarise an exchange this way, so the
summary lives in one place.  The values come from :func:`kproto.message_facts.entities`, which walks the
generated classes' ``FIELDS`` tables on the specs' entity types (``topicName``, ``partitionIndex``,
``groupId``, ``errorCode``); every API the specs describe is covered without naming its fields here.

Error codes: an ``errorCode`` field at the root of the response is the top-level code; every non-zero
code below the root is recorded with the topic and partition it sits under (either None where the schema
nests it elsewhere, e.g. DescribeGroups' per-group codes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

from kproto.message_facts import ERROR, GROUP, PARTITION, TOPIC, entities

__all__ = ["MessageFacts", "message_facts"]


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
                        {"topic": entity.topic, "partition": entity.partition, "error_code": entity.value})
    return facts
