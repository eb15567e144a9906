"""Fixtures for the memory tests: a real SQLite file with the memory schema and a settable clock."""

from __future__ import annotations

import os

import pytest
from memory_helpers import memory_clock, resolve_codes

from memory.db import Database
from memory.longterm import MemoryStore, create_memory_schema
from tests.fakes.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return memory_clock()


PG_URL = os.environ.get("TAPEBOT_TEST_POSTGRES_URL", "")
BACKENDS = ["sqlite", "postgres"] if PG_URL else ["sqlite"]


@pytest.fixture(params=BACKENDS)
async def db(request, tmp_path):
    """A real SQLite file; and, when TAPEBOT_TEST_POSTGRES_URL is set (CI starts a server), the
    same tests again on a fresh PostgreSQL schema."""
    if request.param == "postgres":
        await reset_postgres(PG_URL)
        database = Database(PG_URL, migrate=False)
    else:
        database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mem.db'}", migrate=False)
    await database.start()
    await create_memory_schema(database)
    yield database
    await database.close()


async def reset_postgres(url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("DROP SCHEMA public CASCADE"))
        await conn.execute(text("CREATE SCHEMA public"))
    await engine.dispose()


@pytest.fixture
def store(db, clock) -> MemoryStore:
    return MemoryStore(db, clock=clock, code_resolver=resolve_codes)
