"""One person, one account: identities on Telegram, Discord and the terminal linked to share one
paper book, portfolio, memory, standing approvals and alerts (each chat keeps its conversation).

A link takes both sides' consent. The first identity asks for a one-time code (`issue`: 8
characters, 10 minutes, only its hash stored, a newer code replaces the older); the second shows
the code (`peek`: who it would be linked with) and confirms (`redeem`: the code is used up). Wrong
codes are counted per identity: after `MAX_FAILURES` within `FAILURE_WINDOW` even a right one is
refused until the window has passed, so a code cannot be guessed.

The account is the book of the identity that gave the code: before any link an identity's book is
keyed by its plain user id (what the bot has always used), so the account is that key and nothing
is copied. Leaving (`unlink`): the account keeps the book for those still linked; the identity that
leaves goes back to the book it had before it joined — or, when the shared book began as its own
and others stay, starts a fresh one (keyed by its identity).

Access is not decided here: who may use the bot, approve or administer is still decided per
platform identity (bot/access.py); a link only chooses which book a turn acts on.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent.errors import LinkCodeExpired, LinkCodeInvalid, LinkNotAllowed, LinkRateLimited, NotLinked
from agent.ports import AccountDirectory, Clock, SystemClock
from memory.db import Database
from memory.models import CHATS, IDENTITY_LINKS, LINK_CODES, LINK_FAILURES, SESSIONS

# no 0/O, 1/I/L: read aloud or copied between apps without doubt
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = timedelta(minutes=10)
MAX_FAILURES = 5
FAILURE_WINDOW = timedelta(minutes=10)


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(text: str) -> str:
    """What a person typed, as the code: case, spaces and dashes do not matter."""
    return "".join(ch for ch in text.upper() if ch not in " -_\t")


def code_hash(code: str) -> str:
    return hashlib.sha256(normalize_code(code).encode()).hexdigest()


def identity_key(platform: str, user_id: str) -> str:
    return f"{platform}:{user_id}"


def legacy_book(identity: str) -> str:
    """The book an identity had before any link: its plain user id."""
    return identity.partition(":")[2] or identity


@dataclass(frozen=True, slots=True)
class Identity:
    """A person on one platform. `name` is only for showing ("Alice")."""

    platform: str
    user_id: str
    name: str = ""

    @property
    def key(self) -> str:
        return identity_key(self.platform, self.user_id)


@dataclass(frozen=True, slots=True)
class LinkOffer:
    """What a code would link the redeeming identity with."""

    identity: str  # "telegram:111"
    name: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LinkedIdentity:
    identity: str
    name: str
    linked_at: datetime


class LinkStore(AccountDirectory):
    def __init__(self, db: Database, clock: Clock | None = None):
        self.db = db
        self.clock = clock or SystemClock()

    # ---- codes -------------------------------------------------------------------------------
    async def issue(self, who: Identity) -> tuple[str, datetime]:
        """A new one-time code for `who` (its earlier unused codes stop working)."""
        code, now = new_code(), self.clock.now()
        expires = now + CODE_TTL

        def write(c: Connection) -> None:
            c.execute(sa.delete(LINK_CODES).where(LINK_CODES.c.identity == who.key))
            c.execute(sa.delete(LINK_CODES).where(LINK_CODES.c.expires_at < now))
            c.execute(
                sa.insert(LINK_CODES).values(
                    code_hash=code_hash(code), identity=who.key, name=who.name[:255], created_at=now,
                    expires_at=expires,
                )
            )  # fmt: skip

        await self.db.run(write, write=True)
        return code, expires

    async def peek(self, code: str, joiner: Identity) -> LinkOffer:
        """Who `code` would link `joiner` with; the code stays valid. Raises a LinkError (a wrong
        code counts against `joiner`)."""
        return await self._check(code, joiner, consume=False)

    async def redeem(self, code: str, joiner: Identity) -> str:
        """Use `code` up and link `joiner` to its issuer's account; returns the account."""
        offer = await self._check(code, joiner, consume=True)
        return await self._account_after_link(offer, joiner)

    async def _check(self, code: str, joiner: Identity, *, consume: bool) -> LinkOffer:
        now, digest = self.clock.now(), code_hash(code)

        def read(c: Connection) -> tuple[int, datetime | None, Any]:
            since = now - FAILURE_WINDOW
            failures = c.execute(
                sa.select(LINK_FAILURES.c.at)
                .where(LINK_FAILURES.c.identity == joiner.key, LINK_FAILURES.c.at > since)
                .order_by(LINK_FAILURES.c.at)
            ).all()
            row = c.execute(sa.select(LINK_CODES).where(LINK_CODES.c.code_hash == digest)).first()
            first = failures[0][0] if failures else None
            return len(failures), first, row

        failures, first, row = await self.db.run(read)
        if failures >= MAX_FAILURES:
            assert first is not None
            raise LinkRateLimited(
                "too many wrong link codes", retry_after=(first + FAILURE_WINDOW - now).total_seconds()
            )
        if row is None:
            await self._failed(joiner, now)
            raise LinkCodeInvalid("no such link code")
        if row.expires_at <= now:
            raise LinkCodeExpired("the link code has expired")
        if row.identity == joiner.key:
            raise LinkNotAllowed("self")
        offer = LinkOffer(row.identity, row.name, row.expires_at)
        await self._may_join(offer, joiner)
        if consume:

            def use(c: Connection) -> int:
                return c.execute(sa.delete(LINK_CODES).where(LINK_CODES.c.code_hash == digest)).rowcount

            if await self.db.run(use, write=True) != 1:  # another redeem won the race
                raise LinkCodeInvalid("the link code was used just now")
        return offer

    async def _failed(self, joiner: Identity, now: datetime) -> None:
        def write(c: Connection) -> None:
            c.execute(sa.delete(LINK_FAILURES).where(LINK_FAILURES.c.at <= now - FAILURE_WINDOW))
            c.execute(sa.insert(LINK_FAILURES).values(identity=joiner.key, at=now))

        await self.db.run(write, write=True)

    async def _may_join(self, offer: LinkOffer, joiner: Identity) -> None:
        issuer_account = await self.account_of(offer.identity)
        mine = await self.account_of(joiner.key)
        if mine and issuer_account == mine:
            raise LinkNotAllowed("already")
        if mine and await self.members(joiner.key):
            raise LinkNotAllowed("other_account")

    async def _account_after_link(self, offer: LinkOffer, joiner: Identity) -> str:
        now = self.clock.now()

        def write(c: Connection) -> str:
            row = c.execute(
                sa.select(IDENTITY_LINKS.c.account).where(IDENTITY_LINKS.c.identity == offer.identity)
            ).first()
            account = row[0] if row is not None else legacy_book(offer.identity)
            if row is None:
                c.execute(
                    sa.insert(IDENTITY_LINKS).values(
                        identity=offer.identity, account=account, name=offer.name[:255], linked_at=now
                    )
                )
            c.execute(sa.delete(IDENTITY_LINKS).where(IDENTITY_LINKS.c.identity == joiner.key))
            c.execute(
                sa.insert(IDENTITY_LINKS).values(
                    identity=joiner.key, account=account, name=joiner.name[:255], linked_at=now
                )
            )
            return str(account)

        return await self.db.run(write, write=True)

    # ---- links -------------------------------------------------------------------------------
    async def account_of(self, identity: str) -> str:
        """The account `identity` acts for; "" when it never linked (its plain user id then)."""

        def read(c: Connection) -> str:
            row = c.execute(
                sa.select(IDENTITY_LINKS.c.account).where(IDENTITY_LINKS.c.identity == identity)
            ).first()
            return "" if row is None else str(row[0])

        return await self.db.run(read)

    async def members(self, identity: str) -> list[LinkedIdentity]:
        """The other identities sharing `identity`'s account."""

        def read(c: Connection) -> list[LinkedIdentity]:
            mine = (
                sa.select(IDENTITY_LINKS.c.account)
                .where(IDENTITY_LINKS.c.identity == identity)
                .scalar_subquery()
            )
            rows = c.execute(
                sa.select(IDENTITY_LINKS)
                .where(IDENTITY_LINKS.c.account == mine, IDENTITY_LINKS.c.identity != identity)
                .order_by(IDENTITY_LINKS.c.linked_at, IDENTITY_LINKS.c.identity)
            ).all()
            return [LinkedIdentity(r.identity, r.name, r.linked_at) for r in rows]

        return await self.db.run(read)

    async def unlink(self, identity: str) -> None:
        """`identity` leaves its account (see the module's docstring for which book it keeps).
        Raises NotLinked when it shares its account with nobody."""
        if not await self.members(identity):
            raise NotLinked("not linked")

        def write(c: Connection) -> None:
            account = c.execute(
                sa.select(IDENTITY_LINKS.c.account).where(IDENTITY_LINKS.c.identity == identity)
            ).scalar_one()
            if account == legacy_book(identity):  # the shared book began as this one's: others keep it
                c.execute(
                    sa.update(IDENTITY_LINKS)
                    .where(IDENTITY_LINKS.c.identity == identity)
                    .values(account=identity, linked_at=self.clock.now())
                )
            else:
                c.execute(sa.delete(IDENTITY_LINKS).where(IDENTITY_LINKS.c.identity == identity))

        await self.db.run(write, write=True)

    async def session_account(self, session_id: str) -> str:
        """The account a session's memories belong to: its user's, when that user is linked and
        the session is not a group's; "" otherwise."""

        def read(c: Connection) -> str:
            row = c.execute(
                sa.select(SESSIONS.c.user_id, SESSIONS.c.chat_key, CHATS.c.is_group)
                .select_from(SESSIONS.outerjoin(CHATS, CHATS.c.key == SESSIONS.c.chat_key))
                .where(SESSIONS.c.id == session_id)
            ).first()
            if row is None or not row.user_id or row.is_group:
                return ""
            identity = identity_key(str(row.chat_key).partition(":")[0], str(row.user_id))
            found = c.execute(
                sa.select(IDENTITY_LINKS.c.account).where(IDENTITY_LINKS.c.identity == identity)
            ).first()
            return "" if found is None else str(found[0])

        return await self.db.run(read)
