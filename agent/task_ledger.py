"""The background-task ledger: what a task record is, the store port that persists it
(`memory.tasks.SqlTaskStore` on the database) and an in-memory store next to it (unit tests, the
terminal without a database). `agent.background_tasks.TaskManager` runs the tasks."""

from __future__ import annotations

import builtins
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from agent.ports import utcnow

TaskStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "timed_out", "lost"]
ACTIVE: frozenset[str] = frozenset({"queued", "running"})
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed_out", "lost"})
DEFAULT_RETENTION = timedelta(days=7)


class TaskAttachment(BaseModel):
    path: str
    mime: str = "image/png"
    caption: str = ""


class TaskRecord(BaseModel):
    """One background task in the ledger."""

    id: str
    session_id: str
    chat_key: str = ""
    tool_name: str
    call_id: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)
    status: TaskStatus = "queued"
    stage: str = ""
    detail: str = ""
    percent: float | None = None
    result: str | None = None
    attachments: list[TaskAttachment] = Field(default_factory=list)
    error: str = ""
    timeout: float | None = None
    owner: str = ""  # the TaskManager instance running it (see heartbeats)
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    heartbeat_at: datetime | None = None
    notified: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def elapsed(self, now: datetime | None = None) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or now or utcnow()
        return max(0.0, (end - self.started_at).total_seconds())

    @property
    def ref(self) -> str:
        return f"task://{self.id}"


class TaskStore(Protocol):
    """Persistence for the ledger (SQL in `memory.tasks.SqlTaskStore`, in-memory below)."""

    async def insert_task(self, record: TaskRecord) -> None: ...

    async def start_task(self, task_id: str, *, started_at: datetime) -> bool:
        """queued → running. False if the task is no longer queued."""
        ...

    async def update_progress(
        self, task_id: str, *, stage: str, detail: str, percent: float | None, at: datetime
    ) -> None:
        """Only while the task is active; also counts as a heartbeat."""
        ...

    async def finish_task(self, record: TaskRecord) -> bool:
        """Write the terminal state (status, result, error, attachments, finished_at) if the task is
        still active. First writer wins: False if someone else (a sweep, a cancel) finished it."""
        ...

    async def get_task(self, task_id: str) -> TaskRecord | None: ...

    async def list_tasks(
        self, *, session_id: str | None = None, chat_key: str | None = None, limit: int = 20
    ) -> list[TaskRecord]:
        """Newest first."""
        ...

    async def heartbeat(self, owner: str, at: datetime) -> None:
        """Touch every active task of `owner`."""
        ...

    async def mark_lost(
        self, *, stale_before: datetime, exclude_owner: str, at: datetime, reason: str
    ) -> list[TaskRecord]:
        """Active tasks of other owners whose heartbeat is older than `stale_before` → lost."""
        ...

    async def claim_notification(self, task_id: str) -> bool:
        """Compare-and-set notified False→True for a terminal task. False if already claimed."""
        ...

    async def release_notification(self, task_id: str) -> None: ...

    async def pending_notifications(self) -> list[TaskRecord]:
        """Terminal tasks whose notification was never claimed, oldest first."""
        ...

    async def delete_finished(self, before: datetime) -> int: ...


def new_task_id() -> str:
    return f"bg_{secrets.token_hex(5)}"


# ---- in-memory store (unit tests, the terminal without a database) ----------------------------
@dataclass
class InMemoryTaskStore:
    tasks: dict[str, TaskRecord] = field(default_factory=dict)

    async def insert_task(self, record: TaskRecord) -> None:
        self.tasks[record.id] = record.model_copy(deep=True)

    async def start_task(self, task_id: str, *, started_at: datetime) -> bool:
        rec = self.tasks.get(task_id)
        if rec is None or rec.status != "queued":
            return False
        self.tasks[task_id] = rec.model_copy(
            update={"status": "running", "started_at": started_at, "heartbeat_at": started_at}
        )
        return True

    async def update_progress(
        self, task_id: str, *, stage: str, detail: str, percent: float | None, at: datetime
    ) -> None:
        rec = self.tasks.get(task_id)
        if rec is not None and rec.status in ACTIVE:
            self.tasks[task_id] = rec.model_copy(
                update={"stage": stage, "detail": detail, "percent": percent, "heartbeat_at": at}
            )

    async def finish_task(self, record: TaskRecord) -> bool:
        rec = self.tasks.get(record.id)
        if rec is None or rec.status not in ACTIVE:
            return False
        keep = {"notified": rec.notified, "created_at": rec.created_at}
        self.tasks[record.id] = record.model_copy(update=keep, deep=True)
        return True

    async def get_task(self, task_id: str) -> TaskRecord | None:
        rec = self.tasks.get(task_id)
        return rec.model_copy(deep=True) if rec else None

    async def list_tasks(
        self, *, session_id: str | None = None, chat_key: str | None = None, limit: int = 20
    ) -> builtins.list[TaskRecord]:
        rows = [
            r
            for r in self.tasks.values()
            if (session_id is None or r.session_id == session_id)
            and (chat_key is None or r.chat_key == chat_key)
        ]
        rows.sort(key=lambda r: r.created_at, reverse=True)
        return [r.model_copy(deep=True) for r in rows[:limit]]

    async def heartbeat(self, owner: str, at: datetime) -> None:
        for tid, rec in self.tasks.items():
            if rec.owner == owner and rec.status in ACTIVE:
                self.tasks[tid] = rec.model_copy(update={"heartbeat_at": at})

    async def mark_lost(
        self, *, stale_before: datetime, exclude_owner: str, at: datetime, reason: str
    ) -> builtins.list[TaskRecord]:
        lost = []
        for tid, rec in self.tasks.items():
            beat = rec.heartbeat_at or rec.created_at
            if rec.status in ACTIVE and rec.owner != exclude_owner and beat < stale_before:
                self.tasks[tid] = rec.model_copy(
                    update={"status": "lost", "finished_at": at, "error": reason}
                )
                lost.append(self.tasks[tid].model_copy(deep=True))
        return lost

    async def claim_notification(self, task_id: str) -> bool:
        rec = self.tasks.get(task_id)
        if rec is None or rec.notified or rec.status not in TERMINAL:
            return False
        self.tasks[task_id] = rec.model_copy(update={"notified": True})
        return True

    async def release_notification(self, task_id: str) -> None:
        rec = self.tasks.get(task_id)
        if rec is not None:
            self.tasks[task_id] = rec.model_copy(update={"notified": False})

    async def pending_notifications(self) -> builtins.list[TaskRecord]:
        rows = [r for r in self.tasks.values() if r.status in TERMINAL and not r.notified]
        rows.sort(key=lambda r: r.finished_at or r.created_at)
        return [r.model_copy(deep=True) for r in rows]

    async def delete_finished(self, before: datetime) -> int:
        doomed = [
            tid
            for tid, r in self.tasks.items()
            if r.status in TERMINAL and (r.finished_at or r.created_at) < before
        ]
        for tid in doomed:
            del self.tasks[tid]
        return len(doomed)
