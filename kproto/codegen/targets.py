"""The two targets of the codec generator, and which modules get the compiled one.

:class:`kproto.codegen.python_codecs.ModuleGenerator` writes a codec once, with ``cython.compiled`` tests
where the two targets read or write differently.  :func:`resolve` folds those tests for one target, so
that neither target carries the other's branches:

* the **pure** target (``kproto/_generated/<module>.py``, committed): plain Python, ``struct`` unpacking
  and the helpers of :mod:`kproto.wire`;
* the **compiled** target (``kproto/_compiled/<module>.py`` and ``.pxd``, written by ``setup.py`` at
  build time and never committed): the C reads and writes of ``kproto/_generated/_c_wire.pxd``, compiled
  by Cython with the typed declarations of the ``.pxd`` beside it.  Only :data:`COMPILED_MODULES` get it;
  the other APIs run on the pure target in every build.

:func:`drop_unused` then removes what the folded text no longer names: imports, precompiled formats,
and codec functions (the pure target reads array elements inline, so most nested decoders are called
from nowhere there).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["COMPILED_MODULES", "resolve", "drop_unused"]

#: Generated modules on a client's or a proxy's hot path: the ones compiled (Produce, Fetch, Metadata,
#: ListOffsets, the group and offset APIs, ApiVersions, InitProducerId, the frame headers and the
#: consumer protocol).  ``setup.py`` builds these, and the registry loads them when they are built.
COMPILED_MODULES = (
    "api_versions",
    "consumer_protocol",
    "fetch",
    "find_coordinator",
    "headers",
    "heartbeat",
    "init_producer_id",
    "join_group",
    "leave_group",
    "list_offsets",
    "metadata",
    "offset_commit",
    "offset_fetch",
    "produce",
    "sync_group",
)

_FLAG = "cython.compiled"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _fold(condition: str, compiled: bool) -> Optional[str]:
    """``condition`` with the target known: "True", "False", or what remains to test at run time."""
    if _FLAG not in condition:
        return condition
    if condition == _FLAG:
        return str(compiled)
    if condition == "not " + _FLAG:
        return str(not compiled)
    if condition.startswith(_FLAG + " or "):
        return "True" if compiled else condition[len(_FLAG) + 4 :]
    raise ValueError(f"cannot fold the test {condition!r}")


def _block_end(lines: Sequence[str], start: int, indent: int) -> int:
    """The index after the block whose first line is ``lines[start]`` (lines indented deeper than
    ``indent``; blank lines belong to it when more of it follows)."""
    end = start
    i = start
    while i < len(lines):
        if lines[i].strip():
            if _indent(lines[i]) <= indent:
                break
            end = i + 1
        i += 1
    return end


def _dedent(lines: Sequence[str]) -> List[str]:
    return [line[4:] if line.strip() else line for line in lines]


def resolve(lines: Sequence[str], compiled: bool) -> List[str]:
    """``lines`` of Python with every ``if``/``elif`` on ``cython.compiled`` folded for one target."""
    out: List[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        text = line.strip()
        if not (text.startswith("if ") and text.endswith(":")):
            out.append(line)
            i += 1
            continue
        indent = _indent(line)
        arms: List[Tuple[Optional[str], List[str]]] = []  # (condition, body); None: else
        condition: Optional[str] = text[3:-1]
        while True:
            end = _block_end(lines, i + 1, indent)
            arms.append((condition, resolve(lines[i + 1 : end], compiled)))
            i = end
            nxt = lines[i] if i < len(lines) else ""
            if nxt.strip() and _indent(nxt) == indent and nxt.strip().startswith("elif ") and nxt.endswith(":"):
                condition = nxt.strip()[5:-1]
            elif nxt.strip() == "else:" and _indent(nxt) == indent:
                condition = None
            else:
                break
        out += _chain(arms, indent, compiled)
    return out


def _chain(arms: List[Tuple[Optional[str], List[str]]], indent: int, compiled: bool) -> List[str]:
    pad = " " * indent
    kept: List[Tuple[Optional[str], List[str]]] = []
    for condition, body in arms:
        folded = "True" if condition is None else _fold(condition, compiled)
        if folded == "False":
            continue
        if folded == "True":
            kept.append((None, body))
            break
        kept.append((folded, body))
    if not kept:
        return []
    if kept[0][0] is None:  # the first arm left always runs: its body, without the test
        return _dedent(kept[0][1])
    out: List[str] = []
    for n, (condition, body) in enumerate(kept):
        head = "else:" if condition is None else ("if " if n == 0 else "elif ") + condition + ":"
        out.append(pad + head)
        out += body
    return out


_DEF = re.compile(r"^def (\w+)\(")
_ASSIGN = re.compile(r"^(_[A-Za-z]\w*) = ")
_WORD = re.compile(r"\b\w+\b")


def _words(lines: Sequence[str]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for line in lines:
        for word in _WORD.findall(line.split("#", 1)[0] if not line.lstrip().startswith(("'", '"')) else line):
            counts[word] = counts.get(word, 0) + 1
    return counts


def drop_unused(head: List[str], body: List[str], keep: Sequence[str]) -> Tuple[List[str], List[str]]:
    """Remove the module-level functions of ``body`` that nothing calls (but ``keep``), then the
    single-line private constants and the imported names of ``head`` that nothing names any more."""
    functions: Dict[str, Tuple[int, int]] = {}
    for i, line in enumerate(body):
        match = _DEF.match(line)
        if match:
            functions[match.group(1)] = (i, _block_end(body, i + 1, 0))
    dropped: set = set()
    while True:
        alive = [line for n, line in enumerate(body) if not any(a <= n < b for a, b in (functions[f] for f in dropped))]
        counts = _words(alive)
        dead = {name for name in functions if name not in dropped and name not in keep and counts.get(name, 0) <= 1}
        if not dead:
            break
        dropped |= dead
    body = _strip_blank_runs(alive)
    counts = _words(body)
    new_head: List[str] = []
    for line in head:
        match = _ASSIGN.match(line)
        if match and counts.get(match.group(1), 0) == 0:
            continue
        new_head.append(line)
    counts = _words(new_head + body)
    return _drop_imports(new_head, counts), body


def _strip_blank_runs(lines: List[str]) -> List[str]:
    out: List[str] = []
    blanks = 0
    for line in lines:
        blanks = blanks + 1 if not line.strip() else 0
        if blanks <= 2:
            out.append(line)
    return out


def _drop_imports(head: List[str], counts: Dict[str, int]) -> List[str]:
    """Leave out each imported name the module does not use (counted once: its import)."""
    out: List[str] = []
    i = 0
    while i < len(head):
        line = head[i]
        if line.startswith("from ") and line.rstrip().endswith("("):
            j = i + 1
            while head[j].strip() != ")":
                j += 1
            names = [n.strip() for n in " ".join(head[i + 1 : j]).split(",") if n.strip()]
            used = [n for n in names if counts.get(n, 0) > 1]
            if used:
                out += _import_lines(line[: -len("(")].rstrip(), used)
            i = j + 1
            continue
        if line.startswith("from ") and " import " in line and "__future__" not in line:
            module, names_text = line.split(" import ", 1)
            names = [n.strip() for n in names_text.split(",")]
            used = [n for n in names if counts.get(n.split(" as ")[-1], 0) > 1]
            if used:
                out.append(f"{module} import {', '.join(used)}")
            i += 1
            continue
        if line.startswith("import ") and " as " in line:
            alias = line.split(" as ")[-1].strip()
            if counts.get(alias, 0) > 1:
                out.append(line)
            i += 1
            continue
        out.append(line)
        i += 1
    return out


def _import_lines(prefix: str, names: List[str]) -> List[str]:
    one = f"{prefix} {', '.join(names)}"
    if len(one) <= 110:
        return [one]
    return [prefix + " (", "    " + ", ".join(names) + ",", ")"]
