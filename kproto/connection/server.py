"""The server (broker) side of one Kafka connection, sans-I/O.

Theory of operation
===================

:class:`ServerConnection` parses requests out of whatever bytes the socket produced (any chunking)
and frames the responses; the caller owns the socket and decides what to answer.
``receive_data(data)`` returns one event per complete frame: :class:`RequestReceived` for a request that
decodes, :class:`BadRequest` for a frame that does not (unknown api key or version, truncated or
trailing bytes) -- its framing was intact, so the stream can go on, but a 0.8/0.9 broker would close
the connection, and so does :class:`~kproto.broker.MockBroker`.  ``receive_data(b"")`` means the client
closed and yields :class:`ClientClosed`.

A broker answers the requests of one connection in the order they came (docs/protocol-notes.md, "Ordering"), so the
requests owed a response form a FIFO queue.  ``send_response(request, message)`` frames the response
for ``request``, which must be the oldest request still owed one; answering another, answering twice,
or answering an ``acks=0`` Produce (which gets no response) raises
:class:`~kproto.errors.LocalProtocolError` (the caller's misuse; a
:class:`~kproto.errors.ProtocolError`).

The connection is the :data:`SERVER_TRANSITIONS` table (state × event → state), applied by
:class:`kproto.state_machine.StateMachine`; its ending (closing, the client closing, a violation) is
the client side's, from :mod:`kproto.connection.lifecycle`.  A frame whose size prefix is negative or
above ``max_frame_size`` raises :class:`~kproto.errors.LimitExceededError` and the connection is
``FAILED`` for good (its framing is lost).  As on the client side, requests completed
before the violation within the same call are returned first and the error raises on the next call.

``broker_quirks="0.8.2"`` makes GroupCoordinator v0 responses carry correlation id 0, as 0.8.2 brokers
did (useful to test clients against that quirk).
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, List, Mapping, Optional, Tuple, Union

from kproto.connection.lifecycle import connection_machine, connection_transitions
from kproto.connection.correlation import GROUP_COORDINATOR_KEY, check_quirks
from kproto.errors import KprotoError, LimitExceededError, LocalProtocolError, RemoteProtocolError
from kproto.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameReader,
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_response,
    expects_response,
)
from kproto.message_base import Message
from kproto.state_machine import StateMachine

__all__ = [
    "ServerState",
    "ServerEvent",
    "SERVER_TRANSITIONS",
    "RequestReceived",
    "BadRequest",
    "ClientClosed",
    "ServerConnection",
]


class ServerState(enum.Enum):
    """Where a server connection stands."""

    IDLE = "no response owed"
    OWING = "responses owed, oldest first"
    CLOSED = "closed by either side"
    FAILED = "the client broke the framing; nothing more is accepted"


class ServerEvent(enum.Enum):
    """What happens to a server connection."""

    REQUEST = "a request that expects a response"
    REQUEST_ONE_WAY = "an acks=0 Produce (no response owed)"
    BAD_REQUEST = "a frame that does not decode as a request"
    ANSWER_MORE_LEFT = "a response, with more still owed after it"
    ANSWER_LAST = "the response to the only request owed one"
    PEER_CLOSED = "end of stream from the client"
    CLOSE = "the broker closes"
    VIOLATION = "the client broke the framing"


#: state × event → next state.  Written here: one row per event that carries requests or responses, one
#: column per live state, ``-`` for a move the rules refuse; the ending (PEER_CLOSED, CLOSE, VIOLATION and
#: the CLOSED and FAILED states) is the same on both sides and added by
#: :func:`kproto.connection.lifecycle.connection_transitions`.
SERVER_TRANSITIONS: Mapping[Tuple[ServerState, ServerEvent], ServerState] = connection_transitions(
    ServerState,
    ServerEvent,
    """
                      IDLE   OWING
    REQUEST           OWING  OWING
    REQUEST_ONE_WAY   IDLE   OWING
    BAD_REQUEST       IDLE   OWING
    ANSWER_MORE_LEFT  -      OWING
    ANSWER_LAST       -      IDLE
    """,
)


@dataclass(eq=False)
class RequestReceived:
    """A decoded request.  Pass it back to :meth:`ServerConnection.send_response` to answer it."""

    header: RequestHeader
    message: Message
    frame_size: int
    expects_response: bool = True
    answered: bool = field(default=False, repr=False)

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


@dataclass(frozen=True)
class BadRequest:
    """A frame that is not a valid request; ``header`` is None when even the header did not decode."""

    header: Optional[RequestHeader]
    error: KprotoError
    frame: bytes


@dataclass(frozen=True)
class ClientClosed:
    """The client closed the stream; ``unanswered`` counts the requests still owed a response."""

    unanswered: int


ServerOutput = Union[RequestReceived, BadRequest, ClientClosed]


class ServerConnection:
    """One server connection; see the module docstring."""

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        broker_quirks: Optional[str] = None,
        max_request_size: Optional[Mapping[int, int]] = None,
    ) -> None:
        self.broker_quirks = check_quirks(broker_quirks)
        self._frames = FrameReader(max_frame_size)
        #: Tighter size limits for some api keys (api key -> bytes after the size prefix).  A frame over
        #: its api's limit is a BadRequest before its body is decoded: decoding is the costly part of a
        #: request made of millions of tiny elements.
        self.max_request_size: Mapping[int, int] = max_request_size or {}
        self._owed: Deque[RequestReceived] = deque()
        self._machine: StateMachine[ServerState, ServerEvent] = connection_machine(
            SERVER_TRANSITIONS, ServerState.IDLE, "server connection"
        )
        self._error: Optional[KprotoError] = None

    @property
    def state(self) -> ServerState:
        return self._machine.state

    @property
    def owed(self) -> int:
        """Requests received and not yet answered."""
        return len(self._owed)

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held."""
        return self._frames.buffered

    @property
    def pending_frame_size(self) -> Optional[int]:
        """Declared size of the incomplete request frame being received (None: no size prefix yet)."""
        return self._frames.pending_frame_size

    # ---------------------------------------------------------------- receiving

    def receive_data(self, data: bytes) -> List[ServerOutput]:
        """Feed bytes read from the socket (``b""`` at end of stream); returns completed events."""
        if self._error is not None:
            raise self._error
        if self.state is ServerState.CLOSED:
            if data:
                raise LocalProtocolError("data received on a closed connection")
            return []
        if not data:
            self._machine.fire(ServerEvent.PEER_CLOSED, RemoteProtocolError)
            return [ClientClosed(len(self._owed))]
        events: List[ServerOutput] = []
        try:
            for frame in self._frames.feed(data):
                events.append(self._request(frame))
        except KprotoError as exc:
            self._error = exc
            self._machine.fire(ServerEvent.VIOLATION, RemoteProtocolError)
            if not events:
                raise
        return events

    def _request(self, frame: bytes) -> ServerOutput:
        header: Optional[RequestHeader] = None
        try:
            header, _ = decode_request_header(frame)
            limit = self.max_request_size.get(header.api_key)
            if limit is not None and len(frame) - 4 > limit:
                raise LimitExceededError(
                    f"api key {header.api_key} request of {len(frame) - 4} bytes is over its limit of {limit}",
                    0,
                    "size",
                )
            header, message = decode_request(frame)
        except KprotoError as exc:
            self._machine.fire(ServerEvent.BAD_REQUEST, RemoteProtocolError)
            return BadRequest(header, exc, frame)
        wants_answer = expects_response(header, message)
        request = RequestReceived(header, message, len(frame), wants_answer)
        if wants_answer:
            self._owed.append(request)
        self._machine.fire(ServerEvent.REQUEST if wants_answer else ServerEvent.REQUEST_ONE_WAY, RemoteProtocolError)
        return request

    # ---------------------------------------------------------------- answering

    def send_response(self, request: RequestReceived, message: Message) -> bytes:
        """The frame answering ``request`` (the oldest request owed a response) with ``message``."""
        if self.state not in (ServerState.IDLE, ServerState.OWING):
            raise LocalProtocolError(f"cannot answer on a connection that is {self.state.name}")
        self._check_turn(request)
        if message.API_KEY != request.api_key or getattr(message, "KIND", None) != "response":
            raise LocalProtocolError(f"{type(message).__name__} does not answer api key {request.api_key}")
        frame = encode_response(message, request.api_version, self._wire_correlation_id(request))
        self._owed.popleft()
        request.answered = True
        self._machine.fire(ServerEvent.ANSWER_LAST if not self._owed else ServerEvent.ANSWER_MORE_LEFT)
        return frame

    def _check_turn(self, request: RequestReceived) -> None:
        if not request.expects_response:
            raise LocalProtocolError("a Produce with acks=0 gets no response")
        if request.answered:
            raise LocalProtocolError(f"request with correlation id {request.correlation_id} was already answered")
        if not self._owed or self._owed[0] is not request:
            head = self._owed[0].correlation_id if self._owed else None
            raise LocalProtocolError(
                f"responses go out in request order: correlation id {request.correlation_id} answered before {head}"
            )

    def _wire_correlation_id(self, request: RequestReceived) -> int:
        if self.broker_quirks == "0.8.2" and request.api_key == GROUP_COORDINATOR_KEY and request.api_version == 0:
            return 0  # 0.8.2 brokers answered ConsumerMetadata with correlation id 0
        return request.correlation_id

    def close(self) -> int:
        """Close from this side; returns how many requests go unanswered."""
        self._machine.fire(ServerEvent.CLOSE)
        unanswered = len(self._owed)
        self._owed.clear()
        return unanswered
