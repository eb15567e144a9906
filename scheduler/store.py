"""The scheduler's persistence: schedules, run claims, the lease, chat time zones (tables are in
`memory.tasks`). All async, on the project's engine."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import case, delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from memory.db import Database
from memory.tasks import ChatTimezoneRow, SchedulerLeaseRow, ScheduleRow, ScheduleRunRow
from scheduler.specs import BriefSpec, parse_stored_spec


class Schedule(BaseModel):
    id: str
    chat_key: str
    kind: Literal["brief"] = "brief"
    spec: str  # "08:30" | "weekdays 21:00" | "trading_days 08:30"
    tz: str
    paused: bool = False
    created_by: str = ""
    created_at: datetime
    updated_at: datetime
    last_run_at: datetime | None = None
    last_status: str = ""
    last_error: str = ""
    consecutive_failures: int = 0

    @property
    def brief_spec(self) -> BriefSpec:
        return parse_stored_spec(self.spec, self.tz)

    @property
    def job_id(self) -> str:
        return brief_job_id(self.id)


def brief_job_id(schedule_id: str) -> str:
    return f"brief:{schedule_id}"


def new_schedule_id() -> str:
    return f"sch_{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class LeaseState:
    held: bool  # True when the asking owner holds the lease now
    owner: str
    expires_at: datetime | None


_S = ScheduleRow.__table__
_R = ScheduleRunRow.__table__
_L = SchedulerLeaseRow.__table__
_Z = ChatTimezoneRow.__table__


def _schedule(row: Any) -> Schedule:
    return Schedule.model_validate(dict(row._mapping))


class ScheduleStore:
    """Writes run in `Database.session()` (IMMEDIATE on SQLite), reads in `Database.read()`.
    Inserts that may collide use a savepoint, so a unique violation is an answer, not an error."""

    def __init__(self, db: Database):
        self.db = db

    # ---- schedules --------------------------------------------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> None:
        async with self.db.session() as conn:
            await conn.execute(_S.insert().values(**schedule.model_dump()))

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        async with self.db.read() as conn:
            row = (await conn.execute(select(_S).where(_S.c.id == schedule_id))).first()
        return _schedule(row) if row else None

    async def list_schedules(
        self, chat_key: str | None = None, *, include_paused: bool = True
    ) -> list[Schedule]:
        stmt = select(_S).order_by(_S.c.created_at, _S.c.id)
        if chat_key is not None:
            stmt = stmt.where(_S.c.chat_key == chat_key)
        if not include_paused:
            stmt = stmt.where(_S.c.paused.is_(False))
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [_schedule(r) for r in rows]

    async def count_schedules(self, chat_key: str) -> int:
        async with self.db.read() as conn:
            return int(
                (await conn.execute(select(func.count()).where(_S.c.chat_key == chat_key))).scalar_one()
            )

    async def set_paused(self, schedule_id: str, paused: bool, *, at: datetime) -> bool:
        async with self.db.session() as conn:
            res = await conn.execute(
                update(_S).where(_S.c.id == schedule_id).values(paused=paused, updated_at=at)
            )
            return res.rowcount == 1

    async def delete_schedule(self, schedule_id: str) -> bool:
        async with self.db.session() as conn:
            await conn.execute(delete(_R).where(_R.c.schedule_id == schedule_id))
            res = await conn.execute(delete(_S).where(_S.c.id == schedule_id))
            return res.rowcount == 1

    async def record_result(
        self, schedule_id: str, *, status: str, error: str, at: datetime, ran: bool, failed: bool
    ) -> None:
        """Update last_status/last_error (what /status shows); `ran` sets last_run_at."""
        values: dict[str, Any] = {"last_status": status, "last_error": error}
        if ran:
            values["last_run_at"] = at
        values["consecutive_failures"] = (_S.c.consecutive_failures + 1) if failed else 0
        async with self.db.session() as conn:
            await conn.execute(update(_S).where(_S.c.id == schedule_id).values(**values))

    async def note_status(self, schedule_id: str, status: str) -> None:
        async with self.db.session() as conn:
            await conn.execute(update(_S).where(_S.c.id == schedule_id).values(last_status=status))

    # ---- run claims (idempotency) -----------------------------------------------------------------
    async def claim_run(
        self, schedule_id: str, run_date: str, *, scheduled_for: datetime, at: datetime, owner: str = ""
    ) -> bool:
        """Insert the (schedule, local date) run row; False if that run was already claimed."""
        insert = _R.insert().values(
            schedule_id=schedule_id,
            run_date=run_date,
            scheduled_for=scheduled_for,
            started_at=at,
            status="running",
            owner=owner,
        )
        return await self._insert_once(insert)

    async def _insert_once(self, insert: Any) -> bool:
        """Run an INSERT; False (not an error) when it hits the primary key."""
        async with self.db.session() as conn:
            try:
                async with conn.begin_nested():
                    await conn.execute(insert)
            except IntegrityError:
                return False
        return True

    async def finish_run(
        self, schedule_id: str, run_date: str, *, status: str, attempts: int, error: str, at: datetime
    ) -> None:
        async with self.db.session() as conn:
            await conn.execute(
                update(_R)
                .where(_R.c.schedule_id == schedule_id, _R.c.run_date == run_date)
                .values(status=status, attempts=attempts, error=error, finished_at=at)
            )

    async def get_run(self, schedule_id: str, run_date: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(_R).where(_R.c.schedule_id == schedule_id, _R.c.run_date == run_date)
                )
            ).first()
        return dict(row._mapping) if row else None

    async def prune_runs(self, before: datetime) -> int:
        async with self.db.session() as conn:
            return (await conn.execute(delete(_R).where(_R.c.started_at < before))).rowcount or 0

    # ---- chat default zone ------------------------------------------------------------------------
    async def get_chat_timezone(self, chat_key: str) -> str | None:
        async with self.db.read() as conn:
            return (await conn.execute(select(_Z.c.tz).where(_Z.c.chat_key == chat_key))).scalar_one_or_none()

    async def set_chat_timezone(self, chat_key: str, tz: str, *, at: datetime) -> None:
        async with self.db.session() as conn:
            res = await conn.execute(update(_Z).where(_Z.c.chat_key == chat_key).values(tz=tz, updated_at=at))
            if res.rowcount == 0:
                await conn.execute(_Z.insert().values(chat_key=chat_key, tz=tz, updated_at=at))

    # ---- the lease ----------------------------------------------------------------------------------
    async def acquire_lease(self, name: str, owner: str, *, now: datetime, ttl: float) -> LeaseState:
        """Take or renew the lease if it is ours or expired (one guarded UPDATE, or the first
        INSERT). Returns who holds it afterwards."""
        expires = now + timedelta(seconds=ttl)
        async with self.db.session() as conn:
            res = await conn.execute(
                update(_L)
                .where(_L.c.name == name, or_(_L.c.owner == owner, _L.c.expires_at < now))
                .values(
                    owner=owner,
                    expires_at=expires,
                    acquired_at=case((_L.c.owner == owner, _L.c.acquired_at), else_=now),
                )
            )
            if res.rowcount == 1:
                return LeaseState(True, owner, expires)
        if await self._insert_once(
            _L.insert().values(name=name, owner=owner, acquired_at=now, expires_at=expires)
        ):
            return LeaseState(True, owner, expires)
        async with self.db.read() as conn:
            row = (await conn.execute(select(_L.c.owner, _L.c.expires_at).where(_L.c.name == name))).first()
        if row is None:  # pragma: no cover - deleted between our statements; try again next tick
            return LeaseState(False, "", None)
        return LeaseState(row.owner == owner, row.owner, row.expires_at)

    async def release_lease(self, name: str, owner: str, *, now: datetime) -> None:
        """Expire our lease now so a standby process takes over at its next check."""
        async with self.db.session() as conn:
            await conn.execute(
                update(_L)
                .where(_L.c.name == name, _L.c.owner == owner)
                .values(expires_at=now - timedelta(seconds=1))
            )
