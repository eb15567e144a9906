"""`App(settings)` builds every part a turn needs, complete and without I/O: market data, memory,
the tools and the runtime exist before `start`, which opens the database (the parts built before
keep its session factory and use it once it is open) and adds the MCP servers' tools to the same
runtime. The modes' parts (gateway, scheduler, live-price alerts) are decided by how `start` runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.providers.scripted import ScriptedClient
from agent.tools.registry import ToolContext
from bot.app import App
from markets.services import MarketServices
from memory.tools import MemoryServices
from tests.bot.conftest import ON_BOTH_DATABASES, make_settings

TOY = str(Path(__file__).resolve().parents[1] / "mcp" / "mcp_toy_server.py")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _app(home: Path, database_env: dict[str, str] | None = None) -> App:
    env = {"TAPEBOT_MEMORY__ENABLED": "true", **(database_env or {})}
    return App(make_settings(home, env), model_factory=lambda _m: ScriptedClient())


@ON_BOTH_DATABASES
async def test_the_parts_are_built_complete_before_start_and_kept_by_it(tmp_path, database_env):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    before = _files(tmp_path)
    app = _app(home, database_env)
    try:
        assert _files(tmp_path) == before  # built without I/O: no database file, no folders
        runtime, market, memory = app.runtime, app.market, app.memory
        assert isinstance(market, MarketServices) and isinstance(memory, MemoryServices)
        assert app.memory_hooks is not None and runtime.hooks is app.memory_hooks
        assert runtime.deps.get(MarketServices) is market and runtime.deps.get(MemoryServices) is memory
        names = {spec.name for spec in runtime.tools.specs()}
        assert {
            "get_balance",
            "execute_trade",
            "manage_preferences",
            "check_background_tasks",
            "execute_skill",
        } <= names
        assert "execute_trade" in app.memory_hooks.changing_tools  # a trade changes what TaskState holds
        # the modes' parts: none asked for yet
        assert app.gateway is None and app.scheduler is None and app.intraday_poll is None

        await app.start(adapters=False)
        assert (app.runtime, app.market, app.memory) == (runtime, market, memory)  # the same parts
        # the market data built before start reaches the database that start opened
        out = await runtime.tools.get("get_balance").call(
            ToolContext(deps=runtime.deps, user_id="alice"), {"market": "cn"}
        )
        assert out["balances"] == [{"market": "cn", "cash": 1_000_000.0, "currency": "CNY"}]
        await memory.store.add("alice", "preference", "never buy at the open")
        assert [m.content for m in await memory.store.recent("alice")] == ["never buy at the open"]
        assert app.gateway is None and app.scheduler is None  # a one-shot runs no chats, no jobs
    finally:
        await app.stop()


async def test_memory_off_builds_compaction_only(tmp_path):
    home = tmp_path / "home"
    app = App(make_settings(home), model_factory=lambda _m: ScriptedClient())  # memory off here
    try:
        assert app.memory_hooks is None and app.memory is None
        assert app.runtime.hooks is not None  # compaction still runs
        assert "manage_preferences" not in {spec.name for spec in app.runtime.tools.specs()}
    finally:
        await app.stop()


async def test_the_mcp_servers_tools_join_the_runtime_built_before_start(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "[[mcp_servers]]\n"
        'name = "toy"\n'
        f"command = {json.dumps([sys.executable, TOY, 'normal'])}\n"
        "timeout = 30\n"
        "tool_overrides = { echo = false, add = false }\n"
    )
    app = _app(home)
    runtime = app.runtime
    try:
        assert not any(spec.name.startswith("toy__") for spec in runtime.tools.specs())
        await app.start(adapters=False)
        assert app.runtime is runtime
        names = {spec.name for spec in runtime.tools.specs()}
        assert {"toy__echo", "toy__add"} <= names and "get_balance" in names
        assert await runtime.tools.get("toy__add").call(ToolContext(), {"a": 20, "b": 22}) == "42"
        # memory knows the server's writing tools too (they change what TaskState holds)
        assert app.memory_hooks is not None
        written = app.memory_hooks.changing_tools
        assert "execute_trade" in written and any(name.startswith("toy__") for name in written)
    finally:
        await app.stop()
