"""Wiring of the chat front door for `tapebot run` and the console: the gateway, the Telegram and
Discord adapters built from settings, the command menus, the messages a restart takes up, and the
sweeper that expires approvals and questions (and forgets old update ids).

Built from `ChatParts`, which the composition root (bot/app.py) hands over: nothing here reads
the App."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bot.access import PlatformAccess, terminal_access
from bot.commands.context import CommandServices
from bot.gateway import Gateway
from bot.waiting import CardFacts

if TYPE_CHECKING:
    from adapters.base import ChatAdapter
    from agent import AgentRuntime
    from bot.commands import Command
    from bot.replicas import ChatLeases
    from config.settings import Settings
    from memory.stores import SqlStore

log = logging.getLogger("tapebot.chat")

EXPIRY_SWEEP_SECONDS = 30.0
# Update ids are kept this long for de-duplication (Telegram holds unconfirmed updates for 24 h;
# Discord does not redeliver), then forgotten, hourly; a message still waiting is kept.
UPDATE_IDS_KEPT = timedelta(days=7)
PRUNE_EVERY_SWEEPS = 120


@dataclass(frozen=True, slots=True)
class ChatParts:
    """What the chats are built from, handed over by the composition root once the runtime
    exists: the runtime and store, what commands use (`services`, one command per skill), what
    an approval card shows beyond its record, the stable prompt part (the skills list), the
    outbound redaction (no configured secret reaches a chat), adapters' extra constructor
    arguments per platform (tests pass fake transports), and the App's lifecycle hooks."""

    settings: Settings
    runtime: AgentRuntime
    store: SqlStore
    services: CommandServices
    spawn: Callable[[Coroutine[Any, Any, Any], str], object]  # a tracked task, cancelled on stop
    on_stop: Callable[[Callable[[], Any]], None]  # run on stop, in reverse order of registration
    skill_commands: Sequence[Command] = ()
    card_facts: CardFacts = field(default_factory=CardFacts)
    system_dynamic: str = ""
    redact: Callable[[str], str] | None = None
    adapter_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    opening: Callable[[], None] = lambda: None  # just before the chats start receiving
    replica_id: str = ""  # this process among the replicas on the database ("": a fresh one)
    brief_line: Callable[[str], Awaitable[str]] | None = None  # a brief's market-data line, by language


def build_gateway(parts: ChatParts, *, terminal: bool = False) -> Gateway:
    """The gateway over the configured platforms' allow-lists (`terminal`: the console's too)."""
    s = parts.settings
    access = {
        "telegram": PlatformAccess(
            {str(u) for u in s.telegram.allowed_users},
            {str(u) for u in s.telegram.admins},
            s.telegram.group_sessions,
            s.telegram.max_backlog_age_s,
        ),
        "discord": PlatformAccess(
            {str(u) for u in s.discord.allowed_users},
            {str(u) for u in s.discord.admins},
            s.discord.group_sessions,
            s.discord.max_backlog_age_s,
        ),
    }
    if terminal:
        access["terminal"] = terminal_access(s.agent.shutdown_grace_s)
    return Gateway(
        parts.runtime,
        parts.store,
        access,
        services=parts.services,
        skill_commands=parts.skill_commands,
        card_facts=parts.card_facts,
        system_dynamic=parts.system_dynamic,
        chat_lock=_chat_lock(parts),
        brief_line=parts.brief_line,
    )


def _chat_lock(parts: ChatParts) -> ChatLeases | None:
    """Replicas share a PostgreSQL database; on SQLite the bot is one process and its lanes suffice."""
    from bot.replicas import ChatLeases, new_replica_id
    from memory.coordination import Leases
    from memory.db import Database
    from memory.replica_inbox import ReplicaInbox

    db = parts.store.db
    if db.is_sqlite:
        return None
    inbox = ReplicaInbox(db, parts.replica_id or new_replica_id())
    beat = Database(db.url, migrate=False)
    return ChatLeases(Leases(db), inbox, ttl=parts.settings.chat_lease_s, heartbeat_db=beat)


async def publish_commands(gateway: Gateway, adapter: ChatAdapter) -> None:
    """Give an adapter (Telegram, Discord, the terminal) the command definitions and the source
    of their suggestions: its menu, slash commands or completion come from them."""
    from bot.commands.complete import completer

    adapter.completer = completer(lambda: gateway.command_services.models)
    await adapter.set_commands(gateway.commands.specs())


