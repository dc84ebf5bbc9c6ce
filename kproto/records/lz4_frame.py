"""Kafka's LZ4 framing (codec 3), including the magic 0 "broken header checksum".

Kafka wraps LZ4 blocks in the standard LZ4 frame format, restricted to independent blocks and no
dictionary.  Kafka 0.8.2/0.9 computed the frame descriptor checksum (HC) over the 4 magic bytes too; every
later release keeps writing that broken HC for magic 0 and the correct one for magic 1 and 2 (see
``docs/records.md``, "Compression").  We write the HC Kafka writes for the message magic and, for magic 0, accept
both.  A frame that states its content size must hold exactly that many bytes.

The frame is parsed and written here, so that the decompressed size can be capped block by block and every
malformed length becomes a :class:`~kproto.errors.DecodeError`; only the blocks come from a library.  Blocks
decompress through cramjam, straight into the one output buffer (see :func:`lz4_frame_decode_buffer`),
whichever is installed: the lz4 package's block decompressor returns a new ``bytes`` per block, so a join
(a second copy of the whole output) would follow.  Where the result must be ``bytes`` (the pure backend
slices the records' fields from it), :func:`lz4_frame_decode` gives a frame whose blocks cannot expand past
the cap to the lz4 package's frame decoder, which returns ``bytes``: the buffer would otherwise be copied.
Block and content checksums, when a writer adds them, are skipped: the batch or wrapper CRC already covers
the compressed bytes.
They compress through the ``lz4`` package (the reference C library, the ``pure`` extra) when it is
installed, else through cramjam: measured on the records of 1,000 x 10 KB (10 MB) ~1.5 ms against ~4.1 ms,
on 10,000 x 100 B (1.26 MB) ~0.45 ms against ~0.5 ms.  The two write different blocks for the same input,
both valid LZ4, so the bytes of a frame depend on which is installed: that is fine, an LZ4 frame is read
back by its content (every decoder, ours and Kafka's, accepts either), and both backends call this module,
so they write the same bytes as each other in any one installation (the twins' tests compare them).
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Iterable, Iterator, List

import cramjam

from kproto.errors import DecodeError, LimitExceededError

__all__ = [
    "xxh32",
    "lz4_frame_encode",
    "lz4_frame_encode_buffer",
    "lz4_frame_encode_pieces",
    "lz4_frame_decode",
    "lz4_frame_decode_buffer",
    "header_checksum",
]

_MASK32 = 0xFFFFFFFF
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393

_MAGIC = b"\x04\x22\x4d\x18"
_FLG_WRITTEN = 0x60  # version 01, independent blocks, no checksums, no content size
_BD_WRITTEN = 0x40  # 64 KiB maximum block size
_WRITE_BLOCK = 64 * 1024
_BLOCK_MAX_BY_ID = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_STORED_RAW = 0x80000000
_U32LE = struct.Struct("<I")
_block_into = cramjam.lz4.decompress_block_into
_block_compress_into = cramjam.lz4.compress_block_into
_lz4_block_compress: "Callable[..., bytes] | None"
_lz4_frame_decompress: "Callable[[Any], bytes] | None"
try:
    import lz4.block as _lz4_block  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import lz4.frame as _lz4_frame  # type: ignore[import-untyped,import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment (the pure extra)
    _lz4_block_compress = None
    _lz4_frame_decompress = None
else:
    _lz4_block_compress = _lz4_block.compress
    _lz4_frame_decompress = _lz4_frame.decompress
#: An LZ4 block cannot expand more than ~255:1 (a match length grows by 255 per extra length byte).
_LZ4_MAX_RATIO = 256


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK32, 13) * _P1) & _MASK32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data``; used only for the few bytes of an LZ4 frame descriptor, so plain Python suffices."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _MASK32
        v2 = (seed + _P2) & _MASK32
        v3 = seed & _MASK32
        v4 = (seed - _P1) & _MASK32
        while i <= n - 16:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK32
    else:
        h = (seed + _P5) & _MASK32
    h = (h + n) & _MASK32
    while i + 4 <= n:
        (lane,) = _U32LE.unpack_from(data, i)
        h = (_rotl((h + lane * _P3) & _MASK32, 17) * _P4) & _MASK32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _MASK32, 11) * _P1) & _MASK32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _MASK32
    h ^= h >> 13
    h = (h * _P3) & _MASK32
    h ^= h >> 16
    return h


def header_checksum(header: bytes, *, broken: bool) -> int:
    """HC of a frame header ``header`` (magic .. last descriptor byte): spec-correct, or Kafka's magic 0 form."""
    covered = header if broken else header[4:]
    return (xxh32(covered) >> 8) & 0xFF


