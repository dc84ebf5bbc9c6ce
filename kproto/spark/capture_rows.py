"""TCP segments of captures in, rows of the three tables out: the decode both pipelines share.

:class:`CaptureTableDecoder` runs the capture package's own :class:`~kproto.capture.TcpReassembler`
and :class:`~kproto.capture.conversation.KafkaConversations` (no second copy of either) and turns
their :class:`~kproto.capture.conversation.Exchange` and :class:`~kproto.capture.conversation.Problem`
records into ``exchanges``/``problems`` rows, and the message sets of Produce requests and Fetch
responses into ``messages`` rows with the columnar records decoder.

The single-process path feeds it every segment of every file through one instance; the Spark path
feeds one instance per connection 4-tuple (all segments of that 4-tuple, in capture order).  The rows
are the same either way: reassembly and pairing keep their state per connection, and connections are
named by :class:`~kproto.spark.connection_names.ConnectionNames`, not by reassembler serials.

Packet numbers: segments from several files go through one reassembler, so a segment's ``number``
carries its file too, as ``file_tag(file) + packet`` (the file's index in the upper 32 bits); rows get
the file name and the packet number in that file back.
"""

from __future__ import annotations

from typing import Any, Collection, Dict, Iterator, List, Optional, Tuple

import pyarrow as pa

from kproto.capture.conversation import DEFAULT_PORTS, Exchange, KafkaConversations, Problem
from kproto.capture.diagnostics import CaptureDiagnostic
from kproto.capture.packets import TcpSegment
from kproto.capture.reassembly import TcpReassembler
from kproto.errors import DecodeError
from kproto.spark.batches import MessageBuffer, RowBuffer, message_batch, ns_to_us
from kproto.spark.connection_names import ConnectionNames
from kproto.message_facts import message_facts
from kproto.spark.schema import EXCHANGES, PROBLEMS

__all__ = ["CaptureTableDecoder", "capture_problem_row", "PROBLEM_BAD_MESSAGE_SET", "PROBLEM_CAPTURE"]

#: ``problems.kind`` of a Produce/Fetch message set that does not decode (the exchange is still listed).
PROBLEM_BAD_MESSAGE_SET = "bad-message-set"
#: ``problems.kind`` of capture file damage (not a capture, truncated, malformed packets, ...).
PROBLEM_CAPTURE = "capture"

_FILE_SHIFT = 32
_PACKET_MASK = (1 << _FILE_SHIFT) - 1

Where = Tuple[Optional[str], Optional[int]]


def capture_problem_row(diag: CaptureDiagnostic, file: str) -> Tuple[Any, ...]:
    """The ``problems`` row of a capture reader diagnostic (same detail text as the library's Problem)."""
    return (PROBLEM_CAPTURE, str(diag), file, diag.packet, diag.file_offset, None, None, None, None)


