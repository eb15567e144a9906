"""Where the bot's own lasting messages went — an approval card, a question, a progress message a
stop paused, the messages of an answer a stop cut off — so they can be edited to their final state
later, also after a restart. Every read and write of these references is here: cards in
`approvals.message_ref` (the card is in the approval's chat), the others in the `sent_messages`
table (memory.chat_tables), keyed by kind and turn id or chat key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from adapters.base import ChatAdapter, ChatRef, SentMessage
from agent import ApprovalRecord
from bot.chats import ChatDirectory, ChatState
from memory.chat_tables import PausedProgress, SentKind, SentRef


class SentStore(Protocol):
    """The `sent_messages` table and `approvals.message_ref` (memory.chat_tables)."""

    async def save_sent(self, ref: SentRef) -> None: ...

    async def load_sent(self, kind: SentKind, ref_id: str) -> SentRef | None: ...

    async def forget_sent(self, kind: SentKind, ref_id: str) -> bool: ...

    async def set_card_message(self, approval_id: str, message_id: str) -> bool: ...

    async def answer_sent(self, turn_id: str) -> None:
        """The answer kept with the turn has reached its chat (memory.turn_store)."""
        ...


async def remember_sent(
    store: SentStore,
    kind: SentKind,
    ref_id: str,
    state: ChatState,
    sent: SentMessage,
    *,
    text: str = "",
    message_ids: Sequence[str] = (),
    progress: PausedProgress | None = None,
) -> None:
    c = state.chat
    await store.save_sent(
        SentRef(kind, ref_id, c.platform, c.chat_id, c.thread_id, c.is_group, sent.message_id, state.lang,
                text=text, message_ids=tuple(message_ids), progress=progress)
    )  # fmt: skip


async def sent_ref(
    store: SentStore, adapters: dict[str, ChatAdapter], kind: SentKind, ref_id: str
) -> tuple[SentMessage, ChatAdapter, SentRef] | None:
    """The message, the adapter that can edit it and what was remembered with it; None when there
    is none or its platform is not running (then it is kept for a later run)."""
    ref = await store.load_sent(kind, ref_id)
    adapter = adapters.get(ref.platform) if ref else None
    if ref is None or adapter is None:
        return None
    chat = ChatRef(ref.platform, ref.chat_id, ref.thread_id, ref.is_group)
    return SentMessage(chat, ref.message_id), adapter, ref


async def forget_sent(store: SentStore, kind: SentKind, ref_id: str) -> None:
    await store.forget_sent(kind, ref_id)


async def remember_card(store: SentStore, approval_id: str, sent: SentMessage) -> None:
    await store.set_card_message(approval_id, sent.message_id)


async def card_ref(
    chats: ChatDirectory, adapters: dict[str, ChatAdapter], record: ApprovalRecord
) -> tuple[SentMessage, ChatAdapter, str] | None:
    """Where the approval's card went (its `message_ref`, in the approval's chat), the adapter that
    can edit it and the chat's language; None when it was never sent or its platform is not running."""
    state = await chats.by_key(record.chat_key) if record.message_ref and record.chat_key else None
    adapter = adapters.get(state.chat.platform) if state else None
    if state is None or adapter is None:
        return None
    return SentMessage(state.chat, record.message_ref), adapter, state.lang
