"""The scheduler at `tapebot run` start-up: its costly start is done before the chats
open and only its firing after, so a brief due at start-up is delivered on its first attempt once
the Telegram adapter is open — never failed and retried because the chats were not open yet — and
a standby process (the lease held elsewhere) still fires nothing until it takes the lease over."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agent.providers.scripted import ScriptedClient, reply
from bot.app import App
from memory.db import Database
from scheduler.app_scheduler import LEASE_NAME, AppScheduler
from scheduler.store import Schedule, ScheduleStore
from tests.bot.conftest import ALICE, Harness, make_settings
from tests.fakes.telegram_api import FakeBotAPI

SCHEDULER_ON = {"TAPEBOT_SCHEDULER__ENABLED": "true", "TAPEBOT_SCHEDULER__LEASE_TTL_S": "1"}
BRIEF_REPLY = "Brief for today: nothing moved."


class RecordingApp(App):
    """The App, noting at each brief delivery whether its chat adapters were open."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.deliveries: list[bool] = []

    async def _start_chat(self, adapters=None) -> None:
        await super()._start_chat(adapters)
        assert self.brief_runner is not None and self.gateway is not None
        self.brief_runner.deliver_to(_Recording(self, self.gateway.briefs))


class _Recording:
    def __init__(self, app: RecordingApp, briefs):
        self.app, self.briefs = app, briefs

    async def deliver(self, chat_key: str, text: str) -> None:
        self.app.deliveries.append(self.app.gateway is not None and bool(self.app.adapters))
        await self.briefs.deliver(chat_key, text)


class RecordingHarness(Harness):
    async def start(self) -> App:
        self.app = RecordingApp(
            make_settings(self.home, self.extra_env),
            model_factory=self.model_for,
            adapter_options={"telegram": self.telegram_options()},
        )
        await self.app.start(adapters=True)
        return self.app


async def stage_due_brief(h: Harness, *, lease_elsewhere: bool) -> tuple[Schedule, str]:
    """Alice sets a daily brief two minutes ago (its chat is known), the bot stops, and its job is
    left in the store as a downtime across its time leaves it: due. Returns the schedule and
    its run date; with `lease_elsewhere` another process holds the scheduler's lease."""
    due = (datetime.now(UTC) - timedelta(minutes=2)).replace(second=0, microsecond=0)
    await h.start()
    h.api.push_text(ALICE, f"/brief {due:%H:%M} UTC", user_id=ALICE)
    await h.api.wait_for(lambda: any(f"{due:%H:%M}" in t for t in h.api.texts(ALICE)), timeout=10)
    assert h.app is not None
    [schedule] = await h.app.schedules.list(f"telegram:{ALICE}")
    await h.stop()

    db = Database(make_settings(h.home, h.extra_env).db_url)
    await db.start()
    try:
        store = ScheduleStore(db)
        now = datetime.now(UTC)
        await store.acquire_lease(LEASE_NAME, "elsewhere", now=now, ttl=3600)
        writer = AppScheduler(store)  # standing by: it writes the job without firing it
        await writer.start()
        await writer.add_brief_job(schedule, next_run_time=due)
        await writer.stop()
        if not lease_elsewhere:
            await store.release_lease(LEASE_NAME, "elsewhere", now=now)
    finally:
        await db.close()
    return schedule, due.date().isoformat()


async def run_row(app: App, schedule: Schedule, run_date: str) -> dict | None:
    assert app.schedules is not None
    return await app.schedules.store.get_run(schedule.id, run_date)


async def test_a_brief_due_at_start_up_is_delivered_once_the_chat_is_open(tmp_path):
    api = FakeBotAPI()
    h = RecordingHarness(tmp_path / "home", api, ScriptedClient(), extra_env=SCHEDULER_ON)
    schedule, run_date = await stage_due_brief(h, lease_elsewhere=False)
    h.script.add(reply(BRIEF_REPLY))
    try:
        app = await h.start()
        assert isinstance(app, RecordingApp) and app.scheduler is not None and app.scheduler.is_leader
        await api.wait_for(lambda: any(BRIEF_REPLY in x for x in api.texts(ALICE)), timeout=20)
        assert app.deliveries == [True]  # delivered into an open chat, on the first attempt

        async with asyncio.timeout(10):  # the outcome is recorded just after the delivery
            while (row := await run_row(app, schedule, run_date)) is None or row["finished_at"] is None:
                await asyncio.sleep(0.02)
        assert row is not None and (row["status"], row["attempts"]) == ("delivered", 1)
        assert sum(BRIEF_REPLY in x for x in api.texts(ALICE)) == 1
    finally:
        await h.stop()


async def test_a_standby_bot_does_not_fire_the_due_brief_until_it_takes_the_lease_over(tmp_path):
    api = FakeBotAPI()
    h = RecordingHarness(tmp_path / "home", api, ScriptedClient(), extra_env=SCHEDULER_ON)
    schedule, run_date = await stage_due_brief(h, lease_elsewhere=True)
    h.script.add(reply("hello Alice"), reply(BRIEF_REPLY))
    try:
        app = await h.start()
        assert isinstance(app, RecordingApp) and app.scheduler is not None
        # the chats are open and answering; the scheduler stands by
        api.push_text(ALICE, "hi", user_id=ALICE)
        await api.wait_for(lambda: "hello Alice" in api.texts(ALICE), timeout=10)
        assert not app.scheduler.is_leader
        assert app.deliveries == [] and await run_row(app, schedule, run_date) is None

        # the other process stops: this one takes the lease over and delivers the brief, once
        store = app.schedules.store if app.schedules is not None else None
        assert store is not None
        await store.release_lease(LEASE_NAME, "elsewhere", now=datetime.now(UTC))
        assert await app.scheduler.wait_until_leader(timeout=10)
        await api.wait_for(lambda: any(BRIEF_REPLY in x for x in api.texts(ALICE)), timeout=20)
        assert app.deliveries == [True]
    finally:
        await h.stop()


async def test_when_the_chats_fail_to_open_the_prepared_scheduler_is_stopped_and_its_lease_freed(tmp_path):
    """The scheduler is prepared (lease taken) before the chats open; if they cannot open (here a
    rejected token) the start fails as before, and the scheduler is stopped with it: its lease is
    given back, so a corrected restart takes it at once."""
    from agent.errors import ConfigError

    api = FakeBotAPI()
    api.fail("getMe", (401, {"ok": False, "error_code": 401, "description": "Unauthorized"}))
    h = RecordingHarness(tmp_path / "home", api, ScriptedClient(), extra_env=SCHEDULER_ON)
    try:
        with pytest.raises(ConfigError):
            await h.start()
        app = h.app
        assert app is not None and app.scheduler is not None
        assert not app.scheduler.running and not app.scheduler.is_leader
        assert app.schedules is not None
        state = await app.schedules.store.acquire_lease(LEASE_NAME, "next", now=datetime.now(UTC), ttl=60)
        assert state.held  # given back, not left to expire
    finally:
        await h.stop()
