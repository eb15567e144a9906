"""Wiring of the chat front door for `tapebot run`: the gateway, the Telegram and Discord adapters
built from settings, the command menus, the messages a restart takes up, and the sweeper that
expires approvals and questions (and forgets old update ids)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from adapters.base import ChatAdapter
from agent.tools.workspace import LocalToolPolicy
from bot.access import PlatformAccess
from bot.cards import exec_note
from bot.gateway import Gateway

if TYPE_CHECKING:
    from adapters.base import ChatAdapter
    from bot.app import App
    from memory.stores import SqlStore

log = logging.getLogger("tapebot.chat")

EXPIRY_SWEEP_SECONDS = 30.0
# Update ids are kept this long for de-duplication (Telegram holds unconfirmed updates for 24 h;
# Discord does not redeliver), then forgotten, hourly; a message still waiting is kept.
UPDATE_IDS_KEPT = timedelta(days=7)
PRUNE_EVERY_SWEEPS = 120


def build_gateway(app: App) -> Gateway:
    s = app.settings
    assert app.runtime is not None and app.store is not None
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
    gateway = Gateway(
        app.runtime,
        app.store,
        access,
        models=app.model_ids(),
        default_model=app.default_model_id,
        context_window=app.context_window,
    )
    gateway.waiting.trade_facts = app.trade_facts
    policy = app.deps.maybe(LocalToolPolicy)
    if policy is not None:
        gateway.waiting.card_notes["exec_command"] = lambda lang: exec_note(policy, lang)
    gateway.system_dynamic = app.system_dynamic()
    install_commands(gateway, app)
    app.task_listeners.append(gateway.notices.notify_task)
    app.on_stop(app.task_manager.subscribe(gateway.notices.task_progress))
    return gateway


def install_commands(gateway: Gateway, app: App) -> None:
    """The services commands use, and one command per skill (a skill never shadows a built-in)."""
    from bot.commands.background import StatusExtras, skill_commands

    gateway.command_services = replace(
        gateway.command_services,
        memory=app.memory,
        tasks=app.task_manager,
        schedules=app.schedules,
        skills=app.skills,
        status_extra=StatusExtras(app.market, app.task_manager, app.schedules, app.mcp),
    )
    if app.skills is not None:
        for command in skill_commands(app.skills):
            gateway.commands.setdefault(command)


async def publish_commands(gateway: Gateway, adapter: ChatAdapter) -> None:
    """Give an adapter (Telegram, Discord, the terminal) the command definitions and the source
    of their suggestions: its menu, slash commands or completion come from them."""
    from bot.commands.complete import completer

    adapter.completer = completer(lambda: gateway.command_services.models)
    await adapter.set_commands(gateway.commands.specs())


def build_adapters(app: App) -> list[Any]:
    s = app.settings
    env = s.environ
    adapters: list[Any] = []
    assert app.store is not None
    if s.telegram.enabled:
        from config.imports import import_telegram

        import_telegram()  # without the extras tapebot does not use: ~16 MB less resident (issue 21)
        from adapters.telegram import TelegramAdapter, WebhookConfig

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
                **app.adapter_options.get("telegram", {}),
            )
        )
        if not s.telegram.allowed_users:
            log.warning(
                "telegram: no allowed_users configured — the bot will answer nobody "
                "([telegram] allowed_users, or pairing = true for a one-time code)"
            )
    if s.discord.enabled:
        from adapters.discord import DiscordAdapter

        if s.discord.api_base_url or s.discord.gateway_url:
            from adapters.discord import point_at

            point_at(s.discord.api_base_url, s.discord.gateway_url)
        adapters.append(
            DiscordAdapter(
                s.discord.resolved_token(env) or "",
                kv_get=app.store.kv_get,
                kv_set=app.store.kv_set,
                message_content_intent=s.discord.message_content_intent,
                command_guild_ids=list(s.discord.guild_ids),
                **app.adapter_options.get("discord", {}),
            )
        )
        if not s.discord.allowed_users:
            log.warning(
                "discord: no allowed_users configured — the bot will answer nobody "
                "([discord] allowed_users, or pairing = true for a one-time code)"
            )
    for adapter in adapters:  # no configured secret or key shape reaches a chat (C2)
        adapter.outbound = app.redactor.text
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


def s_pairing(app: App, platform: str) -> bool:
    return bool(getattr(app.settings, platform).pairing)


async def start_chat(app: App, given: list[ChatAdapter] | None = None) -> None:
    """The gateway with the configured chat adapters, or with `given` ones (the console)."""
    gateway = build_gateway(app)
    app.gateway = gateway
    adapters = build_adapters(app) if given is None else given
    for adapter in given or ():  # no configured secret or key shape reaches a chat (C2)
        adapter.outbound = app.redactor.text
    if not adapters:
        log.warning(
            "no chat platform is enabled: set TELEGRAM_BOT_TOKEN or DISCORD_BOT_TOKEN (or [telegram]/[discord] in config.toml)"
        )
    await gateway.access.restore_paired()
    for platform, wanted in (
        ("telegram", s_pairing(app, "telegram")),
        ("discord", s_pairing(app, "discord")),
    ):
        if wanted and any(a.platform == platform for a in adapters):
            code = gateway.access.enable_pairing(platform)
            # the operator's terminal only; never sent anywhere
            print(
                f"tapebot: {platform} pairing code {code} — send `/pair {code}` to the bot in a DM",
                file=sys.stderr,
            )
    app.opening()  # e.g. the heap is settled now, not while the first message waits (issue 21)
    for adapter in adapters:
        gateway.attach(adapter)
        await publish_commands(gateway, adapter)
        await adapter.start(gateway.handle)
        app.adapters.append(adapter)
        log.info("%s adapter started", adapter.platform)

    async def stop_chat() -> None:
        # Turns first, while the adapters can still send: new work is refused meanwhile (messages
        # are recorded for the restart); then stop receiving (unhandled updates stay unacknowledged).
        await gateway.drain(app.settings.agent.shutdown_grace_s)
        for adapter in reversed(app.adapters):
            with contextlib.suppress(Exception):
                await adapter.stop()

    app.on_stop(stop_chat)
    await gateway.waiting.expire_due()
    assert app.store is not None
    await app.store.prune_processed_updates(UPDATE_IDS_KEPT)
    await gateway.recovery.resume_interrupted()  # turns a crash or a stop left running
    await gateway.recovery.take_up_received()  # what a crash or a stop left queued (behind those turns)
    app.spawn(_sweep_expired(gateway, app.store), name="expiry-sweeper")
