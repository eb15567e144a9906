"""`SqlInbox`: inbound de-duplication and the messages received but not yet in a history (what a
restart takes up). Recording an update id and the message it carries is one INSERT."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from agent.ports import Receipt, utcnow
from memory.db import rowcount
from memory.models import PROCESSED_UPDATES
from memory.store_sql import SqlBase, receipt_params


class SqlInbox(SqlBase):
    """Received updates: de-duplication and the messages waiting to be taken up."""

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
        inserted = await self.db.run(lambda c: rowcount(c.execute(self._sql.mark_processed, row)), write=True)
        return inserted == 1

    async def release_received(self, receipts: Sequence[Receipt]) -> None:
        """These received messages were dealt with otherwise (an answer to a question, a refusal):
        nothing is left to take up after a restart."""
        if not receipts:
            return
        await self.db.run(lambda c: c.execute(self._sql.clear_pending, receipt_params(receipts)), write=True)

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
            return rowcount(result)
