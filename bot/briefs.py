"""Scheduled briefs: the scheduler calls `BriefRunner.run(chat_key, schedule_id)` at each chat's
time; it writes the `daily_brief` skill's turn text and hands it to `ChatBriefs`, which delivers it
into the chat's lane as an unattended turn. `KeptBriefs` keeps an acknowledged `/brief now` across
a crash until it has run."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from adapters.base import DeliveryError
from agent.skills import skill_turn_text
from bot.received import BRIEFS, brief_from_record, brief_record

if TYPE_CHECKING:
    from agent import Skill
    from bot.chat_output import ChatOutput
    from bot.chats import ChatDirectory, ChatState
    from bot.lanes import Lanes
    from scheduler.jobs import BriefOutcome

# Thousands of chats may share 08:30: run a few briefs at a time; the rest wait their turn.
MAX_CONCURRENT_BRIEFS = 4
BRIEF_SKILL = "daily_brief"
DEFAULT_BRIEF = "Write my daily brief: holdings and alerts, the market overview, and my discipline."


class BriefDelivery(Protocol):
    async def deliver(self, chat_key: str, text: str) -> None:
        """The brief (its turn text) runs in that chat; raises when it cannot be delivered."""
        ...


class ChatHold(Protocol):
    async def hold(self, state: ChatState) -> bool:
        """Replicas: the chat is held here, its stored messages taken up first; False when another
        replica's turn did not end in time (bot/gateway.py)."""
        ...


class ChatBriefs:
    """Delivers a brief into its chat: the market data's date and age first (written here, not
    left to the model), then the unattended turn in the chat's lane, behind the chat's own work.
    `data_line`: that line in a language (empty: none) — a function, as it is one query with
    nothing else to hold; None without market data."""

    def __init__(
        self,
        chats: ChatDirectory,
        output: ChatOutput,
        lanes: Lanes,
        hold: ChatHold,
        *,
        data_line: Callable[[str], Awaitable[str]] | None = None,
    ):
        self._chats = chats
        self._output = output
        self._lanes = lanes
        self._hold = hold
        self._data_line = data_line

    async def deliver(self, chat_key: str, text: str) -> None:
        """Raises if the brief cannot be delivered, so the scheduler retries with backoff."""
        state = await self._chats.by_key(chat_key)
        if state is None or not self._output.serves(state):
            raise DeliveryError(f"chat {chat_key} is not reachable on a running adapter")
        if self._data_line is not None and (line := await self._data_line(state.lang)):
            await self._output.say(state, line)
        if not await self._hold.hold(state):
            raise DeliveryError(f"chat {chat_key} is busy on another replica")
        await self._lanes.of(state).run_brief(text)


class BriefRunner:
    """Given only what a brief needs (the composition root passes them): `to` delivers it into the
    chat (`ChatBriefs`), `skill` finds a skill by
    name (none: the default wording), `calendar_warning` is the market calendar's range warning for
    a time (none: no market). The chats it delivers to open after the scheduler is built: they are
    given with `deliver_to`; until then a brief fails and the scheduler retries it."""

    def __init__(
        self,
        to: BriefDelivery | None = None,
        *,
        skill: Callable[[str], Skill | None] | None = None,
        calendar_warning: Callable[[datetime], str | None] | None = None,
        max_concurrent: int = MAX_CONCURRENT_BRIEFS,
        now: Callable[[], datetime] | None = None,
    ):
        self._to = to
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

    def deliver_to(self, chats: BriefDelivery) -> None:
        self._to = chats

    async def run(self, chat_key: str, schedule_id: str) -> None:
        if self._to is None:
            raise RuntimeError("no chat adapter is running to deliver the brief")
        async with self._slots:
            await self._to.deliver(chat_key, self.brief_text())


class KeptStore(Protocol):
    async def receive_message(
        self, platform: str, update_id: str, pending: dict[str, Any] | None
    ) -> bool: ...

    async def release_received(self, receipts: list[tuple[str, str]]) -> None: ...

    async def received_pending(self) -> list[tuple[tuple[str, str], datetime, dict[str, Any]]]: ...


class Teller(Protocol):
    async def tell(self, chat_key: str, key: str) -> None:
        """One line (an i18n key) into a chat known by its key, in its language."""
        ...


class KeptBriefs:
    """An acknowledged `/brief now`, kept as a received record (bot/received.py) under
    ("brief", token) until its outcome is known: the scheduler's `KeptBriefs` port. A brief that
    was not delivered is told to its chat (`chats.tell`) instead of vanishing."""

    def __init__(self, store: KeptStore, chats: Teller):
        self._store = store
        self._chats = chats

    async def keep(self, chat_key: str) -> str:
        token = secrets.token_hex(8)
        await self._store.receive_message(BRIEFS, token, brief_record(chat_key))
        return token

    async def done(self, token: str, chat_key: str, outcome: BriefOutcome) -> None:
        if outcome.status != "delivered":
            await self._chats.tell(chat_key, "brief_not_delivered")
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