class CaptureTableDecoder:
    """Segments in capture order → batches of ``exchanges``, ``messages`` and ``problems`` rows.

    ``ports``/``detect`` are those of :class:`~kproto.capture.conversation.KafkaConversations`.  Call
    :meth:`feed` per segment (numbered with :meth:`file_tag`), :meth:`diagnostic` per capture reader
    diagnostic, :meth:`finish` at the end, and :meth:`take` whenever convenient to collect batches.
    """

    def __init__(self, *, ports: Collection[int] = DEFAULT_PORTS, detect: bool = True) -> None:
        self._reassembler = TcpReassembler()
        self._conversations = KafkaConversations(ports=ports, detect=detect)
        self._names = ConnectionNames()
        self._files: List[str] = []
        self._file_index: Dict[str, int] = {}
        self.exchanges = RowBuffer(EXCHANGES)
        self.problems = RowBuffer(PROBLEMS)
        self.messages = MessageBuffer()

    # --- input ------------------------------------------------------------------------------------------

    def file_tag(self, file: str) -> int:
        """The number to add to the packet numbers of ``file``'s segments."""
        index = self._file_index.get(file)
        if index is None:
            index = self._file_index[file] = len(self._files)
            self._files.append(file)
        return index << _FILE_SHIFT

    def feed(self, segment: TcpSegment) -> None:
        """One segment, ``number`` tagged with its file."""
        reassembler = self._reassembler
        reassembler.feed(segment)
        self._drain(reassembler.events())

    def diagnostic(self, diag: CaptureDiagnostic, file: str) -> None:
        """A capture reader diagnostic of ``file``."""
        self.problems.append(capture_problem_row(diag, file))

    def finish(self) -> None:
        """End of input: what is still open is closed, still unanswered reported."""
        self._reassembler.finish()
        self._drain(self._reassembler.events())
        self._conversations.finish()
        self._records()

    def pending(self) -> int:
        """Rows waiting in the buffers (to decide when to :meth:`take`)."""
        return len(self.exchanges) + len(self.problems) + len(self.messages)

    def take(self) -> Iterator[Tuple[str, pa.RecordBatch]]:
        """The buffered rows as ``(table name, batch)`` pairs; the buffers are emptied."""
        for name, buffer in (("exchanges", self.exchanges), ("messages", self.messages), ("problems", self.problems)):
            batch = buffer.take()
            if batch is not None:
                yield name, batch

    # --- records to rows ------------------------------------------------------------------------------------

    def _drain(self, events: List[Any]) -> None:
        if not events:
            return
        see = self._names.see
        feed = self._conversations.feed
        for event in events:
            see(event.connection)
            feed(event)
        self._records()

    def _records(self) -> None:
        for record in self._conversations.records():
            if type(record) is Exchange:
                self._exchange(record)
            else:
                self._problem(record)  # type: ignore[arg-type]  # SASL tokens never reach this reader

    def _where(self, number: Optional[int]) -> Where:
        if number is None:
            return None, None
        return self._files[number >> _FILE_SHIFT], number & _PACKET_MASK

    def _problem(self, p: Problem) -> None:
        file, packet = self._where(p.packet)
        connection = source = None
        if p.connection is not None:
            connection = self._names.name(p.connection)
            if p.direction is not None:
                source = str(p.connection.source(p.direction))
        self.problems.append(
            (p.kind.value, p.detail, file, packet, None, connection, source, p.offset, ns_to_us(p.timestamp_ns))
        )

    def _exchange(self, ex: Exchange) -> None:
        connection = self._names.name(ex.connection)
        exchange_id = f"{connection}/{ex.request_offset}"
        file, packet = self._where(ex.request_packet)
        response_file, response_packet = self._where(ex.response_packet)
        facts = message_facts(ex.request, ex.response)
        latency = ex.latency_ns
        self.exchanges.append(
            (
                exchange_id,
                ns_to_us(ex.request_time_ns),
                connection,
                str(ex.client),
                str(ex.server),
                ex.api_key,
                ex.api_name,
                ex.api_version,
                ex.correlation_id,
                getattr(ex.request_header, "client_id", None),
                ex.request_size,
                ex.response_size,
                ns_to_us(ex.response_time_ns),
                None if latency is None else latency / 1e6,
                ex.expects_response,
                facts.error_code,
                facts.partition_errors,
                sorted(facts.topics),
                _text(ex.request_error),
                _text(ex.response_error),
                file,
                packet,
                response_file,
                response_packet,
            )
        )
        if ex.api_key == 0 and ex.request is not None:
            sets = ((td.name, pd.index, pd.records) for td in ex.request.topic_data for pd in td.partition_data)
            self._messages(ex, exchange_id, connection, "request", sets, file, packet, ex.request_time_ns)
        elif ex.api_key == 1 and ex.response is not None:
            sets = ((r.topic, p.partition_index, p.records) for r in ex.response.responses for p in r.partitions)
            self._messages(
                ex, exchange_id, connection, "response", sets, response_file, response_packet, ex.response_time_ns
            )

    def _messages(
        self,
        ex: Exchange,
        exchange_id: str,
        connection: str,
        direction: str,
        sets: Any,
        file: Optional[str],
        packet: Optional[int],
        time_ns: Optional[int],
    ) -> None:
        time_us = ns_to_us(time_ns)
        for topic, partition, records in sets:
            if records is None or not len(records):
                continue
            try:
                batch = message_batch(
                    records.raw,
                    topic=topic,
                    partition=partition,
                    exchange_id=exchange_id,
                    connection=connection,
                    direction=direction,
                    file=file,
                    time_us=time_us,
                )
            except DecodeError as exc:
                sender = ex.client if direction == "request" else ex.server
                offset = ex.request_offset if direction == "request" else ex.response_offset
                self.problems.append(
                    (
                        PROBLEM_BAD_MESSAGE_SET,
                        f"{exchange_id}: {topic}-{partition}: {exc}",
                        file,
                        packet,
                        None,
                        connection,
                        str(sender),
                        offset,
                        time_us,
                    )
                )
                continue
            self.messages.append(batch)


def _text(error: Optional[BaseException]) -> Optional[str]:
    return None if error is None else str(error)
