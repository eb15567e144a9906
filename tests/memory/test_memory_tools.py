"""Memory tools through the registry (argument validation included), the /memory command, the
terminal command, and migration 0002."""

from __future__ import annotations

import argparse
import io

import pytest
import sqlalchemy as sa
from memory_helpers import resolve_codes

from agent.errors import InvalidToolArguments, ToolFailed
from agent.messages import Message, ToolCallPart
from agent.tools.registry import Deps, ToolContext
from memory import longterm
from memory.archive import FileArchiveStore
from memory.cli import memory_cli, memory_command
from memory.db import Database, upgrade
from memory.longterm import MemoryStore
from memory.recall import MemoryRecall
from memory.tools import MemoryServices, memory_tools


@pytest.fixture
def services(store: MemoryStore, tmp_path) -> MemoryServices:
    archive = FileArchiveStore(tmp_path / "archive", code_resolver=resolve_codes)
    return MemoryServices(store=store, recall=MemoryRecall(store, archive=archive), archive=archive)


def ctx_for(services: MemoryServices, session_id: str = "s1", user_id: str = "u1") -> ToolContext:
    return ToolContext(session_id=session_id, user_id=user_id, deps=Deps(services))


async def run(services, name, **args):
    return await memory_tools.get(name).call(ctx_for(services), args)


def test_tool_specs():
    specs = {s.name: s for s in memory_tools.specs()}
    assert set(specs) == {"query_history", "get_preferences", "manage_preferences"}
    assert (
        specs["manage_preferences"].side_effect == "mutating"
        and not specs["manage_preferences"].requires_approval
    )
    assert specs["query_history"].side_effect == "read_only"
    assert specs["manage_preferences"].parameters["properties"]["action"]["enum"] == [
        "add",
        "update",
        "delete",
    ]


async def test_query_history_archive_search_and_paged_restore(services: MemoryServices):
    head = [Message.user(f"第{i}条：贵州茅台 600519 的支撑在哪里？" + "细节" * 200) for i in range(30)]
    head.append(
        Message.assistant("", [ToolCallPart(id="c1", name="analyze_stock", arguments={"code": "600519"})])
    )
    head.append(Message.tool_result("c1", "analyze_stock", '{"code": "600519", "phase": "markup"}'))
    ref = await services.archive.save("s1", head, summary="讨论了贵州茅台的支撑位", anchors=[], tail_start=32)
    found = await run(services, "query_history", source="archive", query="贵州茅台")
    assert found["archives"][0]["archive_ref"] == ref and "600519" in found["archives"][0]["matched"]
    page = await run(services, "query_history", source="archive", archive_ref=ref)
    assert page["total_messages"] == 32 and page["messages"][0]["text"].startswith("第0条")
    assert page["next_start"] is not None
    rest = []
    start = page["next_start"]
    while start is not None:
        nxt = await run(services, "query_history", source="archive", archive_ref=ref, start=start)
        rest += nxt["messages"]
        start = nxt["next_start"]
    assert len(page["messages"]) + len(rest) == 32
    assert rest[-1]["tool_results"][0]["content"] == '{"code": "600519", "phase": "markup"}'
    with pytest.raises(InvalidToolArguments):
        await run(services, "query_history", source="archive", archive_ref="archive://../../etc/passwd")
    with pytest.raises(ToolFailed):
        await run(
            services,
            "query_history",
            source="archive",
            archive_ref="archive://s1/ctx_20260101000000_0123456789ab",
        )
    with pytest.raises(InvalidToolArguments):
        await run(services, "query_history", source="nope", query="x")


async def test_query_history_memory_and_extra_sources(services: MemoryServices):
    await services.store.add("u1", "decision", "跌破确认支撑不买")
    got = await run(services, "query_history", source="memory", query="跌破确认支撑")
    assert got["memories"][0]["content"] == "跌破确认支撑不买"

    async def analyses(ctx, query, limit):
        return [{"code": "600519", "verdict": "watch"}]

    services.history_sources["analyses"] = analyses
    assert (await run(services, "query_history", source="analyses", query="600519"))["result"][0][
        "verdict"
    ] == "watch"


async def test_manage_and_get_preferences(services: MemoryServices):
    added = await run(services, "manage_preferences", action="add", text="单票仓位不超过15%")
    assert added["status"] == "added"
    again = await run(services, "manage_preferences", action="add", text="单票仓位不超过 15%")
    assert again["status"] == "unchanged"
    upd = await run(services, "manage_preferences", action="update", match="15%", text="单票仓位不超过10%")
    assert upd["status"] == "updated" and upd["before"] == "单票仓位不超过15%"
    prefs = await run(services, "get_preferences")
    assert [p["content"] for p in prefs["preferences"]] == ["单票仓位不超过10%"]
    gone = await run(services, "manage_preferences", action="delete", id=added["preference"]["id"])
    assert gone["status"] == "deleted"
    assert (await run(services, "get_preferences"))["preferences"] == []
    with pytest.raises(InvalidToolArguments):
        await memory_tools.get("manage_preferences").call(ctx_for(services), {"action": "wipe"})
    with pytest.raises(ToolFailed):
        await run(services, "manage_preferences", action="delete", match="nothing like this")


