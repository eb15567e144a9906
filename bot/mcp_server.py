"""tapebot as an MCP server: `tapebot mcp [--allow-writes]` serves the investing tools over stdio
to Claude Code, Cursor or any MCP client, with the official `mcp` SDK (2.x, lowlevel `Server`:
the tools and their JSON schemas come from our `ToolSpec`s, not from Python signatures).

Tiers, shown in each tool's description and selectable with `--max-tier`:
    1  history            query_history
    2  market and engine  search, analysis, overview, history, screens, backtests
    3  user data and LLM  portfolio, preferences, trades, AI reports, strategy decisions

The server has no conversation of its own: every call runs one tool and returns.
Tools that write (requires_approval or side_effect="mutating": portfolio updates,
trades, strategy changes) are not exposed unless the operator starts the server with
`--allow-writes`. Even then they run through the same code path as in chat — the same tool
function, with the client's `idempotency_key` in `ctx.idempotency_key` (honoured as sent, across
server processes and restarts: a retry is not executed twice, and the key reused for a different
order is an error naming the first) and `ctx.source = "mcp"` — and every call is audited: a log line and a JSON line
in `$TAPEBOT_HOME/results/mcp_audit.jsonl`.

Claude Code:  claude mcp add tapebot -- tapebot mcp   (the command line: bot/cli/mcp.py)
Cursor / others: {"mcpServers": {"tapebot": {"command": "tapebot", "args": ["mcp"]}}}
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.tools.registry import Deps, Tool, Toolset, ToolSpec, render_result
from bot.mcp_gate import IDEMPOTENCY_ARG, CallFailed, McpAudit, ToolGate, entry, is_write

if TYPE_CHECKING:
    pass

log = logging.getLogger("tapebot.mcp")

TIER_NAMES = {1: "history", 2: "market and engine", 3: "user data and LLM"}
TIER_BY_TOOL: dict[str, int] = {
    "query_history": 1,
    "search_stock_by_name": 2,
    "analyze_stock": 2,
    "get_market_overview": 2,
    "get_market_history": 2,
    "get_market_price": 2,
    "screen_stocks": 2,
    "run_backtest": 2,
    "market_regime": 2,
    "wyckoff_diagnose": 2,
    "intraday_analysis": 2,
    "intraday_rescue_check": 2,
    "query_tail_buy": 2,
    "portfolio": 3,
    "update_portfolio": 3,
    "generate_ai_report": 3,
    "generate_strategy_decision": 3,
    "manage_strategy": 3,
    "manage_trader": 3,
    "execute_trade": 3,
    "manage_alerts": 3,
    "cancel_order": 3,
    "get_strategies": 3,
    "get_positions": 3,
    "get_balance": 3,
    "get_trade_history": 3,
    "get_preferences": 3,
    "manage_preferences": 3,
}
# Toolsets that make no sense outside a chat turn (asking the user, plans, skills, sub-agents,
# background notices, schedules for a chat) or must never be remote-controlled (shell, files,
# web), and tools that came from other MCP servers.
NOT_SERVED_TOOLSETS = frozenset(
    {"core", "local", "skills", "subagents", "background", "schedule", "scheduler", "mcp"}
)
# Market-data providers that read local files: with these the market tools touch nothing outside.
LOCAL_PROVIDERS = frozenset({"bundled", "csv"})
AUDIT_FILE = "mcp_audit.jsonl"
TEXT_CAP = 200_000
IMAGE_CAP = 5_000_000


def tier_of(spec: ToolSpec) -> int:
    """The permission tier for a tool: the table above, else 3 for writes, 1 for history
    toolsets, 2 for the rest."""
    if spec.name in TIER_BY_TOOL:
        return TIER_BY_TOOL[spec.name]
    if is_write(spec):
        return 3
    if spec.toolset in ("history",):
        return 1
    return 2


def served_toolset(toolset: Toolset) -> Toolset:
    """The investing tools of a full runtime toolset (drops chat-only and local tools)."""
    return Toolset("mcp-served", (t for t in toolset if t.spec.toolset not in NOT_SERVED_TOOLSETS))


# ---- schema adapter ---------------------------------------------------------------------------
def tool_hints(spec: ToolSpec, *, open_world: bool = False) -> dict[str, bool]:
    """What the MCP hints may truthfully say of a tool. A tool that calls a model or the network
    is neither read-only (it spends the operator's tokens or reaches a third party) nor
    idempotent (its answer changes); market tools are open-world when the data provider is a
    network one (`open_world`)."""
    world = spec.open_world or (open_world and spec.toolset == "markets")
    read_only = spec.side_effect == "read_only" and not spec.open_world
    return {
        "read_only_hint": read_only,
        "destructive_hint": spec.side_effect == "mutating",
        "idempotent_hint": spec.side_effect == "idempotent" or (read_only and not spec.open_world),
        "open_world_hint": world,
    }


def title_of(spec: ToolSpec) -> str:
    """A human-readable name for clients' tool pickers: `get_market_price` -> "Get market price"."""
    words = [("AI" if w == "ai" else w) for w in spec.name.split("_") if w]
    title = " ".join(words)
    return title[:1].upper() + title[1:]


def mcp_tool(spec: ToolSpec, *, tier: int | None = None, open_world: bool = False) -> Any:
    """The MCP `Tool` for a ToolSpec (same name, description and input schema)."""
    import mcp_types as types

    tier = tier or tier_of(spec)
    write = is_write(spec)
    schema = json.loads(json.dumps(spec.parameters))
    description = f"{spec.description}\n\n[tapebot · tier {tier}: {TIER_NAMES[tier]}]"
    if write:
        schema.setdefault("properties", {})[IDEMPOTENCY_ARG] = {
            "type": "string",
            "description": "optional; pass the same key when retrying so the change is not made twice",
        }
        description += " This tool CHANGES DATA: confirm with the user before calling it. Calls are audited."
    if spec.background:
        description += " Long-running: the call returns when the work is done."
    hints = tool_hints(spec, open_world=open_world)
    return types.Tool(
        name=spec.name,
        title=title_of(spec),
        description=description,
        input_schema=schema,
        output_schema={"type": "object"} if spec.structured else None,
        annotations=types.ToolAnnotations(title=title_of(spec), **hints),
    )


class Progress:
    """A call's progress notifications, strictly increasing as the protocol requires: a percent
    at or below the last one sent (a tool restarting its count, or one without percents) moves
    the value by a small step instead, and is dropped only once nothing is left below 100."""

    STEP = 0.1

    def __init__(self, send: Callable[[float, float, str], Awaitable[None]]) -> None:
        self._send = send
        self.last: float | None = None

    async def __call__(self, stage: str, detail: str = "", percent: float | None = None) -> None:
        value = float(percent) if percent is not None else None
        if value is None or (self.last is not None and value <= self.last):
            value = 0.0 if self.last is None else self.last + self.STEP
        value = max(0.0, min(value, 100.0))
        if self.last is not None and value <= self.last:
            return
        self.last = value
        try:
            await self._send(value, 100.0, f"{stage}: {detail}" if detail else stage)
        except Exception:  # progress is best-effort
            log.debug("progress notification not sent", exc_info=True)


def _result(text: str, *, error: bool = False, structured: Any = None, images: Sequence[Any] = ()) -> Any:
    import mcp_types as types

    content: list[Any] = [types.TextContent(type="text", text=text)]
    content.extend(images)
    return types.CallToolResult(
        content=content,
        structured_content=structured if isinstance(structured, dict) else None,
        is_error=error,
    )


def _images(attachments: Iterable[Any]) -> list[Any]:
    import mcp_types as types

    out = []
    for att in attachments:
        if not att.mime.startswith("image/"):
            continue
        try:
            data = Path(att.path).read_bytes()
        except OSError:
            continue
        if len(data) <= IMAGE_CAP:
            out.append(
                types.ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=att.mime)
            )
    return out


