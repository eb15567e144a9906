"""What the chat parts (lanes, waiting, recovery, task notices, commands) need to reach the chats:
the running adapters, a line into a chat, how a turn is shown there, and the tasks they start.

One object, built by the gateway and handed to each part, so no part calls back into the router.
The turn view shows cards and questions through `Waiting` and continues an answer a stop cut off
through `Recovery`; both are built after the lanes that use the view, so they are given to it once
they exist (`shows_with`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from adapters.base import ChatAdapter, DeliveryError, SentMessage
from agent import events as ev
from agent.cancel import CancelSignal
from bot.chats import ChatDirectory, ChatState
from bot.delivery import TurnView
from bot.i18n import t
from bot.progress import ProgressBoard
from bot.sent import SentStore, forget_sent, remember_sent

log = logging.getLogger(__name__)


class WaitingCards(Protocol):
    """What a suspended turn waits on, sent into its chat (bot/waiting.py)."""

    async def send_card(self, state: ChatState, event: ev.ApprovalRequired) -> None: ...

    async def send_question(self, state: ChatState, event: ev.Question) -> None: ...


class CutOffAnswers(Protocol):
    """Answers a stop cut off mid-stream, for the resumed turn to replace (bot/recovery.py)."""

    def adopt_partial(self, chat_key: str) -> list[SentMessage] | None: ...


class ChatOutput:
    """The chats as the chat parts see them. `crash_kept`: several replicas share the database, so
    an answer already shown when its replica dies is replaced by the survivor's, not repeated."""

    def __init__(
        self,
        store: SentStore,
        chats: ChatDirectory,
        *,
        board: ProgressBoard,
        stop: CancelSignal,
        crash_kept: bool = False,
    ):
        self.adapters: dict[str, ChatAdapter] = {}
        self.tasks: set[asyncio.Task[Any]] = set()  # what `drain` waits for
        self.typing_sleep: Callable[[float], Coroutine[Any, Any, Any]] = asyncio.sleep  # tests inject
        self._store = store
        self._chats = chats
        self._board = board
        self._stop = stop
        self._replicas = crash_kept
        self._cards: WaitingCards | None = None
        self._partials: CutOffAnswers | None = None

    def shows_with(self, cards: WaitingCards, partials: CutOffAnswers) -> None:
        self._cards, self._partials = cards, partials

    # ---- the chats ---------------------------------------------------------------------------
    def attach(self, adapter: ChatAdapter) -> None:
        self.adapters[adapter.platform] = adapter

    def serves(self, state: ChatState) -> bool:
        """The chat's platform runs in this process."""
        return state.chat.platform in self.adapters

    def adapter(self, state: ChatState) -> ChatAdapter:
        return self.adapters[state.chat.platform]

    async def say(self, state: ChatState, text: str, fmt: str = "plain") -> SentMessage | None:
        """One message into the chat; a failed delivery is logged, never raised."""
        adapter = self.adapters[state.chat.platform]
        try:
            return await adapter.send_text(state.chat, text, format=fmt)  # type: ignore[arg-type]
        except DeliveryError as exc:
            log.warning("delivery to %s failed: %s", state.key, exc)
            return None

    async def tell(self, chat_key: str, key: str) -> None:
        """One line (an i18n key) into a chat known by its key, in its language."""
        state = await self._chats.by_key(chat_key)
        if state is not None and self.serves(state):
            await self.say(state, t(state.lang, key))

    # ---- tasks -------------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name or None)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    # ---- how a turn is shown -----------------------------------------------------------------
    def view(self, state: ChatState) -> TurnView:
        if self._cards is None or self._partials is None:
            raise RuntimeError("the chat output shows turns only once waiting and recovery exist")
        store, waiting, recovery = self._store, self._cards, self._partials
        return TurnView(
            self.adapters[state.chat.platform],
            state.chat,
            state.lang,
            on_approval=lambda e: waiting.send_card(state, e),
            on_question=lambda e: waiting.send_question(state, e),
            board=self._board,
            key=state.key,
            sleep=self.typing_sleep,
            stop=self._stop,
            on_paused=lambda sent, record: remember_sent(
                store, "progress", state.key, state, sent, progress=record
            ),
            on_partial=lambda sent: remember_sent(
                store, "partial", state.key, state, sent[0], message_ids=[m.message_id for m in sent]
            ),
            adopt=recovery.adopt_partial(state.key),
            on_settled=lambda: forget_sent(store, "progress", state.key),
            on_delivered=store.answer_sent,
            **(self._crash_kept(state) if self._replicas else {}),
        )

    def _crash_kept(self, state: ChatState) -> dict[str, Any]:
        """Replicas: an answer already shown when its replica dies is replaced by the survivor's
        resumed answer, not repeated (as after a stop)."""
        store = self._store
        return {
            "on_streamed": lambda sent: remember_sent(
                store, "partial", state.key, state, sent[0], message_ids=[m.message_id for m in sent]
            ),
            "on_answered": lambda: forget_sent(store, "partial", state.key),
        }
