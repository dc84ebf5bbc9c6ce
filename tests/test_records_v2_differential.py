"""Cython vs pure on any mix of magics: same records, batches and columns, or the same error class at the
same offset — on valid input, damaged input (with the CRC-32C recomputed after the damage, so the field
checks are reached), truncated input and random bytes."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.errors import DecodeError, KprotoError

binary = st.one_of(st.none(), st.just(b""), st.binary(max_size=30))
headers = st.lists(st.tuples(st.sampled_from(["a", "trace", "h\u00e9"]), binary), max_size=3)
v2_batches = st.tuples(
    st.just(2),
    st.lists(st.tuples(binary, binary, st.integers(-(2**45), 2**45), headers), min_size=1, max_size=5),
    st.sampled_from([None, None, "gzip", "snappy", "lz4", "zstd"]),
    st.integers(min_value=0, max_value=2**40),
    st.booleans(),
)
legacy_sets = st.tuples(
    st.sampled_from([0, 1]),
    st.lists(st.tuples(binary, binary, st.integers(0, 2**40)), min_size=1, max_size=3),
    st.sampled_from([None, "gzip", "lz4"]),
    st.integers(min_value=0, max_value=2**40),
    st.just(False),
)


def build(api, parts) -> bytes:
    out = []
    for magic, items, codec, base, transactional in parts:
        if magic == 2:
            out.append(
                api.encode_record_batch(
                    items,
                    codec=codec,
                    base_offset=base,
                    transactional=transactional,
                    producer_id=77 if transactional else -1,
                    producer_epoch=1 if transactional else -1,
                    base_sequence=2**31 - 3 if transactional else -1,
                )
            )
        else:
            out.append(api.encode_message_set(items, magic=magic, codec=codec, base_offset=base))
    return b"".join(out)


def record_fields(r):
    return (
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


def batch_fields(b):
    return tuple(getattr(b, name) for name in b.__slots__[:-1]) + (b.codec, b.is_control, b.has_delete_horizon)


def records_outcome(api, data, check_crc):
    try:
        decoded = api.decode_records(data, check_crc=check_crc, max_decompressed_size=1 << 16)
        return (
            "ok",
            [record_fields(r) for r in decoded],
            [batch_fields(b) for b in decoded.batches],
            decoded.valid_bytes,
            decoded.partial,
            len(decoded),
        )
    except KprotoError as exc:
        return ("error", type(exc), exc.offset)


def columns_outcome(api, data, check_crc):
    try:
        c = api.decode_columns(data, check_crc=check_crc, max_decompressed_size=1 << 16)
    except KprotoError as exc:
        return ("error", type(exc), exc.offset)
    return (
        ("ok", c.keys(), c.values(), c.headers(), c.valid_bytes, c.partial)
        + tuple(
            list(getattr(c, name))
            for name in c.__slots__
            if name.endswith("s") and not name.endswith("data") and name not in ("keys", "values")
        )
        + (list(c.crc_ok), list(c.transactional), list(c.control))
    )


def fix_crcs(data: bytearray) -> None:
    """Recompute the CRC-32C of every magic 2 batch whose header is intact enough to find its end."""
    pos = 0
    while len(data) - pos >= 61:
        size = struct.unpack_from(">i", data, pos + 8)[0]
        if size < 49 or pos + 12 + size > len(data) or data[pos + 16] != 2:
            return
        struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21 : pos + 12 + size])))
        pos += 12 + size


@settings(max_examples=120, deadline=None)
@given(parts=st.lists(st.one_of(v2_batches, v2_batches, legacy_sets), min_size=1, max_size=4), data=st.data())
def test_same_results_on_valid_and_damaged_input(both_codecs, parts, data):
    fast, pure = both_codecs
    wire = build(pure, [(m, [i[:3] + (i[3],) if m == 2 else i for i in items], c, b, t) for m, items, c, b, t in parts])
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(wire) - 1), st.integers(0, 255)), max_size=3))
    damaged = bytearray(wire)
    for at, value in edits:
        damaged[at] = value
    refixed = bytearray(damaged)
    fix_crcs(refixed)
    cut = data.draw(st.integers(0, len(wire)))
    check_crc = data.draw(st.booleans())
    for sample in (wire, bytes(damaged), bytes(refixed), bytes(refixed[:cut]), wire[:cut]):
        expected = records_outcome(pure, sample, check_crc)
        assert records_outcome(fast, sample, check_crc) == expected
        assert columns_outcome(fast, sample, check_crc) == columns_outcome(pure, sample, check_crc)


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(v2_batches, min_size=1, max_size=2))
def test_both_encoders_write_the_same_bytes(both_codecs, parts):
    fast, pure = both_codecs
    parts = [(m, items, c if c in (None, "snappy", "lz4", "zstd") else None, b, t) for m, items, c, b, t in parts]
    assert build(fast, parts) == build(pure, parts)


@settings(max_examples=150, deadline=None)
@given(
    body=st.binary(min_size=0, max_size=120),
    count=st.integers(-2, 4),
    attributes=st.integers(0, 0x7F),
    check_crc=st.booleans(),
)
def test_same_results_on_random_records_with_valid_crc(both_codecs, body, count, attributes, check_crc):
    """A correct header and CRC around random record bytes: the record checks are all that can fail."""
    fast, pure = both_codecs
    tail = struct.pack(">hiqqqhii", attributes, 0, 1000, 2000, 5, 1, 7, count) + body
    wire = struct.pack(">qiib", 100, len(tail) + 9, -1, 2) + struct.pack(">I", crc32c.crc32c(tail)) + tail
    assert records_outcome(fast, wire, check_crc) == records_outcome(pure, wire, check_crc)
    assert columns_outcome(fast, wire, check_crc) == columns_outcome(pure, wire, check_crc)


@settings(max_examples=150, deadline=None)
@given(blob=st.binary(max_size=200), check_crc=st.booleans())
def test_same_results_on_random_bytes(both_codecs, blob, check_crc):
    fast, pure = both_codecs
    blob = blob[:16] + b"\x02" + blob[17:] if len(blob) > 16 and blob[0] & 1 else blob  # often magic 2
    assert records_outcome(fast, blob, check_crc) == records_outcome(pure, blob, check_crc)
    assert columns_outcome(fast, blob, check_crc) == columns_outcome(pure, blob, check_crc)


def test_columns_of_records_the_fast_loop_hands_back(both_codecs):
    """The compiled columns loop gives check_records any record it does not take itself (here: a non-ASCII
    header key): a valid one comes back as its row, a bad one as check_records's error; a value of 9000 bytes
    has length varints past the loop's two byte shortcut."""
    fast, pure = both_codecs
    items = [
        (b"k", b"v", 10, [("trace", b"1")]),
        (None, b"x" * 9000, 11, [("h\u00e9", None), ("a", b"")]),
        (b"k" * 70, None, 12, [("trace", b"2")]),
        (b"", b"", 13, []),
    ]
    wire = bytearray(build(pure, [(2, items, None, 5, True)]))
    bad_key = bytearray(wire)
    at = bytes(bad_key).index("h\u00e9".encode())
    bad_key[at + 1] = 0xFF  # no longer UTF-8
    fix_crcs(bad_key)
    for sample in (bytes(wire), bytes(bad_key), bytes(wire) + bytes(wire)):
        assert columns_outcome(fast, sample, True) == columns_outcome(pure, sample, True)
    assert columns_outcome(fast, bytes(bad_key), True)[:2] == ("error", DecodeError)
    assert fast.decode_columns(bytes(wire)).headers()[1] == [("h\u00e9", None), ("a", b"")]


