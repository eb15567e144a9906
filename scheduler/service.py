"""`ScheduleService`: what `/brief`, `/status` and the `manage_schedule` tool call.

The schedules table is the source of truth; the APScheduler job is derived from it (added on
create/resume, removed on pause/delete, and re-derived by `AppScheduler.reconcile()` when a
process becomes the scheduler), so a crash between the two writes heals at the next start.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from agent.ports import Clock, SystemClock
from scheduler.i18n import day_time_text, days_text, error_text, say, status_text, when_text
from scheduler.specs import (
    BriefCommand,
    BriefSpec,
    BriefSpecError,
    DailyTrigger,
    ScheduleError,
    normalize_timezone,
    parse_brief_command,
    parse_brief_spec,
)
from scheduler.store import Schedule, ScheduleStore, new_schedule_id

if TYPE_CHECKING:  # APScheduler loads only where a scheduler runs (`tapebot chat` has none)
    from scheduler.app_scheduler import AppScheduler
    from scheduler.jobs import BriefOutcome

log = logging.getLogger(__name__)


class ScheduleNotFound(ScheduleError, LookupError):
    pass


class KeptBriefs(Protocol):
    """Where an acknowledged `/brief now` is kept until it has run, across a crash or a restart
    (the composition root gives one: bot/briefs.py). `keep` before the acknowledgement; `done`
    once its outcome is known (the chat is told if it was not delivered); `kept`, what a restart
    takes up, as (token, chat key)."""

    async def keep(self, chat_key: str) -> str: ...

    async def done(self, token: str, chat_key: str, outcome: BriefOutcome) -> None: ...

    async def kept(self) -> builtins.list[tuple[str, str]]: ...


class ScheduleService:
    def __init__(
        self,
        store: ScheduleStore,
        scheduler: AppScheduler | None = None,
        *,
        clock: Clock | None = None,
        default_timezone: str | None = None,
        max_per_chat: int = 5,
    ):
        self.store = store
        self.scheduler = scheduler
        self.clock = clock or (scheduler.clock if scheduler else SystemClock())
        self.default_timezone = normalize_timezone(
            default_timezone or (scheduler.default_timezone if scheduler else "UTC")
        )
        self.max_per_chat = max_per_chat
        self._adhoc: set[asyncio.Task[Any]] = set()
        # set by the composition root once the chats exist: without it `/brief now` is not kept
        self.kept: KeptBriefs | None = None

    # ---- zones ------------------------------------------------------------------------------------
    async def chat_timezone(self, chat_key: str) -> str:
        return await self.store.get_chat_timezone(chat_key) or self.default_timezone

    async def set_chat_timezone(self, chat_key: str, tz: str) -> str:
        tz = normalize_timezone(tz)
        await self.store.set_chat_timezone(chat_key, tz, at=self.clock.now())
        return tz

    # ---- CRUD -------------------------------------------------------------------------------------
    async def create(
        self, chat_key: str, spec: BriefSpec | str, *, created_by: str = "", timezone: str | None = None
    ) -> Schedule:
        if not chat_key:
            raise ScheduleError("a schedule needs a chat to deliver to")
        parsed = parse_brief_spec(spec) if isinstance(spec, str) else spec
        tz = normalize_timezone(timezone) if timezone else parsed.tz or await self.chat_timezone(chat_key)
        if await self.store.count_schedules(chat_key) >= self.max_per_chat:
            raise ScheduleError(key="too_many", n=self.max_per_chat)
        now = self.clock.now()
        schedule = Schedule(
            id=new_schedule_id(),
            chat_key=chat_key,
            spec=parsed.text,
            tz=tz,
            created_by=created_by,
            created_at=now,
            updated_at=now,
        )
        await self.store.create_schedule(schedule)
        if self.scheduler is not None:
            try:
                await self.scheduler.add_brief_job(schedule)
            except Exception:
                await self.store.delete_schedule(schedule.id)  # keep the table and the jobs in step
                raise
        return schedule

    async def get(self, chat_key: str, schedule_id: str) -> Schedule:
        schedule = await self.store.get_schedule(schedule_id.strip())
        if schedule is None or schedule.chat_key != chat_key:
            raise ScheduleNotFound(key="not_found", id=schedule_id)
        return schedule

    async def pause(self, chat_key: str, schedule_id: str) -> Schedule:
        schedule = await self.get(chat_key, schedule_id)
        await self.store.set_paused(schedule.id, True, at=self.clock.now())
        if self.scheduler is not None:
            await self.scheduler.remove_brief_job(schedule.id)
        return schedule.model_copy(update={"paused": True})

    async def resume(self, chat_key: str, schedule_id: str) -> Schedule:
        """Resume from the next firing; runs missed while paused are not caught up."""
        schedule = await self.get(chat_key, schedule_id)
        await self.store.set_paused(schedule.id, False, at=self.clock.now())
        schedule = schedule.model_copy(update={"paused": False})
        if self.scheduler is not None:
            await self.scheduler.add_brief_job(schedule)
        return schedule

    async def delete(self, chat_key: str, schedule_id: str) -> Schedule:
        schedule = await self.get(chat_key, schedule_id)
        if self.scheduler is not None:
            await self.scheduler.remove_brief_job(schedule.id)
        await self.store.delete_schedule(schedule.id)
        return schedule

    async def set_brief(
        self, chat_key: str, spec: BriefSpec | str, *, created_by: str = ""
    ) -> tuple[Schedule, builtins.list[Schedule]]:
        """`/brief <spec>`: the chat's brief becomes this one (existing ones are replaced).
        Returns (new schedule, replaced schedules)."""
        parsed = parse_brief_spec(spec) if isinstance(spec, str) else spec
        old = await self.store.list_schedules(chat_key)
        for s in old:
            await self.delete(chat_key, s.id)
        return await self.create(chat_key, parsed, created_by=created_by), old

    async def delete_all(self, chat_key: str) -> int:
        old = await self.store.list_schedules(chat_key)
        for s in old:
            await self.delete(chat_key, s.id)
        return len(old)

    async def run_now(self, chat_key: str, *, wait: bool = False, token: str = "") -> BriefOutcome | None:
        """`/brief now`: run a brief immediately (in the background unless `wait`). It is kept
        (`self.kept`) before this returns — before the chat hears "preparing" — until its outcome
        is known, so a crash does not lose it: the restart runs it (`take_up_kept`). `token`: the
        kept record a restart is taking up."""
        if self.scheduler is None:
            raise ScheduleError(key="no_scheduler")
        schedules = await self.store.list_schedules(chat_key)
        schedule_id = schedules[0].id if schedules else ""
        if not token and self.kept is not None:
            token = await self.kept.keep(chat_key)
        coro = self._run_kept(chat_key, schedule_id, token)
        if wait:
            return await coro
        task = asyncio.create_task(coro, name=f"brief-now:{chat_key}")
        self._adhoc.add(task)
        task.add_done_callback(self._adhoc.discard)
        return None

    async def _run_kept(self, chat_key: str, schedule_id: str, token: str) -> BriefOutcome:
        assert self.scheduler is not None
        outcome = await self.scheduler.run_brief_now(chat_key, schedule_id)
        if (
            token and self.kept is not None and outcome.status != "interrupted"
        ):  # interrupted: the restart runs it
            try:
                await self.kept.done(token, chat_key, outcome)
            except Exception:  # still kept: the restart runs it again rather than lose it
                log.exception("the brief for %s ran but was not marked done", chat_key)
        return outcome

    async def take_up_kept(self) -> int:
        """After a restart: every `/brief now` acknowledged but not finished runs now."""
        if self.kept is None or self.scheduler is None:
            return 0
        kept = await self.kept.kept()
        for token, chat_key in kept:
            await self.run_now(chat_key, token=token)
        if kept:
            log.info("after the restart: %d acknowledged brief(s) taken up", len(kept))
        return len(kept)

    # ---- views ------------------------------------------------------------------------------------
    def next_run(self, schedule: Schedule, now: datetime | None = None) -> datetime | None:
        if schedule.paused:
            return None
        trigger = DailyTrigger.from_spec(schedule.brief_spec, schedule.tz)
        when = trigger.get_next_fire_time(None, now or self.clock.now())
        is_trading = self.scheduler.context.is_trading_day if self.scheduler else None
        if schedule.brief_spec.days == "trading_days" and is_trading is not None and when is not None:
            for _ in range(30):  # skip holidays for display; the job skips them at run time
                if is_trading(when.date()):
                    break
                when = trigger.get_next_fire_time(when, when + timedelta(seconds=1))
                if when is None:
                    break
        return when

    def describe(self, schedule: Schedule, now: datetime | None = None, *, lang: str = "en") -> str:
        spec = schedule.brief_spec
        line = f"{schedule.id} · {days_text(lang, spec.days)} {spec.time} {schedule.tz}"
        if schedule.paused:
            line += " · " + say(lang, "paused")
        else:
            nxt = self.next_run(schedule, now)
            if nxt is not None:
                line += " · " + say(lang, "next", when=when_text(lang, nxt))
        if schedule.last_status:
            last = status_text(lang, schedule.last_status)
            if schedule.last_run_at is not None and schedule.last_status in (
                "delivered",
                "failed",
                "interrupted",
            ):
                local = schedule.last_run_at.astimezone(DailyTrigger.from_spec(spec, schedule.tz).zone)
                last += f" {day_time_text(lang, local)}"
            if schedule.last_error and schedule.last_status != "delivered":
                last += f" ({schedule.last_error[:160]})"
            line += " · " + say(lang, "last", status=last)
        return line

    async def status_lines(self, chat_key: str, *, lang: str = "en") -> builtins.list[str]:
        """Lines for `/status`, including a failed delivery's error."""
        now = self.clock.now()
        return [self.describe(s, now, lang=lang) for s in await self.store.list_schedules(chat_key)]

    # ---- /brief -------------------------------------------------------------------------------------
    async def handle_brief_command(self, chat_key: str, user_id: str, text: str, *, lang: str = "en") -> str:
        """Run `/brief …` and return the reply text, in the chat's language."""
        try:
            cmd = parse_brief_command(text)
        except BriefSpecError as exc:
            return f"{error_text(lang, exc)}\n{say(lang, 'usage')}"
        try:
            return await self._brief_command(chat_key, user_id, cmd, lang)
        except ScheduleError as exc:
            return error_text(lang, exc)

    async def _brief_command(self, chat_key: str, user_id: str, cmd: BriefCommand, lang: str) -> str:
        schedules = await self.store.list_schedules(chat_key)
        if cmd.action == "show":
            zone = await self.chat_timezone(chat_key)
            if not schedules:
                return f"{say(lang, 'none_set_zone', zone=zone)}\n{say(lang, 'usage')}"
            lines = [self.describe(s, lang=lang) for s in schedules]
            return "\n".join([*lines, say(lang, "chat_zone", zone=zone)])
        if cmd.action == "set" and cmd.spec is not None:
            new, old = await self.set_brief(chat_key, cmd.spec, created_by=user_id)
            reply = say(lang, "set", line=self.describe(new, lang=lang))
            if old:
                replaced = ", ".join(f"{days_text(lang, s.brief_spec.days)} {s.brief_spec.time}" for s in old)
                reply += "\n" + say(lang, "replaces", old=replaced)
            return reply
        if cmd.action == "off":
            n = await self.delete_all(chat_key)
            return say(lang, "off" if n else "none_was_set")
        if cmd.action == "now":
            await self.run_now(chat_key)
            return say(lang, "now")
        if cmd.action in ("pause", "resume"):
            if not schedules:
                return say(lang, "none_set")
            for s in schedules:
                if cmd.action == "pause" and not s.paused:
                    await self.pause(chat_key, s.id)
                elif cmd.action == "resume" and s.paused:
                    await self.resume(chat_key, s.id)
            return say(lang, "paused_reply" if cmd.action == "pause" else "resumed_reply")
        if cmd.action == "timezone" and cmd.timezone is not None:
            tz = await self.set_chat_timezone(chat_key, cmd.timezone)
            return say(lang, "zone_set", zone=tz)
        return say(lang, "usage")  # pragma: no cover

    async def list(self, chat_key: str) -> builtins.list[Schedule]:
        return await self.store.list_schedules(chat_key)
