"""Idempotent producers: the ids the broker issues and the sequence state each partition keeps.

Why: an idempotent producer (the default of kafka-python 3.x, librdkafka and aiokafka) retries a batch
whose answer it did not get, and relies on the broker to recognise the retry.  It asks for a producer
id and epoch (InitProducerId), numbers its batches per partition from sequence 0, and expects:

* a retry of one of the last five batches it wrote to a partition -> NONE with the *original* base
  offset, nothing stored twice;
* a batch whose first sequence is not the last one + 1 -> OUT_OF_ORDER_SEQUENCE_NUMBER (a gap);
* an epoch older than the producer's current one -> INVALID_PRODUCER_EPOCH (a fenced zombie);
* a newer epoch of an idempotent (non-transactional) producer -> accepted from sequence 0: Kafka's own
  producer bumps its epoch on its side after a failed batch, and Kafka's log takes the higher epoch;
* a producer id this broker never issued (or has forgotten) -> UNKNOWN_PRODUCER_ID.

A new epoch must start at sequence 0.  Sequences wrap from 2**31 - 1 to 0.

:class:`ProducerIds` is broker-wide (what InitProducerId hands out); :class:`PartitionProducers` is one
partition's table, consulted before an append and updated after it.  Both are bounded: past
``max_producer_ids`` the oldest id is forgotten, as Kafka expires idle producer ids.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Deque, Dict, Optional, Tuple, Union

from kproto import ErrorCode
from kproto.broker.batches import BatchHeader

__all__ = ["DEFAULT_MAX_PRODUCER_IDS", "DUPLICATE_WINDOW", "PartitionProducers", "ProducerIds"]

#: Batches per producer and partition remembered for duplicate detection (Kafka's is 5 as well:
#: ``max.in.flight.requests.per.connection`` may not exceed it with idempotence).
DUPLICATE_WINDOW = 5
#: Producer ids remembered by default before the oldest is forgotten.
DEFAULT_MAX_PRODUCER_IDS = 100_000
_MAX_EPOCH = 32767 - 1  # an epoch at the top of int16 moves the producer to a fresh id
_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms default


class ProducerIds:
    """Producer ids issued by InitProducerId, with each one's current epoch."""

    def __init__(self, max_producer_ids: int = DEFAULT_MAX_PRODUCER_IDS) -> None:
        self.max_producer_ids = max_producer_ids
        self._epochs: "OrderedDict[int, int]" = OrderedDict()
        self._by_transactional_id: Dict[str, int] = {}
        self._next_id = 1000

    def transactional_producer(self, transactional_id: str) -> Optional[int]:
        """The producer id ``transactional_id`` holds, or None if it has none (or it was forgotten)."""
        producer_id = self._by_transactional_id.get(transactional_id)
        return producer_id if producer_id is not None and producer_id in self._epochs else None

    def epoch(self, producer_id: int) -> Optional[int]:
        """The current epoch of ``producer_id``, or None if it was never issued (or is forgotten)."""
        return self._epochs.get(producer_id)

    def may_bump(self, producer_id: int, epoch: int) -> bool:
        """Whether a batch may move ``producer_id`` to the newer ``epoch`` on its own: yes for an idempotent
        producer (its client bumps the epoch itself), no for a transactional one (its epochs come from
        InitProducerId and EndTxn, and fence older instances)."""
        current = self._epochs.get(producer_id)
        return (
            current is not None
            and current < epoch <= _MAX_EPOCH + 1
            and producer_id not in self._by_transactional_id.values()
        )

    def bumped(self, producer_id: int, epoch: int) -> None:
        """A batch of ``producer_id`` at the newer ``epoch`` was appended: older epochs are fenced from now."""
        if self._epochs.get(producer_id, epoch) < epoch:
            self._epochs[producer_id] = epoch

    def init(
        self,
        transactional_id: Optional[str],
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
        *,
        fenced_code: ErrorCode = ErrorCode.PRODUCER_FENCED,
    ) -> Tuple[ErrorCode, int, int]:
        """Answer one InitProducerId: (error code, producer id, epoch).

        Without a transactional id a fresh id is issued at epoch 0, whatever id/epoch the request names:
        Apache Kafka's transaction coordinator does the same, so an idempotent producer recovering from a
        failed batch (v3+ names its current pair) simply starts over under a new id.  A transactional id
        keeps its producer id across calls and each call bumps the epoch (fencing older instances); a
        named id/epoch that is not its current one is ``fenced_code``.
        """
        if transactional_id is not None:
            if not 0 < transaction_timeout_ms <= _MAX_TRANSACTION_TIMEOUT_MS:
                return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
            known = self._by_transactional_id.get(transactional_id)
            if known is not None and self._epochs.get(known) is None:
                known = None  # forgotten
            if producer_id >= 0 and (known != producer_id or self._epochs.get(known) != producer_epoch):
                return fenced_code, -1, -1
            if known is None:
                return self._issue(transactional_id)
            return self._bump(known, transactional_id)
        return self._issue(None)

    def _issue(self, transactional_id: Optional[str]) -> Tuple[ErrorCode, int, int]:
        producer_id = self._next_id
        self._next_id += 1
        self._epochs[producer_id] = 0
        if transactional_id is not None:
            self._by_transactional_id[transactional_id] = producer_id
        while len(self._epochs) > self.max_producer_ids:
            self._epochs.popitem(last=False)
        if len(self._by_transactional_id) > self.max_producer_ids:
            self._by_transactional_id = {t: p for t, p in self._by_transactional_id.items() if p in self._epochs}
        return ErrorCode.NONE, producer_id, 0

    def _bump(self, producer_id: int, transactional_id: Optional[str]) -> Tuple[ErrorCode, int, int]:
        epoch = self._epochs[producer_id] + 1
        if epoch > _MAX_EPOCH:
            del self._epochs[producer_id]
            return self._issue(transactional_id)
        self._epochs[producer_id] = epoch
        self._epochs.move_to_end(producer_id)
        return ErrorCode.NONE, producer_id, epoch