def test_arrow_batches_are_the_same_on_both_backends(both_codecs):
    pytest.importorskip("pyarrow")
    fast, pure = both_codecs
    last = build(pure, [(1, [(b"c", b"d", 5)], "gzip", 30, False)])
    wire = (
        build(
            pure,
            [
                (2, [(None, b"v", 1, [("h", None)]), (b"k", None, 2, [])], "lz4", 7, True),
                (0, [(None, b"a", 0), (b"b", None, 0)], None, 20, False),
            ],
        )
        + last
    )
    damaged = bytearray(wire)
    damaged[len(wire) - len(last) + 12] ^= 1  # the magic 1 wrapper's stored CRC: crc_ok false with check_crc=False
    batch = fast.decode_columns(bytes(damaged), check_crc=False, arrow=True)
    batch.validate(full=True)
    assert batch.equals(pure.decode_columns(bytes(damaged), check_crc=False, arrow=True))
    assert batch.column("timestamp").to_pylist() == [1, 2, None, None, 5]
    assert batch.column("crc_ok").to_pylist() == [True, True, True, True, False]
    assert batch.column("key").to_pylist() == [None, b"k", None, b"b", b"c"]
    assert batch.column("is_transactional").to_pylist() == [True, True, False, False, False]
    assert batch.column("headers").to_pylist()[0] == [{"key": "h", "value": None}]


def test_records_headers_and_pairs_held_or_dropped_while_iterating(both_codecs):
    """The compiled iterator refills the headers tuples of records nobody holds any more (not those of the
    record the loop still holds); records, headers tuples and (key, value) pairs that are held, in any mix
    and with zero to two headers a record, keep their own values."""
    fast, pure = both_codecs
    items = [(None, b"v%d" % i, i, [("trace", b"%d" % i), ("n", None if i % 4 else b"x")][: i % 3]) for i in range(40)]
    wire = build(pure, [(2, items, None, 0, False)])
    expected = [record_fields(r) for r in pure.decode_records(wire)]
    seen, held = [], []
    for i, r in enumerate(fast.decode_records(wire)):
        seen.append(record_fields(r))
        if i % 4 == 1:
            held.append((i, "record", r))
        elif i % 4 == 2:
            held.append((i, "headers", r.headers))
        elif i % 4 == 3 and r.headers:
            held.append((i, "pair", r.headers[-1]))
    assert seen == expected
    for i, kind, thing in held:
        if kind == "record":
            assert record_fields(thing) == expected[i]
        elif kind == "headers":
            assert thing == expected[i][4]
        else:
            assert thing == expected[i][4][-1]
    decoded = fast.decode_records(wire)
    assert [record_fields(r) for r in decoded] == expected == [record_fields(r) for r in decoded]
    assert record_fields(decoded.batches[0].records[38]) == expected[38]
