"""The per-version entries of the pure codecs' tables (``Message._DECODERS``/``_ENCODERS``).

A pure generated module has one decoder ``dec(version, buf, cur, end)`` and one encoder
``enc(version, obj, out)`` per struct; the classes' tables hold, for each version, a function of the
shape callers use (``decoder(buf, cur, end)``, ``encoder(obj, out)``) with the version bound.  They are
plain Python functions (this module is never compiled), as the compiled field interpreter expects of
the codecs it takes over.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable

__all__ = ["decoders", "encoders"]


def _decoder(dec: Callable[..., Any], version: int) -> Callable[[bytes, Any, int], Any]:
    def decode(buf: bytes, cur: Any, end: int) -> Any:
        return dec(version, buf, cur, end)

    return decode


def _encoder(enc: Callable[..., Any], version: int) -> Callable[[Any, bytearray], None]:
    def encode(obj: Any, out: bytearray) -> None:
        enc(version, obj, out)

    return encode


def decoders(dec: Callable[..., Any], versions: Iterable[int]) -> Dict[int, Callable[[bytes, Any, int], Any]]:
    """``{version: decoder(buf, cur, end)}`` over ``versions``, each calling ``dec`` with its version."""
    return {v: _decoder(dec, v) for v in versions}


def encoders(enc: Callable[..., Any], versions: Iterable[int]) -> Dict[int, Callable[[Any, bytearray], None]]:
    """``{version: encoder(obj, out)}`` over ``versions``, each calling ``enc`` with its version."""
    return {v: _encoder(enc, v) for v in versions}
