"""Adapters that let the differential tests drive independent implementations of the Kafka protocol.

A peer speaks in its own objects; the tests speak in kproto's ``to_dict()`` shape restricted to the
fields one version carries (the "wire value").  Each adapter converts both ways *generically*, walking
the peer's own introspection (kafka-python's JSON field tree, kio's dataclass fields) next to a *shape*
derived from kproto's schema model, and asserts that both sides have the same field set at every level,
so that a field one side lacks can never be dropped silently.

Names are matched by :func:`match_name`; everything a peer cannot represent is mapped by its adapter's
``constrain`` (documented there) before kproto encodes the value, so kproto's own comparison stays exact.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any, Dict, Iterable, Optional, Tuple

#: A struct's shape: kproto attribute -> the shape of its nested struct (or of an array's elements), or
#: None for a scalar / scalar array.  Plain dicts so the kio 0.5 worker process can receive them as JSON.
Shape = Dict[str, Optional[dict]]
#: A value in kproto's ``to_dict()`` shape, restricted to the fields one version carries.
Value = Dict[str, Any]


def shape_of(struct: Any, version: int) -> Shape:
    """The shape of a kproto schema-model struct in ``version``."""
    out: Shape = {}
    for f in struct.fields_for(version):
        t = f.type.element if f.type.is_array else f.type
        out[f.attr] = shape_of(t.struct, version) if t is not None and t.is_struct else None
    return out


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def match_name(peer_name: str, names: Iterable[str]) -> str:
    """The kproto attribute a peer's field name stands for.

    Peers snake-case Kafka's names their own way (``isr_nodes``/``isrnodes``), kio drops ``_ms`` from
    fields it models as durations and suffixes ``id_`` to dodge a builtin, and kafka-python's header
    schema spells ``request_api_key`` where kproto has ``api_key``; comparing names without underscores
    and case, then with those two affixes, then as a unique suffix, resolves all of them.
    """
    keyed = {_key(n): n for n in names}
    k = _key(peer_name)
    for cand in (k, k + "ms", k[len("request") :] if k.startswith("request") else None):
        if cand is not None and cand in keyed:
            return keyed[cand]
    # kafka-python renames the authorized-operations bit fields it patches to ``authorized_operations``
    # (kproto: ``cluster_authorized_operations``, ``topic_authorized_operations``): a unique suffix.
    suffixed = [n for key, n in keyed.items() if key.endswith(k)]
    if len(suffixed) == 1:
        return suffixed[0]
    raise AssertionError(f"peer field {peer_name!r} has no kproto counterpart among {sorted(names)}")


def to_jsonable(value: Any) -> Any:
    """A wire value as JSON (bytes and uuids tagged) — to hand values to a peer in another process."""
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, uuid.UUID):
        return {"$u": value.hex}
    return value


def from_jsonable(value: Any) -> Any:
    """The inverse of :func:`to_jsonable`."""
    if isinstance(value, dict):
        if set(value) == {"$b"}:
            return base64.b64decode(value["$b"])
        if set(value) == {"$u"}:
            return uuid.UUID(hex=value["$u"])
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


def api_and_kind(spec: Any) -> Tuple[str, str]:
    """("Produce", "request") for ProduceRequest; ("RequestHeader", "header"); ("Consumer...", "data")."""
    if spec.kind in ("header", "data"):
        return spec.name, spec.kind
    return spec.name[: -len(spec.kind)], spec.kind


class Peer:
    """One independent implementation: whether it has a (message, version), and its encode/decode."""

    name = ""

    def supports(self, spec: Any, version: int) -> bool:
        raise NotImplementedError

    def encode(self, spec: Any, version: int, value: Value) -> bytes:
        raise NotImplementedError

    def decode(self, spec: Any, version: int, data: bytes) -> Value:
        """The values of ``data`` in wire-value shape; fails unless every byte is consumed."""
        raise NotImplementedError

    def constrain(self, spec: Any, version: int, value: Value) -> Value:
        """Map a drawn value into the part of the value space this peer can represent (identity here)."""
        return value
