"""Discord adapter (discord.py 2.x).

- `await client.start(token)` in a task (never `run`), so it shares the event loop with Telegram and
  the scheduler.
- Messages: DMs always; in servers only when the bot is mentioned or replied to (that is also exactly
  what Discord delivers content for without the privileged message-content intent). A thread is its
  own channel, so its chat key is simply its channel id.
- Slash commands: built from the bot's `CommandSpec`s (typed options, choices, subcommands,
  autocomplete answered from `completer`); an invocation comes back as the `InboundCommand.args`
  text a person would have typed (`args_text`). The payload is synced with a bulk PUT only when its
  hash differs from the one stored through the `kv_get`/`kv_set` pair (Discord limits command
  creates per day). Interactions are deferred at once (well inside 3 s); the gateway's first reply
  in that chat becomes the interaction's followup.
- Buttons: custom_id = "tb:" + our short id, on views we never register in memory. Any component
  interaction with that prefix is routed from `on_interaction`, so a button keeps working after a
  restart with no View objects to re-add (the same effect as persistent views / DynamicItem).
- `allowed_mentions` none everywhere, embeds (link previews) suppressed, 2000-character limit.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import logging
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import aiohttp
import discord
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

from adapters.base import (
    Button,
    ButtonPress,
    Card,
    ChatAdapter,
    ChatRef,
    DeliveryError,
    InboundCommand,
    InboundHandler,
    InboundMessage,
    MessageGone,
    SentMessage,
    TextFormat,
    UserRef,
)
from adapters.breaker import DISCORD_LIMIT, BudgetExhausted, InvalidRequestBudget
from adapters.commandspec import (
    MAX_COMPLETIONS,
    CommandSpec,
    CompletionQuery,
    OptionSpec,
    Words,
    args_text,
)
from adapters.common import InflightTracker, KeyedLocks, call_handler
from adapters.logsafe import install_redaction
from adapters.notices import DEFAULT_NOTICES, notice
from adapters.render import RenderedPart, render_parts, to_discord
from adapters.send_retry import RetryPolicy, with_retries
from agent.errors import ConfigError
from agent.text import scrub
from agent.texts import Catalogue

log = logging.getLogger(__name__)

PLATFORM = "discord"
CUSTOM_ID_PREFIX = "tb:"
INTERACTION_TOKEN_TTL = 14 * 60  # Discord: 15 min; keep a margin
KV_COMMANDS_HASH = "discord.commands_hash"
_STYLES = {
    "primary": discord.ButtonStyle.primary,
    "secondary": discord.ButtonStyle.secondary,
    "success": discord.ButtonStyle.success,
    "danger": discord.ButtonStyle.danger,
}
_OPTION_TYPES = {"string": 3, "integer": 4, "choice": 3}
_SUBCOMMAND = 1

#: one attempt of a REST call may take this long (discord.py itself waits out 500/502/504 for up to
#: ~25 s inside an attempt); aiohttp's own default is five minutes
ATTEMPT_TIMEOUT = 40.0

# an interaction must be acknowledged within 3 s: one quick retry, then answer another way
_ACK_POLICY = RetryPolicy(attempts=2, base_delay=0.3, budget_s=1.0)

KvGet = Callable[[str], Any]  # sync or async, returns str | None


def _transient(exc: BaseException) -> bool:
    """A 5xx discord.py gave up on, a network error or a timeout: worth another attempt."""
    if isinstance(exc, discord.DiscordServerError):
        return True
    if isinstance(exc, discord.HTTPException):
        return False
    return isinstance(exc, OSError | TimeoutError | aiohttp.ClientError)


def _not_sent(exc: BaseException) -> bool:
    """Failed before the request reached Discord (safe to repeat a call Discord cannot dedupe)."""
    return isinstance(exc, aiohttp.ClientConnectorError | BudgetExhausted)


KvSet = Callable[[str, str], Any]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _SendOnlyView(discord.ui.View):
    """Carries our buttons to Discord but is never stored by discord.py: presses are routed by
    custom_id prefix in `on_interaction`, which keeps working across restarts."""

    def __init__(self, buttons: Sequence[Sequence[Button]]):
        super().__init__(timeout=None)
        for row_i, row in enumerate(buttons[:5]):
            for b in row[:5]:
                self.add_item(
                    discord.ui.Button(
                        label=b.label[:80],
                        custom_id=CUSTOM_ID_PREFIX + b.data,
                        style=_STYLES[b.style],
                        row=row_i,
                    )
                )

    def is_dispatchable(self) -> bool:
        return False


#: Discord's embed limits (title, description, field name, field value, footer, all together)
_EMBED_LIMITS = (256, 4096, 256, 1024, 2048, 6000)


def _embed(card: Card) -> discord.Embed | None:
    """The card as an embed, or None if it does not fit Discord's limits."""
    title_max, desc_max, name_max, value_max, footer_max, total_max = _EMBED_LIMITS
    desc = to_discord(card.body)
    fields = [(name, to_discord(value)) for name, value in card.fields]
    total = len(card.title) + len(desc) + len(card.footer) + sum(len(n) + len(v) for n, v in fields)
    if (
        len(card.title) > title_max
        or len(desc) > desc_max
        or len(card.footer) > footer_max
        or len(fields) > 25
        or any(len(n) > name_max or len(v) > value_max for n, v in fields)
        or total > total_max
    ):
        return None
    embed = discord.Embed(title=card.title, description=desc)
    for name, value in fields:
        embed.add_field(name=name, value=value, inline=False)
    if card.footer:
        embed.set_footer(text=card.footer)
    return embed


