"""Streaming a reply by editing one message at a safe rate.

    stream = StreamingMessage(adapter, chat)          # rate from the adapter: 1 s DMs, 3 s groups
    await stream.append("Hel"); await stream.append("lo")   # returns at once; edits happen behind
    await stream.flush()                              # e.g. before a long tool call (optional)
    sent = await stream.finish(final_text, buttons=...)

Text is rendered from Markdown on every edit (the renderer always produces valid output, so partial
Markdown is safe; adapters resend plain text if the platform still rejects it). Edits of one stream
are at least `min_interval` apart on the injected clock. When the text outgrows the platform limit the
current message is finalised and the stream continues in a new one; `finish` returns every message.
Intermediate edit failures are logged and skipped; only the final pass raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from adapters.base import (
    Button,
    ChatAdapter,
    ChatRef,
    DeliveryError,
    DeliveryUncertain,
    MessageGone,
    SentMessage,
    TextFormat,
)
from adapters.render import split_message, utf16_len

log = logging.getLogger(__name__)

#: room left below the platform limit for rendering growth (escaped mentions, list bullets, …)
_MARGIN = 64


class StreamingMessage:
    def __init__(
        self,
        adapter: ChatAdapter,
        chat: ChatRef,
        *,
        min_interval: float | None = None,
        reply_to: str | None = None,
        format: TextFormat = "markdown",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        first_delay: float = 0.0,
        resend_note: str = "",
        adopt: Sequence[SentMessage] = (),
        on_sent: Callable[[list[SentMessage]], Awaitable[None]] | None = None,
    ):
        # `resend_note` heads the final answer when a partial part's send timed out unanswered
        # (it may show above; its id is unknown, so it cannot be edited). `adopt`: messages a turn
        # stopped by a restart left with partial text; this stream replaces them in place.
        # `on_sent`: a partial send put a new message out (the caller may keep where it is).
        # `first_delay` holds the first send back a little: a short answer that completes within
        # it goes out as one message, with no edit (and no edit-rate wait) at all.
        self.first_delay = first_delay
        self._started = clock()
        self.adapter = adapter
        self.chat = chat
        self.min_interval = adapter.interval_for(chat) if min_interval is None else min_interval
        self.reply_to = reply_to
        self.format = format
        self._clock = clock
        self._sleep = sleep
        self._text = ""
        self._messages: list[SentMessage] = list(adopt)
        self._shown: list[str] = [""] * len(self._messages)
        self.resend_note = resend_note
        self.on_sent = on_sent
        self._uncertain = False  # an intermediate send of unknown fate: no more partial sends
        self._last_push: float | None = None
        self._lock = asyncio.Lock()
        self._pending: asyncio.Task[None] | None = None
        # the delayed first send, before its task exists: most answers finish within the delay
        # and cancel a timer instead of a sleeping task (no task, no cancellation round)
        self._timer: asyncio.TimerHandle | None = None
        self._pushing = False  # the pending flush is past its wait: its request may be in flight
        self._finished = False
        self.pushes: list[float] = []  # clock time of every flush that hit the network (for tests)

    @property
    def text(self) -> str:
        return self._text

    @property
    def messages(self) -> list[SentMessage]:
        return list(self._messages)

    async def append(self, delta: str) -> None:
        if self._finished:
            raise RuntimeError("stream already finished")
        self._text += delta
        self._schedule()

    def _schedule(self) -> None:
        if self._timer is not None:
            return  # the first send is due after its delay: it shows all text appended by then
        if self._pending is None or self._pending.done():
            if self._last_push is None and not self._messages and self._sleep is asyncio.sleep:
                wait = self._started + self.first_delay - self._clock()
                if wait > 0:
                    self._timer = asyncio.get_running_loop().call_later(wait, self._fire)
                    return
            self._pending = asyncio.create_task(self._flush_soon())

    def _fire(self) -> None:
        """The first send's delay is over: it goes on as the pending flush (which waits no more)."""
        self._timer = None
        self._pending = asyncio.create_task(self._flush_soon())

    def _fire_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._fire()  # the flush sleeps what is left of the delay, as it always did

    async def _wait_turn(self, *, first: bool = False) -> None:
        if self._last_push is not None:
            wait = self._last_push + self.min_interval - self._clock()
        elif first:
            wait = self._started + self.first_delay - self._clock()
        else:
            return
        if wait > 0:
            await self._sleep(wait)

    async def _flush_soon(self) -> None:
        try:
            async with self._lock:
                await self._wait_turn(first=True)
                if not self._finished:
                    self._pushing = True
                    try:
                        await self._push(final=False)
                    finally:
                        self._pushing = False
        except asyncio.CancelledError:
            raise
        except Exception:  # intermediate edits are best effort
            log.exception("streaming edit failed")

    async def flush(self) -> None:
        """Show everything appended so far (waits for the rate limit, not for more text)."""
        self._fire_now()
        if self._pending is not None and not self._pending.done():
            await self._pending
        async with self._lock:
            await self._wait_turn()
            if not self._finished:
                await self._push(final=False)

    async def finish(
        self, text: str | None = None, *, buttons: Sequence[Sequence[Button]] | None = None
    ) -> list[SentMessage]:
        """Final render; `buttons` go on the last message. Raises DeliveryError if it can't deliver."""
        if text is not None:
            self._text = text
        if self._timer is not None:  # nothing shown yet and nothing in flight: sent once, below
            self._timer.cancel()
            self._timer = None
        if self._pending is not None and not self._pending.done():
            if not self._messages and not self._pushing:
                # nothing shown yet: skip the delayed first send and deliver the final text once.
                # Never cancel a send in flight: it may land although we would not know its id,
                # and the final pass would post it again.
                self._pending.cancel()
                try:
                    await self._pending
                except asyncio.CancelledError:
                    pass
            else:
                await self._pending
        async with self._lock:
            self._finished = True
            if not self._text.strip():
                if not self._messages:
                    return []
                self._text = "…"
            await self._wait_turn()
            await self._push(final=True, buttons=buttons)
        return list(self._messages)

    def _chunks(self) -> list[str]:
        note = f"{self.resend_note}\n\n" if self._uncertain and self.resend_note else ""
        limit = self.adapter.max_message_len - _MARGIN - len(note)
        length = utf16_len if self.adapter.platform == "telegram" else len
        # masked whole before it is cut: a secret across a cut would pass as two harmless halves
        whole = self.adapter._outgoing(self._text)
        chunks = [c for c in split_message(whole, limit, length=length) if c.strip()]
        if note and len(self._messages) < len(chunks):  # the part whose first send was uncertain
            k = len(self._messages)
            chunks[k] = note + chunks[k]
        return chunks

    async def _push(self, *, final: bool, buttons: Sequence[Sequence[Button]] | None = None) -> None:
        if self._uncertain and not final:
            return
        chunks = self._chunks()
        if not chunks:
            return
        touched = False
        had = len(self._messages)
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            kb = buttons if (final and last) else None
            try:
                if i < len(self._messages):
                    if self._shown[i] == chunk and not kb:
                        continue
                    await self.adapter.edit_text(self._messages[i], chunk, buttons=kb, format=self.format)
                    self._shown[i] = chunk
                else:
                    reply_to = self.reply_to if i == 0 else None
                    sent = await self.adapter.send_text(
                        self.chat, chunk, buttons=kb, reply_to=reply_to, format=self.format
                    )
                    self._messages.append(sent)
                    self._shown.append(chunk)
                touched = True
            except MessageGone:
                # someone deleted our message: continue in a fresh one
                sent = await self.adapter.send_text(self.chat, chunk, buttons=kb, format=self.format)
                self._messages[i] = sent
                self._shown[i] = chunk
                touched = True
            except DeliveryError as exc:
                if final:
                    raise
                log.warning("streaming edit skipped", exc_info=True)
                if isinstance(exc, DeliveryUncertain) and i >= len(self._messages):
                    self._uncertain = True  # it may have landed: sent once more, in full, at the end
                    break
        if final:  # adopted messages beyond the final text's parts: emptied, not left partial
            for i in range(len(chunks), len(self._messages)):
                try:
                    await self.adapter.edit_text(self._messages[i], "…", format="plain")
                except DeliveryError:
                    log.warning("could not empty a leftover message", exc_info=True)
        if touched:
            self._last_push = self._clock()
            self.pushes.append(self._last_push)
        if not final and len(self._messages) > had and self.on_sent is not None:
            await self.on_sent(list(self._messages))