def lz4_frame_encode(data: bytes, *, magic: int) -> bytes:
    """Frame ``data`` as Kafka does: 64 KiB independent blocks, broken HC for magic 0, correct HC for magic 1."""
    return bytes(lz4_frame_encode_buffer(data, magic=magic))


def lz4_frame_encode_buffer(data: bytes, *, magic: int) -> "bytes | bytearray":
    """:func:`lz4_frame_encode`, possibly as the ``bytearray`` it was written into.

    Every block holds 64 KiB of ``data`` (the last one the rest), compressed, or stored as is when
    compressing does not make it shorter (the size word's high bit says which)."""
    header = _frame_header(magic)
    if _lz4_block_compress is not None:
        return _frame_of_blocks(_windows([data]), header, _lz4_block_compress)
    n = len(data)
    blocks = (n + _WRITE_BLOCK - 1) // _WRITE_BLOCK
    # cramjam compresses into a buffer: one for the whole frame, sized for the worst case (a block is written
    # compressed only when that is shorter, so it never takes more than its raw size)
    out = bytearray(7 + 4 * blocks + n + 4)
    out[:7] = header
    at = 7
    pack = _U32LE.pack_into
    with memoryview(data) as view, memoryview(out) as target:
        for start in range(0, n, _WRITE_BLOCK):
            chunk = view[start : start + _WRITE_BLOCK]
            size = len(chunk)
            try:
                written = _block_compress_into(chunk, target[at + 4 : at + 4 + size - 1], store_size=False)
            except Exception:  # did not fit in size - 1 bytes: incompressible, store as is (high bit of the size)
                written = size
            if written < size:
                pack(target, at, written)
            else:
                pack(target, at, size | _STORED_RAW)
                target[at + 4 : at + 4 + size] = chunk
            at += 4 + written if written < size else 4 + size
    out[at : at + 4] = b"\x00\x00\x00\x00"
    del out[at + 4 :]
    return out


def lz4_frame_encode_pieces(pieces: List[bytes], *, magic: int) -> "bytes | bytearray":
    """:func:`lz4_frame_encode_buffer` of ``b"".join(pieces)``, the same bytes.

    With the lz4 package, without that join: each 64 KiB block is compressed from the pieces it spans (a
    view of one piece when it lies within one, else a join of its parts, 64 KiB that stay in the CPU's
    cache for the compressor).  Measured on the pieces of 1,000 x 10 KB records (10 MB, two pieces a
    record): ~0.2 ms less than the join of 10 MB and the compression of it (~2.2 ms).  Without the lz4
    package, cramjam compresses the joined pieces."""
    if _lz4_block_compress is None:
        return lz4_frame_encode_buffer(b"".join(pieces), magic=magic)
    return _frame_of_blocks(_windows(pieces), _frame_header(magic), _lz4_block_compress)


def _frame_header(magic: int) -> bytes:
    header = _MAGIC + bytes((_FLG_WRITTEN, _BD_WRITTEN))
    return header + bytes((header_checksum(header, broken=magic == 0),))


def _windows(pieces: List[bytes]) -> Iterator[Any]:
    """The consecutive 64 KiB windows of ``b"".join(pieces)`` (the last one the rest, none for no bytes):
    views of a piece where a window lies within one, else ``bytes`` joined from the parts it spans."""
    group: List[Any] = []
    have = 0
    join = b"".join
    for piece in pieces:
        n = len(piece)
        if have + n < _WRITE_BLOCK:
            group.append(piece)
            have += n
            continue
        view = memoryview(piece)
        at = _WRITE_BLOCK - have
        if group:
            group.append(view[:at])
            yield join(group)
        else:
            yield view[:at]
        while n - at >= _WRITE_BLOCK:
            yield view[at : at + _WRITE_BLOCK]
            at += _WRITE_BLOCK
        group = [view[at:]]
        have = n - at
    if have:
        yield join(group)


def _frame_of_blocks(windows: Iterable[Any], header: bytes, compress: Callable[..., bytes]) -> bytes:
    """The frame of the ``windows`` (one block each) from a compressor that returns each block as ``bytes``:
    one join of the header, the size words and the blocks.

    Not into one buffer sized for the worst case, as cramjam's path: that buffer is as large as the data,
    zero filled, and for a batch of megabytes each call faults its pages in afresh; the join allocates the
    compressed size only."""
    pieces: List[Any] = [header]  # bytes, and views of stored blocks
    pack = _U32LE.pack
    for chunk in windows:
        block = compress(chunk, store_size=False)
        if len(block) < len(chunk):
            pieces += (pack(len(block)), block)
        else:
            pieces += (pack(len(chunk) | _STORED_RAW), chunk)
    pieces.append(b"\x00\x00\x00\x00")
    return b"".join(pieces)


