"""ScheduleService: /brief commands end to end on a running AppScheduler, limits, chat zones, and
the manage_schedule / list_schedules tools (approval flags, unattended refusal)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.errors import ToolDenied, ToolFailed
from agent.tools.registry import Deps, ToolContext
from scheduler.app_scheduler import AppScheduler
from scheduler.service import ScheduleService
from scheduler.specs import ScheduleError
from scheduler.tools import schedule_tools
from tests.fakes.recorder import Recorder


@pytest.fixture
async def running(store):
    rec = Recorder()
    app = AppScheduler(store, on_brief=rec, default_timezone="Asia/Shanghai", retry_delays=(), stop_timeout=2)
    await app.start()
    yield app, ScheduleService(store, app, max_per_chat=3), rec
    await app.stop()


async def test_brief_command_flow(running):
    app, service, rec = running
    chat = "tg:100"
    reply = await service.handle_brief_command(chat, "u1", "/brief")
    assert "No brief is set" in reply and "Asia/Shanghai" in reply

    reply = await service.handle_brief_command(chat, "u1", "/brief 08:30 Asia/Shanghai")
    assert reply.startswith("Brief set:") and "every day 08:30 Asia/Shanghai" in reply and "next" in reply
    [first] = await service.list(chat)
    assert (first.spec, first.tz, first.created_by) == ("08:30", "Asia/Shanghai", "u1")
    assert first.job_id in await app.job_ids()

    reply = await service.handle_brief_command(chat, "u1", "/brief weekdays 21:00")
    assert "replaces every day 08:30" in reply
    [second] = await service.list(chat)
    ids = await app.job_ids()
    assert second.spec == "weekdays 21:00" and second.job_id in ids and first.job_id not in ids

    assert await service.handle_brief_command(chat, "u1", "/brief pause") == "Brief paused."
    assert second.job_id not in await app.job_ids()
    assert "paused" in await service.handle_brief_command(chat, "u1", "/brief")
    assert await service.handle_brief_command(chat, "u1", "/brief resume") == "Brief resumed."
    assert second.job_id in await app.job_ids()

    reply = await service.handle_brief_command(chat, "u1", "/brief tz America/New_York")
    assert "America/New_York" in reply
    await service.handle_brief_command(chat, "u1", "/brief trading_days 07:00")
    [third] = await service.list(chat)
    assert (third.spec, third.tz) == ("trading_days 07:00", "America/New_York")

    assert "Preparing" in await service.handle_brief_command(chat, "u1", "/brief now")
    await rec.wait_for(1)
    assert rec.calls == [(chat, third.id)]

    assert await service.handle_brief_command(chat, "u1", "/brief off") == "Brief turned off."
    assert await service.list(chat) == []
    assert third.job_id not in await app.job_ids()
    assert await service.handle_brief_command(chat, "u1", "/brief off") == "No brief was set."

    reply = await service.handle_brief_command(chat, "u1", "/brief 27:00")
    assert "bad time" in reply and "Usage" in reply


async def test_limits_zones_and_ownership(running):
    _app, service, _rec = running
    for hhmm in ("07:00", "08:00", "09:00"):
        await service.create("tg:1", hhmm)
    with pytest.raises(ScheduleError, match="already has 3"):
        await service.create("tg:1", "10:00")
    s = (await service.list("tg:1"))[0]
    with pytest.raises(ScheduleError, match="no schedule"):
        await service.pause("tg:other", s.id)  # another chat's id is not found
    with pytest.raises(ScheduleError, match="unknown time zone"):
        await service.create("tg:2", "08:00", timezone="Nowhere/Land")


async def test_service_without_a_running_scheduler_defers_jobs_to_reconcile(store):
    service = ScheduleService(store, None, default_timezone="UTC")
    s = await service.create("tg:1", "06:45")
    app = AppScheduler(store, retry_delays=())
    await app.start()
    try:
        assert s.job_id in await app.job_ids()
        assert app.last_reconcile.added == 1
    finally:
        await app.stop()


async def test_manage_schedule_tool(running):
    app, service, _rec = running
    manage = schedule_tools.get("manage_schedule")
    listing = schedule_tools.get("list_schedules")
    assert manage.spec.requires_approval and manage.spec.side_effect == "mutating"
    assert not listing.spec.requires_approval and listing.spec.concurrency_safe

    ctx = ToolContext(chat_key="dc:9", user_id="u9", session_id="s9", deps=Deps(service))
    created = (
        await manage.call(
            ctx, {"action": "create", "spec": "trading_days 08:30", "timezone": "Asia/Shanghai"}
        )
    )["created"]
    assert created["spec"] == "trading_days 08:30" and created["timezone"] == "Asia/Shanghai"
    assert datetime.fromisoformat(created["next_run"]) > datetime.now(UTC)
    sid = created["schedule_id"]
    assert (await listing.call(ctx, {}))["schedules"][0]["schedule_id"] == sid
    assert (await manage.call(ctx, {"action": "pause", "schedule_id": sid}))["paused"]["paused"] is True
    assert (await manage.call(ctx, {"action": "resume", "schedule_id": sid}))["resumed"]["paused"] is False
    assert f"brief:{sid}" in await app.job_ids()
    with pytest.raises(ToolFailed, match="needs schedule_id"):
        await manage.call(ctx, {"action": "delete"})
    with pytest.raises(ToolFailed, match="bad time"):
        await manage.call(ctx, {"action": "create", "spec": "99:99"})
    assert (await manage.call(ctx, {"action": "delete", "schedule_id": sid})) == {"deleted": sid}
    assert (await manage.call(ctx, {"action": "list"})) == {"schedules": []}

    unattended = ToolContext(chat_key="dc:9", deps=Deps(service), unattended=True)
    with pytest.raises(ToolDenied):
        await manage.call(unattended, {"action": "create", "spec": "08:30"})
