"""Inputs the fuzz harnesses (``fuzz/``) and their oracles found, kept as tests.

Each test names the harness/oracle that caught the problem and pins the expected behaviour (all fixed; they
keep the fixes from regressing).  See ``docs/reliability.md`` for the campaign these came from.
"""

from __future__ import annotations

import io
import os
import sys
import time
import tracemalloc

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fuzz.oracles import memory_budget  # noqa: E402

CAP = 256 * 1024  # the max_decompressed_size the fuzz harnesses use


def _wrappers(count: int) -> bytes:
    """``count`` gzip wrappers, each holding one message whose value decompresses to almost ``CAP`` bytes.

    Every wrapper respects ``max_decompressed_size``; together they decompress to ``count`` times it.
    """
    from kproto.records import encode_message_set

    one = [encode_message_set([(None, bytes(CAP - 100))], codec="gzip", base_offset=i) for i in range(count)]
    return b"".join(one)


def _peak(fn) -> int:
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start(1)
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was:
            tracemalloc.stop()


# fuzz_message_sets, budget oracle: max_decompressed_size caps each wrapper, not the message set.  A set of
# many small wrappers (a 1 MiB fetch response holds ~16 gzip wrappers of 64 MiB each at the default cap)
# decompresses to (number of wrappers) x cap, all held at once: ~1-2 GiB from 1 MiB of input.
def test_decompression_cap_bounds_the_whole_message_set(records_codec):
    data = _wrappers(64)  # 21.6 KB of input, 64 x 256 KiB decompressed
    budget = memory_budget(len(data), CAP)

    def decode():
        try:
            list(records_codec.decode_message_set(data, max_decompressed_size=CAP))
        except Exception as exc:  # a LimitExceededError is a fine answer too
            from kproto.errors import LimitExceededError

            assert isinstance(exc, LimitExceededError), exc

    peak = _peak(decode)
    assert peak <= budget, (
        f"decoding {len(data)} bytes with max_decompressed_size={CAP} allocated {peak} bytes (budget {budget}): "
        "the cap should bound the decompressed bytes of the whole call, not of each wrapper"
    )


# fuzz_hex_input, time budget: _LABEL_LINE (r"^.*[G-WYZg-wyz(].*:\s*$") backtracks quadratically on a long
# line full of letters with no trailing colon: 64 KiB take ~3 s, a 1 MiB line ~12 minutes.
@pytest.mark.parametrize("line", ["g" * 40000, "(" * 40000, "Frame " + "q" * 39990])
def test_hex_parser_is_linear_on_long_non_hex_lines(line):
    from kproto.cli.hex_input import HexSyntaxError, open_input_chunks, parse_hex_line

    started = time.process_time()
    with pytest.raises(HexSyntaxError):
        parse_hex_line(line)
    chunks = open_input_chunks(io.BytesIO(line.encode() + b"\n"), force="hex")
    assert b"".join(chunks.chunks) == b"" and len(chunks.bad_lines) == 1
    took = time.process_time() - started
    assert took < 5.0, f"a {len(line)}-character line took {took:.2f} s of CPU to reject"


# fuzz_hex_input, exception oracle: parse_hex_line rejects bad text with HexSyntaxError, which derives from
# ValueError only; every other error kproto raises derives from kproto.errors.KprotoError, which is what a
# caller is promised it can catch.
def test_hex_syntax_error_is_a_kproto_error():
    from kproto.cli.hex_input import HexSyntaxError
    from kproto.errors import KprotoError

    assert issubclass(HexSyntaxError, KprotoError)
    assert issubclass(HexSyntaxError, ValueError)  # keep existing `except ValueError` callers working


# valgrind_cython.sh / twin oracle: the public classmethod Message.decode_from(buf, pos, end, version) trusts
# ``end``.  The compiled codecs read bytes without bounds checks once a length check against ``end`` passed,
# so an ``end`` beyond len(buf) reads past the buffer (memcheck: "Invalid read of size 1" in
# metadata.c _read_h); RequestHeader.decode_from(b"", 0, 64, 1) decodes heap garbage, and the pure twin
# raises struct.error instead of a KprotoError.  decode_from should refuse 0 <= pos <= end <= len(buf)
# violations before decoding.
# (Each twin in its own test run: the suite runs compiled and with KPROTO_PURE=1.)
def test_decode_from_refuses_an_end_beyond_the_buffer():
    import kproto.messages as messages
    from kproto.errors import KprotoError

    with pytest.raises((KprotoError, ValueError)) as info:
        messages.MetadataRequest.decode_from(b"\x00\x00\x00\x01", 0, 4000, 0)
    assert not type(info.value).__module__.startswith("struct")
    with pytest.raises((KprotoError, ValueError)):
        messages.RequestHeader.decode_from(b"", 0, 64, 1)
    with pytest.raises((KprotoError, ValueError)):
        messages.MetadataRequest.decode_from(b"\x00\x00\x00\x00", 6, 4, 0)


