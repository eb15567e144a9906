"""`AppScheduler`: the app's one APScheduler 3 `AsyncIOScheduler`, its jobs and its lease.

- One source of truth: a brief is a row in `schedules`. APScheduler is used as it comes — its
  in-memory job store and asyncio executor, its public API only — and holds one job per active
  schedule and per housekeeping chore, built from the table by `reconcile`, which the lease
  holder runs when it takes the lease and at each renewal (so a schedule created, resumed or
  deleted through another process is picked up within `renew_interval`).
- Next run times: after each scheduling pass the next firing of every job that fired or missed
  is stored (`scheduler_next_runs`, one transaction), and a job is rebuilt with its stored next
  run, so a restart or a takeover neither skips nor repeats a firing.
- Lease: the named lease "scheduler" (`memory.coordination.Leases`, the same row kind as the chats'
  and the poller's: owner + expiry), renewed every `renew_interval`. Every
  process starts its scheduler *paused*; only the lease holder loads the jobs and resumes it,
  and only once opened: the app `prepare`s it (all the costly start-up) before its chats open and
  `open`s it after, so nothing fires that the chats could not deliver yet. A second `tapebot run`
  on the same database logs "scheduler standing by: lease held by …" and takes over when the
  lease expires (or is released at shutdown).
- Missed runs: `coalesce=True` + `misfire_grace_time` (default 1 h for briefs): downtime across
  several runs yields at most one catch-up run, inside the grace window; each brief claims its
  (schedule, local date) row before running, so a second fire of the same day is a no-op.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeAlias
from zoneinfo import ZoneInfo

from apscheduler.events import EVENT_JOB_MISSED, EVENT_JOB_SUBMITTED, JobEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_PAUSED, STATE_RUNNING
from apscheduler.triggers.base import BaseTrigger

from agent.ports import Clock, SystemClock
from agent.scratchpad import prune_traces
from memory.coordination import Lease
from scheduler import jobs
from scheduler.i18n import say
from scheduler.jobs import BriefCallback, BriefOutcome, HousekeepingJob, JobContext
from scheduler.specs import DailyTrigger, normalize_timezone, spread_second
from scheduler.store import Schedule, ScheduleStore, brief_job_id

log = logging.getLogger(__name__)
# Our trigger is APScheduler's kind without inheriting it (scheduler/specs.py `DailyTrigger`).
BaseTrigger.register(DailyTrigger)

# apscheduler.job.Job. APScheduler 3 ships no type information, so its values are Any to mypy;
# the alias says which value is meant, and results read from it are given their types here.
Job: TypeAlias = Any

LEASE_NAME = "scheduler"
HOUSEKEEPING_PREFIX = "housekeeping:"
BRIEF_PREFIX = "brief:"


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
        self._aps: AsyncIOScheduler | None = None
        # while leader: {brief job id: the schedule's updated_at when its job was built}
        self._known: dict[str, datetime] = {}
        self._fired: dict[str, datetime] = {}  # job id -> the run time just submitted
        self._dirty: set[str] = set()  # job ids whose next run time is to be stored
        self._saving: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[Any]] = set()  # job runs in flight (stop waits for them)
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
        """Everything that costs, and nothing fires: the lease and, as holder, the stored schedules
        loaded into jobs. APScheduler stays paused, the lease is renewed (and a standby takes
        over) as usual, but no job runs before `open`. The app prepares before its chats open and
        opens after, so a brief due at start-up is delivered (not failed and retried) and the
        first message pays none of this."""
        if self._aps is not None:
            raise RuntimeError("scheduler already started")
        self._opened = False
        self._aps = AsyncIOScheduler(
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": self.brief_grace_time},
            timezone=ZoneInfo(self.default_timezone),
            event_loop=asyncio.get_running_loop(),
        )
        self._aps.add_listener(self._on_event, EVENT_JOB_SUBMITTED | EVENT_JOB_MISSED)
        self._aps.start(paused=True)  # paused until we hold the lease and are open
        try:
            state = await self._try_lease()
        except Exception:
            log.exception("scheduler lease check failed; will retry")
            state = Lease(False, "unknown (database error)", None)
        if state.held:
            await self._become_leader()
        else:
            self._log_standby(state)
        self._lease_task = asyncio.create_task(self._lease_loop(), name="scheduler-lease")

    def open(self) -> None:
        """Let jobs fire from now on — at once if this process holds the lease (and has loaded
        its jobs), else when it takes the lease over."""
        if self._aps is None:
            raise RuntimeError("scheduler is not prepared")
        self._opened = True
        if self._leader_event.is_set():
            self._fire()

    def _fire(self) -> None:
        if self._opened and self._aps is not None and self._aps.state == STATE_PAUSED:
            self._aps.resume()

    async def stop(self, *, release: bool = True) -> None:
        """Stop firing, let running jobs finish (bounded by `stop_timeout`), store the next run
        times, release the lease. `release=False` leaves the lease to expire, as a crash would
        (tests)."""
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
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=self.stop_timeout)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=self.stop_timeout)
        aps.shutdown(wait=False)
        await self._save_next_runs()
        if self._leader and release:
            with contextlib.suppress(Exception):
                await self.store.release_lease(LEASE_NAME, self.owner_id, now=self.clock.now())
        self._leader = False
        self._leader_event.clear()
        self._opened = False
        self._known.clear()
        self._aps = None

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
        """(Re)register the job for an active schedule and store its next run time, which it
        returns (None if the scheduler is not running: `reconcile()` adds it at the next start).
        The lease holder builds the job at once; a standby stores only the next run time, and the
        holder picks the schedule up at its next renewal. `next_run_time` overrides the first
        firing (tests, benches)."""
        if self._aps is None:
            return None
        trigger = self._brief_trigger(schedule)
        first = next_run_time or trigger.get_next_fire_time(None, datetime.now(UTC))
        await self.store.save_next_runs({schedule.job_id: first})
        if self._leader:
            self._add_brief(schedule, trigger, first)
        return first

    def _brief_trigger(self, schedule: Schedule) -> DailyTrigger:
        second = spread_second(schedule.id) if self.spread_briefs else 0
        return DailyTrigger.from_spec(schedule.brief_spec, schedule.tz, second)

    def _add_brief(self, schedule: Schedule, trigger: DailyTrigger, first: datetime | None) -> None:
        assert self._aps is not None
        self._aps.add_job(
            self._run_brief,
            trigger=trigger,
            args=[schedule.chat_key, schedule.id],
            id=schedule.job_id,
            name=f"brief {schedule.chat_key} [{trigger}]",
            replace_existing=True,
            misfire_grace_time=self.brief_grace_time,
            **({"next_run_time": first} if first is not None else {}),
        )
        self._known[schedule.job_id] = schedule.updated_at

    async def remove_job(self, job_id: str) -> bool:
        """Drop a job and its stored next run time. True if there was a job."""
        if self._aps is None:
            return False
        self._known.pop(job_id, None)
        self._dirty.discard(job_id)
        found = True
        try:
            self._aps.remove_job(job_id)
        except JobLookupError:
            found = job_id in await self.store.next_runs()
        await self.store.save_next_runs({job_id: None})
        return found

    async def remove_brief_job(self, schedule_id: str) -> bool:
        return await self.remove_job(brief_job_id(schedule_id))

    async def next_run_time(self, job_id: str) -> datetime | None:
        """The job's next firing: the holder's job, or on a standby the stored time."""
        if self._aps is None:
            return None
        job: Job = self._aps.get_job(job_id)
        if job is not None:
            when: datetime | None = job.next_run_time
            return when
        return None if self._leader else (await self.store.next_runs()).get(job_id)

    async def job_ids(self) -> set[str]:
        if self._aps is None:
            return set()
        if self._leader:
            return {job.id for job in self._aps.get_jobs()}
        return set(await self.store.next_runs())

    async def run_brief_now(self, chat_key: str, schedule_id: str = "") -> BriefOutcome:
        """An ad-hoc brief (`/brief now`): no calendar check, no run claim; same retries."""
        return await jobs.execute_brief(self._ctx, chat_key, schedule_id, manual=True)

    async def run_housekeeping_now(self, name: str) -> bool:
        return await jobs.execute_housekeeping(self._ctx, name)

    async def reconcile(self) -> ReconcileReport:
        """Make the jobs match the schedules table: build a job for each active schedule that
        has none or has changed since (from its stored next run time, or as a first registration
        from its trigger), drop brief jobs with no active schedule, and register the housekeeping
        jobs. Cheap when nothing changed: one two-column query, compared in memory."""
        if self._aps is None:
            raise RuntimeError("scheduler is not running")
        active = await self.store.active_versions()
        stale = [jid for jid in self._known if jid[len(BRIEF_PREFIX) :] not in active]
        changed = [sid for sid, at in active.items() if self._known.get(brief_job_id(sid)) != at]
        removed = 0
        for jid in stale:
            fresh = await self.store.get_schedule(jid[len(BRIEF_PREFIX) :])
            if fresh is not None and not fresh.paused:
                continue  # created while we were listing: keep its job
            removed += await self.remove_job(jid)
        for jid in {j.id for j in self._aps.get_jobs()} - set(self._known):
            if jid.startswith(BRIEF_PREFIX):  # a job with no schedule row at all
                removed += await self.remove_job(jid)
        added = 0
        chores = not self._known_chores()
        stored = await self.store.next_runs() if changed or chores else {}
        first_runs: dict[str, datetime | None] = {}  # stored in one transaction
        if changed:
            now = datetime.now(UTC)
            for s in await self.store.get_schedules(changed):
                try:
                    trigger = self._brief_trigger(s)
                except Exception:
                    log.exception("schedule %s has an invalid spec %r; not scheduled", s.id, s.spec)
                    continue
                first = stored.get(s.job_id)
                if first is None:
                    first = first_runs[s.job_id] = trigger.get_next_fire_time(None, now)
                    added += 1
                self._add_brief(s, trigger, first)
        if chores:
            first_runs.update(self._sync_housekeeping(stored))
        await self.store.save_next_runs(first_runs)
        report = ReconcileReport(schedules=len(active), added=added, removed=removed)
        if changed or removed or self.last_reconcile is None:
            self.last_reconcile = report
            log.info(
                "scheduler reconciled: %d schedules, %d jobs added, %d removed",
                report.schedules,
                report.added,
                report.removed,
            )
        return report

    def _known_chores(self) -> bool:
        assert self._aps is not None
        return all(
            self._aps.get_job(HOUSEKEEPING_PREFIX + name) is not None for name in self._ctx.housekeeping
        )

    def _sync_housekeeping(self, stored: Mapping[str, datetime]) -> dict[str, datetime | None]:
        """Build the housekeeping jobs; returns the next run times to store."""
        assert self._aps is not None
        names = sorted(self._ctx.housekeeping)
        hour, minute = self._housekeeping_at
        firsts: dict[str, datetime | None] = {}
        for i, name in enumerate(names):
            total = (hour * 60 + minute + 10 * i) % (24 * 60)  # staggered 10 minutes apart
            trigger = DailyTrigger("daily", total // 60, total % 60, self.default_timezone)
            if name in self._housekeeping_times:
                at, zone = self._housekeeping_times[name]
                h, _, m = at.partition(":")
                trigger = DailyTrigger("daily", int(h), int(m or 0), zone)
            job_id = HOUSEKEEPING_PREFIX + name
            first = stored.get(job_id)
            # a stored time off this trigger's grid belongs to an older setting: start afresh
            if first is None or trigger.get_next_fire_time(None, first) != first:
                first = firsts[job_id] = trigger.get_next_fire_time(None, datetime.now(UTC))
            self._aps.add_job(
                self._run_housekeeping,
                trigger=trigger,
                args=[name],
                id=job_id,
                name=f"housekeeping {name}",
                replace_existing=True,
                misfire_grace_time=self.housekeeping_grace_time,
                next_run_time=first,
            )
        gone = {
            j: None
            for j in stored
            if j.startswith(HOUSEKEEPING_PREFIX) and j[len(HOUSEKEEPING_PREFIX) :] not in names
        }
        return {**firsts, **gone}

    # ---- what the jobs run -------------------------------------------------------------------------
    async def _run_brief(self, chat_key: str, schedule_id: str) -> None:
        job_id = brief_job_id(schedule_id)
        scheduled = self._fired.pop(job_id, None)
        job: Job = self._aps.get_job(job_id) if self._aps is not None else None
        fired = (scheduled, job.trigger) if scheduled is not None and job is not None else None
        await self._tracked(jobs.execute_brief(self._ctx, chat_key, schedule_id, fired=fired))

    async def _run_housekeeping(self, name: str) -> None:
        self._fired.pop(HOUSEKEEPING_PREFIX + name, None)
        await self._tracked(jobs.execute_housekeeping(self._ctx, name))

    async def _tracked(self, work: Any) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            await work
        finally:
            if task is not None:
                self._running.discard(task)

    def _on_event(self, event: JobEvent) -> None:
        """APScheduler's listener, called inside a scheduling pass on the loop: note what fired
        (before its task starts) and store the next run times once the pass is over."""
        if event.code == EVENT_JOB_SUBMITTED:
            self._fired[event.job_id] = event.scheduled_run_times[-1]  # coalesced: one run time
        else:
            self._on_missed(event)
        self._dirty.add(event.job_id)
        if self._saving is None or self._saving.done():
            self._saving = asyncio.ensure_future(self._save_next_runs())

    async def _save_next_runs(self) -> None:
        await asyncio.sleep(0)  # after the pass: the jobs' next run times are updated by then
        if not self._dirty or self._aps is None:
            return
        dirty, self._dirty = self._dirty, set()
        runs: dict[str, datetime | None] = {}
        for job_id in dirty:
            job: Job = self._aps.get_job(job_id)
            if job is not None:
                runs[job_id] = job.next_run_time
        try:
            await self.store.save_next_runs(runs)
        except Exception:
            log.exception("storing %d next run times failed; retried after the next pass", len(runs))
            self._dirty |= set(runs)

    # ---- leadership --------------------------------------------------------------------------------
    async def _try_lease(self) -> Lease:
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
            log.exception("scheduler reconcile failed; retried at the next renewal")
        self._leader_event.set()
        self._fire()  # before `open`, the jobs wait for it

    async def _step_down(self, holder: str) -> None:
        self._leader = False
        self._leader_event.clear()
        if self._aps is not None:
            if self._aps.state == STATE_RUNNING:
                self._aps.pause()
            self._aps.remove_all_jobs()  # the new holder builds them from the table
        self._known.clear()
        log.warning("scheduler standing by: lease held by %s (this process lost it)", holder)
        self._standby_holder = holder

    def _log_standby(self, state: Lease) -> None:
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
            elif state.held:
                try:
                    await self.reconcile()  # schedules changed through other processes
                except Exception:
                    log.exception("scheduler reconcile failed; retried at the next renewal")
            elif self._leader:
                await self._step_down(state.owner)
            else:
                self._log_standby(state)

    def _on_missed(self, event: JobEvent) -> None:
        if not event.job_id.startswith(BRIEF_PREFIX):
            return
        schedule_id = event.job_id[len(BRIEF_PREFIX) :]
        when = event.scheduled_run_time
        note = say("en", "status_missed", when=f"{when:%Y-%m-%d %H:%M %Z}")
        task = asyncio.ensure_future(self._note(schedule_id, note))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _note(self, schedule_id: str, note: str) -> None:
        with contextlib.suppress(Exception):
            await self.store.note_status(schedule_id, note)
