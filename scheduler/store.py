"""The scheduler's persistence: schedules, run claims, the lease (through `memory.coordination`),
chat time zones (tables are in `memory.tasks`). All async, on the project's database.

Hot path (one brief firing): a claim of the run — which also checks that the schedule still
exists and is active — and a record of the outcome. Both go through a group commit: requests that
queue up while one transaction runs share the next one, so a thousand briefs due at 08:30 cost a
few transactions, not two thousand. Writes are serialized by a FIFO asyncio lock: SQLite has one
writer, and queueing in-process is much cheaper than SQLite's busy handler, which sleeps in growing
steps while it waits for the lock."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel
from sqlalchemy import Integer, bindparam, delete, func, select, tuple_, update
from sqlalchemy.engine import Row
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from memory.coordination import Lease, Leases
from memory.db import Database, rowcount, storage_error
from memory.models import UTCDateTime
from memory.tasks import (
    CHAT_TIMEZONES,
    SCHEDULE_RUNS,
    SCHEDULER_NEXT_RUNS,
    SCHEDULES,
)
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


ClaimResult = Literal["claimed", "duplicate", "missing"]


_S = SCHEDULES
_R = SCHEDULE_RUNS
_Z = CHAT_TIMEZONES
_N = SCHEDULER_NEXT_RUNS
_CHUNK = 500  # ids per IN (...) list


def _schedule(row: Row[Any]) -> Schedule:
    return Schedule.model_validate(dict(row._mapping))


@dataclass(frozen=True, slots=True)
class _Claim:
    schedule_id: str
    chat_key: str
    run_date: str
    scheduled_for: datetime
    at: datetime
    owner: str


@dataclass(frozen=True, slots=True)
class _Completion:
    schedule_id: str
    run_date: str | None
    status: str
    attempts: int
    error: str
    at: datetime
    last_status: str
    failed: bool


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


class _GroupCommit(Generic[_Item, _Result]):
    """Batches write requests: everything queued while a transaction runs goes into the next."""

    MAX_BATCH = 500

    def __init__(
        self,
        store: ScheduleStore,
        handler: Callable[[AsyncConnection, list[_Item]], Awaitable[list[_Result]]],
    ):
        self._store = store
        self._handler = handler  # async (conn, items) -> results, one per item
        self._pending: list[tuple[_Item, asyncio.Future[_Result]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: _Item) -> _Result:
        fut: asyncio.Future[_Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[: self.MAX_BATCH], self._pending[self.MAX_BATCH :]
            try:
                async with self._store._write() as conn:
                    results = await self._handler(conn, [item for item, _ in batch])
            except Exception as exc:  # noqa: BLE001 — handed to every waiting future, which re-raises it
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
            else:
                for (_, fut), result in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)


class ScheduleStore:
    def __init__(self, db: Database):
        self.db = db
        self._write_lock = asyncio.Lock()
        self.leases = Leases(db)  # the same named leases as the chats' and the poller's
        self._claims = _GroupCommit(self, self._claim_batch)
        self._completions = _GroupCommit(self, self._complete_batch)

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """One write transaction (IMMEDIATE on SQLite), serialized in-process."""
        async with self._write_lock:
            try:
                async with self.db.engine.begin() as conn:
                    yield conn
            except SQLAlchemyError as exc:
                raise storage_error(exc, self.db.url) from exc

    # ---- schedules --------------------------------------------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> None:
        async with self._write() as conn:
            await conn.execute(_S.insert().values(**schedule.model_dump()))

    async def create_schedules(self, schedules: list[Schedule]) -> None:
        if schedules:
            async with self._write() as conn:
                await conn.execute(_S.insert(), [s.model_dump() for s in schedules])

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
        async with self._write() as conn:
            res = await conn.execute(
                update(_S).where(_S.c.id == schedule_id).values(paused=paused, updated_at=at)
            )
            return rowcount(res) == 1

    async def delete_schedule(self, schedule_id: str) -> bool:
        async with self._write() as conn:
            await conn.execute(delete(_R).where(_R.c.schedule_id == schedule_id))
            await conn.execute(delete(_N).where(_N.c.job_id == brief_job_id(schedule_id)))
            res = await conn.execute(delete(_S).where(_S.c.id == schedule_id))
            return rowcount(res) == 1

    async def note_status(self, schedule_id: str, status: str) -> None:
        async with self._write() as conn:
            await conn.execute(update(_S).where(_S.c.id == schedule_id).values(last_status=status))

    # ---- runs: claim before, complete after -------------------------------------------------------
    async def claim_run(
        self,
        schedule_id: str,
        chat_key: str,
        run_date: str,
        *,
        scheduled_for: datetime,
        at: datetime,
        owner: str = "",
    ) -> ClaimResult:
        """Insert the (schedule, local date) run row if the schedule is still active for this
        chat. "duplicate" if that run was already claimed (by anyone); "missing" if the schedule
        is gone or paused."""
        return await self._claims.submit(_Claim(schedule_id, chat_key, run_date, scheduled_for, at, owner))

    async def complete_run(
        self,
        schedule_id: str,
        run_date: str | None,
        *,
        status: str,
        attempts: int,
        error: str,
        at: datetime,
        last_status: str,
        failed: bool,
    ) -> None:
        """Record a brief's outcome on the run row (if any) and on the schedule (what /status shows)."""
        await self._completions.submit(
            _Completion(schedule_id, run_date, status, attempts, error, at, last_status, failed)
        )

    async def _claim_batch(self, conn: AsyncConnection, claims: list[_Claim]) -> list[ClaimResult]:
        ids = {c.schedule_id for c in claims}
        active = {
            (r.id, r.chat_key)
            for r in await conn.execute(
                select(_S.c.id, _S.c.chat_key).where(_S.c.id.in_(ids), _S.c.paused.is_(False))
            )
        }
        results: list[ClaimResult | None] = [None] * len(claims)
        mine: dict[tuple[str, str], tuple[int, str]] = {}
        rows = []
        for i, c in enumerate(claims):
            key = (c.schedule_id, c.run_date)
            if (c.schedule_id, c.chat_key) not in active:
                results[i] = "missing"
            elif key in mine:
                results[i] = "duplicate"  # fired twice within one batch
            else:
                token = f"{c.owner}/{secrets.token_hex(4)}"  # tells our row from a concurrent claimer's
                mine[key] = (i, token)
                rows.append(
                    {
                        "schedule_id": c.schedule_id,
                        "run_date": c.run_date,
                        "scheduled_for": c.scheduled_for,
                        "started_at": c.at,
                        "status": "running",
                        "attempts": 0,
                        "error": "",
                        "owner": token,
                    }
                )
        if rows:
            await conn.execute(self.db.dialect_insert(_R).on_conflict_do_nothing(), rows)
            holders = {
                (r.schedule_id, r.run_date): r.owner
                for r in await conn.execute(
                    select(_R.c.schedule_id, _R.c.run_date, _R.c.owner).where(
                        tuple_(_R.c.schedule_id, _R.c.run_date).in_(list(mine))
                    )
                )
            }
            for key, (i, token) in mine.items():
                results[i] = "claimed" if holders.get(key) == token else "duplicate"
        return [r or "missing" for r in results]

    async def _complete_batch(self, conn: AsyncConnection, items: list[_Completion]) -> list[None]:
        runs = [
            {
                "b_sid": c.schedule_id,
                "b_date": c.run_date,
                "b_status": c.status,
                "b_attempts": c.attempts,
                "b_error": c.error,
                "b_at": c.at,
            }
            for c in items
            if c.run_date
        ]
        if runs:
            await conn.execute(
                update(_R)
                .where(_R.c.schedule_id == bindparam("b_sid"), _R.c.run_date == bindparam("b_date"))
                .values(
                    status=bindparam("b_status"),
                    attempts=bindparam("b_attempts"),
                    error=bindparam("b_error"),
                    finished_at=bindparam("b_at", type_=UTCDateTime()),
                ),
                runs,
            )
        # consecutive_failures = n * keep + inc: (1, 1) after a failure, (0, 0) after a success
        await conn.execute(
            update(_S)
            .where(_S.c.id == bindparam("b_sid"))
            .values(
                last_status=bindparam("b_last"),
                last_error=bindparam("b_error"),
                last_run_at=bindparam("b_at", type_=UTCDateTime()),
                consecutive_failures=_S.c.consecutive_failures * bindparam("b_keep", type_=Integer())
                + bindparam("b_inc", type_=Integer()),
            ),
            [
                {
                    "b_sid": c.schedule_id,
                    "b_last": c.last_status,
                    "b_error": c.error,
                    "b_at": c.at,
                    "b_keep": int(c.failed),
                    "b_inc": int(c.failed),
                }
                for c in items
            ],
        )
        return [None] * len(items)

    async def get_run(self, schedule_id: str, run_date: str) -> dict[str, Any] | None:
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(_R).where(_R.c.schedule_id == schedule_id, _R.c.run_date == run_date)
                )
            ).first()
        return dict(row._mapping) if row else None

    async def prune_runs(self, before: datetime) -> int:
        async with self._write() as conn:
            return rowcount(await conn.execute(delete(_R).where(_R.c.started_at < before)))

    async def active_versions(self) -> dict[str, datetime]:
        """{schedule id: updated_at} of every active schedule: what the scheduler compares with
        its jobs at each lease renewal (two columns, no model: 10K rows stay cheap)."""
        async with self.db.read() as conn:
            rows = await conn.execute(select(_S.c.id, _S.c.updated_at).where(_S.c.paused.is_(False)))
            return {r.id: r.updated_at for r in rows}

    async def get_schedules(self, ids: list[str]) -> list[Schedule]:
        out: list[Schedule] = []
        async with self.db.read() as conn:
            for i in range(0, len(ids), _CHUNK):
                stmt = select(_S).where(_S.c.id.in_(ids[i : i + _CHUNK]))
                out.extend(_schedule(r) for r in await conn.execute(stmt))
        return out

    # ---- next run times -----------------------------------------------------------------------------
    async def next_runs(self) -> dict[str, datetime]:
        """{job id: next run time} as last stored by whichever process ran the scheduler."""
        async with self.db.read() as conn:
            return {r.job_id: r.next_run_at for r in await conn.execute(select(_N))}

    async def save_next_runs(self, runs: dict[str, datetime | None]) -> None:
        """Store (or, for None, forget) jobs' next run times, all in one transaction."""
        if not runs:
            return
        ids = list(runs)
        rows = [{"job_id": k, "next_run_at": v} for k, v in runs.items() if v is not None]
        async with self._write() as conn:
            for i in range(0, len(ids), _CHUNK):  # replace: delete, then insert (portable upsert)
                await conn.execute(delete(_N).where(_N.c.job_id.in_(ids[i : i + _CHUNK])))
            if rows:
                await conn.execute(_N.insert(), rows)

    # ---- chat default zone ------------------------------------------------------------------------
    async def get_chat_timezone(self, chat_key: str) -> str | None:
        async with self.db.read() as conn:
            return (await conn.execute(select(_Z.c.tz).where(_Z.c.chat_key == chat_key))).scalar_one_or_none()

    async def set_chat_timezone(self, chat_key: str, tz: str, *, at: datetime) -> None:
        stmt = self.db.dialect_insert(_Z).values(chat_key=chat_key, tz=tz, updated_at=at)
        stmt = stmt.on_conflict_do_update(
            index_elements=[_Z.c.chat_key],
            set_={"tz": stmt.excluded.tz, "updated_at": stmt.excluded.updated_at},
        )
        async with self._write() as conn:
            await conn.execute(stmt)

    # ---- the lease ----------------------------------------------------------------------------------
    async def acquire_lease(self, name: str, owner: str, *, now: datetime, ttl: float) -> Lease:
        """Take or renew the lease if it is ours or expired; says who holds it afterwards."""
        return await self.leases.take(name, owner, now=now, ttl=ttl)

    async def release_lease(self, name: str, owner: str, *, now: datetime) -> None:
        """Expire our lease now so a standby process takes over at its next check."""
        await self.leases.release(name, owner, now=now)
