"""Background tasks in the chat: one progress message per running task, edited as it advances;
when it finishes, that message shows the outcome, what it produced (a backtest's chart) is sent,
and a system notice wakes a turn in the chat's lane so the agent can report on it."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Protocol

from adapters.base import DeliveryError, SentMessage
from agent import NoticeDeferred, TaskRecord
from agent.background_tools import task_notification_text
from bot.chat_output import ChatOutput
from bot.chats import ChatDirectory, ChatState
from bot.i18n_tasks import task_done_text, task_progress_text
from bot.lanes import Lanes
from bot.received import NOTICES, notice_record

log = logging.getLogger(__name__)


class NoticeStore(Protocol):
    async def receive_message(
        self, platform: str, update_id: str, pending: dict[str, Any] | None
    ) -> bool: ...


class TaskNotices:
    def __init__(self, store: NoticeStore, output: ChatOutput, chats: ChatDirectory, lanes: Lanes):
        self._store = store
        self._output = output
        self._chats = chats
        self._lanes = lanes
        self._progress: dict[str, SentMessage] = {}  # task id -> its progress message

    async def _chat_of(self, record: TaskRecord) -> ChatState | None:
        state = await self._chats.by_key(record.chat_key)
        if state is None or state.chat.platform not in self._output.adapters:
            return None
        return state

    async def notify_task(self, record: TaskRecord) -> None:
        """A background task finished: a system notification wakes a turn in its chat. A chat on a
        platform this process does not serve (the console, next to a Telegram chat's task) is left
        to the process that serves it: `NoticeDeferred` keeps the notice pending."""
        state = await self._chats.by_key(record.chat_key)
        if state is None:
            log.warning("task %s finished but chat %s is unknown here", record.id, record.chat_key)
            return
        if state.chat.platform not in self._output.adapters:
            raise NoticeDeferred(f"{state.chat.platform} is not served by this process")
        msg = self._progress.pop(record.id, None)
        if msg is not None:
            with contextlib.suppress(DeliveryError):
                await self._output.adapters[state.chat.platform].edit_text(
                    msg, task_done_text(state.lang, record), format="plain"
                )
        # The ledger counts the notice as delivered once this returns: record it until its turn
        # has stored it, so a crash before then does not lose it.
        text = task_notification_text(record)
        receipt = (NOTICES, str(record.id))
        if not await self._store.receive_message(*receipt, notice_record(state.key, text)):
            return  # recorded before: already delivered (or waiting to be taken up)
        await self._send_attachments(state, record)
        self._lanes.of(state).submit_notice(text, receipt)

    async def _send_attachments(self, state: ChatState, record: TaskRecord) -> None:
        """What the task produced for the user (a backtest's chart) goes to the chat as it is:
        images as photos, other files as documents where the platform has them."""
        adapter = self._output.adapters[state.chat.platform]
        for att in record.attachments:
            try:
                if att.mime.startswith("image/"):
                    await adapter.send_image(state.chat, att.path, att.caption)
                elif (send_file := getattr(adapter, "send_file", None)) is not None:
                    await send_file(state.chat, att.path, att.caption)
                else:
                    await adapter.send_text(state.chat, f"📎 {att.path}", format="plain")
            except (DeliveryError, OSError) as exc:
                log.warning("attachment %s of task %s not delivered: %s", att.path, record.id, exc)

    async def task_progress(self, record: TaskRecord) -> None:
        """One status message per task, edited as progress arrives (the manager throttles it)."""
        state = await self._chat_of(record)
        if state is None or record.terminal:
            return
        text = task_progress_text(state.lang, record)
        adapter = self._output.adapters[state.chat.platform]
        try:
            msg = self._progress.get(record.id)
            if msg is None:
                self._progress[record.id] = await adapter.send_text(state.chat, text, format="plain")
            else:
                await adapter.edit_text(msg, text, format="plain")
        except DeliveryError as exc:
            log.debug("task progress not shown: %s", exc)
