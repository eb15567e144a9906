"""`SqlStore`: the runtime's storage ports (SessionStore, TurnStore, ApprovalStore, UsageStore from
`agent.ports`) over the core tables, plus the small extras the bot needs (usage totals, inbound
de-duplication, session listing, /clear, a key-value corner).

Every method is one short transaction. Inserts that may race use the dialect's
`ON CONFLICT DO NOTHING / DO UPDATE` (SQLite and PostgreSQL both have it), so "create if absent"
and "seen before?" are single atomic statements rather than check-then-act.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from agent.messages import Message
from agent.ports import ApprovalRecord, ApprovalStatus, TurnRecord, UsageRecord, utcnow
from memory.db import Database
from memory.models import (
    ApprovalRow,
    ApprovalRuleRow,
    KvRow,
    MessageRow,
    ProcessedUpdateRow,
    SessionRow,
    TurnRow,
    UsageRow,
)

OPEN_TURN_STATUSES = ("running", "suspended")


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


class SqlStore:
    """Implements agent.ports.SessionStore, TurnStore, ApprovalStore and UsageStore."""

    def __init__(self, database: Database):
        self.db = database

    # ---- helpers -----------------------------------------------------------------------------
    def _insert(self, model: type) -> Any:
        """The dialect's INSERT construct (it has on_conflict_do_nothing / do_update)."""
        if not self.db.is_sqlite:
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(model)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(model)

    async def _ensure_session(
        self, s: AsyncSession, session_id: str, chat_key: str = "", user_id: str = ""
    ) -> None:
        now = utcnow()
        stmt = (
            self._insert(SessionRow)
            .values(
                id=session_id,
                chat_key=chat_key,
                user_id=user_id,
                title="",
                model="",
                created_at=now,
                updated_at=now,
                archived=False,
            )
            .on_conflict_do_nothing(index_elements=["id"])
        )
        await s.execute(stmt)

    # ---- sessions ----------------------------------------------------------------------------
    async def get_or_create_session(self, session_id: str, *, chat_key: str = "", user_id: str = "") -> None:
        async with self.db.session() as s:
            await self._ensure_session(s, session_id, chat_key, user_id)

    async def get_session(self, session_id: str) -> SessionInfo | None:
        rows = await self._list_sessions(sa.and_(SessionRow.id == session_id), limit=1)
        return rows[0] if rows else None

    async def list_sessions(
        self, chat_key: str | None = None, *, include_archived: bool = False, limit: int = 50
    ) -> list[SessionInfo]:
        """Newest first (by last update)."""
        conds = []
        if chat_key is not None:
            conds.append(SessionRow.chat_key == chat_key)
        if not include_archived:
            conds.append(SessionRow.archived.is_(False))
        return await self._list_sessions(sa.and_(sa.true(), *conds), limit=limit)

    async def latest_session(self, chat_key: str) -> SessionInfo | None:
        """The chat's most recently updated, unarchived session."""
        rows = await self.list_sessions(chat_key, limit=1)
        return rows[0] if rows else None

    async def _list_sessions(self, where: Any, *, limit: int) -> list[SessionInfo]:
        counts = (
            sa.select(MessageRow.session_id, sa.func.count(MessageRow.id).label("n"))
            .group_by(MessageRow.session_id)
            .subquery()
        )
        stmt = (
            sa.select(SessionRow, sa.func.coalesce(counts.c.n, 0))
            .outerjoin(counts, counts.c.session_id == SessionRow.id)
            .where(where)
            .order_by(SessionRow.updated_at.desc(), SessionRow.id)
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
                    message_count=int(n),
                )
                for r, n in result.all()
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
            result = await s.execute(
                sa.update(SessionRow).where(SessionRow.id == session_id).values(**values)
            )
            return _rowcount(result) == 1

    # ---- messages ----------------------------------------------------------------------------
    async def load_messages(self, session_id: str) -> list[Message]:
        async with self.db.read() as s:
            payloads = (
                await s.execute(
                    sa.select(MessageRow.payload)
                    .where(MessageRow.session_id == session_id)
                    .order_by(MessageRow.seq)
                )
            ).scalars()
            return [Message.model_validate(p) for p in payloads]

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
    ) -> None:
        """Persist one step of a turn atomically — new messages, the turn record, a usage row —
        in a single transaction (a crash never leaves a message without its turn state)."""
        async with self.db.session() as s:
            if turn is not None:
                await self._ensure_session(s, session_id, turn.chat_key, turn.requester)
            else:
                await self._ensure_session(s, session_id)
            if messages:
                await self._lock_session(s, session_id)
                last = (
                    await s.execute(
                        sa.select(sa.func.max(MessageRow.seq)).where(MessageRow.session_id == session_id)
                    )
                ).scalar()
                await self._insert_messages(s, session_id, messages, start=0 if last is None else last + 1)
            if turn is not None:
                await self._upsert_turn(s, turn)
            if usage is not None:
                s.add(self._usage_row(usage))

    async def _lock_session(self, s: AsyncSession, session_id: str) -> None:
        """Serialise writers of one session's messages. SQLite already does (BEGIN IMMEDIATE);
        on PostgreSQL two appends would otherwise both read the same max(seq)."""
        if not self.db.is_sqlite:
            await s.execute(sa.select(SessionRow.id).where(SessionRow.id == session_id).with_for_update())

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None:
        """Swap the whole history at once (compaction, restore); readers see old or new, never half."""
        async with self.db.session() as s:
            await self._ensure_session(s, session_id)
            await self._lock_session(s, session_id)
            await s.execute(sa.delete(MessageRow).where(MessageRow.session_id == session_id))
            await self._insert_messages(s, session_id, messages, start=0)

    async def delete_session_messages(self, session_id: str) -> int:
        """/clear: drop the session's messages; returns how many were deleted."""
        async with self.db.session() as s:
            result = await s.execute(sa.delete(MessageRow).where(MessageRow.session_id == session_id))
            await s.execute(
                sa.update(SessionRow).where(SessionRow.id == session_id).values(updated_at=utcnow())
            )
            return _rowcount(result)

    async def _insert_messages(
        self, s: AsyncSession, session_id: str, messages: Sequence[Message], *, start: int
    ) -> None:
        now = utcnow()
        if messages:
            await s.execute(
                sa.insert(MessageRow),
                [
                    {
                        "session_id": session_id,
                        "seq": start + i,
                        "role": m.role,
                        "payload": m.model_dump(mode="json"),
                        "created_at": now,
                    }
                    for i, m in enumerate(messages)
                ],
            )
        await s.execute(sa.update(SessionRow).where(SessionRow.id == session_id).values(updated_at=now))

    # ---- turns -------------------------------------------------------------------------------
    async def save_turn(self, turn: TurnRecord) -> None:
        """Insert or replace the turn record (the whole ExecutionState, as JSON)."""
        async with self.db.session() as s:
            await self._ensure_session(s, turn.session_id)
            await self._upsert_turn(s, turn)

    async def _upsert_turn(self, s: AsyncSession, turn: TurnRecord) -> None:
        now = utcnow()
        stmt = self._insert(TurnRow).values(
            id=turn.id,
            session_id=turn.session_id,
            status=turn.status,
            payload=turn.model_dump(mode="json"),
            created_at=turn.created_at,
            updated_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["id"],
            set_={"status": stmt.excluded.status, "payload": stmt.excluded.payload, "updated_at": now},
        )
        await s.execute(stmt)

    async def load_turn(self, turn_id: str) -> TurnRecord | None:
        async with self.db.read() as s:
            payload = (await s.execute(sa.select(TurnRow.payload).where(TurnRow.id == turn_id))).scalar()
        return None if payload is None else TurnRecord.model_validate(payload)

    async def open_turn(self, session_id: str) -> TurnRecord | None:
        """The session's running or suspended turn, if any (the newest if several)."""
        async with self.db.read() as s:
            payload = (
                await s.execute(
                    sa.select(TurnRow.payload)
                    .where(TurnRow.session_id == session_id, TurnRow.status.in_(OPEN_TURN_STATUSES))
                    .order_by(TurnRow.updated_at.desc())
                    .limit(1)
                )
            ).scalar()
        return None if payload is None else TurnRecord.model_validate(payload)

    async def open_turns(self) -> list[TurnRecord]:
        """Every running or suspended turn in the database (start-up recovery)."""
        async with self.db.read() as s:
            payloads = (
                await s.execute(
                    sa.select(TurnRow.payload)
                    .where(TurnRow.status.in_(OPEN_TURN_STATUSES))
                    .order_by(TurnRow.updated_at)
                )
            ).scalars()
            return [TurnRecord.model_validate(p) for p in payloads]

    # ---- approvals ---------------------------------------------------------------------------
    async def create_approval(self, approval: ApprovalRecord) -> None:
        async with self.db.session() as s:
            s.add(
                ApprovalRow(
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
            row = await s.get(ApprovalRow, approval_id)
            return None if row is None else _approval(row)

    async def pending_approvals(self, *, session_id: str | None = None) -> list[ApprovalRecord]:
        stmt = sa.select(ApprovalRow).where(ApprovalRow.status == "pending").order_by(ApprovalRow.created_at)
        if session_id is not None:
            stmt = stmt.where(ApprovalRow.session_id == session_id)
        async with self.db.read() as s:
            return [_approval(r) for r in (await s.execute(stmt)).scalars()]

    async def resolve_approval(
        self,
        approval_id: str,
        *,
        status: ApprovalStatus,
        decided_by: str,
        decision: str,
        now: datetime | None = None,
    ) -> bool:
        """Compare-and-set from `pending`: exactly one caller can win. An approval past its expiry
        can no longer be *approved* (it can still be marked denied/expired)."""
        now = now or utcnow()
        conds = [ApprovalRow.id == approval_id, ApprovalRow.status == "pending"]
        if status == "approved":
            conds.append(sa.or_(ApprovalRow.expires_at.is_(None), ApprovalRow.expires_at > now))
        stmt = (
            sa.update(ApprovalRow)
            .where(*conds)
            .values(status=status, decided_by=decided_by, decision=decision, decided_at=now)
            .execution_options(synchronize_session=False)
        )
        async with self.db.session() as s:
            return _rowcount(await s.execute(stmt)) == 1

    async def set_approval_message_ref(self, approval_id: str, message_ref: str) -> None:
        async with self.db.session() as s:
            await s.execute(
                sa.update(ApprovalRow)
                .where(ApprovalRow.id == approval_id)
                .values(message_ref=message_ref)
                .execution_options(synchronize_session=False)
            )

    async def add_rule(self, chat_key: str, tool: str) -> None:
        async with self.db.session() as s:
            await s.execute(
                self._insert(ApprovalRuleRow)
                .values(chat_key=chat_key, tool=tool, created_at=utcnow())
                .on_conflict_do_nothing(index_elements=["chat_key", "tool"])
            )

    async def has_rule(self, chat_key: str, tool: str) -> bool:
        async with self.db.read() as s:
            found = (
                await s.execute(
                    sa.select(ApprovalRuleRow.id).where(
                        ApprovalRuleRow.chat_key == chat_key, ApprovalRuleRow.tool == tool
                    )
                )
            ).first()
            return found is not None

    async def remove_rule(self, chat_key: str, tool: str) -> bool:
        async with self.db.session() as s:
            result = await s.execute(
                sa.delete(ApprovalRuleRow).where(
                    ApprovalRuleRow.chat_key == chat_key, ApprovalRuleRow.tool == tool
                )
            )
            return _rowcount(result) > 0

    async def list_rules(self, chat_key: str) -> list[str]:
        async with self.db.read() as s:
            tools = await s.execute(
                sa.select(ApprovalRuleRow.tool)
                .where(ApprovalRuleRow.chat_key == chat_key)
                .order_by(ApprovalRuleRow.tool)
            )
            return list(tools.scalars())

    # ---- usage -------------------------------------------------------------------------------
    async def record_usage(self, record: UsageRecord) -> None:
        async with self.db.session() as s:
            s.add(self._usage_row(record))

    @staticmethod
    def _usage_row(record: UsageRecord) -> UsageRow:
        u = record.usage
        return UsageRow(
            session_id=record.session_id,
            turn_id=record.turn_id,
            model=record.model,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
            cost=record.cost,
            created_at=record.created_at,
        )

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
        label = UsageRow.model if per_model else sa.literal("*")
        stmt = sa.select(
            label,
            sa.func.count(sa.distinct(UsageRow.turn_id)),
            sa.func.count(UsageRow.id),
            sa.func.coalesce(sa.func.sum(UsageRow.input_tokens), 0),
            sa.func.coalesce(sa.func.sum(UsageRow.output_tokens), 0),
            sa.func.coalesce(sa.func.sum(UsageRow.cache_read_tokens), 0),
            sa.func.coalesce(sa.func.sum(UsageRow.cache_write_tokens), 0),
            sa.func.coalesce(sa.func.sum(UsageRow.cost), 0.0),
        )
        if per_model:
            stmt = stmt.group_by(UsageRow.model)
        if days is not None:
            stmt = stmt.where(UsageRow.created_at >= (now or utcnow()) - timedelta(days=days))
        if session_id is not None:
            stmt = stmt.where(UsageRow.session_id == session_id)
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

    # ---- inbound de-duplication --------------------------------------------------------------
    async def mark_update_processed(self, platform: str, update_id: str | int) -> bool:
        """Record an inbound update id; False if it was already recorded (drop the duplicate)."""
        async with self.db.session() as s:
            result = await s.execute(
                self._insert(ProcessedUpdateRow)
                .values(platform=platform, update_id=str(update_id), created_at=utcnow())
                .on_conflict_do_nothing(index_elements=["platform", "update_id"])
            )
            return _rowcount(result) == 1

    async def prune_processed_updates(self, older_than: timedelta, *, now: datetime | None = None) -> int:
        cutoff = (now or utcnow()) - older_than
        async with self.db.session() as s:
            result = await s.execute(
                sa.delete(ProcessedUpdateRow).where(ProcessedUpdateRow.created_at < cutoff)
            )
            return _rowcount(result)

    # ---- key-value ---------------------------------------------------------------------------
    async def kv_get(self, key: str, default: Any = None) -> Any:
        async with self.db.read() as s:
            row = await s.get(KvRow, key)
            return default if row is None else row.value

    async def kv_set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value under `key` (insert or replace)."""
        now = utcnow()
        async with self.db.session() as s:
            stmt = self._insert(KvRow).values(key=key, value=value, updated_at=now)
            stmt = stmt.on_conflict_do_update(
                index_elements=["key"], set_={"value": stmt.excluded.value, "updated_at": now}
            )
            await s.execute(stmt)

    async def kv_delete(self, key: str) -> bool:
        async with self.db.session() as s:
            return _rowcount(await s.execute(sa.delete(KvRow).where(KvRow.key == key))) > 0


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def _approval(row: ApprovalRow) -> ApprovalRecord:
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
        status=row.status,  # type: ignore[arg-type]
        decided_by=row.decided_by,
        decision=row.decision,
        created_at=row.created_at,
        expires_at=row.expires_at,
        message_ref=row.message_ref,
    )
