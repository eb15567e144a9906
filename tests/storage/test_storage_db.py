"""memory.db: migrations on a real SQLite file, pragmas, models == migration, PostgreSQL DDL,
and a locked database surfacing as StorageError."""

from __future__ import annotations

import math
import sqlite3

import pytest
import sqlalchemy as sa

from agent.errors import StorageError
from agent.messages import Message
from memory.db import Database, migration_sql, upgrade
from memory.models import CHAT_TABLES, CORE_TABLES
from memory.stores import SqlStore
from tests.storage.migration_diff import migration_diffs, table_of


def url_for(path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def test_upgrade_creates_all_tables_in_a_real_file(tmp_path):
    path = tmp_path / "sub" / "tapebot.db"  # the folder is created too
    revision = await upgrade(url_for(path))
    assert revision is not None
    con = sqlite3.connect(path)
    try:
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        history = con.execute("select version_num from alembic_version").fetchall()
        mode = con.execute("pragma journal_mode").fetchone()[0]
    finally:
        con.close()
    assert set(CORE_TABLES + CHAT_TABLES) <= tables
    assert history == [(revision,)]
    assert mode == "wal"  # WAL is persistent in the file
    assert await upgrade(url_for(path)) == revision  # idempotent


async def test_connection_pragmas(tmp_path):
    async with Database(url_for(tmp_path / "t.db"), busy_timeout_ms=1234) as db:
        async with db.read() as s:
            values = [
                (await s.execute(sa.text(f"PRAGMA {p}"))).scalar()
                for p in ("journal_mode", "busy_timeout", "foreign_keys", "synchronous")
            ]
    assert values == ["wal", 1234, 1, 1]  # synchronous NORMAL == 1


async def test_start_applies_migrations_and_close_is_clean(tmp_path):
    db = Database(url_for(tmp_path / "t.db"))
    with pytest.raises(StorageError, match="not started"):
        db.engine  # noqa: B018
    await db.start()
    await SqlStore(db).append_messages("s", [Message.user("hi")])
    await db.close()
    await db.close()  # twice is fine
    async with Database(url_for(tmp_path / "t.db")) as again:
        assert [m.text for m in await SqlStore(again).load_messages("s")] == ["hi"]


async def test_the_session_factory_is_kept_before_start_and_binds_when_the_database_opens(tmp_path):
    """Parts built before the database opens (market data) keep `sessions`; it runs on the engine
    while the database is open, and on none before or after."""
    db = Database(url_for(tmp_path / "t.db"))
    sessions = db.sessions
    assert not (tmp_path / "t.db").exists()  # nothing opened to build it
    with pytest.raises(StorageError, match="not started"):
        db.sessionmaker  # noqa: B018
    with pytest.raises(sa.exc.UnboundExecutionError):
        async with sessions() as s:
            await s.execute(sa.text("select 1"))
    await db.start()
    try:
        assert db.sessions is sessions and db.sessionmaker is sessions
        async with sessions() as s, s.begin():
            assert (await s.execute(sa.text("select count(*) from sessions"))).scalar() == 0
    finally:
        await db.close()
    with pytest.raises(sa.exc.UnboundExecutionError):
        async with sessions() as s:
            await s.execute(sa.text("select 1"))
    await db.start()  # opened again: the same factory, on the new engine
    try:
        async with sessions() as s:
            assert (await s.execute(sa.text("select 1"))).scalar() == 1
    finally:
        await db.close()


async def test_models_match_the_migration(tmp_path):
    diffs = await migration_diffs(tmp_path / "t.db")
    mine = [d for d in diffs if table_of(d) in CORE_TABLES + CHAT_TABLES]
    assert mine == []


def test_postgresql_ddl_renders():
    sql = migration_sql("postgresql+asyncpg://bot:pw@localhost/tapebot", revision="0001_core")
    for table in CORE_TABLES:
        assert f"CREATE TABLE {table} " in sql
    assert "BIGSERIAL" in sql and "TIMESTAMP WITH TIME ZONE" in sql
    assert "CONSTRAINT uq_processed_updates_platform UNIQUE (platform, update_id)" in sql


async def test_locked_database_raises_storage_error(tmp_path):
    path = tmp_path / "t.db"
    async with Database(url_for(path), busy_timeout_ms=50) as db:
        store = SqlStore(db)
        await store.get_or_create_session("s")
        holder = sqlite3.connect(path, timeout=0.01, isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            holder.execute("INSERT INTO kv (key, value, updated_at) VALUES ('x', '1', '2024-01-01')")
            with pytest.raises(StorageError, match="database is locked") as info:
                await store.append_messages("s", [Message.user("blocked")])
            assert str(tmp_path) in str(info.value)
            with pytest.raises(StorageError, match="locked"):
                await store.mark_update_processed("telegram", 1)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        # Released: the same store works again.
        await store.append_messages("s", [Message.user("after")])
        assert [m.text for m in await store.load_messages("s")] == ["after"]


async def test_bad_path_is_a_storage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StorageError, match="cannot create the database folder"):
        await Database(url_for(blocker / "x" / "t.db")).start()


def _scripts(tmp_path, files: dict[str, str | None]):
    from memory.db import alembic_config

    (tmp_path / "versions").mkdir(parents=True)
    for name, down in files.items():
        (tmp_path / "versions" / f"{name}.py").write_text(
            f"revision = {name!r}\ndown_revision = {down!r}\nbranch_labels = None\ndepends_on = None\n"
            "def upgrade():\n    pass\n"
        )
    cfg = alembic_config("sqlite://")
    cfg.set_main_option("script_location", str(tmp_path))
    return cfg


def test_broken_or_forked_migration_chain_is_a_clear_error(tmp_path):
    from memory.db import check_migration_chain

    with pytest.raises(
        StorageError, match="broken: a revision names '0002_x' as its parent but no file defines it"
    ):
        check_migration_chain(_scripts(tmp_path / "a", {"0001_a": None, "0003_y": "0002_x"}))
    with pytest.raises(StorageError, match="2 heads"):
        check_migration_chain(
            _scripts(tmp_path / "b", {"0001_a": None, "0002_x": "0001_a", "0002_y": "0001_a"})
        )
    assert check_migration_chain(_scripts(tmp_path / "c", {"0001_a": None, "0002_x": "0001_a"})) == "0002_x"


async def test_json_columns_keep_what_the_fast_codec_refuses(tmp_path):
    """JSON columns use orjson, with the standard library for integers beyond 64 bits and keys
    that are not strings; rows the standard library wrote (NaN literals) still load."""
    from memory.db import json_dumps, json_loads

    assert json_loads(json_dumps({"n": 2**70})) == {"n": 2**70}
    assert json_loads(json_dumps({1: "a"})) == {"1": "a"}
    assert json_loads(json_dumps({"text": "分析 600519"})) == {"text": "分析 600519"}
    assert math.isnan(json_loads('{"x": NaN}')["x"])
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 't.db'}") as db:
        store = SqlStore(db)
        await store.kv_set("big", {"n": 2**70, "name": "贵州茅台"})
        assert await store.kv_get("big") == {"n": 2**70, "name": "贵州茅台"}


async def test_the_unused_approval_rules_table_is_dropped_and_comes_back_on_downgrade(tmp_path):
    from memory.db import downgrade

    path = tmp_path / "t.db"

    def tables() -> set[str]:
        con = sqlite3.connect(path)
        try:
            return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        finally:
            con.close()

    await upgrade(url_for(path), "0014_column_limits")
    assert "approval_rules" in tables()
    await upgrade(url_for(path))
    assert "approval_rules" not in tables()
    await downgrade(url_for(path), "0014_column_limits")
    assert "approval_rules" in tables()
