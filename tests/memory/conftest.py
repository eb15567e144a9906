"""Fixtures for the memory tests: a real SQLite file with the memory schema and a settable clock."""

from __future__ import annotations

import pytest
from memory_helpers import FakeClock, resolve_codes

from memory.db import Database
from memory.longterm import MemoryStore, create_memory_schema


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def db(tmp_path):
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'mem.db'}", migrate=False)
    await database.start()
    await create_memory_schema(database)
    yield database
    await database.close()


@pytest.fixture
def store(db, clock) -> MemoryStore:
    return MemoryStore(db, clock=clock, code_resolver=resolve_codes)
