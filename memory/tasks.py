"""Tables for background tasks and the scheduler, and the SQL task ledger (`SqlTaskStore`).

Tables (migration 0004_tasks_scheduler): `background_tasks` (the ledger), `schedules` (per-chat
briefs), `schedule_runs` (one row per schedule and local run date: the idempotency key that stops
a double fire), `scheduler_leases` (which process runs the scheduler), `chat_timezones` (a chat's
default zone). APScheduler's own `apscheduler_jobs` table is created by the migration too, with the
schema its SQLAlchemyJobStore expects. `scheduler/store.py` queries the scheduler tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

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
from sqlalchemy.engine import CursorResult, Row
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Mapped, mapped_column

from agent.task_ledger import ACTIVE, TERMINAL, TaskAttachment, TaskRecord
from memory.base import Base
from memory.db import Database
from memory.models import UTCDateTime


class TaskRow(Base):
    __tablename__ = "background_tasks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    chat_key: Mapped[str] = mapped_column(String(255), default="", index=True)
    tool_name: Mapped[str] = mapped_column(String(128))
    call_id: Mapped[str] = mapped_column(String(128), default="")
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), index=True)
    stage: Mapped[str] = mapped_column(String(200), default="")
    detail: Mapped[str] = mapped_column(Text, default="")
    percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    result: Mapped[str | None] = mapped_column(Text, nullable=True)
    attachments: Mapped[list[dict[str, str]]] = mapped_column(JSON, default=list)
    error: Mapped[str] = mapped_column(Text, default="")
    timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    owner: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    notified: Mapped[bool] = mapped_column(Boolean, default=False)


class ScheduleRow(Base):
    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    chat_key: Mapped[str] = mapped_column(String(255), index=True)
    kind: Mapped[str] = mapped_column(String(16), default="brief")
    spec: Mapped[str] = mapped_column(String(64))  # "08:30" | "weekdays 21:00" | "trading_days 08:30"
    tz: Mapped[str] = mapped_column(String(64))  # IANA name
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    created_by: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_status: Mapped[str] = mapped_column(String(64), default="")
    last_error: Mapped[str] = mapped_column(Text, default="")
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)


class ScheduleRunRow(Base):
    """One row per (schedule, local run date): claimed before a brief runs, so a second fire of the
    same day (a second scheduler, a DST fall-back hour, a catch-up after a takeover) is a no-op."""

    __tablename__ = "schedule_runs"

    schedule_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_date: Mapped[str] = mapped_column(String(10), primary_key=True)  # YYYY-MM-DD in the schedule's zone
    scheduled_for: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    status: Mapped[str] = mapped_column(String(16), default="running")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(Text, default="")
    owner: Mapped[str] = mapped_column(String(128), default="")


class SchedulerLeaseRow(Base):
    __tablename__ = "scheduler_leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ChatTimezoneRow(Base):
    __tablename__ = "chat_timezones"

    chat_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    tz: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


Index("ix_background_tasks_session_created", TaskRow.session_id, TaskRow.created_at)
Index("ix_schedule_runs_started", ScheduleRunRow.started_at)

TABLES: tuple[Table, ...] = tuple(
    cast(Table, row.__table__)
    for row in (TaskRow, ScheduleRow, ScheduleRunRow, SchedulerLeaseRow, ChatTimezoneRow)
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


_T = cast(Table, TaskRow.__table__)


def rowcount(result: Any) -> int:
    """Rows matched by an UPDATE/DELETE (typed access to CursorResult.rowcount)."""
    return cast(CursorResult[Any], result).rowcount or 0


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
