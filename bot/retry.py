"""Storage that fails (a write lock held beyond the busy timeout, a full disk) loses nothing: an
inbound event's first write, and a turn's, are retried with backoff while the event waits in
memory; the chat is told once that the bot cannot keep up, and asked to send it again only when
the whole budget ran out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from adapters.base import ChatAdapter, DeliveryError, Inbound, InboundMessage
from agent import CancelSignal
from agent import events as ev
from agent.errors import StorageError, TurnNotBegun
from bot.chats import ChatState
from bot.i18n import pick_language, t

log = logging.getLogger(__name__)


def preview(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True)
class StorageRetry:
    """How long an inbound event waits for storage that fails: retried after `first_s`, doubling
    up to `max_s`, for `budget_s` in all; then the user is asked to send it again."""

    first_s: float = 0.5
    max_s: float = 30.0
    budget_s: float = 600.0


class StoragePatience:
    """The retry policy (`policy`, replaceable) and what it shares between inbound events and
    turns: events wait here in arrival order (FIFO) and are stored in that order once storage
    works again; the chats told about it already are told once."""

    def __init__(self, adapters: dict[str, ChatAdapter], policy: StorageRetry | None = None):
        self.policy = policy or StorageRetry()
        self._adapters = adapters
        self._queue = asyncio.Lock()
        self._told: set[str] = set()

    async def stored(self, inbound: Inbound, write: Callable[[], Coroutine[Any, Any, bool]]) -> bool | None:
        """The event's first write (its record or its id), retried while storage fails: the event is
        held in memory meanwhile and the adapter does not acknowledge it while this runs. The chat
        is told once that the bot cannot keep up. None when the budget ran out (the user is asked
        to send it again)."""
        if not self._queue.locked():  # the usual case: no trouble, no waiting
            try:
                return await write()
            except StorageError as exc:
                log.warning(
                    "storing %s %s failed; retrying: %s", inbound.chat.platform, inbound.update_id, exc
                )
        async with self._queue:  # FIFO: events are stored in the order they came
            policy = self.policy
            loop = asyncio.get_running_loop()
            deadline = loop.time() + policy.budget_s
            delay = policy.first_s
            attempts = 0
            while True:
                if attempts:  # the first attempt of an event queued behind another is immediate
                    await self.tell(inbound, "storage_trouble")
                    if loop.time() + delay > deadline:
                        log.error("gave up storing %s %s after %d attempts",
                                  inbound.chat.platform, inbound.update_id, attempts)  # fmt: skip
                        text = inbound.text if isinstance(inbound, InboundMessage) else ""
                        await self.tell(inbound, "storage_gave_up", preview=preview(text or "…"))
                        self._told.discard(inbound.chat.key)
                        return None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, policy.max_s)
                attempts += 1
                try:
                    result = await write()
                except StorageError as exc:
                    log.warning("storage still failing (attempt %d): %s", attempts, exc)
                    attempts = max(attempts, 1)
                    continue
                self._told.discard(inbound.chat.key)
                return result

    async def tell(self, inbound: Inbound, key: str, **fields: Any) -> None:
        """Say `key` in the event's chat, in its sender's language: no chat state needed (storage
        may be what failed)."""
        if key == "storage_trouble":
            if inbound.chat.key in self._told:
                return
            self._told.add(inbound.chat.key)
        adapter = self._adapters.get(inbound.chat.platform)
        if adapter is not None:
            lang = pick_language(inbound.user.language_code)
            with contextlib.suppress(DeliveryError):
                await adapter.send_text(inbound.chat, t(lang, key, **fields), format="plain")

    async def begun(
        self,
        state: ChatState,
        run: Callable[[], AsyncIterator[ev.RuntimeEvent]],
        say: Callable[[ChatState, str], Awaitable[Any]],
        stop: CancelSignal,
        text: str,
    ) -> AsyncIterator[ev.RuntimeEvent]:
        """A turn, its first write retried while storage fails (the same policy as an inbound
        event's): the message is recorded already, so it waits in memory meanwhile; the chat is
        told once. A stop ends the waiting (the restart takes the record up); after the budget the
        user is asked to send it again."""
        policy = self.policy
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.budget_s
        delay = policy.first_s
        told = state.chat.key  # the chats told already, shared with inbound events' retries
        while True:
            try:
                events = run()
                try:
                    async for event in events:
                        self._told.discard(told)  # begun: a later fault is news again
                        yield event
                finally:  # closed with this wrapper (an early exit, a cancellation)
                    aclose = getattr(events, "aclose", None)
                    if aclose is not None:
                        await aclose()
                return
            except TurnNotBegun as exc:
                log.warning("a turn in %s could not begin; retrying: %s", state.key, exc)
                if loop.time() + delay > deadline:
                    log.error("gave up beginning a turn in %s", state.key)
                    self._told.discard(told)
                    await say(state, t(state.lang, "storage_gave_up", preview=preview(text or "…")))
                    return
                if told not in self._told:
                    self._told.add(told)
                    await say(state, t(state.lang, "storage_trouble"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return  # recorded: the restart takes the message up
            delay = min(delay * 2, policy.max_s)
