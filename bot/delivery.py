"""Renders one turn's RuntimeEvents into a chat: streamed answer text (one message edited at a safe
rate), one progress message for the turn's tools (bot/progress.py), the typing indicator from the
moment the turn starts until it ends or waits on the user, images from tools, approval cards and
question prompts, plan updates, compaction notes and clear error words."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.base import ChatAdapter, ChatRef, DeliveryError, DeliveryUncertain, SentMessage
from adapters.stream import StreamingMessage
from agent import events as ev
from bot.cards import visible
from bot.i18n import t
from bot.i18n_tasks import failure_text
from bot.progress import FAILED, OK, RUNNING, WAITING, ProgressBoard, ProgressLine, failure_of, paused_record
from bot.tool_labels import tool_label
from memory.chat_tables import PausedProgress

log = logging.getLogger(__name__)

MODEL_ERROR_CODES = frozenset({"model_rejected", "model_interrupted", "model_unavailable"})
# Answers that finish within this many seconds are sent once, without streaming edits.
FIRST_SEND_DELAY = 0.8
# events a chat does not show (the terminal does)
_NOT_SHOWN = frozenset({ev.ModelStart, ev.ThinkingDelta, ev.UsageEvent, ev.Retry})


class TurnView:
    def __init__(
        self,
        adapter: ChatAdapter,
        chat: ChatRef,
        lang: str,
        *,
        on_approval: Callable[[ev.ApprovalRequired], Awaitable[None]],
        on_question: Callable[[ev.Question], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
        board: ProgressBoard | None = None,
        key: str | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        stop: asyncio.Event | None = None,
        on_paused: Callable[[SentMessage, PausedProgress], Awaitable[None]] | None = None,
        on_partial: Callable[[list[SentMessage]], Awaitable[None]] | None = None,
        adopt: list[SentMessage] | None = None,
        on_settled: Callable[[], Awaitable[None]] | None = None,
        on_streamed: Callable[[list[SentMessage]], Awaitable[None]] | None = None,
        on_answered: Callable[[], Awaitable[None]] | None = None,
        on_delivered: Callable[[str], Awaitable[None]] | None = None,
    ):
        self.adapter, self.chat, self.lang = adapter, chat, lang
        self.on_approval, self.on_question = on_approval, on_question
        self.clock = clock
        self.board = board or ProgressBoard()
        self.key = key or chat.key
        self._sleep = sleep
        # a stop for a restart: the progress says the turn resumes after it, and `on_paused`
        # keeps where that message is, for the restart to show its final state
        self.stop, self.on_paused = stop, on_paused
        # an answer cut off mid-stream by a stop: `on_partial` keeps its messages; the resumed
        # turn's answer replaces them in place (`adopt`) instead of being posted a second time
        self.on_partial, self._adopt = on_partial, list(adopt or [])
        # a progress message parked at a card is kept (`on_paused`) so that a restart can find
        # it; `on_settled` lets go of it once a turn has shown its final state
        self.on_settled = on_settled
        self._kept = False
        # replicas: an answer shown before the turn stored it is kept too (`on_streamed`) — if
        # its replica dies, the survivor's resumed answer replaces it instead of repeating it;
        # let go (`on_answered`) once the turn has ended
        self.on_streamed, self.on_answered = on_streamed, on_answered
        self._streamed = False
        # the answer of a completed turn is kept with it until it has been sent: `on_delivered`
        # (with the turn's id) once it has, or once the chat was told it could not be
        self.on_delivered = on_delivered
        self.stream: StreamingMessage | None = None
        self.progress: ProgressLine | None = None
        self.plan_msg: SentMessage | None = None
        self._typing: asyncio.Task[None] | None = None
        self._ended = False
        self.final_text = ""

    def start(self) -> None:
        """The turn started: show typing at once (a model can think for many seconds)."""
        self._start_typing()

    # -- typing indicator ----------------------------------------------------------------------
    def _start_typing(self) -> None:
        if self._typing is None or self._typing.done():
            self._typing = asyncio.create_task(self._typing_loop())

    def _stop_typing(self) -> None:
        if self._typing is not None:
            self._typing.cancel()
            self._typing = None

    async def _typing_loop(self) -> None:
        # refreshed before the platform's indicator fades (Telegram ~5 s, Discord ~10 s)
        every = self.adapter.typing_interval
        while True:
            with contextlib.suppress(Exception):
                await self.adapter.send_typing(self.chat)
            await self._sleep(every)

    # -- progress ------------------------------------------------------------------------------
    def _progress_for(self, call_id: str) -> ProgressLine:
        """This turn's progress message; a resumed turn's first event about the call it waited
        on continues the message it showed before it waited."""
        if self.progress is None or not self.progress.lines:
            adopted = self.board.adopt(self.key, call_id)
            if adopted is not None:
                self.progress = adopted
                self._kept = True
            elif self.progress is None:
                self.progress = ProgressLine(self.adapter, self.chat, self.clock)
        return self.progress

    async def _tool_line(
        self, call_id: str, name: str, symbol: str, suffix: str = "", now: bool = False
    ) -> None:
        label = tool_label(self.lang, name)
        await self._progress_for(call_id).set(call_id, label, f"{symbol} {label}{suffix}", now=now)

    async def _waiting(self, call_id: str, name: str) -> None:
        progress = self._progress_for(call_id)
        progress.waiting_call = call_id
        label = tool_label(self.lang, name)
        line = f"{WAITING} {label}"
        if progress.msg is not None:  # kept before it shows ⏸: a crash just after never strands it
            progress.names[call_id], progress.lines[call_id] = label, line
            await self._keep(progress)
            await progress.set(call_id, label, line, now=True)
            return
        await progress.set(call_id, label, line, now=True)
        await self._keep(progress)

    async def _end_progress(self, done: ev.Done) -> None:
        """Final state of this turn's progress; an older parked one nobody adopted is settled."""
        self._ended = True
        if done.status != "suspended":
            old = self.board.retire(self.key)
            if old is not None and old is not self.progress:
                old.settle(f": {t(self.lang, 'not_run')}")
                await old.close()
                self._kept = True
        p = self.progress
        if p is None:
            await self._let_go(done)
            return
        if done.status == "suspended":
            self.board.park(self.key, p)
            await p.close()
            if p.waiting_call is None:  # kept when its ⏸ line was shown (`_waiting`) otherwise
                await self._keep(p)
            return
        if done.status == "interrupted":
            await self._pause(p)
            return
        elif done.status in ("cancelled", "failed"):
            p.settle(f": {t(self.lang, 'tool_' + done.status)}")
        else:
            p.settle(f": {t(self.lang, 'not_run')}")
        await p.close()
        await self._let_go(done)

    async def _keep(self, p: ProgressLine) -> None:
        if p.msg is not None and self.on_paused is not None:
            try:
                await self.on_paused(p.msg, paused_record(p, []))
            except Exception:  # a restart then leaves this message as it is
                log.exception("could not keep the parked progress of %s", self.chat.key)

    async def _let_go(self, done: ev.Done) -> None:
        """The kept progress message (this turn's, adopted from a park) is final now."""
        if self._kept and done.status != "interrupted" and self.on_settled is not None:
            self._kept = False
            try:
                await self.on_settled()
            except Exception:
                log.exception("could not let go of the progress of %s", self.chat.key)

    async def _pause(self, p: ProgressLine) -> None:
        running = p.pause(t(self.lang, "progress_paused"))
        await p.close()
        if p.msg is not None and self.on_paused is not None:
            try:
                await self.on_paused(p.msg, paused_record(p, running))
            except Exception:  # the restart then leaves this message as it is
                log.exception("could not keep the paused progress of %s", self.chat.key)

    # -- events --------------------------------------------------------------------------------
    async def render(self, event: ev.RuntimeEvent) -> None:
        if type(event) in _NOT_SHOWN:  # most events of a short turn: no walk through the cases
            return
        match event:
            case ev.TextDelta(text=text):
                if self.stream is None:
                    adopt, self._adopt = self._adopt, []
                    self.stream = StreamingMessage(
                        self.adapter,
                        self.chat,
                        first_delay=FIRST_SEND_DELAY,
                        resend_note=t(self.lang, "answer_in_full"),
                        adopt=adopt,
                        on_sent=self._keep_streamed if self.on_streamed is not None else None,
                    )
                await self.stream.append(text)
            case ev.ToolCalls():
                self._start_typing()
                await self._flush_text()  # text before tool calls stays as its own message
            case ev.ToolStart(call_id=call_id, name=name):
                await self._tool_line(call_id, name, RUNNING)
            case ev.ToolProgress(call_id=call_id, name=name, stage=stage, detail=detail, percent=pct):
                pct_text = f" {pct:.0f}%" if pct is not None else ""
                await self._tool_line(call_id, name, RUNNING, f": {stage}{pct_text} {detail}".rstrip())
            case ev.ToolResult(
                call_id=call_id, name=name, content=content, elapsed=elapsed, attachments=atts
            ):
                failed = failure_of(content)
                if failed:
                    await self._tool_line(
                        call_id, name, FAILED, f": {failure_text(self.lang, failed)}", now=True
                    )
                else:
                    await self._tool_line(call_id, name, OK, f" ({elapsed:.1f}s)")
                for att in atts:
                    path = getattr(att, "path", None)
                    if path:
                        with contextlib.suppress(DeliveryError, OSError):
                            await self.adapter.send_image(self.chat, path, getattr(att, "caption", ""))
            case ev.ToolErrorEvent(call_id=call_id, name=name, code=code):
                await self._tool_line(call_id, name, FAILED, f": {failure_text(self.lang, code)}", now=True)
            case ev.PlanUpdate(steps=steps):
                marks = {"done": "✅", "in_progress": "▶️", "skipped": "⏭"}
                text = f"📋 {t(self.lang, 'plan')}\n" + "\n".join(
                    f"{marks.get(s, '⬜')} {x}" for x, s in steps
                )
                with contextlib.suppress(DeliveryError):
                    if self.plan_msg is None:
                        self.plan_msg = await self.adapter.send_text(self.chat, text, format="plain")
                    else:
                        await self.adapter.edit_text(self.plan_msg, text, format="plain")
            case ev.Compaction(before_messages=b, after_messages=a):
                with contextlib.suppress(DeliveryError):
                    await self.adapter.send_text(
                        self.chat, t(self.lang, "compacted", before=b, after=a), format="plain"
                    )
            case ev.ApprovalRequired(call_id=call_id, tool=tool):
                self._stop_typing()
                await self._flush_text()
                await self.on_approval(event)  # the card first: the user can act at once
                await self._waiting(call_id, tool)
            case ev.Question(call_id=call_id):
                self._stop_typing()
                await self._flush_text()
                await self.on_question(event)
                name = self.progress.names.get(call_id, "") if self.progress else ""
                if name:  # already a label
                    progress = self._progress_for(call_id)
                    progress.waiting_call = call_id
                    await progress.set(call_id, name, f"{WAITING} {name}", now=True)
            case ev.ErrorEvent(message=message, code=code):
                # a fragment already shown ("First ") is marked as broken off, not left as an answer
                if self.stream is not None and self.stream.text.strip():
                    await self._flush_text(f"{self.stream.text.rstrip()} {t(self.lang, 'answer_broken_off')}")
                # model errors by code, in the chat's language (the provider's text stays in the log)
                text = (
                    t(self.lang, code)
                    if code in MODEL_ERROR_CODES
                    else t(self.lang, "model_error", error=message)
                )
                with contextlib.suppress(DeliveryError):
                    await self.adapter.send_text(self.chat, text, format="plain")
            case ev.Notice(code=code):
                with contextlib.suppress(DeliveryError):
                    await self.adapter.send_text(self.chat, t(self.lang, code), format="plain")
            case ev.StandingApprovalUsed(scope=scope):
                text = t(self.lang, "standing_used", rule=visible(scope.describe(self.lang)))
                with contextlib.suppress(DeliveryError):
                    await self.adapter.send_text(self.chat, text, format="plain")
            case ev.Done(text=text, warning=warning):
                self._stop_typing()
                self.final_text = text
                await self._end_progress(event)
                await self._flush_text(text if warning else None)
                if event.status == "completed" and text and self.on_delivered is not None:
                    try:
                        await self.on_delivered(event.turn_id)
                    except Exception:  # a restart then sends the answer again
                        log.warning("could not mark the answer in %s sent", self.chat.key, exc_info=True)
                if self._streamed and self.on_answered is not None:
                    self._streamed = False
                    try:
                        await self.on_answered()
                    except Exception:
                        log.warning(
                            "could not let go of the streamed answer of %s", self.chat.key, exc_info=True
                        )
            case _:
                pass

    async def _keep_streamed(self, sent: list[SentMessage]) -> None:
        assert self.on_streamed is not None
        try:
            await self.on_streamed(sent)
            self._streamed = True
        except Exception:  # the resumed answer is then posted anew
            log.warning("could not keep the streamed answer of %s", self.chat.key, exc_info=True)

    async def _flush_text(self, text: str | None = None) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            try:
                await stream.finish(text)
            except DeliveryError as exc:  # retried already: tell the user in plain words
                log.warning("answer not delivered to %s: %s", self.chat.key, exc)
                await self._say_undelivered(exc)

    async def _say_undelivered(self, exc: DeliveryError) -> None:
        key = "delivery_uncertain" if isinstance(exc, DeliveryUncertain) else "delivery_failed"
        try:
            await self.adapter.send_text(self.chat, t(self.lang, key), format="plain")
        except DeliveryError as again:
            log.warning("could not tell %s either: %s", self.chat.key, again)

    async def close(self) -> None:
        self._stop_typing()
        if self.progress is not None and not self._ended:  # the turn broke off without a Done
            if self._stopped():  # cut off by a stop: resumed later
                await self._pause(self.progress)
            else:
                self.progress.settle(f": {t(self.lang, 'tool_failed')}")
                await self.progress.close()
        if self.stream is not None and not self._ended and self._stopped():
            await self._pause_stream(self.stream)
        await self._flush_text()

    def _stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    async def _pause_stream(self, stream: StreamingMessage) -> None:
        """The partial answer says the turn resumes after the restart; its messages are kept for
        the resumed answer to replace."""
        self.stream = None
        try:
            sent = await stream.finish(f"{stream.text}\n\n{t(self.lang, 'progress_paused')}")
        except DeliveryError as exc:
            log.warning("partial answer not shown in %s: %s", self.chat.key, exc)
            return
        if sent and self.on_partial is not None:
            try:
                await self.on_partial(sent)
            except Exception:  # the resumed answer is then posted anew
                log.exception("could not keep the partial answer of %s", self.chat.key)


async def render_all(view: TurnView, events: Any) -> ev.Done | None:
    done = None
    view.start()
    try:
        async for event in events:
            await view.render(event)
            if isinstance(event, ev.Done):
                done = event
    finally:
        await view.close()
    return done
