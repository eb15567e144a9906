"""An in-house daily backtester that knows A-share rules (and crypto's).

Timing (no look-ahead): signals are read at the close of day t and executed at the open of day t + 1;
entries known before the open (buy-and-hold, `enter_same_bar`) fill at their own bar's open.
Stops are intraday: when a bar's low reaches the stop, the position is sold at min(open, stop).
Explicit orders (`Order`) may also fill at a day's open or close; the tests use them.

Rules (markets.rules.MarketRules): A-share buys in lots of 100; T+1 (a position bought on day d
cannot be sold on day d — a stop hit that day waits for the next bar); the price limit at the exact
0.01 tick (`rules.limit_block`, shared with the paper broker): no fill on a bar locked at the limit
(high == low at the limit), and by default no buy when the open is at limit-up and no sell when it is
at limit-down. A blocked order is not dropped: it stays pending and is tried again at the next bar's
open until it fills or the opposite signal cancels it (`BacktestConfig.retry_blocked`, default on);
commission 0.025 % (min 5 CNY) + 0.001 % transfer fee per order and 0.05 %
stamp duty on sells, each to the cent half-up in decimal, and cash kept in decimal steps. Crypto: fractional sizes, same-day round trips, a flat fee, no limits.

Results: equity curve, total return, CAGR (calendar days), max drawdown, Sharpe (daily returns,
rf = 0, annualised with 252 or 365 days), win rate and the list of round trips, blocked orders,
rejected orders (a zero quantity, no cash for a lot: each with its reason, never silent), and a
comparison with the benchmark (CSI 300 for A-shares).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from markets.bars import Bars
from markets.panel import Panel
from markets.rules import MarketRules, Side, limit_block, money_sum, notional

ProgressCb = Callable[[str, str, float | None], None]
Outcome = Literal["filled", "blocked", "t+1", "rejected"]  # blocked: price limit or no bar → retried


@dataclass(frozen=True, slots=True)
class Order:
    day: int  # index into the panel's dates
    symbol: str
    side: Literal["buy", "sell"]
    quantity: float | None = None  # None: buy with `value` / sell everything
    value: float | None = None  # buy for this much cash (fees included)
    at: Literal["open", "close"] = "open"
    reason: str = ""


@dataclass
class BacktestConfig:
    initial_cash: float = 1_000_000.0
    max_positions: int = 10
    position_pct: float = 0.10  # of equity per new position
    stop_pct: float | None = 0.07
    trail_after: float | None = 0.15
    trail_pct: float = 0.10
    max_hold: int | None = 60  # bars
    block_limit_open: bool = True  # no buy when the open is at limit-up (sell: at limit-down)
    retry_blocked: bool = True  # an order blocked by a price limit (or a missing bar) waits for the next bar
    start: int = 0  # first day index that may trade (warm-up before it)
    # Entries known before the open (buy-and-hold) fill at the open of their own bar, so a start on
    # the data's first bar buys on that bar; other entries are read at a close and fill next open.
    enter_same_bar: bool = False
    # Split the day's buys equally (position_pct of equity each) but give a stock whose one lot costs
    # more than that share one lot when the cash allows, so every stock is bought; those no cash can
    # reach are reported in `rejected`.
    equal_weight: bool = False


@dataclass
class RoundTrip:
    symbol: str
    entry_date: str
    entry_price: float
    exit_date: str | None
    exit_price: float | None
    quantity: float
    pnl: float | None
    pnl_pct: float | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        for k in ("entry_price", "exit_price", "pnl"):
            if d[k] is not None:
                d[k] = round(d[k], 4)
        if d["pnl_pct"] is not None:
            d["pnl_pct"] = round(d["pnl_pct"] * 100, 2)
        return d


@dataclass
class BacktestResult:
    dates: np.ndarray
    equity: np.ndarray
    trades: list[RoundTrip]
    fills: list[dict[str, Any]]
    blocked: list[dict[str, Any]]
    metrics: dict[str, Any]
    rejected: list[dict[str, Any]] = field(default_factory=list)  # never filled: zero size, no cash
    benchmark: np.ndarray | None = None
    bars_processed: int = 0
    start: int = 0  # first day the metrics cover (earlier bars only warm up the signals)
    initial_cash: float | None = None

    def curves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(dates, equity, benchmark) exactly as the metrics measure them: from the initial cash held
        the day before `start` (the day before the first bar when start is 0) to the end."""
        s, init = self.start, self.initial_cash
        bench = self.benchmark
        if init is None:
            return self.dates[s:], self.equity[s:], None if bench is None else bench[s:]
        eq = np.concatenate([[init], self.equity[s:]])
        if s > 0:
            return self.dates[s - 1 :], eq, None if bench is None else bench[s - 1 :]
        dates = np.concatenate([[self.dates[0] - np.timedelta64(1, "D")], self.dates])
        return dates, eq, None if bench is None else np.concatenate([[np.nan], bench])

    def summary(self, max_trades: int = 20) -> dict[str, Any]:
        n = len(self.dates)
        return {
            "start": str(self.dates[self.start]) if n > self.start else None,
            "end": str(self.dates[-1]) if n else None,
            "warmup_from": str(self.dates[0]) if n and self.start > 0 else None,
            "metrics": self.metrics,
            "trades": [t.to_dict() for t in self.trades[-max_trades:]],
            "trades_total": len(self.trades),
            "blocked_orders": len(self.blocked),
            "blocked_examples": self.blocked[:5],
            "rejected_orders": len(self.rejected),
            "rejected_examples": self.rejected[:10],
        }


