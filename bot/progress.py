"""One progress message per turn: a line per tool call, edited in place (⏳ → ✓ / ✗).

A turn that stops at an approval card or a question is *parked* on the chat's `ProgressBoard`
with its line showing ⏸; when the turn resumes, the first event about that very tool call adopts
the parked message, so the outcome is edited into the same line instead of a second message
being posted. A parked line nobody adopts (denied before running, moved on, expired) becomes ✗
when the chat's next turn ends. Edits keep to the adapter's edit interval; a change that comes
too soon is shown by one delayed edit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable

from adapters.base import ChatAdapter, ChatRef, DeliveryError, SentMessage
from memory.chat_tables import PausedProgress

log = logging.getLogger(__name__)

MAX_LINES = 6
RUNNING, WAITING, OK, FAILED = "⏳", "⏸", "✓", "✗"
PAUSED = "restart"  # the pseudo call id of a stopped turn's "resumes after the restart" line
# a tool that answered normally but reports that nothing happened (a T+1-rejected order, …)
_FAILED_STATUSES = frozenset({"rejected", "failed", "error", "denied", "cancelled", "canceled", "expired"})


def failure_of(content: str) -> str | None:
    """The failure a tool's JSON result reports (`{"status": "rejected"}`, `{"error": …}`), if any."""
    if not content.startswith("{"):
        return None
    try:
        value = json.loads(content)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    status = value.get("status")
    if isinstance(status, str) and status.lower() in _FAILED_STATUSES:
        return status.lower()
    return "error" if value.get("error") else None


class ProgressLine:
    def __init__(self, adapter: ChatAdapter, chat: ChatRef, clock: Callable[[], float] = time.monotonic):
        self.adapter, self.chat, self.clock = adapter, chat, clock
        self.msg: SentMessage | None = None
        self.lines: dict[str, str] = {}  # call id -> line, in the order the calls started
        self.names: dict[str, str] = {}
        self.waiting_call: str | None = None  # the call a parked turn waits on
        self._shown = ""
        self._edit_at = float("-inf")
        self._later: asyncio.Task[None] | None = None

    def text(self) -> str:
        return "\n".join(list(self.lines.values())[-MAX_LINES:])

    async def set(self, call_id: str, name: str, line: str, *, now: bool = False) -> None:
        self.names[call_id] = name
        self.lines[call_id] = line
        await self.show(force=now)

    def mark(self, call_id: str, symbol: str, suffix: str = "") -> None:
        name = self.names.get(call_id)
        if name is not None:
            self.lines[call_id] = f"{symbol} {name}{suffix}"

    def settle(self, suffix: str, *, also_waiting: bool = True) -> None:
        """Every line still running (or waiting) becomes ✗ with `suffix`."""
        for call_id, line in self.lines.items():
            if line.startswith(RUNNING) or (also_waiting and line.startswith(WAITING)):
                self.mark(call_id, FAILED, suffix)

    def pause(self, note: str) -> list[str]:
        """A stop for a restart: running lines show ⏸ and a last line says the turn resumes after
        it. Returns the calls that were running (cut off, unless they finish in the grace)."""
        running = [c for c, line in self.lines.items() if line.startswith(RUNNING)]
        for call_id in running:
            self.mark(call_id, WAITING)
        self.lines[PAUSED] = note
        return running

    async def show(self, *, force: bool = False) -> None:
        text = self.text()
        if not text or text == self._shown:
            return
        try:
            if self.msg is None:
                self.msg = await self.adapter.send_text(self.chat, text, format="plain")
            elif force or self.clock() - self._edit_at >= self.adapter.interval_for(self.chat):
                await self.adapter.edit_text(self.msg, text, format="plain")
            else:  # too soon after the last edit: one edit once the interval has passed
                if self._later is None or self._later.done():
                    self._later = asyncio.create_task(self._show_later())
                return
            self._shown = text
            self._edit_at = self.clock()
        except DeliveryError as exc:
            log.warning("progress update failed: %s", exc)

    async def _show_later(self) -> None:
        wait = self._edit_at + self.adapter.interval_for(self.chat) - self.clock()
        await asyncio.sleep(max(0.0, wait))
        await self.show(force=True)

    async def close(self) -> None:
        """Show the final state now (and drop a pending delayed edit)."""
        if self._later is not None and not self._later.done():
            self._later.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._later
        await self.show(force=True)


class ProgressBoard:
    """Parked progress of suspended turns, by chat session key."""

    def __init__(self) -> None:
        self._parked: dict[str, ProgressLine] = {}

    def park(self, key: str, progress: ProgressLine) -> None:
        self._parked[key] = progress

    def adopt(self, key: str, call_id: str) -> ProgressLine | None:
        parked = self._parked.get(key)
        if parked is not None and parked.waiting_call == call_id:
            parked.waiting_call = None
            return self._parked.pop(key)
        return None

    def retire(self, key: str) -> ProgressLine | None:
        return self._parked.pop(key, None)


def paused_record(progress: ProgressLine, running: list[str]) -> PausedProgress:
    """What a stopped turn's progress message needs to be settled after the restart."""
    lines = {c: line for c, line in progress.lines.items() if c != PAUSED}
    return PausedProgress(lines=lines, names=dict(progress.names), cut=list(running))


def settled_text(record: PausedProgress, cut_note: str, *, not_run: str = "") -> str:
    """The stopped turn's progress after the restart: its lines without the "paused" line, a tool
    cut off by the stop marked with `cut_note` (the chat is told it may or may not have run), and
    with `not_run`, a line still waiting (the turn is closed, not resumed) marked with it."""
    lines = dict(record.lines)
    names = record.names
    for call_id in record.cut:
        if call_id in lines:
            lines[call_id] = f"{FAILED} {names.get(call_id, '?')}: {cut_note}"
    if not_run:
        for call_id, line in lines.items():
            if call_id != PAUSED and line.startswith((WAITING, RUNNING)):
                lines[call_id] = f"{FAILED} {names.get(call_id, '?')}: {not_run}"
    return "\n".join(list(lines.values())[-MAX_LINES:])
