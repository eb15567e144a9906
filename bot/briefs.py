"""Scheduled briefs: the scheduler calls `BriefRunner.run(chat_key, schedule_id)` at each chat's
time; it runs the `daily_brief` skill as an unattended turn and delivers it into the chat.
`KeptBriefs` keeps an acknowledged `/brief now` across a crash until it has run."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agent.skills import skill_turn_text
from bot.received import BRIEFS, brief_from_record, brief_record

if TYPE_CHECKING:
    from agent import Skill
    from scheduler.jobs import BriefOutcome

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


class KeptStore(Protocol):
    async def receive_message(
        self, platform: str, update_id: str, pending: dict[str, Any] | None
    ) -> bool: ...

    async def release_received(self, receipts: list[tuple[str, str]]) -> None: ...

    async def received_pending(self) -> list[tuple[tuple[str, str], datetime, dict[str, Any]]]: ...


class KeptBriefs:
    """An acknowledged `/brief now`, kept as a received record (bot/received.py) under
    ("brief", token) until its outcome is known: the scheduler's `KeptBriefs` port. A brief that
    was not delivered is told to its chat (`tell(chat_key, i18n key)`) instead of vanishing."""

    def __init__(self, store: KeptStore, tell: Callable[[str, str], Awaitable[None]]):
        self._store = store
        self._tell = tell

    async def keep(self, chat_key: str) -> str:
        token = secrets.token_hex(8)
        await self._store.receive_message(BRIEFS, token, brief_record(chat_key))
        return token

    async def done(self, token: str, chat_key: str, outcome: BriefOutcome) -> None:
        if outcome.status != "delivered":
            await self._tell(chat_key, "brief_not_delivered")
        await self._store.release_received([(BRIEFS, token)])

    async def kept(self) -> list[tuple[str, str]]:
        found = []
        for (kind, token), _at, record in await self._store.received_pending():
            if kind != BRIEFS:
                continue
            chat_key = brief_from_record(record)
            if chat_key:
                found.append((token, chat_key))
            else:  # not a record this version wrote: nothing to run
                await self._store.release_received([(kind, token)])
        return found
