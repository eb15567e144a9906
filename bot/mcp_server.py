"""tapebot as an MCP server: `tapebot mcp [--allow-writes]` serves the investing tools over stdio
to Claude Code, Cursor or any MCP client, with the official `mcp` SDK (2.x, lowlevel `Server`:
the tools and their JSON schemas come from our `ToolSpec`s, not from Python signatures).

Tiers (seed 000), shown in each tool's description and selectable with `--max-tier`:
    1  history            query_history
    2  market and engine  search, analysis, overview, history, screens, backtests
    3  user data and LLM  portfolio, preferences, trades, AI reports, strategy decisions

Like the seed, the server has no conversation of its own: every call runs one tool and returns.
Unlike the seed, tools that write (requires_approval or side_effect="mutating": portfolio updates,
trades, strategy changes) are not exposed unless the operator starts the server with
`--allow-writes`. Even then they run through the same code path as in chat — the same tool
function, with the client's `idempotency_key` in `ctx.idempotency_key` (honoured as sent, across
server processes and restarts: a retry is not executed twice, and the key reused for a different
order is an error naming the first) and `ctx.source = "mcp"` — and every call is audited: a log line and a JSON line
in `$TAPEBOT_HOME/results/mcp_audit.jsonl`.

Claude Code:  claude mcp add tapebot -- tapebot mcp   (the command line: bot/cli_mcp.py)
Cursor / others: {"mcpServers": {"tapebot": {"command": "tapebot", "args": ["mcp"]}}}
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import InvalidToolArguments, ToolError
from agent.ports import args_hash
from agent.tools.registry import Deps, Tool, ToolContext, ToolOutput, Toolset, ToolSpec, render_result

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
    "render_chart": 2,
    "portfolio": 3,
    "update_portfolio": 3,
    "generate_ai_report": 3,
    "generate_strategy_decision": 3,
    "manage_strategy": 3,
    "manage_trader": 3,
    "execute_trade": 3,
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
AUDIT_FILE = "mcp_audit.jsonl"
IDEMPOTENCY_ARG = "idempotency_key"
TEXT_CAP = 200_000
IMAGE_CAP = 5_000_000


def is_write(spec: ToolSpec) -> bool:
    return spec.requires_approval or spec.side_effect == "mutating"


def tier_of(spec: ToolSpec) -> int:
    """The seed's permission tier for a tool: the table above, else 3 for writes, 1 for history
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


