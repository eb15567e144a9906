"""The scheduler's lease is a named lease like the chats' and the poller's (memory.coordination):
the same row, the same takeover once it expires, and a first take raced by several connections
of one process is held by that process, not reported as another's. On a SQLite file and, when
TAPEBOT_TEST_POSTGRES_URL is set, on PostgreSQL (where the race is real)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from memory.coordination import Leases
from memory.db import Database
from scheduler.app_scheduler import LEASE_NAME
from scheduler.store import ScheduleStore

NOW = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


async def test_a_lease_taken_as_a_named_lease_is_the_schedulers(database_url):
    async with Database(database_url) as db:
        store = ScheduleStore(db)
        assert (await Leases(db).take(LEASE_NAME, "elsewhere", now=NOW, ttl=60)).held
        state = await store.acquire_lease(LEASE_NAME, "me", now=NOW, ttl=60)
        assert not state.held and state.owner == "elsewhere"
        later = NOW + timedelta(seconds=61)  # the holder stopped renewing: a standby takes it over
        assert (await store.acquire_lease(LEASE_NAME, "me", now=later, ttl=60)).held
        live = await Leases(db).live(LEASE_NAME, now=later)
        assert live is not None and live.owner == "me"


async def test_first_takes_raced_by_one_process_are_all_held(database_url):
    dbs = [Database(database_url) for _ in range(4)]
    for db in dbs:  # one after the other: the first one migrates
        await db.start()
    try:
        for round_ in range(5):
            name = f"{LEASE_NAME}-race-{round_}"  # a name nobody took yet: every take inserts
            states = await asyncio.gather(
                *(ScheduleStore(db).acquire_lease(name, "me", now=NOW, ttl=60) for db in dbs)
            )
            assert [(s.held, s.owner) for s in states] == [(True, "me")] * len(dbs)
    finally:
        for db in dbs:
            await db.close()
