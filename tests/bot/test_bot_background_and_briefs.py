"""Through the front door: a background backtest reports back into its chat on its own,
and a brief is scheduled and delivered through the fake Telegram API."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE, ON_BOTH_DATABASES, Harness
from tests.fakes.telegram_api import FakeBotAPI


@ON_BOTH_DATABASES
async def test_background_backtest_reports_back_into_the_chat(harness):
    def report(req):
        notice = req.messages[-1].text
        assert notice.startswith("[SYSTEM NOTIFICATION - NOT USER INPUT]") and "<task-notification>" in notice
        assert req.messages[-1].meta.get("notification")
        return reply("Backtest finished: see the equity curve above.")

    harness.script.add(
        reply(tool_calls=[("run_backtest", {"codes": ["600519", "000001"], "start": "2025-01-02"})]),
        lambda req: reply("Started the backtest as task " + req.messages[-1].tool_results[0].content[:60]),
        report,
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "backtest 600519 and 000001 this year", user_id=ALICE)
    await api.wait_for(lambda: any("Started the backtest" in t for t in api.texts(ALICE)), timeout=10)
    await api.wait_for(lambda: any("Backtest finished" in t for t in api.texts(ALICE)), timeout=60)
    # reported exactly once
    await asyncio.sleep(0.3)  # absence: time for a second report
    assert sum("Backtest finished" in t for t in api.texts(ALICE)) == 1
    assert len(harness.script.requests) == 3
    # the equity-curve chart the task produced reaches the chat as a photo, once
    photos = [c for c in api.calls_to("sendPhoto") if str(c.params.get("chat_id")) == str(ALICE)]
    assert len(photos) == 1 and "CSI 300" in photos[0].params.get("caption", "")


@ON_BOTH_DATABASES
async def test_brief_scheduled_and_delivered_through_telegram(tmp_path, database_env):
    api = FakeBotAPI()
    from agent.providers.scripted import ScriptedClient

    script = ScriptedClient()
    h = Harness(
        tmp_path / "home", api, script, extra_env={"TAPEBOT_SCHEDULER__ENABLED": "true", **database_env}
    )

    def brief(req):
        assert "daily brief" in req.messages[-1].text.lower()
        # the shipped daily_brief skill's instructions, not a generic prompt
        assert '<skill name="daily_brief">' in req.messages[-1].text
        assert "Keep it under 200 words" in req.messages[-1].text
        return reply("Brief for today: market as of 2025-09-03 is range-bound.")

    script.add(brief)
    try:
        await h.start()
        api.push_text(ALICE, "/brief 08:30 Asia/Shanghai", user_id=ALICE)
        await api.wait_for(lambda: any("08:30" in t for t in api.texts(ALICE)), timeout=10)
        schedules = await h.app.schedules.list(f"telegram:{ALICE}")
        assert len(schedules) == 1 and schedules[0].tz == "Asia/Shanghai"
        job_ids = sorted(await h.app.scheduler.job_ids())
        brief_jobs = [j for j in job_ids if "brief" in j]
        assert brief_jobs and await h.app.scheduler.next_run_time(brief_jobs[0]) is not None
        api.push_text(ALICE, "/brief now", user_id=ALICE)
        brief = await api.wait_for(
            lambda: next((t for t in api.texts(ALICE) if "Brief for today" in t), None), timeout=20
        )
        assert brief.startswith("🗞 Daily brief · 20")  # headed, so it reads as the brief it is
        api.push_text(ALICE, "/brief off", user_id=ALICE)
        await api.wait_for(lambda: len(api.texts(ALICE)) >= 5, timeout=10)
        assert await h.app.schedules.list(f"telegram:{ALICE}") == []
    finally:
        await h.stop()


async def test_tasks_command_lists_background_work(harness):
    harness.script.add(
        reply(tool_calls=[("run_backtest", {"codes": ["600519"]})]),
        reply("started"),
        reply("done"),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "backtest 600519", user_id=ALICE)
    await api.wait_for(lambda: any(t == "started" for t in api.texts(ALICE)), timeout=10)
    api.push_text(ALICE, "/tasks", user_id=ALICE)
    await api.wait_for(lambda: any("run_backtest" in t and "bg_" in t for t in api.texts(ALICE)), timeout=10)


@ON_BOTH_DATABASES
async def test_task_notice_during_a_turn_gets_its_own_turn_afterwards(harness):
    release = asyncio.Event()
    seen = []

    async def slow_answer(req):
        return None

    def user_turn(req):
        seen.append([m.text for m in req.messages])
        return reply("answer to the user")

    def notice_turn(req):
        seen.append([m.text for m in req.messages])
        return reply("your backtest finished")

    harness.script.add(
        reply(tool_calls=[("update_plan", {"steps": [{"text": "think"}]})]), user_turn, notice_turn
    )
    await harness.start()
    gw, api = harness.app.gateway, harness.api
    original = gw.runtime.tools.get("update_plan").fn

    async def blocking_plan(ctx, steps):
        await release.wait()
        return await original(ctx, steps)

    gw.runtime.tools.get("update_plan").fn = blocking_plan
    try:
        api.push_text(ALICE, "analyze 600519", user_id=ALICE)
        state = await api.wait_for(
            lambda: next((s for s in gw.chats.loaded() if gw.lanes.of(s).is_running), None)
        )
        gw.lanes.of(state).submit_notice(
            "[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification>bg_1 done</task-notification>"
        )
        release.set()
        await api.wait_for(lambda: any("your backtest finished" in t for t in api.texts(ALICE)), timeout=10)
    finally:
        gw.runtime.tools.get("update_plan").fn = original
    # the user's turn never saw the notice; the notice came after, as its own message
    assert not any("task-notification" in text for text in seen[0])
    assert "task-notification" in seen[1][-1]
