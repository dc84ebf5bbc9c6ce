"""Fuzz harness: records of every magic (message sets magic 0/1 with gzip/snappy/lz4 wrappers, record
batches magic 2 with every codec) on both backends.  (The harness keeps its historical name and corpus
directory, ``message_sets``.)

Runs ``decode_message_set``, ``decode_message_columns``, ``decode_records`` and ``decode_columns`` of
``kproto._fast._legacy_records`` (Cython) and ``kproto.records.legacy_records`` on every input, with
``max_decompressed_size`` = ``FUZZ_DECOMPRESSION_CAP``.

Input layout: byte 0 holds flags, the rest is the records.
  bit 0: ``check_crc``;
  bit 1: before decoding, rewrite the CRC of every complete top-level entry to the right value (CRC32 for
         magic 0/1, CRC-32C for magic 2; so that mutations of keys, values, records and compressed
         payloads are not all stopped by the CRC check);
  bits 2-3: pass the set as ``bytes`` (0), ``bytearray`` (1) or ``memoryview`` (2, 3);
  bits 4-5: when not 0, the rest is an *inner* message set: the harness compresses it with gzip (1),
         snappy (2) or lz4 (3) and wraps it in one wrapper message (offset 1000), so mutations reach the
         inner messages without having to produce valid compressed streams;
  bit 6: that wrapper is magic 1 (else magic 0); bit 7: a magic 1 wrapper is LogAppendTime; bit 7 without
         bit 6: instead a magic 2 batch whose records section is the rest after its first byte (the records
         count), compressed with zstd (1), lz4 (2) or snappy (3).

Oracles: only ``KprotoError`` escapes; both backends give the same messages (every field), the same
``valid_bytes``/``partial``, the same columns, or the same error class and offset; ``valid_bytes`` and
``partial`` are consistent with the input length; the objects and the columns of one backend describe
the same messages; ``decode_records`` (objects and batches) and ``decode_columns`` agree between the twins
and with each other (offsets, keys, values, headers); every decoded message re-encodes (``encode_message_set``) and
decodes back to
itself, and a set with no compression, valid CRCs and no attribute bits beyond the timestamp type
re-encodes to exactly its input.  Budget: 64·n + 1 MiB + 16·cap per decode, 1 s CPU.

    python fuzz/fuzz_message_sets.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fuzz import atheris_runtime  # noqa: E402
from fuzz.oracles import (
    FUZZ_DECOMPRESSION_CAP,
    Budget,
    check_same_outcome,
    fail,  # noqa: E402
    memory_budget,
    outcome,
)

NAME = "message_sets"
_codecs = None  # [(name, MessageSetCodec)]


def setup() -> None:
    global _codecs
    from fuzz.twin_backends import records_codecs

    fast, pure = records_codecs()
    _codecs = [(n, c) for n, c in (("cython", fast), ("python", pure)) if c is not None]


def fix_crcs(buf: bytearray) -> None:
    """Give every complete top-level entry its correct CRC (CRC32, or CRC-32C for a magic 2 batch)."""
    from kproto.records.checksums import crc32c

    pos, n = 0, len(buf)
    while n - pos >= 26:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 14 or pos + 12 + size > n:
            return
        if buf[pos + 16] == 2 and size >= 49:
            struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + size])))
        else:
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : pos + 12 + size])))
        pos += 12 + size


_V2_CODECS = {1: 4, 2: 3, 3: 2}  # flag value -> codec id: zstd, lz4, snappy


def wrap_v2(inner: bytes, codec: int) -> bytes:
    """A magic 2 batch whose records section is ``inner[1:]`` compressed, claiming ``inner[0]`` records."""
    from kproto.records.checksums import crc32c
    from kproto.records.compression import compress

    count = inner[0] if inner else 0
    tail = struct.pack(">hiqqqhii", codec, max(count - 1, 0), 1000, 2000, 7, 1, 5, count)
    tail += compress(codec, inner[1:], magic=2)
    return struct.pack(">qiib", 1000, len(tail) + 9, -1, 2) + struct.pack(">I", crc32c(tail)) + tail


def wrap(inner: bytes, codec: int, magic: int, log_append: bool) -> bytes:
    """One wrapper message carrying ``inner`` compressed with ``codec`` (1 gzip, 2 snappy, 3 lz4)."""
    from kproto.records import legacy_records
    from kproto.records.compression import compress

    payload = compress(codec, inner, magic=magic)
    attributes = codec | (0x08 if log_append and magic == 1 else 0)
    return legacy_records.encode_plain([(None, payload, 1234567)], magic, 1000, attributes)[0]


def prepare(data: bytes):
    """(payload as passed, payload bytes, check_crc) for an input."""
    flags = data[0] if data else 0
    body = bytearray(data[1:])
    if flags & 2:
        fix_crcs(body)
    raw = bytes(body)
    if flags & 0x30 and flags & 0xC0 == 0x80:
        raw = wrap_v2(raw, _V2_CODECS[(flags >> 4) & 3])
    elif flags & 0x30:
        raw = wrap(raw, (flags >> 4) & 3, 1 if flags & 0x40 else 0, bool(flags & 0x80))
    kind = (flags >> 2) & 3
    payload = raw if kind == 0 else bytearray(raw) if kind == 1 else memoryview(raw)
    return payload, raw, bool(flags & 1)


def fields(m):
    return (m.offset, m.key, m.value, m.timestamp, m.magic, m.attributes, m.codec, m.timestamp_type, m.crc)


def _decode(codec, payload, check_crc):
    ms = codec.decode_message_set(payload, check_crc=check_crc, max_decompressed_size=FUZZ_DECOMPRESSION_CAP)
    messages = [fields(m) for m in ms]
    if len(ms) != len(messages):
        raise AssertionError(f"len(MessageSet) is {len(ms)} but iteration gave {len(messages)} messages")
    if messages and fields(ms[len(messages) - 1]) != messages[-1]:
        raise AssertionError("indexing the MessageSet disagrees with iterating it")
    return messages, ms.valid_bytes, ms.partial


def _columns(codec, payload, check_crc):
    c = codec.decode_message_columns(payload, check_crc=check_crc, max_decompressed_size=FUZZ_DECOMPRESSION_CAP)
    return (
        c.count,
        list(c.offsets),
        c.keys(),
        c.values(),
        list(c.timestamps),
        list(c.magics),
        list(c.attributes),
        list(c.codecs),
        list(c.crc_ok),
        c.valid_bytes,
        c.partial,
    )


def _records(codec, payload, check_crc):
    decoded = codec.decode_records(payload, check_crc=check_crc, max_decompressed_size=FUZZ_DECOMPRESSION_CAP)
    records = [
        (
            r.offset,
            r.timestamp,
            r.key,
            r.value,
            tuple(r.headers),
            r.magic,
            r.codec,
            r.timestamp_type,
            r.producer_id,
            r.producer_epoch,
            r.sequence,
            r.is_transactional,
            r.is_control,
            r.attributes,
        )
        for r in decoded
    ]
    if len(decoded) != len(records):
        raise AssertionError(f"len(DecodedRecords) is {len(decoded)} but iteration gave {len(records)} records")
    batches = [tuple(getattr(b, f) for f in b.__slots__[:-1]) for b in decoded.batches]
    return records, batches, decoded.valid_bytes, decoded.partial


def _record_columns(codec, payload, check_crc):
    c = codec.decode_columns(payload, check_crc=check_crc, max_decompressed_size=FUZZ_DECOMPRESSION_CAP)
    return (
        list(c.offsets),
        c.keys(),
        c.values(),
        c.headers(),
        list(c.sequences),
        list(c.crc_ok),
        c.valid_bytes,
        c.partial,
    )


def check_records(data: bytes, payload, check_crc: bool, n: int, limit: int) -> None:
    """decode_records and decode_columns: the twins agree, and objects agree with columns."""
    results, columns = [], []
    for name, codec in _codecs:
        with Budget(n, limit=limit, what=f"decode_records ({name})", data=data):
            results.append(outcome(_records, codec, payload, check_crc, what=f"decode_records ({name})", data=data))
        with Budget(n, limit=limit, what=f"decode_columns ({name})", data=data):
            columns.append(
                outcome(_record_columns, codec, payload, check_crc, what=f"decode_columns ({name})", data=data)
            )
    if len(_codecs) == 2:
        check_same_outcome(results[0], results[1], what="decode_records", data=data)
        check_same_outcome(columns[0], columns[1], what="decode_columns", data=data)
    for (name, _), res, col in zip(_codecs, results, columns):
        if res[0] != col[0]:
            raise fail(f"{name}: decode_records {res[0]} but decode_columns {col[0]}: {res[1]!r} / {col[1]!r}", data)
        if res[0] == "error":
            if type(res[1]) is not type(col[1]) or res[1].offset != col[1].offset:
                raise fail(f"{name}: decode_records and decode_columns fail differently: {res[1]!r} / {col[1]!r}", data)
            continue
        records, _, valid, partial = res[1]
        from_objects = (
            [r[0] for r in records],
            [r[2] for r in records],
            [r[3] for r in records],
            [list(r[4]) for r in records],
            [r[10] for r in records],
            valid,
            partial,
        )
        offsets, keys, values, headers, sequences, crc_ok, cvalid, cpartial = col[1]
        if from_objects != (offsets, keys, values, headers, sequences, cvalid, cpartial):
            raise fail(f"{name}: records and columns differ", data)
        check_consistent(name, (records, valid, partial), n, data)


def one_input(data: bytes) -> None:
    if _codecs is None:
        setup()
    payload, raw, check_crc = prepare(data)
    n = len(raw)
    limit = memory_budget(n, FUZZ_DECOMPRESSION_CAP)
    decoded, columns = [], []
    for name, codec in _codecs:
        with Budget(n, limit=limit, what=f"decode_message_set ({name})", data=data):
            decoded.append(outcome(_decode, codec, payload, check_crc, what=f"decode_message_set ({name})", data=data))
    for name, codec in _codecs:
        with Budget(n, limit=limit, what=f"decode_columns ({name})", data=data):
            columns.append(outcome(_columns, codec, payload, check_crc, what=f"decode_columns ({name})", data=data))
    if len(_codecs) == 2:
        check_same_outcome(decoded[0], decoded[1], what="decode_message_set", data=data)
        check_same_outcome(columns[0], columns[1], what="decode_columns", data=data)
    for (name, codec), dec, col in zip(_codecs, decoded, columns):
        check_objects_match_columns(name, dec, col, check_crc, data)
        if dec[0] == "ok":
            check_consistent(name, dec[1], n, data)
            check_reencode(name, codec, dec[1], raw, check_crc, data)
    check_records(data, payload, check_crc, n, limit)


def check_objects_match_columns(name, dec, col, check_crc, data) -> None:
    from kproto.records.format import codec_id

    if dec[0] != col[0]:
        raise fail(f"{name}: decode_message_set {dec[0]} but decode_columns {col[0]}: {dec[1]!r} / {col[1]!r}", data)
    if dec[0] == "error":
        if type(dec[1]) is not type(col[1]) or dec[1].offset != col[1].offset:
            raise fail(f"{name}: decode_message_set and decode_columns fail differently: {dec[1]!r} / {col[1]!r}", data)
        return
    messages, valid, partial = dec[1]
    count, offsets, keys, values, timestamps, magics, attributes, codecs, crc_ok, cvalid, cpartial = col[1]
    from_objects = (
        len(messages),
        [m[0] for m in messages],
        [m[1] for m in messages],
        [m[2] for m in messages],
        [-1 if m[3] is None else m[3] for m in messages],
        [m[4] for m in messages],
        [m[5] - 256 if m[5] > 127 else m[5] for m in messages],
        [codec_id(m[6]) for m in messages],
        valid,
        partial,
    )
    from_columns = (count, offsets, keys, values, timestamps, magics, attributes, codecs, cvalid, cpartial)
    if from_objects != from_columns:
        raise fail(
            f"{name}: objects and columns differ:\n  objects: {from_objects!r:.600}\n  columns: {from_columns!r:.600}",
            data,
        )
    if check_crc and not all(crc_ok):
        raise fail(f"{name}: check_crc=True but crc_ok has zeros", data)


def check_consistent(name, result, n, data) -> None:
    messages, valid, partial = result
    if not 0 <= valid <= n or (partial and valid == n) or (not partial and valid != n):
        raise fail(f"{name}: valid_bytes {valid} and partial {partial} do not fit an input of {n} bytes", data)


def check_reencode(name, codec, result, raw, check_crc, data) -> None:
    """Every decoded message re-encodes and decodes back to itself."""
    messages, valid, _ = result
    parts = []
    for m in messages:
        offset, key, value, timestamp, magic, attributes, carrier, ts_type, crc = m
        if magic == 0 and (timestamp is not None or ts_type is not None):
            raise fail(f"{name}: a magic 0 message came out with a timestamp: {m!r:.300}", data)
        try:
            wire = codec.encode_message_set(
                [(key, value, timestamp)], magic=magic, base_offset=offset, timestamp_type=ts_type or 0
            )
        except Exception as exc:  # noqa: BLE001
            raise fail(f"{name}: encode_message_set of a decoded message raised {type(exc).__name__}: {exc}", data)
        parts.append(wire)
        back = outcome(
            lambda: [fields(x) for x in codec.decode_message_set(wire)], what="decode of re-encoded", data=data
        )
        if back[0] != "ok" or len(back[1]) != 1:
            raise fail(f"{name}: a re-encoded message does not decode: {back!r}", data)
        again = back[1][0]
        if again[:5] != m[:5] or again[7] != m[7]:
            raise fail(
                f"{name}: message changed in a round trip:\n  decoded:  {m!r:.300}\n  again:    {again!r:.300}", data
            )
    exact = check_crc and all(m[6] is None and m[5] in (0, 8 if m[4] == 1 else 0) for m in messages)
    if exact and b"".join(parts) != raw[:valid]:
        raise fail(
            f"{name}: re-encoding an uncompressed set with valid CRCs did not reproduce it:\n"
            f"  input:      {raw[:valid][:200].hex()}\n  re-encoded: {b''.join(parts)[:200].hex()}",
            data,
        )


if __name__ == "__main__":
    atheris_runtime.main(NAME, setup, one_input)
