"""The whitelist proxy, governance numbers and the policy table (seed test_sub_agents.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from agent.errors import ToolDenied, ToolTimedOut
from agent.subagents import (
    ANALYSIS,
    RESEARCH,
    SUBAGENTS,
    TRADING,
    SubAgentToolset,
    build_proxy,
    policy_for,
    subagent_tools,
    trim_context,
    trim_result,
)
from agent.tokens import estimate_tokens
from agent.tools.registry import ToolContext

SEED_TOOL_NAMES = {
    # the investing toolkit
    "search_stock_by_name",
    "analyze_stock",
    "portfolio",
    "update_portfolio",
    "get_market_overview",
    "get_market_history",
    "screen_stocks",
    "run_backtest",
    "generate_ai_report",
    "generate_strategy_decision",
    "query_history",
    "check_background_tasks",
    # read-only trading facts
    "get_positions",
    "get_balance",
    "get_market_price",
    "get_trade_history",
    "get_preferences",
}


def test_governance_table_matches_the_seed():
    table = {
        name: (p.timeout, p.tool_timeout, p.max_rounds, p.context_budget_tokens, p.result_budget_chars)
        for name, p in SUBAGENTS.items()
    }
    assert table == {
        "research": (240, 90, 8, 24_000, 3000),
        "analysis": (180, 75, 8, 20_000, 2500),
        "trading": (120, 45, 6, 12_000, 1600),
    }


def test_whitelists_use_real_tool_names_and_fallbacks_are_whitelisted():
    for profile in SUBAGENTS.values():
        assert set(profile.tools) <= SEED_TOOL_NAMES
        assert set(profile.fallback_tools) <= SEED_TOOL_NAMES
    assert "update_portfolio" not in TRADING.tools


def test_delegate_tools_are_registered():
    assert [s.name for s in subagent_tools.specs()] == [
        "delegate_to_research",
        "delegate_to_analysis",
        "delegate_to_trading",
    ]
    for spec in subagent_tools.specs():
        assert not spec.requires_approval and spec.side_effect == "read_only"
        assert spec.parameters["required"] == ["task"]


async def test_proxy_exposes_only_allowed_schemas(parent_tools):
    proxy = build_proxy(parent_tools, ANALYSIS)
    assert isinstance(proxy, SubAgentToolset)
    assert sorted(s.name for s in proxy.specs()) == [
        "analyze_stock",
        "get_market_history",
        "get_market_overview",
        "portfolio",
    ]
    # metadata is preserved (concurrency), the per-tool timeout is applied to inline tools
    spec = proxy.get("analyze_stock").spec
    assert spec.concurrency_safe and spec.timeout == ANALYSIS.tool_timeout + 1


async def test_proxy_refuses_anything_else_with_a_clear_error(parent_tools):
    proxy = build_proxy(parent_tools, RESEARCH)
    for name in ("update_portfolio", "exec_command", "no_such_tool", "portfolio"):
        with pytest.raises(ToolDenied) as info:
            proxy.get(name)
        assert "not available to the research sub-agent" in str(info.value)
        assert "analyze_stock" in str(info.value)  # it says what is allowed


async def test_trading_agent_never_gets_a_write_even_if_whitelisted(parent_tools):
    greedy = replace(TRADING, tools=(*TRADING.tools, "update_portfolio", "execute_trade", "exec_command"))
    proxy = build_proxy(parent_tools, greedy)
    names = {s.name for s in proxy.specs()}
    assert names == {
        "portfolio",
        "generate_strategy_decision",
        "analyze_stock",
        "get_market_overview",
        "get_market_history",
    }
    assert not any(s.requires_approval or s.side_effect == "mutating" for s in proxy.specs())


async def test_proxy_applies_the_per_tool_timeout(parent_tools, probe):
    quick = replace(RESEARCH, tool_timeout=0.05)
    proxy = build_proxy(parent_tools, quick)
    with pytest.raises(ToolTimedOut) as info:
        await proxy.get("get_market_history").call(ToolContext(), {"code": "600519"})
    assert "research sub-agent" in str(info.value)
    assert probe.cancelled  # the tool itself was stopped


async def test_background_tools_keep_their_own_timeout_when_submitted(parent_tools):
    proxy = build_proxy(parent_tools, RESEARCH, background=True)
    assert proxy.get("screen_stocks").spec.timeout == 900  # the task's timeout, not 90 s
    inline = build_proxy(parent_tools, RESEARCH, background=False)
    assert inline.get("screen_stocks").spec.timeout == RESEARCH.tool_timeout + 1


@pytest.mark.parametrize(
    ("status", "action", "retryable", "has_fallback"),
    [
        ("completed", "use_result", False, False),
        ("timeout", "fallback_to_direct_tools", True, True),
        ("error", "fallback_to_direct_tools", True, True),
        ("empty", "fallback_to_direct_tools", False, True),
        ("cancelled", "stop_and_report_cancelled", False, False),
    ],
)
def test_policy_table(status, action, retryable, has_fallback):
    for profile in SUBAGENTS.values():
        policy = policy_for(profile, status)
        assert policy.next_action == action and policy.retryable is retryable
        assert policy.fallback_tools == (list(profile.fallback_tools) if has_fallback else [])
        assert policy.instruction


def test_fallback_tools_are_limited_to_existing_tools():
    policy = policy_for(RESEARCH, "timeout", available=["get_market_overview", "analyze_stock"])
    assert policy.fallback_tools == ["get_market_overview"]


def test_context_trim_keeps_the_most_recent_part_within_budget():
    text = "".join(f"line {i}: 600519 贵州茅台 volume rising\n" for i in range(2000))
    trimmed, cut = trim_context(text, 500)
    assert cut and estimate_tokens(trimmed) <= 500
    assert trimmed.startswith("[context trimmed") and trimmed.endswith(
        "line 1999: 600519 贵州茅台 volume rising\n"
    )
    assert trim_context(trimmed, 500) != (text, False)
    assert trim_context("short", 500) == ("short", False)
    assert trim_context(text, 500) == (trimmed, True)  # deterministic


def test_result_trim_respects_the_budget():
    out, cut = trim_result("y" * 5000, 1600)
    assert cut and len(out) <= 1600 and "budget" in out
    assert trim_result("ok", 1600) == ("ok", False)


async def test_proxy_deadline_bounds_the_tool_timeout(parent_tools, probe):
    loop = asyncio.get_running_loop()
    proxy = build_proxy(parent_tools, RESEARCH, deadline=loop.time() + 0.05)  # 90 s tool limit, 0.05 s left
    with pytest.raises(ToolTimedOut):
        await proxy.get("get_market_history").call(ToolContext(), {"code": "1"})