@dataclass
class _ProducerEntry:
    epoch: int
    #: (first sequence, last sequence, base offset) of the last DUPLICATE_WINDOW batches appended.
    batches: Deque[Tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=DUPLICATE_WINDOW))


class PartitionProducers:
    """One partition's sequence state per producer id."""

    def __init__(self) -> None:
        self._entries: Dict[int, _ProducerEntry] = {}

    def check(self, header: BatchHeader, ids: ProducerIds) -> Union[ErrorCode, int, None]:
        """Whether ``header``'s batch may be appended: None (yes), the base offset it was appended at
        before (a duplicate: answer NONE with it, store nothing), or the error code that refuses it."""
        if header.producer_id < 0:
            return None  # not an idempotent producer
        issued_epoch = ids.epoch(header.producer_id)
        if issued_epoch is None:
            self._entries.pop(header.producer_id, None)
            return ErrorCode.UNKNOWN_PRODUCER_ID
        if header.producer_epoch != issued_epoch and not ids.may_bump(header.producer_id, header.producer_epoch):
            return ErrorCode.INVALID_PRODUCER_EPOCH
        entry = self._entries.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            return None if header.base_sequence == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        first, last = header.base_sequence, header.last_sequence
        for seen_first, seen_last, base_offset in entry.batches:
            if seen_first == first and seen_last == last:
                return base_offset
        if not entry.batches or first != (entry.batches[-1][1] + 1) % 2**31:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return None

    def record(self, header: BatchHeader, base_offset: int, ids: ProducerIds) -> None:
        """Remember a batch that :meth:`check` admitted and the log appended at ``base_offset``."""
        if header.producer_id < 0:
            return
        ids.bumped(header.producer_id, header.producer_epoch)
        entry = self._entries.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = self._entries[header.producer_id] = _ProducerEntry(header.producer_epoch)
            if len(self._entries) > ids.max_producer_ids:
                self._entries = {p: e for p, e in self._entries.items() if ids.epoch(p) is not None}
        entry.batches.append((header.base_sequence, header.last_sequence, base_offset))
