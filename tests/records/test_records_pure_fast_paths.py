"""The pure twin's fast paths against its own careful ones: the magic 2 record loop that reads varints in
line (``_records_fast``) must build what the careful parse (``_records_into``) builds, or give up; the
column encoder (``_encode_columns``) must write what the row encoder (``_encode_rows``) writes, or give up.
The compiled/pure differential holds the careful paths to the Cython twin; this holds the fast ones to
them, on the shapes where they differ: varints of three to ten bytes, deltas near the int64 edges, null
and multiple headers, records that lie about their length, values that are not ``bytes``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.records import default_records

binary = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=60, max_size=200))
headers = st.one_of(st.just([]), st.lists(st.tuples(st.sampled_from(["k", "trace", "h\u00e9"]), binary), max_size=3))
timestamps = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**20))
records = st.lists(st.tuples(binary, binary, timestamps, headers), min_size=1, max_size=8)
near = st.one_of(st.integers(-(2**40), 2**40), st.integers(0, 2**20), st.integers(2**26, 2**29))
near_records = st.lists(st.tuples(binary, binary, near, headers), min_size=1, max_size=8)


def _rows(segments):
    """The rows of what the fast loop returns (its segments, as the batch's records hold them)."""
    return None if segments is None else [tuple(r) for r in default_records._BatchRecords(segments)]


def _careful(body: bytes, count: int, base_offset: int, base_ts: int, ts_type: int, base_sequence: int):
    rows: list = []
    try:
        end = default_records._records_into(
            body,
            0,
            len(body),
            count,
            rows,
            base_offset,
            base_ts,
            99 if ts_type else None,
            ts_type,
            None,
            5,
            1,
            base_sequence,
            False,
            False,
        )
    except default_records.DecodeError:
        return None
    return rows if end == len(body) else None


@settings(max_examples=80, deadline=None)
@given(
    near_records,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 1),
    st.sampled_from([-1, 0, 2**31 - 2]),
    st.data(),
)
def test_the_fast_record_loop_builds_what_the_careful_one_builds(
    items, base_offset, base_ts, ts_type, base_sequence, data
):
    body = bytearray(b"".join(default_records.encode_batch_records(items, 7)[0]))
    damaged = data.draw(st.booleans())
    if damaged:  # one byte changed: the fast loop builds what the careful one builds, or gives up
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    body = bytes(body)
    count = len(items) + data.draw(st.sampled_from([0, 0, -1, 1]))
    fast = _rows(
        default_records._records_fast(
            body,
            0,
            len(body),
            count,
            base_offset,
            base_ts,
            99 if ts_type else None,
            ts_type,
            None,
            5,
            1,
            base_sequence,
            False,
            False,
        )
    )
    careful = _careful(body, count, base_offset, base_ts, ts_type, base_sequence)
    if fast is not None:
        assert fast == careful
    elif not damaged and count == len(items):  # what producers write, it gives up only at the edges
        assert (
            careful is None
            or base_offset <= -(2**62)
            or base_offset >= 2**62
            or base_ts <= -(2**62)
            or base_ts >= 2**62
            or any(len(v or b"") >= 8192 for r in items for v in r[:2])
            or any(abs(r[2] - items[0][2]) >= 2**27 for r in items)
        )


def test_the_fast_record_loop_reads_varints_up_to_four_bytes():
    items = [(None, b"v" * 9000, 10**7 * i, [("k", b"w" * 70)]) for i in range(3)]
    body = b"".join(default_records.encode_batch_records(items, 0)[0])
    fast = _rows(default_records._records_fast(body, 0, len(body), 3, 10, 0, None, 0, None, 5, 1, -1, False, False))
    assert fast is not None and fast == _careful(body, 3, 10, 0, 0, -1)
    assert [row[1] for row in fast] == [0, 10**7, 2 * 10**7]


