"""The work the scheduler's jobs do: a brief (calendar check, run claim, delivery with retries,
outcome) and a housekeeping chore. `AppScheduler` runs them with its `JobContext`; `/brief now`
and the tests call them directly."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal

from agent.ports import Clock
from scheduler.i18n import say
from scheduler.specs import DailyTrigger
from scheduler.store import ScheduleStore, brief_job_id

log = logging.getLogger(__name__)

BriefCallback = Callable[[str, str], Awaitable[Any]]
"""`on_brief(chat_key, schedule_id)`: run the unattended brief turn and deliver it into the chat;
raise if it could not be delivered (the job retries with backoff). `schedule_id` is "" for an
ad-hoc `/brief now` with no schedule."""
HousekeepingJob = Callable[[], Awaitable[Any]]


@dataclass(eq=False)
class JobContext:
    """What jobs need from the running app. Built by AppScheduler from its constructor arguments."""

    store: ScheduleStore
    clock: Clock
    on_brief: BriefCallback | None = None
    is_trading_day: Callable[[date], bool] | None = None
    housekeeping: Mapping[str, HousekeepingJob] = field(default_factory=dict)
    retry_delays: tuple[float, ...] = (30.0, 120.0, 600.0)
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    owner: str = ""
    remove_job: Callable[[str], Awaitable[Any]] | None = None


@dataclass(frozen=True, slots=True)
class BriefOutcome:
    status: Literal["delivered", "failed", "skipped", "duplicate", "missing", "interrupted"]
    attempts: int = 0
    error: str = ""
    run_date: str = ""


# ---- the work ---------------------------------------------------------------------------------------
async def execute_housekeeping(ctx: JobContext, name: str) -> bool:
    fn = ctx.housekeeping.get(name)
    if fn is None:
        log.warning("housekeeping job %s has no handler", name)
        return False
    try:
        result = await fn()
    except Exception:
        log.exception("housekeeping job %s failed", name)
        return False
    log.info("housekeeping %s done: %s", name, result)
    return True


async def execute_brief(
    ctx: JobContext,
    chat_key: str,
    schedule_id: str,
    *,
    manual: bool = False,
    fired: tuple[datetime, DailyTrigger] | None = None,
) -> BriefOutcome:
    """Run one brief: skip non-trading days, claim the (schedule, local date) run — which also
    checks that the schedule is still active — so it happens once, call `on_brief` with retries,
    and record the outcome. `fired` is the firing being run (its scheduled instant and trigger,
    hence its local run date); `manual=True` (/brief now) skips the calendar and the claim."""
    now = ctx.clock.now()
    run_date = ""
    if not manual:
        if fired is not None:
            scheduled, trigger = fired
        else:  # called outside the executor (tests, tools): derive the firing from the schedule
            schedule = await ctx.store.get_schedule(schedule_id)
            if schedule is None:
                return await _drop_orphan(ctx, schedule_id)
            trigger = DailyTrigger.from_spec(schedule.brief_spec, schedule.tz)
            scheduled = trigger.previous(now) or now
        local_day = scheduled.astimezone(trigger.zone).date()
        run_date = local_day.isoformat()
        if trigger.days == "trading_days" and not _is_trading_day(ctx, local_day):
            await ctx.store.note_status(schedule_id, say("en", "status_skipped", date=run_date))
            log.info("brief %s skipped: %s is not a trading day", schedule_id, run_date)
            return BriefOutcome("skipped", run_date=run_date)
        claim = await ctx.store.claim_run(
            schedule_id, chat_key, run_date, scheduled_for=scheduled, at=now, owner=ctx.owner
        )
        if claim == "missing":
            return await _drop_orphan(ctx, schedule_id)
        if claim == "duplicate":
            log.warning("brief %s for %s already ran; not firing twice", schedule_id, run_date)
            return BriefOutcome("duplicate", run_date=run_date)

    outcome = await _deliver_with_retry(ctx, chat_key, schedule_id)
    outcome = BriefOutcome(outcome.status, outcome.attempts, outcome.error, run_date)
    if schedule_id:
        await ctx.store.complete_run(
            schedule_id,
            run_date or None,
            status=outcome.status,
            attempts=outcome.attempts,
            error=outcome.error,
            at=ctx.clock.now(),
            last_status={"delivered": "delivered", "interrupted": "interrupted"}.get(
                outcome.status, "failed"
            ),
            failed=outcome.status != "delivered",
        )
    return outcome


async def _drop_orphan(ctx: JobContext, schedule_id: str) -> BriefOutcome:
    # A job whose schedule is gone or paused (changed by another process): drop the job.
    log.warning("brief job for %s has no active schedule; removing it", schedule_id)
    if ctx.remove_job is not None:
        await ctx.remove_job(brief_job_id(schedule_id))
    return BriefOutcome("missing")


def _is_trading_day(ctx: JobContext, day: date) -> bool:
    if ctx.is_trading_day is None:
        return day.weekday() < 5
    try:
        return bool(ctx.is_trading_day(day))
    except Exception:
        log.exception("trading calendar failed for %s; assuming a weekday is a trading day", day)
        return day.weekday() < 5


async def _deliver_with_retry(ctx: JobContext, chat_key: str, schedule_id: str) -> BriefOutcome:
    if ctx.on_brief is None:
        return BriefOutcome("failed", 0, "no brief handler is configured")
    error = ""
    attempts = 0
    for delay in (0.0, *ctx.retry_delays):
        if delay:
            try:
                await ctx.sleep(delay)
            except asyncio.CancelledError:
                _uncancel()
                return BriefOutcome("interrupted", attempts, f"stopped while retrying; last error: {error}")
        attempts += 1
        try:
            await ctx.on_brief(chat_key, schedule_id)
        except asyncio.CancelledError:
            _uncancel()  # record the interruption (below) instead of vanishing mid-run
            return BriefOutcome("interrupted", attempts, "tapebot stopped while the brief was being prepared")
        except Exception as exc:  # noqa: BLE001 — a brief's failure, whatever it is, is logged, retried and recorded
            error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("brief %s for %s failed (attempt %d): %s", schedule_id, chat_key, attempts, error)
            continue
        return BriefOutcome("delivered", attempts)
    return BriefOutcome("failed", attempts, error)


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
