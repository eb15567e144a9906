"""The PostgreSQL server the tests may use: CI starts one and names it in TAPEBOT_TEST_POSTGRES_URL;
without it the PostgreSQL cases are skipped."""

from __future__ import annotations

import os

import pytest

PG_URL = os.environ.get("TAPEBOT_TEST_POSTGRES_URL", "")
# the backends a storage test runs on: a SQLite file always, PostgreSQL when a server is set
DATABASES = ["sqlite", "postgres"] if PG_URL else ["sqlite"]


async def empty_schema(url: str) -> None:
    """Empty the `public` schema of the PostgreSQL database at `url` (tables, types, Alembic's
    version): the next user starts from a database that has never been migrated."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    finally:
        await engine.dispose()


async def fresh_postgres() -> str:
    """The server's URL, its `public` schema emptied. Skips the test without a server."""
    if not PG_URL:
        pytest.skip("no PostgreSQL server (set TAPEBOT_TEST_POSTGRES_URL)")
    await empty_schema(PG_URL)
    return PG_URL
