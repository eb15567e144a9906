"""`SqlSessionStore`: `agent.ports.SessionStore` — sessions and their message histories. A commit
writes a turn's step at once: its messages, the turn record, a usage row, and the records of the
received messages now in the history. Decoded histories are cached per session and checked
against `sessions.updated_at` on each load."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent.messages import Message
from agent.ports import Receipt, TurnRecord, UsageRecord, utcnow
from memory.db import Database, rowcount
from memory.models import MESSAGES, SESSIONS
from memory.store_sql import SqlBase, receipt_params, turn_values, usage_values


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    chat_key: str
    user_id: str
    title: str
    model: str
    created_at: datetime
    updated_at: datetime
    archived: bool
    message_count: int = 0


@dataclass(slots=True)
class _History:
    version: Any  # sessions.updated_at as the database returns it
    messages: list[Message]


class _HistoryCache:
    """Decoded histories of the most recently used sessions, bounded by their total number of
    messages and by their number;
    the least recently used go first, and a history larger than the bound is not kept."""

    def __init__(self, max_messages: int = 5_000, max_sessions: int = 5_000):
        self.max_messages = max_messages
        self.max_sessions = max_sessions
        self._entries: OrderedDict[str, _History] = OrderedDict()
        self._size = 0

    def get(self, session_id: str) -> _History | None:
        entry = self._entries.get(session_id)
        if entry is not None:
            self._entries.move_to_end(session_id)
        return entry

    def put(self, session_id: str, version: Any, messages: list[Message]) -> None:
        self.drop(session_id)
        if version is None or len(messages) > self.max_messages:
            return
        self._entries[session_id] = _History(version, messages)
        self._size += len(messages)
        self._shrink()

    def advance(self, session_id: str, before: Any, after: Any, messages: Sequence[Message]) -> None:
        """Our own append moved the session from version `before` to `after`: extend its history
        if that is what it held, else forget it (the next load reads it afresh)."""
        entry = self._entries.get(session_id)
        if entry is None:
            return
        if before is None or entry.version != before:
            self.drop(session_id)
            return
        entry.messages.extend(messages)
        entry.version = after
        self._size += len(messages)
        self._shrink()

    def drop(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._size -= len(entry.messages)

    def _shrink(self) -> None:
        while (self._size > self.max_messages or len(self._entries) > self.max_sessions) and self._entries:
            _, oldest = self._entries.popitem(last=False)
            self._size -= len(oldest.messages)


class SqlSessionStore(SqlBase):
    """Implements agent.ports.SessionStore."""

    def __init__(self, database: Database, *, redact: Callable[[str], str] | None = None):
        super().__init__(database, redact=redact)
        self._history = _HistoryCache()

    # ---- sessions ----------------------------------------------------------------------------
    async def get_or_create_session(self, session_id: str, *, chat_key: str = "", user_id: str = "") -> None:
        now = utcnow()
        await self.db.run(
            lambda c: self._ensure_session_sync(c, session_id, chat_key, user_id, now=now), write=True
        )

    async def get_session(self, session_id: str) -> SessionInfo | None:
        rows = await self._list_sessions(sa.and_(SESSIONS.c.id == session_id), limit=1)
        return rows[0] if rows else None

    async def list_sessions(
        self, chat_key: str | None = None, *, include_archived: bool = False, limit: int = 50
    ) -> list[SessionInfo]:
        """Newest first (by last update)."""
        conds = []
        if chat_key is not None:
            conds.append(SESSIONS.c.chat_key == chat_key)
        if not include_archived:
            conds.append(SESSIONS.c.archived.is_(False))
        return await self._list_sessions(sa.and_(sa.true(), *conds), limit=limit)

    async def latest_session(self, chat_key: str) -> SessionInfo | None:
        """The chat's most recently updated, unarchived session."""
        rows = await self.list_sessions(chat_key, limit=1)
        return rows[0] if rows else None

    async def _list_sessions(self, where: Any, *, limit: int) -> list[SessionInfo]:
        counts = (
            sa.select(MESSAGES.c.session_id, sa.func.count(MESSAGES.c.id).label("n"))
            .group_by(MESSAGES.c.session_id)
            .subquery()
        )
        stmt = (
            sa.select(SESSIONS, sa.func.coalesce(counts.c.n, 0).label("message_count"))
            .outerjoin(counts, counts.c.session_id == SESSIONS.c.id)
            .where(where)
            .order_by(SESSIONS.c.updated_at.desc(), SESSIONS.c.id)
            .limit(limit)
        )

        def work(c: Connection) -> Any:
            result = c.execute(stmt)
            return [
                SessionInfo(
                    id=r.id,
                    chat_key=r.chat_key,
                    user_id=r.user_id,
                    title=r.title,
                    model=r.model,
                    created_at=r.created_at,
                    updated_at=r.updated_at,
                    archived=r.archived,
                    message_count=int(r.message_count),
                )
                for r in result.all()
            ]

        return await self.db.run(work)

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        archived: bool | None = None,
    ) -> bool:
        values: dict[str, Any] = {"updated_at": utcnow()}
        if title is not None:
            values["title"] = title
        if model is not None:
            values["model"] = model
        if archived is not None:
            values["archived"] = archived

        def work(c: Connection) -> Any:
            result = c.execute(sa.update(SESSIONS).where(SESSIONS.c.id == session_id).values(**values))
            return rowcount(result) == 1

        return await self.db.run(work, write=True)

    # ---- messages ----------------------------------------------------------------------------
    async def load_messages(self, session_id: str) -> list[Message]:
        """The session's history, oldest first. Histories are cached per session and checked
        against `sessions.updated_at` (which every write of messages sets) on each load, so a turn
        reads one row instead of decoding its whole history again."""
        cached = self._history.get(session_id)

        def core(c: Connection) -> tuple[Any, list[Any] | None]:
            version = c.execute(self._sql.session_version, {"session_id": session_id}).scalar()
            if cached is not None and version is not None and version == cached.version:
                return version, None
            return version, list(c.execute(self._sql.load_messages, {"session_id": session_id}).scalars())

        version, payloads = await self.db.run(core)
        if payloads is None:
            assert cached is not None
            return list(cached.messages)
        messages = [Message.model_validate(p) for p in payloads]
        self._history.put(session_id, version, list(messages))
        return messages

    async def append_messages(self, session_id: str, messages: list[Message]) -> None:
        if messages:
            await self.commit(session_id, messages=messages)

    async def commit(
        self,
        session_id: str,
        *,
        messages: Sequence[Message] = (),
        turn: TurnRecord | None = None,
        usage: UsageRecord | None = None,
        received: Sequence[Receipt] = (),
    ) -> None:
        """Persist one step of a turn atomically — new messages, the turn record, a usage row —
        in a single transaction (a crash never leaves a message without its turn state). The
        `received` messages (see `receive_message`) are in the history now: their records are
        cleared in the same transaction."""
        now = utcnow()
        messages = self._clean(messages)
        # serialised before the transaction starts, so the write lock is held only for SQL
        rows = [(m.role, m.model_dump(mode="json")) for m in messages]
        turn_row = turn_values(turn, now) if turn is not None else None
        usage_row = usage_values(usage) if usage is not None else None

        chat_key, user_id = (turn.chat_key, turn.requester) if turn is not None else ("", "")

        # Each returns the session's version before and after (for the history cache).
        def work(c: Connection) -> tuple[Any, Any]:
            self._ensure_session_sync(c, session_id, chat_key, user_id, now=now)
            before = None
            if rows:
                self._lock_session(c, session_id)
                before = c.execute(self._sql.session_version, {"session_id": session_id}).scalar()
                last = c.execute(self._sql.max_seq, {"session_id": session_id}).scalar()
                start = 0 if last is None else last + 1
                self._insert_rows_sync(c, session_id, rows, start=start, now=now)
            if turn_row is not None:
                c.execute(self._sql.upsert_turn, turn_row)
            if usage_row is not None:
                c.execute(self._sql.insert_usage, usage_row)
            if received:
                c.execute(self._sql.clear_pending, receipt_params(received))
            return before, now

        before, after = await self.db.run(work, write=True)
        if messages:
            self._history.advance(session_id, before, after, messages)

    def _lock_session(self, c: Connection, session_id: str) -> None:
        """Serialise writers of one session's messages. SQLite already does (BEGIN IMMEDIATE);
        on PostgreSQL two appends would otherwise both read the same max(seq)."""
        if not self.db.is_sqlite:
            c.execute(sa.select(SESSIONS.c.id).where(SESSIONS.c.id == session_id).with_for_update())

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None:
        """Swap the whole history at once (compaction, restore); readers see old or new, never half."""
        self._history.drop(session_id)
        now = utcnow()
        messages = self._clean(messages)
        rows = [(m.role, m.model_dump(mode="json")) for m in messages]

        def work(c: Connection) -> None:
            self._ensure_session_sync(c, session_id, now=now)
            self._lock_session(c, session_id)
            c.execute(sa.delete(MESSAGES).where(MESSAGES.c.session_id == session_id))
            self._insert_rows_sync(c, session_id, rows, start=0, now=now)

        await self.db.run(work, write=True)

    async def delete_session_messages(self, session_id: str) -> int:
        """/clear: drop the session's messages; returns how many were deleted."""
        self._history.drop(session_id)
        now = utcnow()

        def work(c: Connection) -> int:
            result = c.execute(sa.delete(MESSAGES).where(MESSAGES.c.session_id == session_id))
            c.execute(self._sql.touch_session, {"session_id": session_id, "now": now})
            return rowcount(result)

        return await self.db.run(work, write=True)

    def _insert_rows_sync(
        self,
        c: Connection,
        session_id: str,
        rows: Sequence[tuple[str, dict[str, Any]]],
        *,
        start: int,
        now: datetime,
    ) -> None:
        if rows:
            c.execute(
                self._sql.insert_messages,
                [
                    {
                        "session_id": session_id,
                        "seq": start + i,
                        "role": role,
                        "payload": p,
                        "created_at": now,
                    }
                    for i, (role, p) in enumerate(rows)
                ],
            )
        c.execute(self._sql.touch_session, {"session_id": session_id, "now": now})
