"""The compression codecs of Kafka records: gzip (zlib), snappy (xerial framing or raw, via cramjam), lz4
(Kafka framing, see lz4_frame: blocks compressed by the lz4 package when it is installed, else cramjam),
zstd (magic 2 only; cramjam, or the zstandard package when it is installed for the pure twin's batches).

Both backends call these once per compressed wrapper or batch, so they stay in Python.  Every decompressor is capped
by ``limit`` (the caller's ``max_decompressed_size``) and turns every codec failure into a
:class:`~kproto.errors.DecodeError` whose offset is ``position`` (where the payload sits in the input) plus
the offset inside the payload when one is known.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from typing import Any, Callable, List

from kproto.errors import DecodeError, EncodeError, LimitExceededError
from kproto.records.format import CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD
from kproto.records.lz4_frame import (
    lz4_frame_decode,
    lz4_frame_decode_buffer,
    lz4_frame_encode_buffer,
    lz4_frame_encode_pieces,
)

__all__ = [
    "compress",
    "compress_buffer",
    "compress_pieces",
    "decompress",
    "decompress_buffer",
    "XERIAL_MAGIC",
    "SNAPPY_FRAMINGS",
]

#: The 8 bytes that identify xerial snappy-java's stream format.  The version fields after them are not
#: checked: some brokers wrote them little-endian (kafka-python #2414).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_BE_I32 = struct.Struct(">i")
SNAPPY_FRAMINGS = ("xerial", "raw")
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_LE_U32 = struct.Struct("<I")
_gzip_into = cramjam.gzip.decompress_into
_snappy_len = cramjam.snappy.decompress_raw_len
_snappy_into = cramjam.snappy.decompress_raw_into
_snappy_raw_into = cramjam.snappy.compress_raw_into


def _snappy_bound(n: int) -> int:
    """snappy's MaxCompressedLength: the most a raw block of ``n`` bytes can take."""
    return 32 + n + n // 6


def compress(codec: int, data: bytes, *, magic: int, snappy_framing: str = "xerial") -> bytes:
    """Compress an inner message set for a wrapper of ``codec`` (1 gzip, 2 snappy, 3 lz4)."""
    out = compress_buffer(codec, data, magic=magic, snappy_framing=snappy_framing)
    return out if type(out) is bytes else bytes(out)


def compress_buffer(codec: int, data: bytes, *, magic: int, snappy_framing: str = "xerial") -> "bytes | bytearray":
    """:func:`compress`, the result possibly the ``bytearray`` the codec wrote into (no final copy)."""
    if codec == CODEC_GZIP:
        packer = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == CODEC_SNAPPY:
        if snappy_framing == "raw":
            return _snappy_raw_encode(data)
        return _xerial_encode(data)
    if codec == CODEC_LZ4:
        return lz4_frame_encode_buffer(data, magic=magic)
    if codec == CODEC_ZSTD:
        return _zstd_compress(data)
    raise EncodeError(f"unknown codec id {codec}")


def compress_pieces(codec: int, pieces: List[bytes], size: int, *, magic: int) -> "bytes | bytearray":
    """:func:`compress_buffer` of ``b"".join(pieces)`` (``size`` bytes in all).

    zstd with the zstandard package streams the pieces through one compressor told the size (so the frame
    still states it; level 3 as above; a compressor per call: one is not safe to share between threads, and
    making one costs less than the call): no joined copy of the input, and no output buffer as large as
    the input.  Measured on 1,000 x 10 KB records (10 MB): ~3.2 ms, where the join and cramjam's compress
    take ~3.7 ms (the join and zstandard's one-shot compress ~4.4 ms); on 10,000 x 100 B (1.26 MB, one
    piece) ~1.2 ms, as cramjam.  lz4 compresses its 64 KiB blocks from the pieces they span
    (:func:`~kproto.records.lz4_frame.lz4_frame_encode_pieces`).  Other codecs compress the joined pieces."""
    if codec == CODEC_LZ4:
        return lz4_frame_encode_pieces(pieces, magic=magic)
    if codec == CODEC_ZSTD and _ZstdCompressor is not None:
        packer = _ZstdCompressor(level=3).compressobj(size=size)
        out = list(map(packer.compress, pieces))
        out.append(packer.flush())
        return b"".join(out)
    return compress_buffer(codec, b"".join(pieces), magic=magic)


def decompress(codec: int, payload: bytes, *, magic: int, limit: int, position: int = 0) -> bytes:
    """Decompress a wrapper's value; raise DecodeError/LimitExceededError on bad or oversized payloads."""
    if codec == CODEC_LZ4:  # the frame decoder that returns bytes rather than a buffer to copy
        return lz4_frame_decode(payload, magic=magic, limit=limit, position=position)
    out = decompress_buffer(codec, payload, magic=magic, limit=limit, position=position)
    return out if type(out) is bytes else bytes(out)


