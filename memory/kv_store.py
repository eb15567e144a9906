"""`SqlKV`: a key-value corner for state with no shape of its own (JSON values)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent.ports import utcnow
from memory.db import rowcount
from memory.models import KV
from memory.store_sql import SqlBase


class SqlKV(SqlBase):
    """Key-value rows: JSON values under a string key."""

    # ---- key-value ---------------------------------------------------------------------------
    async def kv_get(self, key: str, default: Any = None) -> Any:
        row = await self.db.run(lambda c: c.execute(self._sql.kv_get, {"key": key}).first())
        return default if row is None else row[0]

    async def kv_set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under `key` (insert or replace)."""
        row = {"key": key, "value": value, "updated_at": utcnow()}
        await self.db.run(lambda c: c.execute(self._sql.kv_set, row), write=True)

    async def kv_delete(self, key: str) -> bool:
        def work(c: Connection) -> Any:
            return rowcount(c.execute(sa.delete(KV).where(KV.c.key == key))) > 0

        return await self.db.run(work, write=True)
