"""What Alembic's autogenerate finds between the migrated schema and the tables in the code, by
table: the storage tests that hold the two equal share it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory.base import Base
from memory.db import create_engine, upgrade


async def migration_diffs(db: Path | str) -> list[Any]:
    """Migrate a fresh SQLite file at `db` (or the empty database at the URL `db`) to head;
    autogenerate's diffs against the code."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = create_engine(db if isinstance(db, str) else f"sqlite+aiosqlite:///{db}")
    try:
        await upgrade(engine)

        def diff(sync_conn: Any) -> list[Any]:
            ctx = MigrationContext.configure(sync_conn, opts={"compare_type": True})
            return list(compare_metadata(ctx, Base.metadata))

        async with engine.connect() as conn:
            return await conn.run_sync(diff)
    finally:
        await engine.dispose()


def table_of(d: Any) -> str:
    """The table a diff is about."""
    d = d[0] if isinstance(d, list) else d  # modify_* diffs come wrapped in a list
    if d[0] in ("add_table", "remove_table"):
        return str(d[1].name)
    if d[0] in ("add_column", "remove_column") or d[0].startswith("modify_"):
        return str(d[2])
    return str(d[1].table.name)  # indexes, constraints, foreign keys
