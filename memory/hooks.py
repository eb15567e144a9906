"""`MemoryContextHooks`: the runtime's context hooks backed by long-term memory, TaskState, the
context archive and the compactor — plus `build_memory_hooks`, the one-call wiring for the
composition root.

Nothing here blocks a reply: recall is one bounded read; TaskState updates and memory extraction
are scheduled on the caller's `TaskTracker` and run after the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agent.compaction import Compactor
from agent.context_hooks import CompactingHooks, TaskTracker, unwrap_recall
from agent.memo import MessageMemo
from agent.messages import Message
from agent.ports import Clock, SessionStore, UsageRecord
from agent.providers.base import ModelClient
from agent.providers.metered import MeteredClient
from memory.archive import FileArchiveStore
from memory.db import Database
from memory.extraction import WAIVER_REFUSED, MemoryExtractor
from memory.longterm import MemoryStore
from memory.recall import MemoryRecall
from memory.taskstate import TaskStateStore, TaskStateUpdater
from memory.terms import CodeResolver

log = logging.getLogger(__name__)

ScopeOf = Callable[[str], Awaitable[str]]
DEFAULT_SCOPE = "default"


def _content_chars(messages: Sequence[Message]) -> int:
    """How much a stretch of dialogue says: its text, tool results, and a little per tool call."""
    return sum(map(_says, messages))


def _message_chars(m: Message) -> int:
    return len(m.text) + 40 * len(m.tool_calls) + sum(len(r.content) for r in m.tool_results)


# a user message this long states something (a rule, a plan, a goal) rather than asking
STATING_CHARS = 60

# counted after every turn over the messages since the last TaskState: each message once
_says = MessageMemo(_message_chars)


def session_scope_resolver(db: Database) -> ScopeOf:
    """Memories belong to the account the session's user linked (memory.links; never in a group),
    else to the user (else its chat, else "default"), read from the core `sessions` table; the
    user's is cached, the link is read each time (`tapebot link` may change it from another
    process)."""
    from memory.links import LinkStore

    cache: dict[str, str] = {}
    links = LinkStore(db)

    async def scope_of(session_id: str) -> str:
        try:
            account = await links.session_account(session_id)
        except Exception:
            log.exception("cannot read the linked account of session %s", session_id)
            account = ""
        return account or await own_scope(session_id)

    async def own_scope(session_id: str) -> str:
        if session_id in cache:
            return cache[session_id]
        from memory.models import SESSIONS

        def core(c: Connection) -> Any:
            return c.execute(
                sa.select(SESSIONS.c.user_id, SESSIONS.c.chat_key).where(SESSIONS.c.id == session_id)
            ).first()

        scope = DEFAULT_SCOPE
        try:
            row = await db.run(core)
            if row is not None:
                scope = row[0] or row[1] or DEFAULT_SCOPE
                cache[session_id] = scope
        except Exception:
            log.exception("cannot resolve the memory scope of session %s", session_id)
        return scope

    return scope_of


async def _default_scope(session_id: str) -> str:
    return DEFAULT_SCOPE


class _Flush:
    """Adapts the extractor to `agent.compaction.MemoryFlush` (session → scope)."""

    def __init__(self, extractor: MemoryExtractor, scope_of: ScopeOf):
        self.extractor, self.scope_of = extractor, scope_of

    async def flush(self, session_id: str, head: Sequence[Message]) -> int:
        return await self.extractor.flush_before_compaction(await self.scope_of(session_id), session_id, head)


class MemoryContextHooks(CompactingHooks):
    def __init__(
        self,
        *,
        recall: MemoryRecall,
        tracker: TaskTracker,
        extractor: MemoryExtractor | None = None,
        taskstate: TaskStateUpdater | None = None,
        compactor: Compactor | None = None,
        scope_of: ScopeOf | None = None,
        session_store: SessionStore | None = None,
        overhead_tokens: int = 0,
        taskstate_every: int = 8,
        taskstate_min_chars: int = 200,
        changing_tools: frozenset[str] = frozenset(),
        extract_every: int = 12,
    ):
        super().__init__(compactor, store=session_store, overhead_tokens=overhead_tokens)
        self.recaller = recall
        self.tracker = tracker
        self.extractor = extractor
        self.taskstate = taskstate
        self.scope_of = scope_of or _default_scope
        self.taskstate_every = taskstate_every
        self.taskstate_min_chars = taskstate_min_chars
        self.changing_tools = changing_tools
        self.extract_every = extract_every
        self._taskstate_seen: dict[str, int] = {}
        self._extract_seen: dict[str, int] = {}
        # approval waivers the extraction refused, told to the model with the session's next
        # recall (once) so that it tells the user they were not remembered
        self._refused_waivers: dict[str, list[str]] = {}

    @property
    def flush_port(self) -> _Flush | None:
        return _Flush(self.extractor, self.scope_of) if self.extractor is not None else None

    async def recall(self, session_id: str, user_text: str) -> str | None:
        try:
            scope = await self.scope_of(session_id)
            result = await self.recaller.recall(scope, unwrap_recall(user_text), session_id=session_id)
        except Exception:  # recall is an aid; a failure must never cost the reply
            log.exception("memory recall failed for session %s", session_id)
            return None
        refused = self._refused_waivers.pop(session_id, [])
        if refused:
            return "\n\n".join(p for p in (result.text, _waiver_note(refused)) if p)
        return result.text or None

    async def after_turn(self, session_id: str, messages: list[Message]) -> None:
        """Schedules TaskState refresh and memory extraction (every `extract_every` new messages) in
        the background and returns at once. TaskState is refreshed only when the turns since the
        last one changed something worth keeping: a call of a tool that changes state
        (`changing_tools`: a trade, a portfolio edit, a schedule…), a user message that states a
        rule, plan or goal (`STATING_CHARS` long), or `taskstate_every` new
        messages that say something (`taskstate_min_chars` of text and tool output). Small talk
        never costs a summary call."""
        n = len(messages)
        snapshot: list[Message] | None = None  # copied only when work is scheduled (most turns: none)
        if self.taskstate is not None and self._taskstate_due(session_id, messages):
            self._taskstate_seen[session_id] = n
            snapshot = list(messages)
            self.tracker.spawn(self.taskstate.update(session_id, snapshot), name=f"taskstate:{session_id}")
        if self.extractor is not None and n - self._extract_seen.get(session_id, 0) >= self.extract_every:
            self._extract_seen[session_id] = n
            snapshot = list(messages) if snapshot is None else snapshot
            self.tracker.spawn(
                self._extract(session_id, snapshot, False), name=f"memory-extract:{session_id}"
            )

    def _taskstate_due(self, session_id: str, messages: Sequence[Message]) -> bool:
        seen = self._taskstate_seen.get(session_id, 0)
        fresh = messages[seen:]
        if self.changing_tools and any(
            c.name in self.changing_tools for m in fresh if m.role == "assistant" for c in m.tool_calls
        ):
            return True
        # a user message long enough to state a rule, a plan or a goal, not just ask
        if any(m.role == "user" and len(m.text) >= STATING_CHARS for m in fresh):
            return True
        if len(fresh) < self.taskstate_every:
            return False
        return _content_chars(fresh) >= self.taskstate_min_chars

    async def session_end(self, session_id: str, messages: list[Message]) -> None:
        """/new, /clear or shutdown: extract long-term memory from the whole session (background)."""
        if self.extractor is not None and messages:
            self.tracker.spawn(
                self._extract(session_id, list(messages), False), name=f"memory-end:{session_id}"
            )
        self._taskstate_seen.pop(session_id, None)
        self._extract_seen.pop(session_id, None)

    async def _extract(self, session_id: str, messages: list[Message], skip_layers: bool) -> None:
        assert self.extractor is not None
        scope = await self.scope_of(session_id)
        report = await self.extractor.extract_session(scope, session_id, messages, skip_layers=skip_layers)
        if report.saved:
            log.info("saved %d memory(ies) from session %s", len(report.saved), session_id)
        waivers = [text for text, reason in report.rejected if reason == WAIVER_REFUSED]
        if waivers:
            self._refused_waivers.setdefault(session_id, []).extend(waivers)


def _waiver_note(refused: list[str]) -> str:
    said = "; ".join(f"“{' '.join(text.split())[:120]}”" for text in refused[:3])
    return (
        "# Not remembered\n"
        f"Long-term memory did not keep {said}: it would waive the user's approval of actions, and "
        "every action that needs approval is approved by the user on its own card. Tell the user "
        "so once, briefly, in their language; do not save it in other words."
    )


def build_memory_hooks(
    db: Database,
    *,
    archive_dir: Path,
    tracker: TaskTracker,
    memory_client: ModelClient | None = None,
    summarizer: ModelClient | None = None,
    code_resolver: CodeResolver | None = None,
    session_store: SessionStore | None = None,
    scope_of: ScopeOf | None = None,
    overhead_tokens: int = 0,
    recall_budget_chars: int = 1200,
    clock: Clock | None = None,
    meter: Callable[[UsageRecord], Awaitable[None]] | None = None,
    changing_tools: frozenset[str] = frozenset(),
) -> MemoryContextHooks:
    """Everything memory needs, wired. `memory_client` runs extraction, de-duplication and TaskState
    (a cheap model is fine; None disables them); `summarizer` writes compaction summaries (None:
    the turn's own model); `meter` records each side call's usage (`tapebot usage` reports them)."""
    store = MemoryStore(db, clock=clock, code_resolver=code_resolver)
    archive = FileArchiveStore(archive_dir, clock=clock, code_resolver=code_resolver)
    tasks = TaskStateStore(db, clock=clock)
    recall = MemoryRecall(
        store, archive=archive, taskstates=tasks, code_resolver=code_resolver, max_chars=recall_budget_chars
    )
    memory_side = taskstate_side = memory_client
    if memory_client is not None and meter is not None:
        memory_side = MeteredClient(memory_client, "memory", meter)
        taskstate_side = MeteredClient(memory_client, "taskstate", meter)
    extractor = MemoryExtractor(store, client=memory_side) if memory_side is not None else None
    scope = scope_of or session_scope_resolver(db)
    hooks = MemoryContextHooks(
        recall=recall,
        tracker=tracker,
        extractor=extractor,
        taskstate=TaskStateUpdater(tasks, taskstate_side) if taskstate_side is not None else None,
        scope_of=scope,
        session_store=session_store,
        overhead_tokens=overhead_tokens,
        changing_tools=changing_tools,
    )
    hooks.compactor = Compactor(archive=archive, flush=hooks.flush_port, summarizer=summarizer)
    return hooks
