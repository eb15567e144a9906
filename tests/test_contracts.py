"""The import-direction contract and the import-cycle check, under pytest (tests/contracts.py has
the checks; `.ci/run` also prints them via `python -m tests.contracts`)."""

from __future__ import annotations

from tests.contracts import import_cycles, import_graph, violations

# Cycles that exist only through `if TYPE_CHECKING:` imports (a type annotation names a class from a
# module that imports this one at run time, lazily). None is left (the last, bot.app <-> bot.chat_setup,
# went when the chats were built from `ChatParts` instead of the whole App). Keep it empty.
KNOWN_TYPE_LEVEL_CYCLES: set[tuple[str, ...]] = set()


def test_no_module_imports_against_the_layer_direction():
    assert violations() == []


def test_no_import_cycle_at_run_time():
    # Lazy (function-level) imports count: they hide a cycle from the interpreter, not from design.
    assert import_cycles() == []


def test_no_new_type_level_import_cycle():
    new = set(import_cycles(typing=True)) - KNOWN_TYPE_LEVEL_CYCLES
    assert not new, f"new import cycle(s): {sorted(new)}"


def test_the_cycle_check_sees_lazy_and_type_checking_imports():
    # The check itself: /memory imports memory.cli inside a function; the command context names
    # memory's services for types only.
    runtime, typed = import_graph(), import_graph(typing=True)
    assert "memory.cli" in runtime["bot.commands.memory"]
    assert "memory.tools" not in runtime["bot.commands.context"]
    assert "memory.tools" in typed["bot.commands.context"]
    # `from markets.wyckoff import range_events` is an edge to the submodule, not to the package.
    assert "markets.wyckoff.range_events" in runtime["markets.wyckoff.engine"]
    assert "markets.wyckoff" not in runtime["markets.wyckoff.engine"]


def test_the_projects_own_warnings_are_errors_and_third_party_ones_are_not():
    # pyproject's filterwarnings: a warning attributed to a project module fails the test run.
    import warnings

    import pytest

    code = compile("import warnings\nwarnings.warn('old', DeprecationWarning)", "<probe>", "exec")
    with pytest.raises(DeprecationWarning):
        exec(code, {"__name__": "agent.probe"})
    with warnings.catch_warnings(record=True):
        exec(code, {"__name__": "somelib.probe"})  # third-party: ignored, no exception
