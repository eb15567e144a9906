"""Long-term memory: what keeps a trader's discipline across sessions.

    L1 preference / decision   atoms with their evidence ("用户偏好尾盘买入", "跌破确认支撑不买")
    L2 playbook                a conditional procedure distilled from recent L1
    L3 persona                 the user's stable profile distilled from recent L1

Only stable, reusable rules belong here — never today's prices, holdings or one-off trades (those
come from tools). Every row keeps `source_ref` (where it came from, for `/memory trace`), the
stock codes it names (bound only when the memory itself names a stock), and `source_kind`
("user", "layer_refresh", "manual"); content the bot fetched never becomes a user memory.

Memories belong to a `scope` (the user; "default" for a single-user install). Caps and pruning per
type: preference 50 kept forever, decision 30 / 45 days, playbook 20 / 60 days, persona 5.

Search: on SQLite an external-content FTS5 table kept in sync by triggers, `memories_fts`, indexes
the content with the trigram tokenizer (any ≥3-character substring, Chinese included) and the
user's scope tag, so a query only ranks that user's rows. Shorter words (2-character Chinese words
such as 追涨) go through escaped LIKEs over the user's own rows (a few hundred at most, by the
caps). PostgreSQL uses pg_trgm for both (untested here). Stock codes live in `memory_codes` so
exact-code recall is an index lookup.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from agent.ports import Clock, SystemClock
from memory.base import Base
from memory.db import Database
from memory.hygiene import check_memory
from memory.models import BigIntPK, UTCDateTime
from memory.terms import CodeResolver, default_code_resolver, fts_or_query, fts_quote

MemoryType = Literal["preference", "decision", "playbook", "scenario", "persona"]
SourceKind = Literal["user", "layer_refresh", "manual", "flush"]


@dataclass(frozen=True, slots=True)
class TypeRule:
    level: str
    cap: int
    keep_days: int | None  # pruned after this many days; None = kept
    half_life_days: float | None  # recall decay; None = never decays


TYPE_RULES: dict[str, TypeRule] = {
    "preference": TypeRule("L1", 50, None, None),
    "decision": TypeRule("L1", 30, 45, 14),
    "playbook": TypeRule("L2", 20, 60, 21),
    "scenario": TypeRule("L2", 20, 60, 21),  # legacy name of playbook: recalled as one
    "persona": TypeRule("L3", 5, None, None),
}
L1_TYPES = ("preference", "decision")
LIKE_SCAN_LIMIT = 2000  # keyword LIKEs look at a user's newest rows only


# ---- tables --------------------------------------------------------------------------------------
class MemoryRow(Base):
    __tablename__ = "memories"
    __table_args__ = (
        sa.Index("ix_memories_scope_type_created", "scope", "memory_type", "created_at"),
        # the keyword search's "newest rows of this user" window: a range read, not a sort of the scope
        sa.Index("ix_memories_scope_created", "scope", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(sa.String(128), default="default")
    memory_type: Mapped[str] = mapped_column(sa.String(24))
    level: Mapped[str] = mapped_column(sa.String(4))
    content: Mapped[str] = mapped_column(sa.Text)
    codes: Mapped[str] = mapped_column(sa.Text, default="")  # every code a memory names
    scope_tag: Mapped[str] = mapped_column(sa.String(16), default="")
    source_ref: Mapped[str] = mapped_column(sa.String(255), default="")
    source_kind: Mapped[str] = mapped_column(sa.String(24), default="user")
    confidence: Mapped[float] = mapped_column(sa.Float, default=0.8)
    meta: Mapped[Any] = mapped_column(sa.JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class MemoryCodeRow(Base):
    __tablename__ = "memory_codes"
    __table_args__ = (sa.Index("ix_memory_codes_scope_code", "scope", "code"),)

    memory_id: Mapped[int] = mapped_column(
        BigIntPK, sa.ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    code: Mapped[str] = mapped_column(sa.String(16), primary_key=True)
    scope: Mapped[str] = mapped_column(sa.String(128), default="default")


class MemoryMarkerRow(Base):
    """Processed-batch hashes and layer-refresh records (never recalled)."""

    __tablename__ = "memory_markers"

    scope: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    value: Mapped[Any] = mapped_column(sa.JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


# The FTS5 table as a bare table clause (created by SQLITE_FTS_DDL, not by the metadata).
_FTS = sa.table("memories_fts", sa.column("rowid"))

MEMORY_TABLES = ("memories", "memory_codes", "memory_markers", "task_states")

# The same statements run in migration 0002 (kept in step by a test). The FTS table indexes the
# content and the scope tag (so a MATCH can be restricted to one user); triggers keep it in sync.
SQLITE_FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5("
    "content, scope_tag, content='memories', content_rowid='id', tokenize='trigram')",
    "CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN "
    "INSERT INTO memories_fts(rowid, content, scope_tag) VALUES (new.id, new.content, new.scope_tag); END",
    "CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, content, scope_tag) "
    "VALUES ('delete', old.id, old.content, old.scope_tag); END",
    "CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, content, scope_tag) "
    "VALUES ('delete', old.id, old.content, old.scope_tag); "
    "INSERT INTO memories_fts(rowid, content, scope_tag) VALUES (new.id, new.content, new.scope_tag); END",
)
POSTGRES_SEARCH_DDL = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX IF NOT EXISTS ix_memories_content_trgm ON memories USING gin (content gin_trgm_ops)",
)


def scope_tag(scope: str) -> str:
    """The scope as exactly one trigram: three Private Use Area characters derived from its hash
    (6400³ values), so restricting a MATCH to one user reads a single short posting list."""
    digest = int.from_bytes(hashlib.sha1(scope.encode()).digest()[:8], "big")
    chars = []
    for _ in range(3):
        digest, rest = divmod(digest, 6400)
        chars.append(chr(0xE000 + rest))
    return "".join(chars)


# ---- values --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryRecord:
    id: int
    scope: str
    memory_type: str
    level: str
    content: str
    codes: tuple[str, ...]
    source_ref: str
    source_kind: str
    confidence: float
    meta: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: MemoryRow) -> MemoryRecord:
        return cls(
            id=row.id,
            scope=row.scope,
            memory_type=row.memory_type,
            level=row.level,
            content=row.content,
            codes=tuple(c for c in (row.codes or "").split(",") if c),
            source_ref=row.source_ref or "",
            source_kind=row.source_kind or "",
            confidence=row.confidence,
            meta=dict(row.meta or {}),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


@dataclass
class SearchHit:
    record: MemoryRecord
    rank: float = 0.0  # backend relevance, larger is better


@dataclass
class PruneReport:
    deleted: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


def level_of(memory_type: str) -> str:
    rule = TYPE_RULES.get(memory_type)
    if rule is None:
        raise ValueError(f"unknown memory type {memory_type!r}; expected one of {', '.join(TYPE_RULES)}")
    return rule.level


# ---- the store -----------------------------------------------------------------------------------
class MemoryStore:
    """Rows in, rows out; no LLM calls here (see memory.extraction)."""

    def __init__(
        self, db: Database, *, clock: Clock | None = None, code_resolver: CodeResolver | None = None
    ):
        self.db = db
        self.clock = clock or SystemClock()
        self.code_resolver = code_resolver or default_code_resolver

    @property
    def _sqlite(self) -> bool:
        return self.db.is_sqlite

    def resolve_codes(self, text: str) -> list[str]:
        try:
            return list(dict.fromkeys(self.code_resolver(text)))
        except Exception:  # noqa: BLE001 — a configured resolver's failure falls back to the built-in one
            return list(dict.fromkeys(default_code_resolver(text)))

    # -- writes ------------------------------------------------------------------------------------
    async def add(
        self,
        scope: str,
        memory_type: str,
        content: str,
        *,
        codes: Sequence[str] | None = None,
        source_ref: str = "",
        source_kind: str = "user",
        confidence: float = 0.8,
        meta: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Insert one memory (codes resolved from the content itself when not given) and trim the
        type to its cap. An exact duplicate (type, content, codes) returns the existing row."""
        content = (content or "").strip()
        if not content:
            raise ValueError("memory content is empty")
        content = check_memory(content)  # size, approval claims, key shapes (`memory.hygiene`)
        level = level_of(memory_type)
        code_list = list(dict.fromkeys(codes if codes is not None else self.resolve_codes(content)))
        codes_text = ",".join(code_list)
        now = self.clock.now()
        async with self.db.session() as s:
            existing = (
                await s.execute(
                    sa.select(MemoryRow).where(
                        MemoryRow.scope == scope,
                        MemoryRow.memory_type == memory_type,
                        MemoryRow.content == content,
                        MemoryRow.codes == codes_text,
                    )
                )
            ).scalar_one_or_none()
            if existing is not None:
                if source_ref and not existing.source_ref:
                    existing.source_ref = source_ref
                if meta:
                    existing.meta = {**(existing.meta or {}), **meta}
                existing.updated_at = now
                return MemoryRecord.of(existing)
            row = MemoryRow(
                scope=scope,
                memory_type=memory_type,
                level=level,
                content=content,
                codes=codes_text,
                scope_tag=scope_tag(scope),
                source_ref=source_ref,
                source_kind=source_kind,
                confidence=confidence,
                meta=meta or {},
                created_at=now,
                updated_at=now,
            )
            s.add(row)
            await s.flush()
            for code in code_list:
                s.add(MemoryCodeRow(memory_id=row.id, code=code, scope=scope))
            await self._enforce_cap(s, scope, memory_type)
            return MemoryRecord.of(row)

    async def _enforce_cap(self, s: AsyncSession, scope: str, memory_type: str) -> None:
        cap = TYPE_RULES[memory_type].cap
        keep = (
            sa.select(MemoryRow.id)
            .where(MemoryRow.scope == scope, MemoryRow.memory_type == memory_type)
            .order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc())
            .limit(cap)
        )
        stale = (
            (
                await s.execute(
                    sa.select(MemoryRow.id).where(
                        MemoryRow.scope == scope,
                        MemoryRow.memory_type == memory_type,
                        MemoryRow.id.not_in(keep),
                    )
                )
            )
            .scalars()
            .all()
        )
        if stale:
            await self._delete_ids(s, list(stale))

    async def _delete_ids(self, s: AsyncSession, ids: list[int]) -> None:
        # Codes first: the FK cascade needs foreign_keys=ON, which a plain connection may lack.
        await s.execute(sa.delete(MemoryCodeRow).where(MemoryCodeRow.memory_id.in_(ids)))
        await s.execute(sa.delete(MemoryRow).where(MemoryRow.id.in_(ids)))

    async def update(self, memory_id: int, content: str, *, scope: str | None = None) -> MemoryRecord | None:
        content = (content or "").strip()
        if not content:
            raise ValueError("memory content is empty")
        content = check_memory(content)
        async with self.db.session() as s:
            row = await s.get(MemoryRow, memory_id)
            if row is None or (scope is not None and row.scope != scope):
                return None
            codes = self.resolve_codes(content)
            row.content, row.codes = content, ",".join(codes)
            row.updated_at = self.clock.now()
            await s.execute(sa.delete(MemoryCodeRow).where(MemoryCodeRow.memory_id == memory_id))
            for code in codes:
                s.add(MemoryCodeRow(memory_id=memory_id, code=code, scope=row.scope))
            return MemoryRecord.of(row)

    async def delete(self, memory_id: int, *, scope: str | None = None) -> MemoryRecord | None:
        """Delete one memory (only within `scope` when given); returns what was deleted."""
        async with self.db.session() as s:
            row = await s.get(MemoryRow, memory_id)
            if row is None or (scope is not None and row.scope != scope):
                return None
            record = MemoryRecord.of(row)
            await self._delete_ids(s, [memory_id])
            return record

    async def prune(self, *, now: datetime | None = None) -> PruneReport:
        """Delete memories past their type's retention (decision 45 days, playbook 60 days);
        preference and persona are kept."""
        now = now or self.clock.now()
        report = PruneReport()
        async with self.db.session() as s:
            for memory_type, rule in TYPE_RULES.items():
                if rule.keep_days is None:
                    continue
                cutoff = now - timedelta(days=rule.keep_days)
                ids = (
                    (
                        await s.execute(
                            sa.select(MemoryRow.id).where(
                                MemoryRow.memory_type == memory_type, MemoryRow.created_at < cutoff
                            )
                        )
                    )
                    .scalars()
                    .all()
                )
                if ids:
                    await self._delete_ids(s, list(ids))
                    report.deleted[memory_type] = len(ids)
        return report

    # -- reads -------------------------------------------------------------------------------------
    async def get(self, memory_id: int, *, scope: str | None = None) -> MemoryRecord | None:
        async with self.db.read() as s:
            row = await s.get(MemoryRow, memory_id)
            if row is None or (scope is not None and row.scope != scope):
                return None
            return MemoryRecord.of(row)

    async def recent(
        self,
        scope: str | None,
        *,
        types: Iterable[str] | None = None,
        level: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
        session: AsyncSession | None = None,
    ) -> list[MemoryRecord]:
        """Newest first. `scope=None` lists every scope (the terminal's `tapebot memory list`)."""
        q = sa.select(MemoryRow)
        if scope is not None:
            q = q.where(MemoryRow.scope == scope)
        if types is not None:
            q = q.where(MemoryRow.memory_type.in_(list(types)))
        if level is not None:
            q = q.where(MemoryRow.level == level)
        if since is not None:
            q = q.where(MemoryRow.created_at >= since)
        q = q.order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc()).limit(limit)
        async with _reading(self.db, session) as s:
            return [MemoryRecord.of(r) for r in (await s.execute(q)).scalars()]

    async def scopes(self) -> list[str]:
        """Every scope that holds a memory (the terminal searches them all)."""
        async with _reading(self.db, None) as s:
            q = sa.select(MemoryRow.scope).distinct().order_by(MemoryRow.scope)
            return [str(v) for v in (await s.execute(q)).scalars()]

    async def has_memories(self, scope: str) -> bool:
        """Whether the scope holds any memory: one indexed probe, so recall for a user with no
        memories yet (every new user) costs one cheap read instead of five searches."""

        def core(c: Connection) -> bool:
            return (
                c.execute(sa.select(MemoryRow.id).where(MemoryRow.scope == scope).limit(1)).first()
                is not None
            )

        return await self.db.run(core)

    async def count(self, scope: str | None = None) -> int:
        q = sa.select(sa.func.count()).select_from(MemoryRow)
        if scope is not None:
            q = q.where(MemoryRow.scope == scope)
        async with self.db.read() as s:
            return int((await s.execute(q)).scalar_one())

    async def search_fts(
        self, scope: str, terms: Sequence[str], *, limit: int = 16, session: AsyncSession | None = None
    ) -> list[SearchHit]:
        """Full-text search over content: any of `terms` (each ≥3 characters) as a substring,
        best first. Terms are quoted, so any user text is safe. On SQLite the scope is part of the
        MATCH (its tag column), so FTS5 only ranks this user's rows however many others exist."""
        terms = [t for t in terms if len(t) >= 3]
        query = fts_or_query(terms)
        if not query:
            return []
        if self._sqlite:
            match = f"scope_tag : {fts_quote(scope_tag(scope))} AND content : ({query})"
            # the rows themselves in the same statement (no second lookup by id)
            rank = sa.literal_column("bm25(memories_fts, 1.0, 0.0)", sa.Float).label("rank")
            stmt = (
                sa.select(MemoryRow, rank)
                .join(_FTS, MemoryRow.id == _FTS.c.rowid)
                .where(sa.text("memories_fts MATCH :q").bindparams(q=match), MemoryRow.scope == scope)
                .order_by(rank)
                .limit(limit)
            )
            async with _reading(self.db, session) as s:
                return [
                    SearchHit(MemoryRecord.of(row), -float(r)) for row, r in (await s.execute(stmt)).all()
                ]
        # PostgreSQL: the pg_trgm GIN index serves the ILIKEs; rank by how many terms match.
        return await self._like_search(scope, terms, limit=limit, session=session)

    async def search_terms(
        self, scope: str, keywords: Sequence[str], *, limit: int = 16, session: AsyncSession | None = None
    ) -> list[SearchHit]:
        """Keyword match (2-character Chinese words included) within the user's own memories:
        escaped LIKEs over the scope's rows, ranked by how many keywords match."""
        words = [k for k in keywords if k and k.strip()]
        if not words:
            return []
        return await self._like_search(scope, words, limit=limit, session=session)

    async def _like_search(
        self, scope: str, words: Sequence[str], *, limit: int, session: AsyncSession | None
    ) -> list[SearchHit]:
        # SQLite's LIKE already folds ASCII case, exactly as its lower() does: plain LIKE there
        # (no per-row lower() call); ILIKE on PostgreSQL.
        patterns = [f"%{_like_escape(w)}%" for w in words]
        if self._sqlite:
            likes = [MemoryRow.content.like(p, escape="\\") for p in patterns]
        else:
            likes = [MemoryRow.content.ilike(p, escape="\\") for p in patterns]
        score = sum((sa.case((cond, 1), else_=0) for cond in likes), sa.literal(0))
        # The caps keep a user to ~100 memories; bound the scan anyway for an uncapped import.
        # Newest first, ties by newest id: ix_memories_scope_created serves it as a range read.
        newest = (
            sa.select(MemoryRow.id)
            .where(MemoryRow.scope == scope)
            .order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc())
            .limit(LIKE_SCAN_LIMIT)
            .scalar_subquery()
        )
        stmt = (
            sa.select(MemoryRow, score.label("rank"))
            .where(MemoryRow.id.in_(newest), sa.or_(*likes))
            .order_by(sa.desc("rank"), MemoryRow.created_at.desc())
            .limit(limit)
        )
        async with _reading(self.db, session) as s:
            return [SearchHit(MemoryRecord.of(row), float(r)) for row, r in (await s.execute(stmt)).all()]

    async def search_codes(
        self, scope: str, codes: Sequence[str], *, limit: int = 16, session: AsyncSession | None = None
    ) -> list[SearchHit]:
        if not codes:
            return []
        # the rows joined in (no second lookup by id); a memory naming two of the codes comes
        # back twice within the limit, as before, and is kept once
        stmt = (
            sa.select(MemoryRow)
            .join(MemoryCodeRow, MemoryCodeRow.memory_id == MemoryRow.id)
            .where(MemoryCodeRow.scope == scope, MemoryCodeRow.code.in_(list(codes)))
            .order_by(MemoryCodeRow.memory_id.desc())
            .limit(limit)
        )
        async with _reading(self.db, session) as s:
            rows = {row.id: row for row in (await s.execute(stmt)).scalars()}
        return [SearchHit(MemoryRecord.of(row), 1.0) for row in rows.values()]

    # -- markers -----------------------------------------------------------------------------------
    async def get_marker(self, scope: str, kind: str, key: str) -> Any | None:
        async with self.db.read() as s:
            row = await s.get(MemoryMarkerRow, (scope, kind, key))
            return None if row is None else (row.value if row.value is not None else {})

    async def set_marker(self, scope: str, kind: str, key: str, value: Any = None) -> None:
        async with self.db.session() as s:
            row = await s.get(MemoryMarkerRow, (scope, kind, key))
            if row is None:
                s.add(
                    MemoryMarkerRow(scope=scope, kind=kind, key=key, value=value, created_at=self.clock.now())
                )
            else:
                row.value = value


@asynccontextmanager
async def _reading(db: Database, session: AsyncSession | None) -> AsyncIterator[AsyncSession]:
    """The caller's read session (recall runs all its queries in one), or a fresh one."""
    if session is not None:
        yield session
    else:
        async with db.read() as s:
            yield s


def _like_escape(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def create_memory_schema(db: Database) -> None:
    """Create the memory tables and search indexes on a database without running the migrations
    (benches and tests that build a bare schema). Production uses migration 0002_memory."""
    import memory.taskstate  # noqa: F401  (registers task_states)

    tables = [Base.metadata.tables[name] for name in MEMORY_TABLES]

    async with db.engine.begin() as conn:
        await conn.run_sync(lambda c: Base.metadata.create_all(c, tables=tables))
        for ddl in SQLITE_FTS_DDL if db.is_sqlite else POSTGRES_SEARCH_DDL:
            await conn.exec_driver_sql(ddl)
