"""`tapebot data …`: market data maintenance.

tapebot data update-calendar   fetch the SSE trading calendar from akshare (the `akshare` extra)
                               into $TAPEBOT_HOME/data/cn_trade_calendar.json, which overrides
                               the bundled calendar (ends 2026-12-31)
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.cli import CliContext


def main(argv: list[str], ctx: CliContext) -> int:
    parser = argparse.ArgumentParser(prog="tapebot data", description="market data maintenance")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.add_parser(
        "update-calendar", help="fetch the SSE trading calendar from akshare into $TAPEBOT_HOME/data"
    )
    args = parser.parse_args(argv)
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
