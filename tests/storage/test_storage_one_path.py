"""One storage path for both databases: the store's per-message operations give the same results
on a SQLite file, in-memory SQLite and PostgreSQL (when TAPEBOT_TEST_POSTGRES_URL is set); on a
SQLite file the short transactions that run on the event-loop thread never block it waiting for
another process's lock."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime

import pytest

import memory.chat_tables as chat_tables_module
from agent.errors import StorageError
from agent.messages import Message, ToolCallPart
from agent.ports import TurnRecord, UsageRecord
from agent.usage import Usage
from memory.chat_tables import ChatRecord
from memory.db import Database
from memory.stores import SqlStore
from tests.pg import PG_URL, fresh_postgres

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


@pytest.fixture(params=["file", "memory", "postgres"] if PG_URL else ["file", "memory"])
async def url(request, tmp_path) -> str:
    if request.param == "postgres":
        return await fresh_postgres()
    if request.param == "memory":
        return "sqlite+aiosqlite://"
    return f"sqlite+aiosqlite:///{tmp_path / 't.db'}"


async def exercise(store: SqlStore) -> dict:
    turn = TurnRecord(
        id="t1",
        session_id="s1",
        requester="u1",
        chat_key="tg:1",
        approvers=["u1"],
        created_at=NOW,
        updated_at=NOW,
    )
    call = ToolCallPart(id="c1", name="quote", arguments={"code": "600519", "note": "贵州茅台"})
    assert await store.mark_update_processed("telegram", 41)
    assert not await store.mark_update_processed("telegram", 41)
    assert await store.receive_message("telegram", 42, {"text": "买 100 股", "n": [1, None]})
    assert await store.receive_message("telegram", 43, {"text": "kept"})
    assert await store.receive_message("discord", 44, {"text": "released"})
    assert not await store.receive_message("telegram", 42, {"text": "a duplicate"})
    await store.release_received([("discord", "44")])
    await store.kv_set("chat:1", {"session_id": "s1", "lang": "zh", "none": None})
    await store.kv_set("empty", None)
    await store.kv_set("chat:1", {"session_id": "s1", "lang": "en"})
    usage = UsageRecord(
        session_id="s1", turn_id="t1", model="m", usage=Usage(10, 5), cost=0.25, created_at=NOW
    )
    await store.commit(
        "s1",
        messages=[Message.user("你好 <b>&"), Message.assistant("", [call])],
        turn=turn,
        received=[("telegram", "42")],
    )
    running = await store.open_turn("s1")
    held = await store.load_messages("s1")  # held: the next commit appends after it
    turn.status = "completed"
    await store.commit("s1", messages=[Message.assistant("done")], turn=turn, usage=usage)
    await store.commit("s1", messages=[Message.user("two"), Message.assistant("at once")])
    await store.append_messages("s2", [Message.user("other session")])
    await store.save_turn(
        TurnRecord(id="t2", session_id="s3", status="suspended", created_at=NOW, updated_at=NOW)
    )
    await store.record_usage(usage)
    assert await store.load_messages("s4") == []  # a session not created yet
    new_turn = TurnRecord(id="t4", session_id="s4", requester="u4", chat_key="tg:4", created_at=NOW)
    await store.commit("s4", messages=[Message.user("first")], turn=new_turn, received=[("telegram", "43")])
    await store.commit("s4", messages=[Message.assistant("second")])
    await store.save_chat(ChatRecord("tg:1", "telegram", "1", None, False, "s1"))
    await store.save_chat(ChatRecord("tg:1", "telegram", "1", None, False, "s1", "zh", "m2", "u1"))
    await store.save_chat(ChatRecord("dc:2:t3", "discord", "2", "t3", True, "s2", "en", None, "u2"))
    return {
        "chat": await store.load_chat("tg:1"),
        "group": await store.load_chat("dc:2:t3"),
        "no_chat": await store.load_chat("nope"),
        "open": running,
        "closed": await store.open_turn("s1"),
        "suspended": await store.open_turn("s3"),
        "turn": await store.load_turn("t1"),
        "missing": await store.load_turn("nope"),
        "held": held,
        "messages": await store.load_messages("s1"),
        "new_session": await store.load_messages("s4"),
        "kv": await store.kv_get("chat:1"),
        "kv_empty": await store.kv_get("empty", "default"),
        "kv_missing": await store.kv_get("missing", "default"),
        "pending": await store.received_pending(),
    }


async def test_the_per_message_operations_on_every_database(url, monkeypatch):
    monkeypatch.setattr(chat_tables_module, "utcnow", lambda: NOW)
    async with Database(url) as db:
        got = await exercise(SqlStore(db))
    assert got["open"] is not None and got["open"].status == "running"
    assert got["closed"] is None and got["suspended"] is not None
    assert got["turn"] is not None and got["turn"].status == "completed" and got["missing"] is None
    assert [m.text for m in got["held"]] == ["你好 <b>&", ""]
    assert got["held"][1].tool_calls[0].arguments == {"code": "600519", "note": "贵州茅台"}
    assert [m.text for m in got["messages"]] == ["你好 <b>&", "", "done", "two", "at once"]
    assert got["kv"] == {"session_id": "s1", "lang": "en"}
    assert got["chat"] == ChatRecord("tg:1", "telegram", "1", None, False, "s1", "zh", "m2", "u1", NOW)
    assert got["group"] is not None and (got["group"].thread_id, got["group"].is_group) == ("t3", True)
    assert got["no_chat"] is None
    assert got["kv_empty"] is None and got["kv_missing"] == "default"
    assert [m.text for m in got["new_session"]] == ["first", "second"]
    assert got["pending"] == []  # every received message was committed or released


async def test_driver_errors_are_storage_errors(tmp_path):
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 't.db'}") as db:
        store = SqlStore(db)
        conn = sqlite3.connect(tmp_path / "t.db")
        conn.execute("DROP TABLE kv")
        conn.commit()
        conn.close()
        with pytest.raises(StorageError, match="no such table"):
            await store.kv_set("k", 1)
        with pytest.raises(StorageError, match="no such table"):
            await store.kv_get("k")


async def test_an_append_after_another_writer_is_numbered_after_its_messages(tmp_path):
    """The history a store holds is extended by its own appends; when another process wrote the
    session's messages meanwhile, the append goes after those, and the next read brings them all."""
    path = tmp_path / "t.db"
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        store = SqlStore(db)
        await store.append_messages("s", [Message.user("one")])
        assert [m.text for m in await store.load_messages("s")] == ["one"]
        await store.append_messages("s", [Message.user("two")])
        async with Database(f"sqlite+aiosqlite:///{path}") as other_db:
            await SqlStore(other_db).append_messages("s", [Message.user("elsewhere")])
        await store.append_messages("s", [Message.user("three"), Message.user("four")])
        assert [m.text for m in await store.load_messages("s")] == [
            "one",
            "two",
            "elsewhere",
            "three",
            "four",
        ]
    conn = sqlite3.connect(path)
    try:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM messages WHERE session_id = 's' ORDER BY seq")]
    finally:
        conn.close()
    assert seqs == [0, 1, 2, 3, 4]


