"""Import-direction contract (DESIGN.md §1): bot → adapters, scheduler, markets, memory → agent → config.

Run as `python -m tests.contracts`; CI fails when a module imports against the direction.
Checked statically with `ast` so it needs no extra dependency and imports nothing.
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


def main() -> int:
    problems = violations()
    for p in problems:
        print(p)
    print("import contracts: ok" if not problems else f"import contracts: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
