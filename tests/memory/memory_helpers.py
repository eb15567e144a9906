"""Shared helpers for the memory tests (imported by name: tests dirs are not packages)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from agent.providers.base import ModelRequest
from agent.providers.scripted import ScriptedClient, reply
from memory.terms import extract_codes
from tests.fakes.clock import FakeClock

MEMORY_NOW = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)


def memory_clock() -> FakeClock:
    """The memory tests' clock: a fixed June morning, moved by hand."""
    return FakeClock(MEMORY_NOW)


NAMES = {
    "宁德时代": "300750",
    "比亚迪": "002594",
    "贵州茅台": "600519",
    "长信科技": "300088",
    "平安银行": "000001",
}


def resolve_codes(text: str) -> list[str]:
    """6-digit codes plus stock names (longest first), like the markets resolver."""
    codes = extract_codes(text)
    for name in sorted(NAMES, key=len, reverse=True):
        if name in text:
            codes.append(NAMES[name])
    return list(dict.fromkeys(codes))


def answering(*texts: str) -> ScriptedClient:
    """A scripted model answering each call with the next text."""
    return ScriptedClient([reply(t) for t in texts])


def answer_with(fn: Callable[[ModelRequest], str]) -> ScriptedClient:
    """A scripted model whose every answer is computed from the request."""
    return ScriptedClient(default=lambda req: reply(fn(req)))
