"""Core tables: sessions, messages, turns, approvals, approval rules, usage, processed updates, kv;
chats, paired users and sent-message references.

Rich values (a `Message`, a `TurnRecord`) are stored whole as JSON in `payload`, with the columns
we query on (status, session, seq) alongside. The schema is created by the hand-written migration
`migrations/versions/0001_core.py`; keep the two in step (tests compare them). Every query of them
is a Core statement: they are plain `Table`s (see below), not ORM classes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

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


# Plain `Table`s, queried with Core statements: mapping them as ORM classes cost every process
# ~1.5 ms a table at import, for nothing. Defined exactly as the declarative classes
# they were (tests/storage/test_storage_plain_tables.py holds the DDL).
META = Base.metadata


def column(name: str, type_: Any, *args: Any, null: bool = False, **kw: Any) -> sa.Column[Any]:
    """A column as the declarative classes wrote it: NOT NULL unless `null`."""
    return sa.Column(name, type_, *args, nullable=null, **kw)


SESSIONS = sa.Table(
    "sessions",
    META,
    # a chat key and a suffix (bot/chats.py): up to ~90 characters for a user in a Discord thread
    column("id", sa.String(255), primary_key=True),
    column("chat_key", sa.String(255), default="", index=True),
    column("user_id", sa.String(64), default=""),
    column("title", sa.String(255), default=""),
    column("model", sa.Text, default=""),  # a model name: no bound of ours
    column("created_at", UTCDateTime, default=_now),
    column("updated_at", UTCDateTime, default=_now),
    column("archived", sa.Boolean, default=False),
)


MESSAGES = sa.Table(
    "messages",
    META,
    column("id", BigIntPK, primary_key=True, autoincrement=True),
    # looked up through the unique (session_id, seq) index: no index of its own
    column("session_id", sa.String(255), sa.ForeignKey("sessions.id", ondelete="CASCADE")),
    column("seq", sa.Integer),
    column("role", sa.String(16)),
    column("payload", sa.JSON),
    column("created_at", UTCDateTime, default=_now),
    sa.UniqueConstraint("session_id", "seq"),
)


TURNS = sa.Table(
    "turns",
    META,
    column("id", sa.String(64), primary_key=True),
    column("session_id", sa.String(255), sa.ForeignKey("sessions.id", ondelete="CASCADE")),
    column("status", sa.String(16), index=True),
    column("payload", sa.JSON),
    column("created_at", UTCDateTime, default=_now),
    column("updated_at", UTCDateTime, default=_now),
    # a chat turn's final answer, from the moment it is stored with the turn until the chat has
    # been sent it: a crash in between leaves it here, for the restart (or a surviving replica)
    # to send (bot/recovery.py)
    column("answer", sa.Text, null=True),
    # a chat's open turn (every message) in one seek; also every lookup by session
    sa.Index("ix_turns_session_open", "session_id", "status", "updated_at"),
    # the few answers not sent yet, without reading the many that were
    sa.Index(
        "ix_turns_unsent",
        "updated_at",
        sqlite_where=sa.text("answer IS NOT NULL"),
        postgresql_where=sa.text("answer IS NOT NULL"),
    ),
)


# One approval, bound to one action. No foreign key: the audit trail outlives the session.
APPROVALS = sa.Table(
    "approvals",
    META,
    column("id", sa.String(64), primary_key=True),
    column("session_id", sa.String(255), index=True),
    column("turn_id", sa.String(64)),
    column("call_id", sa.Text),  # the provider's id for the call: no bound of ours
    column("tool", sa.String(128)),
    column("arguments", sa.JSON),
    column("args_hash", sa.String(64)),
    column("requester", sa.String(64), default=""),
    column("approvers", sa.JSON),
    column("chat_key", sa.String(255), default=""),
    column("status", sa.String(16), index=True),
    column("decided_by", sa.String(64), default=""),
    column("decision", sa.String(16), default=""),
    column("created_at", UTCDateTime, default=_now),
    column("expires_at", UTCDateTime, null=True),
    column("decided_at", UTCDateTime, null=True),
    column("message_ref", sa.String(128), default=""),
)


# A scoped "Always allow" (agent/consent.py): a policy record, changed only by `/rules` and `tapebot
# rules`, never by a tool. Expired rows are ignored; revoked ones are deleted.
STANDING_APPROVALS = sa.Table(
    "standing_approvals",
    META,
    column("id", sa.String(32), primary_key=True),
    column("chat_key", sa.String(255), index=True),
    column("tool", sa.String(128)),
    column("scope", sa.JSON),
    column("granted_by", sa.String(64)),
    column("approval_id", sa.String(64), default=""),
    column("created_at", UTCDateTime, default=_now),
    column("expires_at", UTCDateTime),
)


USAGE = sa.Table(
    "usage",
    META,
    column("id", BigIntPK, primary_key=True, autoincrement=True),
    column("session_id", sa.String(255), index=True),
    column("turn_id", sa.String(64)),
    column("model", sa.Text),
    column("input_tokens", sa.BigInteger, default=0),
    column("output_tokens", sa.BigInteger, default=0),
    column("cache_read_tokens", sa.BigInteger, default=0),
    column("cache_write_tokens", sa.BigInteger, default=0),
    column("cost", sa.Float, default=0.0),
    column("created_at", UTCDateTime, default=_now, index=True),
)


# Inbound update ids already handled, so a redelivered update is dropped after a restart. `pending`
# holds a chat message received but not yet in its session's history (queued behind a running turn
# or an approval): recorded with the id in one INSERT, cleared by the transaction that writes the
# message into the history, taken up again after a restart.
PROCESSED_UPDATES = sa.Table(
    "processed_updates",
    META,
    column("id", BigIntPK, primary_key=True, autoincrement=True),
    column("platform", sa.String(32)),
    column("update_id", sa.String(128)),
    column("created_at", UTCDateTime, default=_now, index=True),
    column("pending", sa.JSON(none_as_null=True), null=True),
    sa.UniqueConstraint("platform", "update_id"),
)

# Replicas on one database: the chat each stored message belongs to, so whoever holds the chat's
# lease takes it up (memory/replica_inbox.py).
REPLICA_INBOX = sa.Table(
    "replica_inbox",
    META,
    column("id", BigIntPK, primary_key=True, autoincrement=True),
    column("chat_key", sa.String(255), index=True),
    column("platform", sa.String(32)),
    column("update_id", sa.String(128)),
    # held in a lane for a decision when its replica let the chat go: not stranded, taken up
    # again by whoever runs the chat next
    column("parked", sa.Boolean, default=False),
    sa.UniqueConstraint("platform", "update_id"),
)


# Small named state with no shape of its own (the Discord command digest, ...).
KV = sa.Table(
    "kv",
    META,
    column("key", sa.String(255), primary_key=True),
    column("value", sa.JSON, null=True),
    column("updated_at", UTCDateTime, default=_now),
)


# One conversation (a chat key: platform, chat, thread; a user too in `per_user` groups): the session
# it is in, its language and model, who it acts for, and where it is (briefs and task notices
# address chats that have not spoken since a restart).
CHATS = sa.Table(
    "chats",
    META,
    column("key", sa.String(255), primary_key=True),
    column("platform", sa.String(32)),
    column("chat_id", sa.String(128)),
    column("thread_id", sa.String(128), null=True),
    column("is_group", sa.Boolean, default=False),
    column("session_id", sa.String(255)),
    column("lang", sa.String(16), default="en"),
    column("model", sa.Text, null=True),
    column("owner", sa.String(64), default=""),
    column("updated_at", UTCDateTime, default=_now),
)


# A user admitted by a one-time pairing code: allowed and admin on its platform.
PAIRED_USERS = sa.Table(
    "paired_users",
    META,
    column("platform", sa.String(32), primary_key=True),
    column("user_id", sa.String(64), primary_key=True),
    column("paired_at", UTCDateTime, default=_now),
)


# Where a message the bot sent went, to edit it to its final state later: a question's buttons
# (`kind` "question", by turn id), the progress a stop left "paused" and the partial answer a stop
# cut off ("progress", "partial", by chat key). Approval cards use `approvals.message_ref` instead
# (their chat is the approval's chat).
SENT_MESSAGES = sa.Table(
    "sent_messages",
    META,
    column("kind", sa.String(16), primary_key=True),
    column("ref_id", sa.String(255), primary_key=True),
    column("platform", sa.String(32)),
    column("chat_id", sa.String(128)),
    column("thread_id", sa.String(128), null=True),
    column("is_group", sa.Boolean, default=False),
    column("message_id", sa.String(128)),
    column("lang", sa.String(16), default="en"),
    column("text", sa.Text, default=""),  # a question's text, shown again when it ends
    column("message_ids", sa.JSON),  # a partial answer's messages, in order
    # a paused progress message: {"lines": {call: line}, "names": {call: tool}, "cut": [call]}
    column("progress", sa.JSON(none_as_null=True), null=True),
    column("created_at", UTCDateTime, default=_now),
)


# One person's identities on several platforms sharing one account (bot/commands/link.py): the
# identity ("telegram:111") → the account whose book, portfolio, memory and alerts it uses.
IDENTITY_LINKS = sa.Table(
    "identity_links",
    META,
    column("identity", sa.String(160), primary_key=True),
    column("account", sa.String(160), index=True),
    column("name", sa.String(255), default=""),
    column("linked_at", UTCDateTime, default=_now),
)


# A one-time code an identity asked for to link another: only its hash is kept.
LINK_CODES = sa.Table(
    "link_codes",
    META,
    column("code_hash", sa.String(64), primary_key=True),
    column("identity", sa.String(160), index=True),
    column("name", sa.String(255), default=""),
    column("created_at", UTCDateTime, default=_now),
    column("expires_at", UTCDateTime),
)


# A wrong code tried by an identity: too many within the window and it must wait.
LINK_FAILURES = sa.Table(
    "link_failures",
    META,
    column("id", BigIntPK, primary_key=True, autoincrement=True),
    column("identity", sa.String(160), index=True),
    column("at", UTCDateTime, default=_now),
)


CORE_TABLES = (
    "sessions",
    "messages",
    "turns",
    "approvals",
    "usage",
    "processed_updates",
    "kv",
)

# Added by 0012_chat_tables (state that lived in `kv` under "chat:", "paired:", "card:", ... keys).
CHAT_TABLES = ("chats", "paired_users", "sent_messages")

# Added by 0016_identity_links.
LINK_TABLES = ("identity_links", "link_codes", "link_failures")
