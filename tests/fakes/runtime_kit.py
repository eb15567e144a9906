"""Helpers for runtime tests: a scripted in-process model, event collection, and a turn left
behind by a crash."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agent.inmemory import InMemoryStore
from agent.messages import Message, ToolCallPart
from agent.ports import TurnRecord
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


async def interrupted_turn(calls: Sequence[tuple[str, str]]) -> InMemoryStore:
    """A store holding turn `t_1` of session `s1`, cut off with one call `c{i}` (argument `tag`:
    `t{i}`) per (tool name, status) in `calls`; status "answered" is a call whose result is
    already in the history."""
    store = InMemoryStore()
    parts = [
        ToolCallPart(id=f"c{i}", name=name, arguments={"tag": f"t{i}"}) for i, (name, _) in enumerate(calls)
    ]
    history = [Message.user("do things"), Message.assistant("", parts)]
    statuses = {}
    for i, (name, status) in enumerate(calls):
        if status == "answered":
            history.append(Message.tool_result(f"c{i}", name, "earlier result"))
            statuses[f"c{i}"] = "done"
        else:
            statuses[f"c{i}"] = status
    turn = TurnRecord(id="t_1", session_id="s1", status="running", rounds=1, calls=statuses, requester="u1")
    await store.commit("s1", messages=history, turn=turn)
    return store


def results_by_call(messages: Sequence[Message]) -> dict[str, list[str]]:
    """Every tool result's content in `messages`, by call id."""
    results: dict[str, list[str]] = {}
    for m in messages:
        for r in m.tool_results:
            results.setdefault(r.call_id, []).append(r.content)
    return results
