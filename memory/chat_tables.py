"""The bot's own records, typed: chats (`chats`), users admitted by pairing (`paired_users`) and
where the messages it will edit later went (`sent_messages`; an approval card's message id is
`approvals.message_ref`). `SqlStore` inherits these methods; `bot/` reads them through its
protocols. They replace `kv` rows under "chat:", "paired:", "card:", "question:", "progress:" and
"partial:" keys (migration 0012_chat_tables moved the old rows).

A chat's row is read once per process and written when the chat is first seen and when its
owner, language, model or session changes — every new chat's first message does both, so those two
are Core statements built once, run as one short transaction each (`Database.run`): building an
upsert with `.excluded` per call cost more than the rest of the message's writes together.
References are written when a card or question is sent: plain ORM/Core statements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent.ports import utcnow
from memory.db import Database, rowcount
from memory.models import APPROVALS, CHATS, PAIRED_USERS, SENT_MESSAGES

SentKind = Literal["question", "progress", "partial", "card"]


@dataclass(frozen=True, slots=True)
class ChatRecord:
    """One conversation: its key, where it is, and its settings. `chat_id` "" means its address was
    never recorded (a row from before addresses were kept): nothing can be sent to it unprompted."""

    key: str
    platform: str
    chat_id: str
    thread_id: str | None
    is_group: bool
    session_id: str
    lang: str = "en"
    model: str | None = None
    owner: str = ""  # the user a DM belongs to / who last spoke: unattended turns act for them
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PausedProgress:
    """A progress message a stop left saying "paused": its lines by call id, the tools' names, and
    the calls the stop cut off (settled after the restart)."""

    lines: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    cut: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lines": dict(self.lines), "names": dict(self.names), "cut": list(self.cut)}

    @classmethod
    def from_json(cls, value: Any) -> PausedProgress:
        """Whatever was stored: a part in another shape reads as empty (the message then stays
        as the stop left it, or loses only what was unreadable)."""
        v = value if isinstance(value, dict) else {}

        def mapping(x: Any) -> dict[str, str]:
            return {str(k): str(y) for k, y in x.items()} if isinstance(x, dict) else {}

        cut = v.get("cut")
        return cls(
            lines=mapping(v.get("lines")),
            names=mapping(v.get("names")),
            cut=[str(c) for c in cut] if isinstance(cut, list) else [],
        )


@dataclass(frozen=True, slots=True)
class SentRef:
    """Where a message went: a question (`ref_id` its turn id), a paused progress message or a
    partial answer (`ref_id` the chat key), an approval card (`ref_id` the approval id; `text` its
    readable summary, kept once it is decided)."""

    kind: SentKind
    ref_id: str
    platform: str
    chat_id: str
    thread_id: str | None
    is_group: bool
    message_id: str
    lang: str = "en"
    text: str = ""  # a question's text, shown again with how it ended
    message_ids: tuple[str, ...] = ()  # a partial answer's messages, in order
    progress: PausedProgress | None = None


CHAT_COLUMNS = tuple(c.name for c in CHATS.c)  # key first


class _ChatStatements:
    """The chat row's two statements for one dialect, built once (values bound at execution)."""

    def __init__(self, insert: Any):
        stmt = insert(CHATS)
        self.upsert = stmt.on_conflict_do_update(
            index_elements=["key"], set_={c: stmt.excluded[c] for c in CHAT_COLUMNS if c != "key"}
        )
        self.select = sa.select(*CHATS.c).where(CHATS.c.key == sa.bindparam("key"))


