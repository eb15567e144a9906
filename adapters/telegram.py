"""Telegram adapter (python-telegram-bot 22).

Receiving. PTB's `Updater` confirms updates as soon as they are queued and, on stop, calls
getUpdates once more to acknowledge everything it fetched — including updates nobody handled. We
therefore run our own long-polling loop: updates go to per-chat lanes (each chat in order, chats in
parallel) and a getUpdates only ever carries the offset that confirms the contiguous prefix already
handled. Polling does not wait for a slow handler: after at most `repoll_s` it fetches again (the
unconfirmed updates come back and are skipped; other chats' new ones are dispatched). On `stop()`
we never fetch again; we confirm exactly the contiguous prefix that was handled, so the rest is
redelivered on the next start. Raw JSON is parsed one update at a time (`telegram_wire`, which
reads only the fields we use), so a malformed update is logged and skipped instead of blocking the
queue. Webhook mode (aiohttp) is authenticated: without a configured secret the
adapter derives one from the bot token (so every replica has the same) and registers it with
setWebhook; a request without the secret header is answered 401, a wrong one 403 (constant-time
compare, the value never logged), and neither reaches the handler. 200 only after the handler accepted the update.

Replicas (given a `ReplicaGate`): in polling mode only the holder of the poller lease polls, and
none polls or calls deleteWebhook while a webhook replica announces itself; in webhook mode the
replica announces itself until it stops.

Sending. Markdown → allow-listed HTML, split at 4096 (UTF-16, after entity parsing), link previews
off, plain resend on "can't parse entities", flood control by `FloodLimiter` (429 → wait
retry_after, retry). Forum topics are separate chats (message_thread_id).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from telegram import BotCommand
from telegram.constants import ChatAction, MessageEntityType
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.ext import ApplicationBuilder, BaseRateLimiter, ExtBot
from telegram.request import BaseRequest

from adapters.base import (
    Button,
    ButtonPress,
    ChatAdapter,
    ChatRef,
    DeliveryError,
    DeliveryUncertain,
    Inbound,
    InboundCommand,
    InboundHandler,
    InboundMessage,
    MessageGone,
    SentMessage,
    TextFormat,
    UserRef,
)
from adapters.commandspec import CommandSpec
from adapters.common import InflightTracker, KeyedLocks, call_handler
from adapters.logsafe import install_redaction
from adapters.notices import DEFAULT_NOTICES, notice
from adapters.ratelimit import FloodLimiter, Sleep, retry_after_seconds
from adapters.render import (
    RenderedPart,
    html_visible_text,
    render_parts,
    split_chunks,
    to_telegram_html,
    utf16_len,
)
from adapters.replicas import ReplicaGate
from adapters.send_retry import RetryPolicy, with_retries
from adapters.telegram_wire import (
    PRIVATE,
    MalformedUpdate,
    WireCallback,
    WireMessage,
    WireUpdate,
    WireUser,
    parse_update,
)
from agent.errors import ConfigError
from agent.texts import Catalogue

log = logging.getLogger(__name__)

# A Bot API JSON object as received (one update): telegram_wire turns it into typed values.
WireObject = dict[str, Any]

PLATFORM = "telegram"
ALLOWED_UPDATES = ["message", "callback_query"]
_NO_PREVIEW = {"is_disabled": True}  # LinkPreviewOptions, as the Bot API takes it
CAPTION_LIMIT = 1024
#: a send or an edit may take this long before we give up on its answer: the transport's default
#: (5 s in httpx) would call a slow send failed although it landed, and a retry would repeat it
SEND_READ_TIMEOUT = 60.0
_NOT_SENT = ("httpx.ConnectError", "httpx.ConnectTimeout", "Pool timeout", "httpx.PoolTimeout")


# What setWebhook accepts as secret_token (Bot API): 1-256 characters, A-Z a-z 0-9 _ -.
_SECRET_SHAPE = re.compile(r"[A-Za-z0-9_-]{1,256}")
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass(frozen=True)
class WebhookConfig:
    url: str  # public HTTPS URL Telegram posts to (ends with `path`)
    # 1-256 chars [A-Za-z0-9_-]; checked on every request. None/empty: one is derived from the bot
    # token (HMAC), so every replica registers and accepts the same one without storing it.
    secret_token: str | None = None
    listen: str = "127.0.0.1"
    port: int = 8443
    path: str = "/telegram"
    max_connections: int = 40


def _surely_not_sent(exc: NetworkError) -> bool:
    """A connection that was never made (or no free connection): nothing reached Telegram."""
    return str(exc.message).startswith(_NOT_SENT) or type(exc.__cause__).__name__ in (
        "ConnectError", "ConnectTimeout", "PoolTimeout",
    )  # fmt: skip


def _status_error(exc: NetworkError) -> bool:
    """An error *answer* from the Bot API (5xx): PTB raises these without a transport cause."""
    if isinstance(exc, TimedOut) or exc.__cause__ is not None:
        return False
    return not str(exc.message).startswith(("httpx.", "Unknown error"))


def _retryable(exc: BaseException, *, idempotent: bool) -> bool:
    """Worth another attempt? Edits always are (a repeat is "not modified"); a send only when the
    first attempt surely did not land, or Telegram answered with a server error (5xx: a Bot API
    server that could not reach Telegram — the one ambiguous case we do repeat, as a lost answer
    or approval card is worse than a rare duplicate)."""
    if not isinstance(exc, NetworkError) or isinstance(exc, BadRequest):
        return False
    return idempotent or _surely_not_sent(exc) or _status_error(exc)


def _is_parse_error(exc: BadRequest) -> bool:
    m = exc.message.lower()
    return "parse entities" in m or "can't find end" in m or "unsupported start tag" in m


def _is_not_modified(exc: BadRequest) -> bool:
    return "not modified" in exc.message.lower()


def _is_gone(exc: BadRequest) -> bool:
    m = exc.message.lower()
    return "message to edit not found" in m or "message can't be edited" in m or "message_id_invalid" in m


class TelegramAdapter(ChatAdapter):
    platform = PLATFORM
    max_message_len = 4096
    edit_interval = 1.0
    group_edit_interval = 3.0

    def __init__(
        self,
        token: str,
        *,
        api_base_url: str = "https://api.telegram.org/bot",
        request: BaseRequest | None = None,
        get_updates_request: BaseRequest | None = None,
        webhook: WebhookConfig | None = None,
        poll_timeout: float = 25.0,
        max_backlog_age_s: float | None = 600.0,
        handler_timeout: float = 60.0,
        stop_grace_s: float = 10.0,
        repoll_s: float = 1.0,
        rate_limiter: BaseRateLimiter[int] | None = None,
        max_retries: int = 3,
        send_budget_s: float = 45.0,
        send_read_timeout: float = SEND_READ_TIMEOUT,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        notices: Catalogue | None = None,
        notify_stale: bool = True,
        replicas: ReplicaGate | None = None,
    ):
        if not token:
            raise ValueError("Telegram token is empty")
        self._token = token
        self._webhook = webhook
        self._replicas = replicas
        self._polling = False  # this replica holds the poller lease (always, without `replicas`)
        self._gate_checked = float("-inf")
        self._gate_said = ""  # the last standby reason logged (said once, not every renewal)
        self._announce_task: asyncio.Task[None] | None = None
        self._poll_timeout = poll_timeout
        self._max_backlog_age_s = max_backlog_age_s
        self._handler_timeout = handler_timeout
        self._stop_grace_s = stop_grace_s
        self._repoll_s = repoll_s
        self._sleep = sleep
        self._clock = clock
        self._notices = notices or DEFAULT_NOTICES
        self._notify_stale = notify_stale
        self.send_budget_s = send_budget_s
        self._retry = RetryPolicy(budget_s=send_budget_s)
        self._send_read_timeout = send_read_timeout
        self.limiter = rate_limiter or FloodLimiter(max_retries=max_retries, sleep=sleep)
        builder = (
            ApplicationBuilder()
            .token(token)
            .base_url(api_base_url)
            .rate_limiter(self.limiter)
            .updater(None)
            .job_queue(None)
        )
        if request is not None:
            builder = builder.request(request)
        if get_updates_request is not None:
            builder = builder.get_updates_request(get_updates_request)
        # The Application owns the bot's lifecycle (getMe, HTTP clients) and its rate limiter;
        # updates are parsed and dispatched here (telegram_wire), not by its handler machinery.
        self.app = builder.build()
        self._handler: InboundHandler | None = None
        self._locks = KeyedLocks()
        self._inflight = InflightTracker()
        self._stopping = asyncio.Event()
        self._poll_task: asyncio.Task[None] | None = None
        self._confirmed = 0  # highest offset Telegram has been told about
        self._handled = 0  # offset that would confirm exactly what we handled
        # polled updates: per-chat queues, each drained by a task of its own while it has work
        self._lanes: dict[str, deque[tuple[int, WireUpdate]]] = {}
        self._lane_tasks: set[asyncio.Task[None]] = set()
        self._unconfirmed: deque[int] = deque()  # dispatched update ids, oldest first
        self._done: set[int] = set()  # handled ids not yet at the front of `_unconfirmed`
        self._dispatched = -1  # highest update id handed to a lane
        self._all_handled = asyncio.Event()
        self._all_handled.set()
        self._runner: Any = None
        self._started = False
        self.dropped_stale = 0

    @property
    def bot(self) -> ExtBot[Any]:
        return self.app.bot

    # ---------------------------------------------------------------- lifecycle

    async def start(self, handler: InboundHandler) -> None:
        install_redaction(self._token)
        secret = ""
        if self._webhook:
            secret = _webhook_secret(self._webhook, self._token)
            install_redaction(secret)
        self._handler = handler
        self._stopping.clear()
        try:
            await self.app.initialize()  # getMe
        except BaseException as e:
            for req in getattr(self.bot, "_request", ()):  # close the HTTP clients initialize opened
                with contextlib.suppress(Exception):
                    await req.shutdown()
            if isinstance(e, InvalidToken):
                raise ConfigError("Telegram rejected the bot token", key="telegram.token",
                                  fix="check TELEGRAM_BOT_TOKEN / [telegram] token") from e  # fmt: skip
            raise
        u = self.bot.bot
        self.me = UserRef(PLATFORM, str(u.id), u.full_name, None, u.username, True)
        self._started = True
        if self._webhook:
            if self._replicas is not None:  # before setWebhook: no poller may delete it from now on
                await self._announce(self._replicas)
            await self._start_webhook(self._webhook, secret)
            if self._replicas is not None:
                self._announce_task = asyncio.create_task(self._announce_loop(), name="telegram-announce")
        else:
            if self._replicas is None:
                await self._take_poller_turn()
            self._poll_task = asyncio.create_task(self._poll_loop(), name="telegram-poll")
        log.info(
            "telegram adapter started as @%s (%s)", u.username, "webhook" if self._webhook else "polling"
        )

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._stopping.set()
        if self._announce_task is not None:
            self._announce_task.cancel()
            await asyncio.wait({self._announce_task}, timeout=1)
            self._announce_task = None
        if self._poll_task:
            self._poll_task.cancel()  # a long poll, a back-off sleep or a wait for the lanes
            await asyncio.wait({self._poll_task}, timeout=1)
            self._poll_task = None
            if self._lane_tasks:  # handlers already running may finish; nothing new starts
                _, busy = await asyncio.wait(set(self._lane_tasks), timeout=self._stop_grace_s)
                if busy:
                    log.warning(
                        "telegram: handlers still busy after %.0f s; stopping anyway", self._stop_grace_s
                    )
                    for task in busy:
                        task.cancel()
                    await asyncio.wait(busy, timeout=1)
            await self._confirm_handled()
            if self._replicas is not None and self._polling:
                self._polling = False
                try:
                    await self._replicas.release_poller()
                except Exception:
                    log.warning(
                        "telegram: could not release the poller lease; a standby takes over when it expires",
                        exc_info=True,
                    )
        if self._runner is not None:
            await self._inflight.wait_idle(self._stop_grace_s)
            await self._runner.cleanup()
            self._runner = None
        try:
            await self.app.shutdown()
        except Exception:
            log.exception("telegram shutdown")
        log.info("telegram adapter stopped")

    async def _confirm_handled(self) -> None:
        """Tell Telegram about exactly what we handled (never about fetched-but-unhandled updates)."""
        if self._handled > self._confirmed:
            try:
                await self._get_updates_raw({"offset": self._handled, "limit": 1, "timeout": 0}, 5.0)
                self._confirmed = self._handled
            except TelegramError as e:
                log.warning(
                    "telegram: could not confirm handled updates on stop (%s); they will be redelivered", e
                )

    # ---------------------------------------------------------------- polling

    async def _poll_loop(self) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            if not self._all_handled.is_set():
                # Usually the lanes are done at once (handlers return quickly); a slow one holds up
                # confirmation, never the other chats: fetch again after `repoll_s` regardless.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._all_handled.wait(), self._repoll_s)
            if self._replicas is not None and not await self._may_poll(self._replicas):
                continue
            offset = self._handled or None
            try:
                kwargs: dict[str, Any] = {"timeout": self._poll_timeout, "allowed_updates": ALLOWED_UPDATES}
                if offset is not None:
                    kwargs["offset"] = offset
                raw = await self._get_updates_raw(kwargs, self._poll_timeout + 10)
                backoff = 1.0
            except asyncio.CancelledError:
                raise
            except InvalidToken:
                log.critical("telegram: the bot token was rejected; polling stopped")
                return
            except TelegramError as e:
                if "conflict" in str(e).lower():
                    log.error("telegram: another instance is polling this bot token (409 Conflict); retrying")
                    backoff = max(backoff, 10.0)
                elif isinstance(e, RetryAfter):
                    backoff = retry_after_seconds(e)
                else:
                    log.warning("telegram: getUpdates failed (%s); retrying in %.0f s", e, backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            except Exception:
                log.exception("telegram: unexpected error while polling; retrying in %.0f s", backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            if offset is not None:
                self._confirmed = max(self._confirmed, offset)
            if self._stopping.is_set():
                break  # fetched but not handled: not confirmed, redelivered next start
            if raw:
                try:
                    await self._dispatch(raw)
                except Exception:  # never let one bad batch stop polling
                    log.exception("telegram: failed while dispatching a batch of %d updates", len(raw))

    async def _get_updates_raw(self, data: dict[str, Any], read_timeout: float) -> list[WireObject]:
        # Bot.get_updates parses the whole batch at once, so one malformed update would block the
        # queue forever; `_post` (PTB's internal, stable since v20) returns the raw JSON list.
        # It also routes getUpdates through the dedicated get_updates_request.
        updates: list[WireObject] = await self.bot._post("getUpdates", data, read_timeout=read_timeout)
        return updates

    async def _dispatch(self, raw: list[WireObject]) -> None:
        """Hand new updates to their chat's lane; updates already dispatched (unconfirmed ones come
        back until the prefix before them is handled) are skipped."""
        stale: dict[str, list[WireUpdate]] = {}
        for item in raw:
            uid = item.get("update_id") if isinstance(item, dict) else None
            if not isinstance(uid, int):
                continue  # cannot be confirmed or de-duplicated; Telegram never sends these
            if uid <= self._dispatched:
                continue
            self._dispatched = uid
            self._unconfirmed.append(uid)
            self._all_handled.clear()
            update = self._prepare(item, stale)
            if update is None:
                self._mark_handled(uid)
                continue
            key = _lane_key(item)
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = deque()
                task = asyncio.create_task(self._run_lane(key, lane), name=f"telegram-lane:{key}")
                self._lane_tasks.add(task)
                task.add_done_callback(self._lane_tasks.discard)
            lane.append((uid, update))
        if stale and self._notify_stale:
            await self._send_stale_notices(stale)

    async def _run_lane(self, key: str, lane: deque[tuple[int, WireUpdate]]) -> None:
        try:
            while lane:
                if self._stopping.is_set():
                    return  # stopping: finish what runs, start nothing new (it stays unconfirmed)
                uid, update = lane[0]
                try:
                    await self._deliver(update)
                except Exception:
                    log.exception("telegram: failed while handling update %s", uid)
                lane.popleft()
                self._mark_handled(uid)
        finally:
            if self._lanes.get(key) is lane:
                del self._lanes[key]

    def _mark_handled(self, uid: int) -> None:
        """Advance the contiguous handled prefix (what the next getUpdates, or stop, confirms)."""
        self._done.add(uid)
        while self._unconfirmed and self._unconfirmed[0] in self._done:
            first = self._unconfirmed.popleft()
            self._done.discard(first)
            self._handled = max(self._handled, first + 1)
        if not self._unconfirmed:
            self._all_handled.set()

    def _prepare(
        self, item: WireObject, stale: dict[str, list[WireUpdate]] | None = None
    ) -> WireUpdate | None:
        """Parse one raw update; None if it is malformed or a stale backlog message (dropped)."""
        try:
            update = parse_update(item)
        except MalformedUpdate as exc:
            log.error("telegram: skipping malformed update %s: %s", item.get("update_id"), exc)
            return None
        msg = update.message
        if msg is not None and self._is_stale(msg):
            self.dropped_stale += 1
            log.warning("telegram: dropped stale update %s from chat %s (%.0f s old)",
                        update.update_id, msg.chat.id, self._clock() - msg.date)  # fmt: skip
            if stale is not None and msg.chat.type == PRIVATE:
                stale.setdefault(self._chat_ref(msg).key, []).append(update)
            return None
        return update

    async def _deliver(self, update: WireUpdate) -> None:
        with self._inflight:
            try:
                await self._on_update(update)
            except Exception:  # one bad update never stops the others
                log.exception("telegram: error while handling update %s", update.update_id)

    async def _process_raw(self, item: WireObject, stale: dict[str, list[WireUpdate]] | None = None) -> None:
        update = self._prepare(item, stale)
        if update is not None:
            await self._deliver(update)

    def _is_stale(self, msg: WireMessage) -> bool:
        if self._max_backlog_age_s is None:
            return False
        return self._clock() - msg.date > self._max_backlog_age_s

    async def _send_stale_notices(self, stale: dict[str, list[WireUpdate]]) -> None:
        for updates in stale.values():
            msg = updates[-1].message
            assert msg is not None
            lang = msg.from_user.language_code if msg.from_user else None
            text = notice(self._notices, "stale", lang, n=len(updates))
            try:
                await self.send_text(self._chat_ref(msg), text, format="plain")
            except DeliveryError as e:
                log.info("telegram: stale notice not delivered: %s", e)

    async def _take_poller_turn(self) -> None:
        # polling and a webhook are mutually exclusive; keep pending updates (no drop)
        await self.bot.delete_webhook(drop_pending_updates=False)
        self._polling = True

    async def _may_poll(self, gate: ReplicaGate) -> bool:
        """Whether this replica polls now: no replica serves a webhook, and this one holds the poller
        lease (renewed here every `renew_interval`). Otherwise wait a renewal interval."""
        now = self._clock()
        if self._polling and now < self._gate_checked + gate.renew_interval:
            return True
        try:
            webhook = await gate.webhook_deployment()
            holder = None if webhook else await gate.take_poller()
        except Exception:
            log.exception("telegram: could not check the poller lease; not polling until it can be")
            webhook, holder = None, "unknown (database error)"
        self._gate_checked = now
        if webhook is None and holder is None:
            if self._polling:
                return True
            try:
                await self._take_poller_turn()
            except Exception:  # never let a failed deleteWebhook end the polling loop
                log.exception("telegram: deleteWebhook failed; retrying before polling")
            else:
                log.info("telegram: this replica polls for updates (it holds the poller lease)")
                self._gate_said = ""
                return True
            said = ""
        elif webhook is not None:
            said = (
                f"telegram: a webhook deployment is running on this database ({webhook}); this replica "
                "is in polling mode and does not call deleteWebhook or poll. Run it with "
                '[telegram] mode = "webhook", or stop the webhook replicas and it takes over.'
            )
        else:
            said = f"telegram: standing by; {holder} polls for updates (taken over when its lease expires)"
        if said and said != self._gate_said:
            log.warning("%s", said)
            self._gate_said = said
        if self._polling:
            self._polling = False
            with contextlib.suppress(Exception):
                await gate.release_poller()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), gate.renew_interval)
        return False

    async def _announce_loop(self) -> None:
        gate = self._replicas
        assert gate is not None
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), gate.renew_interval)
            if not self._stopping.is_set():
                await self._announce(gate)

    @staticmethod
    async def _announce(gate: ReplicaGate) -> None:
        try:
            await gate.announce_webhook()
        except Exception:
            log.exception("telegram: could not announce the webhook deployment; retrying")

    # ---------------------------------------------------------------- webhook

    async def _start_webhook(self, cfg: WebhookConfig, secret: str) -> None:
        from aiohttp import web

        async def receive(request: web.Request) -> web.Response:
            status = webhook_auth(request.headers.get(SECRET_HEADER), secret)
            if status != 200:
                # the header's value is never logged (python-telegram-bot PR #5120)
                what = "without the secret header" if status == 401 else "with a wrong secret header"
                log.warning("telegram webhook: refused a request %s (%d)", what, status)
                return web.Response(status=status)
            if self._stopping.is_set():
                return web.Response(status=503)  # not acknowledged: Telegram redelivers later
            try:
                item = await request.json()
                if not isinstance(item, dict) or "update_id" not in item:
                    raise ValueError("not an update")
            except ValueError:
                return web.Response(status=400)
            async with self._locks.hold(_lane_key(item)):
                await self._process_raw(item)
            return web.Response(status=200)

        app = web.Application()
        app.router.add_post(cfg.path, receive)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, cfg.listen, cfg.port).start()
        self._runner = runner
        await self.bot.set_webhook(
            url=cfg.url,
            secret_token=secret,
            allowed_updates=ALLOWED_UPDATES,
            drop_pending_updates=False,
            max_connections=cfg.max_connections,
        )
        if cfg.secret_token:
            log.info("telegram webhook: listening on %s:%d with the configured secret", cfg.listen, cfg.port)
        else:
            log.info(
                "telegram webhook: no secret configured; generated one from the bot token (the same "
                "on every replica) and registered it with setWebhook (set TELEGRAM_WEBHOOK_SECRET to "
                "choose your own); listening on %s:%d",
                cfg.listen,
                cfg.port,
            )

    # ---------------------------------------------------------------- inbound conversion

    async def _on_update(self, update: WireUpdate) -> None:
        assert self._handler is not None
        if update.callback_query is not None:
            await self._on_callback(update.callback_query)
            return
        msg = update.message
        if msg is None or msg.from_user is None or msg.from_user.is_bot:
            return
        event = self._convert_message(update, msg)
        if event is None:
            if self._addressed(msg) and not msg.text:
                await self._reply_unsupported(msg)
            return
        await call_handler(self._handler, event, timeout=self._handler_timeout, platform=PLATFORM)

    @staticmethod
    def _chat_ref(msg: WireMessage) -> ChatRef:
        chat = msg.chat
        thread = str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else None
        return ChatRef(PLATFORM, str(chat.id), thread, chat.type != PRIVATE, chat.name)

    @staticmethod
    def _user_ref(u: WireUser) -> UserRef:
        return UserRef(PLATFORM, str(u.id), u.full_name, u.language_code, u.username, u.is_bot)

    def _addressed(self, msg: WireMessage) -> bool:
        if msg.chat.type == PRIVATE:
            return True
        if self._replies_to_bot(msg):
            return True
        name = f"@{self.bot.username}".lower()
        return any(
            e.type == MessageEntityType.MENTION and msg.entity_text(e).lower() == name for e in msg.entities
        )

    def _replies_to_bot(self, msg: WireMessage) -> bool:
        r = msg.reply_to
        # in forums, every topic message "replies" to the topic's creation message; ignore that
        if r is None or (msg.is_topic_message and r.message_id == msg.message_thread_id):
            return False
        return bool(r.from_user and r.from_user.id == self.bot.id)

    def _convert_message(self, update: WireUpdate, msg: WireMessage) -> Inbound | None:
        text = msg.text
        if not text or msg.from_user is None:
            return None
        chat, user = self._chat_ref(msg), self._user_ref(msg.from_user)
        sent_at = msg.sent_at
        ents = msg.entities
        if ents and ents[0].type == MessageEntityType.BOT_COMMAND and ents[0].offset == 0:
            head = msg.entity_text(ents[0])[1:]
            name, _, target = head.partition("@")
            if target and target.lower() != (self.bot.username or "").lower():
                return None  # a command for another bot in this group
            return InboundCommand(
                update_id=str(update.update_id),
                chat=chat,
                user=user,
                name=name.lower(),
                args=text[ents[0].length :].strip(),
                sent_at=sent_at,
                message_id=str(msg.message_id),
            )
        reply_to = msg.reply_to
        if reply_to is not None and msg.is_topic_message and reply_to.message_id == msg.message_thread_id:
            reply_to = None
        mention = f"@{self.bot.username}"
        clean = text.replace(mention, "").strip() if mention.lower() in text.lower() else text
        return InboundMessage(
            update_id=str(update.update_id),
            chat=chat,
            user=user,
            text=clean or text,
            reply_to_message_id=str(reply_to.message_id) if reply_to else None,
            sent_at=sent_at,
            message_id=str(msg.message_id),
            addressed=self._addressed(msg),
            reply_to_bot=self._replies_to_bot(msg),
        )

    async def _reply_unsupported(self, msg: WireMessage) -> None:
        lang = msg.from_user.language_code if msg.from_user else None
        try:
            await self.send_text(self._chat_ref(msg), notice(self._notices, "unsupported", lang),
                                 reply_to=str(msg.message_id), format="plain")  # fmt: skip
        except DeliveryError as e:
            log.info("telegram: could not answer an unsupported message: %s", e)

    async def _on_callback(self, cq: WireCallback) -> None:
        assert self._handler is not None
        answered = False

        async def ack(text: str = "", alert: bool = False) -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            try:
                await self.bot.answer_callback_query(cq.id, text=text[:200] or None, show_alert=alert)
            except TelegramError as e:
                log.info("telegram: answerCallbackQuery failed: %s", e)

        m = cq.message
        if m is None or not cq.data:  # inline-mode or game callbacks: not ours
            await ack()
            return
        if m.accessible:
            chat = self._chat_ref(m)
        else:  # an inaccessible message (date 0): too old to read, but chat and id are known
            chat = ChatRef(PLATFORM, str(m.chat.id), None, m.chat.type != PRIVATE, m.chat.title or "")
        press = ButtonPress(
            update_id=f"cq{cq.id}",
            chat=chat,
            user=self._user_ref(cq.from_user),
            data=cq.data,
            message_id=str(m.message_id),
            ack=ack,
            sent_at=datetime.now(UTC),
        )
        try:
            await call_handler(self._handler, press, timeout=self._handler_timeout, platform=PLATFORM)
        finally:
            await ack()  # never leave the client spinning

    # ---------------------------------------------------------------- outbound

    def _render(self, text: str, fmt: TextFormat, limit: int | None = None) -> list[RenderedPart]:
        return render_parts(
            self._outgoing(text),
            limit=limit or self.max_message_len,
            fmt=fmt,
            render=to_telegram_html,
            visible=html_visible_text,
            length=utf16_len,
        )

    @staticmethod
    def _markup(buttons: Sequence[Sequence[Button]] | None) -> dict[str, Any] | None:
        """An InlineKeyboardMarkup, as the Bot API takes it."""
        if not buttons:
            return None
        rows = [[{"text": b.label, "callback_data": b.data} for b in row] for row in buttons if row]
        return {"inline_keyboard": rows}

    async def _api(self, method: str, params: dict[str, Any]) -> Any:
        """One Bot API call through python-telegram-bot's request path (defaults, rate limiter,
        `BadRequest`/`RetryAfter`/`Forbidden`), returning the raw result. `Bot._post` is PTB's
        internal seam (stable since v20; getUpdates uses it too): `send_message` would rebuild the
        whole returned Message as objects — ~120 µs a reply — and we only read its id.
        Transient failures are retried (`_reliably`)."""
        return await self._reliably(
            method,
            lambda: self.bot._post(method, params, read_timeout=self._send_read_timeout),
            idempotent=method != "sendMessage",
        )

    async def _reliably(self, method: str, call: Callable[[], Awaitable[Any]], *, idempotent: bool) -> Any:
        try:
            return await with_retries(
                call,
                retryable=lambda e: _retryable(e, idempotent=idempotent),
                what=f"telegram {method}",
                policy=self._retry,
                sleep=self._sleep,
                clock=self._clock,
            )
        except NetworkError as e:
            if isinstance(e, BadRequest) or idempotent or _surely_not_sent(e) or _status_error(e):
                raise
            raise DeliveryUncertain(
                f"telegram {method}: no answer from Telegram ({e}); it may have been delivered"
            ) from e

    @staticmethod
    def _where(chat: ChatRef) -> dict[str, Any]:
        kw: dict[str, Any] = {"chat_id": int(chat.chat_id)}
        if chat.thread_id is not None:
            kw["message_thread_id"] = int(chat.thread_id)
        return kw

    def _sender(self, method: str, params: dict[str, Any]) -> Callable[[str, str | None], Awaitable[Any]]:
        """`send(text, parse_mode)` for a text method (sendMessage, editMessageText)."""

        async def send(text: str, parse_mode: str | None) -> Any:
            return await self._api(method, {**params, "text": text, "parse_mode": parse_mode})

        return send

    async def _call(
        self, send: Callable[[str, str | None], Awaitable[Any]], formatted: str | None, plain: str
    ) -> Any:
        """`send(text, parse_mode)` formatted (HTML); on a parse error resend the plain text. Map
        final errors."""
        try:
            if formatted is not None:
                try:
                    return await send(formatted, "HTML")
                except BadRequest as e:
                    if not _is_parse_error(e):
                        raise
                    log.info("telegram rejected formatting (%s); resending as plain text", e.message)
            return await send(plain, None)
        except RetryAfter as e:
            raise DeliveryError(f"telegram flood control: {e}", retry_after=retry_after_seconds(e)) from e
        except (Forbidden, InvalidToken) as e:
            raise DeliveryError(f"telegram refused: {e}") from e

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
        for i, part in enumerate(parts):
            kw = self._where(chat)
            kw["link_preview_options"] = _NO_PREVIEW
            if i == len(parts) - 1 and buttons:
                kw["reply_markup"] = self._markup(buttons)
            if i == 0 and reply_to:
                kw["reply_parameters"] = {"message_id": int(reply_to), "allow_sending_without_reply": True}
            try:
                sent = await self._call(self._sender("sendMessage", kw), part.formatted, part.plain)
            except BadRequest as e:
                raise DeliveryError(f"telegram sendMessage failed: {e.message}") from e
            except TelegramError as e:
                raise DeliveryError(f"telegram sendMessage failed: {e}") from e
            ids.append(str(sent["message_id"]))
        return SentMessage(chat, ids[-1], tuple(ids[:-1]))

    def _single(self, text: str, fmt: TextFormat, limit: int) -> RenderedPart | None:
        parts = self._render(text, fmt, limit)
        if len(parts) > 1:
            head = split_chunks(text, limit - 2, length=utf16_len)[0].text
            parts = self._render(head.rstrip() + "\n…", fmt, limit)
        return parts[0] if parts else None

    async def edit_text(
        self,
        msg: SentMessage,
        text: str,
        *,
        buttons: Sequence[Sequence[Button]] | None = None,
        format: TextFormat = "markdown",
    ) -> None:
        part = self._single(text, format, self.max_message_len)
        if part is None:
            raise ValueError("refusing to edit to an empty message")
        kw: dict[str, Any] = {
            "chat_id": int(msg.chat.chat_id),
            "message_id": int(msg.message_id),
            "link_preview_options": _NO_PREVIEW,
        }
        if buttons:
            kw["reply_markup"] = self._markup(buttons)
        try:
            await self._call(self._sender("editMessageText", kw), part.formatted, part.plain)
        except BadRequest as e:
            if _is_not_modified(e):
                return
            if _is_gone(e):
                raise MessageGone(f"telegram: {e.message}") from e
            raise DeliveryError(f"telegram editMessageText failed: {e.message}") from e
        except TelegramError as e:
            raise DeliveryError(f"telegram editMessageText failed: {e}") from e

    async def send_typing(self, chat: ChatRef) -> None:
        try:
            await self.bot.send_chat_action(action=ChatAction.TYPING, **self._where(chat))
        except Exception as e:  # noqa: BLE001 — cosmetic: never let it break a turn
            log.debug("telegram typing failed: %s", e)

    async def send_image(self, chat: ChatRef, path: str | Path, caption: str = "") -> SentMessage:
        part = self._single(caption, "markdown", CAPTION_LIMIT) if caption.strip() else None
        data = await asyncio.to_thread(Path(path).read_bytes)

        async def send(text: str | None = None, parse_mode: str | None = None) -> Any:
            return await self._reliably(
                "sendPhoto",
                lambda: self.bot.send_photo(photo=data, caption=text or None, parse_mode=parse_mode,
                                            read_timeout=self._send_read_timeout, **self._where(chat)),
                idempotent=False,
            )  # fmt: skip

        try:
            if part is None:
                sent = await send()
            else:
                sent = await self._call(send, part.formatted, part.plain)
        except TelegramError as e:
            raise DeliveryError(f"telegram sendPhoto failed: {e}") from e
        return SentMessage(chat, str(sent.message_id))

    async def set_commands(self, commands: Sequence[CommandSpec]) -> None:
        """The menu in English for everyone, and in Chinese for clients set to Chinese (Telegram's
        language codes are two letters: "zh" covers Simplified and Traditional alike)."""
        for lang, code in (("en", None), ("zh", "zh")):
            menu = [
                BotCommand(c.name.lower()[:32], (c.description.get(lang) or c.name)[:256]) for c in commands
            ]
            await self.bot.set_my_commands(menu, language_code=code)


def webhook_auth(header: str | None, secret: str) -> int:
    """200 if `header` is the webhook secret, 401 if it is missing or blank, 403 if it is wrong.
    Constant time; an empty `secret` admits nobody."""
    if header is None or not header.strip():
        return 401
    # "replace": a lone surrogate becomes "?", which no valid secret contains
    ok = hmac.compare_digest(header.encode("utf-8", "replace"), secret.encode())
    return 200 if ok and secret else 403


def _webhook_secret(cfg: WebhookConfig, token: str) -> str:
    """The secret every webhook request must carry: the configured one (checked against what
    setWebhook accepts), or one derived from the bot token. Derived, every replica of the bot
    registers and accepts the same secret with nothing stored: a random one per process left
    only the last replica to start able to accept Telegram's posts, and a stored one would let
    whoever reads the database forge updates. It reveals nothing about the token (HMAC)."""
    if not cfg.secret_token:
        digest = hmac.new(token.encode(), b"tapebot telegram webhook secret", hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")  # 43 chars of [A-Za-z0-9_-]
    if not _SECRET_SHAPE.fullmatch(cfg.secret_token):
        raise ConfigError(
            "the Telegram webhook secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -",
            key="telegram.webhook_secret",
            fix="set TELEGRAM_WEBHOOK_SECRET (or [telegram] webhook_secret) to e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`, or leave it unset to "
            "have one derived from the bot token",
        )
    return cfg.secret_token


def _lane_key(item: Any) -> str:
    """Chat key of a raw update, for per-chat ordering (without parsing the whole update)."""
    try:
        msg = item.get("message") or item.get("edited_message")
        if msg is None and "callback_query" in item:
            msg = item["callback_query"].get("message")
        key = str(msg["chat"]["id"])
        if msg.get("is_topic_message") and msg.get("message_thread_id"):
            key += f":topic{msg['message_thread_id']}"
        return key
    except (AttributeError, KeyError, TypeError):  # malformed: its own lane; parsing will reject it
        return f"update:{id(item)}"
