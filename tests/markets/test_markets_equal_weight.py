"""Equal-weight buys and reported rejections in the backtester: a stock whose lot costs more than
its equal share gets one lot when the cash allows, what no cash can buy is reported with the reason,
a zero-quantity order is reported, and entries known before the open fill on their own bar."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from markets.backtest import BacktestConfig, Order, run
from markets.bars import Bars
from markets.panel import Panel
from markets.rules import MarketRules, money_sum, notional


def flat_panel(prices: dict[str, float], days: int = 3) -> Panel:
    dates = (np.datetime64("2024-01-02") + np.arange(days)).astype("datetime64[D]")
    bars = {}
    for sym, p in prices.items():
        a = np.full(days, p)
        bars[sym] = Bars(sym, dates, a, a * 1.01, a * 0.99, a, np.full(days, 1e6))
    return Panel.from_bars(bars)


def cfg(cash: float, n: int, **kw: object) -> BacktestConfig:
    return BacktestConfig(
        initial_cash=cash,
        max_positions=n,
        position_pct=1 / n,
        stop_pct=None,
        trail_after=None,
        max_hold=None,
        **kw,  # type: ignore[arg-type]
    )


def bought(r) -> dict[str, float]:
    return {f["symbol"]: f["qty"] for f in r.fills if f["side"] == "buy"}


PRICES = {"A": 50.0, "B": 10.0, "C": 5.0}  # one lot: 5,000 / 1,000 / 500


def entries_day0(p: Panel) -> np.ndarray:
    e = np.zeros(p.shape, dtype=bool)
    e[:, 0] = True
    return e


def test_a_lot_dearer_than_the_equal_share_is_still_bought():
    p = flat_panel(PRICES)
    # 12,000 / 3 = 4,000 each, but a lot of A costs 5,005.05 with fees: A gets one lot, B and C
    # share the rest equally (3,497.47 each → 300 B at 10, 600 C at 5; each with a 5.03 fee)
    r = run(p, rules=MarketRules.cn(), cfg=cfg(12_000, 3, equal_weight=True), entries=entries_day0(p))
    assert bought(r) == {"A": 100, "B": 300, "C": 600}
    assert r.rejected == []
    # before: A's 4,000 share bought no lot and A was skipped without a word
    r_old = run(p, rules=MarketRules.cn(), cfg=cfg(12_000, 3), entries=entries_day0(p))
    assert "A" not in bought(r_old)
    assert r_old.rejected[0]["symbol"] == "A" and "zero quantity" in r_old.rejected[0]["reason"]


def test_what_cash_cannot_buy_is_reported():
    p = flat_panel(PRICES)
    # one lot of each costs 5,005.05 + 1,005.01 + 505.01 = 6,515.07 > 6,000: A (the dearest) is
    # left out and reported; B and C get 2,000 each (100 B, 300 C)
    r = run(p, rules=MarketRules.cn(), cfg=cfg(6_000, 3, equal_weight=True), entries=entries_day0(p))
    assert bought(r) == {"B": 100, "C": 300}
    [rej] = r.rejected
    assert rej["symbol"] == "A" and rej["side"] == "buy" and rej["date"] == "2024-01-03"
    assert "one lot costs 5,005.05" in rej["reason"]
    assert r.summary()["rejected_orders"] == 1


def test_zero_quantity_orders_are_reported():
    p = flat_panel({"A": 50.0})
    orders = [Order(0, "A", "buy", quantity=50), Order(1, "A", "buy", value=1_000)]
    r = run(p, rules=MarketRules.cn(), cfg=cfg(100_000, 1), orders=orders)
    assert r.fills == []
    assert [x["reason"] for x in r.rejected] == [
        "zero quantity: 50 rounds to no whole lot",
        "zero quantity: 1,000.00 buys no 100 at 50 with fees",
    ]


def test_entries_known_before_the_open_fill_on_their_own_bar():
    p = flat_panel({"A": 50.0})
    e = entries_day0(p)
    r = run(p, rules=MarketRules.cn(), cfg=cfg(100_000, 1, enter_same_bar=True), entries=e)
    assert [f["date"] for f in r.fills] == ["2024-01-02"]  # the first bar, not the second
    r = run(p, rules=MarketRules.cn(), cfg=cfg(100_000, 1), entries=e)
    assert [f["date"] for f in r.fills] == ["2024-01-03"]  # a close's signal: the next open


@settings(max_examples=60, deadline=None)
@given(
    prices=st.lists(st.integers(min_value=100, max_value=200_000), min_size=1, max_size=12),
    cash=st.integers(min_value=1_000, max_value=2_000_000),
)
def test_equal_weight_buys_every_stock_the_cash_allows_property(prices, cash):
    p = flat_panel({f"S{k:02d}": c / 100 for k, c in enumerate(prices)})
    rules = MarketRules.cn()
    r = run(p, rules=rules, cfg=cfg(float(cash), len(prices), equal_weight=True), entries=entries_day0(p))
    lot_cost = {}
    for sym, c in zip(p.symbols, prices, strict=True):
        n = notional(100, c / 100)
        lot_cost[sym] = money_sum(n, *rules.order_cost("buy", n))
    got = bought(r)
    rejected = {x["symbol"] for x in r.rejected}
    assert set(got) | rejected == set(p.symbols) and not set(got) & rejected  # nothing silent
    assert r.equity[0] > 0 and min(r.equity) > 0
    spent = sum(lot_cost[s] for s in got)
    assert spent <= cash
    if sum(lot_cost.values()) <= cash:
        assert rejected == set()  # one lot of each fits: every stock is bought
    else:
        # only the dearest are left out, and adding the cheapest of them would not fit
        assert min(lot_cost[s] for s in rejected) >= max((lot_cost[s] for s in got), default=0)
