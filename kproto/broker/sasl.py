"""SASL PLAIN authentication on the mock broker, in both of the shapes clients use.

A client that must authenticate first sends SaslHandshake naming a mechanism.  What follows depends on
the handshake's version:

* **v1** (Kafka 1.0+): each authentication token travels inside a SaslAuthenticate request, and the
  broker answers it with a SaslAuthenticate response (error code, message, server token);
* **v0** (Kafka 0.10): the next frame is the bare token, size-prefixed with no Kafka header, and the
  broker answers with a bare size-prefixed token (empty for PLAIN) -- or closes the connection when
  the credentials are wrong.

PLAIN's single token is ``authzid NUL authcid NUL password`` (RFC 4616); the broker accepts it when the
password matches ``BrokerConfig.sasl_plain_users[authcid]`` and the authorisation id is empty or the
user itself.  Until then only ApiVersions, SaslHandshake and (after a v1 handshake) SaslAuthenticate
are answered: anything else closes the connection, as Kafka does with an unauthenticated request.
A failed SaslAuthenticate is answered with SASL_AUTHENTICATION_FAILED and the connection then closed.

:class:`SaslSession` is one connection's progress through those steps; it holds no sockets.
"""

from __future__ import annotations

import enum
import hmac
from typing import Mapping, Optional, Tuple

from kproto import ErrorCode
from kproto.message_base import Message
from kproto.messages import SaslAuthenticateResponse, SaslHandshakeResponse

__all__ = ["SASL_VERSIONS", "SaslStage", "SaslSession", "check_plain"]

_C = ErrorCode
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

#: The versions this module answers, by api key.
SASL_VERSIONS: Mapping[int, Tuple[int, int]] = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}
_MECHANISM = "PLAIN"


class SaslStage(enum.Enum):
    """Where one connection stands."""

    OPEN = "no authentication required"
    NEEDS_HANDSHAKE = "nothing but ApiVersions and SaslHandshake until authenticated"
    RAW_TOKEN = "after a v0 handshake: the next frame is a bare PLAIN token"
    RAW_TOKEN_RECEIVED = "the bare token is being checked; nothing is answered before it"
    AUTHENTICATE = "after a v1 handshake: the next request must be SaslAuthenticate"
    DONE = "authenticated"


def check_plain(token: bytes, users: Mapping[str, str]) -> Tuple[Optional[str], str]:
    """(user, "") when ``token`` is a PLAIN token with a known user and their password, else (None, why)."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None, "a PLAIN token is authzid NUL authcid NUL password"
    try:
        authzid, authcid, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        return None, "a PLAIN token is UTF-8"
    expected = users.get(authcid)
    # compare_digest: the time taken does not tell how much of a password was right.
    if expected is None or not hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8")):
        return None, "authentication failed: invalid username or password"
    if authzid and authzid != authcid:
        return None, "authentication failed: the authorisation id must be the user"
    return authcid, ""


class SaslSession:
    """The SASL state of one connection (``users`` None: no authentication required)."""

    def __init__(self, users: Optional[Mapping[str, str]]) -> None:
        self.users = users
        self.stage = SaslStage.OPEN if users is None else SaslStage.NEEDS_HANDSHAKE
        #: The authenticated user, once there is one.
        self.user: Optional[str] = None
        #: Set when the connection must close after its current answer (a failed authentication).
        self.close_after_answer = False

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be answered at this stage."""
        if self.stage in (SaslStage.OPEN, SaslStage.DONE):
            return api_key != SASL_AUTHENTICATE or self.stage is SaslStage.DONE
        if self.stage is SaslStage.NEEDS_HANDSHAKE:
            return api_key in (18, SASL_HANDSHAKE)
        return self.stage is SaslStage.AUTHENTICATE and api_key == SASL_AUTHENTICATE

    def handshake(self, mechanism: str, version: int) -> Message:
        """The answer to SaslHandshake; moves to the stage its version calls for."""
        offered = [_MECHANISM] if self.users is not None else []
        if self.stage is not SaslStage.NEEDS_HANDSHAKE:
            return SaslHandshakeResponse(error_code=_C.ILLEGAL_SASL_STATE, mechanisms=offered)
        if mechanism != _MECHANISM:
            return SaslHandshakeResponse(error_code=_C.UNSUPPORTED_SASL_MECHANISM, mechanisms=offered)
        self.stage = SaslStage.AUTHENTICATE if version >= 1 else SaslStage.RAW_TOKEN
        return SaslHandshakeResponse(error_code=_C.NONE, mechanisms=offered)

    def authenticate(self, token: bytes) -> Message:
        """The answer to SaslAuthenticate; a failure also marks the connection to be closed."""
        if self.stage is not SaslStage.AUTHENTICATE:
            self.close_after_answer = True
            return SaslAuthenticateResponse(
                error_code=_C.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate before a v1 SaslHandshake",
                auth_bytes=b"",
                session_lifetime_ms=0,
            )
        user, why = self.raw_token(token)
        if user is None:
            self.close_after_answer = True
            return SaslAuthenticateResponse(
                error_code=_C.SASL_AUTHENTICATION_FAILED, error_message=why, auth_bytes=b"", session_lifetime_ms=0
            )
        return SaslAuthenticateResponse(error_code=_C.NONE, error_message=None, auth_bytes=b"", session_lifetime_ms=0)

    def raw_token(self, token: bytes) -> Tuple[Optional[str], str]:
        """Check a PLAIN token (bare after a v0 handshake, or from SaslAuthenticate); (user, "") or (None, why)."""
        assert self.users is not None
        user, why = check_plain(token, self.users)
        if user is not None:
            self.stage, self.user = SaslStage.DONE, user
        return user, why
