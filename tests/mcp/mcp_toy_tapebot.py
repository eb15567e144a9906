"""A toy investing toolset served by tapebot's MCP server (bot.mcp_server), for the tests: in
process, and as a launcher for the real-stdio test
(`python -m tests.mcp.mcp_toy_tapebot [--allow-writes]` from the repository root)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agent.tools.registry import Attachment, Deps, ToolContext, ToolOutput, Toolset

ROOT = Path(__file__).resolve().parents[2]


class Ledger:
    """What the write tool did, keyed by idempotency key (the same code path as in chat)."""

    def __init__(self) -> None:
        self.applied: dict[str, dict] = {}
        self.keys: list[str] = []


def make_toolset(png: Path | None = None) -> Toolset:
    markets = Toolset("markets")
    history = Toolset("memory")
    local = Toolset("local")

    @history.tool(concurrency_safe=True)
    async def query_history(ctx: ToolContext, query: str) -> str:
        """Look up earlier decisions."""
        return f"no history for {query}"

    @markets.tool(concurrency_safe=True)
    async def analyze_stock(ctx: ToolContext, code: str, days: int = 250, chart: bool = False) -> dict:
        """Analyse one stock with the Wyckoff engine.

        Args:
            code: 6-digit code.
            days: bars to look at.
            chart: also draw the chart.
        """
        if code == "000000":
            raise RuntimeError("engine exploded")
        await ctx.progress("loading", "bars", 50.0)
        out = {"code": code, "phase": "C", "days": days, "as_of": "2026-07-24"}
        if chart and png is not None:
            return ToolOutput(out, [Attachment(path=png, mime="image/png")])  # type: ignore[return-value]
        return out

    @markets.tool(concurrency_safe=True)
    async def get_market_price(ctx: ToolContext, code: str) -> dict:
        """The latest close."""
        return {"symbol": code, "price": 1480.55, "as_of": "2025-09-03"}

    @markets.tool(concurrency_safe=True)
    def search_stock_by_name(ctx: ToolContext, query: str, limit: int = 10) -> dict:
        """Find stocks by code or name."""
        names = {"600519": "贵州茅台", "600036": "招商银行", "300750": "宁德时代"}
        hits = [c for c, n in names.items() if c.startswith(query) or query in n]
        return {"query": query, "matches": [{"symbol": c, "name": names[c]} for c in hits[:limit]]}

    @markets.tool(concurrency_safe=True)
    async def run_backtest(ctx: ToolContext, code: str, wait: bool = False) -> dict:
        """A backtest whose stages report progress the way the real one can: restarting at 0,
        repeating a value, and without a percent at all."""
        for stage, percent in (("loading", 5.0), ("simulating", 0.0), ("simulating", 75.0)):
            await ctx.progress(stage, code, percent)
        await ctx.progress("simulating", code, 75.0)
        await ctx.progress("summarising", code, None)
        if wait:
            started = ctx.deps.get(Ledger)
            started.keys.append("backtest-started")
            await asyncio.sleep(3600)
        return {"code": code, "return_pct": 12.5}

    @markets.tool(concurrency_safe=True)
    async def render_chart(ctx: ToolContext, code: str) -> ToolOutput:
        """Candle chart of one stock."""
        return ToolOutput(f"chart of {code}", [Attachment(path=png, mime="image/png")] if png else [])

    @markets.tool(concurrency_safe=True)
    async def portfolio(ctx: ToolContext) -> dict:
        """The user's portfolio."""
        return {"positions": [{"code": "600519", "shares": 100}]}

    @markets.tool(requires_approval=True, side_effect="mutating")
    async def update_portfolio(ctx: ToolContext, code: str, shares: int) -> dict:
        """Set the shares held of one stock."""
        ledger = ctx.deps.get(Ledger)
        ledger.keys.append(ctx.call_id)
        if ctx.call_id in ledger.applied:  # idempotent replay: the stored outcome, no second change
            return {**ledger.applied[ctx.call_id], "replayed": True}
        ledger.applied[ctx.call_id] = {"code": code, "shares": shares}
        return {"code": code, "shares": shares, "replayed": False}

    @markets.tool(background=True)
    async def screen_stocks(ctx: ToolContext, top: int = 5) -> dict:
        """Whole-market screen."""
        await asyncio.sleep(0)
        return {"candidates": ["600519", "300750"][:top]}

    @local.tool(requires_approval=True, side_effect="mutating")
    async def exec_command(command: str) -> str:
        """Never served."""
        return "ran"

    return Toolset.combine("toy", history, markets, local)


if __name__ == "__main__":
    from bot.mcp_server import build_mcp_server, run_stdio, served_toolset

    allow = "--allow-writes" in sys.argv
    server = build_mcp_server(served_toolset(make_toolset()), Deps(Ledger()), allow_writes=allow)
    asyncio.run(run_stdio(server))
