"""Transactions: which partitions each transactional producer has open, and ending them with markers.

Why: a transactional producer (``transactional.id``) writes batches flagged transactional to several
partitions and then commits or aborts them all at once.  Consumers reading ``read_committed`` must see
nothing of a transaction until it ends and nothing of an aborted one ever.  Kafka does this with three
things, all modelled here and in :class:`~kproto.broker.log.PartitionLog`:

* the *transaction coordinator* (this module) knows each transactional id's open partitions
  (AddPartitionsToTxn) and, on EndTxn, writes a control batch -- a COMMIT or ABORT marker -- to each;
* each partition's *last stable offset* (LSO) stays at the first offset of its oldest open
  transaction, and read_committed fetches stop there;
* each partition's *aborted-transaction index* lists (producer id, first offset, last offset) of
  aborted transactions, sent with a read_committed fetch so the consumer drops their records.

Theory of operation, per transactional id (the producer id and epoch come from InitProducerId, see
:mod:`kproto.broker.producers`)::

    state     event                         next      effect
    EMPTY     AddPartitionsToTxn            ONGOING   partitions recorded
    ONGOING   AddPartitionsToTxn            ONGOING   more partitions recorded
    any       AddOffsetsToTxn               ONGOING   a group's offsets may be held
    ONGOING   TxnOffsetCommit               ONGOING   offsets held for the group
    ONGOING   EndTxn(commit | abort)        EMPTY     a marker on every recorded partition; held
                                                      offsets stored on commit, dropped on abort
    EMPTY     EndTxn                        EMPTY     INVALID_TXN_STATE
    ONGOING   InitProducerId (new epoch)    EMPTY     the open transaction is aborted first

A producer id or epoch that is not the transactional id's current one is fenced (PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH for requests older than KIP-588); an id never issued for this transactional id
is INVALID_PRODUCER_ID_MAPPING.

Consumer offsets inside a transaction (consume-transform-produce): AddOffsetsToTxn adds a group to
the transaction, TxnOffsetCommit holds offsets for it, and they reach the group's offset store only
when the transaction commits (``commit_offsets``); an abort drops them.  Transactions do not time out
here, and TxnOffsetCommit's generation and member fields (v3+) are not checked.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

from kproto import ErrorCode
from kproto.broker.cluster import Cluster
from kproto.broker.producers import ProducerIds

__all__ = ["TransactionCoordinator"]

_Partition = Tuple[str, int]
_Offsets = Dict[_Partition, Tuple[int, Optional[str]]]


class TransactionCoordinator:
    """The open partitions of each transactional id, and the markers that end them."""

    def __init__(
        self,
        cluster: Cluster,
        producer_ids: ProducerIds,
        clock: Callable[[], int],
        commit_offsets: Callable[[str, _Offsets], None] = lambda group_id, offsets: None,
    ) -> None:
        self.cluster = cluster
        self.producer_ids = producer_ids
        self._clock = clock
        self._commit_offsets = commit_offsets
        self._open: Dict[str, Set[_Partition]] = {}
        self._offsets: Dict[str, Dict[str, _Offsets]] = {}  # transactional id -> group -> pending offsets

    def open_partitions(self, transactional_id: str) -> Set[_Partition]:
        """The partitions ``transactional_id`` has written to since its transaction began."""
        return self._open.get(transactional_id, set())

    def check(self, transactional_id: str, producer_id: int, epoch: int, fenced: ErrorCode) -> ErrorCode:
        """NONE when ``producer_id``/``epoch`` are the transactional id's current ones, else the error."""
        if self.producer_ids.transactional_producer(transactional_id) != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if self.producer_ids.epoch(producer_id) != epoch:
            return fenced
        return ErrorCode.NONE

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: List[_Partition], fenced: ErrorCode
    ) -> Dict[_Partition, ErrorCode]:
        """AddPartitionsToTxn: each partition's answer (all share one error when the producer is wrong)."""
        code = self.check(transactional_id, producer_id, epoch, fenced)
        if code == ErrorCode.NONE:
            unknown = [p for p in partitions if self.cluster.partition(*p) is None]
            if unknown:
                # Kafka refuses the whole request: the unknown ones fail, the rest are not added.
                return {
                    p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for p in partitions
                }
            self._open.setdefault(transactional_id, set()).update(partitions)
        return {p: code for p in partitions}

    def add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str, fenced: ErrorCode
    ) -> ErrorCode:
        """AddOffsetsToTxn: the transaction will carry offsets of ``group_id``."""
        code = self.check(transactional_id, producer_id, epoch, fenced)
        if code == ErrorCode.NONE:
            self._open.setdefault(transactional_id, set())
            self._offsets.setdefault(transactional_id, {}).setdefault(group_id, {})
        return code

    def commit_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str, offsets: _Offsets, fenced: ErrorCode
    ) -> ErrorCode:
        """TxnOffsetCommit: hold ``offsets`` until the transaction ends (one code for every partition)."""
        code = self.check(transactional_id, producer_id, epoch, fenced)
        if code != ErrorCode.NONE:
            return code
        pending = self._offsets.get(transactional_id, {}).get(group_id)
        if pending is None:
            return ErrorCode.INVALID_TXN_STATE  # AddOffsetsToTxn first
        pending.update(offsets)
        return ErrorCode.NONE

    def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool, fenced: ErrorCode) -> ErrorCode:
        """EndTxn: write a marker to every open partition and close the transaction."""
        code = self.check(transactional_id, producer_id, epoch, fenced)
        if code != ErrorCode.NONE:
            return code
        if transactional_id not in self._open:
            return ErrorCode.INVALID_TXN_STATE
        self._write_markers(transactional_id, producer_id, epoch, commit)
        return ErrorCode.NONE

    def abort_open(self, transactional_id: str) -> None:
        """Abort the transaction ``transactional_id`` has open (before InitProducerId bumps its epoch)."""
        producer_id = self.producer_ids.transactional_producer(transactional_id)
        epoch = self.producer_ids.epoch(producer_id) if producer_id is not None else None
        if transactional_id in self._open and producer_id is not None and epoch is not None:
            self._write_markers(transactional_id, producer_id, epoch, False)
        self._open.pop(transactional_id, None)
        self._offsets.pop(transactional_id, None)

    def _write_markers(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        now = self._clock()
        for topic, index in sorted(self._open.pop(transactional_id)):
            log = self.cluster.partition(topic, index)
            if log is not None:
                log.end_transaction(producer_id, epoch, commit, now)
        for group_id, offsets in self._offsets.pop(transactional_id, {}).items():
            if commit and offsets:
                self._commit_offsets(group_id, offsets)