@dataclass
class _Pending:
    interaction: discord.Interaction
    created: float


class _Client(discord.Client):
    def __init__(self, adapter: DiscordAdapter, **kw: Any):
        super().__init__(**kw)
        self.adapter = adapter

    async def on_ready(self) -> None:
        self.adapter._on_ready()

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter._on_message(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.adapter._on_interaction(interaction)


class DiscordAdapter(ChatAdapter):
    platform = PLATFORM
    max_message_len = 2000
    edit_interval = 1.0
    group_edit_interval = 1.0
    typing_interval = 8.0  # Discord's indicator lasts ~10 s

    def __init__(
        self,
        token: str,
        *,
        kv_get: KvGet,
        kv_set: KvSet,
        message_content_intent: bool = False,
        command_guild_ids: Sequence[int] = (),
        ready_timeout: float = 30.0,
        guild_ready_timeout: float = 2.0,
        handler_timeout: float = 60.0,
        stop_grace_s: float = 10.0,
        interaction_grace_s: float = 600.0,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        notices: Catalogue | None = None,
        invalid_request_limit: int = DISCORD_LIMIT // 10,
        send_budget_s: float = 45.0,
        attempt_timeout: float = ATTEMPT_TIMEOUT,
        connector: aiohttp.BaseConnector | None = None,
        api_base_url: str | None = None,
        gateway_url: str | None = None,
    ):
        """`connector` is discord.py's own per-client option (aiohttp's connector): how this
        client reaches Discord, e.g. a test fake answering for discord.com. Without one,
        `api_base_url` / `gateway_url` make one (`connector_to`)."""
        if not token:
            raise ValueError("Discord token is empty")
        self._token = token
        self._kv_get, self._kv_set = kv_get, kv_set
        self._guild_ids = tuple(command_guild_ids)
        self._ready_timeout = ready_timeout
        self._handler_timeout = handler_timeout
        self._stop_grace_s = stop_grace_s
        self._interaction_grace_s = interaction_grace_s
        self._sleep = sleep
        self._clock = clock
        self._notices = notices or DEFAULT_NOTICES
        self.send_budget_s = send_budget_s
        self._retry = RetryPolicy(budget_s=send_budget_s)
        self._attempt_timeout = attempt_timeout
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = message_content_intent
        # with the (privileged) content intent, unaddressed server messages are forwarded with
        # addressed=False so the gateway can read answers to a pending question in that channel
        self._content_intent = message_content_intent
        # stop sending well before Discord's invalid-request ban
        self.budget = InvalidRequestBudget(invalid_request_limit, clock=clock)
        if connector is None and (api_base_url or gateway_url):
            connector = connector_to(api_base_url, gateway_url)
        self.client = _Client(
            self,
            http_trace=self.budget.trace_config(),
            intents=intents,
            allowed_mentions=discord.AllowedMentions.none(),
            guild_ready_timeout=guild_ready_timeout,  # how long READY waits for GUILD_CREATEs
            **({"connector": connector} if connector is not None else {}),
        )
        self._handler: InboundHandler | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._locks = KeyedLocks()
        self._inflight = InflightTracker()
        self._pending: dict[str, _Pending] = {}  # chat key -> deferred slash command awaiting a reply
        self._webhook_msgs: dict[str, tuple[discord.WebhookMessage, float]] = {}
        self._bg: set[asyncio.Task[None]] = set()
        self._commands: list[dict[str, Any]] | None = None
        self._command_names: set[str] = set()
        self._specs: dict[str, CommandSpec] = {}
        self._locales: dict[str, str] = {}  # user id -> last seen client locale
        self._stopping = False
        self.synced = 0  # how many times we actually PUT the command set (tests)

    # ---------------------------------------------------------------- lifecycle

    async def start(self, handler: InboundHandler) -> None:
        install_redaction(self._token)
        self._handler = handler
        self._stopping = False
        self._ready.clear()
        self._task = asyncio.create_task(self.client.start(self._token), name="discord-client")
        ready = asyncio.ensure_future(self._ready.wait())
        done, _ = await asyncio.wait(
            {ready, self._task}, timeout=self._ready_timeout, return_when="FIRST_COMPLETED"
        )
        if self._task in done:
            ready.cancel()
            exc = self._task.exception()
            self._task = None
            await self.client.close()  # release the HTTP session opened by login
            if isinstance(exc, discord.PrivilegedIntentsRequired):
                raise ConfigError("Discord refused the message content intent", key="discord.message_content_intent",
                                  fix="enable 'Message Content Intent' for the bot in the Discord developer portal, "
                                  "or turn the option off") from exc  # fmt: skip
            if isinstance(exc, discord.LoginFailure):
                raise ConfigError("Discord rejected the bot token", key="discord.token",
                                  fix="check DISCORD_BOT_TOKEN / [discord] token") from exc  # fmt: skip
            raise DeliveryError(f"discord client stopped during start: {exc!r}") from exc
        if not done:
            ready.cancel()
            log.warning(
                "discord: not ready after %.0f s; still connecting in the background", self._ready_timeout
            )
            return
        if self._commands is not None:
            await self._sync_commands()

    def _on_ready(self) -> None:
        u = self.client.user
        if u is not None:
            self.me = UserRef(PLATFORM, str(u.id), u.display_name, None, u.name, True)
        log.info("discord adapter ready as %s", u)
        self._ready.set()

    async def stop(self) -> None:
        if self._task is None:
            return
        self._stopping = True
        await self._inflight.wait_idle(self._stop_grace_s)
        for t in list(self._bg):
            t.cancel()
        try:
            await self.client.close()
        except Exception:
            log.exception("discord close")
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 5)
            except BaseException:  # noqa: BLE001 — stopping: whatever the gateway task ended with, it is cancelled and stop goes on
                self._task.cancel()
        self._task = None
        log.info("discord adapter stopped")

    def _spawn(self, coro: Awaitable[Any]) -> None:
        t = asyncio.ensure_future(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)

    # ---------------------------------------------------------------- inbound

    def _chat_of(self, channel_id: int, guild_id: int | None, title: str = "") -> ChatRef:
        return ChatRef(PLATFORM, str(channel_id), None, guild_id is not None, title)

    def _user_of(self, user: discord.abc.User) -> UserRef:
        return UserRef(
            PLATFORM, str(user.id), user.display_name, self._locales.get(str(user.id)), user.name, user.bot
        )

    async def _deliver(self, key: str, event: Any) -> None:
        assert self._handler is not None
        with self._inflight:
            async with self._locks.hold(key):
                await call_handler(self._handler, event, timeout=self._handler_timeout, platform=PLATFORM)

    async def _on_message(self, message: discord.Message) -> None:
        try:
            me = self.client.user
            if self._stopping or me is None or message.author.bot or message.author.id == me.id:
                return
            if message.type not in (discord.MessageType.default, discord.MessageType.reply):
                return
            ch = message.channel
            guild_id = getattr(ch, "guild_id", None) or (message.guild.id if message.guild else None)
            dm = guild_id is None
            reply_to_bot = False
            ref = message.reference
            if ref is not None and isinstance(ref.resolved, discord.Message):
                reply_to_bot = ref.resolved.author.id == me.id
            mentioned = any(u.id == me.id for u in message.mentions)
            addressed = dm or mentioned or reply_to_bot
            if not addressed and not self._content_intent:
                return  # without the content intent Discord sends us no text for these anyway
            text = scrub(message.content)  # no lone surrogates past this point
            for token in (f"<@{me.id}>", f"<@!{me.id}>"):
                text = text.replace(token, "")
            text = text.strip()
            chat = self._chat_of(ch.id, guild_id, getattr(ch, "name", "") or "")
            user = self._user_of(message.author)
            if not text:
                if addressed and (message.attachments or message.stickers):
                    await self._safe_send(chat, notice(self._notices, "unsupported", user.language_code))
                return
            sent_at = message.created_at.astimezone(UTC)
            if text.startswith("/"):
                name, _, args = text[1:].partition(" ")
                name = name.lower()
                if addressed and name and (not self._command_names or name in self._command_names):
                    event: Any = InboundCommand(
                        str(message.id), chat, user, name, args.strip(), sent_at, str(message.id)
                    )
                    await self._deliver(chat.key, event)
                    return
            event = InboundMessage(
                update_id=str(message.id),
                chat=chat,
                user=user,
                text=text,
                reply_to_message_id=str(ref.message_id) if ref and ref.message_id else None,
                sent_at=sent_at,
                message_id=str(message.id),
                addressed=addressed,
                reply_to_bot=reply_to_bot,
            )
            await self._deliver(chat.key, event)
        except Exception:
            log.exception("discord: failed to handle message %s", getattr(message, "id", "?"))

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        try:
            if self._stopping:
                return
            self._locales[str(interaction.user.id)] = str(interaction.locale)
            if interaction.type == discord.InteractionType.application_command:
                await self._on_command(interaction)
            elif interaction.type == discord.InteractionType.autocomplete:
                await self._on_autocomplete(interaction)
            elif interaction.type == discord.InteractionType.component:
                data: Any = interaction.data or {}
                custom_id = str(data.get("custom_id", ""))
                if custom_id.startswith(CUSTOM_ID_PREFIX):
                    await self._on_button(interaction, custom_id[len(CUSTOM_ID_PREFIX) :])
        except Exception:
            log.exception("discord: failed to handle interaction %s", interaction.id)

    async def _safe_send(self, chat: ChatRef, text: str) -> None:
        try:
            await self.send_text(chat, text, format="plain")
        except DeliveryError as e:
            log.info("discord: notice not delivered: %s", e)

    def _interaction_chat(self, interaction: discord.Interaction) -> ChatRef:
        ch = interaction.channel
        title = getattr(ch, "name", "") or ""
        return self._chat_of(interaction.channel_id or 0, interaction.guild_id, title)

    async def _on_command(self, interaction: discord.Interaction) -> None:
        # acknowledge first: Discord allows 3 s; the real answer arrives as a followup
        await interaction.response.defer(thinking=True)
        data: Any = interaction.data or {}
        name = str(data.get("name", "")).lower()
        sub, values = _invoked(data.get("options") or [])
        args = scrub(args_text(self._specs.get(name), sub, values))
        chat = self._interaction_chat(interaction)
        self._pending[chat.key] = _Pending(interaction, self._clock())

        async def private_reply(text: str, _alert: bool = False) -> None:
            # the "thinking…" placeholder is public: remove it and answer only this user
            p = self._pending.get(chat.key)
            if p is not None and p.interaction is interaction:
                del self._pending[chat.key]
            try:
                await interaction.delete_original_response()
            except discord.HTTPException as e:
                log.debug("discord: could not delete deferred response: %s", e)
            try:
                await interaction.followup.send(
                    text[:2000], ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
                )
            except discord.HTTPException as e:
                log.info("discord: private answer failed: %s", e)

        event = InboundCommand(
            update_id=str(interaction.id),
            chat=chat,
            user=self._user_of(interaction.user),
            name=name,
            args=args.strip(),
            sent_at=interaction.created_at.astimezone(UTC),
            private_reply=private_reply,
        )
        await self._deliver(chat.key, event)
        self._spawn(self._expire_pending(chat.key, interaction))

    async def _on_autocomplete(self, interaction: discord.Interaction) -> None:
        """Suggestions while the user types an option with an autocomplete source (type 4 → 8).
        Always answered (an empty list at worst), so the client never shows a failed load."""
        data: Any = interaction.data or {}
        spec = self._specs.get(str(data.get("name", "")).lower())
        sub, focused = _focused(data.get("options") or [])
        found = spec.subcommand(sub) if spec is not None and sub is not None else None
        specs = found.options if found is not None else (spec.options if spec is not None else ())
        option = next((o for o in specs if focused is not None and o.name == focused.get("name")), None)
        values: list[str] = []
        if option is not None and option.autocomplete and self.completer is not None and focused is not None:
            lang = "zh" if str(interaction.locale).lower().startswith("zh") else "en"
            query = CompletionQuery(option.autocomplete, scrub(str(focused.get("value", ""))), lang)
            try:
                values = await self.completer(query)
            except Exception:  # a failing source answers nothing rather than leave the client waiting
                log.exception("discord: completion for /%s failed", data.get("name"))
        choices = [discord.app_commands.Choice(name=v[:100], value=v[:100]) for v in values[:MAX_COMPLETIONS]]
        await interaction.response.autocomplete(choices)

    async def _expire_pending(self, key: str, interaction: discord.Interaction) -> None:
        """If the gateway never replied, remove the "is thinking…" placeholder before the token dies."""
        await self._sleep(self._interaction_grace_s)
        p = self._pending.get(key)
        if p is not None and p.interaction is interaction:
            del self._pending[key]
            try:
                await interaction.delete_original_response()
            except discord.HTTPException as e:
                log.debug("discord: could not delete deferred response: %s", e)

    async def _on_button(self, interaction: discord.Interaction, data: str) -> None:
        chat = self._interaction_chat(interaction)
        try:  # "deferred update": no visible change, stops the spinner
            # discord.py would wait out a 5xx here for up to 25 s; the token allows 3
            await self._reliably("defer", interaction.response.defer, policy=_ACK_POLICY, attempt_timeout=2.5)
            deferred = True
        except (discord.HTTPException, OSError, TimeoutError, aiohttp.ClientError) as e:
            # The press is still decided (the gateway gets it); only the quiet acknowledgement
            # is lost, and an answer goes by another way (below).
            log.warning("discord: could not acknowledge button press %s: %r", interaction.id, e)
            deferred = False
        replied = False

        async def ack(text: str = "", alert: bool = False) -> None:
            nonlocal replied
            if replied or not text:
                replied = replied or bool(text)
                return
            replied = True
            none = discord.AllowedMentions.none()
            try:
                if deferred:
                    await interaction.followup.send(text[:2000], ephemeral=True, allowed_mentions=none)
                elif not interaction.response.is_done():
                    await interaction.response.send_message(
                        text[:2000], ephemeral=True, allowed_mentions=none
                    )
                else:
                    raise discord.ClientException("interaction already answered")
                return
            except (discord.HTTPException, discord.ClientException) as e:
                log.info("discord: ephemeral answer failed: %s", e)
            if not deferred:  # the interaction cannot answer any more: say it in the chat
                await self._safe_send(chat, text)

        press = ButtonPress(
            update_id=str(interaction.id),
            chat=chat,
            user=self._user_of(interaction.user),
            data=data,
            message_id=str(interaction.message.id) if interaction.message else None,
            ack=ack,
            sent_at=interaction.created_at.astimezone(UTC),
        )
        await self._deliver(chat.key, press)

    # ---------------------------------------------------------------- outbound

    def _target(self, chat: ChatRef) -> discord.PartialMessageable:
        return self.client.get_partial_messageable(int(chat.thread_id or chat.chat_id))

    def _render(self, text: str, fmt: TextFormat) -> list[RenderedPart]:
        text = self._outgoing(text)
        if fmt == "plain":
            text = discord.utils.escape_markdown(text)
            return render_parts(text, limit=self.max_message_len, fmt="markdown", render=to_discord,
                                visible=lambda s: s)  # fmt: skip
        return render_parts(text, limit=self.max_message_len, fmt="markdown", render=to_discord)

    async def _reliably(
        self,
        what: str,
        call: Callable[[], Awaitable[Any]],
        *,
        idempotent: bool = True,
        policy: RetryPolicy | None = None,
        attempt_timeout: float | None = None,
    ) -> Any:
        """`call()` with retries on transient failures; `idempotent=False`: only when it surely
        never reached Discord (a followup has no nonce Discord could deduplicate)."""

        async def attempt() -> Any:
            async with asyncio.timeout(attempt_timeout or self._attempt_timeout):
                return await call()

        return await with_retries(
            attempt,
            retryable=_transient if idempotent else _not_sent,
            what=f"discord {what}",
            policy=policy or self._retry,
            sleep=self._sleep,
            clock=self._clock,
        )

    def _take_pending(self, chat: ChatRef) -> discord.Interaction | None:
        p = self._pending.pop(chat.key, None)
        if p is None or self._clock() - p.created > INTERACTION_TOKEN_TTL:
            return None
        return p.interaction

    async def send_text(
        self,
        chat: ChatRef,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        reply_to: str | None = None,
        format: TextFormat = "markdown",
    ) -> SentMessage:
        parts = self._render(text, format)
        if not parts:
            raise ValueError("refusing to send an empty message")
        ids: list[str] = []
        none = discord.AllowedMentions.none()
        try:
            for i, part in enumerate(parts):
                content = part.formatted or part.plain
                kw: dict[str, Any] = {"allowed_mentions": none, "suppress_embeds": True}
                if buttons and i == len(parts) - 1:
                    kw["view"] = _SendOnlyView(buttons)
                ids.append(await self._post(chat, content, kw, first=i == 0, reply_to=reply_to))
        except DeliveryError:
            raise
        except (discord.HTTPException, OSError, TimeoutError, aiohttp.ClientError) as e:
            raise DeliveryError(f"discord send failed: {e!r}") from e
        return SentMessage(chat, ids[-1], tuple(ids[:-1]))

    async def send_card(
        self, chat: ChatRef, card: Card, *, buttons: Sequence[Sequence[Button]] | None = None
    ) -> SentMessage:
        """An embed: the card's title, its body as the description, its fields, its footer. A card
        over Discord's embed limits is sent as text instead (the same words)."""
        embed = _embed(card)
        if embed is None:
            return await self.send_text(chat, card.text, buttons=buttons)
        kw: dict[str, Any] = {"allowed_mentions": discord.AllowedMentions.none(), "embed": embed}
        if buttons:
            kw["view"] = _SendOnlyView(buttons)
        try:
            return SentMessage(chat, await self._post(chat, None, kw, first=True, reply_to=None))
        except DeliveryError:
            raise
        except (discord.HTTPException, OSError, TimeoutError, aiohttp.ClientError) as e:
            raise DeliveryError(f"discord send failed: {e!r}") from e

    async def _post(
        self, chat: ChatRef, content: str | None, kw: dict[str, Any], *, first: bool, reply_to: str | None
    ) -> str:
        """Post one message (as the follow-up of a pending slash command when it is the first);
        returns its id."""
        interaction = self._take_pending(chat) if first else None
        if interaction is not None:
            send = functools.partial(
                interaction.followup.send, content or discord.utils.MISSING, wait=True, **kw
            )
            wm = await self._reliably("followup", send, idempotent=False)
            self._webhook_msgs[str(wm.id)] = (wm, self._clock())
            return str(wm.id)
        if first and reply_to:
            kw["reference"] = discord.MessageReference(
                message_id=int(reply_to),
                channel_id=int(chat.thread_id or chat.chat_id),
                fail_if_not_exists=False,
            )
        # one nonce for every attempt: Discord returns the message it already created
        # with it (enforce_nonce), so a retry after a lost answer never posts twice
        kw["nonce"] = secrets.randbits(63)
        m = await self._reliably("send", functools.partial(self._target(chat).send, content, **kw))
        return str(m.id)

    async def edit_text(
        self,
        msg: SentMessage,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        format: TextFormat = "markdown",
    ) -> None:
        parts = self._render(text, format)
        if not parts:
            raise ValueError("refusing to edit to an empty message")
        content = parts[0].formatted or parts[0].plain
        if len(parts) > 1:
            content = content[: self.max_message_len - 2].rstrip() + "\n…"
        view = _SendOnlyView(buttons) if buttons else None
        kw: dict[str, Any] = {
            "content": content,
            "embeds": [],  # an edited card becomes text
            "view": view,
            "allowed_mentions": discord.AllowedMentions.none(),
        }
        try:
            hooked = self._webhook_msgs.get(msg.message_id)
            if hooked is not None and self._clock() - hooked[1] < INTERACTION_TOKEN_TTL:
                await self._reliably("edit", lambda: hooked[0].edit(**kw))
                return
            self._webhook_msgs.pop(msg.message_id, None)
            partial = self._target(msg.chat).get_partial_message(int(msg.message_id))
            await self._reliably("edit", lambda: partial.edit(**kw))
        except DeliveryError:
            raise
        except discord.NotFound as e:
            raise MessageGone(f"discord: {e}") from e
        except discord.Forbidden as e:
            raise MessageGone(f"discord: {e}") from e
        except (discord.HTTPException, OSError, TimeoutError, aiohttp.ClientError) as e:
            raise DeliveryError(f"discord edit failed: {e!r}") from e

    async def send_typing(self, chat: ChatRef) -> None:
        try:
            await self._target(chat).typing()
        except Exception as e:  # noqa: BLE001 — cosmetic: a typing indicator must never break a turn
            log.debug("discord typing failed: %s", e)

    async def send_image(self, chat: ChatRef, path: str | Path, caption: str = "") -> SentMessage:
        content = None
        if caption.strip():
            parts = self._render(caption, "markdown")
            content = parts[0].formatted if parts else None
        target, nonce = self._target(chat), secrets.randbits(63)

        async def send() -> discord.Message:
            # a fresh File each attempt (a sent one is consumed); one nonce: never posted twice
            return await target.send(content, file=discord.File(str(path)), nonce=nonce,
                                     allowed_mentions=discord.AllowedMentions.none())  # fmt: skip

        try:
            m = await self._reliably("send image", send)
        except (discord.HTTPException, OSError, TimeoutError, aiohttp.ClientError) as e:
            raise DeliveryError(f"discord send image failed: {e!r}") from e
        return SentMessage(chat, str(m.id))

    # ---------------------------------------------------------------- slash commands

    async def set_commands(self, commands: Sequence[CommandSpec]) -> None:
        self._commands = command_payload(commands)
        self._command_names = {c["name"] for c in self._commands}
        self._specs = {c.name.lower()[:32]: c for c in commands}
        if self._ready.is_set():
            await self._sync_commands()

    async def _sync_commands(self) -> None:
        assert self._commands is not None
        app_id = self.client.application_id
        if app_id is None:
            return
        digest = hashlib.sha256(json.dumps(self._commands, sort_keys=True).encode()).hexdigest()
        scope = ",".join(map(str, self._guild_ids)) or "global"
        key = f"{KV_COMMANDS_HASH}:{app_id}:{scope}"
        if await _maybe_await(self._kv_get(key)) == digest:
            log.info("discord: slash commands unchanged; not syncing")
            return
        http = self.client.http
        if self._guild_ids:
            for gid in self._guild_ids:
                await http.bulk_upsert_guild_commands(app_id, gid, self._commands)
        else:
            await http.bulk_upsert_global_commands(app_id, self._commands)
        self.synced += 1
        await _maybe_await(self._kv_set(key, digest))
        log.info("discord: synced %d slash commands (%s)", len(self._commands), scope)


