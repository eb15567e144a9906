"""Fixtures for the built-in local tools: a TAPEBOT_HOME-like tree in tmp_path and a ToolContext."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.builtin import local_tools
from agent.tools.registry import Deps, ToolContext
from agent.tools.workspace import LocalToolPolicy

SECRET = "s3cr3t-value-from-config-0123456789"


@pytest.fixture
def secret() -> str:
    """A configured secret value (as if loaded from config.toml)."""
    return SECRET


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (home / "results").mkdir()
    (home / "config.toml").write_text('api_key = "sk-should-never-be-read-0000000000"\n')
    (home / "tapebot.db").write_bytes(b"SQLite format 3\x00")
    (home / ".env").write_text("OPENAI_API_KEY=sk-env-file-secret-000000000000\n")
    return home


@pytest.fixture
def policy(home: Path) -> LocalToolPolicy:
    return LocalToolPolicy.for_home(home, secret_values=[SECRET])


@pytest.fixture
def ctx(policy: LocalToolPolicy) -> ToolContext:
    return ToolContext(call_id="c1", workspace=policy.workspace, deps=Deps(policy))


@pytest.fixture
def call(ctx: ToolContext):
    """Call a local tool by name through the registry (argument validation included)."""

    async def _call(name: str, **arguments):
        return await local_tools.get(name).call(ctx, arguments)

    return _call
