"""Every byte of a frame labelled with the field it belongs to, as Wireshark's byte pane shows it.

The header and body ranges come from the construct-based reference decoder
(:func:`kproto.reference.dissect`), record sets from :mod:`kproto.cli.message_set_layout`, and whatever
did not decode (an unknown api key or version, a body that fails) is one raw range with the reason.
The ranges returned are sorted, never overlap, and cover the frame exactly: each byte has one label.
"""

from __future__ import annotations

from typing import List

from kproto.cli.frame_decoding import DecodedFrame
from kproto.cli.message_set_layout import message_set_ranges
from kproto.errors import KprotoError
from kproto.reference import FieldRange, dissect, message_spec

__all__ = ["frame_ranges"]


def frame_ranges(frame: DecodedFrame) -> List[FieldRange]:
    """Labelled, sorted, non-overlapping ranges covering all of ``frame.data``."""
    data = frame.data
    size = int.from_bytes(data[:4], "big", signed=True)
    ranges = [FieldRange("size", "value", 0, 4, size)]
    if frame.header is None:
        return ranges + _raw(4, len(data), "frame", frame.error)
    header_name = "RequestHeader" if frame.kind == "request" else "ResponseHeader"
    ranges += _dissected(header_name, frame.header_version, data, 4, frame.header_end)
    if frame.body is None:
        return ranges + _raw(frame.header_end, len(data), "body", frame.error)
    info = frame.api_info
    assert info is not None and frame.api_version is not None
    cls = info.request if frame.kind == "request" else info.response
    try:
        body = _dissected(cls.__name__, frame.api_version, data, frame.header_end, len(data))
    except KprotoError as exc:  # the reference decoder disagrees with the generated one: show the bytes
        return ranges + _raw(frame.header_end, len(data), "body", exc)
    return ranges + body


def _dissected(spec_name: str, version: int, data: bytes, start: int, end: int) -> List[FieldRange]:
    _, found = dissect(message_spec(spec_name), version, data[start:end], start)
    out: List[FieldRange] = []
    for r in found:
        if r.end <= r.start:
            continue  # an empty string or byte string: its length range already labels its bytes
        if r.part == "value" and _is_record_set(spec_name, version, r.path):
            out += message_set_ranges(data[r.start : r.end], r.start, r.path)
        else:
            out.append(r)
    return out


def _is_record_set(spec_name: str, version: int, path: str) -> bool:
    """Whether ``path`` names a ``records`` field (field names without indexes, looked up in the spec)."""
    struct = message_spec(spec_name).root
    parts = [p.split("[", 1)[0] for p in path.split(".")]
    for i, name in enumerate(parts):
        field = next((f for f in struct.fields if f.attr == name), None)
        if field is None:
            return False
        t = field.type
        if i == len(parts) - 1:
            return t.kind == "records"
        inner = t.element if t.is_array else t
        if inner is None or not inner.is_struct or inner.struct is None:
            return False
        struct = inner.struct
    return False


def _raw(start: int, end: int, path: str, error: object) -> List[FieldRange]:
    if end <= start:
        return []
    return [FieldRange(path, "raw", start, end, f"not decoded: {error}" if error else "not decoded")]
