"""The keyword search's SQL (plain LIKE on SQLite, newest-rows window served by
ix_memories_scope_created) ranks exactly as its definition: within the scope's newest
LIKE_SCAN_LIMIT rows (created_at, then id, newest first), rows containing any keyword with ASCII
case folded (what SQLite's lower()/ILIKE did before), by how many keywords they contain, then newest."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from memory_helpers import memory_clock

import memory.longterm as longterm
from memory.db import Database
from memory.longterm import MemoryStore, create_memory_schema

_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
ALPHABET = ["a", "A", "b", "B", "追", "涨", "%", "_", "\\", "É", "é", " "]
texts = st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=8).map("".join).filter(str.strip)
words = st.lists(st.sampled_from(ALPHABET[:-1]), min_size=1, max_size=3).map("".join)


def reference(rows: list[longterm.MemoryRecord], keywords: list[str], window: int, limit: int) -> list[int]:
    newest = sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)[:window]
    folded = [k.translate(_ASCII_FOLD) for k in keywords]
    scored = []
    for r in newest:
        content = r.content.translate(_ASCII_FOLD)
        rank = sum(k in content for k in folded)
        if rank:
            scored.append((rank, r.created_at, r.id))
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [i for _rank, _created, i in scored[:limit]]


async def _check(contents: list[tuple[bool, str]], keywords: list[str], window: int, limit: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'eq.db'}", migrate=False)
        await db.start()
        try:
            await create_memory_schema(db)
            clock = memory_clock()
            store = MemoryStore(db, clock=clock)
            for mine, content in contents:
                clock.advance(seconds=1)  # distinct times: the final order has no ties
                await store.add("me" if mine else "other", "preference", content, codes=[])
            rows = await store.recent("me", limit=1000)
            with mock.patch.object(longterm, "LIKE_SCAN_LIMIT", window):
                hits = await store.search_terms("me", keywords, limit=limit)
            assert [h.record.id for h in hits] == reference(rows, keywords, window, limit)
            assert all(h.record.scope == "me" for h in hits)
        finally:
            await db.close()


@settings(max_examples=40)
@given(
    st.lists(st.tuples(st.booleans(), texts), min_size=1, max_size=25),
    st.lists(words, min_size=1, max_size=3),
    st.integers(min_value=1, max_value=30),
    st.integers(min_value=1, max_value=10),
)
def test_keyword_search_matches_its_reference_ranking(contents, keywords, window, limit):
    asyncio.run(_check(contents, keywords, window, limit))


CODES = ["600519", "000001", "300750"]


async def _check_codes(memories: list[tuple[bool, list[str]]], query: list[str], limit: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite+aiosqlite:///{Path(tmp) / 'eq.db'}", migrate=False)
        await db.start()
        try:
            await create_memory_schema(db)
            store = MemoryStore(db, clock=memory_clock())
            for n, (mine, codes) in enumerate(memories):
                await store.add("me" if mine else "other", "preference", f"规则{n}", codes=codes)
            rows = await store.recent("me", limit=1000)
            # (memory, code) pairs newest id first, cut at `limit`, each memory kept once
            pairs = sorted(((r.id, c) for r in rows for c in r.codes if c in query), reverse=True)[:limit]
            expected = list(dict.fromkeys(i for i, _c in pairs))
            hits = await store.search_codes("me", query, limit=limit)
            assert [h.record.id for h in hits] == expected
            assert all(h.rank == 1.0 and h.record.scope == "me" for h in hits)
        finally:
            await db.close()


@settings(max_examples=30)
@given(
    st.lists(
        st.tuples(st.booleans(), st.lists(st.sampled_from(CODES), unique=True)), min_size=1, max_size=15
    ),
    st.lists(st.sampled_from(CODES), min_size=1, unique=True),
    st.integers(min_value=1, max_value=8),
)
def test_code_search_matches_its_reference(memories, query, limit):
    asyncio.run(_check_codes(memories, query, limit))
