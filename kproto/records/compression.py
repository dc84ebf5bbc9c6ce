"""The wrapper-message codecs: gzip (zlib), snappy (xerial framing or raw, via cramjam), lz4 (Kafka framing).

Both backends call these once per compressed wrapper, so they stay in Python.  Every decompressor is capped
by ``limit`` (the caller's ``max_decompressed_size``) and turns every codec failure into a
:class:`~kproto.errors.DecodeError` whose offset is ``position`` (where the payload sits in the input) plus
the offset inside the payload when one is known.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.format import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY
from kproto.records.lz4_frame import lz4_frame_decode, lz4_frame_encode

__all__ = ["compress", "decompress", "XERIAL_MAGIC", "SNAPPY_FRAMINGS"]

#: The 8 bytes that identify xerial snappy-java's stream format.  The version fields after them are not
#: checked: some brokers wrote them little-endian (kafka-python #2414).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_BE_I32 = struct.Struct(">i")
SNAPPY_FRAMINGS = ("xerial", "raw")
_GZIP_WBITS = 16 + zlib.MAX_WBITS


def compress(codec: int, data: bytes, *, magic: int, snappy_framing: str = "xerial") -> bytes:
    """Compress an inner message set for a wrapper of ``codec`` (1 gzip, 2 snappy, 3 lz4)."""
    if codec == CODEC_GZIP:
        packer = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == CODEC_SNAPPY:
        if snappy_framing == "raw":
            return bytes(cramjam.snappy.compress_raw(data))
        return _xerial_encode(data)
    if codec == CODEC_LZ4:
        return lz4_frame_encode(data, magic=magic)
    raise EncodeError(f"unknown codec id {codec}")


def decompress(codec: int, payload: bytes, *, magic: int, limit: int, position: int = 0) -> bytes:
    """Decompress a wrapper's value; raise DecodeError/LimitExceededError on bad or oversized payloads."""
    if codec == CODEC_GZIP:
        return _gzip_decode(payload, limit, position)
    if codec == CODEC_SNAPPY:
        if len(payload) > 16 and payload[:8] == XERIAL_MAGIC:
            return _xerial_decode(payload, limit, position)
        return _snappy_block_decode(payload, limit, position)
    if codec == CODEC_LZ4:
        return lz4_frame_decode(payload, magic=magic, limit=limit, position=position)
    raise DecodeError(f"unknown compression codec {codec}", position)


def _xerial_encode(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_BE_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block_decode(block: bytes, limit: int, position: int) -> bytes:
    try:
        declared = cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:  # cramjam raises DecompressionError on a bad length header
        raise DecodeError(f"snappy block has a bad length header: {exc}", position) from None
    if declared > limit:
        raise LimitExceededError(f"snappy block declares {declared} bytes, over the {limit}-byte limit", position)
    try:
        out = bytes(cramjam.snappy.decompress_raw(block))
    except Exception as exc:
        raise DecodeError(f"snappy block does not decompress: {exc}", position) from None
    if len(out) != declared:
        raise DecodeError(f"snappy block gave {len(out)} bytes, its header declares {declared}", position)
    return out


def _xerial_decode(payload: bytes, limit: int, position: int) -> bytes:
    pos, n = 16, len(payload)
    out = bytearray()
    while pos < n:
        if n - pos < 4:
            raise DecodeError("xerial snappy block length is truncated", position + pos)
        (size,) = _BE_I32.unpack_from(payload, pos)
        if size < 0 or size > n - pos - 4:
            raise DecodeError(f"xerial snappy block length {size} does not fit the {n - pos - 4} bytes left", position + pos)
        pos += 4
        out += _snappy_block_decode(payload[pos : pos + size], limit - len(out), position + pos)
        pos += size
    return bytes(out)


def _gzip_decode(payload: bytes, limit: int, position: int) -> bytes:
    """Decode one or more concatenated gzip members (GZIPInputStream reads them all)."""
    out = bytearray()
    rest = payload
    while True:
        unpacker = zlib.decompressobj(_GZIP_WBITS)
        try:
            out += unpacker.decompress(rest, limit - len(out) + 1)
        except zlib.error as exc:
            raise DecodeError(f"gzip payload does not decompress: {exc}", position) from None
        if len(out) > limit or unpacker.unconsumed_tail:
            raise LimitExceededError(f"gzip payload decompresses to more than the {limit}-byte limit", position)
        if not unpacker.eof:
            raise DecodeError("gzip payload is truncated", position)
        rest = unpacker.unused_data
        if not rest:
            return bytes(out)
