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
from decimal import ROUND_HALF_UP, Decimal
from typing import Literal

Side = Literal["buy", "sell"]
CENT = Decimal("0.01")


def dec(x: float | int | Decimal) -> Decimal:
    """The decimal a float stands for: its shortest repr (12.35, not 12.3499999…), so a price
    or rate read from storage is the number that was written."""
    return x if isinstance(x, Decimal) else Decimal(repr(float(x)))


def cents(x: Decimal) -> float:
    """Money to the cent, half-up as brokers round (0.125 → 0.13)."""
    return float(x.quantize(CENT, rounding=ROUND_HALF_UP))


def notional(qty: float, price: float) -> float:
    """qty × price computed in decimal: the float product can land a hair under x.xx5 and turn a
    fee's half-up into a round-down."""
    return float(dec(qty) * dec(price))


def money_sum(*xs: float) -> float:
    """A cash balance after adding amounts, in decimal: repeated float additions drift by fractions
    of a cent that a later comparison or rounding can turn into a whole cent."""
    return float(sum((dec(x) for x in xs), Decimal(0)))


@dataclass(frozen=True, slots=True)
class Fees:
    commission: float = 0.00025
    commission_min: float = 5.0
    stamp_duty_sell: float = 0.0005
    transfer: float = 0.00001

    def cost(self, side: Side, notional: float) -> tuple[float, float]:
        """(commission + transfer fee, stamp duty) for one order of `notional` value, each to the
        cent half-up, computed in decimal (pass `notional(qty, price)` for an exact notional)."""
        if notional <= 0:
            return 0.0, 0.0
        n = dec(notional)
        fee = max(dec(self.commission) * n, dec(self.commission_min)) + dec(self.transfer) * n
        tax = dec(self.stamp_duty_sell) * n if side == "sell" else Decimal(0)
        return cents(fee), cents(tax)


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
            return round(math.floor(qty / self.qty_step + 1e-9) * self.qty_step, 9)
        if side == "sell" and held is not None and qty >= held:
            return float(held)
        return math.floor(qty / self.lot + 1e-9) * self.lot

    def max_affordable(self, cash: float, price: float) -> float:
        """Largest buy quantity whose value plus fees fits in `cash`. Fractional sizes start from
        cash / (price × (1 + fee rate)), so a crypto buy spends all but the last size step."""
        if price <= 0 or cash <= 0:
            return 0.0
        if self.lot <= 0:
            rate = dec(self.fees.commission) + dec(self.fees.transfer)
            qty = self.round_qty(float(dec(cash) / (dec(price) * (1 + rate))))
        else:
            qty = self.round_qty(cash / price)
        while qty > 0:
            n = notional(qty, price)
            fee, tax = self.order_cost("buy", n)
            over = money_sum(n, fee, tax, -cash)
            if over <= 0:
                return qty
            if self.lot:
                qty = self.round_qty(qty - self.lot)
            else:  # fee rounding: step down by as many size steps as the excess needs
                qty = round(qty - max(1, math.ceil(over / price / self.qty_step)) * self.qty_step, 9)
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
