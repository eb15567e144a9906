"""What a suspended turn waits on — an approval card or a question — and every way it ends: a
button, a typed reply, /approve or /deny, the user moving on, or its expiry (silence is never
consent).

Every answer to an approval card is read by the one decision function agent/consent.read_consent
and applied by the runtime (`decide`); a question's answer by bot/replies.read_reply (`answer`).
In a group, typed consent counts only from an approver (an admin) who replies to the card or
mentions the bot; nobody else's message closes it — it is held in the chat's lane until the card
is decided. The card or question then shows how it ended and the turn resumes in its lane."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from adapters.base import (
    Button,
    ButtonPress,
    Card,
    ChatRef,
    DeliveryError,
    InboundMessage,
    SentMessage,
    UserRef,
)
from agent import (
    AgentRuntime,
    ApprovalError,
    ApprovalExpired,
    ApprovalForeignChat,
    ApprovalNotFound,
    ApprovalRecord,
    Message,
    NotAnApprover,
    Receipt,
    TurnRecord,
)
from agent import events as ev
from agent.approval import Decision
from agent.consent import StandingApproval, normalize, read_consent
from agent.untrusted import outside_sources
from bot import cards
from bot.chat_output import ChatOutput
from bot.chats import ChatDirectory, ChatState
from bot.i18n import t
from bot.lanes import Lanes, is_waiting
from bot.refusals import refusal_key
from bot.replies import read_reply
from bot.sent import SentStore, card_ref, forget_sent, remember_card, remember_sent, sent_ref

if TYPE_CHECKING:
    from markets.preview import TradePreview

log = logging.getLogger(__name__)


class WaitingStore(SentStore, Protocol):
    async def load_turn(self, turn_id: str) -> TurnRecord | None: ...

    async def open_turn(self, session_id: str) -> TurnRecord | None: ...

    async def open_turns(self) -> list[TurnRecord]: ...

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    async def load_messages(self, session_id: str) -> list[Message]: ...

    async def release_received(self, receipts: list[Receipt]) -> None: ...

    async def list_standing(
        self, chat_key: str | None, now: datetime, tool: str | None = None
    ) -> list[StandingApproval]: ...


def is_short_reply(text: str) -> bool:
    """A short reply to a card that is no decision ("3", "第三个", "👍", "what?"): it gets a hint and
    the card stays; a longer message is a new request and closes the card (nothing runs)."""
    word = normalize(text)
    return len(word) <= 12 and " " not in word


def may_close(turn: TurnRecord, user_id: str) -> bool:
    """Whose message or command may close a waiting card or question ("moved on"): an approver,
    or the requester; never another member's."""
    return user_id == turn.requester or user_id in turn.approvers


@dataclass(frozen=True, slots=True)
class CardFacts:
    """What an approval card shows beyond its record, given by the composition root: `trade`, the
    facts of a trade (markets/preview.py; None for another tool), and `notes`, per tool one line
    in a language (exec_command: what its sandbox allows)."""

    trade: Callable[[ApprovalRecord], Awaitable[TradePreview | None]] | None = None
    notes: Mapping[str, Callable[[str], str]] = field(default_factory=dict)
    zone: Callable[[str], Awaitable[str]] | None = None  # a chat key's time zone (IANA name)

    async def zone_of(self, chat_key: str) -> str:
        if self.zone is None or not chat_key:
            return "UTC"
        try:
            return await self.zone(chat_key)
        except Exception:  # a card still goes out, its times in UTC
            log.warning("no time zone for chat %s", chat_key, exc_info=True)
            return "UTC"


