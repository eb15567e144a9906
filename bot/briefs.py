"""Scheduled briefs: the scheduler calls `BriefRunner.run(chat_key, schedule_id)` at each chat's
time; it runs the `daily_brief` skill as an unattended turn and delivers it into the chat."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agent.skills import skill_turn_text

if TYPE_CHECKING:
    from agent.skills import Skill

# Thousands of chats may share 08:30: run a few briefs at a time; the rest wait their turn.
MAX_CONCURRENT_BRIEFS = 4
BRIEF_SKILL = "daily_brief"
DEFAULT_BRIEF = "Write my daily brief: holdings and alerts, the market overview, and my discipline."

# (chat_key, the brief's turn text) → the brief runs in that chat; raises when it cannot be delivered
Deliver = Callable[[str, str], Awaitable[None]]


class BriefRunner:
    """Given only what a brief needs (the composition root passes them): `deliver` runs the turn
    in the chat, `skill` finds a skill by name (none: the default wording), `calendar_warning` is
    the market calendar's range warning for a time (none: no market)."""

    def __init__(
        self,
        deliver: Deliver,
        *,
        skill: Callable[[str], Skill | None] | None = None,
        calendar_warning: Callable[[datetime], str | None] | None = None,
        max_concurrent: int = MAX_CONCURRENT_BRIEFS,
        now: Callable[[], datetime] | None = None,
    ):
        self._deliver = deliver
        self._skill = skill
        self._calendar_warning = calendar_warning
        self._slots = asyncio.Semaphore(max_concurrent)
        self._now = now or (lambda: datetime.now(UTC))

    def brief_text(self) -> str:
        skill = self._skill(BRIEF_SKILL) if self._skill is not None else None
        text = DEFAULT_BRIEF if skill is None else skill_turn_text(skill, "")
        # a brief on "trading days" outside the known calendar must say the day is a guess
        if self._calendar_warning is not None and (warn := self._calendar_warning(self._now())):
            text += f"\n\nState this at the top of the brief: {warn}."
        return text

    async def run(self, chat_key: str, schedule_id: str) -> None:
        async with self._slots:
            await self._deliver(chat_key, self.brief_text())
