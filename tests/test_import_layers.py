"""kproto's imports, read from the source (ast): no import circle, and no layer importing one above it.

The layer order is the table under "Import layers" in docs/architecture.md; this test reads it from
there, so the document and the rule cannot drift apart.  Every import counts -- at module level, inside
functions, and under ``if TYPE_CHECKING:`` -- because each is a dependency a reader must follow, and a
circle that only type checkers see still ties two modules into one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kproto"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _modules() -> Dict[str, Tuple[Path, bool]]:
    """Dotted name → (source file, whether it is a package), for every .py and .pyi file of kproto."""
    found: Dict[str, Tuple[Path, bool]] = {}
    for path in sorted(PACKAGE.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found.setdefault(".".join(parts), (path, is_package))
    return found


def _owner(name: str, modules: Dict[str, Tuple[Path, bool]]) -> str:
    """The module ``name`` is, or is an attribute of."""
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> Dict[str, Set[str]]:
    """Module → the kproto modules it imports (a ``from package import name`` that names a submodule
    imports that submodule)."""
    modules = _modules()
    graph: Dict[str, Set[str]] = {}
    for name, (path, is_package) in modules.items():
        targets: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(
                    _owner(alias.name, modules) for alias in node.names if alias.name.split(".")[0] == "kproto"
                )
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "kproto":
                    continue
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.add(submodule if submodule in modules else _owner(source, modules))
        targets.discard(name)
        graph[name] = targets
    return graph


def import_circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected sets of more than one module (Tarjan), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    circles: List[List[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == module:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def documented_layers() -> List[Tuple[int, str, List[str]]]:
    """(rank, layer, module prefixes) rows of the "Import layers" table in docs/architecture.md."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Import layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows.append((int(cells[0]), cells[1], re.findall(r"`([\w.]+)`", cells[2])))
    return rows


def layer_of(module: str, layers: List[Tuple[int, str, List[str]]]) -> Tuple[int, str]:
    """The rank and name of the most specific documented prefix that covers ``module``."""
    best = None
    for rank, layer, prefixes in layers:
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank, layer)
    assert best is not None, f"{module} is in no layer of docs/architecture.md's 'Import layers' table"
    return best[1], best[2]


def test_the_layer_table_is_read() -> None:
    layers = documented_layers()
    assert [rank for rank, _, _ in layers] == sorted(rank for rank, _, _ in layers)
    assert layer_of("kproto.broker.core", layers)[0] > layer_of("kproto.connection.server", layers)[0]
    assert layer_of("kproto.capture.packets", layers)[0] > layer_of("kproto.pcap.numbers", layers)[0]


def test_no_import_circle() -> None:
    assert import_circles(import_graph()) == []


def test_the_circle_finder_finds_circles() -> None:
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_layer_imports_a_higher_one() -> None:
    layers = documented_layers()
    upward = []
    for module, targets in sorted(import_graph().items()):
        rank, layer = layer_of(module, layers)
        for target in sorted(targets):
            target_rank, target_layer = layer_of(target, layers)
            if target_rank > rank:
                upward.append(f"{module} ({layer}) imports {target} ({target_layer})")
    assert upward == []
