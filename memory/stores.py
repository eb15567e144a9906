"""`SqlStore`: the runtime's storage ports (SessionStore, TurnStore, ApprovalStore, UsageStore from
`agent.ports`) over the core tables, plus the small extras the bot needs (usage totals, inbound
de-duplication and the messages received but not yet in a history, session listing, /clear, a
key-value corner for state with no shape of its own; chats, paired users and sent-message
references are typed tables, `memory.chat_tables`).

Every method is one short transaction. Inserts that may race use the dialect's
`ON CONFLICT DO NOTHING / DO UPDATE` (SQLite and PostgreSQL both have it), so "create if absent"
and "seen before?" are single atomic statements rather than check-then-act.

The per-message operations (de-duplication, turn and message reads, `commit`, the key-value corner)
are plain Core statements built once (`HotStatements`) and run as one synchronous function per
transaction (`Database.run`): the ORM session path costs several times more per call, and a chat
message makes about ten of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

import sqlalchemy as sa
from pydantic import TypeAdapter
from sqlalchemy.engine import Connection

from agent.consent import StandingApproval, StandingScope
from agent.messages import Message
from agent.ports import ApprovalRecord, ApprovalStatus, Receipt, TurnRecord, UsageRecord, utcnow
from agent.providers.metered import SIDE_PREFIX, side_kind
from agent.redact import redact_message
from memory.chat_tables import ChatTables
from memory.db import Database
from memory.models import (
    APPROVAL_RULES,
    APPROVALS,
    KV,
    MESSAGES,
    PROCESSED_UPDATES,
    SESSIONS,
    STANDING_APPROVALS,
    TURNS,
    USAGE,
)
from memory.store_sql import OPEN_TURN_STATUSES, HotStatements

# A datetime as pydantic writes it in JSON (the turn payload's `updated_at`), without copying the
# whole record to change that one field
_JSON_TIME = TypeAdapter(datetime)


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


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Totals for one model over a period (`tapebot usage`, `/status`)."""

    model: str
    turns: int  # distinct turns that used this model
    calls: int  # usage records (model calls)
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float


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


