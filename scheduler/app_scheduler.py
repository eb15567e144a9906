"""`AppScheduler`: the app's one APScheduler 3 `AsyncIOScheduler`, its job store and its lease.

- Job store: `SQLAlchemyJobStore` on the project database. Job stores are synchronous, so we derive
  a sync URL from the async one (sqlite+aiosqlite → sqlite, postgresql+asyncpg → postgresql+psycopg).
- Job-store I/O runs in one dedicated worker thread, never on the event loop. Reason: with SQLite,
  an aiosqlite transaction that holds the write lock needs the loop to reach its COMMIT; a sync
  job-store write on the loop thread would wait for that lock while blocking the loop — a deadlock
  until the busy timeout, after which stock APScheduler stops rescheduling itself. So `wakeup()`
  runs `_process_jobs` in the thread and the executor hands coroutines back to the loop.
- Lease: one row (`scheduler_leases`) with owner + expiry, renewed every `renew_interval`. Every
  process starts its scheduler *paused* (so it can still add and remove jobs); only the lease
  holder resumes it, and only once opened: the app `prepare`s it (all the costly start-up) before
  its chats open and `open`s it after, so nothing fires that the chats could not deliver yet. A
  second `tapebot run` on the same database logs "scheduler standing by: lease held by …" and
  takes over when the lease expires (or is released at shutdown).
- Missed runs: `coalesce=True` + `misfire_grace_time` (default 1 h for briefs): downtime across
  several runs yields at most one catch-up run, inside the grace window. Next-run times are
  written to the store right after a job is submitted, and each brief claims its
  (schedule, local date) row before running, so a restart or a takeover never fires it twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import pickle
import secrets
import socket
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, ParamSpec, TypeAlias, TypeVar
from zoneinfo import ZoneInfo

from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.executors.base import run_coroutine_job, run_job
from apscheduler.jobstores.base import BaseJobStore, JobLookupError
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_PAUSED, STATE_RUNNING, STATE_STOPPED, BaseScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.util import datetime_to_utc_timestamp, iscoroutinefunction_partial
from sqlalchemy import bindparam, create_engine, event, select
from sqlalchemy.engine import URL, make_url

from agent.errors import ConfigError
from agent.ports import Clock, SystemClock
from agent.scratchpad import prune_traces
from scheduler import jobs
from scheduler.i18n import say
from scheduler.jobs import (
    RUN_BRIEF,
    RUN_HOUSEKEEPING,
    BriefCallback,
    BriefOutcome,
    HousekeepingJob,
    JobContext,
)
from scheduler.specs import DailyTrigger, normalize_timezone, spread_second
from scheduler.store import LeaseState, Schedule, ScheduleStore, brief_job_id

log = logging.getLogger(__name__)
_P = ParamSpec("_P")
_R = TypeVar("_R")
# Our trigger is APScheduler's kind without inheriting it (scheduler/specs.py `DailyTrigger`).
BaseTrigger.register(DailyTrigger)

# apscheduler.job.Job. APScheduler 3 ships no type information, so its values are Any to mypy;
# the alias says which value is meant, and results read from it are given their types here.
Job: TypeAlias = Any

LEASE_NAME = "scheduler"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HOUSEKEEPING_PREFIX = "housekeeping:"
BRIEF_PREFIX = "brief:"


def sync_database_url(url: str | URL) -> URL | None:
    """The synchronous twin of an async SQLAlchemy URL, for APScheduler's job store. None for an
    in-memory SQLite database (nothing to share; a MemoryJobStore is used)."""
    u = make_url(url) if isinstance(url, str) else url
    backend, _, driver = u.drivername.partition("+")
    if backend == "sqlite":
        if u.database in (None, "", ":memory:") or (u.database or "").startswith("file::memory:"):
            return None
        return u.set(drivername="sqlite")
    if backend in ("postgresql", "postgres"):
        if driver in ("", "psycopg", "psycopg2", "pg8000"):
            return u
        query = dict(u.query)
        if "ssl" in query and "sslmode" not in query:  # asyncpg spells it ssl=
            query["sslmode"] = query.pop("ssl")
        for key in ("prepared_statement_cache_size", "statement_cache_size"):
            query.pop(key, None)
        return u.set(drivername="postgresql+psycopg", query=query)
    if backend in ("mysql", "mariadb"):
        return u if driver in ("", "pymysql", "mysqldb") else u.set(drivername=f"{backend}+pymysql")
    if driver.startswith("async") or driver in ("aiosqlite", "asyncpg", "aiomysql", "asyncmy"):
        raise ConfigError(
            f"no synchronous driver known for {u.drivername}",
            key="database.url",
            fix="use SQLite or PostgreSQL, or pass jobstore_url explicitly",
        )
    return u


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=15000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes, fast commits
    cur.close()


class _ContextExecutor(AsyncIOExecutor):  # type: ignore[misc]  # APScheduler 3 ships no types
    """Runs job coroutines on the loop, from whichever thread `_process_jobs` runs in, with the
    owning scheduler's JobContext bound (see `scheduler.jobs`)."""

    def __init__(self, context_ref: weakref.ref[JobContext]):
        super().__init__()
        self._context_ref = context_ref

    # `_pending_futures` is added to in the I/O thread and discarded from on the loop: every
    # access holds the executor's lock (stock AsyncIOExecutor iterates it unguarded at shutdown).
    def pending(self) -> list[concurrent.futures.Future[Any]]:
        with self._lock:
            return [f for f in self._pending_futures if not f.done()]

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            futures = list(self._pending_futures)
            self._pending_futures.clear()
        for f in futures:
            f.cancel()

    def _do_submit_job(self, job: Job, run_times: list[datetime]) -> None:
        def callback(f: concurrent.futures.Future[Any]) -> None:
            with self._lock:
                self._pending_futures.discard(f)
            try:
                events = f.result()
            except BaseException:  # noqa: BLE001 — APScheduler's executor contract: every outcome is reported as a job error
                self._run_job_error(job.id, *sys.exc_info()[1:])
            else:
                self._run_job_success(job.id, events)

        if iscoroutinefunction_partial(job.func):
            coro = run_coroutine_job(job, job._jobstore_alias, run_times, self._logger.name)
        else:
            coro = asyncio.to_thread(run_job, job, job._jobstore_alias, run_times, self._logger.name)
        ctx = self._context_ref()
        token = jobs.bind_context(ctx) if ctx is not None else None
        fire = jobs.bind_fire(run_times[-1], job.trigger)  # coalesced: one run time
        try:
            f = asyncio.run_coroutine_threadsafe(coro, self._eventloop)
        finally:
            jobs.unbind_fire(fire)
            if token is not None:
                jobs.unbind_context(token)
        f.add_done_callback(callback)
        self._pending_futures.add(f)