class ChatTables:
    """Typed storage for chats, paired users and sent-message references."""

    db: Database

    @cached_property
    def _chat_sql(self) -> _ChatStatements:
        return _ChatStatements(self.db.dialect_insert)

    # ---- chats -------------------------------------------------------------------------------
    async def load_chat(self, key: str) -> ChatRecord | None:
        sql = self._chat_sql

        def core(c: Connection) -> ChatRecord | None:
            row = c.execute(sql.select, {"key": key}).first()
            return None if row is None else ChatRecord(**row._asdict())

        return await self.db.run(core)

    async def save_chat(self, chat: ChatRecord) -> None:
        """Insert or replace the chat's row."""
        values: dict[str, Any] = {
            "key": chat.key,
            "platform": chat.platform,
            "chat_id": chat.chat_id,
            "thread_id": chat.thread_id,
            "is_group": chat.is_group,
            "session_id": chat.session_id,
            "lang": chat.lang,
            "model": chat.model,
            "owner": chat.owner,
            "updated_at": utcnow(),
        }
        sql = self._chat_sql
        await self.db.run(lambda c: c.execute(sql.upsert, values), write=True)

    # ---- paired users ------------------------------------------------------------------------
    async def paired_users(self, platform: str) -> list[str]:
        def work(c: Connection) -> Any:
            ids = c.execute(
                sa.select(PAIRED_USERS.c.user_id)
                .where(PAIRED_USERS.c.platform == platform)
                .order_by(PAIRED_USERS.c.user_id)
            )
            return list(ids.scalars())

        return await self.db.run(work)

    async def add_paired_user(self, platform: str, user_id: str) -> None:
        stmt = (
            self.db.dialect_insert(PAIRED_USERS)
            .values(platform=platform, user_id=user_id, paired_at=utcnow())
            .on_conflict_do_nothing(index_elements=["platform", "user_id"])
        )

        def work(c: Connection) -> Any:
            c.execute(stmt)

        await self.db.run(work, write=True)

    # ---- where sent messages went --------------------------------------------------------------
    async def save_sent(self, ref: SentRef) -> None:
        """Insert or replace the reference of (`ref.kind`, `ref.ref_id`)."""
        values = {
            "kind": ref.kind,
            "ref_id": ref.ref_id,
            "platform": ref.platform,
            "chat_id": ref.chat_id,
            "thread_id": ref.thread_id,
            "is_group": ref.is_group,
            "message_id": ref.message_id,
            "lang": ref.lang,
            "text": ref.text,
            "message_ids": list(ref.message_ids),
            "progress": None if ref.progress is None else ref.progress.to_json(),
            "created_at": utcnow(),
        }
        stmt = self.db.dialect_insert(SENT_MESSAGES).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["kind", "ref_id"],
            set_={k: stmt.excluded[k] for k in values if k not in ("kind", "ref_id")},
        )

        def work(c: Connection) -> Any:
            c.execute(stmt)

        await self.db.run(work, write=True)

    async def load_sent(self, kind: SentKind, ref_id: str) -> SentRef | None:
        def work(c: Connection) -> Any:
            row = (
                c.execute(
                    sa.select(SENT_MESSAGES).where(
                        SENT_MESSAGES.c.kind == kind, SENT_MESSAGES.c.ref_id == ref_id
                    )
                )
            ).first()
            return None if row is None else _sent(row)

        return await self.db.run(work)

    async def forget_sent(self, kind: SentKind, ref_id: str) -> bool:
        def work(c: Connection) -> Any:
            result = c.execute(
                sa.delete(SENT_MESSAGES).where(SENT_MESSAGES.c.kind == kind, SENT_MESSAGES.c.ref_id == ref_id)
            )
            return rowcount(result) > 0

        return await self.db.run(work, write=True)

    async def set_card_message(self, approval_id: str, message_id: str) -> bool:
        """Where an approval's card went (its chat is the approval's chat): `approvals.message_ref`."""

        def work(c: Connection) -> Any:
            result = c.execute(
                sa.update(APPROVALS).where(APPROVALS.c.id == approval_id).values(message_ref=message_id)
            )
            return rowcount(result) == 1

        return await self.db.run(work, write=True)


def _sent(row: Any) -> SentRef:
    return SentRef(
        kind=row.kind,
        ref_id=row.ref_id,
        platform=row.platform,
        chat_id=row.chat_id,
        thread_id=row.thread_id,
        is_group=bool(row.is_group),
        message_id=row.message_id,
        lang=row.lang,
        text=row.text,
        message_ids=tuple(row.message_ids or ()),
        progress=None if row.progress is None else PausedProgress.from_json(row.progress),
    )
