"""Topic ids to topic names, learnt from the Metadata answers of a capture.

Why: from Fetch v13 (and Produce v13, ConsumerGroupHeartbeat assignments) a topic is named by its
16-byte id only, while older requests and every human name it by its name.  The capture usually holds
the clients' Metadata exchanges, whose answers (v10+) carry both; :class:`TopicNames` keeps that map so
that one topic is one series, one key, whichever way a request named it.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, Optional

from kproto.capture.conversation import Exchange

__all__ = ["TopicNames", "METADATA"]

METADATA = 3
_ZERO = uuid.UUID(int=0)


class TopicNames:
    """Learns ``topic_id -> name`` from Metadata answers (:meth:`feed`) and names topics (:meth:`name`)."""

    def __init__(self) -> None:
        self.by_id: Dict[str, str] = {}

    def feed(self, exchange: Exchange) -> None:
        """Learn from one exchange (only Metadata answers teach anything)."""
        if exchange.api_key != METADATA or exchange.response is None:
            return
        for topic in getattr(exchange.response, "topics", None) or []:
            topic_id, name = getattr(topic, "topic_id", None), getattr(topic, "name", None)
            if name and topic_id is not None and topic_id != _ZERO:
                self.by_id[str(topic_id)] = str(name)

    def name(self, topic: Any) -> Optional[str]:
        """The name of a request's or response's topic entry (``name``/``topic`` or a known ``topic_id``);
        an unknown id stays its id's text, no topic at all is None."""
        for field in ("name", "topic"):
            value = getattr(topic, field, None)
            if isinstance(value, str) and value:
                return value
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is None or topic_id == _ZERO:
            return None
        return self.by_id.get(str(topic_id), str(topic_id))

    def resolve(self, key: str) -> str:
        """A topic key that may be an id's text: its name when known, else unchanged."""
        return self.by_id.get(key, key)
