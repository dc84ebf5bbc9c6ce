"""Committed offsets per group, with the 0.9 coordinator's size check and retention.

0.9.0 keys committed offsets by (group, topic, partition), apart from group membership: they outlive the
group's members and even the group.  Each commit records ``now + retention`` as its expiry (retention
−1 means the broker default, ``offsets.retention.minutes``); the entry is dropped once that time is
reached.  0.9.0 swept expired offsets every ``offsets.retention.check.interval.ms`` (10 minutes); here
they go exactly at their expiry, which :meth:`OffsetStore.next_expiry_ms` reports as a deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from kproto import ErrorCode

__all__ = ["StoredOffset", "OffsetStore"]

TopicPartition = Tuple[str, int]


@dataclass(frozen=True)
class StoredOffset:
    """One committed offset."""

    offset: int
    metadata: Optional[str]
    commit_timestamp_ms: int
    expire_timestamp_ms: int


def _java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class OffsetStore:
    """Offsets by group; ``metadata_max_length`` is ``offset.metadata.max.bytes`` (counted as Java does)."""

    def __init__(self, *, metadata_max_length: int, default_retention_ms: int) -> None:
        self.metadata_max_length = metadata_max_length
        self.default_retention_ms = default_retention_ms
        self._groups: Dict[str, Dict[TopicPartition, StoredOffset]] = {}

    def commit(
        self, group_id: str, tp: TopicPartition, offset: int, metadata: Optional[str], *, retention_ms: int,
        now_ms: int,
    ) -> ErrorCode:
        """Store one offset; OFFSET_METADATA_TOO_LARGE (and nothing stored) if the metadata is too long."""
        if metadata is not None and _java_length(metadata) > self.metadata_max_length:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        retention = self.default_retention_ms if retention_ms == -1 else retention_ms
        self._groups.setdefault(group_id, {})[tp] = StoredOffset(offset, metadata, now_ms, now_ms + retention)
        return ErrorCode.NONE

    def get(self, group_id: str, tp: TopicPartition) -> Optional[StoredOffset]:
        """The offset committed for ``tp``, or None."""
        return self._groups.get(group_id, {}).get(tp)

    def partitions(self, group_id: str) -> Dict[TopicPartition, StoredOffset]:
        """Every offset committed for the group."""
        return dict(self._groups.get(group_id, {}))

    def drop_group(self, group_id: str) -> None:
        """Forget a group's offsets (the coordinator gave the group up)."""
        self._groups.pop(group_id, None)

    def next_expiry_ms(self) -> Optional[int]:
        """The earliest expiry of any stored offset."""
        return min((o.expire_timestamp_ms for g in self._groups.values() for o in g.values()), default=None)

    def expire(self, now_ms: int) -> None:
        """Drop every offset whose expiry is ``now_ms`` or earlier."""
        for group_id, stored in list(self._groups.items()):
            for tp in [tp for tp, o in stored.items() if o.expire_timestamp_ms <= now_ms]:
                del stored[tp]
            if not stored:
                del self._groups[group_id]
