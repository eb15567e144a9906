"""BriefRunner is given only what a brief needs: a way to deliver into a chat, the skill
lookup and the calendar warning — never the App. And the App's delivery refuses (so the scheduler
retries) while no chat adapter runs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from agent.skills import Skill
from bot.app import App
from bot.briefs import BRIEF_SKILL, DEFAULT_BRIEF, BriefRunner
from tests.bot.conftest import make_settings

NOW = datetime(2026, 6, 1, tzinfo=UTC)


async def test_a_brief_is_the_skill_delivered_into_its_chat():
    delivered: list[tuple[str, str]] = []

    async def deliver(chat_key: str, text: str) -> None:
        delivered.append((chat_key, text))

    skill = Skill(BRIEF_SKILL, "The daily brief", "Holdings first, then the market.")
    asked: list[str] = []

    def lookup(name: str) -> Skill | None:
        asked.append(name)
        return skill if name == BRIEF_SKILL else None

    await BriefRunner(SimpleNamespace(deliver=deliver), skill=lookup, now=lambda: NOW).run("telegram:1", "s1")
    assert asked == [BRIEF_SKILL]
    assert delivered[0][0] == "telegram:1"
    assert delivered[0][1].startswith(f"/{BRIEF_SKILL}") and "Holdings first" in delivered[0][1]


async def test_without_skills_or_market_the_default_wording_without_a_warning():
    delivered: list[str] = []

    async def deliver(chat_key: str, text: str) -> None:
        delivered.append(text)

    await BriefRunner(SimpleNamespace(deliver=deliver)).run("discord:9", "s1")
    assert delivered == [DEFAULT_BRIEF]


async def test_a_calendar_warning_is_stated_at_the_top():
    async def deliver(chat_key: str, text: str) -> None: ...

    seen: list[datetime | None] = []

    def warning(now: datetime | None) -> str | None:
        seen.append(now)
        return "the calendar ends soon"

    text = BriefRunner(
        SimpleNamespace(deliver=deliver), calendar_warning=warning, now=lambda: NOW
    ).brief_text()
    assert seen == [NOW] and text.endswith("State this at the top of the brief: the calendar ends soon.")


async def test_at_most_max_concurrent_briefs_run_at_once():
    running, peak = 0, 0
    release = asyncio.Event()

    async def deliver(chat_key: str, text: str) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1

    runner = BriefRunner(SimpleNamespace(deliver=deliver), max_concurrent=2)
    briefs = [asyncio.create_task(runner.run(f"telegram:{i}", "s")) for i in range(5)]
    while running < 2:
        await asyncio.sleep(0)
    for _ in range(10):
        await asyncio.sleep(0)
    assert peak == 2
    release.set()
    await asyncio.gather(*briefs)
    assert peak == 2


async def test_the_apps_delivery_refuses_while_no_chat_runs(tmp_path):
    """The scheduler may start without the chats (or before them): the brief fails, and the
    scheduler's retry delivers it later."""
    app = App(make_settings(tmp_path))
    app._build_scheduler()
    assert app.brief_runner is not None
    with pytest.raises(RuntimeError, match="no chat adapter"):
        await app.brief_runner.run("telegram:1", "s1")