class _BatchingJobStore(SQLAlchemyJobStore):  # type: ignore[misc]  # APScheduler 3 ships no types
    """SQLAlchemyJobStore that, during a scheduling pass, buffers the per-job writes (next run
    time after a firing, removal of finished jobs) and writes them in one transaction when the
    pass asks for the next wake-up time. Stock APScheduler commits once per fired job, which at
    08:30 with thousands of briefs is the bottleneck. A crash inside a pass can re-fire its jobs
    after a restart; the briefs' (schedule, date) run claims make that harmless."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._batch: dict[str, Job | None] | None = None  # job id -> Job to update, or None to delete
        self._adds: dict[str, Job] = {}  # job id -> new Job (replacing any stored one)

    def begin_batch(self) -> None:
        self._batch = {}

    def end_batch(self) -> None:
        self._flush()
        self._batch = None

    def _flush(self) -> None:
        adds, self._adds = self._adds, {}
        if adds:  # cold registration of 10K briefs: one transaction, not 10K (issue 21)
            self._insert(adds)
        batch = self._batch
        if not batch:
            return
        self._batch = {}
        t = self.jobs_t
        updates = [
            {
                "b_id": job_id,
                "b_next": datetime_to_utc_timestamp(job.next_run_time),
                "b_state": pickle.dumps(job.__getstate__(), self.pickle_protocol),
            }
            for job_id, job in batch.items()
            if job is not None
        ]
        removed = [job_id for job_id, job in batch.items() if job is None]
        with self.engine.begin() as conn:
            if updates:
                conn.execute(
                    t.update()
                    .where(t.c.id == bindparam("b_id"))
                    .values(next_run_time=bindparam("b_next"), job_state=bindparam("b_state")),
                    updates,
                )
            if removed:
                conn.execute(t.delete().where(t.c.id.in_(removed)))

    def _insert(self, adds: dict[str, Job]) -> None:
        t = self.jobs_t
        rows = [
            {
                "id": job.id,
                "next_run_time": datetime_to_utc_timestamp(job.next_run_time),
                "job_state": pickle.dumps(job.__getstate__(), self.pickle_protocol),
            }
            for job in adds.values()
        ]
        ids = list(adds)
        with self.engine.begin() as conn:
            for i in range(0, len(ids), 500):  # a new job replaces a stored one with its id
                conn.execute(t.delete().where(t.c.id.in_(ids[i : i + 500])))
            conn.execute(t.insert(), rows)

    def add_job(self, job: Job) -> None:
        """Inside a batch the insert waits for the flush: only `AppScheduler` adds jobs during a
        batch, and always meaning "add or replace" (replace_existing=True)."""
        if self._batch is None:
            super().add_job(job)
        else:
            self._batch.pop(job.id, None)
            self._adds[job.id] = job

    def lookup_job(self, job_id: str) -> Job | None:
        self._flush()
        return super().lookup_job(job_id)

    def get_all_jobs(self) -> list[Job]:
        self._flush()
        jobs: list[Job] = super().get_all_jobs()
        return jobs

    def update_job(self, job: Job) -> None:
        if self._batch is None:
            super().update_job(job)
        else:
            self._batch[job.id] = job

    def remove_job(self, job_id: str) -> None:
        if self._batch is None:
            super().remove_job(job_id)
        else:
            self._batch[job_id] = None

    def get_next_run_time(self) -> datetime | None:
        self._flush()  # the pass is done with this store: persist before answering
        when: datetime | None = super().get_next_run_time()
        return when


class _AppAsyncIOScheduler(AsyncIOScheduler):  # type: ignore[misc]  # APScheduler 3 ships no types
    """AsyncIOScheduler whose job-store work happens in one worker thread (see module docstring)."""

    def __init__(self, io: concurrent.futures.Executor, **options: Any):
        self._io = io
        self._processing = False
        self._again = False
        super().__init__(**options)

    def wakeup(self) -> None:  # thread-safe: add_job, resume, the timer and the lease loop call it
        loop = self._eventloop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._wakeup_on_loop)

    def _process_jobs(self) -> float | None:
        stores = [s for s in self._jobstores.values() if isinstance(s, _BatchingJobStore)]
        for store in stores:
            store.begin_batch()
        try:
            wait: float | None = super()._process_jobs()  # seconds to the next wake-up
            return wait
        finally:
            for store in stores:
                store.end_batch()

    def _wakeup_on_loop(self) -> None:
        if self.state == STATE_STOPPED:
            return
        self._stop_timer()
        if self._processing:
            self._again = True
            return
        self._processing = True
        fut = self._eventloop.run_in_executor(self._io, self._process_jobs)
        fut.add_done_callback(self._processed)

    def _processed(self, fut: asyncio.Future[Any]) -> None:
        self._processing = False
        if fut.cancelled() or self.state == STATE_STOPPED:
            return
        exc = fut.exception()
        if exc is not None:
            log.error("scheduler pass failed: %s; retrying in %ss", exc, self.jobstore_retry_interval)
            wait: float | None = self.jobstore_retry_interval
        else:
            wait = fut.result()
        if self._again:
            self._again = False
            self._wakeup_on_loop()
            return
        self._start_timer(wait)


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    schedules: int
    added: int
    removed: int


def default_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class AppScheduler:
    """Owns the scheduler: start/stop, the lease, brief and housekeeping jobs."""

    def __init__(
        self,
        store: ScheduleStore,
        *,
        clock: Clock | None = None,
        on_brief: BriefCallback | None = None,
        is_trading_day: Callable[[date], bool] | None = None,
        housekeeping: Mapping[str, HousekeepingJob] | None = None,
        housekeeping_at: str = "04:00",
        housekeeping_times: Mapping[str, tuple[str, str]] | None = None,
        default_timezone: str = "UTC",
        owner_id: str | None = None,
        lease_ttl: float = 30.0,
        renew_interval: float | None = None,
        brief_grace_time: int = 3600,
        housekeeping_grace_time: int = 6 * 3600,
        retry_delays: Sequence[float] = (30.0, 120.0, 600.0),
        sleep: Callable[[float], Any] = asyncio.sleep,
        jobstore_url: str | URL | None = None,
        stop_timeout: float = 10.0,
        run_retention: timedelta = timedelta(days=30),
        traces_dir: Path | None = None,
        trace_retention_days: int = 14,
        spread_briefs: bool = True,
    ):
        self.store = store
        # each brief at its schedule's own second of the minute (specs.spread_second): 10K chats
        # that picked 08:30 fire over 08:30:00-08:30:59 instead of all in one second
        self.spread_briefs = spread_briefs
        self.clock = clock or SystemClock()
        self.default_timezone = normalize_timezone(default_timezone)
        self.owner_id = owner_id or default_owner_id()
        self.lease_ttl = lease_ttl
        self.renew_interval = renew_interval if renew_interval is not None else lease_ttl / 3
        self.brief_grace_time = brief_grace_time
        self.housekeeping_grace_time = housekeeping_grace_time
        self.stop_timeout = stop_timeout
        hh, _, mm = housekeeping_at.partition(":")
        self._housekeeping_at = (int(hh), int(mm or 0))
        # jobs with a time of their own ("HH:MM", zone): the data refreshes after each market's close
        self._housekeeping_times = dict(housekeeping_times or {})
        self._jobstore_url = jobstore_url
        chores: dict[str, HousekeepingJob] = dict(housekeeping or {})
        chores.setdefault("prune_schedule_runs", lambda: store.prune_runs(self.clock.now() - run_retention))
        if traces_dir is not None:
            chores.setdefault(
                "prune_traces",
                lambda: asyncio.to_thread(
                    prune_traces, traces_dir, trace_retention_days, self.clock.now().astimezone().date()
                ),
            )
        self._ctx = JobContext(
            store=store,
            clock=self.clock,
            on_brief=on_brief,
            is_trading_day=is_trading_day,
            housekeeping=chores,
            retry_delays=tuple(retry_delays),
            sleep=sleep,
            owner=self.owner_id,
            remove_job=self.remove_job,
        )
        self._aps: _AppAsyncIOScheduler | None = None
        self._executor: _ContextExecutor | None = None
        self._io: concurrent.futures.ThreadPoolExecutor | None = None
        self._lease_task: asyncio.Task[None] | None = None
        self._leader = False
        self._lease_expires: datetime | None = None
        self._standby_holder: str | None = None
        self._leader_event = asyncio.Event()  # set while we hold the lease with our jobs synced
        self._opened = False  # `open` was called: jobs may fire
        self.last_reconcile: ReconcileReport | None = None

    # ---- properties --------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._aps is not None

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def context(self) -> JobContext:
        return self._ctx

    # ---- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """`prepare` then `open`: for a caller with nothing to open in between (tests, benches)."""
        await self.prepare()
        self.open()

    async def prepare(self) -> None:
        """Everything that costs, and nothing fires: the job store (its engine, tables and first
        statements), the I/O thread, the lease, and as holder the stored schedules synced into
        jobs. APScheduler stays paused, the lease is renewed (and a standby takes over) as usual,
        but no job runs before `open`. The app prepares before its chats open and opens after,
        so a brief due at start-up is delivered (not failed and retried) and the first message
        pays none of this (issue 21)."""
        if self._aps is not None:
            raise RuntimeError("scheduler already started")
        self._opened = False
        loop = asyncio.get_running_loop()
        self._io = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="scheduler-io")
        self._executor = _ContextExecutor(weakref.ref(self._ctx))
        self._aps = _AppAsyncIOScheduler(
            self._io,
            jobstores={"default": self._make_jobstore()},
            executors={"default": self._executor},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": self.brief_grace_time},
            timezone=ZoneInfo(self.default_timezone),
            event_loop=loop,
        )
        self._aps.add_listener(self._on_missed, EVENT_JOB_MISSED)
        await self._call(self._start_paused)  # paused until we hold the lease and are open
        try:
            state = await self._try_lease()
        except Exception:
            log.exception("scheduler lease check failed; will retry")
            state = LeaseState(False, "unknown (database error)", None)
        if state.held:
            await self._become_leader()
        else:
            self._log_standby(state)
        self._lease_task = asyncio.create_task(self._lease_loop(), name="scheduler-lease")

    def open(self) -> None:
        """Let jobs fire from now on — at once if this process holds the lease (and has synced
        its jobs), else when it takes the lease over."""
        if self._aps is None:
            raise RuntimeError("scheduler is not prepared")
        self._opened = True
        if self._leader_event.is_set():
            self._fire()

    def _fire(self) -> None:
        if self._opened and self._aps is not None and self._aps.state == STATE_PAUSED:
            self._aps.resume()  # wakes the I/O thread's first pass: its statements are compiled

    async def stop(self, *, release: bool = True) -> None:
        """Stop firing, let running jobs finish (bounded by `stop_timeout`), release the lease.
        `release=False` leaves the lease to expire, as a crash would (tests)."""
        aps = self._aps
        if aps is None:
            return
        if self._lease_task is not None:
            self._lease_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lease_task
            self._lease_task = None
        if aps.state == STATE_RUNNING:
            aps.pause()
        if self._executor is not None:
            inflight = [asyncio.wrap_future(f) for f in self._executor.pending()]
            if inflight:
                await asyncio.wait(inflight, timeout=self.stop_timeout)
        aps._stop_timer()
        await self._call(BaseScheduler.shutdown, aps, False)  # cancels leftovers, disposes the engine
        if self._leader and release:
            with contextlib.suppress(Exception):
                await self.store.release_lease(LEASE_NAME, self.owner_id, now=self.clock.now())
        self._leader = False
        self._leader_event.clear()
        self._opened = False
        self._aps = None
        io, self._io = self._io, None
        if io is not None:
            await asyncio.to_thread(io.shutdown, True)

    async def wait_until_leader(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self._leader_event.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # ---- jobs --------------------------------------------------------------------------------------
    async def add_brief_job(
        self, schedule: Schedule, *, next_run_time: datetime | None = None
    ) -> datetime | None:
        """(Re)register the job for an active schedule. Returns its next run time (None if the
        scheduler is not running: `reconcile()` adds it at the next start). `next_run_time`
        overrides the first firing (tests, benches)."""
        if self._aps is None:
            return None
        trigger = self._brief_trigger(schedule)
        extra = {"next_run_time": next_run_time} if next_run_time is not None else {}
        job = await self._call(
            self._aps.add_job,
            RUN_BRIEF,
            trigger=trigger,
            args=[schedule.chat_key, schedule.id],
            id=schedule.job_id,
            name=f"brief {schedule.chat_key} [{trigger}]",
            replace_existing=True,
            misfire_grace_time=self.brief_grace_time,
            **extra,
        )
        first: datetime | None = job.next_run_time
        return first

    def _brief_trigger(self, schedule: Schedule) -> DailyTrigger:
        second = spread_second(schedule.id) if self.spread_briefs else 0
        return DailyTrigger.from_spec(schedule.brief_spec, schedule.tz, second)

    async def remove_job(self, job_id: str) -> bool:
        if self._aps is None:
            return False
        try:
            await self._call(self._aps.remove_job, job_id)
        except JobLookupError:
            return False
        return True

    async def remove_brief_job(self, schedule_id: str) -> bool:
        return await self.remove_job(brief_job_id(schedule_id))

    async def next_run_time(self, job_id: str) -> datetime | None:
        if self._aps is None:
            return None
        job = await self._call(self._aps.get_job, job_id)
        return job.next_run_time if job is not None else None

    async def job_ids(self) -> set[str]:
        if self._aps is None:
            return set()
        return await self._call(self._job_ids_sync)

    async def run_brief_now(self, chat_key: str, schedule_id: str = "") -> BriefOutcome:
        """An ad-hoc brief (`/brief now`): no calendar check, no run claim; same retries."""
        return await jobs.execute_brief(self._ctx, chat_key, schedule_id, manual=True)

    async def run_housekeeping_now(self, name: str) -> bool:
        return await jobs.execute_housekeeping(self._ctx, name)

    async def reconcile(self) -> ReconcileReport:
        """Make the job store match the schedules table: add jobs for active schedules that lack
        one (they start from the next firing), drop brief jobs with no active schedule, and
        register the housekeeping jobs."""
        schedules = await self.store.list_schedules(include_paused=False)
        existing = await self.job_ids()
        want = {s.job_id: s for s in schedules}
        stale = [j for j in existing if j.startswith(BRIEF_PREFIX) and j not in want]
        missing = [s for jid, s in want.items() if jid not in existing]
        removed = 0
        for jid in stale:
            fresh = await self.store.get_schedule(jid[len(BRIEF_PREFIX) :])
            if fresh is not None and not fresh.paused:
                continue  # created while we were listing: keep its job
            removed += await self.remove_job(jid)
        if missing:
            await self._call(self._add_brief_jobs_sync, missing)
        await self._call(self._sync_housekeeping_sync)
        report = ReconcileReport(schedules=len(want), added=len(missing), removed=removed)
        self.last_reconcile = report
        log.info(
            "scheduler reconciled: %d schedules, %d jobs added, %d removed",
            report.schedules,
            report.added,
            report.removed,
        )
        return report

    # ---- leadership --------------------------------------------------------------------------------
    async def _try_lease(self) -> LeaseState:
        state = await self.store.acquire_lease(
            LEASE_NAME, self.owner_id, now=self.clock.now(), ttl=self.lease_ttl
        )
        if state.held:
            self._lease_expires = state.expires_at
        return state

    async def _become_leader(self) -> None:
        self._leader = True
        self._standby_holder = None
        log.info("scheduler active: %s holds the lease", self.owner_id)
        try:
            await self.reconcile()
        except Exception:
            log.exception("scheduler reconcile failed; running with the jobs already stored")
        self._leader_event.set()
        self._fire()  # before `open`, the jobs wait for it

    async def _step_down(self, holder: str) -> None:
        self._leader = False
        self._leader_event.clear()
        if self._aps is not None and self._aps.state == STATE_RUNNING:
            self._aps.pause()
        log.warning("scheduler standing by: lease held by %s (this process lost it)", holder)
        self._standby_holder = holder

    def _log_standby(self, state: LeaseState) -> None:
        if state.owner != self._standby_holder:
            log.warning("scheduler standing by: lease held by %s until %s", state.owner, state.expires_at)
            self._standby_holder = state.owner

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_interval)
            try:
                state = await self._try_lease()
            except Exception:
                log.exception("scheduler lease renewal failed")
                if self._leader and (self._lease_expires is None or self.clock.now() >= self._lease_expires):
                    await self._step_down("nobody (lease expired while the database was unreachable)")
                continue
            if state.held and not self._leader:
                await self._become_leader()
            elif state.held and self._aps is not None:
                self._aps.wakeup()  # notice jobs added by other processes
            elif not state.held and self._leader:
                await self._step_down(state.owner)
            elif not state.held:
                self._log_standby(state)

    def _on_missed(self, event: JobExecutionEvent) -> None:
        if not event.job_id.startswith(BRIEF_PREFIX) or self._aps is None:
            return
        schedule_id = event.job_id[len(BRIEF_PREFIX) :]
        when = event.scheduled_run_time
        note = say("en", "status_missed", when=f"{when:%Y-%m-%d %H:%M %Z}")
        loop = self._aps._eventloop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._note(schedule_id, note)))

    async def _note(self, schedule_id: str, note: str) -> None:
        with contextlib.suppress(Exception):
            await self.store.note_status(schedule_id, note)

    # ---- job-store work (runs in the scheduler's I/O thread) ---------------------------------------
    async def _call(self, fn: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
        if self._io is None:
            raise RuntimeError("scheduler is not running")
        return await asyncio.get_running_loop().run_in_executor(self._io, partial(fn, *args, **kwargs))

    def _make_jobstore(self) -> BaseJobStore:
        url = self._jobstore_url
        sync_url = make_url(url) if isinstance(url, str) else url
        if sync_url is None:
            sync_url = sync_database_url(self.store.db.url)
        if sync_url is None:
            log.warning("in-memory database: scheduled jobs will not survive a restart")
            return MemoryJobStore()
        if sync_url.drivername.startswith("sqlite"):
            engine = create_engine(sync_url, connect_args={"timeout": 15})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(sync_url, pool_pre_ping=True)
        return _BatchingJobStore(engine=engine)

    def _start_paused(self) -> None:
        """APScheduler started paused, and the statements of its passes compiled now: the first
        pass after `open` runs while the first message is handled (issue 21)."""
        assert self._aps is not None
        self._aps.start(paused=True)
        store = self._aps._lookup_jobstore("default")
        if isinstance(store, _BatchingJobStore):
            store.get_due_jobs(_EPOCH)  # nothing is due before 1970: only compiles the query
            store.get_next_run_time()

    def _job_ids_sync(self) -> set[str]:
        assert self._aps is not None
        store = self._aps._lookup_jobstore("default")
        if isinstance(store, SQLAlchemyJobStore):
            with store.engine.connect() as conn:
                return {row[0] for row in conn.execute(select(store.jobs_t.c.id))}
        return {job.id for job in store.get_all_jobs()}

    def _add_brief_jobs_sync(self, schedules: list[Schedule]) -> None:
        assert self._aps is not None
        store = self._aps._lookup_jobstore("default")
        batching = isinstance(store, _BatchingJobStore) and store._batch is None
        if batching:
            store.begin_batch()  # one transaction for all of them (10K at a cold start)
        try:
            self._add_brief_jobs(schedules)
        finally:
            if batching:
                store.end_batch()

    def _add_brief_jobs(self, schedules: list[Schedule]) -> None:
        assert self._aps is not None
        for s in schedules:
            try:
                trigger = self._brief_trigger(s)
            except Exception:
                log.exception("schedule %s has an invalid spec %r; not scheduled", s.id, s.spec)
                continue
            self._aps.add_job(
                RUN_BRIEF,
                trigger=trigger,
                args=[s.chat_key, s.id],
                id=s.job_id,
                name=f"brief {s.chat_key} [{trigger}]",
                replace_existing=True,
                misfire_grace_time=self.brief_grace_time,
            )

    def _sync_housekeeping_sync(self) -> None:
        assert self._aps is not None
        names = sorted(self._ctx.housekeeping)
        hour, minute = self._housekeeping_at
        for i, name in enumerate(names):
            total = (hour * 60 + minute + 10 * i) % (24 * 60)  # staggered 10 minutes apart
            trigger = DailyTrigger("daily", total // 60, total % 60, self.default_timezone)
            if name in self._housekeeping_times:
                at, zone = self._housekeeping_times[name]
                h, _, m = at.partition(":")
                trigger = DailyTrigger("daily", int(h), int(m or 0), zone)
            job_id = HOUSEKEEPING_PREFIX + name
            job = self._aps.get_job(job_id)
            if job is not None and job.trigger == trigger:
                continue  # keep its next run time (a restart must not skip or repeat it)
            self._aps.add_job(
                RUN_HOUSEKEEPING,
                trigger=trigger,
                args=[name],
                id=job_id,
                name=f"housekeeping {name}",
                replace_existing=True,
                misfire_grace_time=self.housekeeping_grace_time,
            )
        for job_id in self._job_ids_sync():  # ids only: unpickling every brief job would be slow
            if job_id.startswith(HOUSEKEEPING_PREFIX) and job_id[len(HOUSEKEEPING_PREFIX) :] not in names:
                self._aps.remove_job(job_id)
