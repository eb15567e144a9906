"""Replicas of `tapebot run` on one database act as one bot: this replica's identity, and the
Telegram adapter's `ReplicaGate` over database leases (memory/coordination.py).

- At most one replica polls Telegram: the poller lease ("telegram:poller"), renewed every
  `ttl / 3`; a standby takes it over once the holder stops renewing (a crash, a kill -9). A holder
  that ran on this machine, in this PID namespace, and whose process is gone is dead for sure: its
  lease is taken at once, so a single bot restarted after a kill -9 does not wait out the lease.
- A chat's turns run one at a time across replicas (PostgreSQL), in arrival order: the chat is run
  by the replica that holds its lease ("chat:" and a hash of the chat key); every message is
  stored and filed under its chat first, and the holder takes them up oldest first
  (`ChatLeases`, memory/replica_inbox.py, which says why a lease row). A replica that dies stops
  renewing its leases; once they expire a survivor takes its chats over, without a restart.
- Webhook replicas announce themselves ("telegram:webhook"); while one does, a replica started in
  polling mode neither polls nor calls deleteWebhook, which would silence the whole deployment."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from datetime import UTC, datetime, timedelta

from agent.ports import Receipt
from memory.coordination import Leases
from memory.db import Database
from memory.replica_inbox import CHAT, ReplicaInbox, Waiting

log = logging.getLogger(__name__)

POLLER = "telegram:poller"
WEBHOOK = "telegram:webhook"


def new_replica_id() -> str:
    """Unique per process and readable in a log line: host, PID namespace, pid, a random suffix."""
    return f"{_here()}:{os.getpid()}:{secrets.token_hex(3)}"


def _here() -> str:
    try:  # containers on one host may share a host name, never a PID namespace
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        ns = 0
    return f"{socket.gethostname()}:{ns}"


def died_here(owner: str) -> bool:
    """True when `owner` (a replica id) ran in this host's PID namespace and its process is gone.
    Anything else (another machine, another namespace, a live or reused pid) is not known dead."""
    where, _, rest = owner.rpartition(":")[0].rpartition(":")
    if where != _here() or not rest.isdigit() or _here().endswith(":0"):
        return False
    try:
        os.kill(int(rest), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by another user
        return False
    return False


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TelegramReplicas:
    """`adapters.replicas.ReplicaGate` for one replica, on the leases of the shared database."""

    def __init__(self, leases: Leases, owner: str, *, ttl: float, clock: Callable[[], datetime] = _utcnow):
        self.leases = leases
        self.owner = owner
        self.ttl = ttl
        self.renew_interval = ttl / 3
        self.clock = clock

    async def webhook_deployment(self) -> str | None:
        live = await self.leases.live(WEBHOOK, now=self.clock())
        if live is None or live.expires_at is None:
            return None
        return f"replica {live.owner} serves the webhook, announced until {live.expires_at:%H:%M:%S} UTC"

    async def take_poller(self) -> str | None:
        now = self.clock()
        lease = await self.leases.take(POLLER, self.owner, now=now, ttl=self.ttl)
        if lease.held:
            return None
        if died_here(lease.owner) and await self.leases.take_from(
            POLLER, lease.owner, self.owner, now=now, ttl=self.ttl
        ):
            return None
        return f"replica {lease.owner}"

    async def release_poller(self) -> None:
        await self.leases.release(POLLER, self.owner, now=self.clock())

    async def announce_webhook(self) -> None:
        await self.leases.mark(WEBHOOK, self.owner, now=self.clock(), ttl=self.ttl)


def chat_lease_name(chat_key: str) -> str:
    """A chat key is up to 255 characters; a lease name at most 64."""
    return CHAT + hashlib.sha256(chat_key.encode()).hexdigest()[:40]


class ChatLeases:
    """This replica's side of the chats' leases (`bot.lanes.ChatLock`): which chats it runs, which
    of a chat's stored messages it has taken into the lane, and the heartbeat and takeover loops.

    A chat is taken when a message for it arrives here (or a tap, a command, a brief, a resumed
    turn needs its lane) and kept while its lane has work; `let_go` gives it back once the lane is
    idle — refused while a message waits that this replica has not taken (memory/replica_inbox.py),
    so whoever holds the chat takes up every message, in arrival order."""

    def __init__(
        self,
        leases: Leases,
        inbox: ReplicaInbox,
        *,
        ttl: float = 15.0,
        max_wait_step: float = 0.25,
        clock: Callable[[], datetime] = _utcnow,
        heartbeat_db: Database | None = None,
    ):
        self.leases = leases
        self.inbox = inbox
        # the heartbeat and the sweep on connections of their own: behind a burst of messages the
        # shared pool's queue can outlast the lease, and a live replica's chats would be taken
        self._beat_db = heartbeat_db
        self._beat = inbox if heartbeat_db is None else ReplicaInbox(heartbeat_db, inbox.owner)
        self.owner = inbox.owner
        self.ttl = ttl
        self.max_wait_step = max_wait_step
        self.clock = clock
        self.held: set[str] = set()  # chat keys whose lease this replica holds
        self._taken: dict[str, set[int]] = {}  # chat key -> seqs of its messages taken here
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._orphans: set[str] = set()  # taken from a dead replica: its turn not resumed yet

    def lock(self, chat_key: str) -> asyncio.Lock:
        """Taking up a chat's messages and letting it go never interleave in this replica."""
        return self._locks.setdefault(chat_key, asyncio.Lock())

    async def take(self, chat_key: str) -> bool:
        """Take (or keep) the chat's lease. False: another live replica holds it. A lease taken
        from a replica that died or stopped (its row is left, expired; a replica that lets a
        chat go deletes it) is noted: its interrupted turn is resumed first (`taken_over`)."""
        name, now = chat_lease_name(chat_key), self.clock()
        before = (
            None if chat_key in self.held else await self.leases.live(name, now=now - timedelta(days=3650))
        )
        lease = await self.leases.take(name, self.owner, now=now, ttl=self.ttl, subject=chat_key)
        if lease.held or (
            died_here(lease.owner)
            and await self.leases.take_from(name, lease.owner, self.owner, now=now, ttl=self.ttl)
        ):
            # checked after the awaits: two tasks of this replica may take the chat at once, and
            # only the first resets what it has taken (else a message would be taken up twice)
            if chat_key not in self.held:
                self._taken.pop(chat_key, None)
                if before is not None and before.owner != self.owner:
                    self._orphans.add(chat_key)
            self.held.add(chat_key)
            return True
        self.forget(chat_key)
        return False

    def taken_over(self, chat_key: str) -> bool:
        """Once: the chat was taken from a replica that died or stopped while holding it."""
        if chat_key in self._orphans:
            self._orphans.discard(chat_key)
            return True
        return False

    async def wait_take(self, chat_key: str, timeout: float | None = None) -> bool:
        """Take the chat's lease, waiting (backing off up to `max_wait_step`) while another replica
        holds it; False after `timeout` seconds (None: however long it takes)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        step = 0.02
        while True:
            try:
                if await self.take(chat_key):
                    return True
            except Exception:
                log.warning("could not take the lease of %s; retrying", chat_key, exc_info=True)
            if deadline is not None and loop.time() >= deadline:
                return False
            await asyncio.sleep(step)
            step = min(step * 2, self.max_wait_step)

    @contextlib.asynccontextmanager
    async def hold(self, chat_key: str) -> AsyncIterator[None]:
        """The lane's lock: held (taken, waited for) before it runs. It is not given back when the
        lane's work ends: the router lets the chat go once nothing waits (`let_go`)."""
        await self.wait_take(chat_key)
        yield

    async def untaken(self, chat_key: str) -> list[Waiting]:
        """The chat's waiting messages this replica has not taken yet, oldest first; now taken."""
        taken = self._taken.setdefault(chat_key, set())
        fresh = [w for w in await self.inbox.waiting(chat_key) if w.seq not in taken]
        taken.update(w.seq for w in fresh)
        return fresh

    async def let_go(self, chat_key: str, parked: Collection[Receipt] = ()) -> bool:
        """Give the chat's lease back unless a message waits that this replica has not taken.
        `parked`: the messages the idle lane holds for a decision."""
        taken = self._taken.get(chat_key, set())
        if not await self.inbox.let_go(chat_lease_name(chat_key), chat_key, taken, parked):
            return False
        self.forget(chat_key)
        return True

    async def give_back(self, chat_key: str) -> None:
        """Expire the chat's lease now, whatever waits: a chat this replica cannot run (its
        platform is not enabled here) is left to one that can."""
        await self.leases.release(chat_lease_name(chat_key), self.owner, now=self.clock())
        self.forget(chat_key)

    def forget(self, chat_key: str) -> None:
        self.held.discard(chat_key)
        self._taken.pop(chat_key, None)
        self._orphans.discard(chat_key)

    # ---- loops -------------------------------------------------------------------------------
    def start(self, take_over: Callable[[str], Awaitable[None]]) -> None:
        """The heartbeat (renews this replica's chat leases every `ttl / 3`) and the sweep
        (every `ttl / 3`, takes over the chats of a replica that stopped renewing)."""
        self._tasks = [
            asyncio.create_task(self._heartbeat(), name="chat-lease-heartbeat"),
            asyncio.create_task(self._sweep(take_over), name="chat-lease-sweep"),
        ]

    async def stop(self) -> None:
        """Stop renewing and expire this replica's chat leases now: a survivor takes its chats
        over at its next sweep instead of after the ttl."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):
            await self._beat.expire_mine(now=self.clock())
        if self._beat_db is not None:
            with contextlib.suppress(Exception):
                await self._beat_db.close()

    async def _heartbeat(self) -> None:
        if self._beat_db is not None:
            await self._beat_db.start()
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                await self._beat.renew_mine(now=self.clock(), ttl=self.ttl)
            except Exception:
                log.warning("could not renew this replica's chat leases; retrying", exc_info=True)

    async def _sweep(self, take_over: Callable[[str], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                orphans = await self._beat.orphaned_chats(now=self.clock(), stranded_after=self.ttl)
            except Exception:
                log.warning("could not look for chats a stopped replica left; retrying", exc_info=True)
                continue
            for key in orphans:
                try:
                    await take_over(key)
                except Exception:
                    log.exception("taking over chat %s failed; the next sweep retries", key)