def decompress_buffer(
    codec: int,
    payload: bytes,
    *,
    magic: int,
    limit: int,
    position: int = 0,
    allocate: Callable[[int], bytearray] = bytearray,
) -> "bytes | bytearray":
    """:func:`decompress`, but the result may be a ``bytearray`` (the one buffer the codec wrote into).

    Each codec first tries a one-copy path: the decompressed size is read from the payload (gzip trailer
    ISIZE, snappy length headers, lz4 block headers bound), one buffer of at most ``limit`` bytes is
    allocated and the codec writes straight into it.  Anything unexpected (a size that does not match, a
    size over the limit, a codec error) drops to the streaming path below, which produces the errors, so
    results, errors and the cap are the same either way; no path allocates more than ``limit`` bytes.

    ``allocate(n)`` makes that buffer.  A one-copy path returns it only when the codec has written each of
    its bytes (the buffer is cut to what was written, or dropped for the streaming path), so its initial
    contents are never seen: the compiled backend passes an allocator that skips ``bytearray``'s zero fill
    (a pass over the whole output, ~2% of a small-message decode).
    """
    if codec == CODEC_GZIP:
        out = _gzip_fast(payload, limit, allocate)
        return out if out is not None else _gzip_decode(payload, limit, position)
    if codec == CODEC_SNAPPY:
        if len(payload) > 16 and payload[:8] == XERIAL_MAGIC:
            out = _xerial_fast(payload, limit, allocate)
            return out if out is not None else _xerial_decode(payload, limit, position)
        out = _snappy_fast(payload, limit, allocate)
        return out if out is not None else _snappy_block_decode(payload, limit, position)
    if codec == CODEC_LZ4:
        return lz4_frame_decode_buffer(payload, magic=magic, limit=limit, position=position, allocate=allocate)
    if codec == CODEC_ZSTD:
        return _zstd_decode(payload, limit, position)
    raise DecodeError(f"unknown compression codec {codec}", position)


# zstd through cramjam rather than the zstandard package: measured on 10,000 x 100 B records (1.26 MB,
# level 3), zstandard compresses ~1.5x and decompresses ~1.2x faster, but cramjam is already a dependency
# (snappy, lz4 blocks) and decompresses into a caller-sized buffer, which is how the budget is enforced.
# One exception: a frame that states its content size (within the limit) is handed to zstandard when it is
# installed (it is not a dependency).  Its one-shot decompress allocates exactly that size, without the zero
# fill of a bytearray, and decodes in one call: on 1,000 x 10 KB records (10 MB) 0.8 ms against 2.2 ms for
# cramjam into a bytearray.  Anything it does not take whole (a size that does not match, trailing data, a
# corrupt frame) goes to the cramjam path, whose results and errors are the contract.
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_zstd_into = cramjam.zstd.decompress_into
try:  # optional (the pure extra): decompression of frames that state their size, and compress_pieces
    import zstandard as _zstandard
except ImportError:  # pragma: no cover - an optional speed-up
    _zstandard = None  # type: ignore[assignment]
#: First output buffer for a zstd frame that does not state its size (Kafka's Java producer streams, so
#: its frames never do): this many times the payload, then x4 per retry up to the limit.
_ZSTD_FIRST_GUESS = 8


# The pure twin's batches compress through the zstandard package when it is installed (compress_pieces):
# streamed, it takes the batch's pieces where they lie, and writes the frame cramjam writes for the joined
# pieces byte for byte (the same libzstd, level and content size; the twins' bytes are held equal by
# tests/records/test_records_v2_differential.py).  Not its one-shot compress for compress_buffer: that
# allocates an output buffer as large as the input, which for a batch of megabytes faults its pages in
# afresh on every call (10 MB back to back: ~9.8 ms and ~2,700 page faults a call; cramjam ~4.3 ms).
_ZstdCompressor: "Callable[..., Any] | None" = None if _zstandard is None else _zstandard.ZstdCompressor


def _zstd_compress(data: bytes) -> bytes:
    # one frame with its content size, level 3 (zstd's default, as Kafka's)
    return bytes(cramjam.zstd.compress(data, level=3))


def _zstd_content_size(payload: bytes, position: int) -> "int | None":
    """The decompressed size a zstd frame header declares, or None when it declares none."""
    if len(payload) < 5 or payload[:4] != _ZSTD_MAGIC:
        raise DecodeError("zstd payload does not start with the zstd frame magic 28 b5 2f fd", position)
    descriptor = payload[4]
    size_flag, single_segment, dict_flag = descriptor >> 6, descriptor >> 5 & 1, descriptor & 3
    field = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if not field:
        return None
    at = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    if len(payload) < at + field:
        raise DecodeError("zstd frame header is truncated", position)
    size = int.from_bytes(payload[at : at + field], "little")
    return size + 256 if field == 2 else size


