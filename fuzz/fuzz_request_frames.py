"""Fuzz harness: request frames of every api key and version (``kproto.decode_request``), both twins.

Input layout: byte 0 is a mode byte; bit 0 set means the rest is a whole frame as it travels (size prefix
included), clear means the rest is the frame body and the harness writes a correct size prefix (so most
inputs get past the size check).  Bits 1-7 pick where ``FrameReader`` splits the frame into two ``feed``
calls.

Oracles (see ``fuzz/oracles.py``): only ``KprotoError`` escapes; compiled and pure decode to equal
values or fail with the same class and offset; what decodes re-encodes (``encode_request`` with the
decoded header) and decodes again to the same value, and to the very same bytes in classic versions (a
fixed point in flexible ones, see ``check_reencoding``); the embedded consumer
protocol inside JoinGroup/SyncGroup requests gets the same treatment (``decode_embedded``); FrameReader
returns the frame whatever the chunking.  Budget: 64·n + 1 MiB per decode, 1 s CPU.

    python fuzz/fuzz_request_frames.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.oracles import (  # noqa: E402
    Budget,
    Seen,
    check_reencoding,
    check_round_trip,
    check_same_seen,
    fail,
    is_flexible,
    message_value,
    outcome,
    summary,
    twin_name,
)

NAME = "request_frames"
_I32 = struct.Struct(">i")
_twins = None


def setup() -> None:
    global _twins
    from fuzz.twin_backends import frame_twins

    _twins = frame_twins()
    for twin in _twins:  # each twin imports the harness before the first input
        twin.run("fuzz.fuzz_request_frames", "twin_checks", b"")


def frame_of(data: bytes) -> bytes:
    """The frame an input stands for (see the module docstring)."""
    if not data:
        return b""
    rest = data[1:]
    return rest if data[0] & 1 else _I32.pack(len(rest)) + rest


def normalise_request(value):
    header, msg = value
    return (message_value(header), message_value(msg))


def normalise_request_round_trip(value):
    """As :func:`normalise_request`, without the header's unknown tagged fields: the framing encoders take no header
    tags, so a re-encoded frame cannot carry them (reported; the twin check still compares them)."""
    header, msg = value
    kind, fields = message_value(header)
    return ((kind, {k: v for k, v in fields.items() if k != "unknown_tagged_fields"}), message_value(msg))


def twin_checks(data: bytes) -> Seen:
    """What this process's twin does with an input (run by each twin, see ``fuzz/twin_backends.py``): decode
    the frame, check its own round trips, and return what both twins must agree on."""
    from kproto import framing

    twin = twin_name(framing)
    frame = frame_of(data)
    with Budget(len(frame), what=f"decode_request ({twin})", data=data):
        out = outcome(framing.decode_request, frame, what=f"decode_request ({twin})", data=data)
    seen = [("decode_request", summary(out, normalise_request))]
    if out[0] != "ok":
        return seen
    header, msg = out[1]

    def reencode(encoded: bytes) -> bytes:
        again_header, again = framing.decode_request(encoded)
        return framing.encode_request(
            again, again_header.api_version, again_header.correlation_id, again_header.client_id
        )

    encoded = check_round_trip(
        out[1],
        lambda: framing.encode_request(msg, header.api_version, header.correlation_id, header.client_id),
        framing.decode_request,
        what=f"request round trip ({twin})",
        data=data,
        normalise=normalise_request_round_trip,
    )
    check_reencoding(
        frame,
        encoded,
        lambda: reencode(encoded),
        flexible=is_flexible(type(msg), header.api_version),
        what=f"request ({twin})",
        data=data,
    )
    return seen + embedded_checks(msg, data, twin)


def one_input(data: bytes) -> None:
    if _twins is None:
        setup()
    seen = [twin.run("fuzz.fuzz_request_frames", "twin_checks", data) for twin in _twins]
    check_same_seen(seen[0], seen[1], data=data, names=(_twins[0].name, _twins[1].name))
    check_frame_reader(frame_of(data), (data[0] >> 1) if data else 0, data)


def embedded_checks(msg, data: bytes, twin: str) -> Seen:
    """JoinGroup protocol metadata / SyncGroup assignments: the consumer protocol's own codec."""
    name = type(msg).__name__
    if name in ("JoinGroupRequest", "JoinGroupResponse"):
        members = msg.protocols if name == "JoinGroupRequest" else msg.members
        blobs = [(p.metadata, "ConsumerProtocolSubscription") for p in members]
    elif name == "SyncGroupRequest":
        blobs = [(a.assignment, "ConsumerProtocolAssignment") for a in msg.assignments]
    elif name == "SyncGroupResponse":
        blobs = [(msg.assignment or None, "ConsumerProtocolAssignment")]
    else:
        return []
    return [
        entry
        for blob, cls_name in blobs
        if blob is not None
        for entry in embedded_blob(bytes(blob), cls_name, data, twin)
    ]


def embedded_blob(blob: bytes, cls_name: str, data: bytes, twin: str) -> Seen:
    import kproto.messages

    cls = getattr(kproto.messages, cls_name)
    with Budget(len(blob), what=f"{cls_name}.decode_embedded ({twin})", data=data):
        out = outcome(cls.decode_embedded, blob, what=f"{cls_name}.decode_embedded", data=data)
    norm = lambda v: (v[0], message_value(v[1]))  # noqa: E731
    seen = [(f"{cls_name}.decode_embedded", summary(out, norm))]
    if out[0] != "ok":
        return seen
    version, obj = out[1]
    if version > cls.VALID_VERSIONS[1]:
        return seen  # a newer version read with the newest layout kproto knows: trailing bytes were ignored
    encoded = check_round_trip(
        (version, obj),
        lambda: obj.encode_embedded(version),
        cls.decode_embedded,
        what=f"{cls_name} round trip ({twin})",
        data=data,
        normalise=norm,
    )
    check_reencoding(
        blob,
        encoded,
        lambda: cls.decode_embedded(encoded)[1].encode_embedded(version),
        flexible=is_flexible(cls, version),
        what=f"{cls_name} ({twin})",
        data=data,
    )
    return seen


def check_frame_reader(frame: bytes, split: int, data: bytes) -> None:
    from kproto.errors import LimitExceededError

    from kproto import framing

    reader = framing.FrameReader(max_frame_size=1 << 20)
    cut = min(split, len(frame))
    got = []
    res = outcome(
        lambda: [reader.feed(frame[:cut]), reader.feed(frame[cut:])],
        allowed=(LimitExceededError,),
        what="FrameReader.feed",
        data=data,
    )
    if res[0] == "error":
        return
    for part in res[1]:
        got.extend(part)
    joined = b"".join(got)
    if joined != frame[: len(joined)] or len(joined) + reader.buffered != len(frame):
        raise fail(
            f"FrameReader returned {len(got)} frames covering {len(joined)} bytes and buffers "
            f"{reader.buffered} of a {len(frame)}-byte input",
            data,
        )


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