def build_adapters(parts: ChatParts) -> list[ChatAdapter]:
    s = parts.settings
    env = s.environ
    adapters: list[ChatAdapter] = []
    if s.telegram.enabled:
        from adapters.telegram import TelegramAdapter, WebhookConfig
        from bot.replicas import TelegramReplicas, new_replica_id
        from memory.coordination import Leases

        token = s.telegram.resolved_token(env) or ""
        webhook = None
        if s.telegram.mode == "webhook":
            webhook = WebhookConfig(
                url=s.telegram.webhook_url or "",
                secret_token=s.telegram.resolved_webhook_secret(env) or None,
                listen=s.telegram.webhook_listen,
                port=s.telegram.webhook_port,
            )
        adapters.append(
            TelegramAdapter(
                token,
                api_base_url=s.telegram.api_base_url,
                webhook=webhook,
                max_backlog_age_s=s.telegram.max_backlog_age_s,
                replicas=TelegramReplicas(
                    Leases(parts.store.db),
                    parts.replica_id or new_replica_id(),
                    ttl=s.telegram.replica_lease_s,
                ),
                **parts.adapter_options.get("telegram", {}),
            )
        )
        if not s.telegram.allowed_users:
            log.warning(
                "telegram: no allowed_users configured — the bot will answer nobody "
                "([telegram] allowed_users, or pairing = true for a one-time code)"
            )
    if s.discord.enabled:
        from adapters.discord import DiscordAdapter

        adapters.append(
            DiscordAdapter(
                s.discord.resolved_token(env) or "",
                kv_get=parts.store.kv_get,
                kv_set=parts.store.kv_set,
                message_content_intent=s.discord.message_content_intent,
                command_guild_ids=list(s.discord.guild_ids),
                api_base_url=s.discord.api_base_url,
                gateway_url=s.discord.gateway_url,
                **parts.adapter_options.get("discord", {}),
            )
        )
        if not s.discord.allowed_users:
            log.warning(
                "discord: no allowed_users configured — the bot will answer nobody "
                "([discord] allowed_users, or pairing = true for a one-time code)"
            )
    return adapters


async def _sweep_expired(gateway: Gateway, store: SqlStore) -> None:
    sweeps = 0
    while True:
        await asyncio.sleep(EXPIRY_SWEEP_SECONDS)
        try:
            await gateway.waiting.expire_due()
        except Exception:
            log.exception("expiry sweep failed")
        sweeps += 1
        if sweeps % PRUNE_EVERY_SWEEPS == 0:
            try:
                await store.prune_processed_updates(UPDATE_IDS_KEPT)
            except Exception:
                log.exception("pruning old update ids failed")


async def open_chats(
    gateway: Gateway, parts: ChatParts, given: list[ChatAdapter] | None = None
) -> list[ChatAdapter]:
    """Start the configured chat adapters, or the `given` ones (the console), on the gateway;
    take up what a stop or a crash left; returns the started adapters (stopped by `on_stop`)."""
    s = parts.settings
    adapters = build_adapters(parts) if given is None else given
    for adapter in adapters:  # no configured secret or key shape reaches a chat
        adapter.outbound = parts.redact
    if not adapters:
        log.warning(
            "no chat platform is enabled: set TELEGRAM_BOT_TOKEN or DISCORD_BOT_TOKEN (or [telegram]/[discord] in config.toml)"
        )
    await gateway.access.restore_paired()
    for platform, wanted in (
        ("telegram", s.telegram.pairing),
        ("discord", s.discord.pairing),
    ):
        if wanted and any(a.platform == platform for a in adapters):
            code = gateway.access.enable_pairing(platform)
            # the operator's terminal only; never sent anywhere
            print(
                f"tapebot: {platform} pairing code {code} — send `/pair {code}` to the bot in a DM",
                file=sys.stderr,
            )
    parts.opening()  # e.g. the heap is settled now, not while the first message waits
    gateway.recovering()  # updates that arrive before the recovery below has run wait for it
    started: list[ChatAdapter] = []
    for adapter in adapters:
        gateway.output.attach(adapter)
        await publish_commands(gateway, adapter)
        await adapter.start(gateway.handle)
        started.append(adapter)
        log.info("%s adapter started", adapter.platform)

    async def stop_chat() -> None:
        # Turns first, while the adapters can still send: new work is refused meanwhile (messages
        # are recorded for the restart); then stop receiving (unhandled updates stay unacknowledged).
        await gateway.drain(s.agent.shutdown_grace_s)
        for adapter in reversed(started):
            with contextlib.suppress(Exception):
                await adapter.stop()

    if gateway.replicas is not None:
        parts.on_stop(gateway.replicas.stop)  # after the chats have stopped: leases expire now
    parts.on_stop(stop_chat)
    try:
        await gateway.waiting.expire_due()
        await parts.store.prune_processed_updates(UPDATE_IDS_KEPT)
        await gateway.recovery.resume_interrupted()  # turns a crash or a stop left running
        await gateway.recovery.take_up_received()  # what a crash or a stop left queued (behind those turns)
    finally:
        gateway.recovered()
    parts.spawn(_sweep_expired(gateway, parts.store), "expiry-sweeper")
    if gateway.replicas is not None:  # heartbeat, and takeover of a dead replica's chats
        gateway.replicas.start(gateway.take_over)
    return started
