"""Fixtures for the scheduler tests: a real SQLite file with the scheduler tables, a settable clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduler.store import ScheduleStore
from tests.fakes.clock import FakeClock


@pytest.fixture
def store(tasks_db):
    return ScheduleStore(tasks_db)


@pytest.fixture
def clock():
    return FakeClock(datetime.now(UTC))
