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


# The tables only ever queried with Core statements are plain `Table`s: mapping them as ORM classes
# cost every process ~1.5 ms a table at import, for nothing (issue 21). Defined exactly as the
# declarative classes they were (tests/storage/test_storage_task_tables.py holds the DDL).
_META = Base.metadata


def _col(name: str, type_: Any, *args: Any, null: bool = False, **kw: Any) -> sa.Column[Any]:
    return sa.Column(name, type_, *args, nullable=null, **kw)


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


MESSAGES = sa.Table(
    "messages",
    _META,
    _col("id", BigIntPK, primary_key=True, autoincrement=True),
    # looked up through the unique (session_id, seq) index: no index of its own
    _col("session_id", sa.String(64), sa.ForeignKey("sessions.id", ondelete="CASCADE")),
    _col("seq", sa.Integer),
    _col("role", sa.String(16)),
    _col("payload", sa.JSON),
    _col("created_at", UTCDateTime, default=_now),
    sa.UniqueConstraint("session_id", "seq"),
)


TURNS = sa.Table(
    "turns",
    _META,
    _col("id", sa.String(64), primary_key=True),
    _col("session_id", sa.String(64), sa.ForeignKey("sessions.id", ondelete="CASCADE")),
    _col("status", sa.String(16), index=True),
    _col("payload", sa.JSON),
    _col("created_at", UTCDateTime, default=_now),
    _col("updated_at", UTCDateTime, default=_now),
    # a chat's open turn (every message) in one seek; also every lookup by session
    sa.Index("ix_turns_session_open", "session_id", "status", "updated_at"),
)


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


# "Always allow this tool in this chat".
APPROVAL_RULES = sa.Table(
    "approval_rules",
    _META,
    _col("id", BigIntPK, primary_key=True, autoincrement=True),
    _col("chat_key", sa.String(255)),
    _col("tool", sa.String(128)),
    _col("created_at", UTCDateTime, default=_now),
    sa.UniqueConstraint("chat_key", "tool"),
)


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


USAGE = sa.Table(
    "usage",
    _META,
    _col("id", BigIntPK, primary_key=True, autoincrement=True),
    _col("session_id", sa.String(64), index=True),
    _col("turn_id", sa.String(64)),
    _col("model", sa.String(128)),
    _col("input_tokens", sa.BigInteger, default=0),
    _col("output_tokens", sa.BigInteger, default=0),
    _col("cache_read_tokens", sa.BigInteger, default=0),
    _col("cache_write_tokens", sa.BigInteger, default=0),
    _col("cost", sa.Float, default=0.0),
    _col("created_at", UTCDateTime, default=_now, index=True),
)


# Inbound update ids already handled, so a redelivered update is dropped after a restart. `pending`
# holds a chat message received but not yet in its session's history (queued behind a running turn
# or an approval): recorded with the id in one INSERT, cleared by the transaction that writes the
# message into the history, taken up again after a restart.
PROCESSED_UPDATES = sa.Table(
    "processed_updates",
    _META,
    _col("id", BigIntPK, primary_key=True, autoincrement=True),
    _col("platform", sa.String(32)),
    _col("update_id", sa.String(128)),
    _col("created_at", UTCDateTime, default=_now, index=True),
    _col("pending", sa.JSON(none_as_null=True), null=True),
    sa.UniqueConstraint("platform", "update_id"),
)


# Small named state with no shape of its own (the Discord command digest, ...).
KV = sa.Table(
    "kv",
    _META,
    _col("key", sa.String(255), primary_key=True),
    _col("value", sa.JSON, null=True),
    _col("updated_at", UTCDateTime, default=_now),
)


# One conversation (a chat key: platform, chat, thread; a user too in `per_user` groups): the session
# it is in, its language and model, who it acts for, and where it is (briefs and task notices
# address chats that have not spoken since a restart).
CHATS = sa.Table(
    "chats",
    _META,
    _col("key", sa.String(255), primary_key=True),
    _col("platform", sa.String(32)),
    _col("chat_id", sa.String(128)),
    _col("thread_id", sa.String(128), null=True),
    _col("is_group", sa.Boolean, default=False),
    _col("session_id", sa.String(255)),
    _col("lang", sa.String(16), default="en"),
    _col("model", sa.String(128), null=True),
    _col("owner", sa.String(64), default=""),
    _col("updated_at", UTCDateTime, default=_now),
)


# A user admitted by a one-time pairing code: allowed and admin on its platform.
PAIRED_USERS = sa.Table(
    "paired_users",
    _META,
    _col("platform", sa.String(32), primary_key=True),
    _col("user_id", sa.String(64), primary_key=True),
    _col("paired_at", UTCDateTime, default=_now),
)


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