class _Redirect(AbstractResolver):
    """Resolves Discord's host names to other addresses (host and port); every other host as
    aiohttp would."""

    def __init__(self, routes: Mapping[str, tuple[str, int]]):
        self._routes = dict(routes)
        self._default = aiohttp.DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        target = self._routes.get(host)
        if target is None:
            return await self._default.resolve(host, port, family)
        found = await self._default.resolve(target[0], target[1], family)
        return [{**item, "hostname": host, "port": target[1]} for item in found]

    async def close(self) -> None:
        await self._default.close()


def connector_to(api_base_url: str | None, gateway_url: str | None) -> aiohttp.TCPConnector:
    """discord.py's per-client `connector` reaching Discord's REST API at `api_base_url`'s host and
    port and its gateway at `gateway_url`'s (a test fake or a relay). discord.py builds its URLs
    from Discord's own host names, so the other end speaks TLS for them: its certificate must be
    valid for discord.com / gateway.discord.gg and trusted (e.g. through SSL_CERT_FILE)."""
    routes: dict[str, tuple[str, int]] = {}
    for name, value, host, scheme in (
        ("api_base_url", api_base_url, "discord.com", "https"),
        ("gateway_url", gateway_url, "gateway.discord.gg", "wss"),
    ):
        if not value:
            continue
        url = yarl.URL(value)
        if url.scheme != scheme or not url.host:
            raise ConfigError(
                f"[discord] {name} must be a {scheme}:// address, not {value!r}",
                key=f"discord.{name}",
                fix=f"discord.py talks TLS to {host}: give the {scheme}:// address that answers for it",
            )
        routes[host] = (url.host, url.port or 443)
    return aiohttp.TCPConnector(resolver=_Redirect(routes))