async def test_a_write_waits_for_another_process_without_blocking_the_loop(tmp_path):
    """Another process holds SQLite's write lock: the write waits for it off the event loop (the
    loop keeps serving), and lands once the lock is released."""
    path = tmp_path / "t.db"
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        store = SqlStore(db)
        await store.kv_set("k", "before")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE kv SET value = '\"other\"' WHERE key = 'k'")
        write = asyncio.create_task(store.kv_set("k", "mine"))
        ticks = 0
        while ticks < 20:  # the loop runs while the write waits
            await asyncio.sleep(0.01)
            ticks += 1
            assert not write.done()
        assert await store.kv_get("k") == "before"  # a read is not held up either (WAL)
        other.execute("COMMIT")
        other.close()
        await write
        assert await store.kv_get("k") == "mine"


async def test_a_lock_held_beyond_the_busy_timeout_is_a_clear_error(tmp_path):
    path = tmp_path / "t.db"
    async with Database(f"sqlite+aiosqlite:///{path}", busy_timeout_ms=100) as db:
        store = SqlStore(db)
        await store.kv_set("k", 1)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StorageError, match="locked"):
                await store.kv_set("k", 2)
        finally:
            other.execute("ROLLBACK")
            other.close()
        await store.kv_set("k", 3)  # the store is usable again
        assert await store.kv_get("k") == 3
