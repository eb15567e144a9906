"""Money arithmetic: fees and stamp duty to the cent half-up (an exact x.xx5 rounds up), computed
from the decimal price and quantity, and cash balances without float drift. References are integer
arithmetic in cents, independent of the code under test."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from markets.backtest import BacktestConfig, Order, run
from markets.bars import Bars
from markets.panel import Panel
from markets.rules import Fees, MarketRules, money_sum, notional


def half_up(numer: int, denom: int) -> int:
    """round(numer / denom) half-up, for non-negative integers."""
    return (2 * numer + denom) // (2 * denom)


def ref_cost(side: str, qty: int, price_cents: int) -> tuple[int, int]:
    """(fee, tax) in cents for the default A-share fees: commission 2.5/10,000 (min 500 cents) +
    transfer 0.1/10,000, stamp duty 5/10,000 on sells, each total rounded half-up to the cent."""
    n = qty * price_cents  # notional in cents, exact
    # commission + transfer in units of 1/100,000 cent: 25·n and 1·n per 100,000
    commission = max(25 * n, 500 * 100_000)
    fee = half_up(commission + n, 100_000)
    tax = half_up(5 * n, 10_000) if side == "sell" else 0
    return fee, tax


def test_stamp_duty_of_exactly_half_a_cent_rounds_up():
    # 0.0005 × 10,010 = 5.005 exactly; the float product is 5.00499999… and used to round to 5.00
    assert Fees().cost("sell", 10_010)[1] == 5.01
    # commission + transfer = 7.505 + 0.3002 = 7.8052 → 7.81; a buy of 3,002 shares at 10.00
    assert Fees().cost("buy", notional(3_002, 10.0)) == (7.81, 0.0)
    # 12.35 × 900 = 11,115 exactly; 0.0005 × 11,115 = 5.5575 → 5.56; fee 5 (min) + 0.11115 → 5.11
    assert Fees().cost("sell", notional(900, 12.35)) == (5.11, 5.56)


@given(
    lots=st.integers(min_value=1, max_value=5_000),
    price_cents=st.integers(min_value=1, max_value=300_000),
    side=st.sampled_from(["buy", "sell"]),
)
def test_fees_equal_the_integer_cent_reference(lots, price_cents, side):
    qty = lots * 100
    fee, tax = Fees().cost(side, notional(qty, price_cents / 100))
    want_fee, want_tax = ref_cost(side, qty, price_cents)
    assert round(fee * 100) == want_fee and round(tax * 100) == want_tax


@given(amounts=st.lists(st.integers(min_value=-10_000_000, max_value=10_000_000), min_size=1, max_size=300))
def test_cash_sums_do_not_drift(amounts):
    cash = 1_000_000.0
    for a in amounts:
        cash = money_sum(cash, a / 100)
    assert round(cash * 100) == 100_000_000 + sum(amounts)
    assert cash == (100_000_000 + sum(amounts)) / 100  # the exact cent value, not a hair off it


def test_backtest_cash_equals_the_hand_ledger_to_the_cent():
    # many round trips at prices where fees land on half cents; the ledger is kept in integer cents
    rng = np.random.default_rng(7)
    T = 120
    closes = np.round(10 + np.cumsum(rng.normal(0, 0.05, T)), 2)
    opens = closes.copy()
    dates = (np.datetime64("2024-01-01") + np.arange(T)).astype("datetime64[D]")
    bars = Bars("600000", dates, opens, opens + 0.05, opens - 0.05, closes, np.full(T, 1e6))
    panel = Panel.from_bars({"600000": bars})
    qtys = [int(q) * 100 for q in rng.integers(1, 60, T // 2)]
    orders = []
    for k, q in enumerate(qtys):
        orders.append(Order(2 * k, "600000", "buy", quantity=q))
        orders.append(Order(2 * k + 1, "600000", "sell"))
    cfg = BacktestConfig(initial_cash=100_000, stop_pct=None, trail_after=None, max_hold=None)
    r = run(panel, rules=MarketRules.cn(), cfg=cfg, orders=orders)
    cash = 10_000_000
    for f in r.fills:
        pc = round(f["price"] * 100)
        fee, tax = ref_cost(f["side"], int(f["qty"]), pc)
        assert (round(f["fee"] * 100), round(f["tax"] * 100)) == (fee, tax)
        n = int(f["qty"]) * pc
        cash += -(n + fee + tax) if f["side"] == "buy" else n - fee - tax
    assert len(r.fills) == 2 * len(qtys)
    assert r.equity[-1] == cash / 100  # flat at the end: equity is cash, exactly


def test_crypto_buy_spends_all_but_the_last_size_step():
    rules = MarketRules.crypto(0.001)
    cash, price = 100_000.0, 63_123.45
    q = rules.max_affordable(cash, price)
    n = notional(q, price)
    fee, _ = rules.order_cost("buy", n)
    assert n + fee <= cash
    # one more size step would not fit: nothing but the last step (and the fee's cent) is left
    q2 = round(q + rules.qty_step, 9)
    n2 = notional(q2, price)
    assert n2 + rules.order_cost("buy", n2)[0] > cash
    assert cash - (n + fee) < price * rules.qty_step * 2 + 0.01