def _invoked(options: list[Any]) -> tuple[str | None, dict[str, object]]:
    """An invocation's options → (subcommand or None, option values by name)."""
    if options and options[0].get("type") == _SUBCOMMAND:
        return str(options[0].get("name", "")), _invoked(options[0].get("options") or [])[1]
    return None, {str(o.get("name", "")): o.get("value", "") for o in options if "value" in o}


def _focused(options: list[Any]) -> tuple[str | None, dict[str, Any] | None]:
    """An autocomplete request's options → (subcommand or None, the option being typed)."""
    if options and options[0].get("type") == _SUBCOMMAND:
        return str(options[0].get("name", "")), _focused(options[0].get("options") or [])[1]
    return None, next((o for o in options if o.get("focused")), None)


def _localized(words: Words) -> dict[str, str]:
    """Simplified Chinese under zh-CN; zh-TW only when a Traditional text exists."""
    loc = {"zh-CN": words.zh[:100]}
    if words.zh_tw:
        loc["zh-TW"] = words.zh_tw[:100]
    return loc


def _option(o: OptionSpec) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": _OPTION_TYPES[o.kind],
        "name": o.name[:32],
        "description": o.description.en[:100],
        "description_localizations": _localized(o.description),
        "required": o.required,
    }
    if o.choices:
        item["choices"] = [
            {"name": c.label.en[:100], "name_localizations": _localized(c.label), "value": c.value}
            for c in o.choices
        ]
    elif o.autocomplete:
        item["autocomplete"] = True
    return item


def _options(options: Sequence[OptionSpec]) -> list[dict[str, Any]]:
    # Discord wants required options first
    return [_option(o) for o in sorted(options, key=lambda o: not o.required)]


def command_payload(commands: Sequence[CommandSpec]) -> list[dict[str, Any]]:
    """The exact JSON we PUT to Discord: typed options, choices, subcommands and autocomplete, with
    Chinese descriptions under zh-CN (and zh-TW only where a Traditional text exists)."""
    out = []
    for c in commands:
        item: dict[str, Any] = {
            "name": c.name.lower()[:32],
            "description": (c.description.en or c.name)[:100],
            "description_localizations": _localized(c.description),
            "type": 1,
            "contexts": [0, 1],  # servers and DMs with the bot
            "integration_types": [0],
        }
        if c.subcommands:
            item["options"] = [
                {
                    "type": _SUBCOMMAND,
                    "name": sc.name[:32],
                    "description": sc.description.en[:100],
                    "description_localizations": _localized(sc.description),
                    "options": _options(sc.options),
                }
                for sc in c.subcommands
            ]
        elif c.options:
            item["options"] = _options(c.options)
        out.append(item)
    return out