def _check_header(frame: bytes, magic: int, position: int) -> tuple:
    """Validate the frame header; return (index of the first block, max block size, block checksum flag)."""
    if len(frame) < 7 or frame[:4] != _MAGIC:
        raise DecodeError("lz4 payload does not start with the LZ4 frame magic 04 22 4d 18", position)
    flg, bd = frame[4], frame[5]
    if flg >> 6 != 1:
        raise DecodeError(f"lz4 frame version {flg >> 6} is not 1", position + 4)
    if flg & 0x03:
        raise DecodeError("lz4 frame uses a dictionary or reserved FLG bits, which Kafka never writes", position + 4)
    if not flg & 0x20:
        raise DecodeError(
            "lz4 frame with dependent blocks is not supported (Kafka writes independent blocks)", position + 4
        )
    block_max = _BLOCK_MAX_BY_ID.get((bd >> 4) & 0x07)
    if block_max is None or bd & 0x8F:
        raise DecodeError(f"lz4 frame BD byte 0x{bd:02x} is invalid", position + 5)
    end = 6 + (8 if flg & 0x08 else 0)  # an optional 8-byte content size precedes HC
    if len(frame) < end + 1:
        raise DecodeError("lz4 frame header is truncated", position)
    header, hc = frame[:end], frame[end]
    if hc != header_checksum(header, broken=False) and not (magic == 0 and hc == header_checksum(header, broken=True)):
        raise DecodeError(f"lz4 frame header checksum 0x{hc:02x} does not match", position + end)
    return end + 1, block_max, bool(flg & 0x10), bool(flg & 0x04)


def lz4_frame_decode(frame: bytes, *, magic: int, limit: int, position: int = 0) -> bytes:
    """Decode one Kafka LZ4 frame; ``limit`` caps the output, ``position`` is where ``frame`` sits in the input.

    With the lz4 package, a well-formed frame whose blocks cannot expand past ``limit`` is decompressed by
    its frame decoder, which returns ``bytes`` straight away: the ``bytearray`` of the one-buffer path would
    otherwise be copied whole into ``bytes`` (measured on 1,000 x 10 KB records, 10 MB: the copy, its
    fresh pages faulted in, cost more than the decompression itself).  A frame with Kafka's magic 0 header
    checksum (accepted above) is given to it as a copy with the correct one.  Anything that decoder refuses
    (a block checksum that does not match, which this module does not check) takes the one-buffer path, so
    results and errors do not depend on whether the package is installed."""
    header = _check_header(frame, magic, position)
    if _lz4_frame_decompress is not None:
        scan = _scan_blocks(frame, header)
        # The package allocates a frame's declared content size before it decodes a block, so a frame that
        # declares more than its blocks can hold (a few bytes claiming megabytes) stays on the one-buffer path,
        # whose allocation follows the blocks.
        if scan is not None and scan[2] <= limit and _declared_size(frame, default=0) <= scan[2]:
            hc_at = header[0] - 1
            correct = header_checksum(frame[:hc_at], broken=False)
            if frame[hc_at] != correct:  # Kafka's magic 0 checksum: the package reads a copy that has the correct one
                frame = b"".join((frame[:hc_at], bytes((correct,)), frame[hc_at + 1 :]))
            try:
                decoded = _lz4_frame_decompress(frame)
            except Exception:  # refused (see above): the one-buffer path decides
                pass
            else:
                if len(decoded) <= limit:
                    _check_content_size(frame, decoded, position)
                    return decoded
    out = _decode_checked(frame, header, limit, position, bytearray)
    return out if type(out) is bytes else bytes(out)


def lz4_frame_decode_buffer(
    frame: bytes, *, magic: int, limit: int, position: int = 0, allocate: Callable[[int], bytearray] = bytearray
) -> "bytes | bytearray":
    """:func:`lz4_frame_decode`, the result possibly a ``bytearray``.

    One pass reads the block headers and bounds the output (a compressed block expands to at most its
    frame's block maximum and ~255 times its size); one buffer of at most ``limit`` bytes is allocated and
    every block is decompressed straight into its place.  A malformed frame, a block that does not fit or
    an output over ``limit`` falls back to the block-by-block decoder, which raises the error.  ``allocate``:
    as for :func:`kproto.records.compression.decompress_buffer` (the blocks fill the buffer from its start
    and it is cut where they end, so no byte of it is kept unwritten).
    """
    header = _check_header(frame, magic, position)
    return _decode_checked(frame, header, limit, position, allocate)


def _decode_checked(
    frame: bytes, header: tuple, limit: int, position: int, allocate: Callable[[int], bytearray]
) -> "bytes | bytearray":
    fast = _decode_blocks_fast(frame, header, limit, allocate)
    out: "bytes | bytearray" = fast if fast is not None else _decode_blocks(frame, header, limit, position)
    _check_content_size(frame, out, position)
    return out


