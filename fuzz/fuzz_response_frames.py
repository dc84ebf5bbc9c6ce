"""Fuzz harness: response frames of every api key and version (``kproto.decode_response``), both twins.

Input layout: byte 0 picks the api (index into ``kproto.APIS`` in api-key order, modulo the number of
apis), byte 1 the version (modulo the api's version count), byte 2 bit 0 set means the rest is a whole
frame (size prefix included), clear means the harness writes a correct size prefix.  Everything after
byte 2 is the frame or body.  Every (api, version) is reachable: no api has more than 256 versions.

Oracles: only ``KprotoError`` escapes; compiled and pure agree (value, or error class and offset); what
decodes re-encodes with ``encode_response`` and decodes again to the same value, to the same bytes in
classic versions and to a fixed point in flexible ones (``check_reencoding``); the
consumer protocol embedded in JoinGroup members' metadata and the SyncGroup assignment is checked the same
way.  Budget: 64·n + 1 MiB per decode, 1 s CPU.

    python fuzz/fuzz_response_frames.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.fuzz_request_frames import embedded_checks  # noqa: E402
from fuzz.oracles import (  # noqa: E402
    Budget,
    Seen,
    check_reencoding,
    check_round_trip,
    check_same_seen,
    is_flexible,
    message_value,
    outcome,
    summary,
    twin_name,
)

NAME = "response_frames"
_I32 = struct.Struct(">i")
_twins = None
_apis = None


def setup() -> None:
    global _twins
    from fuzz.twin_backends import frame_twins

    _twins = frame_twins()
    for twin in _twins:  # each twin imports the harness before the first input
        twin.run("fuzz.fuzz_response_frames", "twin_checks", b"")


def apis():
    """(api key, its versions) of every API, in key order: what an input's first two bytes choose from."""
    global _apis
    if _apis is None:
        from kproto.apis import APIS

        _apis = [(info.api_key, list(info.versions)) for _, info in sorted(APIS.items())]
    return _apis


def select(data: bytes):
    """(api_key, version, frame) for an input (see the module docstring)."""
    if len(data) < 3:
        return None
    api_key, versions = apis()[data[0] % len(apis())]
    version = versions[data[1] % len(versions)]
    rest = data[3:]
    frame = rest if data[2] & 1 else _I32.pack(len(rest)) + rest
    return api_key, version, frame


def input_for(api_key: int, version: int, frame: bytes) -> bytes:
    """The harness input that stands for a response frame (used to make seeds)."""
    index = [k for k, _ in apis()].index(api_key)
    return bytes((index, dict(apis())[api_key].index(version), 0)) + frame[4:]


def normalise_response(value):
    header, msg = value
    return (message_value(header), message_value(msg))


def normalise_response_round_trip(value):
    """As :func:`normalise_response`, without the header's unknown tagged fields: the framing encoders take no header
    tags, so a re-encoded frame cannot carry them (reported; the twin check still compares them)."""
    header, msg = value
    kind, fields = message_value(header)
    return ((kind, {k: v for k, v in fields.items() if k != "unknown_tagged_fields"}), message_value(msg))


def twin_checks(data: bytes) -> Seen:
    """What this process's twin does with an input (run by each twin, see ``fuzz/twin_backends.py``): decode
    the frame, check its own round trips, and return what both twins must agree on."""
    from kproto import framing

    chosen = select(data)
    if chosen is None:
        return []
    api_key, version, frame = chosen
    what = f"decode_response api {api_key} v{version}"
    twin = twin_name(framing)
    with Budget(len(frame), what=f"{what} ({twin})", data=data):
        out = outcome(framing.decode_response, frame, api_key, version, what=f"{what} ({twin})", data=data)
    seen = [(what, summary(out, normalise_response))]
    if out[0] != "ok":
        return seen
    header, msg = out[1]
    encoded = check_round_trip(
        out[1],
        lambda: framing.encode_response(msg, version, header.correlation_id),
        lambda f: framing.decode_response(f, api_key, version),
        what=f"response round trip api {api_key} v{version} ({twin})",
        data=data,
        normalise=normalise_response_round_trip,
    )
    again = lambda: framing.encode_response(  # noqa: E731
        framing.decode_response(encoded, api_key, version)[1], version, header.correlation_id
    )
    check_reencoding(
        frame,
        encoded,
        again,
        flexible=is_flexible(type(msg), version),
        what=f"response api {api_key} v{version} ({twin})",
        data=data,
    )
    return seen + embedded_checks(msg, data, twin)


def one_input(data: bytes) -> None:
    if _twins is None:
        setup()
    seen = [twin.run("fuzz.fuzz_response_frames", "twin_checks", data) for twin in _twins]
    check_same_seen(seen[0], seen[1], data=data, names=(_twins[0].name, _twins[1].name))


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
