"""Every length-limited text column holds the longest value the code writes into it, as declared in
the tables and as migrated on SQLite and on PostgreSQL (when TAPEBOT_TEST_POSTGRES_URL is set).
SQLite ignores declared lengths, so only this comparison, or a write on PostgreSQL, finds a value
too long: an approved trade's `request_hash` ("exec:" + 64 hex) in a 64-character column failed
every paper trade on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

import markets.models  # noqa: F401  (registers the market tables)
import memory.longterm
import memory.models
import memory.tasks
import memory.taskstate  # noqa: F401
from memory.base import Base
from memory.db import create_engine, upgrade
from tests.storage.longest_values import UNBOUNDED, registry

REGISTRY = registry()
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def text_columns() -> dict[tuple[str, str], sa.Column[str]]:
    """Every column of a string type, with or without a length."""
    return {
        (t.name, c.name): c
        for t in Base.metadata.sorted_tables
        for c in t.columns
        if isinstance(c.type, sa.String) and (c.type.length is not None or (t.name, c.name) in REGISTRY)
    }


def test_every_limited_column_has_a_known_longest_value():
    limited = {k for k, c in text_columns().items() if c.type.length is not None}
    missing = sorted(limited - REGISTRY.keys())
    assert not missing, f"add the longest value written into these columns to longest_values.py: {missing}"
    stale = sorted(REGISTRY.keys() - text_columns().keys())
    assert not stale, f"columns in longest_values.py that no longer exist: {stale}"


@pytest.mark.parametrize("key", sorted(REGISTRY), ids=lambda k: f"{k[0]}.{k[1]}")
def test_declared_limit_holds_the_longest_value(key):
    column = text_columns()[key]
    produce = REGISTRY[key]
    if produce is UNBOUNDED:
        assert column.type.length is None, f"{key}: no bound on its values, so no length limit"
        return
    value = produce()
    assert column.type.length is not None and len(value) <= column.type.length, (
        f"{key}: {len(value)} characters ({value!r}) in a column of {column.type.length}"
    )


def _reflected_lengths(sync_conn):
    insp = sa.inspect(sync_conn)
    out = {}
    for table in insp.get_table_names():
        for col in insp.get_columns(table):
            if isinstance(col["type"], sa.String):
                out[(table, col["name"])] = col["type"].length
    return out


async def _migrated_lengths(url: str) -> dict[tuple[str, str], int | None]:
    engine = create_engine(url)
    try:
        await upgrade(engine)
        async with engine.connect() as conn:
            return await conn.run_sync(_reflected_lengths)
    finally:
        await engine.dispose()


async def test_migrated_schema_holds_the_longest_values(database_url):
    """The migrations, not only the table definitions: an existing database is upgraded to the
    same limits."""
    lengths = await _migrated_lengths(database_url)
    too_short = []
    for key, produce in REGISTRY.items():
        length = lengths.get(key, "missing")
        if produce is UNBOUNDED:
            if length is not None:
                too_short.append((key, length, "unbounded"))
            continue
        value = produce()
        if length == "missing" or (length is not None and len(value) > length):
            too_short.append((key, length, len(value)))
    assert not too_short, f"(column, migrated length, longest value): {too_short}"


def _timed(sql: str) -> sa.TextClause:
    """Raw SQL whose `:t` is bound as a DateTime, as the models bind it (Python 3.12 deprecated
    sqlite3's implicit datetime adapter)."""
    return sa.text(sql).bindparams(sa.bindparam("t", type_=sa.DateTime(timezone=True)))


async def test_upgrading_keeps_every_row_and_takes_the_longest_values(database_url):
    """A database at the previous revision, with a session's messages and a memory: after the
    upgrade nothing is lost (on SQLite the tables are copied, and dropping `sessions` with foreign
    keys on would have deleted its messages), the memory is still found by its full-text index and
    new memories are indexed, and the longest values now fit."""
    from memory.db import Database
    from memory.longterm import scope_tag

    long_session = REGISTRY[("sessions", "id")]()
    engine = create_engine(database_url)
    try:
        await upgrade(engine, "0013_market_alerts")
        async with engine.begin() as conn:
            await conn.execute(
                _timed(
                    "INSERT INTO sessions (id, chat_key, user_id, title, model, created_at, updated_at, "
                    "archived) VALUES ('s1', 'telegram:1', 'u', '', 'm', :t, :t, false)"
                ),
                {"t": NOW},
            )
            for seq in range(3):
                await conn.execute(
                    _timed(
                        "INSERT INTO messages (session_id, seq, role, payload, created_at) "
                        "VALUES ('s1', :seq, 'user', '{}', :t)"
                    ),
                    {"seq": seq, "t": NOW},
                )
            await conn.execute(
                _timed(
                    "INSERT INTO memories (scope, memory_type, level, content, codes, scope_tag, source_ref, "
                    "source_kind, confidence, created_at, updated_at) VALUES ('u', 'preference', 'L1', "
                    "'likes 600519 a lot', '600519', :tag, '', 'user', 0.8, :t, :t)"
                ),
                {"t": NOW, "tag": scope_tag("u")},
            )
        await upgrade(engine, "head")
        async with engine.begin() as conn:
            assert (await conn.execute(sa.text("SELECT count(*) FROM messages"))).scalar() == 3
            assert (await conn.execute(sa.text("SELECT count(*) FROM memories"))).scalar() == 1
            await conn.execute(
                _timed(
                    "INSERT INTO sessions (id, chat_key, user_id, title, model, created_at, updated_at, "
                    "archived) VALUES (:id, 'k', 'u', '', :model, :t, :t, false)"
                ),
                {"id": long_session, "model": "m" * 300, "t": NOW},
            )
            await conn.execute(
                _timed(
                    "INSERT INTO messages (session_id, seq, role, payload, created_at) "
                    "VALUES (:id, 0, 'user', '{}', :t)"
                ),
                {"id": long_session, "t": NOW},
            )
            if engine.dialect.name == "sqlite":
                fk = (await conn.execute(sa.text("PRAGMA foreign_keys"))).scalar()
                assert fk == 1, "foreign keys are on again after the migrations"
        await engine.dispose()
        if database_url.startswith("sqlite"):
            from memory.longterm import MemoryStore

            async with Database(database_url) as db:
                store = MemoryStore(db)
                await store.add("u", "decision", "bought 000001 at the open")
                for words in ("likes 600519", "bought 000001"):
                    hits = await store.search_fts("u", [words])
                    assert [words in h.record.content for h in hits] == [True], words
    finally:
        await engine.dispose()


async def test_every_table_matches_the_migrations(database_url):
    """Autogenerate finds nothing between the migrated schema and the tables in the code, on both
    databases (types and lengths compared): a changed length comes with its migration."""
    from tests.storage.migration_diff import migration_diffs, table_of

    ours = set(Base.metadata.tables)
    diffs = [d for d in await migration_diffs(database_url) if table_of(d) in ours]
    # kept as it was: task_states.data is NOT NULL in the model and nullable since migration 0002;
    # the trigram index on PostgreSQL is made by raw DDL, not declared on the table
    known = [
        d
        for d in diffs
        if (isinstance(d, list) and d[0][0] == "modify_nullable" and d[0][2:4] == ("task_states", "data"))
        or (not isinstance(d, list) and d[0] == "remove_index" and d[1].name == "ix_memories_content_trgm")
    ]
    assert [d for d in diffs if d not in known] == []


async def test_a_name_too_long_for_its_column_is_refused_clearly(database_url):
    """Strategy and trader names are the model's choice: one the column cannot hold is a clear
    error on both databases (not PostgreSQL's "value too long", not a silent cut on SQLite)."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from markets.errors import MarketError
    from markets.strategies import MAX_NAME_CHARS, StrategyStore

    engine = create_engine(database_url)
    try:
        await upgrade(engine)
        store = StrategyStore(async_sessionmaker(engine, expire_on_commit=False))
        longest_ok = "策" * MAX_NAME_CHARS
        await store.create("u", longest_ok)
        with pytest.raises(MarketError, match=f"at most {MAX_NAME_CHARS} characters"):
            await store.create("u", longest_ok + "x")
        with pytest.raises(MarketError, match="at most"):
            await store.create_trader("u", "t" * (MAX_NAME_CHARS + 1), longest_ok)
        assert (await store.create_trader("u", "t" * MAX_NAME_CHARS, longest_ok))[
            "name"
        ] == "t" * MAX_NAME_CHARS
    finally:
        await engine.dispose()
