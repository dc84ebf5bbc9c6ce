"""Differential tests against independent implementations of the same wire protocol ("peers").

For every (message, version) kproto knows, every peer that models it is checked in both directions:

1. kproto encodes -> the peer decodes all of the bytes to the same values;
2. the peer encodes the same values -> bytes identical to kproto's;
3. kproto decodes the peer's bytes -> a message equal to the one it encoded.

Values are a few hypothesis draws from kproto's schema model plus one deterministic "full" value with
every optional part present (``message_strategies.full_value``); they reach each peer through generic
adapters (``tests/peers``) that walk the peer's own introspection, never per-API code.

Peers:

* ``kp-old``   kafka-python 3.x's hand-declared 0.8/0.9 classes (``kafka.protocol.old``).
* ``kp-json``  kafka-python 3.x's JSON-driven classes (Kafka's JSON, every version from 0, flexible ones).
* ``kio``      kio 0.6.x: every message it generates (inter-broker, KRaft, share groups, ...), in the
               versions Kafka 4.x still has.
* ``kio-0.5``  kio 0.5.0 in a worker process, only where kio 0.6 lacks the version (Kafka 4.0's removals
               and the ZooKeeper-era inter-broker APIs).

``test_every_message_version_has_a_peer`` fails if a (message, version) has no peer and is not listed in
``NO_PEER`` with the reason (such versions need another independent check, e.g. golden frames).
"""

from __future__ import annotations

import os
import struct
from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto
import kproto.messages
from message_strategies import full_value, message_class, message_values, spec_versions
from peers import Peer, shape_of
from peers.kafka_python import KafkaPythonJson, KafkaPythonOld
from peers.kio05 import Kio05
from peers.kio_peer import Kio

