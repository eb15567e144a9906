"""Helpers for runtime tests: a scripted in-process model and event collection."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

from agent.messages import ToolCallPart
from agent.providers.base import (
    Chunk,
    FinishChunk,
    ModelInfo,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from agent.usage import Usage

_ids = itertools.count(1)


def call(name: str, args: dict[str, Any] | None = None, raw: str = "") -> ToolCallChunk:
    return ToolCallChunk(ToolCallPart(id=f"call_{next(_ids)}", name=name, arguments=args, raw_arguments=raw))


def text(t: str) -> TextChunk:
    return TextChunk(t)


class Script:
    """A ModelClient that replays scripted rounds; each round is a list of chunks or a callable."""

    def __init__(
        self, rounds: list[list[Chunk] | Callable[[ModelRequest], list[Chunk]]], model: str = "main"
    ):
        self.rounds = list(rounds)
        self.requests: list[ModelRequest] = []
        self.info = ModelInfo(
            id=model, model="scripted", provider="scripted", input_per_1m=1.0, output_per_1m=2.0
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        if not self.rounds:
            yield TextChunk("(script exhausted)")
            return
        r = self.rounds.pop(0)
        chunks = r(request) if callable(r) else r
        for c in chunks:
            yield c
        yield UsageChunk(Usage(input_tokens=10, output_tokens=5))
        yield FinishChunk("tool_calls" if any(isinstance(c, ToolCallChunk) for c in chunks) else "stop")

    async def aclose(self) -> None:
        return None


async def collect(aiter) -> list:
    return [e async for e in aiter]
