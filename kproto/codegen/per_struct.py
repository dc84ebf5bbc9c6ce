"""Fold the pure target's per-layout codec functions into one decoder and one encoder per struct.

The generator writes a function for every distinct byte layout of a struct (the compiled target keeps
them: specialised C per layout is what its speed comes from).  For the pure target, :func:`fold` merges
the layouts of each struct into one ``_dec_<Class>(version, buf, cur, end)`` and one
``_enc_<Class>(version, obj, out)``: the statements all layouts share are written once, the others
under a version test; inside a loop that test is a flag computed once at the top of the call
(``v3_up = version >= 3``), so a loop over elements never compares the version number.
Every version still runs exactly the statements of its own layout, in the same order: the same reads,
the same checks, the same errors.  The generator names the functions to leave per layout (the element
encoders of the hot modules); a loop calling those picks the one for the version once, before the loop.

The merge works on statement trees (a compound statement is its clause headers and their bodies):
statements equal in every layout seen so far are shared; statements with the same headers are merged
clause by clause; the rest are kept apart, each under its versions' flag.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Callable, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

__all__ = ["fold"]

_LAYOUT_DEF = re.compile(r"^def (_(?:dec|enc)_\w+?)_v(\d+)\((.*)\):$")
#: A call of another layout function whose arguments hold no parentheses: it gains the version.
_CALL = re.compile(r"\b(_(?:dec|enc)_\w+?)_v\d+\(([^()]*)\)")
#: A layout function passed as a value (to a helper that calls it): bound to the version.
_REF = re.compile(r"\b(_(?:dec|enc)_\w+?)_v\d+\b")
#: The end of a note naming the layout an inlined element decoder was written for.
_LAYOUT_NOTE = re.compile(r", as [\w.]+ v\d+ is\.$")
_CONTINUES = ("elif ", "else:", "except", "finally:")
#: A call of a kept per-layout function on a loop's element: ``_enc_X_v3(item, out)``.
_ELEMENT_CALL = re.compile(r"^(_(?:dec|enc)_\w+_v\d+)\((item, \w+)\)$")


class _Node:
    """One statement: its clauses (header lines, body), and the layouts that run it."""

    __slots__ = ("clauses", "tag")

    def __init__(self, clauses: List[Tuple[List[str], List["_Node"]]], tag: FrozenSet[int]) -> None:
        self.clauses = clauses
        self.tag = tag

    def heads(self) -> Tuple[Tuple[str, ...], ...]:
        return tuple(tuple(head) for head, _ in self.clauses)

    def text(self) -> Optional[str]:
        """The statement's text when every part of it runs in the same layouts (else None)."""
        parts: List[str] = []
        for head, body in self.clauses:
            parts += head
            for child in body:
                if child.tag != self.tag:
                    return None
                inner = child.text()
                if inner is None:
                    return None
                parts += ["    " + line for line in inner.split("\n")]
        return "\n".join(parts)

    def add(self, layout: int) -> None:
        self.tag = self.tag | {layout}
        for _, body in self.clauses:
            for child in body:
                child.add(layout)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _parse(lines: Sequence[str], tag: FrozenSet[int]) -> List[_Node]:
    """The statements of a block whose lines share the indentation of its first line."""
    nodes: List[_Node] = []
    if not lines:
        return nodes
    base = _indent(lines[0])
    i = 0
    while i < len(lines):
        line = lines[i]
        head = [line[base:]]
        i += 1
        if line.rstrip().endswith(":") and not line.lstrip().startswith("#"):
            clauses: List[Tuple[List[str], List[_Node]]] = []
            while True:
                j = i
                while j < len(lines) and _indent(lines[j]) > base:
                    j += 1
                clauses.append((head, _parse(lines[i:j], tag)))
                i = j
                if i < len(lines) and _indent(lines[i]) == base and lines[i].lstrip().startswith(_CONTINUES):
                    head = [lines[i][base:]]
                    i += 1
                    continue
                break
            nodes.append(_Node(clauses, tag))
            continue
        while i < len(lines) and (
            _indent(lines[i]) > base or (_indent(lines[i]) == base and lines[i].lstrip()[:1] in ")]}")
        ):
            head.append(lines[i][base:])
            i += 1
        nodes.append(_Node([(head, [])], tag))
    return nodes


