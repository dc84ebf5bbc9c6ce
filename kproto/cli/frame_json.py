"""One frame as a JSON record (what ``decode --format json`` prints) and back to its bytes (``encode``).

A frame record always has the same keys (see ``docs/cli.md``)::

    record, index, offset, size, kind, api_key, api_name, api_version, correlation_id,
    header, body, raw_body, error

``raw_body`` holds the bytes the record does not otherwise account for (the body when it did not decode,
or everything after the size prefix when not even the header did), so every frame, decodable or not,
encodes back to its exact bytes.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

import kproto
from kproto.cli.frame_decoding import DecodedFrame
from kproto.cli.json_values import bytes_json, error_json, json_to_python, message_from_json, message_json
from kproto.errors import EncodeError
from kproto.framing import RequestHeader, ResponseHeader

__all__ = ["FRAME_KEYS", "frame_json", "frame_from_json"]

FRAME_KEYS = (
    "record",
    "index",
    "offset",
    "size",
    "kind",
    "api_key",
    "api_name",
    "api_version",
    "correlation_id",
    "header",
    "body",
    "raw_body",
    "error",
)
_I32 = struct.Struct(">i")


def frame_json(frame: DecodedFrame, verbose: bool = False, max_records: Optional[int] = None) -> Dict[str, Any]:
    """The JSON record of a decoded frame (``max_records``: messages listed per record set with ``verbose``)."""
    raw = frame.raw_body
    return {
        "record": "frame",
        "index": frame.index,
        "offset": frame.offset,
        "size": len(frame.data),
        "kind": frame.kind,
        "api_key": frame.api_key,
        "api_name": frame.api_name,
        "api_version": frame.api_version,
        "correlation_id": frame.correlation_id,
        "header": None if frame.header is None else frame.header.to_dict(),
        "body": None if frame.body is None else message_json(frame.body, verbose, max_records, frame.api_version),
        "raw_body": None if raw is None else bytes_json(raw),
        "error": error_json(frame.error),
    }


def frame_from_json(record: Dict[str, Any]) -> bytes:
    """The frame bytes a record describes: the exact inverse of :func:`frame_json`."""
    where = f"frame {record.get('index', '?')}"
    kind = record.get("kind")
    if kind not in ("request", "response"):
        raise EncodeError(f"{where}: kind must be 'request' or 'response', not {kind!r}")
    header_data = record.get("header")
    body_data = record.get("body")
    raw = record.get("raw_body")
    raw_bytes = b"" if raw is None else json_to_python(raw, f"{where}.raw_body")
    if not isinstance(raw_bytes, bytes):
        raise EncodeError(f"{where}: raw_body must be {{\"$bytes\": ...}} or null")
    if header_data is None:
        return _I32.pack(len(raw_bytes)) + raw_bytes
    if kind == "request":
        return _request_bytes(header_data, body_data, raw_bytes, where)
    return _response_bytes(record, header_data, body_data, raw_bytes, where)


def _request_bytes(header_data: Any, body_data: Any, raw_bytes: bytes, where: str) -> bytes:
    header = message_from_json(RequestHeader, header_data, f"{where}.header")
    info = kproto.APIS.get(header.api_key)
    known = info is not None and header.api_version in info.versions
    if body_data is not None:
        if info is None or not known:
            raise EncodeError(f"{where}: no body can be encoded for api key {header.api_key} v{header.api_version}")
        body = message_from_json(info.request, body_data, f"{where}.body")
        return kproto.encode_request(body, header.api_version, header.correlation_id, header.client_id)
    header_version = info.request_header_version(header.api_version) if info is not None and known else 1
    return _with_size([header.encode(header_version), raw_bytes])


def _response_bytes(record: Dict[str, Any], header_data: Any, body_data: Any, raw_bytes: bytes, where: str) -> bytes:
    header = message_from_json(ResponseHeader, header_data, f"{where}.header")
    if body_data is None:
        return _with_size([header.encode(0), raw_bytes])
    api_key, version = record.get("api_key"), record.get("api_version")
    info = kproto.APIS.get(api_key) if isinstance(api_key, int) else None
    if info is None or not isinstance(version, int) or version not in info.versions:
        raise EncodeError(
            f"{where}: a response body needs a known api_key and api_version, not {api_key!r} v{version!r}"
        )
    body = message_from_json(info.response, body_data, f"{where}.body")
    return kproto.encode_response(body, version, header.correlation_id)


def _with_size(parts: List[bytes]) -> bytes:
    payload = b"".join(parts)
    return _I32.pack(len(payload)) + payload
