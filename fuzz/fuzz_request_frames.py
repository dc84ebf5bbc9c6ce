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
from fuzz.oracles import (
    Budget,
    check_reencoding,
    check_round_trip,
    check_same_outcome,
    fail,  # noqa: E402
    is_flexible,
    message_value,
    outcome,
)

NAME = "request_frames"
_I32 = struct.Struct(">i")
_twins = None


def setup() -> None:
    global _twins
    from fuzz.twin_backends import compiled_codecs, load_pure_codecs

    _twins = (compiled_codecs(), load_pure_codecs())


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


def _reencode_request(twin, frame: bytes) -> bytes:
    header, msg = twin.framing.decode_request(frame)
    return twin.framing.encode_request(msg, header.api_version, header.correlation_id, header.client_id)


def one_input(data: bytes) -> None:
    if _twins is None:
        setup()
    frame = frame_of(data)
    outs = []
    for twin in _twins:
        with Budget(len(frame), what=f"decode_request ({twin.name})", data=data):
            outs.append(outcome(twin.framing.decode_request, frame, what=f"decode_request ({twin.name})", data=data))
    check_same_outcome(
        outs[0],
        outs[1],
        what="decode_request",
        data=data,
        normalise=normalise_request,
        names=(_twins[0].name, _twins[1].name),
    )
    if outs[0][0] == "ok":
        for twin, (_, value) in zip(_twins, outs):
            header, msg = value
            encoded = check_round_trip(
                value,
                lambda: twin.framing.encode_request(msg, header.api_version, header.correlation_id, header.client_id),
                twin.framing.decode_request,
                what=f"request round trip ({twin.name})",
                data=data,
                normalise=normalise_request_round_trip,
            )
            check_reencoding(
                frame,
                encoded,
                lambda: _reencode_request(twin, encoded),
                flexible=is_flexible(type(msg), header.api_version),
                what=f"request ({twin.name})",
                data=data,
            )
        check_embedded(outs[0][1][1], data)
    check_frame_reader(frame, (data[0] >> 1) if data else 0, data)


def check_embedded(msg, data: bytes) -> None:
    """JoinGroup protocol metadata / SyncGroup assignments: the consumer protocol's own codec."""
    name = type(msg).__name__
    if name == "JoinGroupRequest":
        blobs = [(p.metadata, "ConsumerProtocolSubscription") for p in msg.protocols]
    elif name == "SyncGroupRequest":
        blobs = [(a.assignment, "ConsumerProtocolAssignment") for a in msg.assignments]
    else:
        return
    for blob, cls_name in blobs:
        if blob is None:
            continue
        check_embedded_blob(bytes(blob), cls_name, data)


def check_embedded_blob(blob: bytes, cls_name: str, data: bytes) -> None:
    outs = []
    for twin in _twins:
        cls = getattr(twin.messages, cls_name)
        with Budget(len(blob), what=f"{cls_name}.decode_embedded ({twin.name})", data=data):
            outs.append(outcome(cls.decode_embedded, blob, what=f"{cls_name}.decode_embedded", data=data))
    norm = lambda v: (v[0], message_value(v[1]))  # noqa: E731
    check_same_outcome(
        outs[0],
        outs[1],
        what=f"{cls_name}.decode_embedded",
        data=data,
        normalise=norm,
        names=(_twins[0].name, _twins[1].name),
    )
    if outs[0][0] != "ok":
        return
    for twin, (_, (version, obj)) in zip(_twins, outs):
        cls = getattr(twin.messages, cls_name)
        if version > cls.VALID_VERSIONS[1]:
            continue  # a newer version read with the newest layout kproto knows: trailing bytes were ignored
        encoded = check_round_trip(
            (version, obj),
            lambda: obj.encode_embedded(version),
            cls.decode_embedded,
            what=f"{cls_name} round trip ({twin.name})",
            data=data,
            normalise=norm,
        )
        check_reencoding(
            blob,
            encoded,
            lambda: cls.decode_embedded(encoded)[1].encode_embedded(version),
            flexible=is_flexible(cls, version),
            what=f"{cls_name} ({twin.name})",
            data=data,
        )


def check_frame_reader(frame: bytes, split: int, data: bytes) -> None:
    from kproto.errors import LimitExceededError

    framing = _twins[0].framing
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