CASES = spec_versions()
_BY_NAME = {spec.name: spec for spec, _ in CASES}
IDS = [f"{spec.name}-v{v}" for spec, v in CASES]
# A few draws per (message, version): the table is ~2000 entries once every API is in; the "full" value
# below covers every optional part deterministically.  KPROTO_PEER_EXAMPLES widens a local run.
PEER_EXAMPLES = settings(
    max_examples=int(os.environ.get("KPROTO_PEER_EXAMPLES", "4")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_KIO = Kio()
PEERS: Dict[str, Peer] = {p.name: p for p in (KafkaPythonOld(), KafkaPythonJson(), _KIO, Kio05(_KIO))}

#: (message, version) that no peer models, with the reason; each needs another independent check.
NO_PEER: Dict[Tuple[str, int], str] = {}


class _Specs(dict):
    """Specs by class name; a former name (``GroupCoordinatorResponse``) finds its API's newest spec."""

    def __missing__(self, name: str) -> Any:
        cls = getattr(kproto.messages, name)
        return next(spec for spec in _BY_NAME.values() if message_class(spec) is cls)


SPECS = _Specs(_BY_NAME)


def wire_values(spec: Any, version: int, msg: Any) -> Dict[str, Any]:
    """The values ``msg`` puts on the wire in ``version``, in kproto's ``to_dict()`` shape."""

    def view(value: Dict[str, Any], shape: Dict[str, Any]) -> Dict[str, Any]:
        out = {}
        for name, sub in shape.items():
            v = value[name]
            if sub is not None and isinstance(v, list):
                v = [view(item, sub) for item in v]
            elif sub is not None and isinstance(v, dict):
                v = view(v, sub)
            out[name] = v
        return out

    return view(msg.to_dict(), shape_of(spec.root, version))


def peers_of(spec: Any, version: int) -> List[str]:
    return [name for name, peer in PEERS.items() if peer.supports(spec, version)]


def coverage() -> Dict[Tuple[str, int], List[str]]:
    """(message, version) -> the peers that check it."""
    return {(spec.name, v): peers_of(spec, v) for spec, v in CASES}


def test_every_message_version_has_a_peer():
    """Every (message, version) kproto has is checked against at least one peer, in both directions."""
    table = coverage()
    uncovered = [key for key, peers in table.items() if not peers and key not in NO_PEER]
    assert not uncovered, f"no peer covers {uncovered}"
    stale = [key for key in NO_PEER if table.get(key)]
    assert not stale, f"NO_PEER lists messages a peer covers (or kproto lacks): {stale}"


def _peer_versions() -> Dict[str, set]:
    """(api key, version) pairs each in-process peer's own index lists (kio's schema index, kafka-python's
    JSON classes)."""
    from kio.schema.index import api_key_map, schema_name_map

    from peers.kafka_python import _JSON_MODULES

    kio = {(key, v) for key, name in api_key_map.items() for v in schema_name_map[name]}
    kp = set()
    for mod in _JSON_MODULES:
        for cls in vars(mod).values():
            if (
                isinstance(cls, type)
                and isinstance(getattr(cls, "API_KEY", None), int)
                and isinstance(getattr(cls, "max_version", None), int)
            ):
                kp |= {(cls.API_KEY, v) for v in range(cls.min_version, cls.max_version + 1)}
    return {"kio": kio, "kp-json": kp}


def test_kproto_has_every_version_a_peer_has():
    """Nothing a peer can speak is missing from kproto (the pinned release is the peers' newest)."""
    for peer, pairs in _peer_versions().items():
        missing = sorted((key, v) for key, v in pairs if key not in kproto.APIS or v not in kproto.APIS[key].versions)
        assert not missing, f"{peer} has (api key, version) kproto lacks: {missing}"


def _check(peer: Peer, spec: Any, version: int, value: Dict[str, Any]) -> None:
    cls = message_class(spec)
    msg = cls.from_dict(peer.constrain(spec, version, value))
    expected = wire_values(spec, version, msg)
    ours = msg.encode(version)
    # 1. the peer reads kproto's bytes (all of them) back to the same values
    assert peer.decode(spec, version, ours) == expected, peer.name
    # 2. the peer writes the same values to the same bytes
    theirs = peer.encode(spec, version, expected)
    assert theirs == ours, peer.name
    # 3. kproto reads the peer's bytes back to an equal message
    assert cls.decode(theirs, version) == msg, peer.name


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
def test_peers_agree_on_the_full_value(spec, version):
    """The value with every optional part present (arrays of two, nulls set, tagged fields written)."""
    msg = full_value(spec, version)
    for name in peers_of(spec, version):
        _check(PEERS[name], spec, version, wire_values(spec, version, msg))


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@PEER_EXAMPLES
@given(data=st.data())
def test_peers_agree_both_directions(spec, version, data):
    msg = data.draw(message_values(spec, version))
    for name in peers_of(spec, version):
        _check(PEERS[name], spec, version, wire_values(spec, version, msg))


@pytest.mark.parametrize(
    "spec,version",
    [(s, v) for s, v in CASES if s.kind in ("request", "response")],
    ids=[i for (s, _), i in zip(CASES, IDS) if s.kind in ("request", "response")],
)
def test_header_versions_agree_with_kio(spec, version):
    """The header version of each request/response version is the one kio pairs with it (header 0 for
    ControlledShutdown v0 requests and every ApiVersions response included)."""
    kio = [PEERS[n] for n in ("kio", "kio-0.5") if PEERS[n].supports(spec, version)]
    if not kio:
        assert (spec.name, version) in NO_PEER
        return
    assert spec.header_version(version) == kio[0].header_version(spec, version)


def test_constraints_leave_kproto_values_alone_where_the_peer_is_unconstrained():
    """Only kio constrains values: error codes its enum lacks and int64 durations outside [0, 2**40)."""
    assert type(PEERS["kp-old"]).constrain is Peer.constrain
    assert type(PEERS["kp-json"]).constrain is Peer.constrain
    spec = SPECS["OffsetCommitRequest"]
    value = wire_values(
        spec,
        2,
        message_class(spec).from_dict(
            {
                "group_id": "g",
                "generation_id_or_member_epoch": 1,
                "member_id": "m",
                "retention_time_ms": -(1 << 62),
                "topics": [],
            }
        ),
    )
    peer = PEERS["kio"] if PEERS["kio"].supports(spec, 2) else PEERS["kio-0.5"]
    assert peer.constrain(spec, 2, value)["retention_time_ms"] == (-(1 << 62)) % (1 << 40)
    spec = SPECS["HeartbeatResponse"]
    assert PEERS["kio"].constrain(spec, 0, {"error_code": 31})["error_code"] == 31
    assert PEERS["kio"].constrain(spec, 0, {"error_code": 4242})["error_code"] != 4242


# --------------------------------------------------------------------------------------------------------
# Whole frames: size prefix + header + body, built by the peers' own framing where they have one, and by
# the peer's header and body encoders where they do not (kio).


def _msg(name: str, **fields: Any):
    return message_class(SPECS[name]).from_dict(fields)


FRAME_REQUESTS = [
    ("HeartbeatRequest", 0, dict(group_id="grp", generation_id=7, member_id="m-1")),
    ("MetadataRequest", 0, dict(topics=[{"name": "t1"}, {"name": "ümlaut"}])),
    (
        "FetchRequest",
        1,
        dict(
            replica_id=-1,
            max_wait_ms=500,
            min_bytes=1,
            topics=[
                {
                    "topic": "t",
                    "partitions": [
                        {"partition": p, "fetch_offset": 10 * p, "partition_max_bytes": 1 << 20} for p in range(3)
                    ],
                }
            ],
        ),
    ),
    (
        "OffsetCommitRequest",
        2,
        dict(
            group_id="g",
            generation_id_or_member_epoch=3,
            member_id="m",
            retention_time_ms=-1,
            topics=[
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "committed_offset": 42, "committed_metadata": None}],
                }
            ],
        ),
    ),
    ("ControlledShutdownRequest", 0, dict(broker_id=3)),
    ("ControlledShutdownRequest", 1, dict(broker_id=3)),
]
FRAME_CASES = [(peer, name, v, value) for name, v, value in FRAME_REQUESTS for peer in peers_of(SPECS[name], v)]


