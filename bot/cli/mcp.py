"""`tapebot mcp [serve|tools|servers]`: the command line of tapebot's MCP server (bot/mcp_server.py)
— serve the investing tools over stdio, list what would be served, or check the MCP servers
tapebot itself uses."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent import Toolset
from bot.mcp_gate import is_write
from bot.mcp_http import TOKEN_ENV, Listen, ListenError, check_exposure, http_app, parse_listen, serve_http
from bot.mcp_server import LOCAL_PROVIDERS, build_mcp_server, served_toolset, tier_of

if TYPE_CHECKING:
    from config.settings import Settings

log = logging.getLogger("tapebot.mcp")


# ---- entry points -----------------------------------------------------------------------------
def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tapebot mcp",
        description="Serve tapebot's investing tools to MCP clients over stdio (Claude Code, Cursor, ...) "
        "or streamable HTTP (--http).",
        epilog="Examples: claude mcp add tapebot -- tapebot mcp;  "
        "TAPEBOT_MCP_TOKEN=... tapebot mcp --http 127.0.0.1:8765",
    )
    parser.add_argument(
        "action",
        nargs="?",
        default="serve",
        choices=("serve", "tools", "servers"),
        help="serve (default): run the stdio server; tools: list what would be served; "
        "servers: check the [[mcp_servers]] tapebot itself uses",
    )
    parser.add_argument(
        "--allow-writes",
        action="store_true",
        help="also expose tools that change data (portfolio updates, trades, strategy changes)",
    )
    parser.add_argument(
        "--max-tier",
        type=int,
        choices=(1, 2, 3),
        default=3,
        help="1 = history only, 2 = + market data and engine, 3 = + user data and LLM (default)",
    )
    parser.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST defaults to "
        "127.0.0.1; any other address needs TAPEBOT_MCP_TOKEN, which clients send as a bearer token)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --http: a Host name clients use besides loopback (DNS-rebinding check); repeatable",
    )
    return parser


def mcp_main(args: argparse.Namespace | Sequence[str], settings: Settings) -> int:
    """`tapebot mcp ...`: parse (or take) the arguments and run the chosen action."""
    ns = args if isinstance(args, argparse.Namespace) else build_arg_parser().parse_args(list(args))
    action = getattr(ns, "action", "serve")
    if action == "servers":
        return asyncio.run(_check_servers(settings))
    if action == "tools":
        return asyncio.run(_list_served(settings, ns))
    logging.basicConfig(stream=sys.stderr, level=getattr(settings, "log_level", "INFO"))
    if getattr(ns, "http", None):
        try:
            listen = parse_listen(ns.http)
            check_exposure(listen, settings.environ.get(TOKEN_ENV, ""))
        except ListenError as exc:
            print(f"tapebot mcp: {exc}", file=sys.stderr)
            return 2
        return asyncio.run(_serve_http(settings, ns, listen))
    return asyncio.run(_serve(settings, ns))


async def _app_toolset(settings: Settings) -> tuple[Any, Toolset]:
    from bot.app import App

    app = App(settings)
    await app.start(adapters=False)
    return app, served_toolset(app.runtime.tools)


def _build_server(
    app: Any, toolset: Toolset, settings: Settings, ns: argparse.Namespace, transport: str
) -> Any:
    server = build_mcp_server(
        toolset,
        app.deps,
        allow_writes=ns.allow_writes,
        max_tier=ns.max_tier,
        workspace=settings.workspace_dir,
        results_dir=settings.results_dir,
        open_world=settings.markets.provider not in LOCAL_PROVIDERS,
        skills=_skills(app),
    )
    log.info(
        "serving %d tools over %s (writes %s, max tier %d)",
        len(server.tapebot_exposed),
        transport,
        "ENABLED" if ns.allow_writes else "off",
        ns.max_tier,
    )
    return server


def _skills(app: Any) -> Any:
    from agent.skills import SkillLibrary, builtin_skills

    try:
        return list(app.deps.get(SkillLibrary))
    except LookupError:
        return list(builtin_skills().values())


async def _serve(settings: Settings, ns: argparse.Namespace) -> int:
    from mcp.server.stdio import stdio_server

    # Claim stdin/stdout first: from here on stray prints from start-up go to stderr.
    async with stdio_server() as (read, write):
        app, toolset = await _app_toolset(settings)
        try:
            server = _build_server(app, toolset, settings, ns, "stdio")
            await server.run(read, write, server.create_initialization_options())
        finally:
            await app.stop()
    return 0


async def _serve_http(settings: Settings, ns: argparse.Namespace, listen: Listen) -> int:
    app, toolset = await _app_toolset(settings)
    try:
        server = _build_server(app, toolset, settings, ns, "streamable HTTP")
        token = settings.environ.get(TOKEN_ENV, "")
        try:
            asgi = http_app(server, listen, token=token, extra_hosts=ns.allowed_host)
        except ListenError as exc:
            print(f"tapebot mcp: {exc}", file=sys.stderr)
            return 2

        def started(port: int) -> None:
            url = Listen(listen.host, port).url
            # One line on stdout that scripts and tests can wait for; the token is never printed.
            print(
                f"MCP server listening on {url} ({'bearer token required' if token else 'no token'})",
                flush=True,
            )

        await serve_http(asgi, listen, started=started)
    finally:
        await app.stop()
    return 0


async def _list_served(settings: Settings, ns: argparse.Namespace) -> int:
    app, toolset = await _app_toolset(settings)
    try:
        for tool in toolset:
            spec = tool.spec
            tier = tier_of(spec)
            hidden = (is_write(spec) and not ns.allow_writes) or tier > ns.max_tier
            mark = "  (not served: " + ("writes" if is_write(spec) else "tier") + ")" if hidden else ""
            print(f"tier {tier}  {spec.name}{mark}")
    finally:
        await app.stop()
    return 0


async def _check_servers(settings: Settings) -> int:
    from agent import McpManager

    if not settings.mcp_servers:
        print("no [[mcp_servers]] configured")
        return 0
    manager = McpManager(settings.mcp_servers, log_dir=settings.home / "logs")
    await manager.start()
    try:
        for line in manager.status():
            print(line)
        for tool in manager.toolset:
            flag = " (approval)" if tool.spec.requires_approval else ""
            print(f"  {tool.name}{flag}")
    finally:
        await manager.stop()
    ok = all(c.state == "ready" for c in manager.connections)
    return 0 if ok else 1


def cli_main(argv: Sequence[str], ctx: Any) -> int:
    """`bot.cli` extension entry (`fn(argv, ctx) -> int`)."""
    settings = ctx.settings(require_model=False)
    return mcp_main(list(argv), settings)


if __name__ == "__main__":  # python -m bot.cli.mcp [serve|tools|servers] [--allow-writes]
    from bot.cli.invocation import CliContext

    sys.exit(cli_main(sys.argv[1:], CliContext()))