# fuzz_message_sets, round-trip oracle (input fuzz/artifacts/message_sets-crash-b36e83fb..., reduced here): a
# magic 1 gzip wrapper with LogAppendTime whose inner messages are magic 0.  Both backends hand out
# Message(magic=0, timestamp=<wrapper's>, timestamp_type=1), which breaks the Message contract (magic 0 has no
# timestamp) and cannot be re-encoded (encode_message_set: "timestamp_type must be 0, or 1 with magic 1").
# Kafka requires inner messages to carry the wrapper's magic; the decoder should reject the mismatch with a
# DecodeError (or at least not stamp magic 0 messages).
def test_inner_magic_must_match_the_wrapper(records_codec):
    from fuzz.fuzz_message_sets import wrap
    from kproto.errors import DecodeError
    from kproto.records import encode_message_set

    inner = encode_message_set([(None, b"hello"), (b"key", b"value")], magic=0)
    data = wrap(inner, 1, 1, True)  # gzip, wrapper magic 1, LogAppendTime
    try:
        messages = list(records_codec.decode_message_set(data))
    except DecodeError:
        return
    for m in messages:
        assert (m.timestamp is None) == (m.timestamp_type is None) == (m.magic == 0), m


# fuzz_hex_input, round-trip oracle (fuzz/artifacts/hex_input-crash-306c0e81..., reduced): a dump line is
# tested against _LABEL_LINE ("Frame (74 bytes):") before it is recognised as a dump line, so an xxd or
# tshark line whose ASCII column contains a letter and ends in ":" (a client id "kproto:" at the end of a
# 16-byte row) is skipped as a label: its bytes vanish and no bad line is reported.  Dump lines should be
# recognised first.
@pytest.mark.parametrize(
    "text",
    [
        "00000000: 6865 6c6c 6f20 6b70 726f 746f 3a         hello kproto:\n",
        "0000  68 65 6c 6c 6f 20 6b 70 72 6f 74 6f 3a            hello kproto:\n",
    ],
)
def test_dump_line_whose_ascii_column_ends_in_a_colon_keeps_its_bytes(text):
    from kproto.cli.hex_input import open_input_chunks

    chunks = open_input_chunks(io.BytesIO(text.encode()), force="hex")
    assert b"".join(chunks.chunks) == b"hello kproto:"
    assert not chunks.bad_lines


# fuzz_message_sets, exception and twin oracles (the campaign's input is kept as
# fuzz/corpus/message_sets/regress-K4-...): a magic 1 wrapper turns relative inner offsets absolute with
# delta = wrapper offset - last inner offset, and nothing checks that delta or the results fit int64.  Pure
# decode_columns then raises OverflowError (array('q')), pure decode_message_set returns offsets beyond
# int64; the Cython core computes delta in int64_t (signed overflow: undefined behaviour in C) and its lazy
# decode_message_set adds that wrapped delta to a Python int (-18446744073709550617 below, where pure and
# Cython's own columns say 999).  Offsets that do not fit int64 should be a DecodeError at the wrapper.
_K4_FUZZ_INPUT = bytes.fromhex(
    "523f000000000000000000001b942da341010000000000000003e8ffffffff0000000568656c6c6f800000009700000a0000001e"
    "1d092bda010000000052000007d0000000036b65790000000576616c7565"
)


def _k4_cases():
    from fuzz.fuzz_message_sets import prepare, wrap
    from kproto.records import encode_message_set

    inner = encode_message_set([(None, b"a", 1), (None, b"b", 2)], magic=1, base_offset=-(2**63))
    return [("delta overflows int64", wrap(inner, 1, 1, False)), ("fuzz input", prepare(_K4_FUZZ_INPUT)[1])]


@pytest.mark.parametrize("case", [0, 1], ids=["delta-overflows-int64", "fuzz-input"])
def test_wrapper_offsets_stay_in_int64_and_backends_agree(both_codecs, case):
    from kproto.errors import KprotoError

    _, data = _k4_cases()[case]
    outcomes = []
    for codec in both_codecs:
        for fn in ("decode_message_set", "decode_columns"):
            try:
                result = getattr(codec, fn)(data, check_crc=False)
                offsets = [m.offset for m in result] if fn == "decode_message_set" else list(result.offsets)
            except KprotoError as exc:
                outcomes.append(("error", type(exc).__name__))
                continue
            assert all(-(2**63) <= o < 2**63 for o in offsets), (fn, offsets)
            outcomes.append(("ok", offsets))
    assert all(o == outcomes[0] for o in outcomes), outcomes


# fuzz_hex_input, round-trip oracle (campaign input, kept as fuzz/corpus/hex_input/regress-K5-...): a dump line
# is taken for `hexdump -C` when _HEXDUMP_C_ASCII (r"\s\|.*\|\s*$") matches anywhere after the offset, so an
# xxd or tshark line whose *ASCII column* shows " |...|" (payload bytes "ab |cd|") has the ASCII text before
# the bars parsed as hex: the bytes come out with an extra 0xab and no bad line is reported.  The ASCII column
# should be cut by the dump's layout (the hex area ends at the first run of two or more spaces, or at a fixed
# column), not by a search through the whole line.
@pytest.mark.parametrize(
    "text",
    [
        "00000000: 6162 207c 6364 7c                        ab |cd|\n",
        "0000  61 62 20 7c 63 64 7c                                ab |cd|\n",
    ],
)
def test_ascii_column_with_bars_is_not_parsed_as_hex(text):
    from kproto.cli.hex_input import open_input_chunks

    chunks = open_input_chunks(io.BytesIO(text.encode()), force="hex")
    assert b"".join(chunks.chunks) == b"ab |cd|"
    assert not chunks.bad_lines