def _peer_frame(
    peer: Peer, spec: Any, version: int, header_spec: Any, header: Dict[str, Any], body: Dict[str, Any]
) -> bytes:
    hv = peer.header_version(spec, version) if hasattr(peer, "header_version") else None
    assert hv is not None
    payload = peer.encode(header_spec, hv, header) + peer.encode(spec, version, body)
    return struct.pack(">i", len(payload)) + payload


def _header_value(header_spec: Any, hv: int, **values: Any) -> Dict[str, Any]:
    return {name: values[name] for name in shape_of(header_spec.root, hv)}


@pytest.mark.parametrize(
    "peer_name,name,version,value", FRAME_CASES, ids=[f"{p}-{n}-v{v}" for p, n, v, _ in FRAME_CASES]
)
@pytest.mark.parametrize("client_id", ["kproto-test", None])
def test_request_frames_match(peer_name, name, version, value, client_id):
    spec = SPECS[name]
    msg = _msg(name, **value)
    body = wire_values(spec, version, msg)
    peer = PEERS[peer_name]
    ours = kproto.encode_request(msg, version, correlation_id=0x01020304, client_id=client_id)
    if peer_name == "kp-old":
        obj = peer.build(peer.cls(spec, version), body, shape_of(spec.root, version))
        obj.with_header(correlation_id=0x01020304, client_id=client_id)
        theirs = obj.encode(header=True, framed=True)
    elif peer_name == "kp-json":
        cls = peer.cls(spec, version)
        obj = peer.build(cls._struct, version, body, shape_of(spec.root, version), cls)
        obj.with_header(correlation_id=0x01020304, client_id=client_id)
        theirs = obj.encode(version=version, header=True, framed=True)
    else:
        hspec = SPECS["RequestHeader"]
        hv = peer.header_version(spec, version)
        header = _header_value(
            hspec, hv, api_key=spec.api_key, api_version=version, correlation_id=0x01020304, client_id=client_id
        )
        theirs = _peer_frame(peer, spec, version, hspec, header, body)
    assert theirs == ours
    header, decoded = kproto.decode_request(theirs)
    assert (header.api_key, header.api_version, header.correlation_id) == (spec.api_key, version, 0x01020304)
    assert decoded == msg
    if kproto.APIS[spec.api_key].request_header_version(version) == 0:
        # ControlledShutdown v0: header v0 has no client id at all, whatever the caller passed.
        assert header.client_id is None
        assert len(ours) == 4 + 8 + len(msg.encode(version))
    else:
        assert header.client_id == client_id


