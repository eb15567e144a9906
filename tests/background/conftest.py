"""Fixtures for the background-task tests: the SQL ledger on a real SQLite file, a settable clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.db import Database
from memory.tasks import SqlTaskStore, create_tables
from tests.fakes.clock import FakeClock


@pytest.fixture
async def db(tmp_path):
    database = Database(f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}", migrate=False)
    await database.start()
    await create_tables(database.engine)
    yield database
    await database.close()


@pytest.fixture
def task_store(db):
    return SqlTaskStore(db)


@pytest.fixture
def clock():
    return FakeClock(datetime(2025, 3, 3, 9, 0, tzinfo=UTC))
