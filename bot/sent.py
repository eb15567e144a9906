"""Where the bot's own lasting messages went — an approval card, a question, a progress message a
stop paused, the messages of an answer a stop cut off — so they can be edited to their final state
later, also after a restart. Every read and write of these references is here."""

from __future__ import annotations

from typing import Any

from adapters.base import ChatAdapter, ChatRef, SentMessage
from bot.chats import ChatState, KeyValue


def card_key(approval_id: str) -> str:
    return f"card:{approval_id}"


def question_key(turn_id: str) -> str:
    return f"question:{turn_id}"


def progress_key(chat_key: str) -> str:
    return f"progress:{chat_key}"


def partial_key(chat_key: str) -> str:
    return f"partial:{chat_key}"


async def remember_sent(store: KeyValue, key: str, state: ChatState, sent: SentMessage, **extra: Any) -> None:
    c = state.chat
    ref = {"platform": c.platform, "chat_id": c.chat_id, "thread_id": c.thread_id,
           "is_group": c.is_group, "message_id": sent.message_id, "lang": state.lang}  # fmt: skip
    await store.kv_set(key, {**ref, **extra})


async def sent_ref(
    store: KeyValue, adapters: dict[str, ChatAdapter], key: str
) -> tuple[SentMessage, ChatAdapter, dict[str, Any]] | None:
    """The message, the adapter that can edit it (None when its platform is not running) and
    what was remembered with it."""
    ref = await store.kv_get(key)
    adapter = adapters.get(ref["platform"]) if ref else None
    if not ref or adapter is None:
        return None
    chat = ChatRef(ref["platform"], ref["chat_id"], ref.get("thread_id"), ref.get("is_group", False))
    return SentMessage(chat, ref["message_id"]), adapter, ref


async def forget_sent(store: KeyValue, key: str) -> None:
    await store.kv_set(key, None)