class SqlStore(ChatTables):
    """Implements agent.ports.SessionStore, TurnStore, ApprovalStore and UsageStore; the bot's
    chats, paired users and sent-message references come from `ChatTables`."""

    def __init__(self, database: Database, *, redact: Callable[[str], str] | None = None):
        self.db = database
        self._history = _HistoryCache()
        # The last wall before the disk (C5): messages and received-message records are written
        # with secrets masked, whoever built them. The runtime masks them first (so the model sees
        # the masked form too); this catches any other writer.
        self._redact = redact

    def _clean(self, messages: Sequence[Message]) -> list[Message]:
        if self._redact is None:
            return list(messages)
        return [redact_message(m, self._redact) for m in messages]

    # ---- helpers -----------------------------------------------------------------------------
    def _insert(self, model: Any) -> Any:
        """The dialect's INSERT construct (it has on_conflict_do_nothing / do_update)."""
        if not self.db.is_sqlite:
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(model)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(model)

    @cached_property
    def _sql(self) -> HotStatements:
        return HotStatements(self._insert)

    def _ensure_session_sync(
        self, conn: Connection, session_id: str, chat_key: str = "", user_id: str = "", *, now: datetime
    ) -> None:
        conn.execute(
            self._sql.ensure_session,
            {
                "id": session_id,
                "chat_key": chat_key,
                "user_id": user_id,
                "title": "",
                "model": "",
                "created_at": now,
                "updated_at": now,
                "archived": False,
            },
        )

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
        async with self.db.read() as s:
            result = await s.execute(stmt)
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
        async with self.db.session() as s:
            result = await s.execute(sa.update(SESSIONS).where(SESSIONS.c.id == session_id).values(**values))
            return _rowcount(result) == 1

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
        turn_row = self._turn_row(turn, now) if turn is not None else None
        usage_row = self._usage_values(usage) if usage is not None else None

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
                c.execute(self._sql.clear_pending, _receipt_params(received))
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
            return _rowcount(result)

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

    # ---- turns -------------------------------------------------------------------------------
    async def save_turn(self, turn: TurnRecord) -> None:
        """Insert or replace the turn record (the whole ExecutionState, as JSON)."""
        now = utcnow()
        row = self._turn_row(turn, now)

        def work(c: Connection) -> None:
            self._ensure_session_sync(c, turn.session_id, now=now)
            c.execute(self._sql.upsert_turn, row)

        await self.db.run(work, write=True)

    @staticmethod
    def _turn_row(turn: TurnRecord, now: datetime) -> dict[str, Any]:
        # the payload carries its own write time: start-up recovery reads how old a turn is
        # (`updated_at` is the record's last field: set in the dump, it stays last)
        payload = turn.model_dump(mode="json")
        payload["updated_at"] = _JSON_TIME.dump_python(now, mode="json")
        return {
            "id": turn.id,
            "session_id": turn.session_id,
            "status": turn.status,
            "payload": payload,
            "created_at": turn.created_at,
            "updated_at": now,
        }

    async def load_turn(self, turn_id: str) -> TurnRecord | None:
        payload = await self.db.run(lambda c: c.execute(self._sql.load_turn, {"turn_id": turn_id}).scalar())
        return None if payload is None else TurnRecord.model_validate(payload)

    async def open_turn(self, session_id: str) -> TurnRecord | None:
        """The session's running or suspended turn, if any (the newest if several)."""
        payload = await self.db.run(
            lambda c: c.execute(self._sql.open_turn, {"session_id": session_id}).scalar()
        )
        return None if payload is None else TurnRecord.model_validate(payload)

    async def open_turns(self) -> list[TurnRecord]:
        """Every running or suspended turn in the database (start-up recovery)."""
        async with self.db.read() as s:
            payloads = (
                await s.execute(
                    sa.select(TURNS.c.payload)
                    .where(TURNS.c.status.in_(OPEN_TURN_STATUSES))
                    .order_by(TURNS.c.updated_at)
                )
            ).scalars()
            return [TurnRecord.model_validate(p) for p in payloads]

    # ---- approvals ---------------------------------------------------------------------------
    async def create_approval(self, approval: ApprovalRecord) -> None:
        async with self.db.session() as s:
            await s.execute(
                sa.insert(APPROVALS).values(
                    id=approval.id,
                    session_id=approval.session_id,
                    turn_id=approval.turn_id,
                    call_id=approval.call_id,
                    tool=approval.tool,
                    arguments=approval.arguments,
                    args_hash=approval.args_hash,
                    requester=approval.requester,
                    approvers=list(approval.approvers),
                    chat_key=approval.chat_key,
                    status=approval.status,
                    decided_by=approval.decided_by,
                    decision=approval.decision,
                    created_at=approval.created_at,
                    expires_at=approval.expires_at,
                    message_ref=approval.message_ref,
                )
            )

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        async with self.db.read() as s:
            row = (await s.execute(sa.select(APPROVALS).where(APPROVALS.c.id == approval_id))).first()
            return None if row is None else _approval(row)

    async def pending_approvals(self, *, session_id: str | None = None) -> list[ApprovalRecord]:
        stmt = sa.select(APPROVALS).where(APPROVALS.c.status == "pending").order_by(APPROVALS.c.created_at)
        if session_id is not None:
            stmt = stmt.where(APPROVALS.c.session_id == session_id)
        async with self.db.read() as s:
            return [_approval(r) for r in (await s.execute(stmt)).all()]

    async def resolve_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        decided_by: str,
        decision: str,
        now: datetime | None = None,
        receipt: Receipt | None = None,
    ) -> bool:
        """Compare-and-set from `pending`: exactly one caller can win. An approval past its expiry
        can no longer be *approved* (it can still be marked denied/expired). `receipt`: the tap
        that decided it, recorded as processed in the same transaction (False if it was already)."""
        now = now or utcnow()
        conds = [APPROVALS.c.id == approval_id, APPROVALS.c.status == "pending"]
        if status == "approved":
            conds.append(sa.or_(APPROVALS.c.expires_at.is_(None), APPROVALS.c.expires_at > now))
        stmt = (
            sa.update(APPROVALS)
            .where(*conds)
            .values(status=status, decided_by=decided_by, decision=decision, decided_at=now)
            .execution_options(synchronize_session=False)
        )
        async with self.db.session() as s:
            if receipt is not None:
                row = {"platform": receipt[0], "update_id": receipt[1], "created_at": now, "pending": None}
                if _rowcount(await s.execute(self._sql.mark_processed, row)) != 1:
                    return False  # this tap was handled before: its decision stands as it was
            return _rowcount(await s.execute(stmt)) == 1

    async def add_rule(self, chat_key: str, tool: str) -> None:
        async with self.db.session() as s:
            await s.execute(
                self._insert(APPROVAL_RULES)
                .values(chat_key=chat_key, tool=tool, created_at=utcnow())
                .on_conflict_do_nothing(index_elements=["chat_key", "tool"])
            )

    async def has_rule(self, chat_key: str, tool: str) -> bool:
        async with self.db.read() as s:
            found = (
                await s.execute(
                    sa.select(APPROVAL_RULES.c.id).where(
                        APPROVAL_RULES.c.chat_key == chat_key, APPROVAL_RULES.c.tool == tool
                    )
                )
            ).first()
            return found is not None

    async def remove_rule(self, chat_key: str, tool: str) -> bool:
        async with self.db.session() as s:
            result = await s.execute(
                sa.delete(APPROVAL_RULES).where(
                    APPROVAL_RULES.c.chat_key == chat_key, APPROVAL_RULES.c.tool == tool
                )
            )
            return _rowcount(result) > 0

    async def list_rules(self, chat_key: str) -> list[str]:
        async with self.db.read() as s:
            tools = await s.execute(
                sa.select(APPROVAL_RULES.c.tool)
                .where(APPROVAL_RULES.c.chat_key == chat_key)
                .order_by(APPROVAL_RULES.c.tool)
            )
            return list(tools.scalars())

    # ---- standing approvals (policy: written only by /rules and `tapebot rules`) --------------
    async def add_standing(self, rule: StandingApproval) -> None:
        async with self.db.session() as s:
            await s.execute(
                sa.insert(STANDING_APPROVALS).values(
                    id=rule.id,
                    chat_key=rule.chat_key,
                    tool=rule.tool,
                    scope=rule.scope.to_dict(),
                    granted_by=rule.granted_by,
                    approval_id=rule.approval_id,
                    created_at=rule.created_at,
                    expires_at=rule.expires_at,
                )
            )

    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]:
        """The unexpired standing approvals of a chat (every chat with `chat_key=None`)."""
        stmt = (
            sa.select(STANDING_APPROVALS)
            .where(STANDING_APPROVALS.c.expires_at > now)
            .order_by(STANDING_APPROVALS.c.created_at, STANDING_APPROVALS.c.id)
        )
        if chat_key is not None:
            stmt = stmt.where(STANDING_APPROVALS.c.chat_key == chat_key)
        if tool is not None:
            stmt = stmt.where(STANDING_APPROVALS.c.tool == tool)
        async with self.db.read() as s:
            return [_standing(r) for r in (await s.execute(stmt)).all()]

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int:
        """Delete one standing approval (`rule_id`) or all of them; `chat_key=None`: any chat.
        Returns how many were removed."""
        stmt = sa.delete(STANDING_APPROVALS)
        if chat_key is not None:
            stmt = stmt.where(STANDING_APPROVALS.c.chat_key == chat_key)
        if rule_id is not None:
            stmt = stmt.where(STANDING_APPROVALS.c.id == rule_id)
        async with self.db.session() as s:
            return _rowcount(await s.execute(stmt))

    # ---- usage -------------------------------------------------------------------------------
    async def record_usage(self, record: UsageRecord) -> None:
        values = self._usage_values(record)
        await self.db.run(lambda c: c.execute(self._sql.insert_usage, values), write=True)

    @staticmethod
    def _usage_values(record: UsageRecord) -> dict[str, Any]:
        u = record.usage
        return {
            "session_id": record.session_id,
            "turn_id": record.turn_id,
            "model": record.model,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "cost": record.cost,
            "created_at": record.created_at,
        }

    async def usage_totals(
        self, days: float | None = 30, *, session_id: str | None = None, now: datetime | None = None
    ) -> list[UsageTotal]:
        """Per-model totals over the last `days` (None = all time), optionally for one session;
        sorted by cost, then model."""
        totals = await self._usage(days, session_id, now, per_model=True)
        return sorted(totals, key=lambda t: (-t.cost, t.model))

    async def usage_summary(
        self, days: float | None = 30, *, session_id: str | None = None, now: datetime | None = None
    ) -> UsageTotal:
        """All models together (`model="*"`); `turns` counts each turn once even if it used two models."""
        rows = await self._usage(days, session_id, now, per_model=False)
        return rows[0] if rows else UsageTotal("*", 0, 0, 0, 0, 0, 0, 0.0)

    async def _usage(
        self, days: float | None, session_id: str | None, now: datetime | None, *, per_model: bool
    ) -> list[UsageTotal]:
        label = USAGE.c.model if per_model else sa.literal("*")
        side = USAGE.c.turn_id.like(f"{SIDE_PREFIX}%")
        stmt = sa.select(
            label,
            # side calls (memory upkeep) are model calls but no turn of anyone's
            sa.func.count(sa.distinct(sa.case((side, None), else_=USAGE.c.turn_id))),
            sa.func.count(USAGE.c.id),
            sa.func.coalesce(sa.func.sum(USAGE.c.input_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.output_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.cache_read_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.cache_write_tokens), 0),
            sa.func.coalesce(sa.func.sum(USAGE.c.cost), 0.0),
        )
        if per_model:
            stmt = stmt.group_by(USAGE.c.model)
        if days is not None:
            stmt = stmt.where(USAGE.c.created_at >= (now or utcnow()) - timedelta(days=days))
        if session_id is not None:
            stmt = stmt.where(USAGE.c.session_id == session_id)
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        return [
            UsageTotal(
                model=str(r[0]),
                turns=int(r[1]),
                calls=int(r[2]),
                input_tokens=int(r[3]),
                output_tokens=int(r[4]),
                cache_read_tokens=int(r[5]),
                cache_write_tokens=int(r[6]),
                cost=float(r[7]),
            )
            for r in rows
            if int(r[2]) > 0  # an aggregate over no rows still returns one row
        ]

    async def side_call_totals(
        self, days: float | None = 30, *, now: datetime | None = None
    ) -> list[UsageTotal]:
        """The side calls (memory extraction, TaskState, …) over the last `days`, one row per kind
        (`model` holds the kind; `turns` is 0)."""
        stmt = sa.select(
            USAGE.c.turn_id,
            USAGE.c.input_tokens,
            USAGE.c.output_tokens,
            USAGE.c.cache_read_tokens,
            USAGE.c.cache_write_tokens,
            USAGE.c.cost,
        ).where(USAGE.c.turn_id.like(f"{SIDE_PREFIX}%"))
        if days is not None:
            stmt = stmt.where(USAGE.c.created_at >= (now or utcnow()) - timedelta(days=days))
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        by_kind: dict[str, list[Any]] = {}
        for r in rows:
            kind = side_kind(str(r[0])) or "other"
            acc = by_kind.setdefault(kind, [0, 0, 0, 0, 0, 0.0])
            acc[0] += 1
            for i in range(1, 5):
                acc[i] += int(r[i] or 0)
            acc[5] += float(r[5] or 0.0)
        return [
            UsageTotal(kind, 0, int(a[0]), int(a[1]), int(a[2]), int(a[3]), int(a[4]), float(a[5]))
            for kind, a in sorted(by_kind.items())
        ]

    # ---- inbound de-duplication and received messages ----------------------------------------
    async def mark_update_processed(self, platform: str, update_id: str | int) -> bool:
        """Record an inbound update id; False if it was already recorded (drop the duplicate)."""
        return await self.receive_message(platform, update_id, None)

    async def receive_message(
        self, platform: str, update_id: str | int, pending: dict[str, Any] | None
    ) -> bool:
        """Record an inbound update id together with the message it carries (`pending`, JSON),
        in one INSERT: False if the id was recorded before (drop the duplicate). The message stays
        recorded until `commit(received=...)` writes it into its session's history or
        `release_received` lets it go; `received_pending` lists what a restart should take up."""
        now = utcnow()
        if pending is not None and self._redact is not None and isinstance(pending.get("text"), str):
            pending = {**pending, "text": self._redact(pending["text"])}
        row = {"platform": platform, "update_id": str(update_id), "created_at": now, "pending": pending}
        inserted = await self.db.run(
            lambda c: _rowcount(c.execute(self._sql.mark_processed, row)), write=True
        )
        return inserted == 1

    async def release_received(self, receipts: Sequence[Receipt]) -> None:
        """These received messages were dealt with otherwise (an answer to a question, a refusal):
        nothing is left to take up after a restart."""
        if not receipts:
            return
        await self.db.run(lambda c: c.execute(self._sql.clear_pending, _receipt_params(receipts)), write=True)

    async def received_pending(self) -> list[tuple[Receipt, datetime, dict[str, Any]]]:
        """Messages received but neither in a history nor released (a crash or a stop came
        between), oldest first: (receipt, received at, the message as given to `receive_message`)."""
        stmt = (
            sa.select(
                PROCESSED_UPDATES.c.platform,
                PROCESSED_UPDATES.c.update_id,
                PROCESSED_UPDATES.c.created_at,
                PROCESSED_UPDATES.c.pending,
            )
            .where(PROCESSED_UPDATES.c.pending.is_not(None))
            .order_by(PROCESSED_UPDATES.c.id)
        )
        async with self.db.read() as s:
            rows = (await s.execute(stmt)).all()
        return [((r[0], r[1]), r[2], r[3]) for r in rows]

    async def prune_processed_updates(self, older_than: timedelta, *, now: datetime | None = None) -> int:
        """Forget update ids older than `older_than` (platforms redeliver for a day at most);
        a message still waiting to be taken up is kept whatever its age."""
        cutoff = (now or utcnow()) - older_than
        async with self.db.session() as s:
            result = await s.execute(
                sa.delete(PROCESSED_UPDATES).where(
                    PROCESSED_UPDATES.c.created_at < cutoff, PROCESSED_UPDATES.c.pending.is_(None)
                )
            )
            return _rowcount(result)

    # ---- key-value ---------------------------------------------------------------------------
    async def kv_get(self, key: str, default: Any = None) -> Any:
        row = await self.db.run(lambda c: c.execute(self._sql.kv_get, {"key": key}).first())
        return default if row is None else row[0]

    async def kv_set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under `key` (insert or replace)."""
        row = {"key": key, "value": value, "updated_at": utcnow()}
        await self.db.run(lambda c: c.execute(self._sql.kv_set, row), write=True)

    async def kv_delete(self, key: str) -> bool:
        async with self.db.session() as s:
            return _rowcount(await s.execute(sa.delete(KV).where(KV.c.key == key))) > 0


def _receipt_params(receipts: Sequence[Receipt]) -> list[dict[str, str]]:
    return [{"r_platform": p, "r_update_id": u} for p, u in receipts]


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def _approval(row: Any) -> ApprovalRecord:
    return ApprovalRecord(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        call_id=row.call_id,
        tool=row.tool,
        arguments=row.arguments,
        args_hash=row.args_hash,
        requester=row.requester,
        approvers=list(row.approvers or []),
        chat_key=row.chat_key,
        status=row.status,
        decided_by=row.decided_by,
        decision=row.decision,
        created_at=row.created_at,
        expires_at=row.expires_at,
        message_ref=row.message_ref,
    )


def _standing(row: Any) -> StandingApproval:
    return StandingApproval(
        id=row.id,
        chat_key=row.chat_key,
        scope=StandingScope.from_dict(row.scope),
        granted_by=row.granted_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        approval_id=row.approval_id,
    )
