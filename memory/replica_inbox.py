"""Which replica runs a chat, and the chat's stored messages in arrival order: the queries behind
bot/replicas.py, for several `tapebot run` processes on one PostgreSQL database.

A chat is run by the replica holding its lease (a `scheduler_leases` row, memory/coordination.py,
whose `subject` is the chat key). Every inbound message that may queue is stored first
(`processed_updates`, with the message) and filed here under its chat; the holder takes the chat's
messages up oldest first — ordered by the `processed_updates` id, the order the database recorded
them in, whichever replica received them. The holder lets the chat go only in one guarded
statement: "delete my lease unless a message waits that I have not taken". A replica that files a
message and then fails to take the lease can therefore leave it: either the holder's release saw
the message and it keeps the lease (and takes it up), or the release came first and the lease is
free for the filer. No message is stranded and no chat runs on two replicas at once.

A lease row rather than `FOR UPDATE SKIP LOCKED` on the inbox or an advisory lock: a chat's turn
lasts seconds to minutes, and a row lock or an advisory lock lives in a database session, which
would pin a pooled connection per busy chat; a lease costs a connection only to take, renew and
release it, and it outlives nothing — when its replica dies (kill -9) its heartbeat stops, the
lease expires, and a survivor's sweep (`orphaned_chats`) takes the chat over. The same statements
run on SQLite, which the tests use; a single process on SQLite does not use this module."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from agent.ports import Receipt
from memory.db import Database, rowcount
from memory.models import PROCESSED_UPDATES, REPLICA_INBOX
from memory.tasks import SCHEDULER_LEASES

CHAT = "chat:"  # chat lease names start with it (bot/replicas.py `chat_lease_name`)

_L, _IB, _PU = SCHEDULER_LEASES, REPLICA_INBOX, PROCESSED_UPDATES


@dataclass(frozen=True, slots=True)
class Waiting:
    """A stored message of a chat, not yet in its history: `seq` orders the chat's messages."""

    seq: int
    receipt: Receipt
    received_at: datetime
    record: dict[str, Any]


def _joined() -> sa.Join:
    return _IB.join(_PU, sa.and_(_PU.c.platform == _IB.c.platform, _PU.c.update_id == _IB.c.update_id))


class ReplicaInbox:
    """The chats' inboxes and the chat leases' bulk operations for the replica `owner`."""

    def __init__(self, db: Database, owner: str):
        self.db = db
        self.owner = owner

    async def file(self, chat_key: str, receipt: Receipt) -> None:
        """The stored message `receipt` belongs to `chat_key` (filing it again changes nothing)."""
        stmt = (
            self.db.dialect_insert(_IB)
            .values(chat_key=chat_key, platform=receipt[0], update_id=str(receipt[1]), parked=False)
            .on_conflict_do_nothing(index_elements=[_IB.c.platform, _IB.c.update_id])
        )
        async with self.db.session() as s:
            await s.execute(stmt)

    async def waiting(self, chat_key: str) -> list[Waiting]:
        """The chat's stored messages not yet in its history, in arrival order."""
        q = (
            sa.select(_IB.c.id, _PU.c.platform, _PU.c.update_id, _PU.c.created_at, _PU.c.pending)
            .select_from(_joined())
            .where(_IB.c.chat_key == chat_key, _PU.c.pending.is_not(None))
            .order_by(_PU.c.id)
        )
        async with self.db.read() as s:
            rows = (await s.execute(q)).all()
        return [
            Waiting(int(r.id), (str(r.platform), str(r.update_id)), r.created_at, dict(r.pending))
            for r in rows
        ]

    async def let_go(
        self, lease: str, chat_key: str, taken: Collection[int], parked: Collection[Receipt] = ()
    ) -> bool:
        """Delete our lease `lease` of `chat_key` — unless a message of the chat waits that we have
        not taken (`taken`: their seqs); then it stays ours and False is returned. `parked`: the
        messages the idle lane holds for a decision. Messages already in a history are forgotten
        from the inbox on the way."""
        waiting = (
            sa.select(_IB.c.id)
            .select_from(_joined())
            .where(_IB.c.chat_key == chat_key, _PU.c.pending.is_not(None))
        )
        if taken:
            waiting = waiting.where(_IB.c.id.not_in(list(taken)))
        done = sa.select(_PU.c.id).where(
            _PU.c.platform == _IB.c.platform, _PU.c.update_id == _IB.c.update_id, _PU.c.pending.is_not(None)
        )
        async with self.db.session() as s:
            await s.execute(sa.delete(_IB).where(_IB.c.chat_key == chat_key, ~sa.exists(done)))
            gone = await s.execute(
                sa.delete(_L).where(_L.c.name == lease, _L.c.owner == self.owner, ~sa.exists(waiting))
            )
            if rowcount(gone) == 0:
                return False
            for platform, update_id in parked:
                await s.execute(
                    sa.update(_IB)
                    .where(_IB.c.platform == platform, _IB.c.update_id == str(update_id))
                    .values(parked=True)
                )
        return True

    async def renew_mine(self, *, now: datetime, ttl: float) -> int:
        """The heartbeat: every chat lease this replica holds lasts another `ttl`."""
        async with self.db.session() as s:
            res = await s.execute(
                sa.update(_L)
                .where(_L.c.owner == self.owner, _L.c.name.startswith(CHAT))
                .values(expires_at=now + timedelta(seconds=ttl))
            )
        return rowcount(res)

    async def expire_mine(self, *, now: datetime) -> None:
        """This replica stops: its chat leases expire now, for a survivor to take at once."""
        async with self.db.session() as s:
            await s.execute(
                sa.update(_L)
                .where(_L.c.owner == self.owner, _L.c.name.startswith(CHAT))
                .values(expires_at=now - timedelta(seconds=1))
            )

    async def orphaned_chats(self, *, now: datetime, stranded_after: float) -> list[str]:
        """Chats whose work no live replica holds: their lease expired (its holder died or
        stopped), or a message of theirs has waited longer than `stranded_after` seconds with no
        lease at all (its receiver died between storing and taking it) and is not parked."""
        expired = sa.select(_L.c.subject).where(
            _L.c.name.startswith(CHAT), _L.c.expires_at < now, _L.c.subject.is_not(None)
        )
        held = sa.select(_L.c.name).where(_L.c.subject == _IB.c.chat_key, _L.c.name.startswith(CHAT))
        stranded = (
            sa.select(_IB.c.chat_key)
            .select_from(_joined())
            .where(
                _PU.c.pending.is_not(None),
                _PU.c.created_at < now - timedelta(seconds=stranded_after),
                _IB.c.parked.is_(False),
                ~sa.exists(held),
            )
            .distinct()
        )
        async with self.db.read() as s:
            keys = [str(k) for k in (await s.execute(expired)).scalars()]
            keys += [str(k) for k in (await s.execute(stranded)).scalars() if k not in keys]
        return keys
