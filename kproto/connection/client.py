"""The client side of one Kafka connection, sans-I/O.

Theory of operation
===================

:class:`ClientConnection` turns requests into bytes and bytes into responses; the caller owns the
socket.  ``send(message, version)`` gives the frame to write and remembers, under the correlation id it
assigned, the api key and version needed to decode the answer (a response does not say what it
answers).  ``receive_data(data)`` takes whatever the socket produced (any chunking, one byte at a time
included) and returns the :class:`Response` events completed by it; ``receive_data(b"")`` means the
peer closed, and yields a :class:`ConnectionClosed` listing the requests that will never be answered.

Pipelining is free: any number of requests may be in flight (``max_in_flight`` bounds it, and ``send``
then refuses with :class:`~kproto.connection.correlation.InFlightLimitError`).  The broker answers in
order, so responses are paired first-in first-out (:mod:`kproto.connection.correlation`).  A Produce
with ``acks=0`` gets no response, so it is framed but never tracked.

The connection is the :data:`CLIENT_TRANSITIONS` table (state × event → state); a pair missing from
the table is a rule broken, by the peer (a response when nothing is in flight:
:class:`~kproto.errors.RemoteProtocolError`) or by the caller (sending when full or closed:
:class:`~kproto.errors.LocalProtocolError`); both are :class:`~kproto.errors.ProtocolError`, and the
table is applied by :class:`kproto.state_machine.StateMachine`.  How a connection ends (closing,
the peer closing, a violation) is the same on both sides and written once, in
:mod:`kproto.connection.lifecycle`.  Peer violations -- a response nobody asked for, an out-of-order or
unknown correlation id, a frame larger than ``max_frame_size``, a response that does not decode --
move the connection to ``FAILED`` and raise (:class:`~kproto.errors.ProtocolError`,
:class:`~kproto.errors.LimitExceededError`, :class:`~kproto.errors.DecodeError`).  Responses completed
before the violation in the same ``receive_data`` call are returned first; the error is then raised by
the next call, as h11 raises only when the bad event is reached.  A failed connection stays failed.

``broker_quirks="0.8.2"`` accepts the correlation id 0 that 0.8.2 brokers put on GroupCoordinator v0
responses (see :mod:`kproto.connection.correlation`).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Tuple, Union

from kproto.apis import APIS
from kproto.connection.lifecycle import connection_machine, connection_transitions
from kproto.connection.correlation import CorrelationTracker, InFlight, InFlightLimitError
from kproto.errors import KprotoError, LocalProtocolError, RemoteProtocolError
from kproto.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameReader,
    RequestHeader,
    decode_response,
    encode_request,
    expects_response,
)
from kproto.message_base import Message
from kproto.state_machine import StateMachine

from kproto.connection.client_events import ConnectionClosed, Response, SentRequest

if TYPE_CHECKING:
    from kproto.connection.typed_send import TypedSend

__all__ = [
    "ClientState",
    "ClientEvent",
    "CLIENT_TRANSITIONS",
    "Response",
    "SentRequest",
    "ConnectionClosed",
    "ClientConnection",
]


class ClientState(enum.Enum):
    """Where a client connection stands."""

    IDLE = "no request awaiting a response"
    AWAITING = "requests in flight, room for more"
    FULL = "max_in_flight requests in flight"
    CLOSED = "closed by either side"
    FAILED = "the peer broke the protocol; nothing more is accepted"


class ClientEvent(enum.Enum):
    """What happens to a client connection.  A send is SEND_FILLING when it reaches ``max_in_flight``
    (never without a limit), so that the table alone says when the connection is FULL."""

    SEND = "a request expecting a response, with room left after it"
    SEND_FILLING = "a request expecting a response that reaches max_in_flight"
    SEND_ONE_WAY = "an acks=0 Produce (no response will come)"
    ANSWER_MORE_LEFT = "a response, with requests still in flight after it"
    ANSWER_LAST = "the response to the only request in flight"
    PEER_CLOSED = "end of stream from the broker"
    CLOSE = "the caller closes"
    VIOLATION = "the peer broke a rule"


#: state × event → next state.  Written here: one row per event that carries requests or responses, one
#: column per live state, ``-`` for a move the rules refuse; the ending (PEER_CLOSED, CLOSE, VIOLATION and
#: the CLOSED and FAILED states) is the same on both sides and added by
#: :func:`kproto.connection.lifecycle.connection_transitions`.
CLIENT_TRANSITIONS: Mapping[Tuple[ClientState, ClientEvent], ClientState] = connection_transitions(
    ClientState,
    ClientEvent,
    """
                      IDLE      AWAITING  FULL
    SEND              AWAITING  AWAITING  -
    SEND_FILLING      FULL      FULL      -
    SEND_ONE_WAY      IDLE      AWAITING  FULL
    ANSWER_MORE_LEFT  -         AWAITING  AWAITING
    ANSWER_LAST       -         IDLE      IDLE
    """,
)


ClientOutput = Union[Response, ConnectionClosed]


class ClientConnection:
    """One client connection; see the module docstring.

    ``client_id`` goes into every request header; ``max_frame_size`` bounds a response frame
    (100 MiB by default); ``first_correlation_id`` is where ids start.
    """

    def __init__(
        self,
        *,
        client_id: Optional[str] = "kproto",
        max_in_flight: Optional[int] = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        broker_quirks: Optional[str] = None,
        first_correlation_id: int = 0,
    ) -> None:
        self.client_id = client_id
        self._tracker = CorrelationTracker(
            first_id=first_correlation_id, max_in_flight=max_in_flight, broker_quirks=broker_quirks
        )
        self._frames = FrameReader(max_frame_size)
        self._machine: StateMachine[ClientState, ClientEvent] = connection_machine(
            CLIENT_TRANSITIONS, ClientState.IDLE, "client connection"
        )
        self._error: Optional[KprotoError] = None

    # ---------------------------------------------------------------- inspection

    @property
    def state(self) -> ClientState:
        return self._machine.state

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered (acks=0 Produce requests are not counted)."""
        return len(self._tracker)

    @property
    def max_in_flight(self) -> Optional[int]:
        return self._tracker.max_in_flight

    @property
    def broker_quirks(self) -> Optional[str]:
        return self._tracker.broker_quirks

    def pending(self) -> List[InFlight]:
        """The requests in flight, oldest first."""
        return list(self._tracker)

    # ---------------------------------------------------------------- sending

    def _send(self, message: Message, version: int) -> SentRequest[Any]:
        """Frame ``message`` in ``version`` with a fresh correlation id; write ``.frame`` as is."""
        api_key = message.API_KEY
        if api_key is None or getattr(message, "KIND", None) != "request":
            raise LocalProtocolError(f"{type(message).__name__} is not a request")
        if api_key not in APIS or version not in APIS[api_key].versions:
            raise LocalProtocolError(f"{type(message).__name__} has no version {version}")
        one_way = not expects_response(RequestHeader(api_key=api_key), message)
        event = self._send_event(one_way)
        frame = encode_request(message, version, self._peek_id(), self.client_id)
        cid = self._tracker.next_id()
        if not one_way:
            self._tracker.track(cid, api_key, version, message)
        self._machine.fire(event)
        return SentRequest(frame, cid, not one_way)

    # ``send`` is ``_send``; a type checker sees it through one overload per request class, so that the
    # result is a SentRequest of that API's response class (kproto/connection/typed_send.pyi, generated).
    if TYPE_CHECKING:
        send: TypedSend
    else:
        send = _send

    def _peek_id(self) -> int:
        return self._tracker._next_id  # encoded before the id is taken, so a failed encode wastes none

    def _send_event(self, one_way: bool) -> ClientEvent:
        if self.state in (ClientState.CLOSED, ClientState.FAILED):
            raise LocalProtocolError(f"cannot send on a connection that is {self.state.name}")
        if one_way:
            return ClientEvent.SEND_ONE_WAY
        if self._tracker.full:
            raise InFlightLimitError(
                f"{self.in_flight} requests already in flight (max_in_flight={self.max_in_flight}); "
                "wait for a response before sending more"
            )
        limit = self._tracker.max_in_flight
        filling = limit is not None and self.in_flight + 1 >= limit
        return ClientEvent.SEND_FILLING if filling else ClientEvent.SEND

    # ---------------------------------------------------------------- receiving

    def receive_data(self, data: bytes) -> List[ClientOutput]:
        """Feed bytes read from the socket (``b""`` at end of stream); returns completed events."""
        if self._error is not None:
            raise self._error
        if self.state is ClientState.CLOSED:
            if data:
                raise LocalProtocolError("data received on a closed connection")
            return []
        if not data:
            return [self._peer_closed()]
        events: List[ClientOutput] = []
        try:
            for frame in self._frames.feed(data):
                events.append(self._response(frame))
        except KprotoError as exc:
            self._fail(exc)
            if not events:
                raise
        return events

    def _response(self, frame: bytes) -> Response[Message]:
        correlation_id = int.from_bytes(frame[4:8], "big", signed=True) if len(frame) >= 8 else None
        if correlation_id is None:
            raise RemoteProtocolError(f"response frame of {len(frame) - 4} bytes has no correlation id")
        entry = self._tracker.match(correlation_id)
        header, message = decode_response(frame, entry.api_key, entry.api_version)
        self._machine.fire(
            ClientEvent.ANSWER_LAST if not len(self._tracker) else ClientEvent.ANSWER_MORE_LEFT, RemoteProtocolError
        )
        return Response(entry.request, header, message, correlation_id, entry.api_key, entry.api_version)

    def _peer_closed(self) -> ConnectionClosed:
        self._machine.fire(ClientEvent.PEER_CLOSED, RemoteProtocolError)
        return ConnectionClosed(tuple(self._tracker.drain()))

    # ---------------------------------------------------------------- closing and plumbing

    def close(self) -> List[InFlight]:
        """Close from this side; returns the requests that will never be answered."""
        self._machine.fire(ClientEvent.CLOSE)
        return self._tracker.drain()

    def _fail(self, error: KprotoError) -> None:
        self._error = error
        self._machine.fire(ClientEvent.VIOLATION, RemoteProtocolError)
