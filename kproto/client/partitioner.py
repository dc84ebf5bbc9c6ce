"""Which partition a record goes to: the Java client's murmur2 rule for keyed records, sticky otherwise.

Why murmur2: keyed records must land on the partition every other client would pick for the same key,
or a consumer relying on "one key, one partition" breaks when producers mix libraries.  The Java client
(and kafka-python, librdkafka's ``murmur2_random``) hash the key bytes with 32-bit MurmurHash2, seed
0x9747b28c, clear the sign bit, and take the remainder by the partition count.

Records without a key go to a *sticky* partition: the same one until the producer closes a batch for
it, then the next (round robin), so batches fill up instead of every partition getting a one-record
batch (the Java client's behaviour since 2.4).
"""

from __future__ import annotations

import struct
from typing import Dict, Optional

__all__ = ["DefaultPartitioner", "murmur2", "partition_for_key"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit MurmurHash2 of ``data`` as the Java client computes it, as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    for k in struct.unpack_from(f"<{blocks}I", data) if blocks else ():
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = blocks * 4
    rest = length - tail
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition of a keyed record among ``partitions``: ``(murmur2(key) & 0x7fffffff) % partitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class DefaultPartitioner:
    """Keyed records by :func:`partition_for_key`, keyless ones sticky (see the module docstring)."""

    def __init__(self) -> None:
        #: topic -> the partition its keyless records stick to now (read by the producer without a call)
        self.sticky: Dict[str, int] = {}

    def __call__(self, topic: str, key: Optional[bytes], partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, partitions)
        current = self.sticky.get(topic)
        if current is None or current >= partitions:
            current = self.sticky[topic] = 0
        return current

    def batch_closed(self, topic: str, partition: int, partitions: int) -> None:
        """A batch of ``topic`` was closed: keyless records move on if they were sticking to it."""
        if self.sticky.get(topic) == partition:
            self.sticky[topic] = (partition + 1) % partitions