def test_controlled_shutdown_v0_frame_is_header_v0():
    frame = kproto.encode_request(
        _msg("ControlledShutdownRequest", broker_id=9), 0, correlation_id=5, client_id="ignored"
    )
    assert frame == b"\x00\x00\x00\x0c" + b"\x00\x07\x00\x00\x00\x00\x00\x05" + b"\x00\x00\x00\x09"


FRAME_RESPONSES = [
    ("HeartbeatResponse", 0, dict(error_code=27)),
    ("GroupCoordinatorResponse", 0, dict(error_code=0, node_id=1, host="broker-1", port=9092)),
    (
        "ControlledShutdownResponse",
        0,
        dict(error_code=0, remaining_partitions=[{"topic_name": "t", "partition_index": 1}]),
    ),
]
RESPONSE_FRAME_CASES = [
    (peer, name, v, value) for name, v, value in FRAME_RESPONSES for peer in peers_of(SPECS[name], v)
]


@pytest.mark.parametrize(
    "peer_name,name,version,value", RESPONSE_FRAME_CASES, ids=[f"{p}-{n}-v{v}" for p, n, v, _ in RESPONSE_FRAME_CASES]
)
def test_response_frames_match(peer_name, name, version, value):
    spec = SPECS[name]
    msg = _msg(name, **value)
    body = wire_values(spec, version, msg)
    peer = PEERS[peer_name]
    shape = shape_of(spec.root, version)
    ours = kproto.encode_response(msg, version, correlation_id=77)
    if peer_name == "kp-old":
        cls = peer.cls(spec, version)
        obj = peer.build(cls, body, shape)
        obj.with_header(correlation_id=77)
        theirs = obj.encode(header=True, framed=True)
        back = cls.decode(ours, header=True, framed=True)
        assert back.header.correlation_id == 77 and peer.values(cls, back, shape) == body
    elif peer_name == "kp-json":
        cls = peer.cls(spec, version)
        # Built with version= and encoded without it: ApiMessage.encode(version=...) assigns
        # header.request_api_version -- an AttributeError on a ResponseHeader (kafka-python 3.0.12).
        obj = peer.build(cls._struct, version, body, shape, cls, versioned=True)
        obj.with_header(correlation_id=77)
        theirs = obj.encode(header=True, framed=True)
        back = cls.decode(ours, version=version, header=True, framed=True)
        assert back.header.correlation_id == 77 and peer.unbuild(cls._struct, version, back, shape) == body
    else:
        hspec = SPECS["ResponseHeader"]
        hv = peer.header_version(spec, version)
        theirs = _peer_frame(peer, spec, version, hspec, _header_value(hspec, hv, correlation_id=77), body)
    assert theirs == ours
    header, decoded = kproto.decode_response(theirs, spec.api_key, version)
    assert header.correlation_id == 77 and decoded == msg


@pytest.mark.parametrize(
    "peer_name,name,version,value",
    [c for c in FRAME_CASES if c[0].startswith("kp-")],
    ids=[f"{p}-{n}-v{v}" for p, n, v, _ in FRAME_CASES if p.startswith("kp-")],
)
def test_peers_decode_kproto_request_frames(peer_name, name, version, value):
    """kafka-python parses kproto's whole request frame (size, header, body) with its own header reader."""
    spec = SPECS[name]
    msg = _msg(name, **value)
    frame = kproto.encode_request(msg, version, correlation_id=99, client_id="cid")
    peer = PEERS[peer_name]
    shape = shape_of(spec.root, version)
    cls = peer.cls(spec, version)
    if peer_name == "kp-old":
        back = cls.decode(frame, header=True, framed=True)
        assert (back.header.api_key, back.header.api_version, back.header.client_id) == (spec.api_key, version, "cid")
        assert peer.values(cls, back, shape) == wire_values(spec, version, msg)
    else:
        back = cls.decode(frame, version=version, header=True, framed=True)
        assert (back.header.request_api_key, back.header.request_api_version) == (spec.api_key, version)
        assert back.header.client_id == "cid" and back.header.correlation_id == 99
        assert peer.unbuild(cls._struct, version, back, shape) == wire_values(spec, version, msg)
