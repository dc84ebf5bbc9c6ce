"""kproto.group.linear_regex: the same answers as Python's re on the constructs it accepts, in time linear
in the text whatever the pattern."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproto.group.linear_regex import compile_linear

ATOMS = ["a", "b", ".", "[ab]", "[^a]", r"\d", r"\w", "-", "(?:a|b)", "(a|ab)", "(?:x?)"]
REPEATS = ["", "*", "+", "?", "{2}", "{0,2}", "*?", "{1,}"]


@st.composite
def patterns(draw: st.DrawFn, depth: int = 2) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth and draw(st.booleans()):
            inner = draw(patterns(depth - 1))
            atom = f"({inner})" if draw(st.booleans()) else f"(?:{inner}|{draw(patterns(depth - 1))})"
        else:
            atom = draw(st.sampled_from(ATOMS))
        parts.append(atom + draw(st.sampled_from(REPEATS)))
    anchored = draw(st.sampled_from(["{}", "^{}", "{}$", "^{}$"]))
    return anchored.format("".join(parts))


@settings(max_examples=300, deadline=None)
@given(patterns(), st.lists(st.text("ab1-x", max_size=8), min_size=1, max_size=20))
def test_answers_as_python_re(pattern: str, texts: list) -> None:
    compiled = compile_linear(pattern)
    assert compiled is not None, pattern
    reference = re.compile(pattern)
    for text in texts:
        assert compiled.fullmatch(text) == bool(reference.fullmatch(text)), (pattern, text)


@pytest.mark.parametrize(
    "pattern", [r"(a)\1", "(?=a)", "(?!a)b", "(?<=a)b", "a*+", "(?>a)", r"\bx", "(?i)a", "(a)(?(1)b|c)", "[", "a{5000}"]
)
def test_refuses_what_re2_lacks_and_what_is_too_big(pattern: str) -> None:
    assert compile_linear(pattern, max_states=2000) is None


def test_time_is_linear_in_the_text_for_patterns_that_make_re_backtrack() -> None:
    # (a|a)*c against n characters: Python's re takes about 2**n steps (seconds at 26 characters).
    compiled = compile_linear("(a|a)*(a|b)*(.*a){8}c")
    assert compiled is not None
    started = time.monotonic()
    for n in (249, 2490):
        assert not compiled.fullmatch("a" * n)
    assert time.monotonic() - started < 2.0  # milliseconds in practice; a generous bound
