"""`SqlUsageStore`: `agent.ports.UsageStore` — a row per model call, and the totals `tapebot usage`
and `/status` show."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from agent.ports import UsageRecord, utcnow
from agent.providers.metered import SIDE_PREFIX, side_kind
from memory.models import USAGE
from memory.store_sql import SqlBase, usage_values


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Totals for one model over a period (`tapebot usage`, `/status`)."""

    model: str
    turns: int  # distinct turns that used this model
    calls: int  # usage records (model calls)
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float


class SqlUsageStore(SqlBase):
    """Implements agent.ports.UsageStore."""

    # ---- usage -------------------------------------------------------------------------------
    async def record_usage(self, record: UsageRecord) -> None:
        values = usage_values(record)
        await self.db.run(lambda c: c.execute(self._sql.insert_usage, values), write=True)

    async def usage_totals(
        self, days: float | None = 30, *, session_id: str | None = None, now: datetime | None = None
    ) -> list[UsageTotal]:
        """Per-model totals over the last `days` (None = all time), optionally for one session;
        sorted by cost, then model."""
        totals = await self._usage(days, session_id, now, per_model=True)
        return sorted(totals, key=lambda t: (-t.cost, t.model))

    async def usage_summary(
        self, days: float | None = 30, *, session_id: str | None = None, now: datetime | None = None
    ) -> UsageTotal:
        """All models together (`model="*"`); `turns` counts each turn once even if it used two models."""
        rows = await self._usage(days, session_id, now, per_model=False)
        return rows[0] if rows else UsageTotal("*", 0, 0, 0, 0, 0, 0, 0.0)

    async def _usage(
        self, days: float | None, session_id: str | None, now: datetime | None, *, per_model: bool
    ) -> list[UsageTotal]:
        label = USAGE.c.model if per_model else sa.literal("*")
        side = USAGE.c.turn_id.like(f"{SIDE_PREFIX}%")
        stmt = sa.select(
            label,
            # side calls (memory upkeep) are model calls but no turn of anyone's
            sa.func.count(sa.distinct(sa.case((side, None), else_=USAGE.c.turn_id))),
            sa.func.count(USAGE.c.id),
            sa.func.coalesce(sa.func.sum(USAGE.c.input_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.output_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.cache_read_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.cache_write_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.cost), 0.0),
        )
        if per_model:
            stmt = stmt.group_by(USAGE.c.model)
        if days is not None:
            stmt = stmt.where(USAGE.c.created_at >= (now or utcnow()) - timedelta(days=days))
        if session_id is not None:
            stmt = stmt.where(USAGE.c.session_id == session_id)
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        return [
            UsageTotal(
                model=str(r[0]),
                turns=int(r[1]),
                calls=int(r[2]),
                input_tokens=int(r[3]),
                output_tokens=int(r[4]),
                cache_read_tokens=int(r[5]),
                cache_write_tokens=int(r[6]),
                cost=float(r[7]),
            )
            for r in rows
            if int(r[2]) > 0  # an aggregate over no rows still returns one row
        ]

    async def side_call_totals(
        self, days: float | None = 30, *, now: datetime | None = None
    ) -> list[UsageTotal]:
        """The side calls (memory extraction, TaskState, …) over the last `days`, one row per kind
        (`model` holds the kind; `turns` is 0)."""
        stmt = sa.select(
            USAGE.c.turn_id,
            USAGE.c.input_tokens,
            USAGE.c.output_tokens,
            USAGE.c.cache_read_tokens,
            USAGE.c.cache_write_tokens,
            USAGE.c.cost,
        ).where(USAGE.c.turn_id.like(f"{SIDE_PREFIX}%"))
        if days is not None:
            stmt = stmt.where(USAGE.c.created_at >= (now or utcnow()) - timedelta(days=days))
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        by_kind: dict[str, list[Any]] = {}
        for r in rows:
            kind = side_kind(str(r[0])) or "other"
            acc = by_kind.setdefault(kind, [0, 0, 0, 0, 0, 0.0])
            acc[0] += 1
            for i in range(1, 5):
                acc[i] += int(r[i] or 0)
            acc[5] += float(r[5] or 0.0)
        return [
            UsageTotal(kind, 0, int(a[0]), int(a[1]), int(a[2]), int(a[3]), int(a[4]), float(a[5]))
            for kind, a in sorted(by_kind.items())
        ]
