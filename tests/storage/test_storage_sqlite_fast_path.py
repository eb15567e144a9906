"""The store's plain-SQL path for SQLite (`memory.store_sql.SqliteOps`) stores exactly what its SQLAlchemy Core path
stores, and reads it back the same way."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

import memory.chat_tables as chat_tables_module
import memory.stores as stores_module
from agent.messages import Message, ToolCallPart
from agent.ports import TurnRecord, UsageRecord
from agent.usage import Usage
from memory.chat_tables import ChatRecord
from memory.db import Database
from memory.stores import SqlStore

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)  # no microseconds: the format still has them
TABLES = ("sessions", "messages", "turns", "usage", "processed_updates", "kv", "chats")


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


def dump(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}
    finally:
        conn.close()


async def test_plain_sql_and_core_paths_store_the_same_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(stores_module, "utcnow", lambda: NOW)
    monkeypatch.setattr(chat_tables_module, "utcnow", lambda: NOW)
    results = {}
    for name, inline in (("fast", True), ("core", False)):
        path = tmp_path / f"{name}.db"
        async with Database(f"sqlite+aiosqlite:///{path}", inline=inline) as db:
            assert (db._runner is not None) == inline  # the fast path is really taken (or not)
            results[name] = await exercise(SqlStore(db))
        results[name]["rows"] = dump(path)
    fast, core = results["fast"], results["core"]
    assert fast["rows"] == core["rows"]
    assert fast == core
    assert fast["open"] is not None and fast["open"].status == "running"
    assert fast["closed"] is None and fast["suspended"] is not None
    assert [m.text for m in fast["messages"]] == ["你好 <b>&", "", "done", "two", "at once"]
    assert fast["kv"] == {"session_id": "s1", "lang": "en"}
    assert fast["chat"] == ChatRecord("tg:1", "telegram", "1", None, False, "s1", "zh", "m2", "u1", NOW)
    assert fast["group"] is not None and (fast["group"].thread_id, fast["group"].is_group) == ("t3", True)
    assert fast["no_chat"] is None
    assert fast["kv_empty"] is None and fast["kv_missing"] == "default"
    assert [m.text for m in fast["new_session"]] == ["first", "second"]
    assert fast["pending"] == []  # every received message was committed or released


async def test_in_memory_database_uses_the_core_path(monkeypatch):
    async with Database("sqlite+aiosqlite://") as db:  # one shared connection: no fast path
        assert db._runner is None
        store = SqlStore(db)
        await store.append_messages("s", [Message.user("hi")])
        assert [m.text for m in await store.load_messages("s")] == ["hi"]


async def test_fast_path_errors_are_storage_errors(tmp_path):
    from agent.errors import StorageError

    async with Database(f"sqlite+aiosqlite:///{tmp_path / 't.db'}") as db:
        store = SqlStore(db)
        conn = sqlite3.connect(tmp_path / "t.db")
        conn.execute("DROP TABLE kv")
        conn.commit()
        conn.close()
        with pytest.raises(StorageError, match="no such table"):
            await store.kv_set("k", 1)


async def test_an_append_after_another_writer_is_numbered_after_its_messages(tmp_path, monkeypatch):
    """The history a store holds is appended to with one statement while the session is as it was
    read; when another process wrote its messages meanwhile, the append goes after those, and the
    next read brings the whole history."""
    from memory.store_sql import SqliteOps

    held: list[bool] = []
    advance = SqliteOps.advance_session

    def watched(self, *args):
        held.append(advance(self, *args))
        return held[-1]

    monkeypatch.setattr(SqliteOps, "advance_session", watched)
    path = tmp_path / "t.db"
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        store = SqlStore(db)
        await store.append_messages("s", [Message.user("one")])
        assert [m.text for m in await store.load_messages("s")] == ["one"]
        await store.append_messages("s", [Message.user("two")])  # after what it holds
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
    assert held == [True, False]  # "two" appended after the history held; "three" was not


@given(
    st.datetimes(
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(-timedelta(minutes=90))])
    )
    | st.datetimes()
)
def test_the_plain_sql_timestamp_is_sqlalchemys(value):
    """`_utc_text` (every timestamp the fast path writes) gives exactly what SQLAlchemy's own
    processors for `UTCDateTime` give, whatever the zone (naive values are taken as UTC)."""
    from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

    from memory.models import MESSAGES
    from memory.store_sql import _utc_text, column_processor

    if value.tzinfo is not None and not (
        datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
        <= value
        <= datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
    ):
        return  # beyond year 1..9999 once in UTC: neither can convert it
    expected = column_processor(MESSAGES.c.created_at, SQLiteDialect_pysqlite())(value)
    assert _utc_text(value) == expected


async def test_a_new_sessions_first_exchange_reads_nothing_it_knows(tmp_path, monkeypatch):
    """A session read before it exists holds no messages (they reference it): its first append
    creates it and numbers from 0 without reading it again, and the next load reads one row. If
    another process created it meanwhile, the append goes after that one's messages."""
    from memory.store_sql import SqliteOps

    versions: list[str] = []
    read = SqliteOps.version_and_last_seq

    def watched(self, db, session_id):
        versions.append(session_id)
        return read(self, db, session_id)

    monkeypatch.setattr(SqliteOps, "version_and_last_seq", watched)
    path = tmp_path / "t.db"
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        store = SqlStore(db)
        count = db.count_statements()
        assert await store.load_messages("new") == []
        assert count() == 1  # the version read: no session, so no messages to read
        await store.append_messages("new", [Message.user("one")])
        await store.append_messages("new", [Message.assistant("two")])
        before = count()
        assert [m.text for m in await store.load_messages("new")] == ["one", "two"]
        assert count() - before == 1  # the history held is current

        assert await store.load_messages("raced") == []
        async with Database(f"sqlite+aiosqlite:///{path}") as other_db:
            await SqlStore(other_db).append_messages("raced", [Message.user("elsewhere")])
        await store.append_messages("raced", [Message.user("mine")])
        assert [m.text for m in await store.load_messages("raced")] == ["elsewhere", "mine"]
    # read only where the session was not as held: the other store's blind append, then ours
    assert versions == ["raced", "raced"]
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT session_id, seq FROM messages ORDER BY session_id, seq").fetchall()
    finally:
        conn.close()
    assert rows == [("new", 0), ("new", 1), ("raced", 0), ("raced", 1)]
