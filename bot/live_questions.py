"""Questions asked in a chat while a tool call waits on the answer (an MCP server's elicitation,
agent/elicit.py): the question goes to the chat with a button per option, and the asker's next
message or tap there answers it — before the gateway would fold that message into the running
turn. Only the person whose turn made the call can answer; anyone else's message goes on as
usual. One question per chat at a time."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapters.base import Button, ChatAdapter, DeliveryError
from agent import LiveQuestions
from bot.chats import ChatDirectory

PREFIX = "lq"  # a tap's data: lq<option index>:<question token>


@dataclass
class _Pending:
    future: asyncio.Future[str]
    user_id: str
    options: list[str]
    token: str


class ChatQuestions(LiveQuestions):
    """Questions asked in the chat the tool call came from."""

    def __init__(self, chats: ChatDirectory, adapters: Mapping[str, ChatAdapter]) -> None:
        self._chats = chats
        self._adapters = adapters
        self._pending: dict[str, _Pending] = {}

    async def ask(
        self, chat_key: str, user_id: str, question: str, options: Sequence[str], timeout: float
    ) -> str | None:
        state = await self._chats.by_key(chat_key)
        adapter = self._adapters.get(state.chat.platform) if state is not None else None
        if state is None or adapter is None or chat_key in self._pending:
            return None
        token = secrets.token_hex(4)
        labels = [str(o)[:60] for o in options]
        buttons = (
            [[Button(label, f"{PREFIX}{i}:{token}") for i, label in enumerate(labels)]] if labels else None
        )
        pending = _Pending(asyncio.get_running_loop().create_future(), user_id, labels, token)
        self._pending[chat_key] = pending
        try:
            try:
                await adapter.send_text(state.chat, question, buttons=buttons, format="plain")
            except DeliveryError:
                return None
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(asyncio.shield(pending.future), timeout)
            return None
        finally:
            if self._pending.get(chat_key) is pending:
                del self._pending[chat_key]

    def answer_text(self, chat_key: str, user_id: str, text: str) -> bool:
        """True when `text` answered the chat's open question (the message is then used up)."""
        pending = self._pending.get(chat_key)
        if pending is None or pending.user_id != user_id or pending.future.done():
            return False
        pending.future.set_result(text)
        return True

    def answer_tap(self, chat_key: str, user_id: str, data: str) -> bool | None:
        """A tap on a question's button: True when it answered, False when it was a stale or
        someone else's tap on one, None when the data is not ours."""
        if not data.startswith(PREFIX) or ":" not in data:
            return None
        index, _, token = data[len(PREFIX) :].partition(":")
        pending = self._pending.get(chat_key)
        if pending is None or pending.token != token or not index.isdigit():
            return False
        if pending.user_id != user_id or pending.future.done() or int(index) >= len(pending.options):
            return False
        pending.future.set_result(pending.options[int(index)])
        return True
