"""Fold the pure target's per-layout codec functions into one decoder and one encoder per struct.

The generator writes a function for every distinct byte layout of a struct (the compiled target keeps
them: specialised C per layout is what its speed comes from).  For the pure target, :func:`fold` merges
the layouts of each struct into one ``_dec_<Class>(buf, cur, end, version)`` and one
``_enc_<Class>(obj, out, version)``: the statements all layouts share are written once, the others
under a test of a flag computed once at the top of the call (``v3_up = version >= 3``), so a loop over
elements tests a local boolean, never the version number.  Every version still runs exactly the
statements of its own layout, in the same order: the same reads, the same checks, the same errors.

The merge works on statement trees (a compound statement is its clause headers and their bodies):
statements equal in every layout seen so far are shared; statements with the same headers are merged
clause by clause; the rest are kept apart, each under its versions' flag.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

__all__ = ["fold"]

_LAYOUT_DEF = re.compile(r"^def (_(?:dec|enc)_\w+?)_v(\d+)\((.*)\):$")
#: A call of another layout function whose arguments hold no parentheses: it gains the version.
_CALL = re.compile(r"\b(_(?:dec|enc)_\w+?)_v\d+\(([^()]*)\)")
#: A layout function passed as a value (to ``_w.read_structs``/``_w.put_structs``): bound to the version.
_REF = re.compile(r"\b(_(?:dec|enc)_\w+?)_v\d+\b")
#: The end of a note naming the layout an inlined element decoder was written for.
_LAYOUT_NOTE = re.compile(r", as [\w.]+ v\d+ is\.$")
_CONTINUES = ("elif ", "else:", "except", "finally:")


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

    def of(self, tag: FrozenSet[int], within: FrozenSet[int]) -> str:
        """The flag true for the versions of ``tag`` among those of ``within``."""
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
        self.used[name] = expr
        return name


def _render(nodes: List[_Node], parent: FrozenSet[int], flags: _Flags, pad: str) -> List[str]:
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
                body += [pad + line for line in head]
                body += _render(children, node.tag, flags, pad + "    ")
        if tag == parent:
            out += body
            chain = None
            continue
        if all(line.lstrip().startswith("#") for line in body):  # a note on one layout only: not kept
            continue
        if chain is not None and not chain & tag:
            chain = chain | tag
            word = "else:" if chain == parent else f"elif {flags.of(tag, parent)}:"
        else:
            chain = tag
            word = f"if {flags.of(tag, parent)}:"
        out.append(pad + word)
        out += ["    " + line for line in body]
        if chain == parent:
            chain = None
    return out


def _bind_version(line: str) -> str:
    line = _LAYOUT_NOTE.sub(".", line)
    line = _CALL.sub(lambda m: f"{m.group(1)}({m.group(2)}, version)", line)
    return _REF.sub(lambda m: f"_partial({m.group(1)}, version=version)", line)


def fold(lines: List[str], versions: Dict[str, Tuple[int, ...]]) -> List[str]:
    """``lines`` (the pure target's module-level code) with each struct's layout functions, named
    ``_dec_<Class>_v<N>``/``_enc_<Class>_v<N>`` and serving ``versions[name]``, folded into one."""
    functions: Dict[str, List[Tuple[str, str, List[str]]]] = {}  # merged name -> [(layout name, doc, body)]
    out: List[Optional[str]] = []
    places: Dict[str, int] = {}
    i = 0
    while i < len(lines):
        match = _LAYOUT_DEF.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > 0):
            j += 1
        body = [line for line in lines[i + 1 : j] if line.strip()]
        name = match.group(1)
        layout = f"{name}_v{match.group(2)}"
        if name not in places:
            places[name] = len(out)
            out.append(None)
            functions[name] = []
        functions[name].append((match.group(3), body[0], [_bind_version(line) for line in body[1:]]))
        versions.setdefault(layout, (int(match.group(2)),))
        functions[name][-1] = functions[name][-1] + (layout,)  # type: ignore[assignment]
        i = j
    text: List[str] = []
    for n, line in enumerate(out):
        if line is not None:
            text.append(line)
            continue
        name = next(k for k, v in places.items() if v == n)
        text += _one_function(name, functions[name], versions)  # type: ignore[arg-type]
        text += ["", ""]
    return text


def _one_function(
    name: str, layouts: List[Tuple[str, str, List[str], str]], versions: Dict[str, Tuple[int, ...]]
) -> List[str]:
    params, doc = layouts[0][0], layouts[0][1]
    doc = re.sub(r"\(v\d+ layout\)", "(the layout of ``version``)", doc)
    doc = re.sub(r"the v\d+ layout of an? ", "in ``version`` a ", doc)
    merged: List[_Node] = []
    for n, (_, _, body, _) in enumerate(layouts):
        merged = _merge(merged, _parse(body, frozenset({n})), n) if merged else _parse(body, frozenset({n}))
    everything = frozenset(range(len(layouts)))
    flags = _Flags({n: versions[layout[3]] for n, layout in enumerate(layouts)})
    body = _render(merged, everything, flags, "    ")
    head = [f"def {name}({params}, version):", doc]
    head += [f"    {flag} = {expr}" for flag, expr in sorted(flags.used.items())]
    return head + body
