"""An in-process `ModelClient` that replays a script (runtime tests and bench; no HTTP).

Each turn (one `stream()` call) is one of:
- a list of chunks (an `Exception` instance in the list is raised at that point),
- a callable `request -> list of chunks` (to answer based on what the runtime sent),
- an `Exception` instance, raised before any chunk.
Every request is recorded in `requests`. When the script runs out, `default` is used if set,
otherwise `ScriptExhausted` is raised so a test fails loudly.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from agent.messages import ToolCallPart
from agent.providers.base import (
    Chunk,
    FinishChunk,
    ModelInfo,
    ModelRequest,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageChunk,
)
from agent.usage import Usage

Turn = (
    Sequence[Chunk | BaseException]
    | Callable[[ModelRequest], Iterable[Chunk | BaseException]]
    | BaseException
)

_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The code under test made more model calls than the script provides."""


class ScriptedClient:
    def __init__(
        self,
        script: Iterable[Turn] = (),
        *,
        info: ModelInfo | None = None,
        default: Turn | None = None,
    ) -> None:
        self.info = info or ModelInfo(id="scripted", model="scripted-model", provider="scripted")
        self.script: list[Turn] = list(script)
        self.default = default
        self.requests: list[ModelRequest] = []
        self.closed = False

    def add(self, *turns: Turn) -> None:
        self.script.extend(turns)

    async def aclose(self) -> None:
        self.closed = True

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        if self.script:
            turn = self.script.pop(0)
        elif self.default is not None:
            turn = self.default
        else:
            raise ScriptExhausted(f"model call #{len(self.requests)} has no scripted turn")
        if isinstance(turn, BaseException):
            raise turn
        items = turn(request) if callable(turn) else turn
        for item in items:
            if isinstance(item, BaseException):
                raise item
            yield item


# ---- turn builders ------------------------------------------------------------------------------
def reply(
    text: str = "",
    *,
    tool_calls: Sequence[ToolCallPart | tuple[str, dict[str, Any] | None]] = (),
    thinking: str = "",
    usage: Usage | None = None,
    pieces: int = 1,
) -> list[Chunk]:
    """One model turn: optional thinking, text split into `pieces` deltas, tool calls
    (`ToolCallPart`s or `(name, arguments)` pairs), usage and the finish reason."""
    chunks: list[Chunk] = []
    if thinking:
        chunks.append(ThinkingChunk(thinking))
    if text:
        size = max(1, -(-len(text) // max(1, pieces)))
        chunks.extend(TextChunk(text[i : i + size]) for i in range(0, len(text), size))
    calls = [c if isinstance(c, ToolCallPart) else tool_call(*c) for c in tool_calls]
    chunks.extend(ToolCallChunk(c) for c in calls)
    chunks.append(UsageChunk(usage or Usage(input_tokens=10, output_tokens=5)))
    chunks.append(FinishChunk("tool_calls" if calls else "stop"))
    return chunks


def tool_call(name: str, arguments: dict[str, Any] | None = None, call_id: str | None = None) -> ToolCallPart:
    return ToolCallPart(
        id=call_id or f"call_s{next(_ids)}",
        name=name,
        arguments=arguments if arguments is not None else {},
    )
