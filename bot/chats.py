"""Chat key → conversation state: which session a chat is in, its language, model and owner.

A chat key is (platform, chat, thread/topic); in groups configured `per_user` the user is part of
it. `/new` points the chat at a fresh session id; the mapping is persisted so a restart continues
the same conversation.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Protocol

from adapters.base import ChatRef, UserRef
from memory.chat_tables import ChatRecord


class ChatStore(Protocol):
    """The `chats` table (memory.chat_tables)."""

    async def load_chat(self, key: str) -> ChatRecord | None: ...

    async def save_chat(self, chat: ChatRecord) -> None: ...


@dataclass
class ChatState:
    """What is stored about a chat. What runs in it (the turn, its queue) is its lane's
    (bot/lanes.py)."""

    key: str
    chat: ChatRef
    session_id: str
    lang: str = "en"
    model: str | None = None
    owner: str = ""  # the user a DM belongs to / who last spoke: unattended turns act for them


def group_account(chat: ChatRef) -> str:
    """A group is its own account (its book, portfolio and alerts), whoever speaks in it; a DM's
    turn acts for its user's account, which the runtime finds ("")."""
    return f"group:{chat.key}" if chat.is_group else ""


def chat_key(chat: ChatRef, user: UserRef, group_sessions: str) -> str:
    if chat.is_group and group_sessions == "per_user":
        return f"{chat.key}:user{user.user_id}"
    return chat.key


class ChatDirectory:
    def __init__(self, store: ChatStore):
        self.store = store
        self._states: dict[str, ChatState] = {}
        self._lock = asyncio.Lock()

    async def get(
        self, chat: ChatRef, user: UserRef, group_sessions: str, default_lang: str, *, owner: str = ""
    ) -> ChatState:
        """The chat's state, loaded or created; a new chat's row is written once, with `owner`."""
        key = chat_key(chat, user, group_sessions)
        state = self._states.get(key)
        if state is not None:
            return state
        async with self._lock:
            state = self._states.get(key)
            if state is None:
                saved = await self.store.load_chat(key)
                state = ChatState(
                    key=key,
                    chat=chat,
                    session_id=(saved and saved.session_id) or self._new_session_id(key),
                    lang=(saved and saved.lang) or default_lang,
                    model=saved.model if saved else None,
                    owner=saved.owner if saved else owner,
                )
                if saved is None or not saved.chat_id:  # a row from before addresses were kept
                    await self.save(state)
                self._states[key] = state
        return state

    async def by_key(self, key: str) -> ChatState | None:
        """A chat by key, loaded from the database after a restart (scheduled briefs and task
        notices address chats that may not have spoken since)."""
        state = self._states.get(key)
        if state is not None:
            return state
        saved = await self.store.load_chat(key)
        if saved is None or not saved.chat_id:  # never seen, or its address was never recorded
            return None
        chat = ChatRef(saved.platform, saved.chat_id, saved.thread_id, saved.is_group)
        async with self._lock:
            state = self._states.get(key)
            if state is None:
                state = ChatState(
                    key=key,
                    chat=chat,
                    session_id=saved.session_id or self._new_session_id(key),
                    lang=saved.lang or "en",
                    model=saved.model,
                    owner=saved.owner,
                )
                self._states[key] = state
        return state

    async def reload(self, state: ChatState) -> None:
        """The chat as stored now (another replica may have started a new session or changed its
        model or language); the state object stays the one its lane holds."""
        saved = await self.store.load_chat(state.key)
        if saved is not None:
            state.session_id = saved.session_id or state.session_id
            state.lang = saved.lang or state.lang
            state.model = saved.model
            state.owner = saved.owner

    def loaded(self) -> list[ChatState]:
        return list(self._states.values())

    def find_by_session(self, session_id: str) -> ChatState | None:
        return next((s for s in self._states.values() if s.session_id == session_id), None)

    @staticmethod
    def _new_session_id(key: str) -> str:
        return f"{key}#{secrets.token_hex(4)}"

    async def new_session(self, state: ChatState) -> str:
        state.session_id = self._new_session_id(state.key)
        await self.save(state)
        return state.session_id

    async def save(self, state: ChatState) -> None:
        c = state.chat
        await self.store.save_chat(
            ChatRecord(
                key=state.key,
                platform=c.platform,
                chat_id=c.chat_id,
                thread_id=c.thread_id,
                is_group=c.is_group,
                session_id=state.session_id,
                lang=state.lang,
                model=state.model,
                owner=state.owner,
            )
        )