@dataclass
class _Pos:
    qty: float
    cost: float  # total cost incl. buy fees
    entry_day: int
    entry_price: float
    high: float
    trip: RoundTrip


@dataclass
class _Book:
    panel: Panel
    rules: MarketRules
    cfg: BacktestConfig
    limits: np.ndarray  # limit fraction per symbol, or per [symbol, day] (ST by date); NaN: none
    cash: float = 0.0
    pos: dict[int, _Pos] = field(default_factory=dict)
    trips: list[RoundTrip] = field(default_factory=list)
    fills: list[dict[str, Any]] = field(default_factory=list)
    blocked: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def reject(self, i: int, t: int, side: Side, reason: str) -> Outcome:
        self.rejected.append(
            {
                "date": str(self.panel.dates[t]),
                "symbol": self.panel.symbols[i],
                "side": side,
                "reason": reason,
            }
        )
        return "rejected"

    def _limit(self, i: int, t: int) -> float | None:
        v = self.limits[i, t] if self.limits.ndim == 2 else self.limits[i]
        return None if np.isnan(v) else float(v)

    def _prev_close(self, i: int, t: int) -> float:
        c = self.panel.close[i, :t]
        ok = c[~np.isnan(c)]
        return float(ok[-1]) if len(ok) else float("nan")

    def _block(self, i: int, t: int, side: Side, price: float) -> str | None:
        P = self.panel
        if np.isnan(P.close[i, t]):
            return "no bar (suspended or not listed)"
        return limit_block(
            side,
            price,
            self._prev_close(i, t),
            float(P.high[i, t]),
            float(P.low[i, t]),
            self._limit(i, t),
            block_at_limit=self.cfg.block_limit_open,
        )

    def equity(self, t: int) -> float:
        P = self.panel
        v = self.cash
        for i, p in self.pos.items():
            c = P.close[i, t]
            v += p.qty * (c if not np.isnan(c) else self._prev_close(i, t))
        return v

    def buy(
        self, i: int, t: int, price: float, qty: float | None, value: float | None, reason: str
    ) -> Outcome:
        sym = self.panel.symbols[i]
        why = self._block(i, t, "buy", price)
        if why:
            self.blocked.append(
                {"date": str(self.panel.dates[t]), "symbol": sym, "side": "buy", "reason": why}
            )
            return "blocked"
        if qty is None:
            budget = min(value or self.cash, self.cash)
            qty = self.rules.max_affordable(budget, price)
            if qty <= 0:
                unit = self.rules.lot or self.rules.qty_step
                return self.reject(
                    i, t, "buy", f"zero quantity: {budget:,.2f} buys no {unit:g} at {price:g} with fees"
                )
        else:
            want, qty = qty, self.rules.round_qty(qty)
            if qty <= 0:
                return self.reject(i, t, "buy", f"zero quantity: {want:g} rounds to no whole lot")
        value = notional(qty, price)
        fee, tax = self.rules.order_cost("buy", value)
        cost = money_sum(value, fee, tax)
        if cost > self.cash:
            return self.reject(i, t, "buy", f"insufficient cash: need {cost:,.2f}, have {self.cash:,.2f}")
        self.cash = money_sum(self.cash, -cost)
        if i in self.pos:
            p = self.pos[i]
            p.qty += qty
            p.cost = money_sum(p.cost, cost)
        else:
            trip = RoundTrip(sym, str(self.panel.dates[t]), price, None, None, qty, None, None, reason)
            self.pos[i] = _Pos(qty, cost, t, price, price, trip)
            self.trips.append(trip)
        self.fills.append(
            {
                "date": str(self.panel.dates[t]),
                "symbol": sym,
                "side": "buy",
                "qty": qty,
                "price": price,
                "fee": fee,
                "tax": tax,
            }
        )
        return "filled"

    def sell(self, i: int, t: int, price: float, qty: float | None, reason: str) -> Outcome:
        p = self.pos.get(i)
        if p is None:
            return "rejected"
        sym = self.panel.symbols[i]
        if self.rules.t_plus_1 and p.entry_day == t:
            self.blocked.append(
                {
                    "date": str(self.panel.dates[t]),
                    "symbol": sym,
                    "side": "sell",
                    "reason": "T+1: bought today",
                }
            )
            return "t+1"
        why = self._block(i, t, "sell", price)
        if why:
            self.blocked.append(
                {"date": str(self.panel.dates[t]), "symbol": sym, "side": "sell", "reason": why}
            )
            return "blocked"
        want = qty
        qty = p.qty if qty is None or qty >= p.qty else self.rules.round_qty(qty, "sell", p.qty)
        if qty <= 0:
            return self.reject(i, t, "sell", f"zero quantity: {want:g} rounds to no whole lot")
        value = notional(qty, price)
        fee, tax = self.rules.order_cost("sell", value)
        proceeds = money_sum(value, -fee, -tax)
        self.cash = money_sum(self.cash, proceeds)
        share = qty / p.qty
        cost_part = p.cost * share
        self.fills.append(
            {
                "date": str(self.panel.dates[t]),
                "symbol": sym,
                "side": "sell",
                "qty": qty,
                "price": price,
                "fee": fee,
                "tax": tax,
            }
        )
        if qty >= p.qty - 1e-12:
            tr = p.trip
            tr.exit_date, tr.exit_price = str(self.panel.dates[t]), price
            tr.pnl = money_sum(proceeds, -p.cost)
            tr.pnl_pct = tr.pnl / p.cost if p.cost else None
            tr.reason = f"{tr.reason} → {reason}".strip(" →")
            del self.pos[i]
        else:
            p.qty -= qty
            p.cost -= cost_part
        return "filled"


