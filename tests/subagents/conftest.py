"""A toy investing toolset with the usual tool names, and helpers to run sub-agents over it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.providers.scripted import ScriptedClient
from agent.subagents import SubAgentServices
from agent.tools.registry import Deps, ToolContext, Toolset


class Probe:
    """Records what the toy tools saw and lets a test block a tool until it is cancelled."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.contexts: list[ToolContext] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False
        self.big = "x" * 3000


def make_toolset(probe: Probe) -> Toolset:
    ts = Toolset("markets")

    @ts.tool(concurrency_safe=True)
    async def analyze_stock(ctx: ToolContext, code: str) -> dict:
        """Analyse one stock."""
        probe.calls.append(f"analyze_stock {code}")
        probe.contexts.append(ctx)
        return {"code": code, "phase": "C", "as_of": "2026-07-24"}

    @ts.tool(concurrency_safe=True)
    async def get_market_overview(ctx: ToolContext) -> dict:
        """Market overview."""
        probe.calls.append("get_market_overview")
        return {"regime": "range", "as_of": "2026-07-24"}

    @ts.tool(concurrency_safe=True)
    async def get_market_history(ctx: ToolContext, code: str) -> str:
        """Daily bars; blocks until released (to test timeouts and cancellation)."""
        probe.calls.append(f"get_market_history {code}")
        probe.started.set()
        try:
            await probe.release.wait()
        except asyncio.CancelledError:
            probe.cancelled = True
            raise
        return "bars"

    @ts.tool(concurrency_safe=True)
    async def query_history(ctx: ToolContext, query: str) -> str:
        """Search history; returns a long text."""
        probe.calls.append(f"query_history {query}")
        return probe.big

    @ts.tool(concurrency_safe=True)
    async def portfolio(ctx: ToolContext) -> dict:
        """The portfolio."""
        probe.calls.append("portfolio")
        probe.contexts.append(ctx)
        return {"positions": [{"code": "600519", "shares": 100}]}

    @ts.tool(requires_approval=True, side_effect="mutating")
    async def update_portfolio(ctx: ToolContext, code: str, shares: int) -> str:
        """Change the portfolio."""
        probe.calls.append(f"update_portfolio {code}")
        return "updated"

    @ts.tool(side_effect="mutating")
    async def execute_trade(ctx: ToolContext, code: str, side: str) -> str:
        """Place a (paper) trade."""
        probe.calls.append(f"execute_trade {code}")
        return "filled"

    @ts.tool(background=True, timeout=900)
    async def screen_stocks(ctx: ToolContext, top: int = 20) -> dict:
        """Whole-market screen."""
        probe.calls.append("screen_stocks")
        return {"candidates": []}

    @ts.tool(background=True)
    async def generate_strategy_decision(ctx: ToolContext) -> str:
        """Strategy decision."""
        probe.calls.append("generate_strategy_decision")
        return "hold"

    @ts.tool(requires_approval=True, side_effect="mutating")
    async def exec_command(ctx: ToolContext, command: str) -> str:
        """Shell (never for sub-agents)."""
        probe.calls.append("exec_command")
        return ""

    return ts


class FakeBackground:
    """The executor's BackgroundRunner port: records submissions, returns a task id."""

    def __init__(self) -> None:
        self.submitted: list[tuple[str, str, str]] = []

    async def submit(self, ctx: ToolContext, tool: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        task_id = f"bg_{len(self.submitted) + 1:04d}"
        self.submitted.append((task_id, tool.name, ctx.session_id))
        return {"status": "background", "task_id": task_id, "message": "started in the background"}


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def parent_tools(probe: Probe) -> Toolset:
    return make_toolset(probe)


@pytest.fixture
def sub_client() -> ScriptedClient:
    return ScriptedClient()


@pytest.fixture
def services(parent_tools: Toolset, sub_client: ScriptedClient, tmp_path) -> SubAgentServices:
    return SubAgentServices(
        model_for=lambda _model: sub_client,
        toolset=parent_tools,
        workspace=tmp_path,
        results_dir=tmp_path / "results",
    )


@pytest.fixture
def deps(services: SubAgentServices) -> Deps:
    return Deps(services)
