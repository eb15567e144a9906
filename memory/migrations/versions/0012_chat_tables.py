"""chat tables: chats, paired users and sent-message references get tables of their own

They lived in the untyped `kv` table under string prefixes: `chat:<key>` (session, language,
model, owner, where the chat is), `paired:<platform>` (a list of user ids), `card:<approval id>`,
`question:<turn id>`, `progress:<chat key>` and `partial:<chat key>` (where a message went, to edit
it later). Those rows are moved into `chats`, `paired_users`, `approvals.message_ref` (the card's
message id: its chat is the approval's chat) and `sent_messages`, then deleted from `kv`. A row
whose value is not in the shape the bot wrote is left in `kv` untouched (nothing is lost).
`downgrade` moves them back.

Revision ID: 0012_chat_tables
Revises: 0011_recall_indexes
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from memory.models import UTCDateTime

revision = "0012_chat_tables"
down_revision = "0011_recall_indexes"
branch_labels = None
depends_on = None

# The tables as this revision knows them (not the models, which may change later).
KV = sa.table(
    "kv", sa.column("key", sa.String), sa.column("value", sa.JSON), sa.column("updated_at", UTCDateTime())
)
APPROVALS = sa.table("approvals", sa.column("id", sa.String), sa.column("message_ref", sa.String))
SENT_KINDS = ("question", "progress", "partial")


def _chats() -> list[Any]:
    return [
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("is_group", sa.Boolean(), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("lang", sa.String(16), nullable=False),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_chats"),
    ]


def _paired() -> list[Any]:
    return [
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("paired_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("platform", "user_id", name="pk_paired_users"),
    ]


def _sent() -> list[Any]:
    return [
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("ref_id", sa.String(255), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(128), nullable=False),
        sa.Column("thread_id", sa.String(128), nullable=True),
        sa.Column("is_group", sa.Boolean(), nullable=False),
        sa.Column("message_id", sa.String(128), nullable=False),
        sa.Column("lang", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("message_ids", sa.JSON(), nullable=False),
        sa.Column("progress", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "ref_id", name="pk_sent_messages"),
    ]


def _opt(value: Any) -> str | None:
    return None if value is None else str(value)


def _kv_rows(conn: sa.Connection, prefix: str) -> list[tuple[str, Any, datetime]]:
    # `LIKE` treats "_" and "%" as wildcards; the prefixes have neither, and the check below is exact
    rows = conn.execute(sa.select(KV.c.key, KV.c.value, KV.c.updated_at).where(KV.c.key.like(f"{prefix}%")))
    return [(r[0][len(prefix) :], r[1], r[2] or datetime.now(UTC)) for r in rows if r[0].startswith(prefix)]


def _chat_row(key: str, v: Any, at: datetime) -> dict[str, Any] | None:
    if not isinstance(v, dict) or not v.get("session_id"):
        return None
    c: dict[str, Any] = v["chat"] if isinstance(v.get("chat"), dict) else {}
    return {
        "key": key,
        # a row written before the chat was kept has no address: "" (briefs cannot reach it)
        "platform": str(c.get("platform") or ""),
        "chat_id": str(c.get("chat_id") or ""),
        "thread_id": _opt(c.get("thread_id")),
        "is_group": bool(c.get("is_group", False)),
        "session_id": str(v["session_id"]),
        "lang": str(v.get("lang") or "en"),
        "model": _opt(v.get("model")),
        "owner": str(v.get("owner") or ""),
        "updated_at": at,
    }


def _sent_row(kind: str, ref_id: str, v: Any, at: datetime) -> dict[str, Any] | None:
    if not isinstance(v, dict) or not v.get("platform") or v.get("message_id") is None:
        return None
    ids = v.get("ids") if kind == "partial" else None
    return {
        "kind": kind,
        "ref_id": ref_id,
        "platform": str(v["platform"]),
        "chat_id": str(v.get("chat_id") or ""),
        "thread_id": _opt(v.get("thread_id")),
        "is_group": bool(v.get("is_group", False)),
        "message_id": str(v["message_id"]),
        "lang": str(v.get("lang") or "en"),
        "text": str(v.get("text") or ""),
        "message_ids": [str(i) for i in ids] if isinstance(ids, list) else [],
        "progress": (
            {"lines": v.get("lines") or {}, "names": v.get("names") or {}, "cut": v.get("cut") or []}
            if kind == "progress"
            else None
        ),
        "created_at": at,
    }


def _tables() -> tuple[sa.Table, sa.Table, sa.Table]:
    meta = sa.MetaData()
    return (
        sa.Table("chats", meta, *_chats()),
        sa.Table("paired_users", meta, *_paired()),
        sa.Table("sent_messages", meta, *_sent()),
    )


def upgrade() -> None:
    op.create_table("chats", *_chats())
    op.create_table("paired_users", *_paired())
    op.create_table("sent_messages", *_sent())
    if context.is_offline_mode():  # `tapebot db sql` renders the DDL; there are no rows to move
        return
    conn = op.get_bind()
    chats, paired, sent = _tables()
    moved: list[str] = []

    rows = []
    for key, value, at in _kv_rows(conn, "chat:"):
        if (row := _chat_row(key, value, at)) is not None:
            rows.append(row)
            moved.append(f"chat:{key}")
    if rows:
        conn.execute(chats.insert(), rows)

    rows = []
    for platform, value, at in _kv_rows(conn, "paired:"):
        if isinstance(value, list) and all(isinstance(u, str | int) for u in value):
            rows += [
                {"platform": platform, "user_id": str(u), "paired_at": at} for u in sorted({*map(str, value)})
            ]
            moved.append(f"paired:{platform}")
    if rows:
        conn.execute(paired.insert(), rows)

    for approval_id, value, _at in _kv_rows(conn, "card:"):
        if isinstance(value, dict) and value.get("message_id") is not None:
            conn.execute(
                APPROVALS.update()
                .where(APPROVALS.c.id == approval_id)
                .values(message_ref=str(value["message_id"]))
            )
            moved.append(f"card:{approval_id}")  # a card of an approval no longer stored is dropped

    rows = []
    for kind in SENT_KINDS:
        for ref_id, value, at in _kv_rows(conn, f"{kind}:"):
            if value is None:  # a reference already used up (set to None, never deleted)
                moved.append(f"{kind}:{ref_id}")
            elif (row := _sent_row(kind, ref_id, value, at)) is not None:
                rows.append(row)
                moved.append(f"{kind}:{ref_id}")
    if rows:
        conn.execute(sent.insert(), rows)

    for i in range(0, len(moved), 500):
        conn.execute(KV.delete().where(KV.c.key.in_(moved[i : i + 500])))


def _ref(row: Any) -> dict[str, Any]:
    return {
        "platform": row.platform,
        "chat_id": row.chat_id,
        "thread_id": row.thread_id,
        "is_group": bool(row.is_group),
        "message_id": row.message_id,
        "lang": row.lang,
    }


def downgrade() -> None:
    if context.is_offline_mode():
        for name in ("sent_messages", "paired_users", "chats"):
            op.drop_table(name)
        return
    conn = op.get_bind()
    chats, paired, sent = _tables()
    back: list[dict[str, Any]] = []
    for r in conn.execute(sa.select(chats)):
        chat = {
            "platform": r.platform,
            "chat_id": r.chat_id,
            "thread_id": r.thread_id,
            "is_group": bool(r.is_group),
        }
        value = {"session_id": r.session_id, "lang": r.lang, "model": r.model, "owner": r.owner}
        back.append(
            {
                "key": f"chat:{r.key}",
                "value": {**value, "chat": chat} if r.chat_id else value,
                "updated_at": r.updated_at,
            }
        )
    by_platform: dict[str, list[str]] = {}
    for r in conn.execute(sa.select(paired).order_by(paired.c.platform, paired.c.user_id)):
        by_platform.setdefault(r.platform, []).append(r.user_id)
    back += [
        {"key": f"paired:{p}", "value": uids, "updated_at": datetime.now(UTC)}
        for p, uids in by_platform.items()
    ]
    for r in conn.execute(sa.select(sent)):
        value = _ref(r)
        if r.kind == "question":
            value["text"] = r.text
        elif r.kind == "partial":
            value["ids"] = list(r.message_ids or [])
        elif r.kind == "progress":
            value.update(r.progress or {})
        back.append({"key": f"{r.kind}:{r.ref_id}", "value": value, "updated_at": r.created_at})
    # a card's chat is its approval's chat, as it was when the card was sent
    approvals = sa.table("approvals", sa.column("id"), sa.column("message_ref"), sa.column("chat_key"))
    joined = (
        sa.select(approvals.c.id, approvals.c.message_ref, chats)
        .join(chats, chats.c.key == approvals.c.chat_key)
        .where(approvals.c.message_ref != "")
    )
    for r in conn.execute(joined):
        value = {
            "platform": r.platform,
            "chat_id": r.chat_id,
            "thread_id": r.thread_id,
            "is_group": bool(r.is_group),
            "message_id": r.message_ref,
            "lang": r.lang,
        }
        back.append({"key": f"card:{r.id}", "value": value, "updated_at": datetime.now(UTC)})
    conn.execute(APPROVALS.update().values(message_ref=""))
    if back:
        conn.execute(KV.delete().where(KV.c.key.in_([b["key"] for b in back])))
        conn.execute(KV.insert(), back)
    for name in ("sent_messages", "paired_users", "chats"):
        op.drop_table(name)
