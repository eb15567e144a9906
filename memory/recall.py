"""Hybrid recall: which memories go into this turn's `<relevant-memories>` block.

Three independent searches, merged by the *maximum* of their source weights (never the sum):

    full text  (0.8 × relative bm25 in [0.5, 1])  trigram FTS over content, escaped query
    stock code (1.2)                               exact codes (6-digit codes and names resolved
                                                   through the stock list by `code_resolver`)
    keyword    (0.25)                              2-character words through the bigram index

Then stock scoping — a question naming stocks keeps only global memories and memories of those
stocks (比亚迪 never recalls 宁德时代's single-stock memories); a question naming no stock keeps
only global memories (a sector word like 科技 never recalls 长信科技) — and half-life decay by type
(decision 14 days, playbook 21; preference and persona never decay). The latest persona and five
latest preferences are pinned first and removed from the ranked list. Everything is laid out in
sections and cut to a 1,200-character budget (200 per item, with a `/memory trace` hint).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession

from agent.ports import Clock
from memory.archive import FileArchiveStore
from memory.hygiene import UNTRUSTED, recallable
from memory.longterm import TYPE_RULES, MemoryRecord, MemoryRow, MemoryStore, SearchHit
from memory.taskstate import TASK_STATES, TaskState, TaskStateStore, render_task_state
from memory.terms import CodeResolver, default_code_resolver, extract_keywords, trigram_terms

log = logging.getLogger(__name__)

W_FTS, W_CODE, W_KEYWORD = 0.8, 1.2, 0.25
RECALL_TYPES = ("preference", "decision", "playbook", "scenario", "persona")
MAX_TOTAL_CHARS = 1200
MAX_ITEM_CHARS = 200
TRUNCATION_MARK = "…（已截断，/memory trace {id} 查看来源）"
# MemoryStore.has_memories and TaskStateStore.get in one statement
_PROBE = sa.select(
    sa.exists().where(MemoryRow.scope == sa.bindparam("scope")),
    sa.select(TASK_STATES.c.data)
    .where(TASK_STATES.c.session_id == sa.bindparam("session_id"))
    .scalar_subquery(),
)
HEADER = "以下是召回的相关记忆，不代表当前任务进程，仅作为参考（当前问题和工具实时数据优先）："


@dataclass
class RecallItem:
    record: MemoryRecord
    score: float
    sources: set[str] = field(default_factory=set)


@dataclass
class RecallResult:
    text: str = ""
    pinned: list[MemoryRecord] = field(default_factory=list)
    ranked: list[RecallItem] = field(default_factory=list)
    archive_lines: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return [r.id for r in self.pinned] + [i.record.id for i in self.ranked]


def in_scope(record: MemoryRecord, query_codes: Sequence[str]) -> bool:
    """Global memories always; single-stock memories only when the question names that stock."""
    if not record.codes:
        return True
    return bool(query_codes) and bool(set(record.codes) & set(query_codes))


def decay(record: MemoryRecord, now: datetime) -> float:
    rule = TYPE_RULES.get(record.memory_type)
    if rule is None or rule.half_life_days is None:
        return 1.0
    created = record.created_at
    if created is None:
        return 0.5
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    age_days = max(0.0, (now - created).total_seconds() / 86400)
    return float(0.5 ** (age_days / rule.half_life_days))


def _cut(text: str, memory_id: int, limit: int = MAX_ITEM_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    mark = TRUNCATION_MARK.format(id=memory_id)
    return text[: max(0, limit - len(mark))] + mark


def _line(record: MemoryRecord, *, detailed: bool) -> str:
    # written after the turn had read outside content: background, never the user's instruction
    mark = " (untrusted: saved after reading outside content)" if record.source_kind == UNTRUSTED else ""
    if not detailed:
        return _cut(f"- [{record.memory_type}] {record.content}{mark}", record.id)
    when = record.created_at.strftime("%Y-%m-%d") if record.created_at else "?"
    source = f" | 源:{record.source_ref}" if record.source_ref else ""
    kind = "playbook" if record.memory_type == "scenario" else record.memory_type
    return _cut(f"- #{record.id} [{when}] [{kind}] {record.content}{mark}{source}", record.id)


def budget_lines(sections: list[tuple[str, list[str]]], max_chars: int = MAX_TOTAL_CHARS) -> str:
    """Lay sections out in order; stop adding lines (and empty headers) once the budget is spent."""
    out: list[str] = []
    used = 0
    for title, lines in sections:
        if not lines:
            continue
        header_cost = len(title) + 1
        if used + header_cost + len(lines[0]) + 1 > max_chars:
            break
        out.append(title)
        used += header_cost
        for line in lines:
            if used + len(line) + 1 > max_chars:
                return "\n".join(out)
            out.append(line)
            used += len(line) + 1
    return "\n".join(out)


class MemoryRecall:
    def __init__(
        self,
        store: MemoryStore,
        *,
        archive: FileArchiveStore | None = None,
        taskstates: TaskStateStore | None = None,
        code_resolver: CodeResolver | None = None,
        clock: Clock | None = None,
        max_chars: int = MAX_TOTAL_CHARS,
        limit: int = 8,
        min_score: float = 0.05,
    ):
        self.store = store
        self.archive = archive
        self.taskstates = taskstates
        self.code_resolver = code_resolver or store.code_resolver
        self.clock = clock or store.clock
        self.max_chars = max_chars
        self.limit = limit
        self.min_score = min_score

    def resolve_codes(self, text: str) -> list[str]:
        try:
            return list(dict.fromkeys(self.code_resolver(text)))
        except Exception:
            log.exception("stock code resolver failed; using explicit codes only")
            return default_code_resolver(text)

    async def search(self, scope: str, query: str, *, session: AsyncSession | None = None) -> RecallResult:
        """The ranked, scoped memories for `query` (no layout)."""
        codes = self.resolve_codes(query)
        keywords = extract_keywords(query, limit=5)
        fetch = self.limit * 2
        candidates: dict[int, RecallItem] = {}

        def merge(hits: list[SearchHit], weight: float, source: str, relative: bool = False) -> None:
            best = max((h.rank for h in hits), default=0.0)
            for h in hits:
                quality = 0.5 + 0.5 * (h.rank / best) if relative and best > 0 else 1.0
                score = weight * quality
                item = candidates.get(h.record.id)
                if item is None:
                    candidates[h.record.id] = RecallItem(h.record, score, {source})
                else:
                    item.score = max(item.score, score)
                    item.sources.add(source)

        merge(
            await self.store.search_fts(scope, trigram_terms(query), limit=fetch, session=session),
            W_FTS,
            "fts",
            relative=True,
        )
        merge(await self.store.search_codes(scope, codes, limit=fetch, session=session), W_CODE, "code")
        merge(
            await self.store.search_terms(scope, keywords, limit=fetch, session=session), W_KEYWORD, "keyword"
        )

        now = self.clock.now()
        ranked = []
        in_scope_items = [
            i
            for i in candidates.values()
            if i.record.memory_type in RECALL_TYPES
            and in_scope(i.record, codes)
            and recallable(i.record.content)  # approval claims are quarantined (`memory.hygiene`)
        ]
        # The keyword path is a fallback: a memory found only by one shared 2-character word
        # (仓位, 连续) is noise once the full-text or code paths found something.
        stronger = any(i.sources != {"keyword"} for i in in_scope_items)
        for item in in_scope_items:
            if item.sources == {"keyword"} and stronger:
                content = item.record.content.lower()
                if sum(k in content for k in keywords) < 2:
                    continue
            item.score *= decay(item.record, now)
            if item.score >= self.min_score:
                ranked.append(item)
        ranked.sort(key=lambda i: (i.score, i.record.created_at), reverse=True)
        return RecallResult(ranked=ranked[: self.limit], codes=codes, keywords=keywords)

    async def pinned(
        self, scope: str, codes: Sequence[str], *, session: AsyncSession | None = None
    ) -> list[MemoryRecord]:
        """The latest persona (of the 3 newest) and 5 preferences (of the 10 newest), in scope."""
        personas = [
            r
            for r in await self.store.recent(scope, types=["persona"], limit=3, session=session)
            if in_scope(r, codes) and recallable(r.content)
        ]
        prefs = [
            r
            for r in await self.store.recent(scope, types=["preference"], limit=10, session=session)
            if in_scope(r, codes) and recallable(r.content)
        ]
        return personas[:1] + prefs[:5]

    async def _probe(self, scope: str, session_id: str | None) -> tuple[bool, TaskState | None, bool]:
        """Whether `scope` holds any memory and the session's TaskState, both asked on every
        message: one read (one statement on SQLite) when both stores share the database. The
        last value says whether the TaskState was read (else `recall` reads it on its own)."""
        tasks = self.taskstates
        if tasks is None or not session_id or tasks.db is not self.store.db:
            return await self.store.has_memories(scope), None, False

        def core(c: Connection) -> tuple[bool, Any]:
            row = c.execute(_PROBE, {"scope": scope, "session_id": session_id}).one()
            return bool(row[0]), row[1]

        try:
            has, data = await self.store.db.run(core)  # one statement
        except Exception:  # as the two reads would: memories asked again, the state not
            log.exception("TaskState read failed")
            return await self.store.has_memories(scope), None, True
        return has, tasks.decode(data), True

    async def recall(self, scope: str, query: str, *, session_id: str | None = None) -> RecallResult:
        has_memories, state, state_read = await self._probe(scope, session_id)
        if has_memories:
            async with self.store.db.read() as s:  # one read transaction for all five queries
                result = await self.search(scope, query, session=s)
                result.pinned = await self.pinned(scope, result.codes, session=s)
        else:
            result = RecallResult()
        pinned_ids = {r.id for r in result.pinned}
        result.ranked = [i for i in result.ranked if i.record.id not in pinned_ids]
        if self.archive is not None and session_id:
            try:
                result.archive_lines = await self.archive.recall_lines(session_id, query, limit=2)
            except Exception:
                log.exception("archive recall failed")
        playbooks = [i.record for i in result.ranked if i.record.memory_type in ("playbook", "scenario")][:3]
        history = [i.record for i in result.ranked if i.record.memory_type in ("preference", "decision")]
        sections = [
            ("# 用户画像", [_line(r, detailed=False) for r in result.pinned]),
            ("# 交易剧本", [_line(r, detailed=True) for r in playbooks]),
            ("# 历史记忆", [_line(r, detailed=True) for r in history]),
            ("# 压缩归档", [_cut(line, 0, 240) for line in result.archive_lines]),
        ]
        body = budget_lines(sections, self.max_chars)
        task = ""
        if state_read:
            task = render_task_state(state)
        elif self.taskstates is not None and session_id:
            try:
                task = render_task_state(await self.taskstates.get(session_id))
            except Exception:
                log.exception("TaskState read failed")
        parts = [HEADER] if body or task else []
        if task:
            parts.append("# 当前任务\n" + task)
        if body:
            parts.append(body)
        result.text = "\n".join(parts)
        return result