def run(
    panel: Panel,
    *,
    rules: MarketRules,
    cfg: BacktestConfig | None = None,
    entries: np.ndarray | None = None,
    exits: np.ndarray | None = None,
    orders: list[Order] | None = None,
    limits: np.ndarray | None = None,
    benchmark: Bars | None = None,
    progress: ProgressCb | None = None,
) -> BacktestResult:
    """Run a backtest from signal masks ([symbol, day] booleans read at the close) and/or explicit orders."""
    cfg = cfg or BacktestConfig()
    n, T = panel.shape
    lim = np.full(n, np.nan) if limits is None or not rules.limits else np.asarray(limits, dtype=float)
    book = _Book(panel, rules, cfg, lim, cash=cfg.initial_cash)
    by_day: dict[int, list[Order]] = {}
    for o in orders or []:
        by_day.setdefault(o.day, []).append(o)
    sym_index = {s: i for i, s in enumerate(panel.symbols)}
    equity = np.full(T, np.nan)
    P = panel
    processed = 0
    # Orders blocked by a price limit or a missing bar stay pending (cfg.retry_blocked) and are
    # tried again at the next bar's open, until they fill or the opposite signal cancels them.
    pend_sell: dict[int, str] = {}
    pend_buy: dict[int, str] = {}
    for t in range(T):
        if t >= cfg.start:
            # 1) yesterday's signals at today's open: exits first, then entries in signal order
            if t > 0:
                if entries is not None:
                    pend_sell = {i: r for i, r in pend_sell.items() if not entries[i, t - 1]}
                if exits is not None:
                    pend_buy = {i: r for i, r in pend_buy.items() if not exits[i, t - 1]}
                    for i in book.pos:
                        if exits[i, t - 1]:
                            pend_sell.setdefault(i, "exit signal")
                if cfg.max_hold:
                    for i, p in book.pos.items():
                        if t - p.entry_day >= cfg.max_hold:
                            pend_sell.setdefault(i, f"held {cfg.max_hold} bars")
                for i, why in list(pend_sell.items()):
                    if i not in book.pos:
                        del pend_sell[i]
                        continue
                    got: Outcome = "blocked"
                    if not np.isnan(P.open[i, t]):
                        got = book.sell(i, t, float(P.open[i, t]), None, why)
                    if got == "filled" or (got == "blocked" and not cfg.retry_blocked) or got == "rejected":
                        del pend_sell[i]
            day = t if cfg.enter_same_bar else t - 1  # the bar whose entries fill at this open
            if entries is not None and day >= 0:
                for ci in np.flatnonzero(entries[:, day]):
                    i = int(ci)
                    if i not in book.pos and i not in pend_sell:
                        pend_buy.setdefault(i, "entry signal")
            if pend_buy:
                eq = book.equity(t - 1) if t > 0 else book.cash
                budgets = _equal_budgets(book, pend_buy, t, eq * cfg.position_pct) if cfg.equal_weight else {}
                for i, why in list(pend_buy.items()):
                    if i in book.pos:
                        del pend_buy[i]
                        continue
                    if len(book.pos) >= cfg.max_positions:
                        del pend_buy[i]
                        continue
                    got = "blocked"
                    if not np.isnan(P.open[i, t]):
                        budget = budgets.get(i, eq * cfg.position_pct)
                        got = book.buy(i, t, float(P.open[i, t]), None, budget, why)
                    if got != "blocked" or not cfg.retry_blocked:
                        del pend_buy[i]
            for o in by_day.get(t, []):
                if o.at == "open":
                    _explicit(book, sym_index[o.symbol], t, o, float(P.open[sym_index[o.symbol], t]), by_day)
            # 2) intraday stops
            for i in list(book.pos):
                p = book.pos[i]
                lo, op = P.low[i, t], P.open[i, t]
                if np.isnan(lo):
                    continue
                stop = -math.inf
                if cfg.stop_pct is not None:
                    stop = p.entry_price * (1 - cfg.stop_pct)
                if cfg.trail_after is not None and p.high >= p.entry_price * (1 + cfg.trail_after):
                    stop = max(stop, p.high * (1 - cfg.trail_pct))
                if lo <= stop:
                    fill = min(op, stop)
                    got = book.sell(i, t, round(fill, 2) if rules.lot else float(fill), None, "stop")
                    if got == "blocked" and cfg.retry_blocked:
                        pend_sell.setdefault(i, "stop")
                if i in book.pos:
                    book.pos[i].high = max(book.pos[i].high, float(P.close[i, t]))
            for o in by_day.get(t, []):
                if o.at == "close":
                    _explicit(book, sym_index[o.symbol], t, o, float(P.close[sym_index[o.symbol], t]), by_day)
        equity[t] = book.equity(t)
        processed += int(np.count_nonzero(~np.isnan(P.close[:, t])))
        if progress and t % 50 == 0:
            progress("backtest", f"{P.dates[t]}", round(100 * t / max(1, T - 1), 1))
    bench = _align(benchmark, P.dates) if benchmark is not None else None
    return BacktestResult(
        P.dates,
        equity,
        book.trips,
        book.fills,
        book.blocked,
        metrics(
            P.dates,
            equity,
            book.trips,
            bench,
            365 if rules.market == "crypto" else 252,
            cfg.start,
            cfg.initial_cash,
        ),
        book.rejected,
        bench,
        processed,
        cfg.start,
        cfg.initial_cash,
    )


