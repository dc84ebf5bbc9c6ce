"""The field interpreter against the pure codecs, over every API and version it serves.

Compiled, the APIs without specialised compiled codecs run on ``kproto/_fast/_field_interpreter.pyx``,
which defers to the class's pure codec for whatever it does not accept.  These tests hold the
interpreter *alone* (``Decoder.fast`` / ``Encoder.fast``, no deferral) to the pure codec: the same bytes
for every message, equal objects for every body, and never a result where the pure codec raises; and the
bound entry points to exactly the pure codec's errors (type, message, offset, field path).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproto.errors import DecodeError, EncodeError, KprotoError
from kproto.message_base import Cursor
from kproto.wire import trailing_bytes
from message_strategies import full_value, message_class, message_values, spec_versions

try:
    from kproto._fast._field_interpreter import Decoder, GiveUp
except ImportError:  # the pure build: nothing is bound
    Decoder = GiveUp = None


def _served(spec, version):
    return Decoder is not None and type(message_class(spec)._DECODERS.get(version)) is Decoder


CASES = [(spec, v) for spec, v in spec_versions() if _served(spec, v)]
IDS = [f"{spec.name}-v{v}" for spec, v in CASES]
FEW = settings(
    max_examples=int(os.environ.get("KPROTO_ROUNDTRIP_EXAMPLES", "4")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_every_cold_api_runs_on_the_interpreter():
    if Decoder is None or os.environ.get("KPROTO_PURE") == "1":
        pytest.skip("field interpreter not active: pure build (KPROTO_PURE=1 or extension not built)")
    apis = {spec.api_key for spec, _ in CASES}
    assert len(apis) >= 75  # every API outside setup.py's HOT_MODULES
    from kproto.messages import FetchRequest

    assert type(FetchRequest._DECODERS[12]) is not Decoder  # the hot APIs keep their compiled codecs


def _pure_decode(cls, version, buf):
    cur = Cursor(0)
    obj = cls._DECODERS[version].pure(buf, cur, len(buf))
    if cur.pos != len(buf):
        raise trailing_bytes(f"{cls._NAME} v{version}", cur.pos, len(buf))
    return obj


def _outcome(cls, version, fn, *args):
    """What ``fn(*args)`` gave: a decoded message by its bytes (a corrupted float64 can be a NaN, which no
    value equals), or the error's type, text, offset and path."""
    try:
        return ("ok", _pure_encode(cls, version, fn(*args)))
    except KprotoError as exc:
        return ("error", type(exc), str(exc), getattr(exc, "offset", None), getattr(exc, "path", None))


def _pure_encode(cls, version, msg):
    out = bytearray()
    cls._ENCODERS[version].pure(msg, out)
    return bytes(out)


def _same_as_pure(cls, version, msg):
    """The interpreter alone writes the pure codec's bytes and reads them back as the pure codec does."""
    wire = _pure_encode(cls, version, msg)
    assert cls._ENCODERS[version].fast(msg) == wire
    assert msg.encode(version) == wire
    obj, end = cls._DECODERS[version].fast(wire, 0, len(wire))
    assert end == len(wire)
    assert obj == _pure_decode(cls, version, wire) == msg
    return wire


def _judged_like_pure(cls, version, body):
    """Bytes the pure codec refuses, the interpreter refuses too; the bound entry raises the same error."""
    pure = _outcome(cls, version, _pure_decode, cls, version, body)
    assert _outcome(cls, version, cls.decode, body, version) == pure
    try:
        obj, end = cls._DECODERS[version].fast(body, 0, len(body))
    except GiveUp:
        return
    if end == len(body):  # else bytes are left over, which Message.decode refuses (as checked above)
        assert pure == ("ok", _pure_encode(cls, version, obj))


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
def test_full_value_matches_pure(spec, version):
    _same_as_pure(message_class(spec), version, full_value(spec, version))


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@FEW
@given(data=st.data())
def test_drawn_values_bytes_and_errors_match_pure(spec, version, data):
    cls = message_class(spec)
    wire = _same_as_pure(cls, version, data.draw(message_values(spec, version)))
    _judged_like_pure(cls, version, wire[: data.draw(st.integers(0, max(len(wire) - 1, 0)))])
    if wire:
        at = data.draw(st.integers(0, len(wire) - 1))
        byte = data.draw(st.integers(0, 255))
        _judged_like_pure(cls, version, wire[:at] + bytes([byte]) + wire[at + 1 :])
    _judged_like_pure(cls, version, wire + b"\x00")


def test_bad_values_raise_the_pure_codecs_errors():
    if not CASES:
        pytest.skip("field interpreter not active: pure build (KPROTO_PURE=1 or extension not built)")
    from kproto.messages import CreateTopicsRequest as C

    topic = C.CreatableTopic(name="t", replication_factor=1 << 15)
    msg = C(topics=[topic])
    with pytest.raises(GiveUp):
        C._ENCODERS[5].fast(msg)
    with pytest.raises(EncodeError) as info:
        msg.encode(5)
    assert info.value.path == "CreateTopicsRequest.topics[0].replication_factor"
    # A field the version cannot carry: the pure codec's UnsupportedVersionError.
    with pytest.raises(KprotoError, match="version 0 cannot carry it"):
        C(validate_only=True).encode(0)
    # A corrupted body: the pure decoder's message, offset and path.
    wire = bytearray(C(topics=[C.CreatableTopic(name="abc")]).encode(5))
    wire[2] = 0xFF  # the name's UTF-8
    with pytest.raises(DecodeError) as err:
        C.decode(bytes(wire), 5)
    assert err.value.path == "topics[0].name" and err.value.offset == 2
