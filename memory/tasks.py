"""Tables for background tasks and the scheduler, and the SQL task ledger (`SqlTaskStore`).

Tables (migration 0004_tasks_scheduler): `background_tasks` (the ledger), `schedules` (per-chat
briefs), `schedule_runs` (one row per schedule and local run date: the idempotency key that stops
a double fire), `scheduler_leases` (which process runs the scheduler), `chat_timezones` (a chat's
default zone), `scheduler_next_runs` (each scheduled job's next firing, so a restart or a takeover
neither skips nor repeats one). `scheduler/store.py` queries the scheduler tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    and_,
    delete,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.task_ledger import ACTIVE, TERMINAL, TaskAttachment, TaskRecord
from memory.base import Base
from memory.db import Database, rowcount
from memory.models import META, UTCDateTime, column

# Plain Core tables, not ORM classes: every query here and in scheduler/store.py is a Core statement,
# and mapping five classes cost every process ~7 ms at import. Defined exactly as the
# declarative classes they were (tests/storage/test_storage_plain_tables.py holds the DDL).
TASKS = Table(
    "background_tasks",
    META,
    column("id", String(32), primary_key=True),
    column("session_id", String(128), index=True),
    column("chat_key", String(255), default="", index=True),
    column("tool_name", String(128)),
    column("call_id", Text, default=""),  # the provider's id: no bound of ours
    column("arguments", JSON, default=dict),
    column("status", String(16), index=True),
    column("stage", String(200), default=""),
    column("detail", Text, default=""),
    column("percent", Float, null=True),
    column("result", Text, null=True),
    column("attachments", JSON, default=list),
    column("error", Text, default=""),
    column("timeout", Float, null=True),
    column("owner", String(64), default=""),
    column("created_at", UTCDateTime()),
    column("started_at", UTCDateTime(), null=True),
    column("finished_at", UTCDateTime(), null=True),
    column("heartbeat_at", UTCDateTime(), null=True),
    column("notified", Boolean, default=False),
)

SCHEDULES = Table(
    "schedules",
    META,
    column("id", String(32), primary_key=True),
    column("chat_key", String(255), index=True),
    column("kind", String(16), default="brief"),
    column("spec", String(64)),  # "08:30" | "weekdays 21:00" | "trading_days 08:30"
    column("tz", String(64)),  # IANA name
    column("paused", Boolean, default=False),
    column("created_by", String(128), default=""),
    column("created_at", UTCDateTime()),
    column("updated_at", UTCDateTime()),
    column("last_run_at", UTCDateTime(), null=True),
    column("last_status", String(64), default=""),
    column("last_error", Text, default=""),
    column("consecutive_failures", Integer, default=0),
)

# One row per (schedule, local run date): claimed before a brief runs, so a second fire of the same
# day (a second scheduler, a DST fall-back hour, a catch-up after a takeover) is a no-op.
SCHEDULE_RUNS = Table(
    "schedule_runs",
    META,
    column("schedule_id", String(32), primary_key=True),
    column("run_date", String(10), primary_key=True),  # YYYY-MM-DD in the schedule's zone
    column("scheduled_for", UTCDateTime()),
    column("started_at", UTCDateTime()),
    column("finished_at", UTCDateTime(), null=True),
    column("status", String(16), default="running"),
    column("attempts", Integer, default=0),
    column("error", Text, default=""),
    column("owner", String(128), default=""),
)

SCHEDULER_LEASES = Table(
    "scheduler_leases",
    META,
    column("name", String(64), primary_key=True),
    column("owner", String(128)),
    column("acquired_at", UTCDateTime()),
    column("expires_at", UTCDateTime()),
    # what a lease is for, when its name cannot say it (a chat's key: bot/replicas.py)
    column("subject", String(255), null=True),
)

# The next firing of each job the scheduler runs ("brief:<schedule id>", "housekeeping:<name>"). The
# schedule itself lives only in `schedules`; APScheduler keeps its jobs in memory, built from these.
SCHEDULER_NEXT_RUNS = Table(
    "scheduler_next_runs",
    META,
    column("job_id", String(64), primary_key=True),
    column("next_run_at", UTCDateTime()),
)

CHAT_TIMEZONES = Table(
    "chat_timezones",
    META,
    column("chat_key", String(255), primary_key=True),
    column("tz", String(64)),
    column("updated_at", UTCDateTime()),
)

Index("ix_background_tasks_session_created", TASKS.c.session_id, TASKS.c.created_at)
Index("ix_schedule_runs_started", SCHEDULE_RUNS.c.started_at)

TABLES: tuple[Table, ...] = (
    TASKS,
    SCHEDULES,
    SCHEDULE_RUNS,
    SCHEDULER_LEASES,
    SCHEDULER_NEXT_RUNS,
    CHAT_TIMEZONES,
)


async def create_tables(engine: AsyncEngine) -> None:
    """Create this module's tables if missing (tests and benches; production runs Alembic)."""
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all, tables=list(TABLES), checkfirst=True)


