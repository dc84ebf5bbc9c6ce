"""The compiled record text of ``pcap -v`` (``kproto._fast._record_json``) against its pure twin
(``kproto.cli.json_values``): the same bytes for the same decoded messages and records, the same number of
items taken from the iterator.  The pure twin is itself held to ``json.dumps`` of the generic JSON values
by ``test_cli_modern_versions.py``."""

from __future__ import annotations

import base64
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.cli.json_output import RecordWriter
from kproto.cli.json_values import (
    Base64Text,
    _batched_record_json,
    _record_json,
    base64_json,
    bytes_of,
    message_list_text,
    record_list_text,
    record_set_json,
)
from kproto.records import decode_message_set, decode_records, encode_message_set, encode_record_batch

pytestmark = pytest.mark.compiled_only

binary = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
# Header keys that JSON must escape: quotes, backslashes, control and non-ASCII characters.
header_keys = st.one_of(st.sampled_from(["trace-id", "h\u00e9\"\\", "\x00\n\x7f", "\U0001f600"]), st.text(max_size=6))
message_sets = st.tuples(
    st.sampled_from([0, 1]),
    st.lists(st.tuples(binary, binary, st.integers(-1, 2**45)), min_size=1, max_size=6),
    st.sampled_from([None, "gzip", "snappy", "lz4"]),
    st.integers(0, 2**62),
    st.sampled_from([0, 1]),
)
batches = st.tuples(
    st.lists(
        st.tuples(binary, binary, st.integers(-(2**45), 2**45), st.lists(st.tuples(header_keys, binary), max_size=3)),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from([None, "gzip", "zstd"]),
    st.integers(0, 2**62),
)


def compiled():
    from kproto._fast import _record_json

    return _record_json


def both(compiled_text, pure_text, decoded) -> bytes:
    """Render ``decoded`` with both twins in pieces of 1, 2 and all: same text, same items consumed."""
    whole = pure_text(iter(decoded), len(decoded))
    assert compiled_text(iter(decoded), len(decoded) + 5) == whole
    for step in (1, 2):
        fast, pure = iter(decoded), iter(decoded)
        pieces = [(compiled_text(fast, step), pure_text(pure, step)) for _ in range(0, len(decoded), step)]
        assert [a for a, _ in pieces] == [b for _, b in pieces]
        assert next(fast, None) is None and next(pure, None) is None
    assert compiled_text(iter(decoded), 0) == b"" == pure_text(iter(decoded), 0)
    return whole


@settings(max_examples=80, deadline=None)
@given(sets=st.lists(message_sets, min_size=1, max_size=3))
def test_message_text_matches_the_pure_twin(sets) -> None:
    raw = b"".join(
        encode_message_set(items, magic=magic, codec=codec, base_offset=base, timestamp_type=kind if magic == 1 else 0)
        for magic, items, codec, base, kind in sets
    )
    for cut in (raw, raw[:1], raw[:2], raw[:3], raw[:-1], b""):  # every base64 tail: none, "==", "="
        expected = json.dumps(base64.b64encode(cut).decode()).encode()
        assert compiled().base64_json(cut) == base64_json(cut) == expected
    decoded = decode_message_set(raw)
    text = both(compiled().message_list_json, message_list_text, decoded)
    assert json.loads(b"[" + text + b"]") == [_record_json(m) for m in decoded]


@settings(max_examples=80, deadline=None)
@given(parts=st.lists(batches, min_size=1, max_size=3), legacy=st.booleans())
def test_record_text_matches_the_pure_twin(parts, legacy: bool) -> None:
    raw = b"".join(encode_record_batch(items, codec=codec, base_offset=base) for items, codec, base in parts)
    if legacy:  # a magic 1 set in front: records without headers
        raw = encode_message_set([(b"k", None, 5)], magic=1, codec="gzip", base_offset=2**40) + raw
    decoded = decode_records(raw)
    text = both(compiled().record_list_json, record_list_text, decoded)
    assert json.loads(b"[" + text + b"]") == [_batched_record_json(r) for r in decoded]


def test_extreme_integers_and_unknown_codec() -> None:
    raw = encode_message_set([(None, b"x", -1), (b"", None, 2**63 - 1)], magic=1, base_offset=2**63 - 2)
    decoded = decode_message_set(raw)
    assert compiled().message_list_json(iter(decoded), 2) == message_list_text(iter(decoded), 2)

    class Odd:  # a message-like object travelling with a codec no writer knows
        offset, magic, attributes, codec, timestamp, timestamp_type, crc = 0, 1, 0, "brotli", 1, 0, 1
        key = value = None

    for text in (compiled().message_list_json, message_list_text):
        with pytest.raises(KeyError):
            text(iter([Odd()]), 1)


def test_record_set_base64_is_written_as_its_text() -> None:
    """A record set's ``$bytes`` is a Base64Text: equal to its text, written by every writer as that text."""
    raw = encode_message_set([(b"k", b"v" * 50)], magic=1, codec="gzip")
    value = record_set_json(raw, verbose=True)
    text = base64.b64encode(raw).decode()
    assert value["$bytes"] == text and bytes_of(value) == raw == bytes_of({"$bytes": text})
    assert isinstance(value["$bytes"], Base64Text) and str(value["$bytes"]) == text
    plain = dict(value, **{"$bytes": text}, messages=list(value["messages"]))
    for fmt in ("jsonl", "json"):
        outputs = []
        for record in (plain, value):
            for stream in (io.StringIO(), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")):  # text, and bytes under
                writer = RecordWriter(stream, fmt, "test")
                writer.write({"record": "x", "records": record})
                writer.close({})
                stream.flush()
                outputs.append(
                    stream.getvalue() if isinstance(stream, io.StringIO) else stream.buffer.getvalue().decode()
                )
        assert len(set(outputs)) == 1, fmt


def test_missing_compiled_renderer_is_never_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    from kproto._backend import FastPathMissingError, FastPathUnavailableWarning
    from kproto.cli import json_values

    def broken(name: str):
        raise ImportError(f"no {name}")

    monkeypatch.setattr(json_values.importlib, "import_module", broken)
    monkeypatch.setenv("KPROTO_REQUIRE_FAST", "1")
    with pytest.raises(FastPathMissingError):
        json_values._compiled_record_text()
    monkeypatch.delenv("KPROTO_REQUIRE_FAST")
    with pytest.warns(FastPathUnavailableWarning, match="_record_json"):
        assert json_values._compiled_record_text() is None
