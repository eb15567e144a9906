"""Messages received but not yet in their session's history, kept across a restart.

A chat message that may have to wait — behind a running turn, behind an approval only an admin can
give — is recorded with its update id in one INSERT (`SqlStore.receive_message`), so the platform
may be told it was received at once. The transaction that writes it into the history clears the
record (`commit(received=...)`); a reply that answers a card or a question releases it. What is
left after a crash or a stop is taken up by `Recovery.take_up_received` (bot/recovery.py) on the
next start, oldest first, as if it had just arrived.

A background task's completion notice that has to wait for the chat's running turn is kept the
same way, under ("task", task id): the task ledger has marked it delivered already.

This module is the records' format: the `InboundMessage` (or the notice) as JSON and back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.base import ChatRef, InboundMessage, UserRef

RECORD_VERSION = 1
NOTICES = "task"  # the receipts' "platform" for task notices
BRIEFS = "brief"  # ... and for an acknowledged `/brief now` (bot/briefs.py KeptBriefs)


def brief_record(chat_key: str) -> dict[str, Any]:
    return {"v": RECORD_VERSION, "brief": chat_key}


def brief_from_record(record: dict[str, Any]) -> str:
    """The chat key of a kept `/brief now`; "" if the record is not one this version wrote."""
    key = record.get("brief") if record.get("v") == RECORD_VERSION else None
    return key if isinstance(key, str) else ""


def notice_record(chat_key: str, text: str) -> dict[str, Any]:
    return {"v": RECORD_VERSION, "notice": text, "chat_key": chat_key}


def notice_from_record(record: dict[str, Any]) -> tuple[str, str]:
    """(chat key, notice text); ValueError if the record is not one this version wrote."""
    if record.get("v") != RECORD_VERSION or not isinstance(record.get("notice"), str):
        raise ValueError("malformed received-notice record")
    return str(record.get("chat_key", "")), record["notice"]


def pending_record(msg: InboundMessage) -> dict[str, Any]:
    c, u = msg.chat, msg.user
    return {
        "v": RECORD_VERSION,
        "chat": [c.platform, c.chat_id, c.thread_id, c.is_group, c.title],
        "user": [u.platform, u.user_id, u.display_name, u.language_code, u.username, u.is_bot],
        "text": msg.text,
        "reply_to": msg.reply_to_message_id,
        "sent_at": msg.sent_at.isoformat(),
        "message_id": msg.message_id,
        "addressed": msg.addressed,
        "reply_to_bot": msg.reply_to_bot,
    }


def inbound_from_record(update_id: str, record: dict[str, Any]) -> InboundMessage:
    """The message as it arrived; ValueError if the record is not one this version wrote."""
    try:
        if record.get("v") != RECORD_VERSION:
            raise ValueError(f"unknown record version {record.get('v')!r}")
        platform, chat_id, thread_id, is_group, title = record["chat"]
        u_platform, user_id, name, language, username, is_bot = record["user"]
        return InboundMessage(
            update_id=update_id,
            chat=ChatRef(str(platform), str(chat_id), thread_id, bool(is_group), str(title)),
            user=UserRef(str(u_platform), str(user_id), str(name), language, username, bool(is_bot)),
            text=str(record["text"]),
            reply_to_message_id=record["reply_to"],
            sent_at=datetime.fromisoformat(record["sent_at"]),
            message_id=record["message_id"],
            addressed=bool(record["addressed"]),
            reply_to_bot=bool(record["reply_to_bot"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed received-message record: {exc}") from exc
