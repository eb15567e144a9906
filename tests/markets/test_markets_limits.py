"""Price-limit handling: the exact limit tick from `rules.limit_prices`, blocked
orders kept pending and retried on the next bar, and the same rule in the backtester and the paper
broker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from markets_helpers import make_sessions

from markets.backtest import BacktestConfig, run
from markets.bars import Bars
from markets.broker import PaperBroker
from markets.data import MarketData
from markets.models import MarketPosition
from markets.panel import Panel
from markets.rules import MarketRules, at_limit, limit_block, limit_prices

MD = MarketData()
NO_EXITS = BacktestConfig(initial_cash=100_000, stop_pct=None, trail_after=None, max_hold=None)


def panel_of(rows: list[tuple[float, float, float, float]], sym: str = "600000") -> Panel:
    a = np.array(rows, dtype=float)
    dates = (np.datetime64("2024-01-01") + np.arange(len(a))).astype("datetime64[D]")
    return Panel.from_bars({sym: Bars(sym, dates, a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.full(len(a), 1e6))})


def test_002229_buy_and_hold_buys_the_next_day():
    # 2023-08-15 opened at 41.00; the limit-up was 41.09 (37.35 × 1.1): the open never touched it.
    p = MD.panel(["002229"])
    entries = np.zeros(p.shape, dtype=bool)
    entries[0, 0] = True
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=entries, limits=np.array([0.10]))
    assert r.blocked == []
    assert r.fills[0]["date"] == "2023-08-15" and r.fills[0]["price"] == 41.0


def test_at_limit_uses_the_exact_tick():
    assert limit_prices(37.35, 0.10) == (33.62, 41.09)
    assert not at_limit(41.00, 37.35, 0.10, "buy")
    assert at_limit(41.09, 37.35, 0.10, "buy")
    assert not at_limit(33.70, 37.35, 0.10, "sell")
    assert at_limit(33.62, 37.35, 0.10, "sell")


@given(
    prev=st.decimals(min_value="1.00", max_value="500.00", places=2),
    limit=st.sampled_from([0.05, 0.10, 0.20, 0.30]),
    ticks=st.integers(min_value=-3, max_value=3),
)
def test_at_limit_is_exactly_the_tick_property(prev, limit, ticks):
    pc = float(prev)
    down, up = limit_prices(pc, limit)
    price = round(up + ticks * 0.01, 2)
    assert at_limit(price, pc, limit, "buy") == (ticks >= 0)
    price = round(down + ticks * 0.01, 2)
    assert at_limit(price, pc, limit, "sell") == (ticks <= 0)


def test_a_blocked_buy_stays_pending_and_fills_on_the_next_bar():
    up = round(10.0 * 1.10, 2)
    p = panel_of([(10.0, 10.0, 10.0, 10.0), (up, up, up, up), (11.5, 11.8, 11.2, 11.6)])
    entries = np.array([[True, False, False]])
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=entries, limits=np.array([0.10]))
    assert r.blocked[0]["reason"].startswith("limit-locked") and r.blocked[0]["date"] == "2024-01-02"
    assert [(f["date"], f["side"], f["price"]) for f in r.fills] == [("2024-01-03", "buy", 11.5)]
    # configurable: without retries the order is dropped (the old behaviour)
    cfg = BacktestConfig(
        initial_cash=100_000, stop_pct=None, trail_after=None, max_hold=None, retry_blocked=False
    )
    r2 = run(p, rules=MarketRules.cn(), cfg=cfg, entries=entries, limits=np.array([0.10]))
    assert r2.fills == []


def test_an_exit_at_a_limit_down_open_is_retried_not_lost():
    down = round(10.0 * 0.90, 2)
    p = panel_of(
        [
            (10.0, 10.1, 9.9, 10.0),
            (10.0, 10.1, 9.9, 10.0),
            (10.0, 10.1, 9.9, 10.0),
            (down, 9.5, down, 9.4),  # opens at limit-down, trades above it later
            (9.3, 9.5, 9.2, 9.4),
            (9.4, 9.5, 9.3, 9.4),
        ]
    )
    entries = np.array([[True, False, False, False, False, False]])
    exits = np.array([[False, False, True, False, False, False]])
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=entries, exits=exits, limits=np.array([0.10]))
    assert [b["reason"] for b in r.blocked] == ["price at limit-down"]
    sells = [(f["date"], f["price"]) for f in r.fills if f["side"] == "sell"]
    assert sells == [("2024-01-05", 9.3)]


def test_an_opposite_signal_cancels_a_pending_order():
    up = round(10.0 * 1.10, 2)
    p = panel_of(
        [(10.0, 10.0, 10.0, 10.0), (up, up, up, up), (11.5, 11.8, 11.2, 11.6), (11.6, 11.7, 11.5, 11.6)]
    )
    entries = np.array([[True, False, False, False]])
    exits = np.array([[False, True, False, False]])  # the exit signal arrives while the buy waits
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=entries, exits=exits, limits=np.array([0.10]))
    assert r.fills == []


def test_limit_block_rule_is_shared():
    assert limit_block("sell", 43.51, 48.34, 48.8, 43.51, 0.10) == "price at limit-down"
    assert limit_block("buy", 43.51, 48.34, 48.8, 43.51, 0.10) is None
    assert limit_block("buy", 11.0, 10.0, 11.0, 11.0, 0.10) == "limit-locked bar (limit-up)"
    assert (
        limit_block("sell", 9.0, 10.0, 9.0, 9.0, 0.10, block_at_limit=False)
        == "limit-locked bar (limit-down)"
    )
    assert limit_block("sell", 9.0, 10.0, 9.9, 9.0, None) is None


@pytest.fixture
async def sessions(tmp_path):
    engine, factory = await make_sessions(tmp_path)
    yield factory
    await engine.dispose()


async def test_paper_broker_does_not_sell_at_a_limit_down_close(sessions):
    # 002190 closed at its limit-down 43.51 (prev 48.34) on 2025-09-03 without being one-price locked:
    # the backtester blocks a sell there, so the paper broker must too (the order waits for the next
    # bar's open, as the backtester's; tests/markets/test_markets_pending.py follows it).
    async with sessions() as s, s.begin():
        s.add(
            MarketPosition(user_id="u1", market="cn", symbol="002190", name="", quantity=500, avg_cost=40.0)
        )
    broker = PaperBroker(sessions, MD)
    r = await broker.submit("u1", "002190", "sell", 500, key="s-limit")
    assert r.status == "waiting" and r.trade["price"] is None and "limit-down" in r.trade["reason"]
    assert r.trade["price_as_of"] == "2025-09-03"  # the bar that blocked it
    # a buy at that close is fine (it is not at limit-up)
    b = await broker.submit("u1", "002190", "buy", 100, key="b-limit")
    assert b.status == "filled"


@given(
    moves=st.lists(
        st.tuples(st.integers(-10, 10), st.booleans()),  # (open move in %, one-price bar)
        min_size=2,
        max_size=12,
    )
)
def test_a_pending_buy_fills_at_the_first_open_off_the_limit_property(moves):
    # Build bars whose opens move by whole percents (±10 % = the limit) from the previous close;
    # a one-price bar sits at its open. The pending buy (signal at bar 0) must fill at the first
    # bar whose open is below the limit-up and which is not locked at it, and nowhere else.
    rows, prev = [(10.0, 10.0, 10.0, 10.0)], 10.0
    for pct, one_price in moves:
        o = round(prev * (1 + pct / 100) + 1e-9, 2)
        rows.append((o, o, o, o) if one_price else (o, round(o * 1.01, 2), round(o * 0.99, 2), o))
        prev = o
    p = panel_of(rows)
    entries = np.zeros((1, len(rows)), dtype=bool)
    entries[0, 0] = True
    r = run(p, rules=MarketRules.cn(), cfg=NO_EXITS, entries=entries, limits=np.array([0.10]))
    want = None
    for t in range(1, len(rows)):
        up = limit_prices(rows[t - 1][3], 0.10)[1]
        if rows[t][0] < up - 1e-9:
            want = t
            break
    buys = [f["date"] for f in r.fills if f["side"] == "buy"]
    assert buys == ([] if want is None else [str(p.dates[want])])
    assert len(r.blocked) == (len(rows) - 1 if want is None else want - 1)
