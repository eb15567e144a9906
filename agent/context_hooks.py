"""The hooks the runtime calls around each turn for memory and compaction.

    recall(session_id, user_text)  → the `<relevant-memories>` block for this turn (or None)
    compact(session_id, messages, client, overhead_tokens, force)
                                   → (new messages, Compaction event) when the history was compacted
    after_turn(session_id, messages)   background upkeep (TaskState, memory extraction); never blocks
    session_end(session_id, messages)  the session is closing (/new, /clear): extract long-term memory

`memory.hooks.MemoryContextHooks` fills these in; `NoContextHooks` is the do-nothing default.
Recall is *transient* (`context_text` → `ModelRequest.context`): the model sees it for this call
only, after the stored conversation and after the prompt-cache breakpoint, so the next request's
prefix — and the provider's prompt cache — is unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from agent import events as ev
from agent.compaction import Compactor
from agent.messages import Message
from agent.ports import SessionStore
from agent.providers.base import ModelClient

log = logging.getLogger(__name__)
T = TypeVar("T")

RECALL_OPEN, RECALL_CLOSE = "<relevant-memories>", "</relevant-memories>"
CURRENT_OPEN, CURRENT_CLOSE = "<current-user-message>", "</current-user-message>"
_CURRENT_RE = re.compile(re.escape(CURRENT_OPEN) + r"\n?(.*?)\n?" + re.escape(CURRENT_CLOSE), re.S)
RECALL_TRAILER = (
    "（以上为供参考的上下文，不是用户的新消息；请回答上面用户的最新消息。/ "
    "The context above is for reference only, not a new user message; answer the user's latest message above.）"
)


def wrap_recall(text: str, recalled: str) -> str:
    return f"{RECALL_OPEN}\n{recalled}\n{RECALL_CLOSE}\n{CURRENT_OPEN}\n{text}\n{CURRENT_CLOSE}"


def unwrap_recall(text: str) -> str:
    """The user's own words inside a wrapped message (heuristics must not read the memories)."""
    found = _CURRENT_RE.search(text)
    return found.group(1) if found else text


def context_text(blocks: Sequence[str]) -> str:
    """Context for one model call (recalled memories, current references, a fresh snapshot),
    sent by the provider after the stored conversation (`ModelRequest.context`) — never stored, and
    placed after the prompt-cache breakpoint so the cached prefix stays byte-identical."""
    blocks = [b for b in blocks if b]
    return "\n".join([*blocks, RECALL_TRAILER]) if blocks else ""


class TaskTracker:
    """Owns background tasks (memory upkeep) so they are referenced, their errors logged, and they
    can be awaited or cancelled at shutdown. The composition root creates one and closes it."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait for the running tasks (and any they spawn). True when all finished in time."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._tasks:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            _, pending = await asyncio.wait(set(self._tasks), timeout=left)
            if pending and deadline is not None and loop.time() >= deadline:
                return False
        return True

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class ContextHooks(Protocol):
    """What the runtime calls around each turn; each does nothing unless a subclass fills it in."""

    async def recall(self, session_id: str, user_text: str) -> str | None:
        return None

    async def compact(
        self,
        session_id: str,
        messages: list[Message],
        client: ModelClient,
        overhead_tokens: int,
        force: bool,
    ) -> tuple[list[Message], ev.Compaction] | None:
        return None

    async def after_turn(self, session_id: str, messages: list[Message]) -> None:
        return None

    async def session_end(self, session_id: str, messages: list[Message]) -> None:
        return None


class NoContextHooks(ContextHooks):
    """No memory, no compaction."""

    compactor: Compactor | None = None


class CompactingHooks(NoContextHooks):
    """Compaction without memory: runs `compactor` and, when a `store` is given, replaces the
    session's stored messages with the compacted list (so the runtime may or may not persist it
    itself; replacing twice is harmless). `overhead_tokens` is the floor for the system prompt and
    tool schemas estimate when the caller passes 0."""

    def __init__(
        self,
        compactor: Compactor | None = None,
        *,
        store: SessionStore | None = None,
        overhead_tokens: int = 0,
    ):
        self.compactor = compactor
        self.store = store
        self.overhead_tokens = overhead_tokens

    async def compact(
        self,
        session_id: str,
        messages: list[Message],
        client: ModelClient,
        overhead_tokens: int,
        force: bool,
    ) -> tuple[list[Message], ev.Compaction] | None:
        if self.compactor is None:
            return None
        result = await self.compactor.maybe_compact(
            session_id,
            messages,
            model_info=client.info,
            overhead_tokens=max(overhead_tokens, self.overhead_tokens),
            force=force,
            client=client,
        )
        if result is None:
            return None
        if self.store is not None:
            await self.store.replace_messages(session_id, result.messages)
        return result.messages, result.event()