def _merge(old: List[_Node], new: List[_Node], layout: int) -> List[_Node]:
    """``old`` (statements of the layouts merged so far) with ``new`` (one more layout's) merged in."""
    out: List[_Node] = []
    keys_old = [n.text() or f"\0{id(n)}" for n in old]
    keys_new = [n.text() or f"\1{id(n)}" for n in new]
    for op, i1, i2, j1, j2 in SequenceMatcher(None, keys_old, keys_new, autojunk=False).get_opcodes():
        if op == "equal":
            for node in old[i1:i2]:
                node.add(layout)
                out.append(node)
            continue
        a, b = old[i1:i2], new[j1:j2]
        heads = SequenceMatcher(None, [n.heads() for n in a], [n.heads() for n in b], autojunk=False)
        for hop, k1, k2, m1, m2 in heads.get_opcodes():
            if hop == "equal":
                for x, y in zip(a[k1:k2], b[m1:m2]):
                    x.tag = x.tag | {layout}
                    x.clauses = [(h, _merge(xb, yb, layout)) for (h, xb), (_, yb) in zip(x.clauses, y.clauses)]
                    out.append(x)
            else:
                out += a[k1:k2] + b[m1:m2]
    return out


class _Flags:
    """The version flags one function tests, named after their condition, computed once per call."""

    def __init__(self, versions: Dict[int, Tuple[int, ...]]) -> None:
        self.versions = versions  # layout -> the versions it serves
        self.used: Dict[str, str] = {}  # name -> expression

    def of(self, tag: FrozenSet[int], within: FrozenSet[int], hoist: bool) -> str:
        """The test true for the versions of ``tag`` among those of ``within``: a flag computed at the top
        when ``hoist`` (inside a loop), else the comparison itself."""
        universe = sorted(v for layout in within for v in self.versions[layout])
        wanted = {v for layout in tag for v in self.versions[layout]}
        runs: List[List[int]] = []
        for n, v in enumerate(universe):
            if v in wanted:
                if runs and universe.index(runs[-1][-1]) == n - 1:
                    runs[-1].append(v)
                else:
                    runs.append([v])
        if len(runs) == 1:
            lo, hi = runs[0][0], runs[0][-1]
            if hi == universe[-1]:
                name, expr = f"v{lo}_up", f"version >= {lo}"
            elif lo == universe[0]:
                name, expr = f"v{hi}_down", f"version <= {hi}"
            elif lo == hi:
                name, expr = f"v{lo}_only", f"version == {lo}"
            else:
                name, expr = f"v{lo}_to_{hi}", f"{lo} <= version <= {hi}"
        else:
            chosen = sorted(wanted)
            name = "v" + "_".join(map(str, chosen))
            expr = f"version in ({', '.join(map(str, chosen))})"
        if not hoist:
            return expr
        self.used[name] = expr
        return name


def _render(nodes: List[_Node], parent: FrozenSet[int], flags: _Flags, pad: str, in_loop: bool) -> List[str]:
    groups: List[Tuple[FrozenSet[int], List[_Node]]] = []
    for node in nodes:
        if groups and groups[-1][0] == node.tag:
            groups[-1][1].append(node)
        else:
            groups.append((node.tag, [node]))
    out: List[str] = []
    chain: Optional[FrozenSet[int]] = None  # the layouts of the if/elif chain still open
    for tag, members in groups:
        body: List[str] = []
        for node in members:
            for head, children in node.clauses:
                picked = _pick_element_function(head, children, node.tag, flags, pad, in_loop)
                if picked is not None:
                    body += picked
                    continue
                body += [pad + line for line in head]
                loop = in_loop or head[0].startswith(("for ", "while "))
                body += _render(children, node.tag, flags, pad + "    ", loop)
        if tag == parent:
            out += body
            chain = None
            continue
        if all(line.lstrip().startswith("#") for line in body):  # a note on one layout only: not kept
            continue
        if chain is not None and not chain & tag:
            chain = chain | tag
            word = "else:" if chain == parent else f"elif {flags.of(tag, parent, in_loop)}:"
        else:
            chain = tag
            word = f"if {flags.of(tag, parent, in_loop)}:"
        out.append(pad + word)
        out += ["    " + line for line in body]
        if chain == parent:
            chain = None
    return out


