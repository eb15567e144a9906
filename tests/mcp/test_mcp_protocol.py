"""tapebot's MCP server, protocol details: progress that only increases, cancelled calls in the
audit, honest annotations, codes sent as numbers, resources (and templates) backed by the served
tools, the skills as prompts, and completion of symbols. In process, through the SDK's client."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from agent.skills import builtin_skills
from agent.tools.registry import Deps, ToolSpec
from bot.mcp_catalog import RESOURCE_NOT_FOUND
from bot.mcp_gate import McpAudit, coerce_arguments
from bot.mcp_server import (
    TIER_BY_TOOL,
    Progress,
    build_mcp_server,
    mcp_tool,
    tool_hints,
)
from tests.mcp.mcp_toy_server import PNG
from tests.mcp.mcp_toy_tapebot import Ledger


def server_for(toolset, **kw):
    return build_mcp_server(toolset, Deps(Ledger()), skills=builtin_skills().values(), **kw)


# ---- progress ---------------------------------------------------------------------------------
async def test_progress_only_increases_even_when_a_tool_restarts_or_repeats_its_count(toolset):
    seen: list[float] = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with Client(server_for(toolset)) as client:
        result = await client.call_tool("run_backtest", {"code": "600519"}, progress_callback=on_progress)
    assert not result.is_error
    # the tool said 5, 0, 75, 75 and then nothing: the client still sees a rising sequence
    assert len(seen) == 5 and all(b > a for a, b in itertools.pairwise(seen)), seen
    assert seen[0] == 5.0 and 75.0 in seen and max(seen) <= 100.0


@given(st.lists(st.one_of(st.none(), st.floats(min_value=-50, max_value=150, allow_nan=False)), max_size=40))
def test_progress_property_strictly_increasing_and_bounded(percents):
    sent: list[float] = []

    async def send(value, total, message):
        sent.append(value)

    async def run():
        progress = Progress(send)
        for p in percents:
            await progress("stage", "", p)

    asyncio.run(run())
    assert all(b > a for a, b in itertools.pairwise(sent))
    assert all(0.0 <= v <= 100.0 for v in sent)


# ---- cancellation and the audit -----------------------------------------------------------------
async def test_a_cancelled_call_is_audited(toolset, tmp_path):
    audit = McpAudit(tmp_path / "mcp_audit.jsonl")
    ledger = Ledger()
    server = build_mcp_server(toolset, Deps(ledger), audit=audit)
    async with Client(server) as client:
        with anyio.move_on_after(1.0):
            await client.call_tool("run_backtest", {"code": "600519", "wait": True})
        for _ in range(100):  # the server side's cancellation lands a moment later
            if audit.entries:
                break
            await asyncio.sleep(0.02)
    assert "backtest-started" in ledger.keys
    assert [(e["tool"], e["ok"], e["error"]) for e in audit.entries] == [
        ("run_backtest", False, "cancelled by the client")
    ]
    line = json.loads((tmp_path / "mcp_audit.jsonl").read_text().splitlines()[0])
    assert line["error"] == "cancelled by the client"


# ---- tool metadata ------------------------------------------------------------------------------
def _real_specs() -> dict[str, ToolSpec]:
    from markets.tools import market_tools

    return {t.name: t.spec for t in market_tools}


def test_every_tier_entry_names_a_real_tool():
    from agent.tools.builtin import local_tools
    from memory.tools import memory_tools  # type: ignore[attr-defined]

    names = set(_real_specs()) | {t.name for t in memory_tools} | {t.name for t in local_tools}
    assert set(TIER_BY_TOOL) <= names, set(TIER_BY_TOOL) - names


def test_every_resource_is_backed_by_a_real_tool():
    from bot.mcp_catalog import RESOURCES

    names = set(_real_specs())
    assert {r.tool for r in RESOURCES} <= names, {r.tool for r in RESOURCES} - names


def test_annotations_are_true_for_the_real_tools():
    specs = _real_specs()
    report = tool_hints(specs["generate_ai_report"])
    assert report == {
        "read_only_hint": False,  # it calls the model (the operator's tokens) and journals the report
        "destructive_hint": False,
        "idempotent_hint": False,
        "open_world_hint": True,
    }
    assert tool_hints(specs["generate_strategy_decision"])["open_world_hint"]
    cancel = tool_hints(specs["cancel_order"])
    assert cancel["idempotent_hint"] and not cancel["read_only_hint"] and not cancel["destructive_hint"]
    trade = tool_hints(specs["execute_trade"])
    assert trade["destructive_hint"] and not trade["idempotent_hint"]
    price = specs["get_market_price"]
    assert tool_hints(price) == {
        "read_only_hint": True,
        "destructive_hint": False,
        "idempotent_hint": True,
        "open_world_hint": False,  # the bundled dataset
    }
    assert tool_hints(price, open_world=True)["open_world_hint"]  # akshare / yfinance / ccxt


def test_titles_and_output_schemas():
    specs = _real_specs()
    tool = mcp_tool(specs["generate_ai_report"])
    assert tool.title == "Generate AI report" and tool.annotations.title == tool.title
    assert mcp_tool(specs["get_market_price"]).output_schema == {"type": "object"}
    assert mcp_tool(specs["analyze_stock"]).output_schema is None  # text and a chart, not one object


# ---- arguments ----------------------------------------------------------------------------------
async def test_a_code_sent_as_a_number_is_accepted(toolset):
    async with Client(server_for(toolset)) as client:
        result = await client.call_tool("get_market_price", {"code": 600519})
    assert not result.is_error and result.structured_content["symbol"] == "600519"


@given(st.integers(min_value=0, max_value=10**12))
def test_coercion_of_numbers_to_string_parameters(n):
    spec = ToolSpec(
        "t",
        "",
        {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "limit": {"type": "integer"},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
        },
    )
    out = coerce_arguments(spec, {"code": n, "limit": n, "maybe": float(n), "flag": True})
    assert out == {"code": str(n), "limit": n, "maybe": str(n), "flag": True}


# ---- resources ----------------------------------------------------------------------------------
async def test_resources_and_templates_follow_the_served_tools(toolset):
    async with Client(server_for(toolset)) as client:
        listed = {r.uri for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert listed == {"tapebot://portfolio"}  # the toy serves portfolio and no other listed one
        assert templates == {
            "tapebot://stock/{code}/analysis",
            "tapebot://stock/{code}/price",
            "tapebot://stock/{code}/chart.png",
        }
        portfolio = await client.read_resource("tapebot://portfolio")
        assert json.loads(portfolio.contents[0].text) == {"positions": [{"code": "600519", "shares": 100}]}
        price = await client.read_resource("tapebot://stock/600036/price")
        assert price.contents[0].mime_type == "application/json"
        assert json.loads(price.contents[0].text)["symbol"] == "600036"
        chart = await client.read_resource("tapebot://stock/600519/chart.png")
        assert chart.contents[0].mime_type == "image/png"
        assert base64.b64decode(chart.contents[0].blob) == base64.b64decode(PNG)
        with pytest.raises(MCPError) as missing:
            await client.read_resource("tapebot://nothing/here")
        assert missing.value.code == RESOURCE_NOT_FOUND
        with pytest.raises(MCPError) as failed:
            await client.read_resource("tapebot://stock/000000/analysis")  # the engine raises
        assert "cannot read tapebot://stock/000000/analysis" in str(failed.value)


async def test_resources_respect_the_tier_limit(toolset):
    async with Client(server_for(toolset, max_tier=1)) as client:
        assert (await client.list_resources()).resources == []
        assert (await client.list_resource_templates()).resource_templates == []
        with pytest.raises(MCPError):
            await client.read_resource("tapebot://portfolio")


async def test_resource_reads_are_audited(toolset, tmp_path):
    audit = McpAudit()
    server = build_mcp_server(toolset, Deps(Ledger()), audit=audit)
    async with Client(server) as client:
        await client.read_resource("tapebot://stock/600519/price")
    assert [(e["tool"], e["arguments"]) for e in audit.entries] == [("get_market_price", {"code": "600519"})]


# ---- prompts and completion ---------------------------------------------------------------------
async def test_the_skills_are_prompts(toolset):
    async with Client(server_for(toolset)) as client:
        names = {p.name for p in (await client.list_prompts()).prompts}
        assert {"daily_brief", "report", "screen", "checkup"} <= names
        report = await client.get_prompt("report", {"arguments": "600519"})
        text = report.messages[0].content.text
        assert report.messages[0].role == "user"
        assert "600519" in text and "analyze_stock" in text and "as-of date" in text
        brief = await client.get_prompt("daily_brief")
        assert "get_market_overview" in brief.messages[0].content.text
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("no_such_prompt")
        assert "unknown prompt no_such_prompt" in str(unknown.value)


async def test_symbols_complete_from_the_stock_search(toolset):
    import mcp_types as types

    async with Client(server_for(toolset)) as client:
        ref = types.ResourceTemplateReference(type="ref/resource", uri="tapebot://stock/{code}/price")
        done = await client.complete(ref, {"name": "code", "value": "600"})
        assert done.completion.values == ["600519", "600036"]
        prompt = types.PromptReference(type="ref/prompt", name="report")
        named = await client.complete(prompt, {"name": "arguments", "value": "茅台"})
        assert named.completion.values == ["600519"]
        nothing = await client.complete(ref, {"name": "code", "value": ""})
        assert nothing.completion.values == []
