"""The paper book: recorded real holdings and paper trades are separate books;
T+1 and "today" follow the wall-clock trading calendar (an injected clock) while prices are the last
bar's close (stated); realized P&L is reported."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from markets_helpers import make_sessions

from agent.tools.registry import Deps, ToolContext
from markets.broker import PaperBroker
from markets.data import MarketData
from markets.portfolio import Portfolio
from markets.services import MarketServices
from markets.tools import market_tools

MD = MarketData()


def at(day: str, hour: int = 2):  # 02:00 UTC = 10:00 in Shanghai
    return lambda: datetime.fromisoformat(f"{day}T{hour:02d}:00:00+00:00")


@pytest.fixture
async def sessions(tmp_path):
    engine, factory = await make_sessions(tmp_path)
    yield factory
    await engine.dispose()


async def test_recorded_holdings_do_not_touch_the_paper_account(sessions):
    pf = Portfolio(sessions, MD)
    paper = PaperBroker(sessions, MD, clock=at("2026-12-03"))
    assert (await paper.submit("u1", "600519", "buy", 100, key="b1")).status == "filled"
    await pf.set_holding("u1", "600519", 500, 1400.0)  # the user's real shares
    await pf.set_cash("u1", "cn", 50_000)
    assert [(p.symbol, p.quantity) for p in await pf.positions("u1")] == [("600519", 100)]
    assert [(p.symbol, p.quantity) for p in await pf.holdings("u1")] == [("600519", 500)]
    [paper_cash] = await pf.balance("u1", "cn")
    assert paper_cash["cash"] < 1_000_000 - 100 * 1400  # the paper account's own cash, not 50,000
    # a paper sell can only sell what the paper account bought
    later = PaperBroker(sessions, MD, clock=at("2026-12-04"))
    too_many = await later.submit("u1", "600519", "sell", 500, key="s1")
    assert too_many.status == "rejected" and "insufficient holding" in too_many.trade["reason"]
    # recorded-only holdings are not sellable on paper at all
    await pf.set_holding("u2", "000001", 500, 10.0)
    r = await later.submit("u2", "000001", "sell", 500, key="s2")
    assert r.status == "rejected" and "have 0" in r.trade["reason"]


async def test_view_shows_both_books_labelled(sessions):
    pf = Portfolio(sessions, MD)
    await PaperBroker(sessions, MD, clock=at("2026-12-03")).submit("u1", "000001", "buy", 1000, key="b")
    await pf.set_holding("u1", "贵州茅台", 200, 1400.0)
    v = await pf.view("u1")
    assert "paper" in v["paper"]["label"].lower() and "recorded" in v["recorded"]["label"].lower()
    assert [p["symbol"] for p in v["paper"]["positions"]] == ["000001"]
    [rec] = v["recorded"]["positions"]
    assert rec["symbol"] == "600519" and rec["price"] == 1480.55
    assert rec["pnl"] == pytest.approx(200 * (1480.55 - 1400.0), abs=0.01)
    assert "2025-09-03" in v["prices"]  # prices are the last bar's close, and it says so
    assert v["paper"]["totals"]["cn"]["realized_pnl"] == 0
    await pf.set_holding("u1", "600519", 0, 0)
    assert (await pf.view("u1"))["recorded"]["positions"] == []


async def test_t_plus_1_follows_the_wall_clock_calendar_and_realized_pnl(sessions):
    thu = PaperBroker(sessions, MD, clock=at("2026-12-03"))
    buy = await thu.submit("u1", "600519", "buy", 200, key="b")
    assert buy.trade["trade_date"] == "2026-12-03" and buy.trade["price_as_of"] == "2025-09-03"
    assert "2025-09-03 close" in buy.trade["reason"]
    same = await thu.submit("u1", "600519", "sell", 100, key="s0")
    assert same.status == "rejected" and "T+1" in same.trade["reason"]
    # later the same day, before the close (14:00 in Shanghai), is still the same session
    assert (
        await PaperBroker(sessions, MD, clock=at("2026-12-03", 6)).submit(
            "u1", "600519", "sell", 100, key="s0b"
        )
    ).status == "rejected"
    fri = PaperBroker(sessions, MD, clock=at("2026-12-04"))
    sell = await fri.submit("u1", "600519", "sell", 100, key="s1")
    assert sell.status == "filled" and sell.trade["trade_date"] == "2026-12-04"
    price = 1480.55
    cost_per_share = (200 * price + buy.trade["fee"]) / 200
    want = 100 * price - sell.trade["fee"] - sell.trade["tax"] - 100 * cost_per_share
    assert sell.trade["realized_pnl"] == pytest.approx(want, abs=0.01)
    v = await Portfolio(sessions, MD).view("u1")
    assert v["paper"]["totals"]["cn"]["realized_pnl"] == pytest.approx(want, abs=0.01)


async def test_an_order_on_a_weekend_belongs_to_the_next_session(sessions):
    sat = PaperBroker(sessions, MD, clock=at("2026-12-05"))
    b = await sat.submit("u1", "600519", "buy", 100, key="b")
    assert b.trade["trade_date"] == "2026-12-07"
    sun = await PaperBroker(sessions, MD, clock=at("2026-12-06")).submit("u1", "600519", "sell", 100, key="s")
    assert sun.status == "rejected" and "T+1" in sun.trade["reason"]
    tue = await PaperBroker(sessions, MD, clock=at("2026-12-08")).submit(
        "u1", "600519", "sell", 100, key="s2"
    )
    assert tue.status == "filled"


async def test_tools_record_real_holdings_and_trade_on_paper(tmp_path):
    engine, sessions = await make_sessions(tmp_path)
    svc = MarketServices(data=MD, session_factory=sessions, results_dir=tmp_path, clock=at("2026-12-03"))
    ctx = lambda n: ToolContext(call_id=f"c{n}", session_id="s", user_id="u1", deps=Deps(svc))  # noqa: E731
    await market_tools.get("update_portfolio").call(
        ctx(1), {"action": "set", "code": "600519", "quantity": 300, "cost": 1500}
    )
    await market_tools.get("execute_trade").call(ctx(2), {"code": "000001", "side": "buy", "quantity": 1000})
    view = await market_tools.get("portfolio").call(ctx(3), {})
    assert [p["symbol"] for p in view["recorded"]["positions"]] == ["600519"]
    assert [p["symbol"] for p in view["paper"]["positions"]] == ["000001"]
    diag = await market_tools.get("portfolio").call(ctx(4), {"mode": "diagnose"})
    assert all("health" in p for b in ("paper", "recorded") for p in diag[b]["positions"])
    pos = await market_tools.get("get_positions").call(ctx(5), {})
    assert [p["symbol"] for p in pos["paper"]] == ["000001"] and [p["symbol"] for p in pos["recorded"]] == [
        "600519"
    ]
    await engine.dispose()


async def test_an_order_after_the_close_belongs_to_the_next_session(sessions):
    # Monday 2026-11-30 20:00 in Shanghai: after the close, so Tuesday's session; a sell on
    # Tuesday 09:31 is the same session and T+1 refuses it; Wednesday's fills
    mon_evening = PaperBroker(sessions, MD, clock=lambda: datetime.fromisoformat("2026-11-30T20:00:00+08:00"))
    b = await mon_evening.submit("u1", "600519", "buy", 100, key="b")
    assert b.status == "filled" and b.trade["trade_date"] == "2026-12-01"
    tue = PaperBroker(sessions, MD, clock=lambda: datetime.fromisoformat("2026-12-01T09:31:00+08:00"))
    s = await tue.submit("u1", "600519", "sell", 100, key="s")
    assert s.status == "rejected" and "T+1" in s.trade["reason"] and "2026-12-01" in s.trade["reason"]
    wed = PaperBroker(sessions, MD, clock=lambda: datetime.fromisoformat("2026-12-02T09:31:00+08:00"))
    assert (await wed.submit("u1", "600519", "sell", 100, key="s2")).status == "filled"
    # 14:59 is still the day's session; 15:00 is the next one's
    for t, want in (("14:59", "2026-12-02"), ("15:00", "2026-12-03")):
        br = PaperBroker(sessions, MD, clock=lambda t=t: datetime.fromisoformat(f"2026-12-02T{t}:00+08:00"))
        assert br.session_day("cn") == date.fromisoformat(want)
    # the day before the National Day holiday, after the close: the session after it
    eve = PaperBroker(sessions, MD, clock=lambda: datetime.fromisoformat("2026-09-30T16:00:00+08:00"))
    assert eve.session_day("cn") == date(2026, 10, 8)
