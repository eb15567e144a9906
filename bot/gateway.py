"""The gateway: every inbound chat event goes through here.

    access check → durable de-duplication → chat state → button | command | message

One turn at a time per chat session, sessions in parallel; a message that arrives while a turn
runs is folded into its next model call, and anything left when it ends starts the next turn —
nothing is dropped. A message is recorded with its update id (one INSERT) until it is in the
session's history, so one that was still queued at a crash or a stop is taken up after the restart
(bot/received.py). A suspended turn (approval or question) releases the chat; the next message is
read as its answer (bot/replies.py) or, when the user clearly moved on, closes it.

Every answer to an approval card — button, typed reply, /approve, /deny — is read by the one
decision function agent/consent.read_consent. In a group, typed consent counts only from an
approver (an admin) who replies to the card or mentions the bot; nobody else's message closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.base import (
    Button,
    ButtonPress,
    Card,
    ChatAdapter,
    ChatRef,
    DeliveryError,
    Inbound,
    InboundCommand,
    InboundMessage,
    SentMessage,
    UserRef,
)
from agent import events as ev
from agent.approval import Requester
from agent.cancel import CancelSignal
from agent.consent import ConsentDecision, StandingApproval, normalize, read_consent
from agent.errors import (
    ApprovalError,
    ApprovalExpired,
    ApprovalForeignChat,
    ApprovalNotFound,
    NotAnApprover,
    StorageError,
    TurnNotBegun,
)
from agent.messages import Message
from agent.ports import ApprovalRecord, Queued, Receipt, TurnRecord
from agent.runtime import AgentRuntime, TurnRequest
from bot import cards
from bot.chats import ChatDirectory, ChatState, KeyValue
from bot.commands import CommandRegistry, Handler, builtin_commands
from bot.commands.binding import bind
from bot.commands.context import CommandServices
from bot.delivery import TurnView, render_all
from bot.i18n import pick_language, t
from bot.progress import ProgressBoard, settled_text
from bot.received import NOTICES, inbound_from_record, notice_from_record, notice_record, pending_record
from bot.refusals import refusal_key
from bot.replies import read_reply

log = logging.getLogger(__name__)

MAX_INBOUND_CHARS = 16_000
PAIRING_MAX_ATTEMPTS = 5


class GatewayStore(KeyValue, Protocol):
    async def mark_update_processed(self, platform: str, update_id: str) -> bool: ...

    async def receive_message(
        self, platform: str, update_id: str, pending: dict[str, Any] | None
    ) -> bool: ...

    async def release_received(self, receipts: list[Receipt]) -> None: ...

    async def received_pending(self) -> list[tuple[Receipt, datetime, dict[str, Any]]]: ...

    async def load_turn(self, turn_id: str) -> TurnRecord | None: ...

    async def open_turn(self, session_id: str) -> TurnRecord | None: ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    async def load_messages(self, session_id: str) -> list[Message]: ...

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None: ...

    async def open_turns(self) -> list[TurnRecord]: ...

    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]: ...

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int: ...


@dataclass(frozen=True)
class StorageRetry:
    """How long an inbound event waits for storage that fails (a write lock held beyond the busy
    timeout, a full disk): retried after `first_s`, doubling up to `max_s`, for `budget_s` in all;
    then the user is asked to send it again."""

    first_s: float = 0.5
    max_s: float = 30.0
    budget_s: float = 600.0


@dataclass
class PlatformAccess:
    allowed_users: set[str] = field(default_factory=set)
    admins: set[str] = field(default_factory=set)
    group_sessions: str = "per_group"
    max_backlog_age_s: float = 600.0  # older messages left from before a restart are not run


def _preview(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _may_queue(msg: InboundMessage) -> bool:
    """Could this message wait in a queue (behind a running turn or an approval) or start a
    turn? Then it is recorded until it is in the history. Empty, oversized and unaddressed
    messages never are (an unaddressed one only ever answers a question, at once)."""
    return msg.addressed and bool(msg.text.strip()) and len(msg.text) <= MAX_INBOUND_CHARS


def _short(text: str) -> bool:
    """A short reply to a card that is no decision ("3", "第三个", "👍", "what?"): it gets a hint and
    the card stays; a longer message is a new request and closes the card (nothing runs)."""
    word = normalize(text)
    return len(word) <= 12 and " " not in word


def _is_waiting(turn: TurnRecord | None) -> bool:
    """A suspended turn waiting on the user (an approval card or a question)."""
    return turn is not None and turn.status == "suspended" and turn.waiting is not None


class Gateway:
    def __init__(
        self,
        runtime: AgentRuntime,
        store: GatewayStore,
        access: dict[str, PlatformAccess],
        *,
        models: list[str] | None = None,
        default_model: str = "",
        approval_ttl_minutes: int = 30,
        context_window: Callable[[str | None], int] | None = None,
    ):
        self.runtime = runtime
        self.store = store
        self.access = access
        self.adapters: dict[str, ChatAdapter] = {}
        self.chats = ChatDirectory(store)
        self.models = models or []
        self.default_model = default_model
        self.approval_ttl_minutes = approval_ttl_minutes
        # the facts of a trade for its card (markets/preview.py), wired by bot/app.py
        self.trade_facts: Callable[[ApprovalRecord], Coroutine[Any, Any, Any]] | None = None
        self.context_window = context_window or (lambda _m: 65_536)
        self.system_dynamic = ""  # the stable part after the static prompt (skills list)
        # tool name -> (lang -> one line on the approval card, e.g. exec_command's sandbox)
        self.card_notes: dict[str, Callable[[str], str]] = {}
        self._task_messages: dict[str, SentMessage] = {}
        # the commands (bot/commands/), and the services their handlers use (completed by chat_setup)
        self.commands = CommandRegistry(builtin_commands())
        self.command_services = CommandServices(
            runtime, store, self.models, default_model, self.context_window, specs=self.commands.specs
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._denied_notice: set[str] = set()
        self._pairing: dict[str, list[Any]] = {}  # platform -> [code, wrong attempts]
        self.stopping = False  # drain() began: queued messages wait for the restart
        # set by drain(): every turn ends at its next durable step and is resumed after the restart
        self.stop_signal = CancelSignal()
        self.storage_retry = StorageRetry()
        # while storage fails, inbound events wait here in arrival order (FIFO) and are stored
        # in that order once it works again; `_storage_told`: chats told about it already
        self._storage_queue = asyncio.Lock()
        self._storage_told: set[str] = set()
        # a suspended turn's progress message, continued when it resumes (bot/progress.py)
        self.progress_board = ProgressBoard()
        # chat key -> the messages of an answer a stop cut off, for the resumed turn to replace
        self._partials: dict[str, list[SentMessage]] = {}
        self.typing_sleep: Callable[[float], Coroutine[Any, Any, Any]] = asyncio.sleep  # tests inject

    # ---- lifecycle ---------------------------------------------------------------------------
    def attach(self, adapter: ChatAdapter) -> None:
        self.adapters[adapter.platform] = adapter

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str = "") -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name or None)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def drain(self, grace: float = 20.0) -> None:
        """Stop taking new work; running turns get `grace` seconds to reach their next durable
        step (a stored model answer or tool result), then what still runs is cut off. Either way
        the turn stays open and `resume_interrupted` takes it up after the restart, as after a
        crash. Messages still queued start nothing: they stay recorded for the restart."""
        self.stopping = True
        self.stop_signal.set()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        busy = list(self._tasks)
        for task in busy:
            task.cancel()
        if busy:  # their last writes (the open turn, a cut-off call) land before the database closes
            await asyncio.wait(busy, timeout=5.0)

    async def take_up_received(self, now: datetime | None = None) -> int:
        """After a restart: messages received but never written into a history (queued behind a
        turn or an approval when the bot stopped or crashed) are handled now, oldest first, as if
        they had just arrived. One older than its platform's `max_backlog_age_s` is not run; its
        chat is told. Messages of a platform not running now stay for when it is. Returns how
        many were taken up."""
        now = now or datetime.now(UTC)
        taken = 0
        stale: dict[str, tuple[ChatState, int, str]] = {}
        for receipt, received_at, record in await self.store.received_pending():
            if receipt[0] == NOTICES:
                await self._take_up_notice(receipt, record)
                continue
            adapter = self.adapters.get(receipt[0])
            if adapter is None:
                continue
            try:
                msg = inbound_from_record(receipt[1], record)
            except ValueError as exc:
                log.warning("received message %s:%s dropped: %s", *receipt, exc)
                await self.store.release_received([receipt])
                continue
            acc = self.access.get(msg.chat.platform)
            if acc is None or not self.allowed(msg.user):  # access was withdrawn meanwhile
                await self.store.release_received([receipt])
                continue
            lang = pick_language(msg.user.language_code)
            state = await self.chats.get(msg.chat, msg.user, acc.group_sessions, lang)
            if (now - received_at).total_seconds() > acc.max_backlog_age_s:
                await self.store.release_received([receipt])
                _, n, first = stale.get(state.key, (state, 0, msg.text))
                stale[state.key] = (state, n + 1, first)
                continue
            state.chat, state.last_user = msg.chat, msg.user
            await self._on_message(adapter, state, msg, receipt)
            taken += 1
        for state, n, first in stale.values():
            await self.say(state, t(state.lang, "not_taken_up", n=n, first=_preview(first)))
        if taken or stale:
            log.info("after the restart: %d received message(s) taken up, %d too old", taken,
                     sum(n for _, n, _ in stale.values()))  # fmt: skip
        return taken

    async def resume_interrupted(self, now: datetime | None = None) -> int:
        """After a restart: each turn a stop or a crash left running is resumed now, without
        waiting for the user, and its chat is told (which tool was cut off: it may or may not have
        completed and is not run again). A suspended turn whose approval was given just before is
        resumed too: the approval still holds. A turn older than its platform's
        `max_backlog_age_s` is closed instead (its calls not run) and the chat told. Returns how
        many were resumed."""
        now = now or datetime.now(UTC)
        resumed = 0
        for turn in await self.store.open_turns():
            approved = await self._approved_tool(turn)
            if turn.status == "suspended" and approved is None:
                continue  # waiting on the user: the card or question is still there
            state = await self.chats.by_key(turn.chat_key) if turn.chat_key else None
            if state is None or state.chat.platform not in self.adapters:
                continue  # its platform is not running now: left for when it is
            if (
                turn.unattended  # a brief: the scheduler retries it
                or turn.session_id != state.session_id  # the chat moved on to a new session
                or not self.allowed(UserRef(state.chat.platform, turn.requester))  # access withdrawn
            ):
                await self.runtime.close_turn(turn.id)
                continue
            acc = self.access.get(state.chat.platform) or PlatformAccess()
            if (now - turn.updated_at).total_seconds() > acc.max_backlog_age_s:
                await self._settle_paused_progress(state)
                await self.runtime.close_turn(turn.id)
                await self.say(state, t(state.lang, "restart_not_resumed"))
                continue
            await self._settle_paused_progress(state)
            await self._take_partial(state)
            cut_off = await self.runtime.settle_interrupted(turn.id)
            lines = [t(state.lang, "restart_resumed")]
            lines += [t(state.lang, "restart_cut_off", tool=name) for name in cut_off]
            if approved is not None:
                lines.append(t(state.lang, "restart_approved", tool=approved))
            await self.say(state, "\n".join(lines))
            self._resume_soon(state, turn.id)
            resumed += 1
        if resumed:
            log.info("after the restart: %d interrupted turn(s) resumed", resumed)
        return resumed

    async def _settle_paused_progress(self, state: ChatState) -> None:
        """The progress message a stop left saying "paused" shows its final state."""
        key = f"progress:{state.key}"
        found = await self._sent(key)
        if found is None:
            return
        sent, adapter, record = found
        await self.store.kv_set(key, None)
        text = settled_text(record, t(state.lang, "progress_cut_off"))
        if text:
            with contextlib.suppress(DeliveryError):
                await adapter.edit_text(sent, text, format="plain")

    async def _take_partial(self, state: ChatState) -> None:
        """The messages of an answer a stop cut off mid-stream: the resumed turn's answer
        replaces them (its TurnView adopts them) instead of repeating their text."""
        key = f"partial:{state.key}"
        found = await self._sent(key)
        if found is None:
            return
        sent, _adapter, record = found
        await self.store.kv_set(key, None)
        ids = record.get("ids") or [sent.message_id]
        self._partials[state.key] = [SentMessage(sent.chat, str(i)) for i in ids]

    async def _approved_tool(self, turn: TurnRecord) -> str | None:
        """The tool of a call approved but not started yet (its approval given before the stop)."""
        for call_id, approval_id in turn.calls_approval.items():
            if turn.calls.get(call_id) not in ("pending", "awaiting_approval"):
                continue
            record = await self.store.get_approval(approval_id)
            if record is not None and record.status == "approved":
                return record.tool
        return None

    async def _take_up_notice(self, receipt: Receipt, record: dict[str, Any]) -> None:
        """A task notice that waited for a turn when the bot went down: its own turn now (a
        notice is never stale: the task did finish). Kept while its platform is not running."""
        try:
            chat_key, text = notice_from_record(record)
        except ValueError as exc:
            log.warning("task notice %s dropped: %s", receipt[1], exc)
            await self.store.release_received([receipt])
            return
        state = await self.chats.by_key(chat_key)
        if state is None:
            log.warning("task notice %s: chat %s is unknown; dropped", receipt[1], chat_key)
            await self.store.release_received([receipt])
        elif state.chat.platform in self.adapters:
            self.submit_system_turn(state, text, receipt)

    # ---- inbound -----------------------------------------------------------------------------
    def allowed(self, user: UserRef) -> bool:
        acc = self.access.get(user.platform)
        return acc is not None and user.user_id in acc.allowed_users

    def is_admin(self, chat: ChatRef, user: UserRef) -> bool:
        """In a DM the user decides for themself; in a group only the platform's admins do."""
        if not chat.is_group:
            return True
        acc = self.access.get(chat.platform) or PlatformAccess()
        return user.user_id in acc.admins

    def approvers_for(self, chat: ChatRef, user: UserRef) -> tuple[str, ...]:
        acc = self.access.get(chat.platform) or PlatformAccess()
        if chat.is_group:
            return tuple(sorted(acc.admins))
        return (user.user_id,)

    async def handle(self, inbound: Inbound) -> None:
        """The adapter's handler. Returns once the event is accepted; turns run as tasks. A tap
        whose handling fails is answered in the chat (its quiet acknowledgement may be used up
        or may have failed): the user is asked to tap again."""
        try:
            await self._handle(inbound)
        except Exception:
            if not isinstance(inbound, ButtonPress):
                raise
            log.exception("button press %s in %s failed", inbound.update_id, inbound.chat.key)
            await self._tell_storage(inbound, "button_failed")

    async def _handle(self, inbound: Inbound) -> None:
        user = inbound.user
        adapter = self.adapters.get(inbound.chat.platform)
        if adapter is None:
            return
        if not self.allowed(user):
            if not await self._try_pairing(adapter, inbound):
                await self._deny(adapter, inbound)
            return
        if self.stopping and not isinstance(inbound, InboundMessage):
            await self._restarting(inbound)
            return
        # A message that may queue is recorded with its id until it is in the history (one INSERT).
        receipt: Receipt | None = None
        if isinstance(inbound, InboundMessage) and _may_queue(inbound):
            receipt = (inbound.chat.platform, inbound.update_id)
            pending = pending_record(inbound)
            stored = await self._stored(inbound, lambda: self.store.receive_message(*receipt, pending))
        else:
            platform, update_id = inbound.chat.platform, inbound.update_id
            stored = await self._stored(
                inbound, lambda: self.store.mark_update_processed(platform, update_id)
            )
        if stored is None:
            return  # storage failed for the whole retry budget: the user was asked to send it again
        fresh = stored
        if not fresh:
            if isinstance(inbound, ButtonPress):
                with contextlib.suppress(Exception):
                    await inbound.ack("", False)
            return  # a redelivered update: already handled
        acc = self.access[inbound.chat.platform]
        state = await self.chats.get(
            inbound.chat, user, acc.group_sessions, pick_language(user.language_code)
        )
        state.chat = inbound.chat
        state.last_user = user
        if state.owner != user.user_id and not isinstance(inbound, ButtonPress):
            state.owner = user.user_id
            await self.chats.save(state)
        if self.stopping:  # recorded (a message that may queue): taken up after the restart
            if receipt is not None:
                await self.say(state, t(state.lang, "restarting_kept"))
            return
        if isinstance(inbound, ButtonPress):
            await self._on_button(adapter, state, inbound)
        elif isinstance(inbound, InboundCommand):
            command = self.commands.get(inbound.name)
            if self.commands.admin_only_in_groups(inbound.name) and not self.is_admin(inbound.chat, user):
                await self.say(state, t(state.lang, "admin_only", name=inbound.name))
                return
            waiting = await self._waiting_turn(state)
            if (
                waiting is not None
                and not self.commands.keeps_waiting(inbound.name)
                and self.may_close(waiting, user.user_id)
            ):
                await self._move_on(adapter, state, waiting)
            if command is None:
                await self.say(state, t(state.lang, "unknown_command", name=inbound.name[:32]))
            else:
                await self._run_command(command.handler, state, inbound)
        else:
            await self._on_message(adapter, state, inbound, receipt)

    async def _stored(self, inbound: Inbound, write: Callable[[], Coroutine[Any, Any, bool]]) -> bool | None:
        """The event's first write (its record or its id), retried while storage fails: the event is
        held in memory meanwhile and the adapter does not acknowledge it while this runs. The chat
        is told once that the bot cannot keep up. None when the budget ran out (the user is asked
        to send it again)."""
        if not self._storage_queue.locked():  # the usual case: no trouble, no waiting
            try:
                return await write()
            except StorageError as exc:
                log.warning(
                    "storing %s %s failed; retrying: %s", inbound.chat.platform, inbound.update_id, exc
                )
        async with self._storage_queue:  # FIFO: events are stored in the order they came
            policy = self.storage_retry
            loop = asyncio.get_running_loop()
            deadline = loop.time() + policy.budget_s
            delay = policy.first_s
            attempts = 0
            while True:
                if attempts:  # the first attempt of an event queued behind another is immediate
                    await self._tell_storage(inbound, "storage_trouble")
                    if loop.time() + delay > deadline:
                        log.error("gave up storing %s %s after %d attempts",
                                  inbound.chat.platform, inbound.update_id, attempts)  # fmt: skip
                        text = inbound.text if isinstance(inbound, InboundMessage) else ""
                        await self._tell_storage(inbound, "storage_gave_up", preview=_preview(text or "…"))
                        self._storage_told.discard(inbound.chat.key)
                        return None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, policy.max_s)
                attempts += 1
                try:
                    result = await write()
                except StorageError as exc:
                    log.warning("storage still failing (attempt %d): %s", attempts, exc)
                    attempts = max(attempts, 1)
                    continue
                self._storage_told.discard(inbound.chat.key)
                return result

    async def _tell_storage(self, inbound: Inbound, key: str, **fields: Any) -> None:
        """Say `key` in the event's chat, in its sender's language: no chat state needed (storage
        may be what failed)."""
        if key == "storage_trouble":
            if inbound.chat.key in self._storage_told:
                return
            self._storage_told.add(inbound.chat.key)
        adapter = self.adapters.get(inbound.chat.platform)
        if adapter is not None:
            lang = pick_language(inbound.user.language_code)
            with contextlib.suppress(DeliveryError):
                await adapter.send_text(inbound.chat, t(lang, key, **fields), format="plain")

    async def _restarting(self, inbound: Inbound) -> None:
        """A command or a tap while the bot stops: not acted on (it would start new work); the
        user is asked to repeat it in a moment."""
        lang = pick_language(inbound.user.language_code)
        if isinstance(inbound, ButtonPress):
            with contextlib.suppress(Exception):
                await inbound.ack(t(lang, "restarting_again"), True)
            return
        adapter = self.adapters.get(inbound.chat.platform)
        if adapter is not None:
            with contextlib.suppress(DeliveryError):
                await adapter.send_text(inbound.chat, t(lang, "restarting_again"), format="plain")

    async def _run_command(self, handler: Handler, state: ChatState, cmd: InboundCommand) -> None:
        """Every command answers: a handler that fails is logged and the chat gets a short error in
        its language (never the exception's text, which may carry internals)."""
        try:
            await handler(bind(self, self.command_services, state, cmd))
        except Exception:
            log.exception("command /%s failed in %s", cmd.name, state.key)
            await self.say(state, t(state.lang, "command_failed", name=cmd.name[:32]))

    # ---- pairing: a one-time code from the operator's terminal admits its first user ---------
    def enable_pairing(self, platform: str) -> str:
        code = f"{secrets.randbelow(10**6):06d}"
        self._pairing[platform] = [code, 0]
        return code

    async def restore_paired(self) -> None:
        for platform, acc in self.access.items():
            for uid in await self.store.kv_get(f"paired:{platform}") or []:
                acc.allowed_users.add(uid)
                acc.admins.add(uid)

    async def _try_pairing(self, adapter: ChatAdapter, inbound: Inbound) -> bool:
        entry = self._pairing.get(inbound.chat.platform)
        if entry is None or not isinstance(inbound, InboundCommand) or inbound.name != "pair":
            return False
        if inbound.chat.is_group:
            return False
        code, attempts = entry
        if not hmac.compare_digest(inbound.args.strip(), code):
            entry[1] = attempts + 1
            if entry[1] >= PAIRING_MAX_ATTEMPTS:
                self._pairing.pop(inbound.chat.platform, None)
                log.warning("pairing for %s disabled after %d wrong codes", inbound.chat.platform, entry[1])
            return False
        self._pairing.pop(inbound.chat.platform, None)  # one use only
        uid = inbound.user.user_id
        acc = self.access.setdefault(inbound.chat.platform, PlatformAccess())
        acc.allowed_users.add(uid)
        acc.admins.add(uid)
        key = f"paired:{inbound.chat.platform}"
        await self.store.kv_set(key, sorted({*(await self.store.kv_get(key) or []), uid}))
        log.warning("paired %s user %s: allowed and admin from now on", inbound.chat.platform, uid)
        lang = pick_language(inbound.user.language_code)
        with contextlib.suppress(DeliveryError):
            await adapter.send_text(inbound.chat, t(lang, "paired"), format="plain")
        return True

    async def _deny(self, adapter: ChatAdapter, inbound: Inbound) -> None:
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

    async def say(self, state: ChatState, text: str, fmt: str = "plain") -> SentMessage | None:
        adapter = self.adapters[state.chat.platform]
        try:
            return await adapter.send_text(state.chat, text, format=fmt)  # type: ignore[arg-type]
        except DeliveryError as exc:
            log.warning("delivery to %s failed: %s", state.key, exc)
            return None

    # ---- messages ----------------------------------------------------------------------------
    async def _on_message(
        self, adapter: ChatAdapter, state: ChatState, msg: InboundMessage, receipt: Receipt | None = None
    ) -> None:
        """`receipt`: the message is recorded (`_may_queue`) until it is in the history; every path
        either hands it on with the message or releases it."""
        text = msg.text or ""
        if not text.strip():
            await self.say(state, t(state.lang, "unsupported"))
            return
        if len(text) > MAX_INBOUND_CHARS:
            await self.say(state, t(state.lang, "too_long", size=len(text), limit=MAX_INBOUND_CHARS))
            return
        if state.running:  # a running turn is never waiting: fold the message into it
            if msg.addressed:
                state.inbox.put_nowait(Queued(Message.user(text), receipt))
            return
        open_turn = await self.store.open_turn(state.session_id)
        waiting = open_turn if _is_waiting(open_turn) else None
        if waiting is not None:
            if await self._answer_waiting(adapter, state, waiting, msg, receipt):
                return
        elif not msg.addressed:
            return  # group chatter that isn't for us
        receipts = (receipt,) if receipt is not None else ()
        self._start(
            state, self._turn(state, text, msg.user, no_open_turn=open_turn is None, receipts=receipts)
        )

    async def _release(self, receipt: Receipt | None) -> None:
        """The message was answered otherwise than by entering the history (a reply to a card or
        a question): nothing to take up after a restart. Released before acting on it, so a crash
        in between loses the reply (the card or question is still there) rather than repeat it."""
        if receipt is not None:
            await self.store.release_received([receipt])

    async def _waiting_turn(self, state: ChatState) -> TurnRecord | None:
        turn = await self.store.open_turn(state.session_id)
        return turn if _is_waiting(turn) else None

    async def waiting_turn(self, state: ChatState) -> TurnRecord | None:
        return await self._waiting_turn(state)

    async def move_on(self, state: ChatState, turn: TurnRecord) -> None:
        await self._move_on(self.adapters[state.chat.platform], state, turn)

    async def _answer_waiting(
        self,
        adapter: ChatAdapter,
        state: ChatState,
        turn: TurnRecord,
        msg: InboundMessage,
        receipt: Receipt | None = None,
    ) -> bool:
        """True if the message was consumed as the answer (or queued behind the approval)."""
        assert turn.waiting is not None
        uid = msg.user.user_id
        may_answer = uid == turn.requester or uid in turn.approvers
        reading = read_reply(msg.text, turn.waiting)
        if turn.waiting.kind == "approval":
            approval_id = turn.waiting.confirmation_target.get("approval_id", "")
            if uid not in turn.approvers:
                if not msg.addressed:
                    return True
                # only an approver can unblock this chat; a member's message never closes the card
                state.backlog.append((Queued(Message.user(msg.text), receipt), msg.user))
                return True
            card = await self._card_ref(approval_id)
            replying_to_card = card is not None and msg.reply_to_message_id == card.message_id
            # in a group, typed consent must be addressed: a reply to the card or a mention
            if state.chat.is_group and not (replying_to_card or (msg.addressed and not msg.reply_to_bot)):
                if msg.addressed:  # a reply to another of the bot's messages: waits for the decision
                    state.backlog.append((Queued(Message.user(msg.text), receipt), msg.user))
                return True
            record = await self.store.get_approval(approval_id)
            scope = self.runtime.gate.scope_for(record) if record is not None else None
            decision = read_consent("text", msg.text, scope=scope, replying_to_card=replying_to_card)
            word = decision.gate_decision
            if word is not None:
                await self._release(receipt)
                refused = await self._decide(state, approval_id, msg.user, word, note=decision.note)
                if refused is not None:
                    await self.say(state, t(state.lang, refusal_key(refused)))
                return True
            if _short(msg.text):  # "3", "第三个", "👍", "what?": not an answer; the card stays
                await self._release(receipt)
                await self.say(state, t(state.lang, "approval_unclear"))
                return True
            await self._move_on(adapter, state, turn)  # a new request: the card closes, nothing runs
            return False
        if not may_answer:
            if not msg.addressed:
                return True
            if state.chat.is_group:
                # someone else's question (only its requester or an admin answers it): a member's
                # message neither answers nor closes it; it waits until the question is closed
                state.backlog.append((Queued(Message.user(msg.text), receipt), msg.user))
                return True
            return False
        if reading.kind == "moved_on":
            await self._move_on(adapter, state, turn)
            return False
        answer = {"yes": "yes", "no": "no"}.get(reading.kind, reading.value)
        await self._release(receipt)
        await self.runtime.answer(turn.id, answer)
        await self._finalize_question(turn.id, "question_answered", answer=cards.visible(answer))
        self._resume_soon(state, turn.id)
        return True

    @staticmethod
    def may_close(turn: TurnRecord, user_id: str) -> bool:
        """Whose message or command may close a waiting card or question ("moved on"): an
        approver, or the requester; never another member's."""
        return user_id == turn.requester or user_id in turn.approvers

    async def _move_on(self, adapter: ChatAdapter, state: ChatState, turn: TurnRecord) -> None:
        """Close a waiting turn because the user moved on; the card shows it."""
        assert turn.waiting is not None
        approval_id = turn.waiting.confirmation_target.get("approval_id")
        await self.runtime.answer(turn.id, "", status="moved_on")
        if approval_id:
            await self._finalize_card(approval_id, "moved_on", "")
        else:
            await self._finalize_question(turn.id, "moved_on")
        # the runtime closes the turn itself when the next run starts; mark it done now too
        await self.runtime.close_turn(turn.id)

    # ---- turns -------------------------------------------------------------------------------
    def _start(self, state: ChatState, job: AsyncIterator[ev.RuntimeEvent] | None) -> None:
        state.running = True
        state.idle.clear()
        state.cancel = state.cancel if state.cancel and not state.cancel.is_set() else CancelSignal()
        self.spawn(self._worker(state, job), name=f"turn:{state.key}")

    def _turn(
        self,
        state: ChatState,
        text: str,
        user: UserRef,
        no_open_turn: bool = False,
        receipts: tuple[Receipt, ...] = (),
        **meta: Any,
    ) -> AsyncIterator[ev.RuntimeEvent]:
        # The chat's signal is the one /cancel and shutdown set: this turn must watch that very one.
        if state.cancel is None or state.cancel.is_set():
            state.cancel = CancelSignal()
        request = TurnRequest(
            session_id=state.session_id,
            text=text,
            who=Requester(user.user_id, state.key, self.approvers_for(state.chat, user)),
            model=state.model,
            system_dynamic=self._dynamic_context(state),
            inbox=state.inbox,
            cancel=state.cancel,
            stop=self.stop_signal,
            meta=meta,
            no_open_turn=no_open_turn,
            receipts=receipts,
        )
        return self._begun(state, request)

    async def _begun(self, state: ChatState, request: TurnRequest) -> AsyncIterator[ev.RuntimeEvent]:
        """The turn, its first write retried while storage fails (the same policy as an inbound
        event's): the message is recorded already, so it waits in memory meanwhile; the chat is
        told once. A stop ends the waiting (the restart takes the record up); after the budget the
        user is asked to send it again."""
        policy = self.storage_retry
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.budget_s
        delay = policy.first_s
        told = state.chat.key  # the chats told already, shared with inbound events' retries
        while True:
            try:
                events = self.runtime.run(request)
                try:
                    async for event in events:
                        self._storage_told.discard(told)  # begun: a later fault is news again
                        yield event
                finally:  # closed with this wrapper (an early exit, a cancellation)
                    aclose = getattr(events, "aclose", None)
                    if aclose is not None:
                        await aclose()
                return
            except TurnNotBegun as exc:
                log.warning("a turn in %s could not begin; retrying: %s", state.key, exc)
                if loop.time() + delay > deadline:
                    log.error("gave up beginning a turn in %s", state.key)
                    self._storage_told.discard(told)
                    preview = _preview(request.text or "…")
                    await self.say(state, t(state.lang, "storage_gave_up", preview=preview))
                    return
                if told not in self._storage_told:
                    self._storage_told.add(told)
                    await self.say(state, t(state.lang, "storage_trouble"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_signal.wait(), delay)
            if self.stop_signal.is_set():
                return  # recorded: the restart takes the message up
            delay = min(delay * 2, policy.max_s)

    def _queued_turn(
        self, state: ChatState, queued: list[Queued], user: UserRef, **meta: Any
    ) -> AsyncIterator[ev.RuntimeEvent]:
        """One turn for messages that queued up: their texts joined, their receipts with them."""
        text = "\n\n".join(q.message.text for q in queued)
        receipts = tuple(q.receipt for q in queued if q.receipt is not None)
        return self._turn(state, text, user, receipts=receipts, **meta)

    def _dynamic_context(self, state: ChatState) -> str:
        # Stable for the day, so the prompt-cache prefix survives from turn to turn.
        today = datetime.now(UTC).strftime("%Y-%m-%d")
        lang = "Chinese" if state.lang == "zh" else "English"
        head = f"Today: {today} (UTC). Chat platform: {state.chat.platform}. Preferred language: {lang}."
        return f"{head}\n{self.system_dynamic}" if self.system_dynamic else head

    def _resume(self, state: ChatState, turn_id: str) -> AsyncIterator[ev.RuntimeEvent]:
        req = TurnRequest(
            session_id=state.session_id,
            inbox=state.inbox,
            cancel=CancelSignal(),
            stop=self.stop_signal,
            model=state.model,
            system_dynamic=self._dynamic_context(state),
        )
        state.cancel = req.cancel
        return self.runtime.resume(turn_id, req)

    async def _worker(self, state: ChatState, job: AsyncIterator[ev.RuntimeEvent] | None) -> None:
        """Runs `job`, then whatever queued up meanwhile (`None`: only the queue), one at a time."""
        adapter = self.adapters[state.chat.platform]
        try:
            while True:
                done: ev.Done | None = None
                if job is not None:
                    view = TurnView(
                        adapter,
                        state.chat,
                        state.lang,
                        on_approval=lambda e: self._send_card(state, e),
                        on_question=lambda e: self._send_question(state, e),
                        board=self.progress_board,
                        key=state.key,
                        sleep=self.typing_sleep,
                        stop=self.stop_signal,
                        on_paused=lambda sent, record: self._remember(
                            f"progress:{state.key}", state, sent, **record
                        ),
                        on_partial=lambda sent: self._remember(
                            f"partial:{state.key}", state, sent[0], ids=[m.message_id for m in sent]
                        ),
                        adopt=self._partials.pop(state.key, None),
                    )
                    try:
                        done = await render_all(view, job)
                    except Exception:
                        log.exception("turn in %s failed", state.key)
                        await self.say(
                            state, t(state.lang, "error", error="internal error; the details are in the log")
                        )
                if self.stopping:
                    return  # queued messages stay recorded: the restart takes them up
                if done is not None and done.turn_id in state.undelivered:
                    await self._close_undelivered(state, done)
                if state.wake:  # answered or decided while this worker ran: it goes on now
                    job = self._resume(state, state.wake.pop())
                    continue
                # Messages that arrived after the last model call start the next turn: never dropped.
                leftovers: list[Queued] = []
                while not state.inbox.empty():
                    leftovers.append(state.inbox.get_nowait())
                user = state.last_user or UserRef(state.chat.platform, "")
                # a turn that ended (not suspended) leaves nothing waiting: no need to ask the store
                ended = done is not None and done.status != "suspended"
                if not ended and await self._waiting_turn(state) is not None:
                    # the turn is waiting on a card: these wait for the decision instead of
                    # silently cancelling it as "moved on"
                    state.backlog.extend((q, user) for q in leftovers)
                    if state.wake:  # decided during the await above: resume it (loop top)
                        job = None
                        continue
                    return
                if state.backlog:  # they waited for a decision; nothing is waiting any more
                    backlog, state.backlog = state.backlog, []
                    if not leftovers:
                        user = backlog[-1][1]
                    leftovers = [q for q, _ in backlog] + leftovers
                state.cancel = CancelSignal()
                if leftovers:
                    job = self._queued_turn(state, leftovers, user)
                elif state.notices:
                    # task notices wait for the user's turn to end, then get a turn of their own
                    notices, state.notices = state.notices, []
                    job = self._queued_turn(state, notices, user, notification=True)
                elif state.wake:
                    job = None  # the loop's top resumes it
                else:
                    return  # `state.wake` was checked with no await since: nothing is left behind
        finally:
            state.running = False
            state.cancel = None
            state.idle.set()

    def _resume_soon(self, state: ChatState, turn_id: str) -> None:
        """Resume a turn that was answered or decided. While the chat's worker runs (the turn may
        still be finishing its suspension) the worker resumes it, never a second turn at once."""
        if state.running:
            state.wake.add(turn_id)
        else:
            self._start(state, self._resume(state, turn_id))

    async def _close_undelivered(self, state: ChatState, done: ev.Done) -> None:
        """What the turn waits on reached nobody: close it now (an approval is denied, a question
        unanswered) rather than let the chat wait for its expiry."""
        state.undelivered.discard(done.turn_id)
        if done.status == "suspended":
            await self.runtime.answer(done.turn_id, "", status="undeliverable")
            state.wake.add(done.turn_id)

    def submit_system_turn(self, state: ChatState, text: str, receipt: Receipt | None = None) -> None:
        """Wake a turn with a system notification (background task finished); queued behind a
        running turn, never mixed into the user's own message. `receipt`: the notice is recorded
        until its turn has stored it."""
        queued = Queued(Message.user(text), receipt)
        if state.running:
            state.notices.append(queued)  # its own turn once the running one ends
            return
        user = state.last_user or UserRef(state.chat.platform, "")
        self._start(state, self._queued_turn(state, [queued], user, notification=True))

    # ---- approvals and questions ------------------------------------------------------------
    async def _send_card(self, state: ChatState, event: ev.ApprovalRequired) -> None:
        record = await self.store.get_approval(event.approval_id)
        if record is None:
            return
        card, buttons = cards.approval_view(
            record, state.lang, await self.card_info(record, state.chat, state.lang)
        )
        sent = await self._send_waiting(state, event.turn_id, card, buttons)
        if sent is None:
            return
        await self._remember(f"card:{record.id}", state, sent)
        record = await self.store.get_approval(record.id)
        if record is not None and record.status != "pending":  # decided while the card was in flight
            await self._finalize_card(record.id, record.decision or record.status, record.decided_by)

    async def card_info(self, record: ApprovalRecord, chat: ChatRef, lang: str = "en") -> cards.CardInfo:
        note = self.card_notes.get(record.tool)
        trade = None
        if self.trade_facts is not None:
            try:
                trade = await self.trade_facts(record)
            except Exception:  # the card still shows the raw arguments
                log.warning("no trade facts for the card of %s", record.id, exc_info=True)
        return cards.CardInfo(
            expires_at=record.expires_at,
            group=chat.is_group,
            scope=self.runtime.gate.scope_for(record),
            standing_hours=self.runtime.gate.standing_ttl.total_seconds() / 3600,
            trade=trade,
            note=note(lang) if note else "",
        )

    async def _send_question(self, state: ChatState, event: ev.Question) -> None:
        turn = await self.store.load_turn(event.turn_id)
        if turn is None or turn.waiting is None:
            return
        text, buttons = cards.question_prompt(turn.waiting, event.turn_id)
        sent = await self._send_waiting(state, event.turn_id, text, buttons)
        if sent is not None and buttons:  # its buttons are taken away once it is answered
            await self._remember(f"question:{event.turn_id}", state, sent, text=text)

    async def _send_waiting(
        self, state: ChatState, turn_id: str, text: str | Card, buttons: list[list[Button]]
    ) -> SentMessage | None:
        """Send what a suspended turn waits on. Nobody can answer what nobody sees: if it cannot
        be delivered, the worker closes it as soon as the turn has suspended (an approval is then
        denied, never allowed) instead of letting it wait for its expiry."""
        adapter = self.adapters[state.chat.platform]
        try:
            if isinstance(text, Card):  # an approval card: an embed on Discord
                return await adapter.send_card(state.chat, text, buttons=buttons or None)
            return await adapter.send_text(state.chat, text, buttons=buttons or None)
        except DeliveryError as exc:
            log.warning("could not deliver what turn %s waits on; closing it: %s", turn_id, exc)
            state.undelivered.add(turn_id)
            return None

    async def _remember(self, key: str, state: ChatState, sent: SentMessage, **extra: Any) -> None:
        """Where a card or question went, so it can be edited to its final state later."""
        c = state.chat
        ref = {"platform": c.platform, "chat_id": c.chat_id, "thread_id": c.thread_id,
               "is_group": c.is_group, "message_id": sent.message_id, "lang": state.lang}  # fmt: skip
        await self.store.kv_set(key, {**ref, **extra})

    async def _sent(self, key: str) -> tuple[SentMessage, ChatAdapter, dict[str, Any]] | None:
        ref = await self.store.kv_get(key)
        adapter = self.adapters.get(ref["platform"]) if ref else None
        if not ref or adapter is None:
            return None
        chat = ChatRef(ref["platform"], ref["chat_id"], ref.get("thread_id"), ref.get("is_group", False))
        return SentMessage(chat, ref["message_id"]), adapter, ref

    async def _card_ref(self, approval_id: str) -> SentMessage | None:
        found = await self._sent(f"card:{approval_id}")
        return found[0] if found else None

    async def _finalize_card(self, approval_id: str, outcome: str, who: str) -> None:
        found = await self._sent(f"card:{approval_id}")
        record = await self.store.get_approval(approval_id)
        if found is None or record is None:
            return
        msg, adapter, ref = found
        rule = ""
        if outcome == "always":
            rules = await self.store.list_standing(record.chat_key, datetime.now(UTC), record.tool)
            rule = next((r.id for r in rules if r.approval_id == approval_id), "")
        with contextlib.suppress(DeliveryError):
            await adapter.edit_text(
                msg, cards.approval_final(record, ref.get("lang", "en"), outcome, who, rule), buttons=None
            )

    async def _finalize_question(self, turn_id: str, line: str, **fields: Any) -> None:
        """The question's buttons go; a line says how it ended (`line`: an i18n key)."""
        found = await self._sent(f"question:{turn_id}")
        if found is None:
            return
        msg, adapter, ref = found
        with contextlib.suppress(DeliveryError):
            await adapter.edit_text(
                msg, f"{ref['text']}\n{t(ref.get('lang', 'en'), line, **fields)}", buttons=None
            )

    async def _decide(
        self, state: ChatState, approval_id: str, user: UserRef, decision: str, note: str = ""
    ) -> ApprovalError | None:
        """Apply a decision; returns None on success or why it was refused."""
        record = await self.store.get_approval(approval_id)
        if record is not None and record.chat_key and record.chat_key != state.key:
            return ApprovalForeignChat()  # chat A never resolves B's approval
        try:
            record = await self.runtime.decide(approval_id, user.user_id, decision, note)  # type: ignore[arg-type]
        except ApprovalExpired as exc:
            await self._expire(approval_id)
            return exc
        except ApprovalError as exc:
            return exc
        who = user.display_name or user.user_id
        await self._finalize_card(approval_id, decision, who)
        self._resume_soon(state, record.turn_id)
        await self._release_backlog(state)
        return None

    async def _expire(self, approval_id: str) -> None:
        record = await self.store.get_approval(approval_id)
        if record is None:
            return
        turn = await self.store.load_turn(record.turn_id)
        await self._finalize_card(approval_id, "expired", "")
        if turn is not None and turn.status == "suspended":
            await self.runtime.answer(turn.id, "", status="no_answer")
            state = self.chats.find_by_session(turn.session_id)
            if state is not None:
                self._resume_soon(state, turn.id)

    async def expire_due(self, now: datetime | None = None) -> int:
        """Expire approvals and questions whose time ran out (silence is never consent)."""
        now = now or datetime.now(UTC)
        count = 0
        for turn in await self.store.open_turns():
            if turn.status != "suspended":
                continue
            w = turn.waiting
            if w is None or w.expires_at is None or w.expires_at > now:
                continue
            count += 1
            approval_id = w.confirmation_target.get("approval_id")
            if approval_id:
                await self._expire(approval_id)
            else:
                await self.runtime.answer(turn.id, "", status="no_answer")
                await self._finalize_question(turn.id, "question_expired")
                state = self.chats.find_by_session(turn.session_id)
                if state is not None:
                    self._resume_soon(state, turn.id)
        return count

    async def _on_button(self, adapter: ChatAdapter, state: ChatState, press: ButtonPress) -> None:
        parsed = cards.parse_callback(press.data)
        if parsed is None:
            await press.ack(t(state.lang, "approval_stale"), False)
            return
        kind, ident = parsed
        if kind.startswith("q"):
            turn = await self.store.load_turn(ident)
            if (
                turn is None
                or turn.waiting is None
                or turn.status != "suspended"
                or turn.session_id != state.session_id
            ):
                await press.ack(t(state.lang, "approval_stale"), False)
                return
            uid = press.user.user_id
            if uid != turn.requester and uid not in turn.approvers:
                await press.ack(t(state.lang, "approval_not_allowed"), True)
                return
            index = int(kind[1:])
            if not 1 <= index <= len(turn.waiting.options):
                await press.ack(t(state.lang, "approval_stale"), False)
                return
            await press.ack("", False)
            choice = turn.waiting.options[index - 1]
            await self.runtime.answer(turn.id, choice)
            await self._finalize_question(turn.id, "question_answered", answer=cards.visible(choice))
            self._resume_soon(state, turn.id)
            return
        record = await self.store.get_approval(ident)
        scope = self.runtime.gate.scope_for(record) if record is not None else None
        word = read_consent("button", kind, scope=scope).gate_decision
        refused = (
            await self._decide(state, ident, press.user, word)
            if word
            else ApprovalNotFound("this button is no longer valid")
        )
        if refused is not None:
            key = refusal_key(refused)
            await press.ack(t(state.lang, key), isinstance(refused, NotAnApprover))
        else:
            await press.ack("", False)

    async def _release_backlog(self, state: ChatState) -> None:
        """A decision was made: what waited for it joins the resumed turn (if that turn stops
        at another card, `_worker` puts it back)."""
        if state.backlog:
            for item, user in state.backlog:
                state.inbox.put_nowait(item)
                state.last_user = user
            state.backlog.clear()
            if not state.running:
                queued = [state.inbox.get_nowait() for _ in range(state.inbox.qsize())]
                user = state.last_user or UserRef(state.chat.platform, "")
                self._start(state, self._queued_turn(state, queued, user))

    async def decide_by_command(
        self, state: ChatState, user: UserRef, approval_id: str, command: str
    ) -> ApprovalError | None:
        """/approve <id> or /deny <id>, read by the one decision function; None when applied."""
        decision: ConsentDecision = read_consent("command", command)
        word = decision.gate_decision
        if word is None:
            return ApprovalError("unknown decision")
        return await self._decide(state, approval_id, user, word)

    # ---- background tasks and scheduled briefs ----------------------------------------------
    async def notify_task(self, record: Any) -> None:
        """A background task finished: a system notification wakes a turn in its chat."""
        from agent.background_tools import task_notification_text

        state = await self.chats.by_key(record.chat_key)
        if state is None or state.chat.platform not in self.adapters:
            log.warning("task %s finished but chat %s is unknown here", record.id, record.chat_key)
            return
        msg = self._task_messages.pop(record.id, None)
        if msg is not None:
            with contextlib.suppress(DeliveryError):
                mark = "✓" if record.status == "succeeded" else "✗"
                await self.adapters[state.chat.platform].edit_text(
                    msg, f"{mark} {record.tool_name} · {record.id} · {record.status}", format="plain"
                )
        # The ledger counts the notice as delivered once this returns: record it until its turn
        # has stored it, so a crash before then does not lose it.
        text = task_notification_text(record)
        receipt = (NOTICES, str(record.id))
        if not await self.store.receive_message(*receipt, notice_record(state.key, text)):
            return  # recorded before: already delivered (or waiting to be taken up)
        await self._send_attachments(state, record)
        self.submit_system_turn(state, text, receipt)

    async def _send_attachments(self, state: ChatState, record: Any) -> None:
        """What the task produced for the user (a backtest's chart) goes to the chat as it is:
        images as photos, other files as documents where the platform has them."""
        adapter = self.adapters[state.chat.platform]
        for att in getattr(record, "attachments", None) or []:
            try:
                if str(att.mime).startswith("image/"):
                    await adapter.send_image(state.chat, att.path, att.caption)
                elif (send_file := getattr(adapter, "send_file", None)) is not None:
                    await send_file(state.chat, att.path, att.caption)
                else:
                    await adapter.send_text(state.chat, f"📎 {att.path}", format="plain")
            except (DeliveryError, OSError) as exc:
                log.warning("attachment %s of task %s not delivered: %s", att.path, record.id, exc)

    async def task_progress(self, record: Any) -> None:
        """One status message per task, edited as progress arrives (the manager throttles it)."""
        state = await self.chats.by_key(record.chat_key)
        if state is None or state.chat.platform not in self.adapters or record.terminal:
            return
        pct = f" {record.percent:.0f}%" if record.percent is not None else ""
        text = (
            f"⏳ {record.tool_name} · {record.id}: {record.stage or record.status}{pct} {record.detail or ''}"
        )
        adapter = self.adapters[state.chat.platform]
        try:
            msg = self._task_messages.get(record.id)
            if msg is None:
                self._task_messages[record.id] = await adapter.send_text(
                    state.chat, text.rstrip(), format="plain"
                )
            else:
                await adapter.edit_text(msg, text.rstrip(), format="plain")
        except DeliveryError as exc:
            log.debug("task progress not shown: %s", exc)

    async def run_brief(self, chat_key: str, text: str) -> None:
        """An unattended turn (approval-requiring tools are denied) whose answer is delivered into
        the chat. Raises if it cannot be delivered, so the scheduler retries with backoff."""
        state = await self.chats.by_key(chat_key)
        if state is None or state.chat.platform not in self.adapters:
            raise DeliveryError(f"chat {chat_key} is not reachable on a running adapter")
        while state.running:  # behind the user's own turn, never interleaved with it
            await state.idle.wait()
        state.running = True
        state.idle.clear()
        try:
            request = TurnRequest(
                session_id=state.session_id,
                text=text,
                who=Requester(state.owner, state.key, (), unattended=True),
                model=state.model,
                system_dynamic=self._dynamic_context(state),
                meta={"brief": True},
                stop=self.stop_signal,
            )
            final = ""
            async for event in self.runtime.run(request):
                if isinstance(event, ev.Done):
                    if event.status == "interrupted":
                        raise DeliveryError("the bot is stopping; the brief was not finished")
                    final = event.text
                elif isinstance(event, ev.ErrorEvent):
                    raise DeliveryError(event.message)
            await self.adapters[state.chat.platform].send_text(state.chat, final or "(empty brief)")
        finally:
            state.running = False
            state.idle.set()
        if not state.inbox.empty() or state.notices:
            self._start(state, None)  # what queued up behind the brief

    def run_skill(self, state: ChatState, text: str, user: UserRef) -> None:
        """A skill command (/checkup …): its instructions become this turn's message."""
        if state.running:
            state.inbox.put_nowait(Queued(Message.user(text)))
            return
        self._start(state, self._turn(state, text, user))
