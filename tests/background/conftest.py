"""Fixtures for the background-task tests: the SQL ledger on a real SQLite file, a settable clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.tasks import SqlTaskStore
from tests.fakes.clock import FakeClock


@pytest.fixture
def task_store(tasks_db):
    return SqlTaskStore(tasks_db)


@pytest.fixture
def clock():
    return FakeClock(datetime(2025, 3, 3, 9, 0, tzinfo=UTC))
