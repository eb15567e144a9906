"""tapebot as an MCP server: the SDK's in-process client, and once over real stdio."""

from __future__ import annotations

import json
import sys

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from agent.tools.registry import Deps
from bot.mcp_gate import IDEMPOTENCY_ARG, McpAudit
from bot.mcp_server import build_mcp_server, served_toolset, tier_of
from tests.mcp.mcp_toy_tapebot import ROOT, Ledger, make_toolset


def test_served_toolset_drops_chat_and_local_tools(png):
    names = [t.name for t in served_toolset(make_toolset(png))]
    assert "exec_command" not in names and "analyze_stock" in names and "query_history" in names


def test_tiers():
    specs = {t.name: t.spec for t in make_toolset()}
    assert tier_of(specs["query_history"]) == 1
    assert tier_of(specs["analyze_stock"]) == 2 and tier_of(specs["screen_stocks"]) == 2
    assert tier_of(specs["portfolio"]) == 3 and tier_of(specs["update_portfolio"]) == 3


async def test_read_tools_are_served_and_writes_are_hidden_by_default(toolset, tmp_path):
    audit = McpAudit(tmp_path / "results" / "mcp_audit.jsonl")
    server = build_mcp_server(toolset, Deps(Ledger()), audit=audit)
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {
            "query_history",
            "analyze_stock",
            "render_chart",
            "portfolio",
            "screen_stocks",
            "get_market_price",
            "search_stock_by_name",
            "run_backtest",
        }
        analyze = listed["analyze_stock"]
        spec = toolset.get("analyze_stock").spec
        assert analyze.input_schema == spec.parameters  # one definition
        assert (
            analyze.description.startswith(spec.description)
            and "tier 2: market and engine" in analyze.description
        )
        assert analyze.annotations.read_only_hint and not analyze.annotations.destructive_hint

        result = await client.call_tool("analyze_stock", {"code": "600519"})
        assert not result.is_error
        assert json.loads(result.content[0].text)["phase"] == "C"
        assert result.structured_content == {
            "code": "600519",
            "phase": "C",
            "days": 250,
            "as_of": "2026-07-24",
        }

        # Tools not in tools/list are a protocol error (-32602), with words that say why.
        with pytest.raises(MCPError) as denied:
            await client.call_tool("update_portfolio", {"code": "600519", "shares": 0})
        assert denied.value.code == INVALID_PARAMS and "--allow-writes" in str(denied.value)

        with pytest.raises(MCPError) as unknown:
            await client.call_tool("exec_command", {"command": "rm -rf /"})
        assert unknown.value.code == INVALID_PARAMS and "unknown tool" in str(unknown.value)
    assert [(e["tool"], e["ok"]) for e in audit.entries] == [
        ("analyze_stock", True),
        ("update_portfolio", False),
        ("exec_command", False),
    ]
    lines = (tmp_path / "results" / "mcp_audit.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[1])["write"] is True


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_reaches_the_client_in_both_protocol_eras(toolset, mode):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    server = build_mcp_server(toolset, Deps(Ledger()))
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("analyze_stock", {"code": "600519"}, progress_callback=on_progress)
    assert not result.is_error
    assert seen == [(50.0, 100.0, "loading: bars")]


async def test_bad_arguments_and_crashing_tools_are_error_results(toolset):
    server = build_mcp_server(toolset, Deps(Ledger()))
    async with Client(server) as client:
        bad = await client.call_tool("analyze_stock", {"code": 600519, "extra": 1})
        assert bad.is_error and "invalid arguments for analyze_stock" in bad.content[0].text
        crash = await client.call_tool("analyze_stock", {"code": "000000"})
        assert crash.is_error and "engine exploded" in crash.content[0].text
        again = await client.call_tool("analyze_stock", {"code": "300750"})  # the server survived
        assert not again.is_error


async def test_images_and_background_tools(toolset):
    server = build_mcp_server(toolset, Deps(Ledger()))
    async with Client(server) as client:
        chart = await client.call_tool("render_chart", {"code": "600519"})
        kinds = [c.type for c in chart.content]
        assert kinds == ["text", "image"] and chart.content[1].mime_type == "image/png"
        screen = await client.call_tool("screen_stocks", {"top": 1})  # runs to completion, no task id
        assert json.loads(screen.content[0].text) == {"candidates": ["600519"]}


async def test_writes_with_allow_flag_go_through_idempotency_and_audit(toolset, tmp_path):
    ledger = Ledger()
    server = build_mcp_server(toolset, Deps(ledger), allow_writes=True, results_dir=tmp_path)
    async with Client(server) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        update = listed["update_portfolio"]
        assert IDEMPOTENCY_ARG in update.input_schema["properties"] and "CHANGES DATA" in update.description
        assert update.annotations.destructive_hint

        args = {"code": "600519", "shares": 200, IDEMPOTENCY_ARG: "abc"}
        first = await client.call_tool("update_portfolio", args)
        retry = await client.call_tool("update_portfolio", args)
        other = await client.call_tool("update_portfolio", {"code": "600519", "shares": 300})
    assert json.loads(first.content[0].text)["replayed"] is False
    assert json.loads(retry.content[0].text)["replayed"] is True  # the same key is not applied twice
    assert json.loads(other.content[0].text)["replayed"] is False
    assert ledger.keys[0] == ledger.keys[1] == "mcp-key-abc" and ledger.keys[2].startswith("mcp-")
    assert ledger.keys[2] != ledger.keys[0]
    entries = [json.loads(line) for line in (tmp_path / "mcp_audit.jsonl").read_text().splitlines()]
    assert [(e["tool"], e["write"], e["ok"], e["key"]) for e in entries][:2] == [
        ("update_portfolio", True, True, "mcp-key-abc"),
        ("update_portfolio", True, True, "mcp-key-abc"),
    ]
    assert entries[0]["arguments"] == {"code": "600519", "shares": 200}


async def test_max_tier_limits_what_is_served(toolset):
    server = build_mcp_server(toolset, Deps(Ledger()), max_tier=1)
    async with Client(server) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["query_history"]


async def test_over_real_stdio():
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.mcp.mcp_toy_tapebot"], cwd=str(ROOT)
    )
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "analyze_stock" in names and "update_portfolio" not in names
        result = await client.call_tool("analyze_stock", {"code": "600519", "days": 60})
        assert json.loads(result.content[0].text)["days"] == 60
