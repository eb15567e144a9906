"""Named leases in the database, so that several processes on one database (replicas of `tapebot
run`) agree on who does what: one row per name (`scheduler_leases`) with an owner and an expiry.

Two kinds of use:
- `take`: exclusive. The row is ours if it is ours already or expired (one guarded UPDATE, or the
  first INSERT); the holder renews it by taking it again before it expires, and a standby takes it
  over once the holder stops renewing (a crash, a kill -9) — no process has to notice the death.
- `mark`: shared presence. Any process stamps the row with itself and a later expiry; `live`
  tells whether somebody stamped it recently (e.g. "a webhook replica is running").

The database is the only shared thing replicas have, and a guarded UPDATE behaves the same on
SQLite and PostgreSQL, so no lock service is needed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from memory.db import Database, rowcount
from memory.tasks import SCHEDULER_LEASES

_L = SCHEDULER_LEASES


@dataclass(frozen=True, slots=True)
class Lease:
    held: bool  # the asking owner holds it now
    owner: str  # who holds it ("" when nobody ever did)
    expires_at: datetime | None


class Leases:
    """Take, renew, release and look up named leases on `db`."""

    def __init__(self, db: Database):
        self.db = db

    async def take(
        self, name: str, owner: str, *, now: datetime, ttl: float, subject: str | None = None
    ) -> Lease:
        """Take or renew `name` for `owner` until `now + ttl` if it is ours or expired; else say who
        holds it. `subject`: what the lease is for, kept with it (a chat's key)."""
        expires = now + timedelta(seconds=ttl)
        about = {} if subject is None else {"subject": subject}
        claim = (
            sa.update(_L)
            .where(_L.c.name == name, sa.or_(_L.c.owner == owner, _L.c.expires_at < now))
            .values(
                owner=owner,
                expires_at=expires,
                acquired_at=sa.case((_L.c.owner == owner, _L.c.acquired_at), else_=now),
                **about,
            )
        )
        async with self.db.session() as s:
            if rowcount(await s.execute(claim)) == 1:
                return Lease(True, owner, expires)
            row = (await s.execute(sa.select(_L.c.owner, _L.c.expires_at).where(_L.c.name == name))).first()
            if row is None:
                if await _insert(s, name, owner, now, expires, subject):
                    return Lease(True, owner, expires)
                # inserted first by someone else — maybe another task of this same owner, whose
                # lease this one must report as held, not as another process's
                if rowcount(await s.execute(claim)) == 1:
                    return Lease(True, owner, expires)
                row = (
                    await s.execute(sa.select(_L.c.owner, _L.c.expires_at).where(_L.c.name == name))
                ).first()
                if row is None:
                    return Lease(False, "another process", None)
        return Lease(row.owner == owner, row.owner, row.expires_at)

    async def take_from(self, name: str, dead: str, owner: str, *, now: datetime, ttl: float) -> bool:
        """Take `name` from `dead`, a holder known to have died before its lease ran out; False
        when somebody else took it first."""
        async with self.db.session() as s:
            res = await s.execute(
                sa.update(_L)
                .where(_L.c.name == name, _L.c.owner == dead)
                .values(owner=owner, acquired_at=now, expires_at=now + timedelta(seconds=ttl))
            )
            return rowcount(res) == 1

    async def release(self, name: str, owner: str, *, now: datetime) -> None:
        """Expire our lease now, so a standby takes it at its next try."""
        async with self.db.session() as s:
            await s.execute(
                sa.update(_L)
                .where(_L.c.name == name, _L.c.owner == owner)
                .values(expires_at=now - timedelta(seconds=1))
            )

    async def mark(self, name: str, owner: str, *, now: datetime, ttl: float) -> None:
        """Stamp `name` as alive until `now + ttl`, whoever stamped it before."""
        expires = now + timedelta(seconds=ttl)
        stmt = self.db.dialect_insert(_L).values(name=name, owner=owner, acquired_at=now, expires_at=expires)
        stmt = stmt.on_conflict_do_update(
            index_elements=[_L.c.name], set_={"owner": owner, "expires_at": expires}
        )
        async with self.db.session() as s:
            await s.execute(stmt)

    async def live(self, name: str, *, now: datetime) -> Lease | None:
        """Who holds or stamped `name`, if that has not expired yet."""
        async with self.db.read() as s:
            row = (await s.execute(sa.select(_L.c.owner, _L.c.expires_at).where(_L.c.name == name))).first()
        if row is None or row.expires_at is None or row.expires_at < now:
            return None
        return Lease(False, row.owner, row.expires_at)


async def _insert(
    s: AsyncSession, name: str, owner: str, now: datetime, expires: datetime, subject: str | None = None
) -> bool:
    """The first row for `name`; False when another process inserted it first (PostgreSQL; on
    SQLite the write transaction already excludes that)."""
    try:
        async with s.begin_nested():
            await s.execute(
                _L.insert().values(
                    name=name, owner=owner, acquired_at=now, expires_at=expires, subject=subject
                )
            )
    except IntegrityError:
        return False
    return True
