"""Background tasks: a persisted ledger and the manager that runs long tools off the turn.

A tool flagged `background=True` (a whole-market screen, a backtest, a report) is submitted here by
the runtime's executor; the model gets `{"status": "background", "task_id": ...}` at once and the
user keeps chatting. The work runs as a tracked asyncio task (sync tools already run in a worker
thread), reports progress (persisted at a throttled rate, pushed to subscribers so the chat can
edit one status message), and on completion `on_complete(record)` is called once so the bot can
inject a `[SYSTEM NOTIFICATION - NOT USER INPUT]` into the session and wake a turn.

States: queued → running → succeeded | failed | cancelled | timed_out, and `lost` for work that
was queued or running when its process died (found by a stale heartbeat) or was stopped by a
shutdown. Lost tasks are reported like finished ones, so the user hears about them after restart.

Cancel and timeout cancel the awaited work. A sync tool running in a worker thread cannot be
interrupted: its thread runs to the end and the result is discarded — so CPU-heavy tools should
check a stop condition between chunks (they report progress there anyway).

Exactly-once notification: the `notified` flag is claimed by compare-and-set *before* the
callback runs and released if the callback raises, so a restart (or a second process) never
re-notifies; a finished-but-unclaimed task is notified by `notify_pending()` at start-up.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import secrets
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from agent.errors import NoticeDeferred, ToolError, ToolFailed
from agent.ports import Clock, SystemClock
from agent.task_ledger import (
    ACTIVE,
    DEFAULT_RETENTION,
    TaskAttachment,
    TaskRecord,
    TaskStore,
    new_task_id,
)
from agent.tools.registry import ProgressFn, ToolOutput, render_result

log = logging.getLogger(__name__)

CompletionCallback = Callable[[TaskRecord], Awaitable[None]]
Subscriber = Callable[[TaskRecord], Awaitable[None]]
WorkFactory = Callable[[ProgressFn], Awaitable[Any]]


@dataclass(eq=False)
class _Live:
    record: TaskRecord
    factory: WorkFactory
    task: asyncio.Task[None] | None = None  # the bookkeeping wrapper (_run); never cancelled
    work: asyncio.Future[Any] | None = None  # the tool's own work; what cancel() cancels
    last_persist: datetime | None = None
    stop_reason: Literal["", "user", "shutdown"] = ""
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self, reason: Literal["user", "shutdown"]) -> None:
        # Cancel the work, not the wrapper: a wrapper cancelled before its first step would skip
        # its bookkeeping; this way _run always records the outcome.
        self.stop_reason = reason
        if self.work is not None:
            self.work.cancel()


class TaskManager:
    """Runs background work with per-session and global limits and keeps the ledger."""

    def __init__(
        self,
        store: TaskStore,
        clock: Clock | None = None,
        *,
        per_session_limit: int = 2,
        global_limit: int = 4,
        on_complete: CompletionCallback | None = None,
        default_timeout: float | None = 1800.0,
        max_queued_per_session: int = 10,
        progress_interval: float = 2.0,
        heartbeat_interval: float = 30.0,
        lost_after: float = 90.0,
        notify_cancelled: bool = False,
        owner_id: str | None = None,
        redact: Callable[[str], str] | None = None,
    ):
        self.store = store
        # results and errors outlive the turn (ledger, chat notice): stored with secrets masked
        self.redact = redact
        self.clock = clock or SystemClock()
        self.per_session_limit = per_session_limit
        self.global_limit = global_limit
        self.on_complete = on_complete
        self.default_timeout = default_timeout
        self.max_queued_per_session = max_queued_per_session
        self.progress_interval = progress_interval
        self.heartbeat_interval = heartbeat_interval
        self.lost_after = lost_after
        self.notify_cancelled = notify_cancelled
        self.owner_id = owner_id or f"tm_{secrets.token_hex(6)}"
        self._queue: deque[_Live] = deque()
        self._running: dict[str, _Live] = {}  # counts against the limits
        self._live: dict[str, _Live] = {}  # queued or running, until its outcome is recorded
        self._subscribers: list[Subscriber] = []
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._closing = False

    # ---- lifecycle ------------------------------------------------------------------------------
    async def start(self, *, heartbeat: bool = True, notify: bool = True) -> list[TaskRecord]:
        """Recover after a restart (mark dead work lost, deliver unsent notices) and start the
        heartbeat/sweep loop. Returns the tasks found lost. `notify=False`: a process with no chats
        to tell (a one-shot turn) leaves the unsent notices pending for one that has them."""
        self._closing = False
        lost = await self.recover() if notify else await self.mark_lost_on_startup()
        if heartbeat and self._heartbeat_task is None:
            self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="tasks-heartbeat")
        return lost

    async def recover(self) -> list[TaskRecord]:
        lost = await self.mark_lost_on_startup()
        await self.notify_pending()
        return lost

    async def mark_lost_on_startup(self) -> list[TaskRecord]:
        """Tasks another (dead) process left queued/running, judged by a stale heartbeat, become
        `lost`. A live second process keeps its heartbeats fresh, so its work is left alone."""
        now = self.clock.now()
        lost = await self.store.mark_lost(
            stale_before=now - timedelta(seconds=self.lost_after),
            exclude_owner=self.owner_id,
            at=now,
            reason="tapebot restarted while this task was running; its work was lost. Start it again.",
        )
        for rec in lost:
            log.warning("background task %s (%s) was lost in a restart", rec.id, rec.tool_name)
        return lost

    async def notify_pending(self) -> int:
        """Notify every finished task whose notice was never delivered. Returns how many."""
        count = 0
        for rec in await self.store.pending_notifications():
            if await self._notify(rec):
                count += 1
        return count

    async def shutdown(self, *, timeout: float = 5.0) -> None:
        """Cancel everything; running and queued work is marked `lost` (interrupted) without a
        notice now — `notify_pending()` after the restart tells the user."""
        self._closing = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
            self._heartbeat_task = None
        now = self.clock.now()
        while self._queue:
            live = self._queue.popleft()
            live.record = live.record.model_copy(
                update={
                    "status": "lost",
                    "finished_at": now,
                    "error": "tapebot was shut down before this task started. Start it again.",
                }
            )
            await self.store.finish_task(live.record)
            self._forget(live)
        tasks = []
        for live in list(self._running.values()):
            live.stop("shutdown")
            if live.task is not None:
                tasks.append(live.task)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    # ---- submit / cancel / query ---------------------------------------------------------------
    async def submit(
        self,
        session_id: str,
        chat_key: str,
        tool_name: str,
        call_id: str,
        coro_factory: WorkFactory,
        *,
        arguments: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> TaskRecord:
        """Record the task and start it (or queue it behind the limits). Returns immediately.
        `coro_factory(progress)` builds the work; `progress(stage, detail, percent)` reports."""
        if self._closing:
            raise ToolFailed("tapebot is shutting down; background tasks cannot start now")
        waiting = sum(1 for live in self._queue if live.record.session_id == session_id)
        if waiting >= self.max_queued_per_session:
            raise ToolFailed(
                f"{waiting} background tasks are already waiting in this chat; "
                "wait for them or cancel one (/tasks) before starting another"
            )
        now = self.clock.now()
        record = TaskRecord(
            id=new_task_id(),
            session_id=session_id,
            chat_key=chat_key,
            tool_name=tool_name,
            call_id=call_id,
            arguments=dict(arguments or {}),
            timeout=timeout if timeout is not None else self.default_timeout,
            owner=self.owner_id,
            created_at=now,
            heartbeat_at=now,
        )
        await self.store.insert_task(record)
        live = _Live(record=record, factory=coro_factory)
        self._live[record.id] = live
        self._queue.append(live)
        self._pump()
        if live.record.status == "queued":
            await self._publish(live.record)
        return live.record.model_copy()

    async def cancel(self, task_id: str, *, session_id: str | None = None) -> TaskRecord | None:
        """Cancel a queued or running task. Returns its final record (unchanged if it had already
        finished), or None if unknown (or not in `session_id` when given)."""
        for live in self._queue:
            if live.record.id == task_id and session_id in (None, live.record.session_id):
                self._queue.remove(live)
                live.record = live.record.model_copy(
                    update={
                        "status": "cancelled",
                        "finished_at": self.clock.now(),
                        "error": "cancelled by user",
                    }
                )
                await self._finish(live)
                return live.record.model_copy()
        live_run = self._running.get(task_id)
        if live_run is not None and session_id in (None, live_run.record.session_id):
            live_run.stop("user")
            await live_run.done.wait()
            return live_run.record.model_copy()
        record = await self.store.get_task(task_id)
        if record is None or (session_id is not None and record.session_id != session_id):
            return None
        if record.status in ACTIVE:
            # Owned by another process (or a dead one): record the cancel; its owner's late
            # result loses (first writer wins in finish_task).
            record = record.model_copy(
                update={"status": "cancelled", "finished_at": self.clock.now(), "error": "cancelled by user"}
            )
            if await self.store.finish_task(record):
                await self.store.claim_notification(record.id)
        return record

    async def get(self, task_id: str) -> TaskRecord | None:
        live = self._live.get(task_id)
        if live is not None:
            return live.record.model_copy()
        return await self.store.get_task(task_id)

    async def wait(self, task_id: str) -> TaskRecord | None:
        """Wait until an in-process task's outcome is recorded (for tests and the terminal UI)."""
        live = self._live.get(task_id)
        if live is not None:
            await live.done.wait()
        return await self.store.get_task(task_id)

    async def cleanup(self, older_than: timedelta = DEFAULT_RETENTION) -> int:
        """Delete finished tasks (and their results) older than `older_than` (default 7 days)."""
        return await self.store.delete_finished(self.clock.now() - older_than)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """`fn(record)` on every state change and (throttled) progress. Returns an unsubscriber."""
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(fn)

        return unsubscribe

    @property
    def running_count(self) -> int:
        return len(self._running)

    @property
    def queued_count(self) -> int:
        return len(self._queue)

    # ---- internals ------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Start queued tasks in FIFO order as far as the limits allow; a session at its limit
        does not block other sessions' tasks."""
        if self._closing:
            return
        for live in list(self._queue):
            if len(self._running) >= self.global_limit:
                return
            session = live.record.session_id
            if (
                sum(1 for r in self._running.values() if r.record.session_id == session)
                >= self.per_session_limit
            ):
                continue
            self._queue.remove(live)
            live.record = live.record.model_copy(update={"status": "running", "started_at": self.clock.now()})
            self._running[live.record.id] = live
            live.task = asyncio.create_task(self._run(live), name=f"bg:{live.record.id}")

    async def _run(self, live: _Live) -> None:
        rec = live.record
        timer = asyncio.timeout(rec.timeout)
        update: dict[str, Any]
        try:
            await self.store.start_task(rec.id, started_at=rec.started_at or self.clock.now())
            await self._publish(rec)
            if live.stop_reason:
                raise asyncio.CancelledError  # stopped before the work began
            async with timer:
                live.work = asyncio.ensure_future(live.factory(self._progress_fn(live)))
                value = await live.work
        except TimeoutError as exc:
            if timer.expired():
                update = {
                    "status": "timed_out",
                    "error": f"{rec.tool_name} did not finish within {rec.timeout:.0f} s",
                }
            else:
                update = {"status": "failed", "error": f"TimeoutError: {exc}"}
        except asyncio.CancelledError:
            if not live.stop_reason:
                raise  # the wrapper itself was cancelled (loop teardown): nothing to record
            if live.stop_reason == "user":
                update = {"status": "cancelled", "error": "cancelled by user"}
            else:
                update = {"status": "lost", "error": "interrupted: tapebot was shut down. Start it again."}
        except ToolError as exc:
            update = {"status": "failed", "error": str(exc)}
        except Exception as exc:
            log.exception("background task %s (%s) failed", rec.id, rec.tool_name)
            update = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
        else:
            update = {"status": "succeeded", "percent": 100.0 if live.record.percent is not None else None}
            attachments: builtins.list[TaskAttachment] = []
            if isinstance(value, ToolOutput):
                attachments = [
                    TaskAttachment(path=str(a.path), mime=a.mime, caption=a.caption)
                    for a in value.attachments
                ]
                value = value.content
            try:
                update["result"] = render_result(value)
            except ToolError as exc:
                update = {"status": "failed", "error": str(exc)}
            else:
                update["attachments"] = attachments
        update["finished_at"] = self.clock.now()
        if self.redact is not None:
            for field_ in ("result", "error"):
                if isinstance(update.get(field_), str):
                    update[field_] = self.redact(update[field_])
        live.record = live.record.model_copy(update=update)
        await self._finish(live)

    def _forget(self, live: _Live) -> None:
        self._live.pop(live.record.id, None)
        live.done.set()

    async def _finish(self, live: _Live) -> None:
        self._running.pop(live.record.id, None)
        self._pump()
        try:
            owned = await self.store.finish_task(live.record)
            if not owned:  # someone else finished it first (a cancel from another process, a sweep)
                latest = await self.store.get_task(live.record.id)
                if latest is not None:
                    live.record = latest
                return
            await self._publish(live.record)
            if self._closing:
                return  # reported after the restart by notify_pending()
            if live.record.status == "cancelled" and not self.notify_cancelled:
                await self.store.claim_notification(live.record.id)  # the user asked; no notice needed
                return
            await self._notify(live.record)
        finally:
            self._forget(live)  # outcome recorded (and announced): waiters may go

    async def _notify(self, record: TaskRecord) -> bool:
        if self.on_complete is None:
            return False
        if not await self.store.claim_notification(record.id):
            return False
        record = record.model_copy(update={"notified": True})
        try:
            await self.on_complete(record)
        except NoticeDeferred as exc:  # another process serves its chat: it delivers it at start
            log.info("notice of task %s left pending: %s", record.id, exc)
            await self.store.release_notification(record.id)
            return False
        except Exception:
            log.exception("completion callback failed for task %s; will retry after restart", record.id)
            await self.store.release_notification(record.id)
            return False
        return True

    def _progress_fn(self, live: _Live) -> ProgressFn:
        async def progress(stage: str, detail: str = "", percent: float | None = None) -> None:
            if live.record.terminal:
                return
            now = self.clock.now()
            stage_changed = stage != live.record.stage
            live.record = live.record.model_copy(
                update={
                    "stage": stage[:200],
                    "detail": detail[:2000],
                    "percent": None if percent is None else max(0.0, min(100.0, float(percent))),
                    "heartbeat_at": now,
                }
            )
            due = (
                live.last_persist is None
                or stage_changed
                or (now - live.last_persist).total_seconds() >= self.progress_interval
            )
            if not due:
                return  # the in-memory record is fresh for get(); the DB and chat get a rate
            live.last_persist = now
            r = live.record
            await self.store.update_progress(r.id, stage=r.stage, detail=r.detail, percent=r.percent, at=now)
            await self._publish(r)

        return progress

    async def _publish(self, record: TaskRecord) -> None:
        for fn in builtins.list(self._subscribers):
            try:
                await fn(record.model_copy())
            except Exception:
                log.exception("task subscriber failed")

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("background-task heartbeat failed")

    async def sweep(self) -> list[TaskRecord]:
        """Heartbeat our own active tasks, then mark other owners' stale tasks lost and report
        them. Runs every `heartbeat_interval` seconds after `start()`."""
        await self.store.heartbeat(self.owner_id, self.clock.now())
        lost = await self.mark_lost_on_startup()
        for rec in lost:
            await self._notify(rec)
        return lost

    async def list(self, session_id: str, *, limit: int = 20) -> builtins.list[TaskRecord]:
        """The session's tasks, newest first, with live progress for ours."""
        records = await self.store.list_tasks(session_id=session_id, limit=limit)
        fresh = {tid: live.record for tid, live in self._live.items()}
        return [fresh.get(r.id, r).model_copy() for r in records]
