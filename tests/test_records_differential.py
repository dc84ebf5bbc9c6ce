"""Cython vs pure: same messages, or the same error class at the same offset, on valid and damaged input."""

from __future__ import annotations

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.errors import KprotoError

binary = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
batches = st.tuples(
    st.lists(st.tuples(binary, binary, st.integers(min_value=-1, max_value=2**40)), min_size=1, max_size=6),
    st.sampled_from([0, 1]),
    st.sampled_from([None, None, "gzip", "snappy", "lz4"]),
    st.integers(min_value=0, max_value=2**33),
)


def fields(m):
    return (m.offset, m.key, m.value, m.timestamp, m.magic, m.attributes, m.codec, m.timestamp_type, m.crc)


def outcome(api, data, check_crc, check_inner_crc=True):
    try:
        ms = api.decode_message_set(
            data, check_crc=check_crc, check_inner_crc=check_inner_crc, max_decompressed_size=1 << 16
        )
    except KprotoError as exc:
        return ("error", type(exc), exc.offset)
    return ("ok", [fields(m) for m in ms], ms.valid_bytes, ms.partial)


def columns_outcome(api, data, check_crc):
    try:
        c = api.decode_columns(data, check_crc=check_crc, max_decompressed_size=1 << 16)
    except KprotoError as exc:
        return ("error", type(exc), exc.offset)
    return (
        "ok",
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


def build(api, parts):
    return b"".join(
        api.encode_message_set(items, magic=magic, codec=codec, base_offset=base) for items, magic, codec, base in parts
    )


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(batches, min_size=1, max_size=4), data=st.data())
def test_same_results_on_valid_and_damaged_input(both_codecs, parts, data):
    fast, pure = both_codecs
    wire = build(pure, parts)
    assert build(fast, parts) == wire
    edits = data.draw(st.lists(st.tuples(st.integers(0, len(wire) - 1), st.integers(0, 255)), max_size=3))
    damaged = bytearray(wire)
    for at, value in edits:
        damaged[at] = value
    cut = data.draw(st.integers(0, len(wire)))
    check_crc = data.draw(st.booleans())
    check_inner_crc = data.draw(st.booleans())
    for sample in (wire, bytes(damaged), bytes(damaged[:cut]), wire[:cut]):
        expected = outcome(pure, sample, check_crc, check_inner_crc)
        assert outcome(fast, sample, check_crc, check_inner_crc) == expected
        assert columns_outcome(fast, sample, check_crc) == columns_outcome(pure, sample, check_crc)
        if expected[0] == "ok":
            assert [row[0] for row in expected[1]] == list(pure.decode_columns(sample, check_crc=False).offsets)


@settings(max_examples=150, deadline=None)
@given(blob=st.binary(max_size=200), check_crc=st.booleans())
def test_same_results_on_random_bytes(both_codecs, blob, check_crc):
    fast, pure = both_codecs
    assert outcome(fast, blob, check_crc) == outcome(pure, blob, check_crc)
    assert columns_outcome(fast, blob, check_crc) == columns_outcome(pure, blob, check_crc)


@settings(max_examples=100, deadline=None)
@given(body=st.binary(min_size=10, max_size=60), offset=st.integers(-(2**63), 2**63 - 1), check_crc=st.booleans())
def test_same_results_on_headers_with_valid_crc(both_codecs, body, offset, check_crc):
    """Random bodies with a correct CRC reach the field checks even with check_crc=True."""
    fast, pure = both_codecs
    body = bytes([body[0] % 3, body[1] % 16]) + body[2:]
    wire = (
        offset.to_bytes(8, "big", signed=True)
        + (len(body) + 4).to_bytes(4, "big")
        + zlib.crc32(body).to_bytes(4, "big")
        + body
    )
    assert outcome(fast, wire, check_crc) == outcome(pure, wire, check_crc)
    assert columns_outcome(fast, wire, check_crc) == columns_outcome(pure, wire, check_crc)
