"""Scheduled briefs: the scheduler calls `BriefRunner.run(chat_key, schedule_id)` at each chat's
time; it runs the `daily_brief` skill as an unattended turn and delivers it into the chat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agent.skills import skill_turn_text

if TYPE_CHECKING:
    from bot.app import App

# Thousands of chats may share 08:30: run a few briefs at a time; the rest wait their turn.
MAX_CONCURRENT_BRIEFS = 4
BRIEF_SKILL = "daily_brief"


class BriefRunner:
    def __init__(
        self,
        app: App,
        max_concurrent: int = MAX_CONCURRENT_BRIEFS,
        now: Callable[[], datetime] | None = None,
    ):
        self.app = app
        self._slots = asyncio.Semaphore(max_concurrent)
        self._now = now or (lambda: datetime.now(UTC))

    def brief_text(self) -> str:
        skill = self.app.skills.get(BRIEF_SKILL) if self.app.skills is not None else None
        if skill is None:
            text = "Write my daily brief: holdings and alerts, the market overview, and my discipline."
        else:
            text = skill_turn_text(skill, "")
        # a brief on "trading days" outside the known calendar must say the day is a guess
        market = getattr(self.app, "market", None)
        if market is not None and (warn := market.calendar_warning(self._now())):
            text += f"\n\nState this at the top of the brief: {warn}."
        return text

    async def run(self, chat_key: str, schedule_id: str) -> None:
        gateway = self.app.gateway
        if gateway is None:
            raise RuntimeError("no chat adapter is running to deliver the brief")
        async with self._slots:
            await gateway.run_brief(chat_key, self.brief_text())
