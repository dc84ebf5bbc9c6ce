"""The fuzz oracles themselves (``fuzz/oracles.py``): what they accept and what they report.

An oracle that cannot fail finds nothing; these tests feed each one a case it must reject.
"""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fuzz.oracles import OracleFailure, check_reencoding, is_flexible, message_value  # noqa: E402
from kproto.messages import ApiVersionsRequest, MetadataRequest  # noqa: E402


def test_classic_versions_must_reencode_to_the_same_bytes():
    check_reencoding(b"\x00\x01", b"\x00\x01", lambda: b"unused", flexible=False, what="t")
    with pytest.raises(OracleFailure, match="differ from the input"):
        check_reencoding(b"\x00\x01", b"\x00\x02", lambda: b"\x00\x02", flexible=False, what="t")


def test_flexible_versions_must_reencode_to_a_fixed_point():
    # a tagged field written with its default value decodes, and is left out when encoded again: accepted
    check_reencoding(b"\x00\x01\x00", b"\x00\x00", lambda: b"\x00\x00", flexible=True, what="t")
    with pytest.raises(OracleFailure, match="not a fixed point"):
        check_reencoding(b"\x00", b"\x00\x00", lambda: b"\x00\x00\x00", flexible=True, what="t")


def test_flexibility_comes_from_the_generated_class():
    lo, hi = ApiVersionsRequest.FLEXIBLE_VERSIONS
    assert is_flexible(ApiVersionsRequest, hi) and not is_flexible(ApiVersionsRequest, lo - 1)
    assert not is_flexible(MetadataRequest, 0)


def test_values_compare_unknown_tagged_fields():
    a, b = ApiVersionsRequest(), ApiVersionsRequest()
    assert message_value(a) == message_value(b)
    b.unknown_tagged_fields = [(7, b"\x01")]
    assert message_value(a) != message_value(b)


def test_values_compare_nan_by_its_bytes():
    assert message_value([float("nan")]) == message_value([float("nan")])
    assert message_value([float("nan")]) != message_value([1.0])
