"""Committed offsets per group, with the coordinator's size check and retention.

Kafka keys committed offsets by (group, topic, partition), apart from group membership: they outlive the
group's members.  Each commit records ``commit time + retention`` as its expiry (retention −1 means the
broker default, ``offsets.retention.minutes``); the entry is dropped once that time is reached.  The
commit time is the coordinator's clock, except for OffsetCommit v1, whose partitions may carry their own
commit timestamp.  From OffsetCommit v6 a commit also records the leader epoch of the consumed record,
which OffsetFetch v5+ hands back (−1: unknown).  0.9.0 swept expired offsets every
``offsets.retention.check.interval.ms`` (10 minutes); here
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
    leader_epoch: int = -1


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
        self,
        group_id: str,
        tp: TopicPartition,
        offset: int,
        metadata: Optional[str],
        *,
        retention_ms: int,
        now_ms: int,
        leader_epoch: int = -1,
        commit_timestamp_ms: int = -1,
    ) -> ErrorCode:
        """Store one offset; OFFSET_METADATA_TOO_LARGE (and nothing stored) if the metadata is too long.

        ``commit_timestamp_ms`` (−1: ``now_ms``) is when the commit counts as made, for its expiry.
        """
        if metadata is not None and _java_length(metadata) > self.metadata_max_length:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        retention = self.default_retention_ms if retention_ms == -1 else retention_ms
        committed_at = now_ms if commit_timestamp_ms == -1 else commit_timestamp_ms
        self._groups.setdefault(group_id, {})[tp] = StoredOffset(
            offset, metadata, committed_at, committed_at + retention, leader_epoch
        )
        return ErrorCode.NONE

    def delete(self, group_id: str, tp: TopicPartition) -> None:
        """Forget one committed offset (OffsetDelete)."""
        stored = self._groups.get(group_id, {})
        stored.pop(tp, None)
        if not stored:
            self._groups.pop(group_id, None)

    def has_offsets(self, group_id: str) -> bool:
        """Whether any offset is stored for the group."""
        return bool(self._groups.get(group_id))

    def get(self, group_id: str, tp: TopicPartition) -> Optional[StoredOffset]:
        """The offset committed for ``tp``, or None."""
        return self._groups.get(group_id, {}).get(tp)

    def partitions(self, group_id: str) -> Dict[TopicPartition, StoredOffset]:
        """Every offset committed for the group."""
        return dict(self._groups.get(group_id, {}))

    def drop_group(self, group_id: str) -> None:
        """Forget a group's offsets (the group was deleted, or the coordinator gave it up)."""
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
