"""Shared test fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.pg import DATABASES, fresh_postgres

# Property tests check what holds, never how fast: on a loaded 2-core CI machine hypothesis's
# deadline and too-slow health check would fail them for the machine's sake, not the code's.
settings.register_profile(
    "tapebot", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("tapebot")

# Tests never touch the internet and never read the developer's real state.
os.environ.setdefault("TAPEBOT_HOME", "/nonexistent-tapebot-home-for-tests")
for _var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_var, None)


@pytest.fixture(params=DATABASES)
async def database_url(request, tmp_path) -> str:
    """A real SQLite file; and, when TAPEBOT_TEST_POSTGRES_URL is set (CI starts a server), the
    same test again on PostgreSQL with its schema emptied (nothing migrated yet)."""
    if request.param == "postgres":
        return await fresh_postgres()
    return f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}"


@pytest.fixture
async def tasks_db(tmp_path):
    """The task and scheduler tables alone (no migrations) on a real SQLite file."""
    from memory.db import Database
    from memory.tasks import create_tables

    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}", migrate=False)
    await database.start()
    await create_tables(database.engine)
    yield database
    await database.close()


@pytest.fixture
def tapebot_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TAPEBOT_HOME", str(home))
    return home
