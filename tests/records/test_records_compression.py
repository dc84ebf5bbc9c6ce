"""The one-copy decompression paths give the same bytes, errors and limits as the streaming paths they skip."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import cramjam
import pytest

from kproto.errors import DecodeError, LimitExceededError
from kproto.records import compression, lz4_frame

DATA = b"".join(b"message %06d " % i + bytes(range(i % 200)) for i in range(3000))


def _dirty(size):
    """An ``allocate`` whose buffers start full of garbage: a one-copy path must overwrite or drop every byte."""
    return bytearray(b"\xa5") * size


def _same(codec, payload, limit, magic=1):
    """decompress() against the streaming decoder: equal output, or the same error class and offset; the same
    with output buffers that start dirty (what the compiled backend's unfilled allocator may give)."""
    slow = {
        1: lambda: compression._gzip_decode(payload, limit, 7),
        2: lambda: (
            compression._xerial_decode(payload, limit, 7)
            if payload[:8] == compression.XERIAL_MAGIC
            else compression._snappy_block_decode(payload, limit, 7)
        ),
        3: lambda: lz4_frame._decode_blocks(payload, lz4_frame._check_header(payload, magic, 7), limit, 7),
    }[codec]
    try:
        expected = slow()
    except (DecodeError, LimitExceededError) as exc:
        with pytest.raises(type(exc)) as info:
            compression.decompress(codec, payload, magic=magic, limit=limit, position=7)
        assert info.value.offset == exc.offset
        with pytest.raises(type(exc)) as info:
            compression.decompress_buffer(codec, payload, magic=magic, limit=limit, position=7, allocate=_dirty)
        assert info.value.offset == exc.offset
        return None
    got = compression.decompress(codec, payload, magic=magic, limit=limit, position=7)
    assert type(got) is bytes and got == expected
    assert (
        compression.decompress_buffer(codec, payload, magic=magic, limit=limit, position=7, allocate=_dirty) == expected
    )
    return got


@pytest.mark.parametrize("codec", [1, 2, 3])
@pytest.mark.parametrize("limit", [0, 1000, len(DATA) - 1, len(DATA), 1 << 26])
def test_fast_paths_match_streaming(codec, limit):
    payload = compression.compress(codec, DATA, magic=1)
    got = _same(codec, payload, limit)
    assert (got == DATA) == (limit >= len(DATA))


def test_gzip_trailer_that_lies_falls_back():
    payload = bytearray(gzip.compress(DATA))
    payload[-4:] = struct.pack("<I", 100)  # ISIZE says 100 bytes: the fast path refuses, the slow one raises
    _same(1, bytes(payload), 1 << 26)
    two_members = gzip.compress(DATA[:5000]) + gzip.compress(DATA[5000:])  # ISIZE covers the last member only
    assert _same(1, two_members, 1 << 26) == DATA
    assert _same(1, two_members, len(DATA) - 1) is None


def test_snappy_raw_and_damaged():
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert _same(2, raw, 1 << 26) == DATA
    _same(2, raw[:-10], 1 << 26)
    xerial = bytearray(compression.compress(2, DATA, magic=1))
    xerial[20:24] = b"\xff\xff\xff\xff"  # damage the first block
    _same(2, bytes(xerial), 1 << 26)


def test_lz4_stored_blocks_checksums_and_damage():
    lz4f = pytest.importorskip("lz4.frame")
    incompressible = bytes(cramjam.snappy.compress_raw(DATA))
    for data in (DATA, incompressible, DATA + incompressible):
        for checksums in (False, True):
            frame = lz4f.compress(
                data,
                block_linked=False,
                block_checksum=checksums,
                content_checksum=checksums,
                block_size=lz4f.BLOCKSIZE_MAX64KB,
            )
            assert _same(3, frame, 1 << 26) == data
            assert _same(3, frame, len(data) - 1) is None
    frame = bytearray(compression.compress(3, DATA, magic=1))
    frame[40] ^= 0xFF
    _same(3, bytes(frame), 1 << 26)
    _same(3, bytes(frame[:-3]), 1 << 26)


def test_lz4_frame_decoder_of_the_lz4_package_and_its_refusals(monkeypatch):
    # decompress() hands a well-formed frame to the lz4 package's frame decoder (bytes with no copy), one with
    # Kafka's magic 0 header checksum as a copy with the correct one; frames that decoder refuses (a block
    # checksum that does not match, which we do not check) take the one-buffer path: the same bytes either
    # way, and the same without the package
    lz4f = pytest.importorskip("lz4.frame")
    calls = []

    def counted(frame):
        calls.append(len(frame))
        return lz4f.decompress(frame)

    monkeypatch.setattr(lz4_frame, "_lz4_frame_decompress", counted)
    assert compression.decompress(3, compression.compress(3, DATA, magic=1), magic=1, limit=1 << 26) == DATA
    assert len(calls) == 1
    assert compression.decompress(3, compression.compress(3, DATA, magic=0), magic=0, limit=1 << 26) == DATA
    assert len(calls) == 2
    damaged = bytearray(lz4f.compress(DATA, block_linked=False, block_checksum=True, block_size=lz4f.BLOCKSIZE_MAX64KB))
    first = 7 + (8 if damaged[4] & 0x08 else 0)  # the first block's size word, after an optional content size
    size = struct.unpack_from("<I", damaged, first)[0] & 0x7FFFFFFF
    damaged[first + 4 + size] ^= 0xFF  # its checksum
    with pytest.raises(RuntimeError):
        lz4f.decompress(bytes(damaged))
    assert compression.decompress(3, bytes(damaged), magic=1, limit=1 << 26) == DATA
    assert len(calls) == 3  # refused by the package, decoded by the one-buffer path
    assert _same(3, compression.compress(3, DATA, magic=1), len(DATA) - 1) is None  # over the limit: not asked
    assert len(calls) == 3
    monkeypatch.setattr(lz4_frame, "_lz4_frame_decompress", None)
    assert compression.decompress(3, bytes(damaged), magic=1, limit=1 << 26) == DATA
    assert compression.decompress(3, compression.compress(3, DATA, magic=1), magic=1, limit=1 << 26) == DATA


def test_a_frame_claiming_more_content_than_its_blocks_hold_allocates_what_they_hold():
    # the lz4 package allocates a frame's declared content size up front: a 34-byte frame declaring 4 MB must
    # not cost 4 MB before its lie is found (it is refused as before, with the allocation its blocks bound)
    lz4f = pytest.importorskip("lz4.frame")
    frame = bytearray(lz4f.compress(b"x" * 100, block_size=lz4f.BLOCKSIZE_MAX64KB, store_size=True))
    frame[6:14] = (4_000_000).to_bytes(8, "little")
    frame[14] = lz4_frame.header_checksum(bytes(frame[:14]), broken=False)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        with pytest.raises(DecodeError, match="declares 4000000 bytes of content but holds 100"):
            lz4_frame.lz4_frame_decode(bytes(frame), magic=2, limit=1 << 26)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_lz4_frames_from_either_block_compressor(monkeypatch):
    # blocks come from the lz4 package when installed, else from cramjam: different blocks in the same frame
    # (header with the HC of the magic, 64 KiB independent blocks, stored ones when incompressible, end mark),
    # each read back by our decoder and, for magic 1/2, by the lz4 package's frame decoder (an independent one)
    lz4f = pytest.importorskip("lz4.frame")
    incompressible = bytes(cramjam.snappy.compress_raw(DATA))
    frames = []
    for compressor in (lz4_frame._lz4_block_compress, None):
        monkeypatch.setattr(lz4_frame, "_lz4_block_compress", compressor)
        for data in (b"", b"x", DATA, incompressible, DATA + incompressible):
            for magic in (0, 2):
                frame = compression.compress(3, data, magic=magic)
                assert compression.decompress(3, frame, magic=magic, limit=1 << 26) == data
                if magic:
                    assert lz4f.decompress(frame) == data
                frames.append(frame)
                blocks = -(-len(data) // 65536)
                assert frame[-4:] == b"\x00\x00\x00\x00" and len(frame) <= 7 + 4 * blocks + len(data) + 4
    half = len(frames) // 2
    assert [f[:7] for f in frames[:half]] == [f[:7] for f in frames[half:]]


def test_lz4_frame_of_pieces_is_the_frame_of_their_join(monkeypatch):
    # compress_pieces frames the 64 KiB windows of the joined pieces without joining them: the same bytes
    # as compress() of the join (the compiled twin's path), for windows inside one piece, across many, at
    # piece boundaries that fall on a window's edge, and empty pieces; with either block compressor
    blob = DATA * 12  # ~600 KB
    cases = [
        [],
        [b""],
        [blob],
        [blob[:65536], blob[65536:]],
        [blob[:10], b"", blob[10:65546], blob[65546:]],
        [blob[i : i + 9000] for i in range(0, len(blob), 9000)],
        [blob[:65535], blob[65535:65537], b"x"],
    ]
    for compressor in (lz4_frame._lz4_block_compress, None):
        monkeypatch.setattr(lz4_frame, "_lz4_block_compress", compressor)
        for pieces in cases:
            data = b"".join(pieces)
            for magic in (0, 2):
                assert bytes(compression.compress_pieces(3, pieces, len(data), magic=magic)) == compression.compress(
                    3, data, magic=magic
                )


def test_compress_pieces_is_compress_of_the_joined_pieces(monkeypatch):
    # zstd streams the pieces through the zstandard package when installed (else joins them for cramjam):
    # one frame that states its size, the frame cramjam writes for the joined pieces (the compiled twin's),
    # byte for byte; the other codecs compress the joined pieces
    incompressible = bytes(cramjam.snappy.compress_raw(DATA))
    for compressor in (compression._ZstdCompressor, None):
        monkeypatch.setattr(compression, "_ZstdCompressor", compressor)
        for pieces in ([b""], [DATA], [DATA[:10], b"", DATA[10:5000], incompressible, DATA[5000:]]):
            data = b"".join(pieces)
            frame = bytes(compression.compress_pieces(4, pieces, len(data), magic=2))
            assert compression._zstd_content_size(frame, 0) == len(data)
            assert (
                compression.decompress(4, frame, magic=2, limit=1 << 26)
                == bytes(cramjam.zstd.decompress(frame))
                == data
            )
            assert frame == compression.compress(4, data, magic=2)
            for codec in (1, 2, 3) if data else (1, 3):  # an empty xerial stream reads as raw snappy (above)
                assert (
                    compression.decompress(
                        codec,
                        bytes(compression.compress_pieces(codec, pieces, len(data), magic=2)),
                        magic=2,
                        limit=1 << 26,
                    )
                    == data
                )


def test_encoders_round_trip():
    for data in (b"", b"x", DATA, bytes(cramjam.snappy.compress_raw(DATA))):
        # an empty xerial stream is just its 16-byte header, which decompress() reads as raw snappy (as before);
        # encode_message_set never compresses an empty set
        for codec in (1, 2, 3) if data else (1, 3):
            assert (
                compression.decompress(codec, compression.compress(codec, data, magic=1), magic=1, limit=1 << 26)
                == data
            )
        raw = compression.compress(2, data, magic=1, snappy_framing="raw")
        assert bytes(cramjam.snappy.decompress_raw(raw)) == data


def test_zstd_through_zstandard_gives_what_cramjam_gives(monkeypatch):
    # a frame that states its size goes to zstandard when installed; whatever it does not take whole goes to
    # cramjam: the same bytes, or the same error class at the same offset, with zstandard and without
    pytest.importorskip("zstandard")
    frame = bytes(cramjam.zstd.compress(DATA))
    other = bytes(cramjam.zstd.compress(b"more"))
    lying = bytearray(frame)
    lying[5] ^= 0x01  # the low byte of the 4-byte content size: one more or one less than the frame holds
    cases = [frame, frame + other, frame + b"\x00\x01", bytes(lying), frame[:-5], bytes(cramjam.zstd.compress(b""))]
    for payload in cases:
        for limit in (1 << 26, len(DATA) - 1):
            results = []
            for module in (compression._zstandard, None):
                monkeypatch.setattr(compression, "_zstandard", module)
                try:
                    out = compression.decompress_buffer(4, payload, magic=2, limit=limit, position=7)
                    results.append((bytes(out),))
                except (DecodeError, LimitExceededError) as exc:
                    results.append((type(exc), exc.offset))
            assert results[0] == results[1], (payload[:16], limit)
    assert compression.decompress_buffer(4, frame, magic=2, limit=1 << 26) == DATA
