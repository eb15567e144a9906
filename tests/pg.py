"""The PostgreSQL server the tests may use: CI starts one and names it in TAPEBOT_TEST_POSTGRES_URL;
without it the PostgreSQL cases are skipped."""

from __future__ import annotations

import os

import pytest

PG_URL = os.environ.get("TAPEBOT_TEST_POSTGRES_URL", "")


async def fresh_postgres() -> str:
    """The server's URL, its `public` schema emptied (tables, types, Alembic's version): a test
    starts from a database that has never been migrated. Skips the test without a server."""
    if not PG_URL:
        pytest.skip("no PostgreSQL server (set TAPEBOT_TEST_POSTGRES_URL)")
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(PG_URL)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP SCHEMA public CASCADE"))
            await conn.execute(text("CREATE SCHEMA public"))
    finally:
        await engine.dispose()
    return PG_URL
