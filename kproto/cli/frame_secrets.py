"""Which bytes of lone frames are SASL secrets, for ``kproto decode`` and ``kproto hexdump``.

Why a tracker of its own: ``kproto pcap`` follows each connection and knows the mechanism and the
direction of every token (:mod:`kproto.capture.conversation`); frames given to decode/hexdump come with
no connection, often without the handshake.  So the rules here are coarser and err on the safe side:

* ``auth_bytes`` of every SaslAuthenticate request and response is secret-bearing, whatever the
  mechanism (a Kerberos ticket or an unknown mechanism's token is a credential too), and so is the whole
  body of a SaslAuthenticate that does not decode;
* after a SaslHandshake v0 request the client sends its tokens raw (an int32 size and the token, no
  Kafka header, see :mod:`kproto.capture.sasl`): from then on every frame that does not decode is taken
  for a raw token and is secret as a whole, until a frame decodes again.

The mechanism, when a SaslHandshake request earlier in the input named it, only serves to describe the
token (:func:`kproto.capture.sasl.token_facts`, secrets redacted); the bytes are never shown unless the
user passes ``--show-secrets``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from kproto.capture.sasl import REDACTED, token_facts
from kproto.cli.frame_decoding import DecodedFrame

__all__ = ["FrameSecrets", "SecretTracker", "redacted_json", "SASL_HANDSHAKE", "SASL_AUTHENTICATE"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


@dataclass
class FrameSecrets:
    """What of one frame is secret: ``raw_token`` (all bytes after the size prefix) or its ``auth_bytes``."""

    mechanism: Optional[str]
    raw_token: bool
    token: bytes  #: the secret-bearing bytes (the raw token or auth_bytes)
    from_client: bool

    def facts(self) -> Dict[str, Any]:
        """The token described with its secrets redacted (:func:`~kproto.capture.sasl.token_facts`)."""
        if self.mechanism is None:
            return (
                {"mechanism": None, "size": len(self.token), "token": REDACTED}
                if self.token
                else {"mechanism": None, "size": 0}
            )
        return token_facts(self.mechanism, self.token, self.from_client)

    def ranges(self, data: bytes) -> List[Tuple[int, int]]:
        """Where the secret bytes lie in the frame ``data`` (for a raw token: after the size prefix)."""
        if self.raw_token:
            return [(4, len(data))] if len(data) > 4 else []
        if not self.token:
            return []
        at = data.rfind(self.token)
        return [(at, at + len(self.token))] if at >= 0 else [(4, len(data))]


def redacted_json(secrets: FrameSecrets) -> Dict[str, Any]:
    """A secret byte string in JSON output: ``{"redacted": true, "size": N, "sasl": facts}`` (as ``kproto
    pcap`` writes it; such a record cannot be encoded back, on purpose)."""
    return {"redacted": True, "size": len(secrets.token), "sasl": secrets.facts()}


class SecretTracker:
    """Feed it the frames of one input in order (:meth:`examine`); it says which hold secrets."""

    def __init__(self) -> None:
        self.mechanism: Optional[str] = None
        self.raw_tokens = False  # a SaslHandshake v0 request was seen and no frame decoded since its answer

    def examine(self, frame: DecodedFrame) -> Optional[FrameSecrets]:
        """The secrets of ``frame`` (None: it holds none)."""
        if frame.api_key == SASL_HANDSHAKE and frame.body is not None:
            if frame.kind == "request":
                self.mechanism = getattr(frame.body, "mechanism", None) or self.mechanism
                self.raw_tokens = frame.api_version == 0
            return None
        if frame.failed and self.raw_tokens:
            return FrameSecrets(self.mechanism, True, frame.data[4:], from_client=len(frame.data) > 4)
        if frame.body is not None:
            self.raw_tokens = False
        if frame.api_key == SASL_AUTHENTICATE and frame.body is not None:
            token = getattr(frame.body, "auth_bytes", None)
            if isinstance(token, (bytes, bytearray)):
                return FrameSecrets(self.mechanism, False, bytes(token), from_client=frame.kind == "request")
        if frame.api_key == SASL_AUTHENTICATE and frame.body is None and frame.header is not None:
            # a body that does not decode: all of it, auth_bytes somewhere inside
            return FrameSecrets(self.mechanism, False, frame.data[frame.header_end :], frame.kind == "request")
        return None
