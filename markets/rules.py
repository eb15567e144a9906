"""Trading rules and fees per market, shared by the backtester and the paper broker.

A-shares: T+1 (shares bought today can be sold from the next trading day), buys in lots of 100
(a sell may include an odd lot only when it closes the whole position), daily price limits by board
(±10 % main, ±20 % ChiNext/STAR, ±5 % ST, ±30 % BJ) at the exact 0.01 tick (`limit_prices`) with
no fill on a limit-locked bar and no buy at limit-up / sell at limit-down (`limit_block`), commission
0.025 % with a 5 CNY minimum per order, stamp duty 0.05 % on sells (since 2023-08-28), transfer fee
0.001 % (SH and SZ since 2022). Crypto: fractional sizes, no limits, same-day round trips, a flat
taker fee (default 0.1 %).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Side = Literal["buy", "sell"]


@dataclass(frozen=True, slots=True)
class Fees:
    commission: float = 0.00025
    commission_min: float = 5.0
    stamp_duty_sell: float = 0.0005
    transfer: float = 0.00001

    def cost(self, side: Side, notional: float) -> tuple[float, float]:
        """(commission + transfer fee, stamp duty) for one order of `notional` value."""
        if notional <= 0:
            return 0.0, 0.0
        fee = max(self.commission * notional, self.commission_min) + self.transfer * notional
        tax = self.stamp_duty_sell * notional if side == "sell" else 0.0
        return round(fee, 2), round(tax, 2)


@dataclass(frozen=True, slots=True)
class MarketRules:
    market: Literal["cn", "crypto"] = "cn"
    lot: float = 100.0  # 0 means fractional sizes
    t_plus_1: bool = True
    limits: bool = True
    fees: Fees = Fees()
    crypto_fee: float = 0.001
    qty_step: float = 1e-6  # crypto size precision

    @classmethod
    def cn(cls, fees: Fees | None = None) -> MarketRules:
        return cls("cn", 100.0, True, True, fees or Fees())

    @classmethod
    def crypto(cls, fee: float = 0.001) -> MarketRules:
        return cls("crypto", 0.0, False, False, Fees(fee, 0.0, 0.0, 0.0), fee)

    def order_cost(self, side: Side, notional: float) -> tuple[float, float]:
        return self.fees.cost(side, notional)

    def round_qty(self, qty: float, side: Side = "buy", held: float | None = None) -> float:
        """Round a wanted quantity to what can be traded: whole lots (a sell of the full holding may
        include an odd lot) or the crypto size step."""
        if self.lot <= 0:
            return math.floor(qty / self.qty_step) * self.qty_step
        if side == "sell" and held is not None and qty >= held:
            return float(held)
        return math.floor(qty / self.lot + 1e-9) * self.lot

    def max_affordable(self, cash: float, price: float) -> float:
        """Largest buy quantity whose value plus fees fits in `cash`."""
        if price <= 0 or cash <= 0:
            return 0.0
        qty = self.round_qty(cash / price)
        while qty > 0:
            fee, tax = self.order_cost("buy", qty * price)
            if qty * price + fee + tax <= cash + 1e-9:
                return qty
            qty = self.round_qty(qty - (self.lot or qty * 0.001))
        return 0.0


def limit_prices(prev_close: float, limit: float | None) -> tuple[float, float]:
    """(limit-down, limit-up) prices rounded to the 0.01 tick."""
    if limit is None or not prev_close or prev_close != prev_close:
        return -math.inf, math.inf
    return round(prev_close * (1 - limit) + 1e-9, 2), round(prev_close * (1 + limit) + 1e-9, 2)


def at_limit(price: float, prev_close: float, limit: float | None, side: Side) -> bool:
    """Whether `price` sits at (or beyond) the exact limit tick: limit-up for a buy, limit-down for a
    sell. No tolerance: an open one tick inside the limit traded away from it and can be filled."""
    if limit is None or not prev_close or prev_close != prev_close:
        return False
    down, up = limit_prices(prev_close, limit)
    return price >= up - 1e-9 if side == "buy" else price <= down + 1e-9


def limit_block(
    side: Side,
    price: float,
    prev_close: float,
    high: float,
    low: float,
    limit: float | None,
    *,
    block_at_limit: bool = True,
) -> str | None:
    """Why an order at `price` on a bar (high, low) cannot fill under the daily price limit, or None.

    One rule for the backtester and the paper broker: no fill on a one-price bar locked at the limit
    on the order's side, and (with `block_at_limit`) no buy at limit-up / sell at limit-down — at
    the limit the queue on the other side is rarely reached."""
    if limit is None:
        return None
    word = "limit-up" if side == "buy" else "limit-down"
    if high == low and at_limit(high, prev_close, limit, side):
        return f"limit-locked bar ({word})"
    if block_at_limit and at_limit(price, prev_close, limit, side):
        return f"price at {word}"
    return None