class _Int(int):
    pass


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(
        records,
        st.lists(
            st.one_of(
                st.tuples(binary, binary),
                st.tuples(binary, binary, timestamps),
                st.tuples(st.just(bytearray(b"ba")), binary, timestamps, headers),
                st.tuples(binary, binary, st.just(_Int(5)), headers),
                st.tuples(binary, binary, timestamps, st.just([("k", b"v"), ["l", None]])),
                st.tuples(binary, binary, timestamps, st.just([(b"raw", b"v")])),
                st.tuples(binary, binary, timestamps, headers),
            ),
            min_size=1,
            max_size=6,
        ),
    )
)
def test_the_column_encoder_writes_what_the_row_encoder_writes(items):
    try:
        rows = default_records._encode_rows(items, 1234)
    except default_records.EncodeError:
        rows = None  # bad input: the column encoder must have given up
    for few_pieces in (False, True):  # pieces for one join of the batch, or for a streaming compressor
        try:
            columns = default_records._encode_columns(items, 1234, few_pieces)
        except Exception:
            columns = None  # encode_batch_records leaves such input to the row encoder
        if columns is not None:
            assert rows is not None
            assert (b"".join(columns[0]),) + columns[1:] == (b"".join(rows[0]),) + rows[1:]
            assert sum(map(len, columns[0])) == columns[1]


def test_the_column_encoder_takes_the_usual_shapes_and_large_batches():
    for shape, count in ((2, 500), (3, 500), (4, 16500)):  # past the 16384 varints of the tables
        items = [(None, b"x" * (i % 300), 10**12 + i, [("trace", b"%08d" % i)])[:shape] for i in range(count)]
        columns = default_records._encode_columns(items, 10**12)
        assert columns is not None
        assert b"".join(columns[0]) == b"".join(default_records._encode_rows(items, 10**12)[0])


class _Str(str):
    pass


def test_the_column_encoder_takes_one_header_name_by_identity_and_checks_the_others():
    # one header a record: a name that is one object in every record is type-checked once; names that are
    # equal but not the same object, several names, a str subclass (which the row encoder refuses) and a
    # header that is not a pair take the checks of every name
    made = ["".join(("tr", "ace")) for _ in range(4)]
    for names in (
        ["trace"] * 4,
        made,
        ["a", "b", "a", "c"],
        ["trace", "trace", _Str("trace"), "trace"],
        [_Str("trace")] * 4,
    ):
        items = [(None, b"v%d" % i, 7 + i, [(name, None if i == 1 else b"h%d" % i)]) for i, name in enumerate(names)]
        try:
            rows = default_records._encode_rows(items, 0)
        except default_records.EncodeError:
            rows = None
        columns = default_records._encode_columns(items, 0)
        assert (columns is None) == (rows is None)
        if columns is not None:
            assert (b"".join(columns[0]),) + columns[1:] == (b"".join(rows[0]),) + rows[1:]
    assert default_records._encode_columns([(None, b"v", 7, [("trace", b"h", b"extra")])], 0) is None


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6),
    st.sampled_from([None, b"k", b"K" * 1500]),
    st.sampled_from([b"v" * 1100, b"w" * 3000, None]),
    st.booleans(),
    st.sampled_from([[], [("trace", b"12345678")], [("t", None), ("u", b"x" * 200)]]),
    st.booleans(),
)
def test_the_column_encoder_lays_out_large_records_as_the_row_encoder(count, key, value, varying, hdrs, same_ts):
    # every piece as it is (for the batch's one join), or (for a streaming compressor) large keys/values as
    # pieces of their own and the small pieces between them joined across records: the joined pieces are
    # what the row encoder writes, whatever the pieces (one or two large columns, null or constant-length
    # ones, records of one length or not, one header or several), and the size is theirs
    items = [
        (
            key,
            None
            if value is None and i % 2
            else (value or b"n" * 1024)[: len(value or b"n" * 1024) - (i if varying else 0)],
            5 if same_ts else 10**6 * i,
            hdrs,
        )
        for i in range(count)
    ]
    rows = default_records._encode_rows(items, 0)
    for few_pieces in (False, True):
        columns = default_records._encode_columns(items, 0, few_pieces)
        assert columns is not None
        assert (b"".join(columns[0]),) + columns[1:] == (b"".join(rows[0]),) + rows[1:]
        assert sum(map(len, columns[0])) == columns[1]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([0, 7, 14, 18]),
    st.sampled_from([None, b"", b"key", b"k" * 1030]),
    st.sampled_from([None, b"v" * 90, b"v" * 1100]),
    st.sampled_from([[], [("trace", b"12345678")], [("t", None)], [("t", b"h" * 1500)]]),
    st.data(),
)
def test_records_of_one_layout_read_as_the_careful_parse_reads_them(shift, key, value, hdrs, data):
    # deltas that cross from one to four bytes, one byte damaged somewhere (or none); large records
    items = [(key, value, i << shift, hdrs) for i in range(300)]
    body = bytearray(b"".join(default_records.encode_batch_records(items, 0)[0]))
    at = data.draw(st.one_of(st.none(), st.integers(0, len(body) - 1)))
    if at is not None:
        body[at] ^= data.draw(st.integers(1, 255))
    careful = _careful(bytes(body), 300, 10, 0, 0, 7)
    body = bytes(body)
    fast = _rows(default_records._records_fast(body, 0, len(body), 300, 10, 0, None, 0, None, 5, 1, 7, False, False))
    if at is None:
        assert fast is not None
    if fast is not None:
        assert fast == careful
        assert {type(v) for row in fast for v in (row[2], row[3], *(h[1] for h in row[4]))} <= {bytes, type(None)}