def _declared_size(frame: bytes, default: int) -> int:
    """The content size the frame states (8 bytes little-endian before HC), or ``default`` if it states none."""
    return int.from_bytes(frame[6:14], "little") if frame[4] & 0x08 else default


def _check_content_size(frame: bytes, out: "bytes | bytearray", position: int) -> None:
    declared = _declared_size(frame, default=-1)
    if declared >= 0:
        if declared != len(out):
            raise DecodeError(f"lz4 frame declares {declared} bytes of content but holds {len(out)}", position + 6)


def _scan_blocks(frame: bytes, header: tuple) -> "tuple[List[memoryview], List[int], int] | None":
    """The blocks of a well-formed frame as views, the indexes of those stored raw, and the most bytes they
    can decompress to; ``None`` for a malformed frame (the block-by-block decoder says what is wrong)."""
    pos, block_max, block_checksum, content_checksum = header
    n = len(frame)
    tail = 4 if block_checksum else 0
    unpack = _U32LE.unpack_from
    blocks: List[memoryview] = []
    stored: List[int] = []
    bound = 0
    short = block_max // _LZ4_MAX_RATIO  # a compressed block shorter than this is bounded by its size
    source = memoryview(frame)
    while True:
        if n - pos < 4:
            return None
        (word,) = unpack(frame, pos)
        pos += 4
        if word == 0:
            break
        size = word & ~_STORED_RAW
        if size > block_max or n - pos < size + tail:
            return None
        if word & _STORED_RAW:
            stored.append(len(blocks))
            bound += size
        else:
            bound += block_max if size >= short else size * _LZ4_MAX_RATIO
        blocks.append(source[pos : pos + size])
        pos += size + tail
    if (n - pos != 4) if content_checksum else (pos != n):
        return None
    return blocks, stored, bound


def _decode_blocks_fast(
    frame: bytes, header: tuple, limit: int, allocate: Callable[[int], bytearray]
) -> "bytearray | None":
    # Python work per block is what this adds to the block codec (a 10 MB batch has 157 blocks of 64 KiB):
    # the scan keeps each block as a view, this pass hands it to the codec with no other work when no
    # block is stored raw (Kafka's writers store one only when it does not compress), and a slice past the
    # end of ``target`` is cut by the slice itself.
    block_max = header[1]
    scan = _scan_blocks(frame, header)
    if scan is None:
        return None
    blocks, stored, bound = scan
    out = allocate(min(bound, limit))
    at = 0
    cap = len(out)
    try:
        with memoryview(out) as target:
            if not stored:
                for block in blocks:
                    at += _block_into(block, target[at : at + block_max])
            else:
                raw = set(stored)
                for index, block in enumerate(blocks):
                    if index in raw:
                        size = len(block)
                        if at + size > cap:
                            return None
                        target[at : at + size] = block
                        at += size
                    else:
                        at += _block_into(block, target[at : at + block_max])
    except Exception:  # a corrupt block, or one that would cross the limit: the slow path says which
        return None
    if at != cap:
        del out[at:]
    return out


def _decode_blocks(frame: bytes, header: tuple, limit: int, position: int) -> bytes:
    pos, block_max, block_checksum, content_checksum = header
    n = len(frame)
    out = bytearray()
    scratch = bytearray(block_max)
    while True:
        if n - pos < 4:
            raise DecodeError("lz4 frame ends without its end mark", position + pos)
        (word,) = _U32LE.unpack_from(frame, pos)
        pos += 4
        if word == 0:
            break
        size = word & ~_STORED_RAW
        if size > block_max:
            raise DecodeError(
                f"lz4 block of {size} bytes exceeds the frame's {block_max}-byte maximum", position + pos - 4
            )
        if n - pos < size + (4 if block_checksum else 0):
            raise DecodeError(f"lz4 block of {size} bytes runs past the end of the frame", position + pos - 4)
        block = frame[pos : pos + size]
        chunk: "bytes | memoryview"
        if word & _STORED_RAW:
            produced = size
            chunk = block
        else:
            try:
                produced = cramjam.lz4.decompress_block_into(block, scratch)
            except Exception as exc:  # cramjam raises DecompressionError (and others) on bad blocks
                raise DecodeError(f"lz4 block does not decompress: {exc}", position + pos) from None
            chunk = memoryview(scratch)[:produced]
        if len(out) + produced > limit:
            raise LimitExceededError(f"lz4 payload decompresses to more than the {limit}-byte limit", position + pos)
        out += chunk
        pos += size + (4 if block_checksum else 0)
    if content_checksum:
        if n - pos < 4:
            raise DecodeError("lz4 frame is missing its content checksum", position + pos)
        pos += 4
    if pos != n:
        raise DecodeError(f"{n - pos} bytes follow the lz4 frame", position + pos)
    return bytes(out)