def _equal_budgets(book: _Book, pending: dict[int, str], t: int, share: float) -> dict[int, float]:
    """Cash per stock for the day's equal-weight buys. Each gets `share` (or an equal part of the
    cash when that is less); a stock whose one lot costs more gets exactly one lot, paid from the
    others' shares; when one lot of each cannot be paid for, the dearest are left out (rejected,
    with the reason) until the rest fit."""
    rules, P = book.rules, book.panel
    unit: dict[int, float] = {}
    for i in pending:
        price = float(P.open[i, t])
        if i in book.pos or np.isnan(price) or book._block(i, t, "buy", price):
            continue  # held, or left to the buy itself to block and retry
        n = notional(rules.lot, price) if rules.lot else 0.0
        unit[i] = money_sum(n, *rules.order_cost("buy", n)) if n else 0.0
    rest = sorted(unit, key=lambda i: unit[i])
    cash = book.cash
    while rest and sum(unit[i] for i in rest) > cash:
        i = rest.pop()
        book.reject(
            i,
            t,
            "buy",
            f"unaffordable: one lot costs {unit[i]:,.2f} with fees, and {cash:,.2f} cash cannot "
            "buy a lot of every stock",
        )
        del pending[i]
    out: dict[int, float] = {}
    pool = cash
    while rest:
        each = min(share, pool / len(rest))
        dear = [i for i in rest if unit[i] > each]
        if not dear:
            out.update(dict.fromkeys(rest, each))
            break
        for i in dear:
            out[i] = unit[i]
            pool -= unit[i]
            rest.remove(i)
    return out


