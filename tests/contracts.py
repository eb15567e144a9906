"""Import-direction contract: bot → adapters, scheduler, markets, memory → agent → config.

Run as `python -m tests.contracts` (and under pytest by tests/test_contracts.py); CI fails when a
module imports against the direction. Checked statically with `ast` so it needs no extra dependency
and imports nothing.

`import_cycles()` finds cycles between the project's modules. An edge is any import a module makes at
run time, at module level or inside a function (a lazy import hides a cycle, it does not remove it);
imports under `if TYPE_CHECKING:` are edges only of the type-level graph (`typing=True`).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# package -> packages it must never import
FORBIDDEN: dict[str, set[str]] = {
    "config": {"agent", "memory", "markets", "scheduler", "adapters", "bot"},
    "agent": {"memory", "markets", "scheduler", "adapters", "bot"},
    "memory": {"markets", "scheduler", "adapters", "bot"},
    "markets": {"scheduler", "adapters", "bot"},
    "scheduler": {"markets", "adapters", "bot"},
    "adapters": {"markets", "scheduler", "bot", "memory"},
}


def violations() -> list[str]:
    found = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top in banned:
                        found.append(
                            f"{path.relative_to(ROOT)}:{node.lineno}: {package} must not import {name}"
                        )
    return found


PACKAGES = ("agent", "bot", "adapters", "memory", "scheduler", "config", "markets", "tapebot")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    def __init__(self, typing: bool) -> None:
        self.typing = typing
        self.found: list[ast.Import | ast.ImportFrom] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node) and not self.typing:
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append(node)


def import_graph(typing: bool = False) -> dict[str, set[str]]:
    """module -> project modules it imports. `from pkg import sub` is an edge to `pkg.sub` when
    that is a module (not to `pkg`: a package's `__init__` importing its own submodules is no cycle)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        visitor = _Imports(typing)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        deps: set[str] = set()
        for node in visitor.found:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules]
                targets = subs if len(subs) == len(node.names) else [source, *subs]
            deps.update(t for t in targets if t in modules and t != name)
        graph[name] = deps
    return graph


def import_cycles(typing: bool = False) -> list[tuple[str, ...]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted, the list sorted."""
    graph = import_graph(typing)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[tuple[str, ...]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(tuple(sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def main() -> int:
    problems = violations()
    for p in problems:
        print(p)
    print("import contracts: ok" if not problems else f"import contracts: {len(problems)} violation(s)")
    for label, typing in (("run-time", False), ("type-level", True)):
        for group in import_cycles(typing):
            print(f"{label} import cycle: {' <-> '.join(group)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
