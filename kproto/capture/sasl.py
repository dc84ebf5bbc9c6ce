"""What SASL tokens say, and which parts of them are secrets.

Kafka authenticates a connection with SASL in one of two ways.  After ``SaslHandshake`` v0 the client
sends the mechanism's tokens *raw*: each an int32 size and that many bytes, no Kafka header, and the
server answers each the same way (an empty token when PLAIN succeeds; it simply closes the connection
when authentication fails).  From ``SaslHandshake`` v1 on, the tokens travel inside ``SaslAuthenticate``
requests and responses (``auth_bytes``).  Either way the bytes are the mechanism's own:

* ``PLAIN`` (RFC 4616): one client token ``authzid NUL authcid NUL password``;
* ``SCRAM-SHA-256``/``-512`` (RFC 5802): ``n,,n=user,r=nonce``, the server's ``r=..,s=salt,i=iterations``,
  the client's final ``c=..,r=..,p=proof`` and the server's ``v=signature`` (or ``e=error``);
* ``OAUTHBEARER`` (RFC 7628): ``n,,`` then ``key=value`` pairs separated by ``\\x01``, among them
  ``auth=Bearer <token>``;
* ``GSSAPI`` (Kerberos) and anything else: opaque.

A capture is often shared, so secrets are redacted unless the caller asks for them: the PLAIN password,
the SCRAM client proof, the OAUTHBEARER token, and every opaque token's bytes (a Kerberos ticket is a
credential too).  Parsing never raises: a token that does not have its mechanism's shape is described as
such (``"malformed"``) and redacted whole.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

__all__ = ["REDACTED", "token_facts", "raw_token_count"]

#: What stands in for a secret in the facts.
REDACTED = "<redacted>"

_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: SCRAM attributes that are secrets (the client proof); the server signature only proves the server.
_SCRAM_SECRETS = frozenset({"p"})
_SCRAM_NAMES = {
    "n": "username",
    "r": "nonce",
    "s": "salt",
    "i": "iterations",
    "c": "channel_binding",
    "p": "proof",
    "v": "server_signature",
    "e": "error",
    "a": "authzid",
    "m": "extension",
}


def raw_token_count(mechanism: Optional[str]) -> Optional[int]:
    """How many raw tokens the client sends after SaslHandshake v0 when authentication succeeds, or None
    when the mechanism does not say (GSSAPI, unknown: then a frame that is a Kafka request ends them)."""
    if mechanism == "PLAIN" or mechanism == "OAUTHBEARER":
        return 1
    if mechanism in _SCRAM:
        return 2
    return None


def token_facts(
    mechanism: Optional[str], token: bytes, from_client: bool, show_secrets: bool = False
) -> Dict[str, Any]:
    """The readable content of one token: ``{"mechanism", "size", ...fields}``, secrets replaced by
    :data:`REDACTED` unless ``show_secrets``; ``"malformed"`` says when the token lacks its mechanism's shape."""
    facts: Dict[str, Any] = {"mechanism": mechanism, "size": len(token)}
    if mechanism == "PLAIN":
        facts.update(_plain(token, from_client, show_secrets))
    elif mechanism in _SCRAM:
        facts.update(_scram(token, show_secrets))
    elif mechanism == "OAUTHBEARER":
        facts.update(_oauthbearer(token, from_client, show_secrets))
    elif token and not show_secrets:
        facts["token"] = REDACTED
    elif token:
        facts["token"] = token.hex()
    return facts


def _text(token: bytes) -> Optional[str]:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _malformed(why: str, token: bytes, show_secrets: bool) -> Dict[str, Any]:
    return {"malformed": why, "token": token.hex() if show_secrets else REDACTED}


def _plain(token: bytes, from_client: bool, show_secrets: bool) -> Dict[str, Any]:
    if not from_client:
        return {} if not token else {"server_message": _text(token) or token.hex()}
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return _malformed("a PLAIN token is authzid NUL username NUL password", token, show_secrets)
    authzid, username = _text(parts[0]), _text(parts[1])
    if authzid is None or username is None:
        return _malformed("PLAIN names are not UTF-8", token, show_secrets)
    password = _text(parts[2]) if show_secrets else REDACTED
    return {"authzid": authzid, "username": username, "password": password if password is not None else parts[2].hex()}


def _scram(token: bytes, show_secrets: bool) -> Dict[str, Any]:
    text = _text(token)
    if text is None:
        return _malformed("a SCRAM message is UTF-8 text", token, show_secrets)
    out: Dict[str, Any] = {}
    if text.startswith(("n,", "y,", "p=")):  # the client-first message's GS2 header
        header, _, text = text.partition(",")
        authzid, _, text = text.partition(",")
        out["gs2_header"] = f"{header},{authzid},"
    for attribute in text.split(","):
        name, sep, value = attribute.partition("=")
        if not sep or len(name) != 1:
            return _malformed("not a list of SCRAM attributes (x=value)", token, show_secrets)
        out[_SCRAM_NAMES.get(name, name)] = REDACTED if name in _SCRAM_SECRETS and not show_secrets else value
    return out


def _oauthbearer(token: bytes, from_client: bool, show_secrets: bool) -> Dict[str, Any]:
    text = _text(token)
    if text is None:
        return _malformed("an OAUTHBEARER message is UTF-8 text", token, show_secrets)
    if not from_client:
        return {} if not text else {"server_message": text}
    if text == "\x01":
        return {"abort": True}  # the client's answer to an error message
    header, sep, rest = text.partition("\x01")
    if not sep:
        return _malformed(
            "an OAUTHBEARER message is a GS2 header, then key=value pairs ended by \\x01", token, show_secrets
        )
    out: Dict[str, Any] = {"gs2_header": header}
    for pair in rest.split("\x01"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        if key == "auth" and not show_secrets:
            scheme, _, _ = value.partition(" ")
            value = f"{scheme} {REDACTED}"
        out[key] = value
    return out