def _pick_element_function(
    head: List[str], children: List[_Node], tag: FrozenSet[int], flags: _Flags, pad: str, in_loop: bool
) -> Optional[List[str]]:
    """A loop over elements that calls a kept per-layout function chosen by version, written as that
    choice made once before the loop (``element = _enc_X_v3``) and one call per element; None for any
    other statement."""
    if not head[0].startswith("for item in ") or len(head) != 1:
        return None
    calls = [_ELEMENT_CALL.match(child.text() or "") for child in children]
    if len(calls) < 2 or not all(calls) or len({m.group(2) for m in calls if m}) != 1:
        return None
    choice = [_Node([([f"element = {m.group(1)}"], [])], child.tag) for m, child in zip(calls, children) if m]
    args = calls[0].group(2)  # type: ignore[union-attr]
    return _render(choice, tag, flags, pad, in_loop) + [pad + head[0], f"{pad}    element({args})"]


def _bind_version(line: str, kept: Callable[[str], bool]) -> str:
    """``line`` with its calls of folded layout functions given the version (``kept`` ones unchanged)."""
    line = _LAYOUT_NOTE.sub(".", line)
    line = _CALL.sub(lambda m: m.group(0) if kept(m.group(1)) else f"{m.group(1)}(version, {m.group(2)})", line)
    return _REF.sub(lambda m: m.group(0) if kept(m.group(1)) else f"_partial({m.group(1)}, version)", line)


def fold(lines: List[str], versions: Dict[str, Tuple[int, ...]], kept: Callable[[str], bool]) -> List[str]:
    """``lines`` (the pure target's module-level code) with each struct's layout functions, named
    ``_dec_<Class>_v<N>``/``_enc_<Class>_v<N>`` and serving ``versions[name]``, folded into one, written
    where the first of them was; those whose ``_dec_<Class>``/``_enc_<Class>`` is ``kept`` stay per layout."""
    layouts: Dict[str, List[_Layout]] = {}  # folded name -> its layouts, in order
    out: List[str] = []
    places: Dict[int, str] = {}  # index in out -> the folded function written there
    i = 0
    while i < len(lines):
        match = _LAYOUT_DEF.match(lines[i])
        if not match or kept(match.group(1)):
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > 0):
            j += 1
        body = [line for line in lines[i + 1 : j] if line.strip()]
        name, first = match.group(1), int(match.group(2))
        if name not in layouts:
            places[len(out)] = name
            out.append("")
            layouts[name] = []
        served = versions.get(f"{name}_v{first}", (first,))
        layouts[name].append(_Layout(match.group(3), body[0], [_bind_version(line, kept) for line in body[1:]], served))
        i = j
    text: List[str] = []
    for n, line in enumerate(out):
        if n in places:
            text += _one_function(places[n], layouts[places[n]]) + ["", ""]
        else:
            text.append(line)
    return text


class _Layout(NamedTuple):
    """One layout function of a struct, as the generator wrote it."""

    params: str
    doc: str
    body: List[str]  # its calls of other layout functions already given the version
    versions: Tuple[int, ...]


def _one_function(name: str, layouts: List[_Layout]) -> List[str]:
    doc = re.sub(r"\(v\d+ layout\)", "(the layout of ``version``)", layouts[0].doc)
    doc = re.sub(r"the v\d+ layout of an? ", "in ``version`` a ", doc)
    merged = _parse(layouts[0].body, frozenset({0}))
    for n, layout in enumerate(layouts[1:], 1):
        merged = _merge(merged, _parse(layout.body, frozenset({n})), n)
    flags = _Flags({n: layout.versions for n, layout in enumerate(layouts)})
    body = _render(merged, frozenset(range(len(layouts))), flags, "    ", False)
    head = [f"def {name}(version, {layouts[0].params}):", doc]
    order = sorted(flags.used.items(), key=lambda item: [int(x) for x in re.findall(r"\d+", item[0])])
    return head + [f"    {flag} = {expr}" for flag, expr in order] + body
