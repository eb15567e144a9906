"""Replicas of `tapebot run` on one database act as one bot: this replica's identity, and the
Telegram adapter's `ReplicaGate` over database leases (memory/coordination.py).

- At most one replica polls Telegram: the poller lease ("telegram:poller"), renewed every
  `ttl / 3`; a standby takes it over once the holder stops renewing (a crash, a kill -9). A holder
  that ran on this machine, in this PID namespace, and whose process is gone is dead for sure: its
  lease is taken at once, so a single bot restarted after a kill -9 does not wait out the lease.
- A chat's turns run one at a time across replicas (PostgreSQL): its lane holds the chat's lease
  ("chat:" and a hash of the chat key) while it runs; another replica's lane for the same chat
  waits for it (`ChatLeases`).
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
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from memory.coordination import Leases

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
    return "chat:" + hashlib.sha256(chat_key.encode()).hexdigest()[:40]


class ChatLeases:
    """`bot.lanes.ChatLock` across replicas: a chat's lease, taken before its lane runs and renewed
    every `ttl / 3` while it does. A replica that finds it held retries (backing off up to
    `max_wait_step` seconds) until the holder releases it or stops renewing it."""

    def __init__(
        self,
        leases: Leases,
        owner: str,
        *,
        ttl: float = 30.0,
        max_wait_step: float = 0.5,
        clock: Callable[[], datetime] = _utcnow,
    ):
        self.leases = leases
        self.owner = owner
        self.ttl = ttl
        self.max_wait_step = max_wait_step
        self.clock = clock

    @contextlib.asynccontextmanager
    async def hold(self, chat_key: str) -> AsyncIterator[None]:
        name = chat_lease_name(chat_key)
        await self._take(name, chat_key)
        renewing = asyncio.create_task(self._renew(name, chat_key), name=f"lease:{chat_key}")
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            try:
                await asyncio.shield(self.leases.release(name, self.owner, now=self.clock()))
            except Exception:
                log.warning(
                    "could not release the lease of %s; it expires by itself", chat_key, exc_info=True
                )

    async def held_elsewhere(self, chat_key: str) -> str | None:
        live = await self.leases.live(chat_lease_name(chat_key), now=self.clock())
        if live is None or live.owner == self.owner or died_here(live.owner):
            return None
        return live.owner

    async def _take(self, name: str, chat_key: str) -> None:
        step = 0.02
        while True:
            now = self.clock()
            try:
                lease = await self.leases.take(name, self.owner, now=now, ttl=self.ttl)
                if lease.held or (
                    died_here(lease.owner)
                    and await self.leases.take_from(name, lease.owner, self.owner, now=now, ttl=self.ttl)
                ):
                    return
            except Exception:
                log.warning("could not take the lease of %s; retrying", chat_key, exc_info=True)
            await asyncio.sleep(step)
            step = min(step * 2, self.max_wait_step)

    async def _renew(self, name: str, chat_key: str) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                lease = await self.leases.take(name, self.owner, now=self.clock(), ttl=self.ttl)
            except Exception:
                log.warning("could not renew the lease of %s; retrying", chat_key, exc_info=True)
                continue
            if not lease.held:
                log.error("the lease of %s went to %s while this replica ran its turn", chat_key, lease.owner)