def test_records_of_another_layout_among_many_read_as_the_careful_parse_reads_them():
    # a record with a longer value and one with a longer header value among records of one layout
    for size in (90, 1100):
        items = [(b"key", b"v" * size, 1000 + i, [("trace", b"%08d" % i)]) for i in range(300)]
        items[100] = (b"key", b"v" * (size + 1), 1100, [("trace", b"%08d" % 100)])
        items[200] = (b"key", b"v" * size, 1200, [("trace", b"%09d" % 200)])
        body = b"".join(default_records.encode_batch_records(items, 0)[0])
        segments = default_records._records_fast(body, 0, len(body), 300, 10, 0, None, 0, None, 5, 1, 7, False, False)
        assert segments is not None
        assert _rows(segments) == _careful(body, 300, 10, 0, 0, 7)
        records = list(default_records._BatchRecords(segments))
        assert {type(r.value) for r in records} == {bytes} and [r.offset for r in records] == list(range(10, 310))


def test_records_of_large_values_kept_or_dropped_while_iterating_are_the_same():
    items = [(None, b"%05d" % i * 300, 1000 + i, [("trace", b"%08d" % i)]) for i in range(200)]
    body = b"".join(default_records.encode_batch_records(items, 0)[0])
    careful = _careful(body, 200, 10, 0, 0, -1)

    def fresh():
        return default_records._BatchRecords(
            default_records._records_fast(body, 0, len(body), 200, 10, 0, None, 0, None, 5, 1, -1, False, False)
        )

    kept = [r for i, r in enumerate(fresh()) if i % 3 == 0]  # the others dropped as iteration goes on
    assert [tuple(r) for r in kept] == careful[::3]
    records = fresh()
    assert [tuple(r) for r in records] == careful == [tuple(r) for r in records]  # iterated twice
    assert tuple(records[150]) == careful[150]


def test_records_of_a_decompressed_batch_held_while_others_decode_read_right():
    # records of one decompressed batch held while the next batches decode still read right
    from kproto.records import compression

    def batch(tag):
        items = [(None, tag * 2000, 1000 + i, [("trace", b"%08d" % i)]) for i in range(50)]
        return default_records.encode_batch(items, 0, 3, -1, -1, -1, 0, -1, 0)

    def expected(data):
        body = compression.decompress(3, data[61:], magic=2, limit=1 << 30)
        return _careful(body, 50, 0, 1000, 0, -1)

    first, second = batch(b"a"), batch(b"b")
    held = default_records.decode_records(first, True, 1 << 30)
    assert [tuple(r)[:4] for r in default_records.decode_records(second, True, 1 << 30)] == [
        r[:4] for r in expected(second)
    ]
    assert [tuple(r)[:4] for r in held] == [r[:4] for r in expected(first)]
    del held
    for data in (second, first, second):
        assert [tuple(r)[:4] for r in default_records.decode_records(data, True, 1 << 30)] == [
            r[:4] for r in expected(data)
        ]