def _zstd_decode(payload: bytes, limit: int, position: int) -> "bytes | bytearray":
    """Decompress into a buffer never larger than ``limit``: the size the frame declares (which must then be
    exactly what it holds), or for frames without one, a guess grown x4 until the output fits."""
    declared = _zstd_content_size(payload, position)
    if declared is not None and declared > limit:
        raise LimitExceededError(f"zstd frame declares {declared} bytes, over the {limit}-byte limit", position)
    if declared is not None and _zstandard is not None:
        try:
            whole = _zstandard.ZstdDecompressor().decompress(payload, read_across_frames=False, allow_extra_data=False)
        except Exception:  # zstandard.ZstdError, or arguments an old zstandard lacks
            whole = None
        if whole is not None and len(whole) == declared:
            return whole
    size = declared if declared is not None else min(limit, max(65536, _ZSTD_FIRST_GUESS * len(payload)))
    while True:
        out = bytearray(size + 1)  # one spare byte: a frame that fills it holds more than it says
        try:
            got = _zstd_into(payload, out)
        except Exception as exc:  # cramjam.DecompressionError: corrupt, or "failed to write whole buffer"
            if "whole buffer" not in str(exc):
                raise DecodeError(f"zstd payload does not decompress: {exc}", position) from None
            got = size + 1
        if declared is not None:
            if got != declared:
                raise DecodeError(
                    f"zstd frame declares {declared} bytes but holds {'more' if got > declared else got}", position
                )
            del out[got:]
            return out
        if got <= size:
            del out[got:]
            return out
        if size >= limit:
            raise LimitExceededError(f"zstd payload decompresses to more than the {limit}-byte limit", position)
        size = min(limit, size * 4)


def _gzip_fast(payload: bytes, limit: int, allocate: Callable[[int], bytearray]) -> "bytearray | None":
    """One member whose trailer states its size: inflate straight into a buffer of exactly that size."""
    n = len(payload)
    if n < 18:
        return None
    (isize,) = _LE_U32.unpack_from(payload, n - 4)
    if not 0 < isize <= limit:
        return None
    out = allocate(isize)
    try:
        got = _gzip_into(payload, out)  # refuses (raises) rather than write past the buffer
    except Exception:
        return None
    return out if got == isize else None


def _snappy_fast(block: bytes, limit: int, allocate: Callable[[int], bytearray]) -> "bytearray | None":
    try:
        declared = _snappy_len(block)
        if declared > limit:
            return None
        out = allocate(declared)
        got = _snappy_into(block, out)
    except Exception:
        return None
    return out if got == declared else None


def _xerial_fast(payload: bytes, limit: int, allocate: Callable[[int], bytearray]) -> "bytearray | None":
    """Read every block's declared length first, then decompress all blocks into one buffer."""
    pos, n = 16, len(payload)
    view = memoryview(payload)
    blocks = []
    total = 0
    unpack = _BE_I32.unpack_from
    try:
        while pos < n:
            if n - pos < 4:
                return None
            (size,) = unpack(payload, pos)
            if size < 0 or size > n - pos - 4:
                return None
            pos += 4
            block = view[pos : pos + size]
            declared = _snappy_len(block)
            total += declared
            if total > limit:
                return None
            blocks.append((block, declared))
            pos += size
        out = allocate(total)
        at = 0
        with memoryview(out) as target:
            for block, declared in blocks:
                if _snappy_into(block, target[at : at + declared]) != declared:
                    return None
                at += declared
    except Exception:
        return None
    return out


def _snappy_raw_encode(data: bytes) -> bytearray:
    out = bytearray(_snappy_bound(len(data)))
    del out[_snappy_raw_into(data, out) :]
    return out


def _xerial_encode(data: bytes) -> bytearray:
    """xerial framing written block by block straight into one buffer sized for the worst case."""
    n = len(data)
    blocks = (n + _XERIAL_BLOCK - 1) // _XERIAL_BLOCK
    out = bytearray(16 + blocks * (4 + _snappy_bound(min(n, _XERIAL_BLOCK))))
    out[:16] = _XERIAL_HEADER
    at = 16
    pack = _BE_I32.pack_into
    with memoryview(data) as view, memoryview(out) as target:
        for start in range(0, n, _XERIAL_BLOCK):
            size = _snappy_raw_into(view[start : start + _XERIAL_BLOCK], target[at + 4 :])
            pack(target, at, size)
            at += 4 + size
    del out[at:]
    return out


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
            raise DecodeError(
                f"xerial snappy block length {size} does not fit the {n - pos - 4} bytes left", position + pos
            )
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
