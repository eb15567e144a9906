"""The import contracts (`[tool.importlinter]` in pyproject.toml: the layer direction, no import
cycle) under pytest; `.ci/run` runs `lint-imports` too."""

from __future__ import annotations

from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_are_kept():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0


def test_the_graph_counts_lazy_and_type_checking_imports():
    # /memory imports memory.cli inside a function; the command context names memory's services
    # for types only. Both are edges of the graph the contracts check.
    graph = grimp.build_graph("bot", "memory")
    runtime = grimp.build_graph("bot", "memory", exclude_type_checking_imports=True)
    assert graph.direct_import_exists(importer="bot.commands.memory", imported="memory.cli")
    assert graph.direct_import_exists(importer="bot.commands.context", imported="memory.tools")
    assert not runtime.direct_import_exists(importer="bot.commands.context", imported="memory.tools")


def test_a_cycle_hidden_by_lazy_and_type_checking_imports_breaks_the_contract(tmp_path, monkeypatch):
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from cyclepkg import b\n    return b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclepkg import a\n"
    )
    config = tmp_path / ".importlinter"
    config.write_text(
        "[importlinter]\nroot_package = cyclepkg\n\n"
        "[importlinter:contract:acyclic]\nname = No cycles\ntype = acyclic_siblings\nancestors = cyclepkg\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert lint_imports(config_filename=str(config), no_cache=True) == 1


def test_the_projects_own_warnings_are_errors_and_third_party_ones_are_not():
    # pyproject's filterwarnings: a warning attributed to a project module fails the test run.
    import warnings

    import pytest

    code = compile("import warnings\nwarnings.warn('old', DeprecationWarning)", "<probe>", "exec")
    with pytest.raises(DeprecationWarning):
        exec(code, {"__name__": "agent.probe"})
    with warnings.catch_warnings(record=True):
        exec(code, {"__name__": "somelib.probe"})  # third-party: ignored, no exception
