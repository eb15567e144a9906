"""What tapebot's MCP server offers besides tools: resources (the portfolio, positions, trades,
the market's state, and per-symbol analyses, prices, history and charts by template) and prompts
(the skills: the daily brief, a stock report, a screen, ...).

A resource is a read-only tool call with fixed arguments, made through the server's `ToolGate`:
it exists only while its tool is served (the same tiers and write gate), and every read is
audited like a call. Prompts are the skills' own instructions, so chat and MCP clients run the
same workflows.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.tools.registry import render_result

if TYPE_CHECKING:
    from bot.mcp_gate import ToolGate

# JSON-RPC code the MCP specification gives an unknown resource URI.
RESOURCE_NOT_FOUND = -32002
SCHEME = "tapebot://"


@dataclass(frozen=True)
class ResourceSpec:
    """One resource or resource template, backed by one read-only tool."""

    uri: str  # a URI, or a template with {code}
    tool: str
    name: str
    title: str
    description: str
    args: Callable[[dict[str, str]], dict[str, Any]] = lambda _: {}
    mime: str = "application/json"
    # the tool changes data but `args` name one of its read actions: served as a resource even
    # where the tool itself is not (no --allow-writes)
    read_action: bool = False

    @property
    def is_template(self) -> bool:
        return "{" in self.uri

    def match(self, uri: str) -> dict[str, str] | None:
        if not self.is_template:
            return {} if uri == self.uri else None
        pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.uri)) + "$"
        found = re.match(pattern, uri)
        return found.groupdict() if found else None


RESOURCES: tuple[ResourceSpec, ...] = (
    ResourceSpec(
        "tapebot://portfolio",
        "portfolio",
        "portfolio",
        "Portfolio",
        "Paper holdings, cash, P&L and orders waiting at a price limit.",
    ),
    ResourceSpec(
        "tapebot://positions", "get_positions", "positions", "Positions", "Open positions of every market."
    ),
    ResourceSpec(
        "tapebot://balance", "get_balance", "balance", "Balance", "Cash and equity of every market."
    ),
    ResourceSpec(
        "tapebot://trades/recent",
        "get_trade_history",
        "recent-trades",
        "Recent fills",
        "The last 20 paper trades and their status.",
        lambda _: {"limit": 20},
    ),
    ResourceSpec(
        "tapebot://alerts",
        "manage_alerts",
        "alerts",
        "Alerts",
        "The user's price and signal alerts, their exact conditions and when they last fired.",
        lambda _: {"action": "list"},
        read_action=True,
    ),
    ResourceSpec(
        "tapebot://watchlist",
        "manage_alerts",
        "watchlist",
        "Watch list",
        "The symbols the user watches (and holds), which watch-list alerts cover.",
        lambda _: {"action": "watchlist"},
        read_action=True,
    ),
    ResourceSpec(
        "tapebot://market/overview",
        "get_market_overview",
        "market-overview",
        "Market overview",
        "Index trend, breadth and the as-of date of the data.",
    ),
    ResourceSpec(
        "tapebot://market/regime",
        "market_regime",
        "market-regime",
        "Market regime",
        "risk_on / neutral / risk_off with the scored reasons.",
    ),
    ResourceSpec(
        "tapebot://strategies", "get_strategies", "strategies", "Strategies", "Saved strategies and traders."
    ),
    ResourceSpec(
        "tapebot://stock/{code}/analysis",
        "analyze_stock",
        "analysis",
        "Wyckoff analysis",
        "The engine's phase, range, events and health of one stock (code, name or crypto symbol).",
        lambda v: {"code": v["code"], "chart": False},
    ),
    ResourceSpec(
        "tapebot://stock/{code}/price",
        "get_market_price",
        "price",
        "Latest price",
        "The latest close of one symbol, with its date.",
        lambda v: {"code": v["code"]},
    ),
    ResourceSpec(
        "tapebot://stock/{code}/history",
        "get_market_history",
        "history",
        "Daily bars",
        "Recent daily bars of one symbol.",
        lambda v: {"code": v["code"]},
    ),
    ResourceSpec(
        "tapebot://stock/{code}/chart.png",
        "analyze_stock",
        "chart",
        "Chart",
        "Candle chart with the Wyckoff range and events marked (PNG).",
        lambda v: {"code": v["code"], "chart": True},
        mime="image/png",
    ),
)


class Resources:
    """The resources and templates whose tools the gate serves."""

    def __init__(self, gate: ToolGate, specs: Iterable[ResourceSpec] = RESOURCES) -> None:
        self.gate = gate
        self.specs = [
            s for s in specs if s.tool in gate.exposed or (s.read_action and s.tool in gate.readable)
        ]

    def listing(self) -> list[Any]:
        import mcp_types as types

        return [
            types.Resource(uri=s.uri, name=s.name, title=s.title, description=s.description, mime_type=s.mime)
            for s in self.specs
            if not s.is_template
        ]

    def templates(self) -> list[Any]:
        import mcp_types as types

        return [
            types.ResourceTemplate(
                uri_template=s.uri, name=s.name, title=s.title, description=s.description, mime_type=s.mime
            )
            for s in self.specs
            if s.is_template
        ]

    async def read(self, uri: str, request_id: Any) -> list[Any]:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        from bot.mcp_gate import CallFailed

        for spec in self.specs:
            values = spec.match(uri)
            if values is None:
                continue
            try:
                out = await self.gate.invoke(
                    spec.tool, spec.args(values), request_id=request_id, read_action=spec.read_action
                )
            except CallFailed as exc:
                raise MCPError(types.INVALID_PARAMS, f"cannot read {uri}: {exc}") from None
            if spec.mime.startswith("image/"):
                images = [a for a in out.attachments if a.mime == spec.mime]
                if not images:
                    raise MCPError(types.INTERNAL_ERROR, f"no chart could be drawn for {uri}")
                data = await asyncio.to_thread(Path(images[0].path).read_bytes)
                blob = base64.b64encode(data).decode()
                return [types.BlobResourceContents(uri=uri, mime_type=spec.mime, blob=blob)]
            return [types.TextResourceContents(uri=uri, mime_type=spec.mime, text=render_result(out.value))]
        raise MCPError(RESOURCE_NOT_FOUND, f"resource not found: {uri}", {"uri": uri})

    async def complete(self, argument: str, value: str, request_id: Any) -> list[str]:
        """Symbols for a `code` argument (templates and prompts), from the stock search."""
        from bot.mcp_gate import CallFailed

        if (
            argument not in ("code", "arguments")
            or not value.strip()
            or "search_stock_by_name" not in self.gate.exposed
        ):
            return []
        try:
            out = await self.gate.invoke(
                "search_stock_by_name", {"query": value.strip(), "limit": 20}, request_id=request_id
            )
        except CallFailed:
            return []
        matches = out.value.get("matches", []) if isinstance(out.value, dict) else []
        return [str(m["symbol"]) for m in matches if isinstance(m, dict) and m.get("symbol")]


class Prompts:
    """The skills as MCP prompts: one optional argument, the text a chat user would type after
    the command (`/report 600519` is the prompt `report` with arguments "600519")."""

    def __init__(self, skills: Iterable[Any]) -> None:
        self.skills = {s.name: s for s in skills}

    def listing(self) -> list[Any]:
        import mcp_types as types

        return [
            types.Prompt(
                name=s.name,
                title=s.description.split(" — ")[0],
                description=s.description,
                arguments=[
                    types.PromptArgument(
                        name="arguments", description=s.arguments or "optional focus", required=False
                    )
                ],
            )
            for s in self.skills.values()
        ]

    def get(self, name: str, arguments: dict[str, str]) -> Any:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        skill = self.skills.get(name)
        if skill is None:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown prompt {name}; available: {', '.join(self.skills) or 'none'}"
            )
        text = (
            "Use tapebot's MCP tools for every number, and state the as-of date of market data.\n\n"
            + skill.render(str(arguments.get("arguments", "")))
        )
        return types.GetPromptResult(
            description=skill.description,
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
        )
