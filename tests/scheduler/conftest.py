"""Fixtures for the scheduler tests: a real SQLite file with the scheduler tables, a settable clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.db import Database
from memory.tasks import create_tables
from scheduler.store import ScheduleStore
from tests.fakes.clock import FakeClock


@pytest.fixture
def db_url(tmp_path):
    return f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}"


@pytest.fixture
async def db(db_url):
    database = Database(db_url, migrate=False)
    await database.start()
    await create_tables(database.engine)
    yield database
    await database.close()


@pytest.fixture
def store(db):
    return ScheduleStore(db)


@pytest.fixture
def clock():
    return FakeClock(datetime.now(UTC))