# ---- audit ------------------------------------------------------------------------------------
@dataclass
class McpAudit:
    """Every MCP call: a log line, an in-memory list (tests, `tapebot mcp`), a JSONL file."""

    path: Path | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)

    def record(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        level = logging.WARNING if entry.get("write") else logging.INFO
        log.log(
            level,
            "mcp call %s key=%s ok=%s%s",
            entry["tool"],
            entry["key"],
            entry["ok"],
            f" error={entry['error']}" if entry.get("error") else "",
        )
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
            except OSError:
                log.exception("cannot write the MCP audit file %s", self.path)


# ---- schema adapter ---------------------------------------------------------------------------
def mcp_tool(spec: ToolSpec, *, tier: int | None = None) -> Any:
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
    return types.Tool(
        name=spec.name,
        description=description,
        input_schema=schema,
        annotations=types.ToolAnnotations(
            read_only_hint=spec.side_effect == "read_only",
            destructive_hint=spec.side_effect == "mutating",
            idempotent_hint=spec.side_effect != "mutating",
            open_world_hint=False,
        ),
    )


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
) -> Any:
    """A lowlevel MCP `Server` serving `toolset` (filtered by tier and, unless `allow_writes`,
    without write tools). Run it over stdio with `run_stdio(server)`, or connect in-process with
    `mcp.Client(server)`."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    instance = secrets.token_hex(4)
    audit = audit if audit is not None else McpAudit(results_dir / AUDIT_FILE if results_dir else None)
    hidden_writes: set[str] = set()
    exposed: dict[str, Tool] = {}
    for tool in toolset:
        spec = tool.spec
        if tier_of(spec) > max_tier:
            continue
        if is_write(spec) and not allow_writes:
            hidden_writes.add(spec.name)
            continue
        exposed[spec.name] = tool
    listing = [mcp_tool(t.spec) for t in exposed.values()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listing)

    async def call_tool(sctx: Any, params: Any) -> Any:
        started = time.perf_counter()
        name_ = params.name
        args = dict(params.arguments or {})
        tool = exposed.get(name_)
        if tool is None:
            if name_ in hidden_writes:
                why = (
                    f"{name_} changes data and is not exposed over MCP. The operator can enable write "
                    "tools by starting the server with `tapebot mcp --allow-writes`."
                )
            else:
                why = f"unknown tool {name_}; available: {', '.join(exposed) or 'none'}"
            audit.record(_entry(name_, "", args, False, why, started, write=name_ in hidden_writes))
            return _result(why, error=True)
        write = is_write(tool.spec)
        client_key = str(args.pop(IDEMPOTENCY_ARG, "") or "") if write else ""
        # Client keys get their own prefix so they can never collide with a chat call id.
        key = f"mcp-key-{client_key}" if client_key else f"mcp-{instance}-{sctx.request_id}"

        async def progress(stage: str, detail: str = "", percent: float | None = None) -> None:
            try:
                message = f"{stage}: {detail}" if detail else stage
                await sctx.session.report_progress(float(percent or 0.0), 100.0, message)
            except Exception:  # noqa: BLE001 — progress is best-effort
                pass

        ctx = ToolContext(
            call_id=key,
            tool_name=name_,
            session_id=f"mcp:{instance}",
            turn_id=f"mcp:{instance}",
            user_id=user_id,
            chat_key="mcp",
            workspace=workspace or Path.cwd(),
            deps=deps,
            unattended=False,  # a person is at the MCP client, which confirms writes itself
            source="mcp",
            # honoured as the client sent it: no per-process part, so it holds across restarts
            idempotency_key=client_key,
            _progress=progress,
        )
        try:
            tool.validate(args)
            timeout = tool.spec.timeout or default_timeout
            value = await asyncio.wait_for(tool.call(ctx, args), timeout)
        except InvalidToolArguments as exc:
            audit.record(_entry(name_, key, args, False, str(exc), started, write=write))
            return _result(str(exc), error=True)
        except TimeoutError:
            msg = f"{name_} did not finish within {tool.spec.timeout or default_timeout:.0f} s"
            audit.record(_entry(name_, key, args, False, msg, started, write=write))
            return _result(msg, error=True)
        except ToolError as exc:
            audit.record(_entry(name_, key, args, False, str(exc), started, write=write))
            return _result(str(exc), error=True)
        except Exception as exc:  # the tool crashed: an error result, never a dead server
            log.exception("MCP tool %s failed", name_)
            msg = f"{name_} failed: {type(exc).__name__}: {exc}"
            audit.record(_entry(name_, key, args, False, msg, started, write=write))
            return _result(msg, error=True)
        attachments: list[Any] = []
        if isinstance(value, ToolOutput):
            attachments = list(value.attachments)
            value = value.content
        text = render_result(value)
        if len(text) > TEXT_CAP:
            text = text[:TEXT_CAP] + f"\n…[truncated: {len(text):,} characters in total]"
        structured = None
        if isinstance(value, dict) or (hasattr(value, "model_dump") and not isinstance(value, str)):
            try:
                structured = json.loads(render_result(value))
            except ValueError:
                structured = None
        audit.record(_entry(name_, key, args, True, "", started, write=write))
        return _result(text, structured=structured, images=_images(attachments))

    server: Any = Server(
        name,
        version=_version(),
        instructions=(
            "tapebot's investing tools: market data as of a date, Wyckoff analysis, screens, "
            "backtests and (tier 3) the user's portfolio. Always state the as-of date of market data."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.tapebot_audit = audit  # for `tapebot mcp` and tests
    server.tapebot_exposed = list(exposed)
    return server


def _entry(
    tool: str, key: str, args: dict[str, Any], ok: bool, error: str, started: float, *, write: bool
) -> dict[str, Any]:
    return {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tool": tool,
        "key": key,
        "write": write,
        "args_hash": args_hash(tool, args),
        "arguments": json.loads(json.dumps(args, default=str))
        if len(json.dumps(args, default=str)) <= 4000
        else "(too long)",
        "ok": ok,
        "error": error[:500],
        "elapsed": round(time.perf_counter() - started, 3),
    }


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
