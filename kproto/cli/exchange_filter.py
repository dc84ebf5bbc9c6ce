"""The ``--filter`` language of ``kproto pcap``: a small boolean language over exchange facts, no eval.

Grammar (keywords are case-insensitive)::

    expr  := term ("or" term)*
    term  := factor ("and" factor)*
    factor:= "not" factor | "(" expr ")" | test
    test  := FIELD [OP VALUE]
    OP    := "=" | "==" | "!=" | "<" | "<=" | ">" | ">=" | "~"
    VALUE := a bare word (no spaces, parentheses, quotes or operator characters) | "text" | 'text'

A test with no operator is true when the field is set: ``error`` (a non-zero error code), ``failed``
(a frame that did not decode), ``unanswered``, ``topic``.  ``~`` matches a glob pattern (``*``, ``?``,
``[...]``).  Fields holding several values (``topic``, ``partition``, ``group``, ``error``, ``port``) match
when any value does, and ``!=`` when none does.  ``api`` takes a name (any case, old names too) or a
number; ``error`` a code or its name.  Numbers compare as numbers.  Field list: see
:data:`kproto.cli.filter_fields.FIELD_NAMES`; examples::

    api=Produce and topic=orders
    error or failed
    api=JoinGroup or api=SyncGroup or (api=Heartbeat and error=REBALANCE_IN_PROGRESS)
    not client_id~"console-*" and latency_ms>100
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import kproto
from kproto.cli.filter_fields import FIELD_NAMES, FilterFields

__all__ = ["FilterSyntaxError", "ExchangeFilter", "compile_filter", "MAX_FILTER_DEPTH"]

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<paren>[()])
  | (?P<op>==|!=|<=|>=|=|<|>|~)
  | "(?P<dq>[^"]*)"
  | '(?P<sq>[^']*)'
  | (?P<word>[^\s()=!<>~"']+)
)""",
    re.VERBOSE,
)
_OPS = ("=", "==", "!=", "<", "<=", ">", ">=", "~")
_MULTI = frozenset({"topic", "partition", "group", "error", "port"})

Predicate = Callable[[FilterFields], bool]

#: Deepest nesting of parentheses and ``not`` a filter may use.  The parser (and the predicate it
#: builds) recurse once per level; a limit far below Python's recursion limit turns a hostile
#: expression into a usage error instead of a RecursionError.
MAX_FILTER_DEPTH = 64


class FilterSyntaxError(ValueError):
    """An expression that does not parse, or names an unknown field or value."""


@dataclass
class _Token:
    kind: str  # "paren", "op", "word", "text"
    text: str


def _tokens(expression: str) -> List[_Token]:
    out: List[_Token] = []
    pos = 0
    text = expression.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise FilterSyntaxError(f"cannot read the filter at {text[pos:]!r}")
        pos = match.end()
        if match.group("paren"):
            out.append(_Token("paren", match.group("paren")))
        elif match.group("op"):
            out.append(_Token("op", match.group("op")))
        elif match.group("dq") is not None or match.group("sq") is not None:
            out.append(_Token("text", match.group("dq") if match.group("dq") is not None else match.group("sq")))
        else:
            out.append(_Token("word", match.group("word")))
    return out


class _Parser:
    def __init__(self, tokens: List[_Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise FilterSyntaxError(f"the filter nests parentheses and 'not' more than {MAX_FILTER_DEPTH} deep")

    def peek(self) -> Optional[_Token]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise FilterSyntaxError("the filter ends too early")
        self.pos += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.lower() == word:
            self.pos += 1
            return True
        return False

    def expr(self) -> Predicate:
        terms = [self.term()]
        while self.keyword("or"):
            terms.append(self.term())
        return terms[0] if len(terms) == 1 else (lambda facts: any(t(facts) for t in terms))

    def term(self) -> Predicate:
        factors = [self.factor()]
        while self.keyword("and"):
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else (lambda facts: all(f(facts) for f in factors))

    def factor(self) -> Predicate:
        if self.keyword("not"):
            self.deeper()
            inner = self.factor()
            self.depth -= 1
            return lambda facts: not inner(facts)
        token = self.take()
        if token.kind == "paren" and token.text == "(":
            self.deeper()
            inner = self.expr()
            self.depth -= 1
            closing = self.take()
            if closing.kind != "paren" or closing.text != ")":
                raise FilterSyntaxError(f"expected ')' but found {closing.text!r}")
            return inner
        if token.kind != "word":
            raise FilterSyntaxError(f"expected a field name, found {token.text!r}")
        return self.test(token.text.lower())

    def test(self, name: str) -> Predicate:
        if name not in FIELD_NAMES:
            raise FilterSyntaxError(f"unknown field {name!r}; fields: {', '.join(FIELD_NAMES)}")
        token = self.peek()
        if token is None or token.kind != "op":
            return lambda facts: _is_set(facts.field(name))
        op = self.take().text
        value_token = self.take()
        if value_token.kind not in ("word", "text"):
            raise FilterSyntaxError(f"expected a value after {name}{op}, found {value_token.text!r}")
        return _comparison(name, op, _normalise(name, value_token.text))


def _is_set(value: Any) -> bool:
    return bool(value) if not isinstance(value, int) or isinstance(value, bool) else True


def _normalise(name: str, text: str) -> Any:
    """The value a test compares with: api names to their canonical name, error names to codes."""
    if name == "api":
        info = kproto.APIS.get(int(text)) if text.lstrip("-").isdigit() else kproto.APIS.get(text)
        if info is None:
            raise FilterSyntaxError(f"unknown api {text!r}")
        return info.name
    if name == "error" and not text.lstrip("-").isdigit():
        try:
            return int(kproto.ErrorCode[text.upper()])
        except KeyError:
            raise FilterSyntaxError(f"unknown error code name {text!r}") from None
    return text


def _comparison(name: str, op: str, expected: Any) -> Predicate:
    match_one = _matcher(op, expected)
    if name in _MULTI:
        if op == "!=":
            positive = _matcher("=", expected)
            return lambda facts: not any(positive(v) for v in facts.field(name))
        return lambda facts: any(match_one(v) for v in facts.field(name))
    return lambda facts: match_one(facts.field(name))


def _matcher(op: str, expected: Any) -> Callable[[Any], bool]:
    def number(value: Any) -> Tuple[bool, float, float]:
        try:
            return True, float(value), float(expected)
        except (TypeError, ValueError):
            return False, 0.0, 0.0

    def matches(value: Any) -> bool:
        if value is None:
            return op == "!="
        if op == "~":
            return fnmatch.fnmatchcase(str(value), str(expected))
        numeric, a, b = number(value)
        if op in ("=", "=="):
            return a == b if numeric else str(value) == str(expected)
        if op == "!=":
            return a != b if numeric else str(value) != str(expected)
        if not numeric:
            return False  # an ordering test on text matches nothing
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]

    return matches


class ExchangeFilter:
    """A compiled filter: call it with :class:`FilterFields`."""

    def __init__(self, expression: str) -> None:
        parser = _Parser(_tokens(expression))
        if not parser.tokens:
            raise FilterSyntaxError("empty filter")
        self.expression = expression
        self._predicate = parser.expr()
        if parser.peek() is not None:
            raise FilterSyntaxError(f"unexpected {parser.peek().text!r} in the filter")  # type: ignore[union-attr]

    def __call__(self, facts: FilterFields) -> bool:
        return self._predicate(facts)


def compile_filter(expression: str) -> ExchangeFilter:
    """Parse ``expression``; raises :class:`FilterSyntaxError`."""
    return ExchangeFilter(expression)