# ---- the task ledger ------------------------------------------------------------------------------
def _to_record(row: Row[Any]) -> TaskRecord:
    return TaskRecord(
        id=row.id,
        session_id=row.session_id,
        chat_key=row.chat_key,
        tool_name=row.tool_name,
        call_id=row.call_id,
        arguments=row.arguments or {},
        status=row.status,
        stage=row.stage,
        detail=row.detail,
        percent=row.percent,
        result=row.result,
        attachments=[TaskAttachment(**a) for a in (row.attachments or [])],
        error=row.error,
        timeout=row.timeout,
        owner=row.owner,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        heartbeat_at=row.heartbeat_at,
        notified=row.notified,
    )


_T = TASKS


_ACTIVE = sorted(ACTIVE)
_TERMINAL = sorted(TERMINAL)


class SqlTaskStore:
    """`agent.task_ledger.TaskStore` on SQLAlchemy (async). Every state change is one statement
    guarded by the current status, so concurrent writers (a sweep, a cancel from another
    process, the owner finishing) resolve as first-writer-wins."""

    def __init__(self, db: Database):
        self.db = db

    async def insert_task(self, record: TaskRecord) -> None:
        values = record.model_dump()
        values["attachments"] = [a.model_dump() for a in record.attachments]
        async with self.db.session() as conn:
            await conn.execute(_T.insert().values(**values))

    async def start_task(self, task_id: str, *, started_at: datetime) -> bool:
        stmt = (
            update(_T)
            .where(_T.c.id == task_id, _T.c.status == "queued")
            .values(status="running", started_at=started_at, heartbeat_at=started_at)
        )
        async with self.db.session() as conn:
            return rowcount(await conn.execute(stmt)) == 1

    async def update_progress(
        self, task_id: str, *, stage: str, detail: str, percent: float | None, at: datetime
    ) -> None:
        stmt = (
            update(_T)
            .where(_T.c.id == task_id, _T.c.status.in_(_ACTIVE))
            .values(stage=stage, detail=detail, percent=percent, heartbeat_at=at)
        )
        async with self.db.session() as conn:
            await conn.execute(stmt)

    async def finish_task(self, record: TaskRecord) -> bool:
        stmt = (
            update(_T)
            .where(_T.c.id == record.id, _T.c.status.in_(_ACTIVE))
            .values(
                status=record.status,
                stage=record.stage,
                detail=record.detail,
                percent=record.percent,
                result=record.result,
                attachments=[a.model_dump() for a in record.attachments],
                error=record.error,
                started_at=record.started_at,
                finished_at=record.finished_at,
            )
        )
        async with self.db.session() as conn:
            return rowcount(await conn.execute(stmt)) == 1

    async def get_task(self, task_id: str) -> TaskRecord | None:
        async with self.db.read() as conn:
            row = (await conn.execute(select(_T).where(_T.c.id == task_id))).first()
        return _to_record(row) if row else None

    async def list_tasks(
        self, *, session_id: str | None = None, chat_key: str | None = None, limit: int = 20
    ) -> list[TaskRecord]:
        stmt = select(_T).order_by(_T.c.created_at.desc()).limit(limit)
        if session_id is not None:
            stmt = stmt.where(_T.c.session_id == session_id)
        if chat_key is not None:
            stmt = stmt.where(_T.c.chat_key == chat_key)
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [_to_record(r) for r in rows]

    async def heartbeat(self, owner: str, at: datetime) -> None:
        stmt = update(_T).where(_T.c.owner == owner, _T.c.status.in_(_ACTIVE)).values(heartbeat_at=at)
        async with self.db.session() as conn:
            await conn.execute(stmt)

    async def mark_lost(
        self, *, stale_before: datetime, exclude_owner: str, at: datetime, reason: str
    ) -> list[TaskRecord]:
        stale = and_(
            _T.c.status.in_(_ACTIVE),
            _T.c.owner != exclude_owner,
            or_(_T.c.heartbeat_at.is_(None), _T.c.heartbeat_at < stale_before),
        )
        async with self.db.session() as conn:
            ids = [r.id for r in (await conn.execute(select(_T.c.id).where(stale))).all()]
            if not ids:
                return []
            await conn.execute(
                update(_T)
                .where(_T.c.id.in_(ids), _T.c.status.in_(_ACTIVE))
                .values(status="lost", error=reason, finished_at=at)
            )
            rows = (await conn.execute(select(_T).where(_T.c.id.in_(ids), _T.c.status == "lost"))).all()
        return [_to_record(r) for r in rows]

    async def claim_notification(self, task_id: str) -> bool:
        stmt = (
            update(_T)
            .where(_T.c.id == task_id, _T.c.notified.is_(False), _T.c.status.in_(_TERMINAL))
            .values(notified=True)
        )
        async with self.db.session() as conn:
            return rowcount(await conn.execute(stmt)) == 1

    async def release_notification(self, task_id: str) -> None:
        async with self.db.session() as conn:
            await conn.execute(update(_T).where(_T.c.id == task_id).values(notified=False))

    async def pending_notifications(self) -> list[TaskRecord]:
        stmt = (
            select(_T)
            .where(_T.c.notified.is_(False), _T.c.status.in_(_TERMINAL))
            .order_by(_T.c.finished_at, _T.c.created_at)
        )
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        return [_to_record(r) for r in rows]

    async def delete_finished(self, before: datetime) -> int:
        stmt = delete(_T).where(_T.c.status.in_(_TERMINAL), _T.c.finished_at < before)
        async with self.db.session() as conn:
            return rowcount(await conn.execute(stmt))
