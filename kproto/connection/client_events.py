"""What a :class:`~kproto.connection.client.ClientConnection` hands its caller: the request it framed
(:class:`SentRequest`) and the events bytes from the broker complete (:class:`Response`,
:class:`ConnectionClosed`).

They live apart from the connection so that the generated typing overloads of ``send``
(``typed_send.pyi``, which name :class:`SentRequest`) need not import the connection that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Tuple

from kproto.connection.correlation import InFlight
from kproto.framing import ResponseHeader
from kproto.message_base import Message

if TYPE_CHECKING:
    from typing_extensions import TypeGuard, TypeVar

    #: The response class a request is answered with (``Message`` where it is not known statically).
    R = TypeVar("R", bound=Message, default=Message)
else:
    from typing import TypeVar

    R = TypeVar("R", bound=Message)

__all__ = ["ConnectionClosed", "Response", "SentRequest"]


@dataclass(frozen=True)
class Response(Generic[R]):
    """A decoded response and the request it answers.

    Typed by api for a type checker: ``Response[MetadataResponse]`` is what
    :meth:`SentRequest.answered_by` narrows an event to (a bare ``Response`` is ``Response[Message]``).
    """

    request: Message
    header: ResponseHeader
    message: R
    correlation_id: int
    api_key: int
    api_version: int


@dataclass(frozen=True)
class SentRequest(Generic[R]):
    """What :meth:`ClientConnection.send` made: the frame to write, its correlation id, and whether a
    response will come (not for an ``acks=0`` Produce).  ``bytes(sent)`` is the frame.

    For a type checker, ``send(MetadataRequest(...), v)`` gives a ``SentRequest[MetadataResponse]``
    (one overload per api, generated from the specs), and :meth:`answered_by` carries that type to the
    response event, so ``event.message.topics`` needs no cast.
    """

    frame: bytes
    correlation_id: int
    expects_response: bool

    def __bytes__(self) -> bytes:
        return self.frame

    def answered_by(self, event: object) -> "TypeGuard[Response[R]]":
        """Whether ``event`` (from :meth:`ClientConnection.receive_data`) is the response to this request."""
        return isinstance(event, Response) and event.correlation_id == self.correlation_id


@dataclass(frozen=True)
class ConnectionClosed:
    """The broker closed the stream; ``unanswered`` are the requests that were still in flight."""

    unanswered: Tuple[InFlight, ...]
