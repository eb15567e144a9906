"""`SqlApprovalStore`: `agent.ports.ApprovalStore` — approvals, each bound to one exact action and
resolved by compare-and-set, and the standing approvals (policy: written only by /rules and
`tapebot rules`, never by a tool)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent.consent import StandingApproval, StandingScope
from agent.ports import ApprovalRecord, ApprovalStatus, Receipt, utcnow
from memory.db import rowcount
from memory.models import APPROVALS, STANDING_APPROVALS
from memory.store_sql import SqlBase


class SqlApprovalStore(SqlBase):
    """Implements agent.ports.ApprovalStore."""

    # ---- approvals ---------------------------------------------------------------------------
    async def create_approval(self, approval: ApprovalRecord) -> None:
        def work(c: Connection) -> Any:
            c.execute(
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

        await self.db.run(work, write=True)

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        def work(c: Connection) -> Any:
            row = (c.execute(sa.select(APPROVALS).where(APPROVALS.c.id == approval_id))).first()
            return None if row is None else _approval(row)

        return await self.db.run(work)

    async def pending_approvals(self, *, session_id: str | None = None) -> list[ApprovalRecord]:
        stmt = sa.select(APPROVALS).where(APPROVALS.c.status == "pending").order_by(APPROVALS.c.created_at)
        if session_id is not None:
            stmt = stmt.where(APPROVALS.c.session_id == session_id)

        def work(c: Connection) -> Any:
            return [_approval(r) for r in (c.execute(stmt)).all()]

        return await self.db.run(work)

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

        def work(c: Connection) -> Any:
            if receipt is not None:
                row = {"platform": receipt[0], "update_id": receipt[1], "created_at": now, "pending": None}
                if rowcount(c.execute(self._sql.mark_processed, row)) != 1:
                    return False  # this tap was handled before: its decision stands as it was
            return rowcount(c.execute(stmt)) == 1

        return await self.db.run(work, write=True)

    # ---- standing approvals (policy: written only by /rules and `tapebot rules`) --------------
    async def add_standing(self, rule: StandingApproval) -> None:
        def work(c: Connection) -> Any:
            c.execute(
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

        await self.db.run(work, write=True)

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

        def work(c: Connection) -> Any:
            return [_standing(r) for r in (c.execute(stmt)).all()]

        return await self.db.run(work)

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int:
        """Delete one standing approval (`rule_id`) or all of them; `chat_key=None`: any chat.
        Returns how many were removed."""
        stmt = sa.delete(STANDING_APPROVALS)
        if chat_key is not None:
            stmt = stmt.where(STANDING_APPROVALS.c.chat_key == chat_key)
        if rule_id is not None:
            stmt = stmt.where(STANDING_APPROVALS.c.id == rule_id)

        def work(c: Connection) -> Any:
            return rowcount(c.execute(stmt))

        return await self.db.run(work, write=True)


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
