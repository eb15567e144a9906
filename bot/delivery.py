"""Renders one turn's RuntimeEvents into a chat: streamed answer text (one message edited at a safe
rate), a compact progress line while tools run with the typing indicator, images from tools,
approval cards and question prompts, plan updates, compaction notes and clear error words."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from adapters.base import ChatAdapter, ChatRef, DeliveryError, SentMessage
from adapters.stream import StreamingMessage
from agent import events as ev
from bot.i18n import t

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0
MODEL_ERROR_CODES = frozenset({"model_rejected", "model_interrupted", "model_unavailable"})
# Answers that finish within this many seconds are sent once, without streaming edits.
FIRST_SEND_DELAY = 0.8


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
    ):
        self.adapter, self.chat, self.lang = adapter, chat, lang
        self.on_approval, self.on_question = on_approval, on_question
        self.clock = clock
        self.stream: StreamingMessage | None = None
        self.progress: SentMessage | None = None
        self.progress_lines: list[str] = []
        self.progress_edit_at = 0.0
        self.plan_msg: SentMessage | None = None
        self._typing: asyncio.Task[None] | None = None
        self.final_text = ""

    # -- typing indicator while tools run ----------------------------------------------------
    def _start_typing(self) -> None:
        if self._typing is None or self._typing.done():
            self._typing = asyncio.create_task(self._typing_loop())

    def _stop_typing(self) -> None:
        if self._typing is not None:
            self._typing.cancel()
            self._typing = None

    async def _typing_loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.adapter.send_typing(self.chat)
            await asyncio.sleep(TYPING_EVERY)

    # -- progress line -------------------------------------------------------------------------
    async def _progress(self, line: str, replace_last: bool = False, force: bool = False) -> None:
        if replace_last and self.progress_lines:
            self.progress_lines[-1] = line
        else:
            self.progress_lines.append(line)
        text = "\n".join(self.progress_lines[-6:])
        try:
            if self.progress is None:
                self.progress = await self.adapter.send_text(self.chat, text, format="plain")
                self.progress_edit_at = self.clock()
            elif force or self.clock() - self.progress_edit_at >= self.adapter.interval_for(self.chat):
                await self.adapter.edit_text(self.progress, text, format="plain")
                self.progress_edit_at = self.clock()
        except DeliveryError as exc:
            log.warning("progress update failed: %s", exc)

    # -- events --------------------------------------------------------------------------------
    async def render(self, event: ev.RuntimeEvent) -> None:
        match event:
            case ev.TextDelta(text=text):
                if self.stream is None:
                    self.stream = StreamingMessage(self.adapter, self.chat, first_delay=FIRST_SEND_DELAY)
                await self.stream.append(text)
            case ev.ToolCalls():
                self._start_typing()
                if self.stream is not None:  # text before tool calls stays as its own message
                    await self.stream.finish()
                    self.stream = None
            case ev.ToolStart(name=name):
                await self._progress(f"⏳ {name}")
            case ev.ToolProgress(name=name, stage=stage, detail=detail, percent=pct):
                pct_text = f" {pct:.0f}%" if pct is not None else ""
                await self._progress(f"⏳ {name}: {stage}{pct_text} {detail}".rstrip(), replace_last=True)
            case ev.ToolResult(name=name, elapsed=elapsed, attachments=atts):
                await self._progress(f"✓ {name} ({elapsed:.1f}s)", replace_last=self._last_is(name))
                for att in atts:
                    path = getattr(att, "path", None)
                    if path:
                        with contextlib.suppress(DeliveryError, OSError):
                            await self.adapter.send_image(self.chat, path, getattr(att, "caption", ""))
            case ev.ToolErrorEvent(name=name, code=code):
                await self._progress(f"✗ {name}: {code}", replace_last=self._last_is(name))
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
            case ev.ApprovalRequired():
                self._stop_typing()
                await self._flush_text()
                await self.on_approval(event)
            case ev.Question():
                self._stop_typing()
                await self._flush_text()
                await self.on_question(event)
            case ev.ErrorEvent(message=message, code=code):
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
            case ev.Done(text=text, warning=warning):
                self._stop_typing()
                self.final_text = text
                if self.progress is not None and self.progress_lines:
                    with contextlib.suppress(DeliveryError):
                        await self.adapter.edit_text(
                            self.progress, "\n".join(self.progress_lines[-6:]), format="plain"
                        )
                if warning and self.stream is not None:
                    await self.stream.finish(text)
                    self.stream = None
                await self._flush_text()
            case _:
                pass

    def _last_is(self, name: str) -> bool:
        return bool(self.progress_lines) and self.progress_lines[-1].startswith("⏳ " + name)

    async def _flush_text(self) -> None:
        if self.stream is not None:
            await self.stream.finish()
            self.stream = None

    async def close(self) -> None:
        self._stop_typing()
        await self._flush_text()


async def render_all(view: TurnView, events: Any) -> ev.Done | None:
    done = None
    try:
        async for event in events:
            await view.render(event)
            if isinstance(event, ev.Done):
                done = event
    finally:
        await view.close()
    return done
