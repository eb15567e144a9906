"""After a restart (a stop or a crash): answers stored but not sent are sent, turns left running
are resumed, messages and task notices left queued are taken up, the progress message a stop
paused shows its final state, and an answer a stop cut off mid-stream is replaced by the resumed
turn's instead of repeated. What is older than its platform's `max_backlog_age_s` is not run;
its chat is told.

With replicas on one database, only chats this replica can hold are taken up: a chat another live
replica holds now is left to it (its open turn and its queued messages are its own). A chat taken
here has its messages filed and taken up through the router's `adopt` (oldest first, with those
other replicas file meanwhile); the same recovery, for one chat, is how a survivor takes over the
chats of a replica that died (bot/gateway.py `take_over`)."""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.base import DeliveryError, InboundMessage, SentMessage, UserRef
from adapters.stream import StreamingMessage
from agent.ports import ApprovalRecord, Receipt, TurnRecord
from agent.runtime import AgentRuntime
from bot.access import Access
from bot.chat_output import ChatOutput
from bot.chats import ChatDirectory, ChatState
from bot.i18n import pick_language, t
from bot.lanes import Lanes
from bot.progress import FAILED, OK, PAUSED, RUNNING, WAITING, ProgressBoard, ProgressLine, settled_text
from bot.received import NOTICES, inbound_from_record, notice_from_record
from bot.retry import preview
from bot.sent import SentStore, forget_sent, sent_ref
from memory.chat_tables import PausedProgress
from memory.replica_inbox import ReplicaInbox

log = logging.getLogger(__name__)


class RecoveryStore(SentStore, Protocol):
    async def received_pending(self) -> list[tuple[Receipt, datetime, dict[str, Any]]]: ...

    async def release_received(self, receipts: list[Receipt]) -> None: ...

    async def open_turns(self) -> list[TurnRecord]: ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    async def load_turn(self, turn_id: str) -> TurnRecord | None: ...

    async def unsent_answers(self) -> list[TurnRecord]: ...


class Router(Protocol):
    """The router (bot/gateway.py) as the recovery uses it."""

    async def on_message(self, state: ChatState, msg: InboundMessage, receipt: Receipt | None) -> None:
        """A message taken up goes its usual way."""
        ...

    async def adopt(self, state: ChatState) -> bool:
        """Replicas: take the chat here and its filed messages up, oldest first."""
        ...


