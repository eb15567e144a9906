"""Backtester arithmetic against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from markets.backtest import BacktestConfig, Order, metrics, run
from markets.bars import Bars
from markets.panel import Panel
from markets.rules import Fees, MarketRules, limit_prices


def panel_of(rows: dict[str, list[tuple[float, float, float, float]]], market: str = "cn") -> Panel:
    bars = {}
    for sym, r in rows.items():
        a = np.array(r, dtype=float)
        dates = (np.datetime64("2024-01-01") + np.arange(len(a))).astype("datetime64[D]")
        bars[sym] = Bars(sym, dates, a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), 1e6), market=market)
    return Panel.from_bars(bars)


NO_EXITS = BacktestConfig(initial_cash=100_000, stop_pct=None, trail_after=None, max_hold=None)


def test_buy_and_hold_crypto_equals_price_ratio_less_fees():
    p = panel_of({"X": [(100, 101, 99, 100), (110, 121, 105, 120), (140, 151, 139, 150)]}, "crypto")
    fee = 0.001
    r = run(p, rules=MarketRules.crypto(fee), cfg=NO_EXITS, orders=[Order(0, "X", "buy", value=100_000)])
    expected = 100_000 / (1 + fee) * 150 / 100  # all-in at the open of day 0, marked at the last close
    assert r.equity[-1] == pytest.approx(expected, rel=1e-5)
    assert r.metrics["total_return_pct"] == pytest.approx((expected / 100_000 - 1) * 100, abs=0.01)


def test_buy_and_hold_a_share_lots_and_fees_by_hand():
    p = panel_of({"600000": [(10.0, 10.1, 9.9, 10.0), (10.2, 10.6, 10.1, 10.5), (10.9, 11.1, 10.8, 11.0)]})
    r = run(
        p,
        rules=MarketRules.cn(),
        cfg=NO_EXITS,
        orders=[Order(0, "600000", "buy", value=100_000)],
        limits=np.array([0.10]),
    )
    # 10,000 shares would cost 100,000 + fees > cash, so 9,900 shares (whole lots):
    notional = 9_900 * 10.0
    fee = round(max(notional * 0.00025, 5) + notional * 0.00001, 2)  # 24.75 + 0.99 = 25.74
    assert r.fills[0]["qty"] == 9_900 and r.fills[0]["fee"] == pytest.approx(fee)
    cash = 100_000 - notional - fee
    assert r.equity[-1] == pytest.approx(cash + 9_900 * 11.0)
    assert r.equity[0] == pytest.approx(cash + 9_900 * 10.0)


def test_round_trip_pnl_includes_stamp_duty_and_min_commission():
    p = panel_of({"600000": [(10.0, 10.1, 9.9, 10.0), (10.0, 10.1, 9.9, 10.0), (11.0, 11.2, 10.9, 11.0)]})
    orders = [Order(0, "600000", "buy", quantity=1_000), Order(2, "600000", "sell", at="close")]
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, orders=orders, limits=np.array([0.10]))
    buy_fee = round(5.0 + 10_000 * 0.00001, 2)  # commission floored at 5 CNY + transfer
    sell_fee = round(5.0 + 11_000 * 0.00001, 2)
    tax = round(11_000 * 0.0005, 2)
    [trip] = r.trades
    assert trip.pnl == pytest.approx(11_000 - sell_fee - tax - (10_000 + buy_fee))
    assert r.equity[-1] == pytest.approx(100_000 + trip.pnl)
    assert r.metrics["win_rate_pct"] == 100.0


def test_limit_up_day_blocks_a_buy():
    up = round(10.0 * 1.10, 2)
    p = panel_of({"600000": [(10.0, 10.0, 10.0, 10.0), (up, up, up, up), (11.5, 11.8, 11.2, 11.6)]})
    entries = np.array([[True, False, False]])  # signal at day 0's close → buy at day 1's open (locked)
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=entries, limits=np.array([0.10]))
    assert r.blocked[0]["reason"].startswith("limit-locked")
    assert r.fills[0]["date"] == "2024-01-03"  # pending, filled on the next bar (test_markets_limits)
    # the same bars on a market without limits fill
    r2 = run(p, rules=MarketRules.crypto(), cfg=NO_EXITS, entries=entries)
    assert r2.fills[0]["price"] == up


def test_limit_down_day_blocks_a_sell_and_chinext_limit_is_20pct():
    down = round(10.0 * 0.80, 2)
    p = panel_of(
        {
            "300001": [
                (10.0, 10.1, 9.9, 10.0),
                (10.0, 10.1, 9.9, 10.0),
                (down, down, down, down),
                (8.2, 8.5, 8.0, 8.4),
            ]
        }
    )
    orders = [Order(0, "300001", "buy", quantity=100), Order(2, "300001", "sell"), Order(3, "300001", "sell")]
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, orders=orders, limits=np.array([0.20]))
    assert [b["reason"] for b in r.blocked] == ["limit-locked bar (limit-down)"]
    assert r.fills[-1]["date"] == "2024-01-04" and r.fills[-1]["side"] == "sell"
    assert limit_prices(10.0, 0.20) == (8.0, 12.0)


def test_t_plus_1_blocks_a_same_day_sell():
    p = panel_of({"600000": [(10.0, 10.2, 9.8, 10.0), (10.1, 10.3, 9.9, 10.2)]})
    orders = [
        Order(0, "600000", "buy", quantity=100),
        Order(0, "600000", "sell", at="close"),
        Order(1, "600000", "sell"),
    ]
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, orders=orders, limits=np.array([0.10]))
    assert r.blocked == [
        {"date": "2024-01-01", "symbol": "600000", "side": "sell", "reason": "T+1: bought today"}
    ]
    assert [f["date"] for f in r.fills if f["side"] == "sell"] == ["2024-01-02"]
    # crypto: same-day round trip allowed
    rc = run(
        panel_of({"X": [(10.0, 10.2, 9.8, 10.0), (10.1, 10.3, 9.9, 10.2)]}, "crypto"),
        rules=MarketRules.crypto(),
        cfg=NO_EXITS,
        orders=[Order(0, "X", "buy", quantity=1.5), Order(0, "X", "sell", at="close")],
    )
    assert rc.blocked == [] and len(rc.fills) == 2


def test_intraday_stop_fills_at_stop_or_gap_open():
    p = panel_of({"600000": [(10.0, 10.1, 9.9, 10.0), (10.0, 10.1, 9.2, 9.5), (9.5, 9.6, 9.4, 9.5)]})
    cfg = BacktestConfig(initial_cash=100_000, stop_pct=0.07, trail_after=None, max_hold=None)
    r = run(
        p,
        rules=MarketRules.cn(),
        cfg=cfg,
        orders=[Order(0, "600000", "buy", quantity=1_000)],
        limits=np.array([0.10]),
    )
    sell = next(f for f in r.fills if f["side"] == "sell")
    assert sell["date"] == "2024-01-02" and sell["price"] == 9.3  # 10.00 × 0.93
    # T+1 defers a stop hit on the entry day to the next bar, where it fills at the gap-down open
    p2 = panel_of({"600000": [(10.0, 10.1, 9.0, 9.2), (9.1, 9.2, 9.0, 9.1)]})
    r2 = run(
        p2,
        rules=MarketRules.cn(),
        cfg=cfg,
        orders=[Order(0, "600000", "buy", quantity=1_000)],
        limits=np.array([0.10]),
    )
    sell2 = next(f for f in r2.fills if f["side"] == "sell")
    assert sell2["date"] == "2024-01-02" and sell2["price"] == 9.1


def test_metrics_by_hand():
    dates = (np.datetime64("2024-01-01") + np.arange(5)).astype("datetime64[D]")
    eq = np.array([100.0, 110.0, 99.0, 121.0, 121.0])
    m = metrics(dates, eq, [], np.array([10.0, 10.5, 10.0, 11.0, 11.0]), 252)
    assert m["total_return_pct"] == 21.0
    assert m["max_drawdown_pct"] == -10.0  # 110 → 99
    assert m["benchmark_return_pct"] == 10.0 and m["excess_return_pct"] == 11.0
    assert m["cagr_pct"] == pytest.approx(((1.21 ** (365.25 / 4)) - 1) * 100, rel=1e-6)


def test_fee_model():
    f = Fees()
    assert f.cost("buy", 1_000) == (5.01, 0.0)  # 0.25 commission → 5 minimum, + 0.01 transfer
    assert f.cost("sell", 100_000) == (26.0, 50.0)
    assert MarketRules.cn().round_qty(250) == 200 and MarketRules.cn().round_qty(250, "sell", held=250) == 250
