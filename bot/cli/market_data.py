"""`tapebot data …`: market data maintenance.

tapebot data update-calendar   fetch the SSE trading calendar from akshare (the `akshare` extra)
                               into $TAPEBOT_HOME/data/cn_trade_calendar.json, which overrides
                               the bundled calendar (ends 2026-12-31)
tapebot data update [--market cn|crypto|all] [--all] [SYMBOL ...]
                               bring the local bar store ($TAPEBOT_HOME/data/bars) up to the
                               configured live provider's newest bars: the indexes, every stored
                               symbol and the given ones; `--all` also the provider's stock list
                               and all its stocks (the screen's universe). Alerts are checked
                               against the new bars; the running bot delivers what triggered.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.cli.invocation import CliContext


def main(argv: list[str], ctx: CliContext) -> int:
    parser = argparse.ArgumentParser(prog="tapebot data", description="market data maintenance")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.add_parser(
        "update-calendar", help="fetch the SSE trading calendar from akshare into $TAPEBOT_HOME/data"
    )
    up = sub.add_parser("update", help="fetch the live provider's newest bars into the local bar store")
    up.add_argument("symbols", nargs="*", help="also these symbols (codes, names, BTC)")
    up.add_argument("--market", choices=("cn", "crypto", "all"), default="all")
    up.add_argument("--all", action="store_true", help="the provider's whole stock list (slow)")
    args = parser.parse_args(argv)
    if args.action == "update":
        return _update(args, ctx)
    if args.action != "update-calendar":
        parser.print_help(ctx.stdout)
        return 2
    from markets.calendar import update_calendar

    try:
        import akshare
    except ImportError:
        print(
            "tapebot: akshare is not installed: pip install akshare pandas (the akshare extra) "
            "(or put a newer cn_trade_calendar.json into $TAPEBOT_HOME/data/ by hand)",
            file=ctx.stderr,
        )
        return 1
    data_dir = ctx.resolve_home() / "data"
    try:
        res = update_calendar(data_dir, akshare=akshare)
    except ValueError as exc:
        print(f"tapebot: {exc}", file=ctx.stderr)
        return 1
    print(
        f"wrote {res.path}: trading days {res.first} → {res.last} ({res.added} new beyond the previous end)",
        file=ctx.stdout,
    )
    return 0


def _update(args: argparse.Namespace, ctx: CliContext) -> int:
    import asyncio

    from bot.parts import market_settings
    from markets.refresh import refresh_market, stored_providers
    from markets.services import build_market_data

    settings = ctx.settings(require_model=False)
    md = build_market_data(market_settings(settings), clock=ctx.now)
    if not stored_providers(md):
        print(
            f"tapebot: no live provider is configured ([markets] provider = {settings.markets.provider!r}); "
            "set akshare, yfinance or ccxt to keep bars locally",
            file=ctx.stderr,
        )
        return 1
    markets = ["cn", "crypto"] if args.market == "all" else [args.market]

    def progress(symbol: str, done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            print(f"  {done}/{total} {symbol}", file=ctx.stdout)

    failed = False
    reports = []
    for m in markets:
        r = refresh_market(md, m, args.symbols, full_list=args.all, progress=progress)
        reports.append(r)
        print(r.summary(), file=ctx.stdout)
        for sym, err in list(r.failed.items())[:10]:
            print(f"  {sym}: {err}", file=ctx.stdout)
        failed = failed or (bool(r.failed) and not r.updated)
    triggered = asyncio.run(_check_alerts(settings, md, [r.market for r in reports if r.updated]))
    if triggered:
        print(
            f"{triggered} alert(s) triggered; the running bot delivers them into their chats", file=ctx.stdout
        )
    return 1 if failed else 0


async def _check_alerts(settings: Any, md: Any, markets: list[str]) -> int:
    """Evaluate the stored alerts against the refreshed bars (triggers are recorded, once each)."""
    if not markets:
        return 0
    from markets.alerts import AlertStore, evaluate_alerts
    from memory.db import Database

    async with Database(settings.db_url) as db:
        return len(await evaluate_alerts(AlertStore(db.sessionmaker), md, markets))
