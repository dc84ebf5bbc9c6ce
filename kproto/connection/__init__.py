"""Sans-I/O Kafka connections: correlation ids, pipelining, in-order answering.

* :mod:`kproto.connection.correlation` -- correlation ids and pairing responses with requests in flight;
* :mod:`kproto.connection.client` -- :class:`ClientConnection`: requests → bytes, bytes → responses;
* :mod:`kproto.connection.server` -- :class:`ServerConnection`: bytes → requests, responses → bytes.
* :mod:`kproto.connection.lifecycle` -- how a connection ends, the part of the transition tables both
  sides share.

None of them touches a socket, a thread or a clock; the caller moves the bytes.
"""

from kproto.connection.client import (
    CLIENT_TRANSITIONS,
    ClientConnection,
    ClientEvent,
    ClientState,
    ConnectionClosed,
    Response,
    SentRequest,
)
from kproto.connection.correlation import BROKER_QUIRKS, CorrelationTracker, InFlight, InFlightLimitError
from kproto.connection.server import (
    SERVER_TRANSITIONS,
    BadRequest,
    ClientClosed,
    RequestReceived,
    ServerConnection,
    ServerEvent,
    ServerState,
)

__all__ = [
    "BROKER_QUIRKS",
    "CLIENT_TRANSITIONS",
    "SERVER_TRANSITIONS",
    "BadRequest",
    "ClientClosed",
    "ClientConnection",
    "ClientEvent",
    "ClientState",
    "ConnectionClosed",
    "CorrelationTracker",
    "InFlight",
    "InFlightLimitError",
    "RequestReceived",
    "Response",
    "SentRequest",
    "ServerConnection",
    "ServerEvent",
    "ServerState",
]
