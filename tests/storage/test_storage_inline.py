"""SQLite on the event-loop thread (memory/sqlite_inline.py): waiting for the write lock happens off
the loop, so a lock held by another process — or by another coroutine of ours — never freezes it."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing

import pytest
import sqlalchemy as sa

from agent.messages import Message
from memory.db import Database
from memory.models import KV
from memory.sqlite_inline import InlineConnection
from memory.stores import SqlStore


def url_for(path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def test_inline_is_the_default_for_sqlite(tmp_path):
    async with Database(url_for(tmp_path / "t.db")) as db:
        async with db.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            assert isinstance(raw.driver_connection, InlineConnection)
        async with db.read() as s:
            assert (await s.execute(sa.text("PRAGMA busy_timeout"))).scalar() == db.busy_timeout_ms


async def test_a_lock_held_by_another_process_is_waited_for_off_the_loop(tmp_path):
    path = tmp_path / "t.db"
    async with Database(url_for(path)) as db:  # 5 s busy timeout
        store = SqlStore(db)
        await store.get_or_create_session("s")
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        # only a running loop can release the lock: if the write below blocked the loop in SQLite's
        # busy handler, it would fail with "database is locked" after 5 s instead
        asyncio.get_running_loop().call_later(0.1, holder.execute, "COMMIT")
        try:
            await store.append_messages("s", [Message.user("waited")])
        finally:
            holder.close()
        assert [m.text for m in await store.load_messages("s")] == ["waited"]


async def test_our_own_writers_do_not_deadlock_the_loop(tmp_path):
    async with Database(url_for(tmp_path / "t.db")) as db:
        store = SqlStore(db)
        # a session from the bare sessionmaker (as the markets code uses) holds the write lock
        # across an await, while a store write asks for it
        async with db.sessionmaker() as s, s.begin():
            await s.execute(sa.insert(KV).values(key="a", value=1))
            writer = asyncio.create_task(store.kv_set("b", 2))
            await asyncio.sleep(0.05)
            assert not writer.done()  # waiting for the lock, and the loop still runs
        await writer
        assert await store.kv_get("a") == 1 and await store.kv_get("b") == 2


async def test_cancelling_a_waiting_writer_leaves_the_pool_usable(tmp_path):
    async with Database(url_for(tmp_path / "t.db"), busy_timeout_ms=300) as db:
        store = SqlStore(db)
        async with db.sessionmaker() as s, s.begin():
            await s.execute(sa.insert(KV).values(key="a", value=1))
            writer = asyncio.create_task(store.kv_set("b", 2))
            await asyncio.sleep(0.05)
            writer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writer
        await store.kv_set("c", 3)
        assert await store.kv_get("c") == 3
        assert await store.kv_get("b") is None


# ---- group commit: concurrent writes share one transaction, each in a savepoint of its own ----


async def test_concurrent_writes_are_group_committed(tmp_path):
    async with Database(url_for(tmp_path / "t.db")) as db:
        store = SqlStore(db)
        runner = db._runner
        assert runner is not None
        await asyncio.gather(
            *(store.commit(f"s{i}", messages=[Message.user(f"hello {i}")]) for i in range(50))
        )
        assert runner.writes >= 50 and runner.batches < runner.writes / 5  # a few COMMITs, not 50
        for i in range(50):  # every write landed, in its own session
            assert [m.text for m in await store.load_messages(f"s{i}")] == [f"hello {i}"]


async def test_a_failing_write_is_rolled_back_alone(tmp_path):
    path = tmp_path / "t.db"
    async with Database(url_for(path)) as db:
        await db.run(lambda c: c.execute(sa.text("CREATE TABLE t (v INTEGER UNIQUE)")), write=True)

        def insert(v: int):
            return lambda c: c.execute(sa.insert(sa.table("t", sa.column("v"))).values(v=v))

        def raw(v: int):
            def fn(conn: sqlite3.Connection) -> int:
                conn.execute("INSERT INTO t (v) VALUES (?)", (v,))
                if v == 2:
                    conn.execute("INSERT INTO t (v) VALUES (1)")  # unique violation after a write
                return v

            return fn

        results = await asyncio.gather(
            *(db.run(insert(v), write=True, sqlite=raw(v)) for v in (1, 2, 3)), return_exceptions=True
        )
        assert results[0] == 1 and results[2] == 3
        assert isinstance(results[1], Exception) and "UNIQUE" in str(results[1])
        with (
            closing(sqlite3.connect(path)) as check,
            check,
        ):  # the failed write left nothing behind, not even v=2
            assert sorted(r[0] for r in check.execute("SELECT v FROM t")) == [1, 3]
        await db.run(insert(4), write=True, sqlite=raw(4))  # and the connection is usable again
