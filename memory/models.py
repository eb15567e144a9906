"""Core tables: sessions, messages, turns, approvals, approval rules, usage, processed updates, kv;
chats, paired users and sent-message references.

Rich values (a `Message`, a `TurnRecord`) are stored whole as JSON in `payload`, with the columns
we query on (status, session, seq) alongside. The schema is created by the hand-written migration
`migrations/versions/0001_core.py`; keep the two in step (tests compare them).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from memory.base import Base


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend. SQLite has no time zones, so values are stored
    as naive UTC and given `tzinfo=UTC` back; naive inputs are taken to be UTC already."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# SQLite only auto-increments an INTEGER PRIMARY KEY; elsewhere use 64 bits.
BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _now() -> datetime:
    return datetime.now(UTC)


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    chat_key: Mapped[str] = mapped_column(sa.String(255), default="", index=True)
    user_id: Mapped[str] = mapped_column(sa.String(64), default="")
    title: Mapped[str] = mapped_column(sa.String(255), default="")
    model: Mapped[str] = mapped_column(sa.String(64), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)
    archived: Mapped[bool] = mapped_column(sa.Boolean, default=False)


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (sa.UniqueConstraint("session_id", "seq"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    # looked up through the unique (session_id, seq) index: no index of its own
    session_id: Mapped[str] = mapped_column(sa.String(64), sa.ForeignKey("sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(sa.Integer)
    role: Mapped[str] = mapped_column(sa.String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


class TurnRow(Base):
    __tablename__ = "turns"
    # a chat's open turn (every message) in one seek; also every lookup by session
    __table_args__ = (sa.Index("ix_turns_session_open", "session_id", "status", "updated_at"),)

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(sa.String(64), sa.ForeignKey("sessions.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(sa.String(16), index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


class ApprovalRow(Base):
    """One approval, bound to one action. No foreign key: the audit trail outlives the session."""

    __tablename__ = "approvals"

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(sa.String(64), index=True)
    turn_id: Mapped[str] = mapped_column(sa.String(64))
    call_id: Mapped[str] = mapped_column(sa.String(128))
    tool: Mapped[str] = mapped_column(sa.String(128))
    arguments: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    args_hash: Mapped[str] = mapped_column(sa.String(64))
    requester: Mapped[str] = mapped_column(sa.String(64), default="")
    approvers: Mapped[list[str]] = mapped_column(sa.JSON)
    chat_key: Mapped[str] = mapped_column(sa.String(255), default="")
    status: Mapped[str] = mapped_column(sa.String(16), index=True)
    decided_by: Mapped[str] = mapped_column(sa.String(64), default="")
    decision: Mapped[str] = mapped_column(sa.String(16), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    message_ref: Mapped[str] = mapped_column(sa.String(128), default="")


class ApprovalRuleRow(Base):
    """ "Always allow this tool in this chat"."""

    __tablename__ = "approval_rules"
    __table_args__ = (sa.UniqueConstraint("chat_key", "tool"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    chat_key: Mapped[str] = mapped_column(sa.String(255))
    tool: Mapped[str] = mapped_column(sa.String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


class StandingApprovalRow(Base):
    """A scoped "Always allow" (agent/consent.py): a policy record, changed only by `/rules` and
    `tapebot rules`, never by a tool. Expired rows are ignored; revoked ones are deleted."""

    __tablename__ = "standing_approvals"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    chat_key: Mapped[str] = mapped_column(sa.String(255), index=True)
    tool: Mapped[str] = mapped_column(sa.String(128))
    scope: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    granted_by: Mapped[str] = mapped_column(sa.String(64))
    approval_id: Mapped[str] = mapped_column(sa.String(64), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class UsageRow(Base):
    __tablename__ = "usage"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(sa.String(64), index=True)
    turn_id: Mapped[str] = mapped_column(sa.String(64))
    model: Mapped[str] = mapped_column(sa.String(128))
    input_tokens: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    cost: Mapped[float] = mapped_column(sa.Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now, index=True)


class ProcessedUpdateRow(Base):
    """Inbound update ids already handled, so a redelivered update is dropped after a restart.
    `pending` holds a chat message received but not yet in its session's history (queued behind a
    running turn or an approval): recorded with the id in one INSERT, cleared by the transaction
    that writes the message into the history, taken up again after a restart."""

    __tablename__ = "processed_updates"
    __table_args__ = (sa.UniqueConstraint("platform", "update_id"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(sa.String(32))
    update_id: Mapped[str] = mapped_column(sa.String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now, index=True)
    pending: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(none_as_null=True), nullable=True)


class KvRow(Base):
    """Small named state with no shape of its own (the Discord command digest, ...)."""

    __tablename__ = "kv"

    key: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    value: Mapped[Any] = mapped_column(sa.JSON, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


class ChatRow(Base):
    """One conversation (a chat key: platform, chat, thread; a user too in `per_user` groups): the
    session it is in, its language and model, who it acts for, and where it is (briefs and task
    notices address chats that have not spoken since a restart)."""

    __tablename__ = "chats"

    key: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    platform: Mapped[str] = mapped_column(sa.String(32))
    chat_id: Mapped[str] = mapped_column(sa.String(128))
    thread_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    is_group: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    session_id: Mapped[str] = mapped_column(sa.String(255))
    lang: Mapped[str] = mapped_column(sa.String(16), default="en")
    model: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    owner: Mapped[str] = mapped_column(sa.String(64), default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


class PairedUserRow(Base):
    """A user admitted by a one-time pairing code: allowed and admin on its platform."""

    __tablename__ = "paired_users"

    platform: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    user_id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    paired_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


class SentMessageRow(Base):
    """Where a message the bot sent went, to edit it to its final state later: a question's
    buttons (`kind` "question", by turn id), the progress a stop left "paused" and the partial
    answer a stop cut off ("progress", "partial", by chat key). Approval cards use
    `approvals.message_ref` instead (their chat is the approval's chat)."""

    __tablename__ = "sent_messages"

    kind: Mapped[str] = mapped_column(sa.String(16), primary_key=True)
    ref_id: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    platform: Mapped[str] = mapped_column(sa.String(32))
    chat_id: Mapped[str] = mapped_column(sa.String(128))
    thread_id: Mapped[str | None] = mapped_column(sa.String(128), nullable=True)
    is_group: Mapped[bool] = mapped_column(sa.Boolean, default=False)
    message_id: Mapped[str] = mapped_column(sa.String(128))
    lang: Mapped[str] = mapped_column(sa.String(16), default="en")
    text: Mapped[str] = mapped_column(sa.Text, default="")  # a question's text, shown again when it ends
    message_ids: Mapped[list[str]] = mapped_column(sa.JSON)  # a partial answer's messages, in order
    # a paused progress message: {"lines": {call: line}, "names": {call: tool}, "cut": [call]}
    progress: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(none_as_null=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=_now)


CORE_TABLES = (
    "sessions",
    "messages",
    "turns",
    "approvals",
    "approval_rules",
    "usage",
    "processed_updates",
    "kv",
)

# Added by 0012_chat_tables (state that lived in `kv` under "chat:", "paired:", "card:", ... keys).
CHAT_TABLES = ("chats", "paired_users", "sent_messages")
