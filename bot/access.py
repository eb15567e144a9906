"""Who may talk to the bot, and who decides in a chat: the platforms' allow-lists and admins, the
approvers of a chat's approvals, the commands only admins run in groups, pairing (a one-time code
from the operator's terminal admits the first user), and the answer strangers get (deny by
default: a DM stranger is told once, a group stranger never)."""

from __future__ import annotations

import contextlib
import hmac
import logging
import secrets
from dataclasses import dataclass, field
from typing import Protocol

from adapters.base import ButtonPress, ChatAdapter, ChatRef, DeliveryError, Inbound, InboundCommand, UserRef
from bot.i18n import pick_language, t

log = logging.getLogger(__name__)

PAIRING_MAX_ATTEMPTS = 5


class PairedStore(Protocol):
    """The `paired_users` table (memory.chat_tables)."""

    async def paired_users(self, platform: str) -> list[str]: ...

    async def add_paired_user(self, platform: str, user_id: str) -> None: ...


@dataclass
class PlatformAccess:
    allowed_users: set[str] = field(default_factory=set)
    admins: set[str] = field(default_factory=set)
    group_sessions: str = "per_group"
    max_backlog_age_s: float = 600.0  # older messages left from before a restart are not run


#: The local user of `tapebot chat`: allowed and admin; `granted by terminal` in /rules.
TERMINAL_USER = "terminal"


def terminal_access(shutdown_grace_s: float) -> PlatformAccess:
    """The terminal's allow-list: its one local user, who is also its admin. What a stop left is
    taken up for as long as a stop may take on top of the usual backlog age."""
    return PlatformAccess({TERMINAL_USER}, {TERMINAL_USER}, "per_group", 600.0 + shutdown_grace_s)


@dataclass
class _Pairing:
    code: str
    wrong: int = 0


class Access:
    """The allow-lists of every platform (`platforms`, shared with whoever built them)."""

    def __init__(self, platforms: dict[str, PlatformAccess], store: PairedStore):
        self.platforms = platforms
        self._store = store
        self._pairing: dict[str, _Pairing] = {}
        self._denied_notice: set[str] = set()

    def of(self, platform: str) -> PlatformAccess:
        return self.platforms.get(platform) or PlatformAccess()

    def allowed(self, user: UserRef) -> bool:
        acc = self.platforms.get(user.platform)
        return acc is not None and user.user_id in acc.allowed_users

    def is_admin(self, chat: ChatRef, user: UserRef) -> bool:
        """In a DM the user decides for themself; in a group only the platform's admins do."""
        if not chat.is_group:
            return True
        return user.user_id in self.of(chat.platform).admins

    def approvers_for(self, chat: ChatRef, user: UserRef) -> tuple[str, ...]:
        if chat.is_group:
            return tuple(sorted(self.of(chat.platform).admins))
        return (user.user_id,)

    # ---- pairing -----------------------------------------------------------------------------
    def enable_pairing(self, platform: str) -> str:
        code = f"{secrets.randbelow(10**6):06d}"
        self._pairing[platform] = _Pairing(code)
        return code

    async def restore_paired(self) -> None:
        for platform, acc in self.platforms.items():
            for uid in await self._store.paired_users(platform):
                acc.allowed_users.add(uid)
                acc.admins.add(uid)

    async def try_pairing(self, adapter: ChatAdapter, inbound: Inbound) -> bool:
        """`/pair <code>` in a DM, while pairing is on: the sender becomes allowed and admin. The
        code works once; five wrong codes turn pairing off."""
        entry = self._pairing.get(inbound.chat.platform)
        if entry is None or not isinstance(inbound, InboundCommand) or inbound.name != "pair":
            return False
        if inbound.chat.is_group:
            return False
        if not hmac.compare_digest(inbound.args.strip(), entry.code):
            entry.wrong += 1
            if entry.wrong >= PAIRING_MAX_ATTEMPTS:
                self._pairing.pop(inbound.chat.platform, None)
                log.warning(
                    "pairing for %s disabled after %d wrong codes", inbound.chat.platform, entry.wrong
                )
            return False
        self._pairing.pop(inbound.chat.platform, None)  # one use only
        uid = inbound.user.user_id
        acc = self.platforms.setdefault(inbound.chat.platform, PlatformAccess())
        acc.allowed_users.add(uid)
        acc.admins.add(uid)
        await self._store.add_paired_user(inbound.chat.platform, uid)
        log.warning("paired %s user %s: allowed and admin from now on", inbound.chat.platform, uid)
        lang = pick_language(inbound.user.language_code)
        with contextlib.suppress(DeliveryError):
            await adapter.send_text(inbound.chat, t(lang, "paired"), format="plain")
        return True

    async def deny(self, adapter: ChatAdapter, inbound: Inbound) -> None:
        log.info("denied %s user %s", inbound.chat.platform, inbound.user.user_id)
        lang = pick_language(inbound.user.language_code)
        if isinstance(inbound, ButtonPress):
            with contextlib.suppress(Exception):
                await inbound.ack(t(lang, "approval_not_allowed"), True)
            return
        if isinstance(inbound, InboundCommand) and inbound.private_reply is not None:
            # a slash command waits for an answer; only the stranger sees it (also in a server)
            with contextlib.suppress(Exception):
                await inbound.private_reply(t(lang, "not_allowed", user_id=inbound.user.user_id), False)
            return
        if inbound.chat.is_group or inbound.user.key in self._denied_notice:
            return  # don't talk to strangers in groups; tell a DM stranger once
        self._denied_notice.add(inbound.user.key)
        with contextlib.suppress(DeliveryError):
            await adapter.send_text(
                inbound.chat, t(lang, "not_allowed", user_id=inbound.user.user_id), format="plain"
            )
