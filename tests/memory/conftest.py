"""Fixtures for the memory tests: a real SQLite file with the memory schema and a settable clock."""

from __future__ import annotations

import pytest
from memory_helpers import memory_clock, resolve_codes

from memory.db import Database
from memory.longterm import MemoryStore, create_memory_schema
from tests.fakes.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return memory_clock()


@pytest.fixture
async def db(database_url):
    """The memory schema alone (no migrations) on each test database."""
    database = Database(database_url, migrate=False)
    await database.start()
    await create_memory_schema(database)
    yield database
    await database.close()


@pytest.fixture
def store(db, clock) -> MemoryStore:
    return MemoryStore(db, clock=clock, code_resolver=resolve_codes)
