"""A chat's turns run one at a time across replicas: the chat lease (bot/replicas.py `ChatLeases`)
on a real database — a SQLite file, and PostgreSQL when TAPEBOT_TEST_POSTGRES_URL is set — with
each replica on its own connection pool, as separate processes are."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from bot.replicas import ChatLeases, chat_lease_name
from memory.coordination import Leases
from memory.db import Database

PG_URL = os.environ.get("TAPEBOT_TEST_POSTGRES_URL", "")


@pytest.fixture(params=["sqlite", "postgres"] if PG_URL else ["sqlite"])
async def url(request, tmp_path) -> str:
    if request.param == "postgres":
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(PG_URL)
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
        await engine.dispose()
        return PG_URL
    return f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}"


@pytest.fixture
async def pools(url):
    """Three replicas' connection pools on one database."""
    dbs = [Database(url) for _ in range(3)]
    for db in dbs:
        await db.start()
    yield dbs
    for db in dbs:
        await db.close()


async def test_one_chat_is_held_by_one_replica_at_a_time(pools):
    """Three replicas run turns in one chat: never two at once, each gets its turn, and another
    chat is not held up meanwhile."""
    replicas = [
        ChatLeases(Leases(db), f"replica-{i}", ttl=5, max_wait_step=0.02) for i, db in enumerate(pools)
    ]
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    order: list[str] = []

    async def turn(lease: ChatLeases, chat: str) -> None:
        async with lease.hold(chat):
            inside.append(lease.owner)
            if len(inside) > 1:
                overlaps.append(tuple(inside))
            order.append(lease.owner)
            for _ in range(5):  # a turn's awaits: others get to try meanwhile
                await asyncio.sleep(0.01)
            inside.remove(lease.owner)

    async def lane(lease: ChatLeases) -> None:  # in one replica the chat's lane runs turns in turn
        for _ in range(3):
            await turn(lease, "telegram:5")

    await asyncio.gather(*(lane(r) for r in replicas))
    assert overlaps == []
    assert sorted(order) == sorted([r.owner for r in replicas] * 3)

    other = asyncio.Event()

    async def other_chat() -> None:
        async with replicas[1].hold("telegram:6"):
            other.set()

    async with replicas[0].hold("telegram:5"):
        await asyncio.wait_for(other_chat(), 30)  # a different chat: not blocked by this one
        assert other.is_set()


async def test_a_waiting_replica_runs_once_the_holder_releases(pools):
    a = ChatLeases(Leases(pools[0]), "a", ttl=5, max_wait_step=0.02)
    b = ChatLeases(Leases(pools[1]), "b", ttl=5, max_wait_step=0.02)
    entered = asyncio.Event()

    async def b_turn() -> None:
        async with b.hold("discord:9"):
            entered.set()

    async with a.hold("discord:9"):
        waiting = asyncio.create_task(b_turn())
        await asyncio.sleep(0.2)  # b keeps trying while a holds the chat
        assert not entered.is_set()
    await asyncio.wait_for(waiting, 30)
    assert entered.is_set()


async def test_a_dead_holders_lease_is_taken_over(pools):
    """A holder that died mid-turn (kill -9) does not block the chat for good: its lease is taken
    when it expires, or at once when its process is known gone on this machine."""
    leases = Leases(pools[0])
    now = datetime.now(UTC)
    await leases.take(chat_lease_name("telegram:1"), "elsewhere:1:1:ab", now=now, ttl=0.3)
    survivor = ChatLeases(Leases(pools[1]), "survivor", ttl=5, max_wait_step=0.02)
    async with survivor.hold("telegram:1"):
        pass  # taken once the dead one's 0.3 s ran out

    code = "from bot.replicas import new_replica_id; print(new_replica_id())"
    dead = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    await leases.take(chat_lease_name("telegram:2"), dead, now=now, ttl=timedelta(hours=1).total_seconds())
    async with survivor.hold("telegram:2"):
        pass  # at once: the holder's process is gone


def test_lease_names_fit_the_column():
    """Chat keys are up to 255 characters; the lease name column holds 64."""
    assert len(chat_lease_name("telegram:" + "9" * 250)) <= 64
    assert chat_lease_name("a") != chat_lease_name("b")
