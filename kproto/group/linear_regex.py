"""Regular expressions matched in linear time, for KIP-848 topic subscriptions.

Kafka matches a member's ``subscribed_topic_regex`` with RE2/J, whose time is linear in the text: no
pattern can make it backtrack.  Python's :mod:`re` backtracks, so ``(a|a)*c`` against 30 ``a``\\ s takes
seconds and against a 249-character topic name longer than anyone would wait.  This module reads the
pattern with Python's own parser, keeps to the constructs RE2 accepts (no back-references, look-arounds,
atomic groups, possessive repeats, conditionals, word boundaries or inline flags) and matches it as a
Thompson automaton whose state sets are turned into DFA states lazily and cached, as RE2 does: each
character of the text costs one dictionary lookup once its transition is known, and at most one pass over
the automaton's states when it is not.

:func:`compile_linear` gives None for a pattern it refuses; ``max_states`` bounds the automaton (a counted
repeat such as ``a{1000}`` costs a state per copy), so the memory of one pattern and the time per
character are both bounded.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

__all__ = ["LinearPattern", "compile_linear"]

#: DFA transitions cached per pattern before the cache is emptied and refilled (RE2 does the same).
MAX_CACHED_TRANSITIONS = 4096

_CHAR, _SPLIT, _AT_START, _AT_END, _MATCH = range(5)

_CATEGORIES: Dict[str, Callable[[str], bool]] = {
    "CATEGORY_DIGIT": lambda c: "0" <= c <= "9",
    "CATEGORY_NOT_DIGIT": lambda c: not "0" <= c <= "9",
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
    "CATEGORY_SPACE": lambda c: c in " \t\n\r\f\v",
    "CATEGORY_NOT_SPACE": lambda c: c not in " \t\n\r\f\v",
}
_STARTS = {"AT_BEGINNING", "AT_BEGINNING_STRING"}
_ENDS = {"AT_END", "AT_END_STRING"}


class _Refused(Exception):
    pass


class _Builder:
    """Builds the automaton right to left: each construct is compiled with the state that follows it."""

    def __init__(self, max_states: int) -> None:
        self.kinds: List[int] = []
        self.preds: List[Optional[Callable[[str], bool]]] = []
        self.nexts: List[List[int]] = []
        self.max_states = max_states

    def state(self, kind: int, nexts: List[int], pred: Optional[Callable[[str], bool]] = None) -> int:
        if len(self.kinds) >= self.max_states:
            raise _Refused("too many states")
        self.kinds.append(kind)
        self.preds.append(pred)
        self.nexts.append(nexts)
        return len(self.kinds) - 1

    def sequence(self, items: Any, follow: int) -> int:
        for op, arg in reversed(list(items)):
            follow = self.item(str(op), arg, follow)
        return follow

    def item(self, op: str, arg: Any, follow: int) -> int:
        if op in ("LITERAL", "NOT_LITERAL", "ANY", "IN"):
            return self.state(_CHAR, [follow], _predicate(op, arg))
        if op == "SUBPATTERN":
            if arg[1] or arg[2]:  # inline flags: (?i), (?s), ...
                raise _Refused("inline flags")
            return self.sequence(arg[3], follow)
        if op == "BRANCH":
            return self.state(_SPLIT, [self.sequence(branch, follow) for branch in arg[1]])
        if op in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, body = arg
            if str(high) == "MAXREPEAT":
                loop = self.state(_SPLIT, [])
                self.nexts[loop] = [self.sequence(body, loop), follow]
                follow = loop
            else:
                for _ in range(high - low):
                    follow = self.state(_SPLIT, [self.sequence(body, follow), follow])
            for _ in range(low):
                follow = self.sequence(body, follow)
            return follow
        if op == "AT" and str(arg) in _STARTS:
            return self.state(_AT_START, [follow])
        if op == "AT" and str(arg) in _ENDS:
            return self.state(_AT_END, [follow])
        raise _Refused(op)


def _predicate(op: str, arg: Any) -> Callable[[str], bool]:
    if op == "LITERAL":
        ch = chr(arg)
        return lambda c: c == ch
    if op == "NOT_LITERAL":
        ch = chr(arg)
        return lambda c: c != ch
    if op == "ANY":
        return lambda c: c != "\n"
    tests: List[Callable[[str], bool]] = []
    negate = False
    for sub_op, sub_arg in arg:
        name = str(sub_op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            tests.append(_predicate("LITERAL", sub_arg))
        elif name == "RANGE":
            tests.append(_in_range(chr(sub_arg[0]), chr(sub_arg[1])))
        elif name == "CATEGORY" and str(sub_arg) in _CATEGORIES:
            tests.append(_CATEGORIES[str(sub_arg)])
        else:
            raise _Refused(name)
    if negate:
        return lambda c: not any(t(c) for t in tests)
    return lambda c: any(t(c) for t in tests)


def _in_range(low: str, high: str) -> Callable[[str], bool]:
    return lambda c: low <= c <= high


class LinearPattern:
    """A compiled pattern; :meth:`fullmatch` says whether it matches a whole text."""

    def __init__(self, pattern: str, builder: _Builder, start: int) -> None:
        self.pattern = pattern
        self._kinds = builder.kinds
        self._preds = builder.preds
        self._nexts = builder.nexts
        self._start = start
        self._transitions: Dict[Tuple[FrozenSet[int], str], FrozenSet[int]] = {}

    def _closure(self, states: Any, at_start: bool, at_end: bool) -> FrozenSet[int]:
        """The states reachable without reading a character; anchors pass only where they hold, and an end
        anchor not yet passable stays in the set to be tried at the end of the text."""
        seen = set()
        stack = list(states)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind = self._kinds[s]
            if kind == _SPLIT or (kind == _AT_START and at_start) or (kind == _AT_END and at_end):
                stack.extend(self._nexts[s])
        return frozenset(s for s in seen if self._kinds[s] in (_CHAR, _MATCH, _AT_END))

    def fullmatch(self, text: str) -> bool:
        current = self._closure([self._start], True, False)
        cache = self._transitions
        for ch in text:
            key = (current, ch)
            following = cache.get(key)
            if following is None:
                moved = [self._nexts[s][0] for s in current if self._kinds[s] == _CHAR and self._preds[s](ch)]  # type: ignore[misc]
                following = self._closure(moved, False, False)
                if len(cache) >= MAX_CACHED_TRANSITIONS:
                    cache.clear()
                cache[key] = following
            current = following
            if not current:
                return False
        final = self._closure(current, not text, True)
        return any(self._kinds[s] == _MATCH for s in final)


def compile_linear(pattern: str, max_states: int = 10_000) -> Optional[LinearPattern]:
    """``pattern`` as a :class:`LinearPattern`, or None when it is not valid Python syntax, uses a
    construct RE2 does not have (or this matcher does not follow), or needs more than ``max_states``."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        tree = _parser.parse(pattern)
        if tree.state.flags & ~0x20:  # anything but the implied UNICODE flag
            return None
        builder = _Builder(max_states)
        match = builder.state(_MATCH, [])
        start = builder.sequence(tree, match)
    except (re.error, _Refused, RecursionError, OverflowError):
        return None
    return LinearPattern(pattern, builder, start)
