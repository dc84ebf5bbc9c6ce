"""Recognising TLS on a Kafka connection from its first bytes, and what its handshake says in clear.

A client that speaks TLS opens with a handshake record holding a ClientHello; the server answers with a
ServerHello (or, when the port does not speak TLS, a Kafka broker reads the record header as an absurd
frame size and closes the connection).  A plaintext Kafka client on a TLS port gets a TLS alert back.
A capture that starts in the middle of a TLS connection shows application-data records.  None of these
can be a Kafka frame: a TLS record starts with a content type 20-23 and major version 3, which as a
Kafka size prefix is over 335 MB, beyond any frame limit.

The TLS record header is ``content_type u8 | version u16 | length u16``; a handshake message is
``type u8 | length u24 | body``.  In a ClientHello the server name (SNI, extension 0) and the versions
offered (extension 43) are in clear even for TLS 1.3; a ServerHello's chosen version is in extension 43
for TLS 1.3 and in its legacy version field before.  Parsing never raises and reads only the bytes given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["MAX_START_BYTES", "TlsStart", "record_length", "tls_start", "version_name"]

_CONTENT = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}
_HANDSHAKE = {1: "ClientHello", 2: "ServerHello"}
_VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
_MAX_RECORD = (1 << 14) + 2048  # the largest TLS ciphertext record
#: Bytes of a direction's start needed to read a whole first record.
MAX_START_BYTES = 5 + _MAX_RECORD


def version_name(version: int) -> str:
    return _VERSIONS.get(version, f"0x{version:04x}")


@dataclass(frozen=True)
class TlsStart:
    """The first TLS record of one direction: ``content`` (``handshake``, ``alert``, ...), ``hello``
    (``ClientHello``/``ServerHello`` when it is one), the record's ``version``, the ``server_name`` (SNI)
    and the highest ``offered_version``/chosen ``selected_version`` when the hello carries them."""

    content: str
    version: int
    hello: Optional[str] = None
    server_name: Optional[str] = None
    offered_version: Optional[int] = None
    selected_version: Optional[int] = None

    def describe(self) -> str:
        if self.hello == "ClientHello":
            offered = self.offered_version or self.version
            sni = f", SNI {self.server_name}" if self.server_name else ", no SNI"
            return f"TLS ClientHello (up to {version_name(offered)}{sni})"
        if self.hello == "ServerHello":
            return f"TLS ServerHello ({version_name(self.selected_version or self.version)})"
        return f"TLS {self.content.replace('_', ' ')} record ({version_name(self.version)})"


def record_length(data: bytes) -> Optional[int]:
    """The length of the TLS record whose header starts ``data`` (5 bytes needed), None if it is not one."""
    if len(data) < 5 or data[0] not in _CONTENT or data[1] != 3 or data[2] > 4:
        return None
    length = (data[3] << 8) | data[4]
    return length if 0 < length <= _MAX_RECORD else None


def tls_start(data: bytes) -> Optional[TlsStart]:
    """The TLS record at the start of ``data``, or None when ``data`` does not start with one (it needs at
    least 5 bytes; a hello cut short gives what its bytes showed)."""
    length = record_length(data)
    if length is None:
        return None
    version = (data[1] << 8) | data[2]
    content = _CONTENT[data[0]]
    if content != "handshake" or len(data) < 6 or data[5] not in _HANDSHAKE:
        return TlsStart(content, version)
    hello = _HANDSHAKE[data[5]]
    body = bytes(data[9 : 5 + length])
    if hello == "ClientHello":
        return _client_hello(body, version)
    return _server_hello(body, version)


class _Reader:
    """Bounds-checked reads over a hello body; ``ok`` turns False at the first read past the end."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.ok = data, 0, True

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            self.ok = False
            return b""
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def number(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big") if self.ok else 0

    def vector(self, length_bytes: int) -> bytes:
        return self.take(self.number(length_bytes)) if self.ok else b""


def _extensions(r: _Reader) -> "list[tuple[int, bytes]]":
    out = []
    block = _Reader(r.vector(2))
    while r.ok and block.ok and block.pos < len(block.data):
        kind = block.number(2)
        data = block.vector(2)
        if block.ok:
            out.append((kind, data))
    return out


def _client_hello(body: bytes, version: int) -> TlsStart:
    r = _Reader(body)
    r.take(2 + 32)  # legacy version, random
    r.vector(1)  # session id
    r.vector(2)  # cipher suites
    r.vector(1)  # compression methods
    server_name: Optional[str] = None
    offered: Optional[int] = None
    for kind, data in _extensions(r):
        if kind == 0:  # server_name: list length, then entries of type u8 (0 = host name) and a u16 vector
            names = _Reader(data)
            names.number(2)
            if names.number(1) == 0:
                host = names.vector(2)
                if names.ok:
                    server_name = host.decode("ascii", "replace")
        elif kind == 43:  # supported_versions: a u8 vector of u16 versions
            versions = _Reader(data).vector(1)
            offered = max(
                (
                    int.from_bytes(versions[i : i + 2], "big")
                    for i in range(0, len(versions) - 1, 2)
                    if versions[i : i + 2] in (b"\x03\x00", b"\x03\x01", b"\x03\x02", b"\x03\x03", b"\x03\x04")
                ),
                default=None,
            )
    return TlsStart("handshake", version, "ClientHello", server_name, offered)


def _server_hello(body: bytes, version: int) -> TlsStart:
    r = _Reader(body)
    legacy = r.number(2)
    r.take(32)
    r.vector(1)
    r.take(3)  # cipher suite, compression method
    selected = legacy if r.ok else None
    for kind, data in _extensions(r):
        if kind == 43 and len(data) == 2:
            selected = int.from_bytes(data, "big")
    return TlsStart("handshake", version, "ServerHello", selected_version=selected)