# ---- the server -------------------------------------------------------------------------------
def build_mcp_server(
    toolset: Toolset,
    deps: Deps,
    allow_writes: bool = False,
    *,
    max_tier: int = 3,
    workspace: Path | None = None,
    results_dir: Path | None = None,
    audit: McpAudit | None = None,
    user_id: str = "mcp",
    default_timeout: float = 600.0,
    name: str = "tapebot",
    open_world: bool = False,
    skills: Iterable[Any] = (),
) -> Any:
    """A lowlevel MCP `Server` serving `toolset` (filtered by tier and, unless `allow_writes`,
    without write tools), the resources and resource templates those tools back, and `skills`
    as prompts. Run it over stdio with `run_stdio(server)`, over HTTP with bot/mcp_http.py, or
    connect in-process with `mcp.Client(server)`."""
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    from bot import mcp_catalog as catalog

    audit = audit if audit is not None else McpAudit(results_dir / AUDIT_FILE if results_dir else None)
    hidden_writes: set[str] = set()
    exposed: dict[str, Tool] = {}
    readable: dict[str, Tool] = {}
    for tool in toolset:
        spec = tool.spec
        if tier_of(spec) > max_tier:
            continue
        if is_write(spec) and not allow_writes:
            hidden_writes.add(spec.name)
            readable[spec.name] = tool
            continue
        exposed[spec.name] = tool
    gate = ToolGate(
        exposed,
        hidden_writes,
        deps,
        audit,
        secrets.token_hex(4),
        user_id,
        workspace,
        default_timeout,
        readable,
    )
    listing = [mcp_tool(t.spec, open_world=open_world) for t in exposed.values()]
    resources = catalog.Resources(gate)
    prompts = catalog.Prompts(skills)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(sctx: Any, params: Any) -> Any:
        name_ = params.name
        args = dict(params.arguments or {})
        if name_ not in exposed:  # not in tools/list: a protocol error (-32602), not a tool's failure
            why = gate.refusal(name_)
            audit.record(
                entry(name_, "", args, False, why, time.perf_counter(), write=name_ in hidden_writes)
            )
            raise MCPError(types.INVALID_PARAMS, why)
        try:
            out = await gate.invoke(
                name_, args, request_id=sctx.request_id, progress=Progress(sctx.session.report_progress)
            )
        except CallFailed as exc:
            return _result(str(exc), error=True)
        text = render_result(out.value)
        if len(text) > TEXT_CAP:
            text = text[:TEXT_CAP] + f"\n…[truncated: {len(text):,} characters in total]"
        structured = None
        if isinstance(out.value, dict) or (
            hasattr(out.value, "model_dump") and not isinstance(out.value, str)
        ):
            try:
                structured = json.loads(render_result(out.value))
            except ValueError:
                structured = None
        return _result(text, structured=structured, images=_images(out.attachments))

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(resources=resources.listing())

    async def list_templates(ctx: Any, params: Any) -> Any:
        return types.ListResourceTemplatesResult(resource_templates=resources.templates())

    async def read_resource(sctx: Any, params: Any) -> Any:
        return types.ReadResourceResult(contents=await resources.read(str(params.uri), sctx.request_id))

    async def list_prompts(ctx: Any, params: Any) -> Any:
        return types.ListPromptsResult(prompts=prompts.listing())

    async def get_prompt(ctx: Any, params: Any) -> Any:
        return prompts.get(params.name, dict(params.arguments or {}))

    async def complete(sctx: Any, params: Any) -> Any:
        values = await resources.complete(params.argument.name, params.argument.value, sctx.request_id)
        return types.CompleteResult(
            completion=types.Completion(values=values[:100], total=len(values), has_more=len(values) > 100)
        )

    server: Any = Server(
        name,
        version=_version(),
        title="tapebot",
        instructions=(
            "tapebot's investing tools: market data as of a date, Wyckoff analysis, screens, "
            "backtests and (tier 3) the user's portfolio. Always state the as-of date of market data."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )
    server.tapebot_audit = audit  # for `tapebot mcp` and tests
    server.tapebot_exposed = list(exposed)
    return server


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("tapebot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0"


async def run_stdio(server: Any) -> None:
    """Serve `server` over this process's stdin/stdout until the client disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
