"""Runs one tool call: lookup → argument validation → policy (approval) → run/submit → render.

Every failure becomes a tool result the model can read and recover from; only `Suspend` (an
approval or a question) escapes, so the runtime can park the turn. Results over the spill limit
are written to `results/` and the model gets a preview plus a path it can read back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent.approval import ApprovalGate, Requester
from agent.consent import StandingApproval
from agent.errors import (
    ToolError,
    ToolFailed,
    ToolFailedInternally,
    ToolNotFound,
    ToolTimedOut,
    is_storage_failure,
)
from agent.events import RuntimeEvent, ToolErrorEvent, ToolResult
from agent.messages import Message, ToolCallPart
from agent.ports import TurnRecord
from agent.tools.registry import Attachment, Tool, ToolContext, ToolOutput, Toolset, render_result
from agent.untrusted import defuse_control_tokens

log = logging.getLogger(__name__)

SPILL_CHARS = 8_000
PREVIEW_CHARS = 1_500


class BackgroundRunner(Protocol):
    """Submits a background tool and returns the immediate answer for the model (task id)."""

    async def submit(self, ctx: ToolContext, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(slots=True)
class CallOutcome:
    call: ToolCallPart
    message: Message
    event: RuntimeEvent
    ok: bool
    attachments: list[Attachment] = field(default_factory=list)
    # The chat's standing approval the call ran under, told to the chat with the result.
    standing: StandingApproval | None = None


def error_outcome(call: ToolCallPart, code: str, message: str) -> CallOutcome:
    content = json.dumps({"error": message, "code": code}, ensure_ascii=False)
    return CallOutcome(
        call=call,
        message=Message.tool_result(call.id, call.name, content, is_error=True),
        event=ToolErrorEvent(call_id=call.id, name=call.name, code=code, message=message),
        ok=False,
    )


@dataclass(frozen=True, slots=True)
class TurnScope:
    """The per-turn state one call runs under. It travels with each call because one executor
    (one runtime) serves every chat at once: state stored on the executor would be another
    chat's by the time a call reads it."""

    turn: TurnRecord
    who: Requester
    # Records a side-effecting call's status on *this* turn before/after it runs, so the durable
    # turn shows `executing` first: a crash in between is then reported, never silently repeated.
    mark: Callable[[str, str], Awaitable[None]] | None = None


@dataclass
class ToolExecutor:
    toolset: Toolset
    gate: ApprovalGate
    results_dir: Path | None = None
    spill_chars: int = SPILL_CHARS
    default_timeout: float | None = 600.0
    background: BackgroundRunner | None = None
    # Applied to every result the model and the store get: secrets masked (the model never needs
    # a raw key), and chat-template tokens from outside content defused (`agent.untrusted`).
    redact: Callable[[str], str] | None = None

    def is_concurrency_safe(self, call: ToolCallPart) -> bool:
        return call.name in self.toolset and self.toolset.get(call.name).spec.concurrency_safe

    def partition(self, calls: list[ToolCallPart]) -> list[tuple[bool, list[ToolCallPart]]]:
        """Consecutive concurrency-safe calls form one parallel batch; the rest run one by one."""
        batches: list[tuple[bool, list[ToolCallPart]]] = []
        for call in calls:
            safe = self.is_concurrency_safe(call)
            if safe and batches and batches[-1][0]:
                batches[-1][1].append(call)
            else:
                batches.append((safe, [call]))
        return batches

    async def run(self, call: ToolCallPart, ctx: ToolContext, scope: TurnScope) -> CallOutcome:
        started = time.perf_counter()
        turn, who, mark = scope.turn, scope.who, scope.mark
        try:
            tool = self.toolset.get(call.name)
            tool.validate(call.arguments)  # never ask a human to approve garbage
            standing = await self.gate.check(tool.spec, call, turn, who)  # may raise Suspend / ToolDenied
            if tool.spec.background and self.background is not None:
                value: Any = await self.background.submit(ctx, tool, call.arguments or {})
            else:
                effectful = tool.spec.side_effect != "read_only"
                if effectful and mark:
                    await mark(call.id, "executing")
                value = await self._call(tool, ctx, call.arguments or {})
                if effectful and mark:
                    await mark(call.id, "done")
        except ToolNotFound:
            known = ", ".join(sorted(t.name for t in self.toolset)[:40])
            return error_outcome(
                call, "tool_not_found", f"unknown tool: {call.name}. Available tools: {known}"
            )
        except ToolError as exc:
            return error_outcome(call, exc.code, self._clean(str(exc)))
        attachments: list[Attachment] = []
        if isinstance(value, ToolOutput):
            attachments = list(value.attachments)
            value = value.content
        content = self._spill(call, self._clean(render_result(value)))
        elapsed = time.perf_counter() - started
        return CallOutcome(
            call=call,
            message=Message.tool_result(call.id, call.name, content),
            event=ToolResult(call.id, call.name, content, elapsed, tuple(attachments)),
            ok=True,
            attachments=attachments,
            standing=standing,
        )

    def _clean(self, text: str) -> str:
        text = defuse_control_tokens(text)
        return self.redact(text) if self.redact is not None else text

    async def _call(self, tool: Tool, ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        timeout = tool.spec.timeout or self.default_timeout
        try:
            return await asyncio.wait_for(tool.call(ctx, arguments), timeout)
        except TimeoutError:
            raise ToolTimedOut(f"{tool.name} did not finish within {timeout:.0f} s and was stopped") from None
        except (ToolError, asyncio.CancelledError):
            raise
        except Exception as exc:
            from agent.approval import Suspend

            if isinstance(exc, Suspend):
                raise
            if is_storage_failure(exc):
                log.error("%s failed on the database", tool.name, exc_info=exc)
                raise ToolFailedInternally(
                    f"{tool.name} did not complete: tapebot's database failed (an internal error, "
                    "not caused by the request; the details are in the operator's log). Tell the user "
                    "it did not go through; do not retry it now."
                ) from None
            raise ToolFailed(f"{tool.name} failed: {type(exc).__name__}: {exc}") from exc

    def _spill(self, call: ToolCallPart, content: str) -> str:
        if len(content) <= self.spill_chars or self.results_dir is None:
            return content
        self.results_dir.mkdir(parents=True, exist_ok=True)
        name = f"{call.name}_{call.id}".replace("/", "_")[:80] + ".txt"
        (self.results_dir / name).write_text(content, encoding="utf-8")
        return (
            f"{content[:PREVIEW_CHARS]}\n…\n[result truncated: {len(content):,} characters in total. "
            f'The full text is at results/{name}; read it with read_file(path="results/{name}", offset=…).]'
        )
