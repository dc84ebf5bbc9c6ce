"""Deciding what a lone frame is (request or response, which api) and decoding it as far as it goes.

A request says what it is in its header.  A response does not: the caller names its api and version
(``--api``/``--api-key`` + ``--api-version``), or, in ``auto`` mode, a response is recognised by the
correlation id of a request seen earlier in the same input and decoded as that request's answer — so a
file holding requests and their responses decodes with no options, as Wireshark pairs them.

Decoding never raises: a frame whose header or body does not decode gives a :class:`DecodedFrame`
with ``error`` set and the undecoded bytes left in ``raw_body``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Optional, Tuple

import kproto
from kproto.apis import ApiInfo
from kproto.errors import DecodeError, KprotoError, UnsupportedVersionError
from kproto.framing import ResponseHeader, decode_request_header, expects_response
from kproto.wire import trailing_bytes

__all__ = ["DecodedFrame", "FrameDecoder", "MODES"]

#: How frames are classified: by trial and pairing, all requests, or all responses.
MODES = ("auto", "request", "response")
_MAX_PENDING = 4096


@dataclass
class DecodedFrame:
    """A frame and what could be made of it.

    ``header_end`` is the frame offset where the body starts (4 when even the header did not decode);
    ``body`` is the decoded message or None; ``error`` the first failure.  ``index``/``offset`` locate
    the frame in the input.
    """

    index: int
    offset: int
    data: bytes
    kind: str
    api_key: Optional[int] = None
    api_version: Optional[int] = None
    header: Any = None
    header_end: int = 4
    body: Any = None
    error: Optional[KprotoError] = None

    @property
    def api_info(self) -> Optional[ApiInfo]:
        return kproto.APIS.get(self.api_key) if self.api_key is not None else None

    @property
    def api_name(self) -> Optional[str]:
        info = self.api_info
        if info is not None:
            return info.name
        return None if self.api_key is None else f"api-{self.api_key}"

    @property
    def correlation_id(self) -> Optional[int]:
        return None if self.header is None else self.header.correlation_id

    @property
    def header_version(self) -> int:
        """The header layout the api version uses: requests 1 (0 for ControlledShutdown v0, 2 when
        flexible), responses 0 (1 when flexible, except ApiVersions); unknown apis: 1 and 0."""
        info = self.api_info
        known = info is not None and self.api_version in info.versions
        if self.kind == "response":
            return info.response_header_version(self.api_version) if known else 0  # type: ignore[union-attr, arg-type]
        return info.request_header_version(self.api_version) if known else 1  # type: ignore[union-attr, arg-type]

    @property
    def raw_body(self) -> Optional[bytes]:
        """The bytes no decoded part accounts for: after the header, or after the size prefix when the
        header did not decode; None when the body decoded."""
        return None if self.body is not None else self.data[self.header_end :]

    @property
    def failed(self) -> bool:
        return self.error is not None


class FrameDecoder:
    """Decodes the frames of one input in order (``mode`` in :data:`MODES`; ``api_key``/``api_version``
    name the api of responses)."""

    def __init__(self, mode: str = "auto", api_key: Optional[int] = None, api_version: Optional[int] = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode
        self.api_key = api_key
        self.api_version = api_version
        self._pending: Deque[Tuple[int, int, int]] = deque()  # (correlation id, api key, version)

    def decode(self, index: int, offset: int, data: bytes) -> DecodedFrame:
        if self.mode == "request":
            return self._remember(decode_as_request(index, offset, data))
        if self.mode == "response":
            return decode_as_response(index, offset, data, self.api_key, self.api_version)
        return self._decode_auto(index, offset, data)

    def _decode_auto(self, index: int, offset: int, data: bytes) -> DecodedFrame:
        as_request = decode_as_request(index, offset, data)
        if not as_request.failed:
            return self._remember(as_request)
        paired = self._pair(data)
        if paired is not None:
            as_response = decode_as_response(index, offset, data, *paired)
            if not as_response.failed or not _plausible_request(as_request):
                self._forget(paired, as_response.correlation_id)
                return as_response
        if self.api_key is not None and not _plausible_request(as_request):
            return decode_as_response(index, offset, data, self.api_key, self.api_version)
        return self._remember(as_request)

    def _pair(self, data: bytes) -> Optional[Tuple[int, int]]:
        if len(data) < 8:
            return None
        corr = int.from_bytes(data[4:8], "big", signed=True)
        for pending_corr, api_key, version in self._pending:
            if pending_corr == corr:
                return api_key, version
        return None

    def _forget(self, paired: Tuple[int, int], corr: Optional[int]) -> None:
        for item in self._pending:
            if item[0] == corr and item[1:] == paired:
                self._pending.remove(item)
                return

    def _remember(self, frame: DecodedFrame) -> DecodedFrame:
        info, corr, version = frame.api_info, frame.correlation_id, frame.api_version
        if (
            frame.header is not None
            and info is not None
            and corr is not None
            and version is not None
            and version in info.versions
        ):
            if frame.body is None or expects_response(frame.header, frame.body):
                self._pending.append((corr, info.api_key, version))
                if len(self._pending) > _MAX_PENDING:
                    self._pending.popleft()
        return frame


def _plausible_request(frame: DecodedFrame) -> bool:
    """A request whose header decoded to a known api and version with a printable client id."""
    info = frame.api_info
    if frame.header is None or info is None or frame.api_version not in info.versions:
        return False
    client_id = frame.header.client_id
    return client_id is None or client_id.isprintable()


def decode_as_request(index: int, offset: int, data: bytes) -> DecodedFrame:
    """``data`` decoded as a request frame (header first, then the body its header names)."""
    frame = DecodedFrame(index, offset, data, "request")
    try:
        header, pos = decode_request_header(data)
    except KprotoError as exc:
        frame.error = exc
        return frame
    frame.header, frame.header_end = header, pos
    frame.api_key, frame.api_version = header.api_key, header.api_version
    info = frame.api_info
    if info is None:
        frame.error = UnsupportedVersionError(f"unknown api key {header.api_key}")
        return frame
    if header.api_version not in info.versions:
        frame.error = UnsupportedVersionError(
            f"{info.name} has no version {header.api_version} (kproto knows {info.min_version}-{info.max_version})"
        )
        return frame
    frame.body, frame.error = _decode_body(info.request, data, pos, header.api_version)
    return frame


def decode_as_response(
    index: int, offset: int, data: bytes, api_key: Optional[int], api_version: Optional[int]
) -> DecodedFrame:
    """``data`` decoded as the response of ``api_key`` v``api_version``."""
    frame = DecodedFrame(index, offset, data, "response", api_key, api_version)
    try:
        header, pos = ResponseHeader.decode_from(data, 4, len(data), frame.header_version)
    except KprotoError as exc:
        frame.error = exc
        return frame
    frame.header, frame.header_end = header, pos
    info = frame.api_info
    if api_key is None or api_version is None:
        frame.error = UnsupportedVersionError(
            "a response needs its api key and version (--api/--api-key, --api-version)"
        )
    elif info is None:
        frame.error = UnsupportedVersionError(f"unknown api key {api_key}")
    elif api_version not in info.versions:
        frame.error = UnsupportedVersionError(
            f"{info.name} has no version {api_version} (kproto knows {info.min_version}-{info.max_version})"
        )
    else:
        frame.body, frame.error = _decode_body(info.response, data, pos, api_version)
    return frame


def _decode_body(cls: Any, data: bytes, pos: int, version: int) -> Tuple[Any, Optional[KprotoError]]:
    try:
        body, end = cls.decode_from(data, pos, len(data), version)
    except KprotoError as exc:
        return None, exc
    if end != len(data):
        error: DecodeError = trailing_bytes(f"{cls.__name__} v{version}", end, len(data))
        return None, error
    return body, None
