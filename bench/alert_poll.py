"""The intraday alert poll's own cost: one poll (`evaluate_live`) over N watched symbols with a
live-price alert, against an in-process akshare stand-in (no network: the figure is tapebot's
work — the alert query, a quote per symbol from today's minute bars, the previous close from the
bar store — not the provider's latency, which adds one request per symbol). Nothing fires, so every
poll does the full work. Also one poll with no live-price alert at all (the idle cost each minute).

    python bench/alert_poll.py [--symbols 50] [--runs 5]

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._env import add_runs_arg, amedian_of, footer, header, spread  # noqa: E402
from markets.alerts import AlertSpec, AlertStore  # noqa: E402
from markets.alerts_live import evaluate_live  # noqa: E402
from markets.data import MarketData  # noqa: E402
from markets.providers.bundled import BundledProvider  # noqa: E402
from markets.providers.network import AkshareProvider  # noqa: E402
from markets.providers.stored import StoredProvider  # noqa: E402
from markets.quotes import AkshareQuotes  # noqa: E402
from markets.store import BarStore  # noqa: E402
from memory.db import Database  # noqa: E402
from tests.fakes.market_libs import FakeAkshare, akshare_minute_rows  # noqa: E402

MON = date(2026, 12, 7)
AT = datetime(2026, 12, 7, 10, 5, tzinfo=ZoneInfo("Asia/Shanghai"))


async def run(n: int, runs: int, folder: Path) -> None:
    codes = [i.symbol for i in MarketData().universe("cn")[:n]]
    ak = FakeAkshare(end=date(2026, 12, 4), stocks={c: c for c in codes})
    md = MarketData(
        [
            StoredProvider(AkshareProvider(module=ak), BarStore(folder / "bars"), clock=lambda: AT),
            BundledProvider(),
        ],
        quote_providers=[AkshareQuotes(module=ak)],
    )
    async with Database(f"sqlite+aiosqlite:///{folder / 'tapebot.db'}") as db:
        store = AlertStore(db.sessionmaker)
        idle, idle_s = await amedian_of(lambda: evaluate_live(store, md, "cn", AT), runs)
        print(f"no live-price alert: {idle * 1000:.2f} ms per poll {spread(idle_s, 1000, 'ms')}")
        for c in codes:
            md.bars(c)  # stored, as the refresh leaves them
            ak.minutes[c] = akshare_minute_rows(MON, [100.0] * 36)
            await store.watch("u1", c, "cn")
        await store.create("u1", "telegram:1", AlertSpec("move_pct", 50), "cn", date(2026, 12, 4))
        await store.create("u1", "telegram:1", AlertSpec("price_above", 1e9), "cn", date(2026, 12, 4))
        full, full_s = await amedian_of(lambda: evaluate_live(store, md, "cn", AT), runs)
        print(
            f"{len(codes)} watched symbols, 2 watchlist alerts: {full * 1000:.1f} ms per poll "
            f"({full * 1000 / len(codes):.2f} ms per symbol) {spread(full_s, 1000, 'ms')}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symbols", type=int, default=50)
    add_runs_arg(parser)
    args = parser.parse_args()
    header(f"intraday alert poll over {args.symbols} symbols")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.symbols, args.runs, Path(tmp)))
    footer()


if __name__ == "__main__":
    main()