class Recovery:
    def __init__(
        self,
        runtime: AgentRuntime,
        store: RecoveryStore,
        output: ChatOutput,
        access: Access,
        chats: ChatDirectory,
        lanes: Lanes,
        router: Router,
        *,
        board: ProgressBoard | None = None,
        inbox: ReplicaInbox | None = None,
    ):
        self._runtime = runtime
        self._store = store
        self._output = output
        self._access = access
        self._chats = chats
        self._lanes = lanes
        self._router = router  # a message taken up goes the router's usual way
        self._inbox = inbox  # replicas: a chat's messages are filed, then taken up where it is held
        # where a resumed turn finds the progress message its turn showed before the restart
        self._board = board or ProgressBoard()
        # chat key -> the messages of an answer a stop cut off, for the resumed turn to replace
        self._partials: dict[str, list[SentMessage]] = {}

    def adopt_partial(self, chat_key: str) -> list[SentMessage] | None:
        """The cut-off answer's messages, once: the resumed turn's view edits them."""
        return self._partials.pop(chat_key, None)

    async def take_up_received(self, now: datetime | None = None) -> int:
        """Messages received but never written into a history (queued behind a turn or an
        approval when the bot stopped or crashed) are handled now, oldest first, as if they had
        just arrived. One older than its platform's `max_backlog_age_s` is not run; its chat is
        told. Messages of a platform not running now stay for when it is. Returns how many were
        taken up."""
        now = now or datetime.now(UTC)
        taken = 0
        stale: dict[str, tuple[ChatState, int, str]] = {}
        filed: dict[str, ChatState] = {}
        for receipt, received_at, record in await self._store.received_pending():
            if receipt[0] == NOTICES:
                await self._take_up_notice(receipt, record)
                continue
            if receipt[0] not in self._output.adapters:
                continue
            try:
                msg = inbound_from_record(receipt[1], record)
            except ValueError as exc:
                log.warning("received message %s:%s dropped: %s", *receipt, exc)
                await self._store.release_received([receipt])
                continue
            acc = self._access.platforms.get(msg.chat.platform)
            if acc is None or not self._access.allowed(msg.user):  # access was withdrawn meanwhile
                await self._store.release_received([receipt])
                continue
            lang = pick_language(msg.user.language_code)
            state = await self._chats.get(msg.chat, msg.user, acc.group_sessions, lang)
            if state.key in filed:
                await self._file(state, receipt)
                taken += 1
                continue
            if not await self._lanes.take_here(state.key):
                # filed under its chat, the live replica that runs it takes it up before it
                # lets the chat go (its receiver may have died before filing it)
                await self._file(state, receipt)
                self._left(state.key)
                continue
            if (now - received_at).total_seconds() > acc.max_backlog_age_s:
                await self._store.release_received([receipt])
                _, n, first = stale.get(state.key, (state, 0, msg.text))
                stale[state.key] = (state, n + 1, first)
                continue
            state.chat = msg.chat
            self._lanes.of(state).spoke(msg.user)
            if self._inbox is not None:
                filed[state.key] = state
                await self._file(state, receipt)
                taken += 1
                continue
            await self._router.on_message(state, msg, receipt)
            taken += 1
        for state in filed.values():  # in arrival order, with what other replicas filed meanwhile
            await self._router.adopt(state)
        for state, n, first in stale.values():
            await self._output.say(state, t(state.lang, "not_taken_up", n=n, first=preview(first)))
        if taken or stale:
            log.info("after the restart: %d received message(s) taken up, %d too old", taken,
                     sum(n for _, n, _ in stale.values()))  # fmt: skip
        return taken

    async def _file(self, state: ChatState, receipt: Receipt) -> None:
        if self._inbox is not None:
            await self._inbox.file(state.key, receipt)

    async def resume_interrupted(self, now: datetime | None = None, chat_key: str | None = None) -> int:
        """Each turn a stop or a crash left running is resumed now, without waiting for the user,
        and its chat is told (which tool was cut off: it may or may not have completed and is not
        run again). A suspended turn whose approval was given just before is resumed too: the
        approval still holds. A turn older than its platform's `max_backlog_age_s` is closed
        instead (its calls not run) and the chat told. Returns how many were resumed."""
        now = now or datetime.now(UTC)
        resumed = 0
        held: dict[str, ChatState] = {}
        await self._send_unsent(now, chat_key, held)  # they came before anything still to run
        for turn in await self._store.open_turns():
            if chat_key is not None and turn.chat_key != chat_key:
                continue  # taking over one chat (another replica's, which died)
            approved = await self._approved_tool(turn)
            if turn.status == "suspended" and approved is None:
                # waiting on the user: the card or question is still there, and so is its ⏸ line,
                # which the turn continues once it is answered
                waiting_on = await self._chats.by_key(turn.chat_key) if turn.chat_key else None
                if waiting_on is not None and waiting_on.chat.platform in self._output.adapters:
                    await self._park_progress(waiting_on, turn)
                continue
            state = await self._chats.by_key(turn.chat_key) if turn.chat_key else None
            if state is None or state.chat.platform not in self._output.adapters:
                continue  # its platform is not running now: left for when it is
            if not await self._lanes.take_here(state.key):
                self._left(state.key)
                continue
            held[state.key] = state
            if (
                turn.unattended  # a brief: the scheduler retries it
                or turn.session_id != state.session_id  # the chat moved on to a new session
                or not self._access.allowed(UserRef(state.chat.platform, turn.requester))  # withdrawn
            ):
                await self._runtime.close_turn(turn.id)
                continue
            acc = self._access.of(state.chat.platform)
            if (now - turn.updated_at).total_seconds() > acc.max_backlog_age_s:
                await self._settle_paused_progress(state)
                await self._runtime.close_turn(turn.id)
                await self._output.say(state, t(state.lang, "restart_not_resumed"))
                continue
            await self._take_partial(state)
            rechecked: list[str] = []
            cut_off = await self._runtime.settle_interrupted(turn.id, rechecked)
            await self._park_progress(state, turn)
            lines = [t(state.lang, "restart_resumed")]
            lines += [t(state.lang, "restart_cut_off", tool=name) for name in cut_off]
            lines += [t(state.lang, "restart_rechecked", tool=name) for name in rechecked]
            if approved is not None:
                lines.append(t(state.lang, "restart_approved", tool=approved))
            await self._output.say(state, "\n".join(lines))
            self._lanes.of(state).resume_soon(turn.id)
            resumed += 1
        if chat_key is None:
            for state in held.values():  # held for a turn it closed instead: let go if idle
                self._lanes.idle(state)
        if resumed:
            log.info("after the restart: %d interrupted turn(s) resumed", resumed)
        return resumed

    async def _send_unsent(self, now: datetime, chat_key: str | None, held: dict[str, ChatState]) -> None:
        """Answers a crash cut off between storing them and sending them are sent now — in
        place of the part of them a replica had already streamed, when it kept where. One older
        than its platform's `max_backlog_age_s` is dropped: the chat has moved on since."""
        for turn in await self._store.unsent_answers():
            if chat_key is not None and turn.chat_key != chat_key:
                continue
            state = await self._chats.by_key(turn.chat_key) if turn.chat_key else None
            if state is None or state.chat.platform not in self._output.adapters:
                continue  # its platform is not running now: left for when it is
            if chat_key is None:
                if not await self._lanes.take_here(state.key):
                    self._left(state.key)  # its replica is alive, and sends it itself
                    continue
                held[state.key] = state
            age = (now - turn.updated_at).total_seconds()
            if turn.answer and age <= self._access.of(state.chat.platform).max_backlog_age_s:
                await self._send_answer(state, turn.answer)
            else:
                log.info(
                    "after the restart: the unsent answer of turn %s is %.0f s old; dropped", turn.id, age
                )
            await self._store.answer_sent(turn.id)

    async def _send_answer(self, state: ChatState, answer: str) -> None:
        adapter = self._output.adapters[state.chat.platform]
        adopt = await self._pop_partial(state)  # what a replica had already streamed of it
        stream = StreamingMessage(
            adapter, state.chat, resend_note=t(state.lang, "answer_in_full"), adopt=adopt
        )
        try:
            await stream.finish(answer)
        except DeliveryError as exc:  # retried already: a restart cannot do better
            log.warning("the unsent answer for %s could not be sent: %s", state.key, exc)
        else:
            log.info("after the restart: an answer cut off before it was sent went to %s", state.key)

    async def _park_progress(self, state: ChatState, turn: TurnRecord) -> None:
        """The progress message the turn showed before the restart (kept when it stopped at a
        card, or by a stop) goes back on the board: the resumed turn edits its outcome into the
        same line, and a line nobody continues is settled when the chat's next turn ends —
        never left at ⏸. A call cut off (it will not run again) is marked so at once."""
        found = await sent_ref(self._store, self._output.adapters, "progress", state.key)
        if found is None:
            return
        sent, adapter, ref = found
        record = ref.progress or PausedProgress()
        fresh = await self._store.load_turn(turn.id)
        calls = (fresh or turn).calls
        p = ProgressLine(adapter, sent.chat)
        p.msg = sent
        p.names = dict(record.names)
        p.lines = {c: line for c, line in record.lines.items() if c != PAUSED}
        cut_note = t(state.lang, "progress_cut_off")
        for call_id, line in p.lines.items():
            if not line.startswith((WAITING, RUNNING)):
                continue
            name = p.names.get(call_id, "?")
            status = calls.get(call_id)
            if status in ("pending", "awaiting_approval"):
                p.waiting_call = call_id  # runs (or waits) on resume: its line is continued
                p.lines[call_id] = f"{WAITING} {name}"
            elif status == "done":  # it ran and its result is stored
                p.lines[call_id] = f"{OK} {name}"
            elif status == "denied":
                p.lines[call_id] = f"{FAILED} {name}: {t(state.lang, 'not_run')}"
            else:  # ran and will not run again (cut off)
                p.lines[call_id] = f"{FAILED} {name}: {cut_note}"
        self._board.park(state.key, p)
        await p.show(force=True)

    @staticmethod
    def _left(chat_key: str) -> None:
        log.info("after the restart: %s is left to the replica that runs its turns now", chat_key)

    async def _settle_paused_progress(self, state: ChatState) -> None:
        """The progress message a stop left saying "paused" shows its final state."""
        found = await sent_ref(self._store, self._output.adapters, "progress", state.key)
        if found is None:
            return
        sent, adapter, ref = found
        await forget_sent(self._store, "progress", state.key)
        text = settled_text(
            ref.progress or PausedProgress(),
            t(state.lang, "progress_cut_off"),
            not_run=t(state.lang, "not_run"),
        )
        if text:
            with contextlib.suppress(DeliveryError):
                await adapter.edit_text(sent, text, format="plain")

    async def _take_partial(self, state: ChatState) -> None:
        """The messages of an answer a stop cut off mid-stream: the resumed turn's answer
        replaces them (its TurnView adopts them) instead of repeating their text."""
        partial = await self._pop_partial(state)
        if partial:
            self._partials[state.key] = partial

    async def _pop_partial(self, state: ChatState) -> list[SentMessage]:
        """The messages kept of an answer shown in part (cut off by a stop or a death), taken
        from the store once."""
        found = await sent_ref(self._store, self._output.adapters, "partial", state.key)
        if found is None:
            return []
        sent, _adapter, ref = found
        await forget_sent(self._store, "partial", state.key)
        return [SentMessage(sent.chat, str(i)) for i in ref.message_ids or (sent.message_id,)]

    async def _approved_tool(self, turn: TurnRecord) -> str | None:
        """The tool of a call approved but not started yet (its approval given before the stop)."""
        for call_id, approval_id in turn.calls_approval.items():
            if turn.calls.get(call_id) not in ("pending", "awaiting_approval"):
                continue
            record = await self._store.get_approval(approval_id)
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
            await self._store.release_received([receipt])
            return
        state = await self._chats.by_key(chat_key)
        if state is None:
            log.warning("task notice %s: chat %s is unknown; dropped", receipt[1], chat_key)
            await self._store.release_received([receipt])
        elif state.chat.platform in self._output.adapters:
            self._lanes.of(state).submit_notice(text, receipt)
