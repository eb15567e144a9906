"""Portfolio bookkeeping and the paper broker: idempotency, A-share rules, reconciliation."""

from __future__ import annotations

import asyncio

import pytest
from markets_helpers import make_sessions

from markets.broker import LiveCcxtBroker, PaperBroker
from markets.data import MarketData
from markets.models import MarketTrade
from markets.portfolio import Portfolio
from markets.services import MarketSettings

MD = MarketData()


@pytest.fixture
async def sessions(tmp_path):
    engine, factory = await make_sessions(tmp_path)
    yield factory
    await engine.dispose()


async def test_same_key_never_fills_twice(sessions):
    broker = PaperBroker(sessions, MD)
    first = await broker.submit("u1", "600519", "buy", 100, key="call-1")
    again = await broker.submit("u1", "600519", "buy", 100, key="call-1")
    assert first.status == "filled" and not first.replayed
    assert again.replayed and again.trade["id"] == first.trade["id"]
    pos = await Portfolio(sessions, MD).positions("u1")
    assert [(p.symbol, p.quantity) for p in pos] == [("600519", 100)]
    assert len(await broker.portfolio.trades("u1")) == 1


async def test_concurrent_replays_fill_once(sessions):
    broker = PaperBroker(sessions, MD)
    results = await asyncio.gather(*[broker.submit("u1", "000001", "buy", 1000, key="tap") for _ in range(5)])
    assert sum(not r.replayed for r in results) == 1
    pos = await broker.portfolio.positions("u1")
    assert pos[0].quantity == 1000


async def test_fill_arithmetic_fees_and_cash(sessions):
    broker = PaperBroker(sessions, MD)
    price = float(MD.bars("600519").close[-1])  # 1,480.55 on 2025-09-03
    r = await broker.submit("u1", "600519", "buy", 100, key="k1")
    notional = 100 * price
    fee = round(max(notional * 0.00025, 5.0) + notional * 0.00001, 2)
    assert r.trade["price"] == price and r.trade["fee"] == pytest.approx(fee) and r.trade["tax"] == 0
    [cn] = await broker.portfolio.balance("u1", "cn")
    assert cn["cash"] == pytest.approx(1_000_000 - notional - fee, abs=0.01)
    assert (
        r.trade["price_as_of"] == "2025-09-03"
    )  # trade_date: the wall-clock session (test_markets_paper_book)


async def test_a_share_rules(sessions):
    broker = PaperBroker(sessions, MD)
    odd = await broker.submit("u1", "600519", "buy", 150, key="odd")
    assert odd.status == "rejected" and "lots of 100" in odd.trade["reason"]
    await broker.submit("u1", "600519", "buy", 200, key="b")
    same_day = await broker.submit("u1", "600519", "sell", 100, key="s")
    assert same_day.status == "rejected" and "T+1" in same_day.trade["reason"]
    too_big = await broker.submit("u1", "600519", "buy", 100_000, key="big")
    assert too_big.status == "rejected" and "insufficient cash" in too_big.trade["reason"]
    # recorded real holdings are not the paper account's: a paper sell of them is refused
    await broker.portfolio.set_holding("u2", "000001", 500, 10.0)
    sold = await broker.submit("u2", "000001", "sell", 500, key="s2")
    assert sold.status == "rejected" and "insufficient holding" in sold.trade["reason"]


async def test_crypto_fractional_and_same_day_round_trip(sessions):
    broker = PaperBroker(sessions, MD, MarketSettings(crypto_fee=0.001))
    b = await broker.submit("u1", "BTC", "buy", 0.015, key="c1")
    s = await broker.submit("u1", "BTC/USDT", "sell", 0.015, key="c2")
    assert b.status == s.status == "filled"
    assert b.trade["fee"] == pytest.approx(round(0.015 * b.trade["price"] * 0.001, 2))


async def test_portfolio_view_has_prices_pnl_and_as_of(sessions):
    pf = Portfolio(sessions, MD)
    await pf.set_holding("u1", "贵州茅台", 200, 1400.0)
    v = await pf.view("u1")
    assert v["as_of"]["cn"] == "2025-09-03"
    [p] = v["recorded"]["positions"]
    assert p["symbol"] == "600519" and p["price"] == 1480.55
    assert p["pnl"] == pytest.approx(200 * (1480.55 - 1400.0), abs=0.01)
    await pf.set_holding("u1", "600519", 0, 0)
    assert (await pf.view("u1"))["recorded"]["positions"] == []


async def test_pending_trade_is_reconciled_not_retried(sessions):
    broker = PaperBroker(sessions, MD)
    async with sessions() as s, s.begin():
        s.add(
            MarketTrade(
                idempotency_key="crash",
                user_id="u1",
                market="cn",
                symbol="600519",
                side="buy",
                quantity=100,
                status="pending",
                venue="paper",
                source="chat",
                fee=0,
                tax=0,
                reason="",
                external_id="",
            )
        )
    fixed = await broker.reconcile("u1")
    assert [t["status"] for t in fixed] == ["rejected"]
    again = await broker.submit("u1", "600519", "buy", 100, key="crash")
    assert again.replayed and again.status == "rejected"  # never filled by a replay
    assert await broker.portfolio.positions("u1") == []


class FakeExchange:
    """Stands in for a ccxt exchange object (no network, no real orders)."""

    def __init__(self, fail: Exception | None = None):
        self.fail, self.orders = fail, {}

    def create_order(self, symbol, type, side, amount, price, params):
        self.orders[params["clientOrderId"]] = {
            "status": "closed",
            "average": 100.0,
            "filled": amount,
            "fee": {"cost": 0.1},
        }
        if self.fail:
            raise self.fail
        return self.orders[params["clientOrderId"]]

    def fetch_order(self, id, symbol, params):
        return self.orders[params["clientOrderId"]]


class RequestTimeout(Exception):
    pass


async def test_live_broker_is_off_unless_enabled_and_unknown_is_reconciled(sessions):
    with pytest.raises(RuntimeError, match="live trading is off"):
        LiveCcxtBroker(sessions, MD, MarketSettings(), FakeExchange())
    ex = FakeExchange(fail=RequestTimeout("timed out"))
    live = LiveCcxtBroker(sessions, MD, MarketSettings(live=True), ex)
    r = await live.submit("u1", "BTC", "buy", 0.5, key="L1")
    assert r.status == "unknown"
    again = await live.submit("u1", "BTC", "buy", 0.5, key="L1")
    assert again.replayed and len(ex.orders) == 1  # not re-sent
    [fixed] = await live.reconcile("u1")
    assert fixed["status"] == "filled" and fixed["price"] == 100.0
