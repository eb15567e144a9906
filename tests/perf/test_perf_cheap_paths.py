"""The cheap paths of a one-shot turn: a database already at the packaged head is opened
without importing Alembic, and `tapebot chat -m` imports neither numpy, matplotlib nor Alembic, nor
an LLM SDK other than the configured one. Behavioural guards (what is imported), never timings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.db import Database, alembic_config, check_migration_chain, packaged_heads
from tests.perf.probe import probe


def _versions(folder: Path, files: dict[str, str | None], annotated: bool = False) -> Path:
    folder.mkdir(parents=True)
    for name, down in files.items():
        ann = ": str" if annotated else ""
        down_ann = ": str | None" if annotated else ""
        (folder / f"{name}.py").write_text(
            f'"""{name}\n\nRevision ID: {name}\n"""\nrevision{ann} = {name!r}\n'
            f"down_revision{down_ann} = {down!r}\nbranch_labels = None\n"
        )
    return folder


def test_packaged_heads_agree_with_alembic():
    """Computed from the files (a regex, no Alembic import), so new migrations need no constant."""
    assert packaged_heads() == {check_migration_chain(alembic_config("sqlite://"))}


def test_heads_of_a_linear_chain_a_fork_and_annotated_files(tmp_path):
    linear = _versions(tmp_path / "a", {"0001_a": None, "0002_b": "0001_a", "0003_c": "0002_b"})
    assert packaged_heads(linear) == {"0003_c"}
    fork = _versions(tmp_path / "b", {"0001_a": None, "0002_x": "0001_a", "0002_y": "0001_a"})
    assert packaged_heads(fork) == {"0002_x", "0002_y"}
    typed = _versions(tmp_path / "c", {"0001_a": None, "0002_b": "0001_a"}, annotated=True)
    assert packaged_heads(typed) == {"0002_b"}


def test_a_file_the_regex_cannot_read_means_no_answer(tmp_path):
    odd = _versions(tmp_path / "a", {"0001_a": None})
    (odd / "0002_b.py").write_text("revision = make_revision()\ndown_revision = '0001_a'\n")
    assert packaged_heads(odd) is None  # → the full Alembic path decides


@given(st.integers(min_value=1, max_value=12), st.data())
def test_heads_are_the_revisions_nobody_names_as_parent(n, data):
    parents = [None] + [data.draw(st.sampled_from([f"r{j}" for j in range(i)])) for i in range(1, n)]
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = _versions(Path(tmp) / "v", {f"r{i}": parents[i] for i in range(n)})
        assert packaged_heads(folder) == {f"r{i}" for i in range(n)} - set(parents)


async def test_a_current_database_opens_without_alembic(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}"
    db = Database(url)
    await db.start()  # migrates (Alembic)
    await db.close()
    seen = probe(
        f"""
        import asyncio, json, sys
        from memory.db import Database
        async def main():
            db = Database({url!r})
            await db.start()
            await db.close()
        asyncio.run(main())
        print(json.dumps({{"alembic": "alembic" in sys.modules}}))
        """
    )
    assert seen == {"alembic": False}


async def test_an_older_database_is_still_upgraded(tmp_path):
    from memory.db import current_revision, upgrade

    url = f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}"
    await upgrade(url, "0002_memory")
    db = Database(url)
    await db.start()
    try:
        assert await current_revision(db.engine) == next(iter(packaged_heads() or {"?"}))
    finally:
        await db.close()


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_one_shot_turn_imports_only_what_it_needs(tmp_path, vendor):
    """Build the app as `tapebot chat -m` does and list the heavy modules it pulled in."""
    (tmp_path / "home").mkdir()
    key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[vendor]
    env = {"TAPEBOT_HOME": str(tmp_path / "home"), key: "sk-test-0123456789"}  # the key picks the vendor
    code = """
        import asyncio, json, sys
        import bot.cli
        from bot.cli import CliContext
        from bot.app import App
        async def main():
            settings = CliContext().settings()
            app = App(settings)
            await app.start(adapters=False)
            app.model_for(None)
            tools = [t.name for t in app.runtime.tools.specs()] if hasattr(app.runtime.tools, "specs") else []
            await app.stop()
            return tools
        asyncio.run(main())
        heavy = ["numpy", "matplotlib", "alembic", "pandas", "openai", "anthropic"]
        print(json.dumps({m: m in sys.modules for m in heavy}))
        """
    probe(code, env=env)  # the first start migrates the new database (Alembic may load then)
    seen = probe(code, env=env)
    other = "anthropic" if vendor == "openai" else "openai"
    assert seen == {
        "numpy": False,
        "matplotlib": False,
        "alembic": False,
        "pandas": False,
        vendor: seen[vendor],  # loaded by the client when it is built or first used
        other: False,
    }


def test_sdk_modules_are_the_configured_vendors_only():
    from types import SimpleNamespace as M

    from agent.providers import sdk_modules

    assert sdk_modules([M(provider="openai"), M(provider="openai")]) == ["openai"]
    assert sdk_modules([M(provider="anthropic"), M(provider="openai")]) == ["anthropic", "openai"]
    assert sdk_modules([]) == []


async def test_run_warms_the_configured_sdk_in_a_tracked_task_that_stop_ends(tmp_path, monkeypatch):
    """`tapebot run` imports the provider SDK in the background at start (the first reply then
    does not pay it); the task is the app's own and is over once the app has stopped."""
    import agent.providers as providers
    from bot.app import App
    from config.loader import load_settings

    imported: list[list[str]] = []
    monkeypatch.setattr(providers, "import_sdks", lambda names: imported.append(list(names)))
    settings = load_settings(tmp_path, {"ANTHROPIC_API_KEY": "sk-ant-test-0123"})
    app = App(settings)
    task = app.warm_sdks()
    assert task is not None and task in app._tasks
    await app.stop()
    assert task.done()
    assert imported in ([], [["anthropic"]])  # cancelled before, or ran: never the other vendor
