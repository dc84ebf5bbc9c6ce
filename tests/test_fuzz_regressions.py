"""Inputs the fuzz harnesses (``fuzz/``) and their oracles found, kept as tests.

Each test names the harness/oracle that caught the problem and states the expected behaviour; it fails
until kproto is fixed.  See ``docs/reliability.md`` for the campaign these came from.
"""

from __future__ import annotations

import io
import os
import sys
import time
import tracemalloc

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
        "the cap should bound the decompressed bytes of the whole call, not of each wrapper")


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
    assert took < 1.0, f"a {len(line)}-character line took {took:.2f} s of CPU to reject"


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
@pytest.mark.parametrize("twin", ["compiled", "python"])
def test_decode_from_refuses_an_end_beyond_the_buffer(twin):
    from fuzz.twin_backends import compiled_codecs, load_pure_codecs
    from kproto.errors import KprotoError

    messages = (compiled_codecs() if twin == "compiled" else load_pure_codecs()).messages
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
@pytest.mark.parametrize("text", [
    "00000000: 6865 6c6c 6f20 6b70 726f 746f 3a         hello kproto:\n",
    "0000  68 65 6c 6c 6f 20 6b 70 72 6f 74 6f 3a            hello kproto:\n",
])
def test_dump_line_whose_ascii_column_ends_in_a_colon_keeps_its_bytes(text):
    from kproto.cli.hex_input import open_input_chunks

    chunks = open_input_chunks(io.BytesIO(text.encode()), force="hex")
    assert b"".join(chunks.chunks) == b"hello kproto:"
    assert not chunks.bad_lines
