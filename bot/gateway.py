"""The router: every inbound chat event goes through here.

    access check → durable de-duplication → chat state → button | command | message

Access is bot/access.py; the first write of an event is retried while storage fails
(bot/retry.py); a button or a reply to what a suspended turn waits on goes to bot/waiting.py; a
message that starts or joins a turn goes to the chat's lane (bot/lanes.py), which runs one turn at
a time per chat. A message that may queue is recorded with its update id (one INSERT) until it is
in the session's history, so one still queued at a crash or a stop is taken up after the restart
(bot/recovery.py). Background-task notices are bot/task_notices.py.

Replicas on one PostgreSQL database (bot/replicas.py): a message is stored, filed under its chat,
and taken up by whichever replica holds the chat, in arrival order; a tap, a command or a brief
waits for the chat's lease and runs where it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from adapters.base import (
    ButtonPress,
    ChatAdapter,
    DeliveryError,
    Inbound,
    InboundCommand,
    InboundMessage,
)
from agent import (
    AgentRuntime,
    CancelSignal,
    LiveQuestions,
    Message,
    Receipt,
)
from bot import cards
from bot.access import Access, PairedStore, PlatformAccess
from bot.briefs import ChatBriefs
from bot.chat_output import ChatOutput
from bot.chats import ChatDirectory, ChatState, ChatStore
from bot.commands import Command, CommandRegistry, Handler, builtin_commands
from bot.commands.binding import CommandParts, bind
from bot.commands.context import CommandServices
from bot.day_header import DayHeader
from bot.i18n import pick_language, t
from bot.lanes import LaneDeps, Lanes, is_waiting
from bot.live_questions import ChatQuestions
from bot.progress import ProgressBoard
from bot.received import inbound_from_record, pending_record
from bot.recovery import Recovery, RecoveryStore
from bot.replicas import ChatLeases
from bot.retry import StoragePatience
from bot.task_notices import TaskNotices
from bot.waiting import CardFacts, Waiting, WaitingStore, may_close

log = logging.getLogger(__name__)

MAX_INBOUND_CHARS = 16_000
WAIT_FOR_CHAT_S = 20.0  # a tap, a command or a brief waits this long for another replica's turn


class GatewayStore(WaitingStore, RecoveryStore, ChatStore, PairedStore, Protocol):
    async def mark_update_processed(self, platform: str, update_id: str) -> bool: ...

    async def receive_message(
        self, platform: str, update_id: str, pending: dict[str, Any] | None
    ) -> bool: ...

    async def load_messages(self, session_id: str) -> list[Message]: ...

    async def replace_messages(self, session_id: str, messages: list[Message]) -> None: ...

    async def revoke_standing(self, chat_key: str | None, rule_id: str | None) -> int: ...


def _may_queue(msg: InboundMessage) -> bool:
    """Could this message wait in a queue (behind a running turn or an approval) or start a
    turn? Then it is recorded until it is in the history. Empty, oversized and unaddressed
    messages never are (an unaddressed one only ever answers a question, at once)."""
    return msg.addressed and bool(msg.text.strip()) and len(msg.text) <= MAX_INBOUND_CHARS


class Gateway:
    """The router and the composition of the chat parts. The parts reach the chats through one
    `ChatOutput`, not through the gateway; commands reach the parts themselves (`CommandParts`);
    the scheduler's briefs go to the lanes through `briefs` (bot/briefs.py). Lanes and the recovery see the
    router only as it reads a message, adopts a chat and lets an idle one go."""

    def __init__(
        self,
        runtime: AgentRuntime,
        store: GatewayStore,
        access: dict[str, PlatformAccess],
        *,
        services: CommandServices | None = None,
        skill_commands: Sequence[Command] = (),
        card_facts: CardFacts | None = None,
        system_dynamic: str = "",
        chat_lock: ChatLeases | None = None,
        brief_line: Callable[[str], Awaitable[str]] | None = None,
    ):
        self.runtime = runtime
        # several replicas on one database: a chat runs where its lease is (bot/replicas.py)
        self.replicas = chat_lock
        self.store = store
        self.access = Access(access, store)
        self.chats = ChatDirectory(store)
        # the commands (bot/commands/): the built-ins and one per skill (never shadowing a
        # built-in); their services come from the composition root, with the specs for /help
        self.commands = CommandRegistry(builtin_commands())
        for command in skill_commands:
            self.commands.setdefault(command)
        self.command_services = replace(
            services or CommandServices(runtime, store), specs=self.commands.specs
        )
        # set by drain(): every turn ends at its next durable step and is resumed after the restart
        self.stop_signal = CancelSignal()
        # cleared while the restart's recovery runs: an update that arrives meanwhile (a tap's
        # redelivery, the next message, /brief now) waits for it, so it never closes a turn the
        # recovery is about to resume (an approved order must run, not be "moved on")
        self._recovered = asyncio.Event()
        self._recovered.set()
        # a suspended turn's progress message, continued when it resumes (bot/progress.py)
        self.progress_board = ProgressBoard()
        # what every chat part needs to reach the chats (bot/chat_output.py)
        self.output = ChatOutput(
            store,
            self.chats,
            board=self.progress_board,
            stop=self.stop_signal,
            crash_kept=chat_lock is not None,
        )
        self.adapters = self.output.adapters  # the running chat adapters, by platform
        self.retry = StoragePatience(self.adapters)
        self.lanes = Lanes(
            LaneDeps(
                runtime=runtime,
                output=self.output,
                router=self,
                turns=store,
                patience=self.retry,
                approvers=self.access,
                header=DayHeader(system_dynamic),
                stop=self.stop_signal,
                chat_lock=chat_lock,
                recovered=self._recovered,
            )
        )
        self.waiting = Waiting(runtime, store, self.output, self.chats, self.lanes, card_facts)
        # an MCP server's question during a tool call is asked in the chat and answered here
        self.questions = ChatQuestions(self.chats, self.adapters)
        runtime.deps.add(self.questions, as_type=LiveQuestions)
        self.command_parts = CommandParts(self.chats, self.lanes, self.waiting, self.output)
        self.notices = TaskNotices(store, self.output, self.chats, self.lanes)
        self.recovery = Recovery(
            runtime, store, self.output, self.access, self.chats, self.lanes, self,
            board=self.progress_board, inbox=chat_lock.inbox if chat_lock is not None else None,
        )  # fmt: skip
        self.output.shows_with(self.waiting, self.recovery)
        # the scheduler's briefs, each into its chat's lane (bot/briefs.py)
        self.briefs = ChatBriefs(self.chats, self.output, self.lanes, self, data_line=brief_line)

    @property
    def stopping(self) -> bool:
        """drain() began: queued messages wait for the restart."""
        return self.stop_signal.is_set()

    # ---- lifecycle ---------------------------------------------------------------------------
    async def drain(self, grace: float = 20.0) -> None:
        """Stop taking new work; running turns get `grace` seconds to reach their next durable
        step (a stored model answer or tool result), then what still runs is cut off. Either way
        the turn stays open and the recovery takes it up after the restart, as after a crash.
        Messages still queued start nothing: they stay recorded for the restart."""
        self.stop_signal.set()
        if self.output.tasks:
            await asyncio.wait(set(self.output.tasks), timeout=grace)
        busy = list(self.output.tasks)
        for task in busy:
            task.cancel()
        if busy:  # their last writes (the open turn, a cut-off call) land before the database closes
            await asyncio.wait(busy, timeout=5.0)

    def recovering(self) -> None:
        """Inbound events wait until `recovered()`: the restart's recovery goes first."""
        self._recovered.clear()

    def recovered(self) -> None:
        self._recovered.set()

    # ---- inbound -----------------------------------------------------------------------------
    async def handle(self, inbound: Inbound) -> None:
        """The adapter's handler. Returns once the event is accepted; turns run as tasks. A tap
        whose handling fails is answered in the chat (its quiet acknowledgement may be used up
        or may have failed): the user is asked to tap again."""
        await self._recovered.wait()
        try:
            await self._handle(inbound)
        except Exception:
            if not isinstance(inbound, ButtonPress):
                raise
            log.exception("button press %s in %s failed", inbound.update_id, inbound.chat.key)
            await self.retry.tell(inbound, "button_failed")

    async def _handle(self, inbound: Inbound) -> None:
        user = inbound.user
        adapter = self.adapters.get(inbound.chat.platform)
        if adapter is None:
            return
        if not self.access.allowed(user):
            if not await self.access.try_pairing(adapter, inbound):
                await self.access.deny(adapter, inbound)
            return
        if self.stopping and not isinstance(inbound, InboundMessage):
            await self._restarting(adapter, inbound)
            return
        # A message that may queue is recorded with its id until it is in the history (one INSERT).
        platform, update_id = inbound.chat.platform, inbound.update_id
        receipt: Receipt | None = None
        stored: bool | None
        decision_tap = isinstance(inbound, ButtonPress) and isinstance(
            cards.parse_callback(inbound.data), cards.CardTap
        )
        if decision_tap:
            # recorded by the decision's own transaction (bot/waiting.py): never one without the
            # other; a redelivered tap finds its approval decided and changes nothing
            receipt, stored = (platform, update_id), True
        elif isinstance(inbound, InboundMessage) and _may_queue(inbound):
            receipt = (platform, update_id)
            pending = pending_record(inbound)
            stored = await self.retry.stored(inbound, lambda: self.store.receive_message(*receipt, pending))
        else:
            stored = await self.retry.stored(
                inbound, lambda: self.store.mark_update_processed(platform, update_id)
            )
        if stored is None:
            return  # storage failed for the whole retry budget: the user was asked to send it again
        shared = self.replicas
        message = receipt if isinstance(inbound, InboundMessage) else None  # stored, may queue
        # replicas: a redelivered message may be one a replica that died had stored and never
        # answered; filing it again is harmless (one already in a history is not taken up)
        if not stored and not (shared is not None and message is not None):
            if isinstance(inbound, ButtonPress):
                with contextlib.suppress(Exception):
                    await inbound.ack("", False)
            return  # a redelivered update: already handled
        acc = self.access.platforms[platform]
        speaker = "" if isinstance(inbound, ButtonPress) else user.user_id  # a tap never makes an owner
        state = await self.chats.get(
            inbound.chat, user, acc.group_sessions, pick_language(user.language_code), owner=speaker
        )
        state.chat = inbound.chat
        self.lanes.of(state).spoke(user)
        if speaker and state.owner != speaker:
            state.owner = user.user_id
            await self.chats.save(state)
        if self.stopping:  # recorded (a message that may queue): taken up after the restart
            if message is not None and shared is not None:  # … or by a replica that goes on
                await shared.inbox.file(state.key, message)
            if receipt is not None and not decision_tap:
                await self.output.say(state, t(state.lang, "restarting_kept"))
            return
        if shared is not None:
            if message is not None:
                await shared.inbox.file(state.key, message)
                await self.adopt(state)  # here, or by the replica that runs the chat now
                return
            if not await self._hold_chat(state, inbound):
                return
        if isinstance(inbound, ButtonPress):
            tapped = self.questions.answer_tap(state.key, user.user_id, inbound.data)
            if tapped is None:
                await self.waiting.on_button(state, inbound, receipt if decision_tap else None)
            else:
                with contextlib.suppress(Exception):
                    await inbound.ack("✅" if tapped else t(state.lang, "approval_stale"), not tapped)
        elif isinstance(inbound, InboundCommand):
            await self._on_command(state, inbound)
        else:
            await self.on_message(state, inbound, receipt)
        if shared is not None:
            await self._settle(state)

    # ---- several replicas (bot/replicas.py) ----------------------------------------------------
    async def adopt(self, state: ChatState) -> bool:
        """Run the chat here if no other live replica does: take its lease, take up its stored
        messages oldest first, and let it go again if that started nothing. False: another
        replica runs the chat, and takes the messages up itself."""
        shared = self.replicas
        if shared is None:
            return True
        fresh = state.key not in shared.held
        if not await shared.take(state.key):
            return False
        if fresh:  # another replica may have changed the chat (/new, /model) meanwhile
            await self._fresh_hold(shared, state)
        await self._take_up(state)
        await self._settle(state)
        return True

    async def _fresh_hold(self, shared: ChatLeases, state: ChatState) -> None:
        """The chat was just taken here: as stored now (another replica may have started a new
        session or changed its model), and the turn a dead replica left running is resumed
        before the messages that arrived after it."""
        await self.chats.reload(state)
        if shared.taken_over(state.key):
            log.info("taking over chat %s from a replica that stopped answering", state.key)
            await self.recovery.resume_interrupted(chat_key=state.key)

    async def _hold_chat(self, state: ChatState, inbound: Inbound) -> bool:
        """A tap or a command runs here once the chat is held here, after the chat's stored
        messages (it arrived after them); if another replica's turn does not end in time, the
        user is asked to try again."""
        if not await self.hold(state):
            await self.retry.tell(
                inbound, "button_failed" if isinstance(inbound, ButtonPress) else "busy_elsewhere"
            )
            return False
        return True

    async def hold(self, state: ChatState) -> bool:
        """Replicas: wait (a while) until the chat is held here, then take up its stored messages
        first (they arrived before what waits for the chat). False: another replica's turn did
        not end in time. Always True for a single process."""
        shared = self.replicas
        if shared is None:
            return True
        fresh = state.key not in shared.held
        if not await shared.wait_take(state.key, WAIT_FOR_CHAT_S):
            return False
        if fresh:
            await self._fresh_hold(shared, state)
        await self._take_up(state)
        return True

    async def _take_up(self, state: ChatState) -> int:
        """The chat's stored messages this replica has not taken yet, oldest first, each its usual
        way (the chat is held here)."""
        shared = self.replicas
        if shared is None:
            return 0
        taken = 0
        async with shared.lock(state.key):
            for w in await shared.untaken(state.key):
                try:
                    msg = inbound_from_record(w.receipt[1], w.record)
                except ValueError as exc:
                    log.warning("received message %s:%s dropped: %s", *w.receipt, exc)
                    await self.store.release_received([w.receipt])
                    continue
                state.chat = msg.chat
                self.lanes.of(state).spoke(msg.user)
                try:
                    await self.on_message(state, msg, w.receipt)
                except Exception:  # one message's failure must not hold up the ones after it
                    log.exception("received message %s:%s could not be taken up", *w.receipt)
                taken += 1
        return taken

    async def _settle(self, state: ChatState) -> None:
        """The chat's lane is idle: let the chat go — unless messages were filed for it
        meanwhile by other replicas, which are taken up first. What the idle lane holds for a
        decision stays stored: whoever runs the chat next takes it up again."""
        shared = self.replicas
        if shared is None or self.stopping:
            return
        lane = self.lanes.of(state)
        while not lane.is_running and state.key in shared.held:
            async with shared.lock(state.key):
                if lane.is_running:
                    return
                if await shared.let_go(state.key, lane.held_receipts()):
                    lane.forget_held()
                    return
            if not await self._take_up(state) and not lane.is_running:
                await asyncio.sleep(0.05)  # a message being filed under the chat right now

    def lane_idle(self, state: ChatState) -> None:
        """A lane has nothing left to run: with replicas, the chat is let go in the background."""
        if self.replicas is not None and not self.stopping:
            self.output.spawn(self._settle_quietly(state), f"settle:{state.key}")

    async def _settle_quietly(self, state: ChatState) -> None:
        try:
            await self._settle(state)
        except Exception:  # the lease expires by itself; a survivor's sweep takes the chat up
            log.warning("could not let chat %s go; its lease will expire", state.key, exc_info=True)

    async def take_over(self, chat_key: str) -> None:
        """A chat whose replica stopped renewing its lease (a crash, a kill -9): the turns it left
        running are resumed and its stored messages taken up here, now."""
        shared = self.replicas
        if shared is None or self.stopping or chat_key in shared.held or not await shared.take(chat_key):
            return
        state = await self.chats.by_key(chat_key)
        if state is None or state.chat.platform not in self.adapters:
            await shared.give_back(chat_key)
            return
        await self.chats.reload(state)
        # only a lease taken from a dead replica has a turn to resume; a message whose receiver
        # died before taking its chat has none (and this replica may have taken the chat for a
        # message of its own meanwhile: its turn is running here, not to be resumed)
        if shared.taken_over(chat_key):
            log.info("taking over chat %s from a replica that stopped answering", chat_key)
            await self.recovery.resume_interrupted(chat_key=chat_key)
        await self._take_up(state)
        await self._settle(state)

    async def _on_command(self, state: ChatState, cmd: InboundCommand) -> None:
        """Admin-only commands are refused to members in groups; a command that does not keep
        what the chat waits on closes it ("moved on"); an unknown one is answered."""
        if self.commands.admin_only_in_groups(cmd.name) and not self.access.is_admin(cmd.chat, cmd.user):
            await self.output.say(state, t(state.lang, "admin_only", name=cmd.name))
            return
        waiting = await self.waiting.waiting_turn(state)
        if (
            waiting is not None
            and not self.commands.keeps_waiting(cmd.name)
            and may_close(waiting, cmd.user.user_id)
        ):
            await self.waiting.move_on(state, waiting)
        command = self.commands.get(cmd.name)
        if command is None:
            await self.output.say(state, t(state.lang, "unknown_command", name=cmd.name[:32]))
            return
        await self._run_command(command.handler, state, cmd)

    async def _run_command(self, handler: Handler, state: ChatState, cmd: InboundCommand) -> None:
        """The one place a command handler is called. Every command answers: a handler that fails
        is logged and the chat gets a short error in its language (never the exception's text,
        which may carry internals)."""
        try:
            await handler(bind(self.command_parts, self.command_services, state, cmd))
        except Exception:
            log.exception("command /%s failed in %s", cmd.name, state.key)
            await self.output.say(state, t(state.lang, "command_failed", name=cmd.name[:32]))

    async def _restarting(self, adapter: ChatAdapter, inbound: Inbound) -> None:
        """A command or a tap while the bot stops: not acted on (it would start new work); the
        user is asked to repeat it in a moment."""
        lang = pick_language(inbound.user.language_code)
        if isinstance(inbound, ButtonPress):
            with contextlib.suppress(Exception):
                await inbound.ack(t(lang, "restarting_again"), True)
            return
        with contextlib.suppress(DeliveryError):
            await adapter.send_text(inbound.chat, t(lang, "restarting_again"), format="plain")

    async def on_message(self, state: ChatState, msg: InboundMessage, receipt: Receipt | None = None) -> None:
        """The router's reading of a message (also of one taken up after a restart, or one that
        reached a lane while its turn's card or question was on its way). `receipt`: the message
        is recorded (`_may_queue`) until it is in the history; every path either hands it on with
        the message or releases it."""
        text = msg.text or ""
        if not text.strip():
            await self.output.say(state, t(state.lang, "unsupported"))
            return
        if len(text) > MAX_INBOUND_CHARS:
            await self.output.say(state, t(state.lang, "too_long", size=len(text), limit=MAX_INBOUND_CHARS))
            return
        if self.questions.answer_text(state.key, msg.user.user_id, text):  # a tool call waits on it
            if receipt is not None:
                await self.store.release_received([receipt])
            return
        lane = self.lanes.of(state)
        open_turn = await self.store.open_turn(state.session_id)
        # A running lane is folded into, unless its turn has just suspended: the card or question
        # is out while the lane finishes, and this message may be its answer (the lane wakes).
        if lane.is_running and not is_waiting(open_turn):
            if msg.addressed:
                lane.fold_in(msg, receipt)
            return
        if is_waiting(open_turn):
            assert open_turn is not None
            if await self.waiting.answer_message(state, open_turn, msg, receipt):
                return
        elif not msg.addressed:
            return  # group chatter that isn't for us
        lane.submit_message(text, msg.user, receipt, no_open_turn=open_turn is None)
