"""Declared dependencies match what the code imports, and the floors are ones the code runs with.

`.ci/run` installs the lowest allowed versions (`uv pip compile --resolution lowest-direct`) and
runs the CLI tests there; these tests keep pyproject.toml honest in any environment."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "bot", "adapters", "memory", "scheduler", "config", "markets", "tapebot")
# import name -> distribution name, where they differ
DIST_OF = {
    "sqlalchemy": "sqlalchemy",
    "apscheduler": "apscheduler",
    "telegram": "python-telegram-bot",
    "discord": "discord.py",
    "pydantic_settings": "pydantic-settings",
    "mcp_types": "mcp-types",
    "tomli_w": "tomli-w",
    "dotenv": "python-dotenv",
    "markdown_it": "markdown-it-py",
    "importlinter": "import-linter",
}
# imported only behind an optional extra (the import is inside the function that needs it)
OPTIONAL = {"ccxt": "ccxt", "pypinyin": "data-build", "akshare": "akshare", "yfinance": "yfinance"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(req: str) -> str:
    return re.split(r"[\[<>=~!; ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _floor(req: str) -> tuple[int, ...] | None:
    m = re.search(r"(?:>=|~=)\s*([0-9][0-9.]*)", req)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _imports() -> set[str]:
    found: set[str] = set()
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return {n for n in found if n not in sys.stdlib_module_names and n not in PACKAGES}


def test_every_imported_package_is_declared():
    project = _project()
    runtime = {_name(r) for r in project["dependencies"]}
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    missing = []
    for module in sorted(_imports()):
        dist = DIST_OF.get(module, module).lower().replace("_", "-")
        if module in OPTIONAL:
            extra = OPTIONAL[module]
            assert dist in extras.get(extra, set()) or module in extras.get(extra, set()), module
            continue
        if dist not in runtime:
            missing.append(f"{module} (distribution {dist})")
    assert not missing, f"imported but not in [project] dependencies: {missing}"


# imported by tests, installed by a declared package (mcp brings uvicorn and anyio; aiohttp multidict;
# import-linter grimp)
TEST_TRANSITIVE = {"anyio", "uvicorn", "multidict", "grimp"}
TEST_LOCAL = {"markets_helpers", "memory_helpers", "providers_helpers"}


def test_every_package_the_tests_import_is_declared():
    """A fresh clone installs `.[dev]` and nothing else: a test importing an undeclared package
    fails to collect in CI (tests/markets/data/ holds recording scripts, not tests)."""
    project = _project()
    declared = {_name(r) for r in project["dependencies"]}
    declared |= {_name(r) for r in project["optional-dependencies"]["dev"]}
    missing = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if "data" in path.relative_to(ROOT / "tests").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in PACKAGES or top in ("tests", "bench"):
                    continue
                if top in TEST_TRANSITIVE | TEST_LOCAL:
                    continue
                dist = DIST_OF.get(top, top).lower().replace("_", "-")
                if dist not in declared:
                    missing.add(f"{top} ({path.relative_to(ROOT)})")
    assert not missing, f"imported by tests but not in [project] dependencies or [dev]: {sorted(missing)}"


def test_no_tornado():
    """python-telegram-bot's `webhooks` extra installs tornado; our webhook server is aiohttp."""
    deps = " ".join(_project()["dependencies"])
    assert "webhooks" not in deps
    assert "tornado" not in deps


@pytest.mark.parametrize(
    ("dist", "floor"),
    [("pydantic-settings", (2, 9)), ("sqlalchemy", (2, 0, 54)), ("apscheduler", (3, 11)), ("mcp", (2,))],
)
def test_floors_are_ones_that_run(dist, floor):
    """The measured floors: below these the code crashes at run time."""
    reqs = {_name(r): r for r in _project()["dependencies"]}
    got = _floor(reqs[dist])
    assert got is not None and got >= floor, reqs[dist]


def test_installed_versions_meet_the_floors():
    for req in _project()["dependencies"]:
        floor = _floor(req)
        if floor is None:
            continue
        installed = metadata.version(_name(req))
        have = tuple(int(p) for p in re.findall(r"\d+", installed)[: len(floor)])
        assert have >= floor, f"{req}: {installed} installed"


def test_sqlalchemy_is_not_pinned_to_a_minor_version():
    """Every query is public SQLAlchemy API (Core, ORM, the async engine): nothing ties the code to
    one minor release, so the next ones install."""
    req = next(r for r in _project()["dependencies"] if _name(r) == "sqlalchemy")
    caps = re.findall(r"<\s*([0-9][0-9.]*)", req)
    assert "[asyncio]" in req.lower()
    assert caps == ["3"], req  # only a major release may break the API


def test_metadata():
    project = _project()
    assert project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert (ROOT / "CHANGELOG.md").exists()
    classifiers = project["classifiers"]
    for minor in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {minor}" in classifiers
    assert project["requires-python"] == ">=3.11"