class Waiting:
    """Cards and questions of every chat. Public: `waiting_turn`, `move_on`, `answer_message`,
    `on_button`, `decide_by_command`, `expire_due`, `send_card`, `send_question`, `card_info`."""

    def __init__(
        self,
        runtime: AgentRuntime,
        store: WaitingStore,
        output: ChatOutput,
        chats: ChatDirectory,
        lanes: Lanes,
        card_facts: CardFacts | None = None,
    ):
        self._runtime = runtime
        self._store = store
        self._output = output
        self._chats = chats
        self._lanes = lanes
        self._facts = card_facts or CardFacts()

    def _unclear_key(self, state: ChatState, always: bool, *, question: bool = False) -> str:
        """The hint for a reply that is no decision: "tap a button" where the card has buttons;
        in the terminal, the words to type ("always" only where the card offers it). A question
        ("yes?") is told that it approved nothing."""
        adapter = self._output.adapters.get(state.chat.platform)
        buttons = adapter is None or adapter.has_buttons
        if question:
            return "approval_question" if buttons else "approval_question_typed"
        if buttons:
            return "approval_unclear"
        return "approval_unclear_typed_always" if always else "approval_unclear_typed"

    # ---- what a chat waits on ------------------------------------------------------------------
    async def waiting_turn(self, state: ChatState) -> TurnRecord | None:
        turn = await self._store.open_turn(state.session_id)
        return turn if is_waiting(turn) else None

    async def move_on(self, state: ChatState, turn: TurnRecord) -> None:
        """Close a waiting turn because the user moved on; the card shows it. A turn whose
        approval was given already (it had not resumed yet: a crash came between) is resumed
        instead: an approved action runs, it is never dropped as "moved on"."""
        assert turn.waiting is not None
        approval_id = turn.waiting.confirmation_target.approval_id
        if approval_id and await self._approved(approval_id):
            self._lanes.of(state).resume_soon(turn.id)
            return
        await self._runtime.answer(turn.id, "", status="moved_on")
        if approval_id:
            await self._finalize_card(approval_id, "moved_on", "")
        else:
            await self._finalize_question(turn.id, "moved_on")
        # the runtime closes the turn itself when the next run starts; mark it done now too
        await self._runtime.close_turn(turn.id)

    async def _hold(self, state: ChatState, msg: InboundMessage, receipt: Receipt | None, why: str) -> None:
        """Keep `msg` until the card or question is closed; its sender hears why, once."""
        if self._lanes.of(state).hold(msg.text, msg.user, receipt):
            await self._output.say(state, t(state.lang, why))

    async def answer_message(
        self, state: ChatState, turn: TurnRecord, msg: InboundMessage, receipt: Receipt | None = None
    ) -> bool:
        """A message while `turn` waits: True if it was consumed as the answer (or held until the
        card is decided); False when it is a new request (the card or question was closed)."""
        assert turn.waiting is not None
        lane = self._lanes.of(state)
        uid = msg.user.user_id
        may_answer = may_close(turn, uid)
        reading = read_reply(msg.text, turn.waiting)
        if turn.waiting.kind == "approval":
            approval_id = turn.waiting.confirmation_target.approval_id
            if uid not in turn.approvers:
                if msg.addressed and read_consent("text", msg.text).gate_decision is not None:
                    # a "yes" from someone who may not decide: told so, and not kept for the model
                    await self._release(receipt)
                    await self._output.say(
                        state, t(state.lang, refusal_key(NotAnApprover(), group=state.chat.is_group))
                    )
                    return True
                if msg.addressed:  # only an approver can unblock this chat: it waits for them
                    await self._hold(state, msg, receipt, "held_until_decided")
                return True
            record = await self._store.get_approval(approval_id)
            if record is not None and record.status == "approved":
                # decided already but not resumed (a crash came between): it runs now, and this
                # message is the next one after it
                lane.resume_soon(turn.id)
                lane.fold_in(msg, receipt)
                return True
            card = await card_ref(self._chats, self._output.adapters, record) if record is not None else None
            replying_to_card = card is not None and msg.reply_to_message_id == card[0].message_id
            # in a group, typed consent must be addressed: a reply to the card or a mention
            if state.chat.is_group and not (replying_to_card or (msg.addressed and not msg.reply_to_bot)):
                if msg.addressed:  # a reply to another of the bot's messages: waits for the decision
                    await self._hold(state, msg, receipt, "held_until_decided")
                return True
            scope = self._runtime.gate.scope_for(record) if record is not None else None
            decision = read_consent("text", msg.text, scope=scope, replying_to_card=replying_to_card)
            word = decision.gate_decision
            if word is not None:
                await self._release(receipt)
                refused = await self._decide(state, approval_id, msg.user, word, decision.note, record)
                if refused is not None:
                    await self._output.say(
                        state, t(state.lang, refusal_key(refused, group=state.chat.is_group))
                    )
                return True
            if is_short_reply(msg.text):  # "3", "第三个", "👍", "what?": not an answer; the card stays
                await self._release(receipt)
                key = self._unclear_key(state, scope is not None, question=decision.question)
                await self._output.say(state, t(state.lang, key))
                return True
            await self.move_on(state, turn)  # a new request: the card closes, nothing runs
            return False
        if not may_answer:
            if not msg.addressed:
                return True
            if state.chat.is_group:
                # someone else's question (only its requester or an admin answers it): a member's
                # message neither answers nor closes it; it waits until the question is closed
                await self._hold(state, msg, receipt, "held_until_answered")
                return True
            return False
        if reading.kind == "moved_on":
            await self.move_on(state, turn)
            return False
        answer = {"yes": "yes", "no": "no"}.get(reading.kind, reading.value)
        await self._release(receipt)
        await self._runtime.answer(turn.id, answer)
        await self._finalize_question(turn.id, "question_answered", answer=cards.visible(answer))
        lane.resume_soon(turn.id)
        return True

    async def _approved(self, approval_id: str) -> bool:
        record = await self._store.get_approval(approval_id)
        return record is not None and record.status == "approved"

    async def _release(self, receipt: Receipt | None) -> None:
        """The message was answered otherwise than by entering the history (a reply to a card or
        a question): nothing to take up after a restart. Released before acting on it, so a crash
        in between loses the reply (the card or question is still there) rather than repeat it."""
        if receipt is not None:
            await self._store.release_received([receipt])

    # ---- buttons and commands ----------------------------------------------------------------
    async def on_button(self, state: ChatState, press: ButtonPress, receipt: Receipt | None = None) -> None:
        """A tap. `receipt`: an approval card's tap not yet recorded as processed — recorded in
        the decision's own transaction (a crash keeps both or neither)."""
        tap = cards.parse_callback(press.data)
        if tap is None:
            await press.ack(t(state.lang, "approval_stale"), False)
            return
        if isinstance(tap, cards.OptionTap):
            await self._on_option(state, press, tap.index, tap.turn_id)
            return
        record = await self._store.get_approval(tap.approval_id)
        scope = self._runtime.gate.scope_for(record) if record is not None else None
        word = read_consent("button", tap.choice, scope=scope).gate_decision
        refused = (
            await self._decide(state, tap.approval_id, press.user, word, "", record, receipt)
            if word
            else ApprovalNotFound("this button is no longer valid")
        )
        if refused is not None:
            key = refusal_key(refused, group=state.chat.is_group)
            await press.ack(t(state.lang, key), isinstance(refused, NotAnApprover))
        else:
            await press.ack("", False)

    async def _on_option(self, state: ChatState, press: ButtonPress, index: int, turn_id: str) -> None:
        """A question's option button (`index` from 1)."""
        turn = await self._store.load_turn(turn_id)
        if (
            turn is None
            or turn.waiting is None
            or turn.status != "suspended"
            or turn.session_id != state.session_id
        ):
            await press.ack(t(state.lang, "approval_stale"), False)
            return
        if not may_close(turn, press.user.user_id):
            await press.ack(t(state.lang, "approval_not_allowed"), True)
            return
        if not 1 <= index <= len(turn.waiting.options):
            await press.ack(t(state.lang, "approval_stale"), False)
            return
        await press.ack("", False)
        choice = turn.waiting.options[index - 1]
        await self._runtime.answer(turn.id, choice)
        await self._finalize_question(turn.id, "question_answered", answer=cards.visible(choice))
        self._lanes.of(state).resume_soon(turn.id)

    async def decide_by_command(
        self, state: ChatState, user: UserRef, approval_id: str, command: str
    ) -> ApprovalError | None:
        """/approve <id> or /deny <id>, read by the one decision function; None when applied."""
        word = read_consent("command", command).gate_decision
        if word is None:
            return ApprovalError("unknown decision")
        return await self._decide(state, approval_id, user, word)

    async def _decide(
        self,
        state: ChatState,
        approval_id: str,
        user: UserRef,
        decision: Decision,
        note: str = "",
        record: ApprovalRecord | None = None,
        receipt: Receipt | None = None,
    ) -> ApprovalError | None:
        """Apply a decision; returns None on success or why it was refused. `record`: the
        approval as the caller read it already (one read per tap); `receipt`: the tap, stored
        as processed with the decision."""
        record = record or await self._store.get_approval(approval_id)
        if record is not None and record.chat_key and record.chat_key != state.key:
            return ApprovalForeignChat()  # chat A never resolves B's approval
        try:
            record = await self._runtime.decide(approval_id, user.user_id, decision, note, receipt)
        except ApprovalExpired as exc:
            await self._expire(approval_id)
            return exc
        except ApprovalError as exc:
            return exc
        await self._finalize_card(approval_id, decision, user.display_name or user.user_id, record)
        lane = self._lanes.of(state)
        lane.resume_soon(record.turn_id)
        lane.release_held()
        return None

    # ---- expiry ------------------------------------------------------------------------------
    async def expire_due(self, now: datetime | None = None) -> int:
        """Expire approvals and questions whose time ran out (silence is never consent)."""
        now = now or datetime.now(UTC)
        count = 0
        for turn in await self._store.open_turns():
            w = turn.waiting
            if turn.status != "suspended" or w is None or w.expires_at is None or w.expires_at > now:
                continue
            count += 1
            approval_id = w.confirmation_target.approval_id
            if approval_id:
                await self._expire(approval_id)
            else:
                await self._runtime.answer(turn.id, "", status="no_answer")
                await self._finalize_question(turn.id, "question_expired")
                self._resume_in_its_chat(turn)
        return count

    async def _expire(self, approval_id: str) -> None:
        record = await self._store.get_approval(approval_id)
        if record is None:
            return
        turn = await self._store.load_turn(record.turn_id)
        await self._finalize_card(approval_id, "expired", "")
        if turn is not None and turn.status == "suspended":
            await self._runtime.answer(turn.id, "", status="no_answer")
            self._resume_in_its_chat(turn)

    def _resume_in_its_chat(self, turn: TurnRecord) -> None:
        state = self._chats.find_by_session(turn.session_id)
        if state is not None:
            self._lanes.of(state).resume_soon(turn.id)

    # ---- cards and questions in the chat -----------------------------------------------------
    async def send_card(self, state: ChatState, event: ev.ApprovalRequired) -> None:
        record = await self._store.get_approval(event.approval_id)
        if record is None:
            return
        info = await self.card_info(record, state.chat, state.lang)
        card, buttons = cards.approval_view(record, state.lang, info)
        sent = await self._send_waiting(state, event.turn_id, card, buttons)
        if sent is None:
            return
        await remember_card(self._store, record.id, sent)
        summary = cards.card_summary(info, state.lang)
        if summary:  # shown again once the card is decided
            await remember_sent(self._store, "card", record.id, state, sent, text=summary)
        record = await self._store.get_approval(record.id)
        if record is not None and record.status != "pending":  # decided while the card was in flight
            await self._finalize_card(record.id, record.decision or record.status, record.decided_by)

    async def card_info(self, record: ApprovalRecord, chat: ChatRef, lang: str = "en") -> cards.CardInfo:
        note = self._facts.notes.get(record.tool)
        trade = None
        if self._facts.trade is not None:
            try:
                trade = await self._facts.trade(record)
            except Exception:  # the card still shows the raw arguments
                log.warning("no trade facts for the card of %s", record.id, exc_info=True)
        return cards.CardInfo(
            zone=await self._facts.zone_of(record.chat_key or chat.key),
            expires_at=record.expires_at,
            group=chat.is_group,
            scope=self._runtime.gate.scope_for(record),
            standing_hours=self._runtime.gate.standing_ttl.total_seconds() / 3600,
            trade=trade,
            note=note(lang) if note else "",
            sources=await self._sources(record),
        )

    async def _sources(self, record: ApprovalRecord) -> tuple[str, ...]:
        """Outside content the card's turn read before proposing the action."""
        turn = await self._store.load_turn(record.turn_id)
        if turn is None:
            return ()
        messages = await self._store.load_messages(turn.session_id)
        return tuple(outside_sources(messages, self._runtime.tools))

    async def send_question(self, state: ChatState, event: ev.Question) -> None:
        turn = await self._store.load_turn(event.turn_id)
        if turn is None or turn.waiting is None:
            return
        text, buttons = cards.question_prompt(turn.waiting, event.turn_id)
        sent = await self._send_waiting(state, event.turn_id, text, buttons)
        if sent is not None and buttons:  # its buttons are taken away once it is answered
            await remember_sent(self._store, "question", event.turn_id, state, sent, text=text)

    async def _send_waiting(
        self, state: ChatState, turn_id: str, text: str | Card, buttons: list[list[Button]]
    ) -> SentMessage | None:
        """Send what a suspended turn waits on. Nobody can answer what nobody sees: if it cannot
        be delivered, the lane closes it as soon as the turn has suspended (an approval is then
        denied, never allowed) instead of letting it wait for its expiry."""
        adapter = self._output.adapters[state.chat.platform]
        try:
            if isinstance(text, Card):  # an approval card: an embed on Discord
                return await adapter.send_card(state.chat, text, buttons=buttons or None)
            return await adapter.send_text(state.chat, text, buttons=buttons or None)
        except DeliveryError as exc:
            log.warning("could not deliver what turn %s waits on; closing it: %s", turn_id, exc)
            self._lanes.of(state).undelivered(turn_id)
            return None

    async def _finalize_card(
        self, approval_id: str, outcome: str, who: str, record: ApprovalRecord | None = None
    ) -> None:
        """The card shows how it ended and loses its buttons. `record`: the approval, when the
        caller has it (its tool, arguments and chat do not change)."""
        if record is None or not record.message_ref:  # read before its card was sent: read again
            record = await self._store.get_approval(approval_id)
        found = await card_ref(self._chats, self._output.adapters, record) if record is not None else None
        if found is None or record is None:
            return
        msg, adapter, lang = found
        rule = ""
        if outcome == "always":
            rules = await self._store.list_standing(record.chat_key, datetime.now(UTC), record.tool)
            rule = next((r.id for r in rules if r.approval_id == approval_id), "")
        kept = await self._store.load_sent("card", approval_id)
        final = cards.approval_final(
            record,
            lang,
            outcome,
            who,
            rule,
            summary=kept.text if kept is not None else "",
            decided_at=datetime.now(UTC),
            zone=await self._facts.zone_of(record.chat_key),
        )
        with contextlib.suppress(DeliveryError):
            await adapter.edit_text(msg, final, buttons=None)
        await forget_sent(self._store, "card", approval_id)

    async def _finalize_question(self, turn_id: str, line: str, **fields: Any) -> None:
        """The question's buttons go; a line says how it ended (`line`: an i18n key)."""
        found = await sent_ref(self._store, self._output.adapters, "question", turn_id)
        if found is None:
            return
        msg, adapter, ref = found
        with contextlib.suppress(DeliveryError):
            await adapter.edit_text(msg, f"{ref.text}\n{t(ref.lang, line, **fields)}", buttons=None)
        await forget_sent(self._store, "question", turn_id)  # a question ends once
