"""`tapebot data update`: the configured live provider's newest bars into $TAPEBOT_HOME/data/bars
(an akshare stand-in answering in the library's shapes), the stock list with `--all`, alerts
checked against the new bars; without a live provider, a clear error."""

from __future__ import annotations

import asyncio
import io
import sys
from datetime import UTC, date, datetime

from bot.cli import CliContext
from bot.cli import market_data as cli_data
from markets.alerts import AlertSpec, AlertStore
from memory.db import Database
from tests.fakes.market_libs import FakeAkshare

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def run(home, argv, provider="akshare"):
    out = io.StringIO()
    env = {"TAPEBOT_HOME": str(home), "TAPEBOT_MARKETS__PROVIDER": provider}
    ctx = CliContext(home=home, environ=env, stdout=out, stderr=out, now=lambda: NOW)
    return cli_data.main(argv, ctx), out.getvalue()


def test_update_fills_the_store_and_fires_alerts(tmp_path, monkeypatch):
    ak = FakeAkshare(end=date(2026, 12, 3))
    monkeypatch.setitem(sys.modules, "akshare", ak)
    code, out = run(tmp_path, ["update", "--market", "cn", "--all"])
    assert code == 0, out
    assert "cn: 5 updated from akshare; newest bar 2026-12-03" in out  # 2 indexes + the 3 listed stocks
    assert (tmp_path / "data" / "bars" / "akshare" / "index" / "000300.csv").is_file()

    async def set_alert() -> None:
        async with Database(f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}") as db:
            await AlertStore(db.sessionmaker).create(
                "u1", "telegram:1", AlertSpec("close_above", 1, "600519"), "cn", date(2026, 12, 3)
            )

    asyncio.run(set_alert())
    ak.end = date(2026, 12, 4)
    code, out = run(tmp_path, ["update", "--market", "cn"])
    assert code == 0 and "newest bar 2026-12-04" in out and "1 alert(s) triggered" in out, out
    code, out = run(tmp_path, ["update", "--market", "cn"])  # the same bars again: nothing new fires
    assert "triggered" not in out


def test_update_needs_a_live_provider(tmp_path):
    code, out = run(tmp_path, ["update"], provider="bundled")
    assert code == 1 and "no live provider is configured" in out


def test_a_first_update_without_stocks_says_why_the_date_is_the_bundled_one(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "akshare", FakeAkshare(end=date(2026, 12, 3)))
    code, out = run(tmp_path, ["update", "--market", "cn"])
    assert code == 0, out
    assert (
        "cn: 2 updated from akshare; newest bar 2025-09-03 (the provider's bars reach 2026-12-03, but no "
        in out
    )
    assert "name some (tapebot data update 600519 …) or fetch them all with --all)" in out
    code, out = run(tmp_path, ["update", "--market", "cn", "600519"])
    assert "newest bar 2026-12-03\n" in out and "reach" not in out
