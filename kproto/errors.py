"""The exceptions kproto raises.

Every error kproto raises on purpose derives from :class:`KprotoError`, so a caller that feeds bytes from
the network can catch one class and know nothing else escapes.  The hierarchy is small on purpose::

    KprotoError
    ├── DecodeError              bytes that do not parse (offset + field path)
    │   ├── LengthMismatchError  a body that ends before or after its frame does
    │   ├── LimitExceededError   input asking for more than a configured limit allows
    │   └── UnknownVersionError  a frame (or caller) naming an api key or version kproto does not know
    ├── EncodeError              a value that cannot be written (the message names the field path)
    │   └── UnsupportedVersionError  encoding in a version that does not exist or cannot carry a set field
    ├── UnknownApiError          ``kproto.APIS[name]`` with a name no API has (also a KeyError)
    ├── ProtocolError            a conversation rule broken (correlation ids, states); catch this for both
    │   ├── LocalProtocolError   by the caller: it used a state machine in a state that forbids the move
    │   └── RemoteProtocolError  by the peer: what it sent is not allowed here
    └── BrokerError              an error code answered by a broker (one subclass per code,
                                 see :mod:`kproto.error_codes`)
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "KprotoError",
    "DecodeError",
    "LimitExceededError",
    "LengthMismatchError",
    "EncodeError",
    "UnknownApiError",
    "UnknownVersionError",
    "UnsupportedVersionError",
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "BrokerError",
]


class KprotoError(Exception):
    """Root of every exception kproto raises deliberately."""


class DecodeError(KprotoError, ValueError):
    """Bytes that cannot be decoded.

    ``offset`` is the absolute byte offset (from the start of the buffer handed to the decoder) where the
    problem was found; ``path`` names the field, e.g. ``topics[3].partitions[0].offset``; ``reason`` is the
    bare description.  ``str()`` gives all three in one line::

        topics[3].partitions[0].offset: need 8 bytes at offset 412, 3 left
    """

    def __init__(self, reason: str, offset: Optional[int] = None, path: str = "") -> None:
        self.reason = reason
        self.offset = offset
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.reason
        if self.offset is not None and " offset " not in text:
            text = f"{text} (at offset {self.offset})"
        return f"{self.path}: {text}" if self.path else text

    def within(self, prefix: str) -> "DecodeError":
        """Prefix the field path with the enclosing field (used while the error unwinds)."""
        if self.path:
            sep = "" if self.path.startswith("[") else "."
            self.path = f"{prefix}{sep}{self.path}"
        else:
            self.path = prefix
        self.args = (self._render(),)
        return self

    def __reduce__(self):  # keep offset/path across pickling (Spark executors, multiprocessing)
        return (self.__class__, (self.reason, self.offset, self.path))


class LengthMismatchError(DecodeError):
    """A message decoded cleanly but did not use exactly the bytes its frame (or caller) gave it.

    Kept apart from other decode errors because a dissector reports it differently: the fields decoded
    are right, the frame holds more (or fewer) bytes than they account for.
    """


class LimitExceededError(DecodeError):
    """Input that asks for more than a configured limit (frame size, decompressed size, nesting)."""


class UnknownVersionError(DecodeError):
    """A frame or a decode call names an api key or version that kproto does not know (``path`` is
    ``api_key`` or ``api_version``, ``offset`` where that field sits in the frame when there is one)."""


class UnknownApiError(KprotoError, KeyError):
    """An API name or key that ``kproto.APIS`` does not have; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class EncodeError(KprotoError, ValueError):
    """A value that cannot be encoded (wrong type, out of range, string too long, ...).

    ``path`` names the field when it is known (``ProduceRequest.topic_data[0].partition_data[1].index``);
    ``str()`` then starts with it, as a :class:`DecodeError`'s does.
    """

    def __init__(self, reason: str = "", path: str = "") -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)

    def __reduce__(self):  # keep the path across pickling
        return (self.__class__, (self.reason, self.path))


class UnsupportedVersionError(EncodeError):
    """The api key or version is not known, or a set field cannot be carried by the requested version."""


class ProtocolError(KprotoError):
    """A rule of the conversation was broken (unknown correlation id, wrong state, ...); the base of
    :class:`LocalProtocolError` and :class:`RemoteProtocolError`, so one ``except`` catches both."""


class LocalProtocolError(ProtocolError):
    """The caller misused a state machine: asked for a move its state forbids (sending on a closed
    connection, answering a request twice).  A bug in the calling code, not in the peer."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol: a response nobody asked for, an unknown correlation id, a request
    after the stream was declared bad.  Nothing the caller did wrong; the connection cannot go on."""


class BrokerError(KprotoError):
    """An error code answered by a broker.

    Subclasses exist for every code of the 0.8/0.9 protocol (``kproto.error_codes.error_class``);
    ``code`` is the numeric code, ``retriable`` whether a client may retry the request.
    """

    code: int = -1
    retriable: bool = False
    description: str = ""

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.description)
