"""Alembic environment for tapebot. Run programmatically by `memory.db.upgrade()` (which passes an
open connection in `config.attributes["connection"]`), or in offline mode by `memory.db.migration_sql()`.
No alembic.ini is needed."""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context

import memory.models  # noqa: F401  (registers the core tables on Base.metadata)
from memory.base import Base

config = context.config
# op.create_table picks the naming convention up from here.
target_metadata = Base.metadata


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
        **kwargs,
    )


def run_offline() -> None:
    _configure(url=config.get_main_option("sqlalchemy.url"), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def _run_on(connection: object) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    from memory.db import create_engine

    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run_on)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_offline()
elif (conn := config.attributes.get("connection")) is not None:
    _run_on(conn)
else:  # invoked by the alembic CLI with a URL
    asyncio.run(_run_async())
