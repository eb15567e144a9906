"""Per-message memos. Messages are immutable, and a session's history is walked again every round
(references, compaction's token count, TaskState's "has enough been said"): what is derived from
one message is remembered, keyed by identity and checked through a weak reference, so a recycled
id never hits and a dropped message is not kept alive."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from agent.messages import Message

T = TypeVar("T")


class MessageMemo(Generic[T]):
    """`memo(message)` is `fn(message)`, computed once per message object. Bounded: the memo is
    emptied when it holds `max_entries` (the live histories are counted again, once)."""

    def __init__(self, fn: Callable[[Message], T], max_entries: int = 20_000):
        self.fn = fn
        self.max_entries = max_entries
        self._entries: dict[int, tuple[weakref.ref[Message], T]] = {}

    def __call__(self, message: Message) -> T:
        hit = self._entries.get(id(message))
        if hit is not None and hit[0]() is message:
            return hit[1]
        value = self.fn(message)
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        self._entries[id(message)] = (weakref.ref(message), value)
        return value