def _explicit(book: _Book, i: int, t: int, o: Order, price: float, by_day: dict[int, list[Order]]) -> None:
    if o.side == "buy":
        got = book.buy(i, t, price, o.quantity, o.value, o.reason or "order")
    else:
        got = book.sell(i, t, price, o.quantity, o.reason or "order")
    if got == "blocked" and book.cfg.retry_blocked:  # pending: the next bar's open
        by_day.setdefault(t + 1, []).append(replace(o, day=t + 1, at="open"))


def _align(b: Bars, dates: np.ndarray) -> np.ndarray:
    out = np.full(len(dates), np.nan)
    pos = np.searchsorted(b.dates, dates, side="right") - 1  # last index bar on or before each date
    ok = pos >= 0
    out[ok] = b.close[pos[ok]]
    return out


def metrics(
    dates: np.ndarray,
    equity: np.ndarray,
    trips: list[RoundTrip],
    bench: np.ndarray | None,
    periods: int = 252,
    start: int = 0,
    initial: float | None = None,
) -> dict[str, Any]:
    """Performance figures from `start` on. With `initial`, the curve is measured from that cash
    (held the day before `start`), so the first day's fees count."""
    eq = equity[start:]
    d = dates[start:]
    if initial is not None:
        eq = np.concatenate([[initial], eq])
        d = np.concatenate([[d[0] - np.timedelta64(1, "D")], d])
    if len(eq) < 2:
        return {}
    total = eq[-1] / eq[0] - 1
    days = max(1, int((d[-1] - d[0]).astype(int)))
    cagr = float((eq[-1] / eq[0]) ** (365.25 / days) - 1) if eq[-1] > 0 else -1.0
    total = float(total)
    peak = np.maximum.accumulate(eq)
    mdd = float(np.min(eq / peak - 1))
    r = np.diff(eq) / eq[:-1]
    sharpe = (
        float(np.mean(r) / np.std(r, ddof=1) * math.sqrt(periods)) if len(r) > 2 and np.std(r) > 0 else 0.0
    )
    closed = [t for t in trips if t.pnl is not None]
    wins = [t for t in closed if (t.pnl or 0) > 0]
    out: dict[str, Any] = {
        "initial_equity": round(float(eq[0]), 2),
        "final_equity": round(float(eq[-1]), 2),
        "total_return_pct": round(total * 100, 2),
        "cagr_pct": round(cagr * 100, 2),
        "max_drawdown_pct": round(mdd * 100, 2),
        "sharpe": round(sharpe, 2),
        "trades": len(trips),
        "closed_trades": len(closed),
        "open_positions": len(trips) - len(closed),
        "win_rate_pct": round(100 * len(wins) / len(closed), 1) if closed else None,
    }
    if bench is not None:
        b = bench[max(0, start - 1) :] if initial is not None and start > 0 else bench[start:]
        ok = ~np.isnan(b)
        if ok.sum() >= 2:
            bt = float(b[ok][-1] / b[ok][0] - 1)
            out["benchmark_return_pct"] = round(bt * 100, 2)
            out["excess_return_pct"] = round((total - bt) * 100, 2)
            bp = np.maximum.accumulate(b[ok])
            out["benchmark_max_drawdown_pct"] = round(float(np.min(b[ok] / bp - 1)) * 100, 2)
    return out
