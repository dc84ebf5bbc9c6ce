"""SASL in ``kproto pcap`` output: raw tokens (after SaslHandshake v0) and SaslAuthenticate's
``auth_bytes``, described by mechanism and with their secrets redacted unless ``--show-secrets``.

A redacted byte string is ``{"redacted": true, "size": N}`` in place of ``{"$bytes"}`` (so such output
cannot be encoded back, on purpose); with ``--show-secrets`` the ``$bytes`` stay.  Either way a ``sasl``
object next to it says what the token holds (:func:`kproto.capture.sasl.token_facts`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from kproto.capture.conversation import Exchange, SaslToken
from kproto.capture.sasl import token_facts
from kproto.cli.json_values import bytes_json
from kproto.cli.terminal_style import Style

__all__ = ["SASL_TOKEN_KEYS", "auth_bytes_json", "sasl_token_json", "sasl_token_line", "label_sasl_authenticate"]

SASL_TOKEN_KEYS = (
    "record",
    "connection",
    "client",
    "server",
    "mechanism",
    "step",
    "request_time_ns",
    "response_time_ns",
    "request_packet",
    "response_packet",
    "answered",
    "request_token",
    "response_token",
)

_SASL_AUTHENTICATE = 36


def auth_bytes_json(mechanism: Optional[str], token: bytes, from_client: bool, show_secrets: bool) -> Dict[str, Any]:
    """A token as JSON: its bytes (or ``redacted`` and ``size``) and ``sasl``, what it holds."""
    out: Dict[str, Any] = bytes_json(token) if show_secrets else {"redacted": True, "size": len(token)}
    out["sasl"] = token_facts(mechanism, token, from_client, show_secrets)
    return out


def label_sasl_authenticate(record: Dict[str, Any], exchange: Exchange, show_secrets: bool) -> None:
    """Replace the ``auth_bytes`` of a SaslAuthenticate exchange's JSON by :func:`auth_bytes_json`."""
    if exchange.api_key != _SASL_AUTHENTICATE:
        return
    for side, message, from_client in (("request", exchange.request, True), ("response", exchange.response, False)):
        body = record.get(side)
        token = getattr(message, "auth_bytes", None)
        if isinstance(body, dict) and isinstance(token, bytes):
            body["auth_bytes"] = auth_bytes_json(exchange.sasl_mechanism, token, from_client, show_secrets)


def sasl_token_json(token: SaslToken, show_secrets: bool) -> Dict[str, Any]:
    """The JSON record of a raw SASL token and its answer (keys :data:`SASL_TOKEN_KEYS`)."""
    answer = token.response_token
    return {
        "record": "sasl_token",
        "connection": token.connection.serial,
        "client": str(token.client),
        "server": str(token.server),
        "mechanism": token.mechanism,
        "step": token.step,
        "request_time_ns": token.request_time_ns,
        "response_time_ns": token.response_time_ns,
        "request_packet": token.request_packet,
        "response_packet": token.response_packet,
        "answered": token.answered,
        "request_token": auth_bytes_json(token.mechanism, token.request_token, True, show_secrets),
        "response_token": None if answer is None else auth_bytes_json(token.mechanism, answer, False, show_secrets),
    }


def _facts_text(facts: Dict[str, Any]) -> str:
    shown = [f"{k}={v!r}" for k, v in facts.items() if k not in ("mechanism", "size")]
    return f"{facts['size']}B" + (f" {' '.join(shown)}" if shown else "")


def sasl_token_line(token: SaslToken, style: Style, show_secrets: bool, time_text: str) -> str:
    """``time  #conn client > server  SASL PLAIN token 1  client: ...  server: ...``."""
    request = _facts_text(token_facts(token.mechanism, token.request_token, True, show_secrets))
    if token.response_token is None:
        answer = style("error", "unanswered")
    else:
        answer = "server: " + _facts_text(token_facts(token.mechanism, token.response_token, False, show_secrets))
    return "  ".join(
        [
            time_text,
            f"#{token.connection.serial} {token.client} > {token.server}",
            style("title", f"SASL {token.mechanism or '?'} token {token.step} (raw, after SaslHandshake v0)"),
            f"client: {request}",
            answer,
        ]
    )