async def test_memory_chat_command(services: MemoryServices, store: MemoryStore):
    r = await store.add("u1", "preference", "用户不追涨", source_ref="chat_log:s9")
    listing = await memory_command(store, services.recall, "u1", "")
    assert f"#{r.id}" in listing and "用户不追涨" in listing

    async def load(session_id):
        assert session_id == "s9"
        return [Message.user("我从来不追涨，涨停板不碰"), Message.assistant("好")]

    trace = await memory_command(store, services.recall, "u1", f"trace {r.id}", session_messages=load)
    assert "chat_log:s9" in trace and "涨停板不碰" in trace
    assert "不追涨" in await memory_command(store, services.recall, "u1", "search 追涨")
    assert "no memory" in await memory_command(store, services.recall, "other-user", f"forget {r.id}")
    assert "用户不追涨" in await memory_command(store, services.recall, "u1", f"forget {r.id}")
    assert await store.get(r.id) is None
    assert "Usage" in await memory_command(store, services.recall, "u1", "frobnicate")


async def test_memory_chat_command_in_chinese(services: MemoryServices, store: MemoryStore):
    """Every reply path of `/memory` after `/lang zh`: no English words but the
    subcommands and the stored content."""
    r = await store.add("u1", "preference", "用户不追涨", source_ref="chat_log:s9")

    async def load(session_id):
        return [Message.user("我从来不追涨，涨停板不碰")]

    async def zh(text: str, scope: str = "u1") -> str:
        return await memory_command(store, services.recall, scope, text, session_messages=load, lang="zh")

    assert await zh("", scope="nobody") == "（还没有记忆）"
    trace = await zh(f"trace {r.id}")
    assert "来源：chat_log:s9" in trace and "用户说过" in trace and "source" not in trace
    assert (await zh("search 追涨")).startswith("与“追涨”相关的记忆：")
    assert await zh("search 比特币", scope="nobody") == "没有与“比特币”相关的记忆。"
    assert await zh(f"trace {r.id + 99}") == f"没有记忆 #{r.id + 99}"
    assert (await zh("frobnicate")).startswith("用法：/memory")
    assert (await zh(f"forget {r.id}")).startswith(f"已删除：#{r.id}")
    assert await zh(f"forget {r.id}") == f"没有记忆 #{r.id}"


async def test_migration_creates_memory_schema_and_search_works(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"
    assert await upgrade(url, "0002_memory") == "0002_memory"
    async with Database(url, migrate=False) as db:
        async with db.read() as s:
            names = set((await s.execute(sa.text("SELECT name FROM sqlite_master"))).scalars())
        assert {
            "memories",
            "memory_codes",
            "memory_markers",
            "task_states",
            "memories_fts",
        } <= names
        store = MemoryStore(db, code_resolver=resolve_codes)
        await store.add("u", "decision", "宁德时代跌破支撑不买")
        assert [h.record.content for h in await store.search_fts("u", ["跌破支"])] == ["宁德时代跌破支撑不买"]
        assert len(await store.search_codes("u", ["300750"])) == 1


def test_migration_ddl_matches_the_module():
    import importlib.util
    from pathlib import Path

    path = Path(longterm.__file__).parent / "migrations" / "versions" / "0002_memory.py"
    spec = importlib.util.spec_from_file_location("m0002", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SQLITE_FTS_DDL == longterm.SQLITE_FTS_DDL
    assert module.POSTGRES_SEARCH_DDL == longterm.POSTGRES_SEARCH_DDL
    assert module.down_revision == "0001_core"


def test_terminal_memory_command(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    settings = argparse.Namespace(db_url=url)

    async def seed():
        async with Database(url) as db:
            await MemoryStore(db).add("u", "preference", "用户不追涨")

    import asyncio

    asyncio.run(seed())
    out = io.StringIO()
    assert memory_cli(["list"], settings, out=out) == 0
    assert "用户不追涨" in out.getvalue() and "(u)" in out.getvalue()
    out = io.StringIO()
    assert memory_cli(["--scope", "u", "search", "追涨"], settings, out=out) == 0
    assert "用户不追涨" in out.getvalue()
    out = io.StringIO()
    assert memory_cli(["trace", "1"], settings, out=out) == 0 and "source:" in out.getvalue()
    assert memory_cli(["forget", "1"], settings, out=io.StringIO()) == 0
    assert memory_cli(["trace", "1"], settings, out=io.StringIO()) == 1


async def test_memory_search_ranks_by_the_query_in_a_user_facing_list(services, store: MemoryStore):
    """`/memory search`: ranked by the query, in the chat's own scope, as a plain
    list in the chat's language — not the model's pinned preferences under its Chinese prompt block."""
    pref = await store.add("u1", "preference", "never chase a rally at the open")
    stop = await store.add("u1", "decision", "cut losses at 8 percent below entry")
    await store.add("u2", "decision", "cut losses quickly, another user's rule")
    found = await memory_command(store, services.recall, "u1", "search cut losses", lang="en")
    assert found.startswith("Memories matching “cut losses”")
    assert f"#{stop.id}" in found and "8 percent" in found
    assert f"#{pref.id}" not in found  # a pinned preference is not a match for any query
    assert "another user" not in found and "召回" not in found and "#" in found
    none = await memory_command(store, services.recall, "u1", "search dividends", lang="en")
    assert none == "No memories match “dividends”."
    zh = await memory_command(store, services.recall, "u1", "search cut losses", lang="zh")
    assert zh.startswith("与“cut losses”相关的记忆") and f"#{stop.id}" in zh
