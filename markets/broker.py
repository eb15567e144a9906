"""Brokers: the paper broker (default) and a ccxt live broker that exists only behind `live = true`.

Idempotency. Every order carries a key (for chat trades it is derived from the approved tool call, so
a replayed or double-tapped approval reuses it). The key is reserved first — a `pending` trade row
under a UNIQUE constraint — and only then is the order executed:
- the same key again returns the first outcome and never fills twice;
- paper fills update cash, position and the trade's status in ONE transaction, so a crash leaves a
  `pending` row with nothing applied; the same key asked again (the approved call resumed after
  the crash) fills it then, once — the fill claims the row under a lock — and `reconcile` marks
  such rows `rejected` (not filled) instead where nobody asks again;
- a live order whose request may have reached the exchange without a confirmed answer is marked
  `unknown`; `reconcile` asks the exchange by client order id and records what really happened. It
  is never blindly retried.

The paper broker fills at the last bar's close ("as of" the dataset, stated on every fill) with the
market's rules: lots of 100 for A-share buys, T+1 on the wall-clock trading calendar (shares bought in
today's session — the injected clock's date at the exchange before the 15:00 close, else the next
trading day — can be sold from the next session, even while the bars stay frozen), the
backtester's price-limit rule (`rules.limit_block`: no fill on a limit-locked bar, no buy at a
limit-up close, no sell at a limit-down close), commission/stamp duty, cash and holdings checks.

Orders blocked by a price limit wait, as the backtester's (`MarketSettings.retry_blocked`, on by
default; off: rejected, to be placed again). A blocked order that passes the other checks is stored
with status `waiting` ("pending: blocked at limit-up, will retry at the next bar's open"); nothing is
reserved while it waits. Whenever the data has a bar newer than the one that blocked it — checked on
every paper-broker call (`submit`, and the portfolio tools call `retry_waiting`) and by the daily
traders job — it is retried at the open of the first newer bar `limit_block` lets through, with
every check again at that moment (lots, cash, holdings, T+1 in the wall-clock session): filled,
rejected with the reason, or still waiting as of the newest bar. A retry claims the row with a
compare-and-set on (status, bar last seen) inside the transaction that applies it, so concurrent or
repeated retries, and restarts, fill it at most once. `cancel` withdraws a waiting order.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal

import numpy as np
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import is_storage_failure
from markets.bars import Bars
from markets.data import MarketData
from markets.errors import IdempotencyConflict, MarketError, OrderNotFound, TradeRejected
from markets.models import MarketTrade, SessionFactory
from markets.portfolio import Portfolio, trade_dict
from markets.rules import MarketRules, Side, limit_block, money_sum, notional
from markets.settings import MarketSettings
from markets.symbols import Instrument
from memory.db import rowcount

log = logging.getLogger(__name__)


_PROCESS_STARTED = datetime.now(UTC)  # this module loads before any order of this process
RESUMED = "resumed after a restart: filling now"  # a claimed reservation, until its fill


def _before_this_process(trade: MarketTrade) -> bool:
    made = trade.created_at
    if made is None:
        return False
    if made.tzinfo is None:
        made = made.replace(tzinfo=UTC)
    return made < _PROCESS_STARTED


class _Settled(Exception):
    """The trade row a fill was about to claim is settled already (by another call with the same
    key, or by `reconcile`): its outcome is the answer."""

    def __init__(self, trade: dict[str, Any]):
        super().__init__(trade.get("status"))
        self.trade = trade


async def _ledger_row(
    s: AsyncSession, trade_id: int, *, refresh: bool = False, lock: bool = False
) -> MarketTrade:
    """A trade row this call reserved or claimed. Rows are never deleted, so a missing one means
    the ledger was changed underneath: stop with a clear error rather than guess. `lock`: the row
    is locked for the transaction (PostgreSQL; SQLite's write transactions are serial already)."""
    t = await s.get(MarketTrade, trade_id, populate_existing=refresh, with_for_update=lock or None)
    if t is None:
        raise MarketError(f"order #{trade_id} is missing from the trade ledger")
    return t


@dataclass(frozen=True, slots=True)
class TradeResult:
    trade: dict[str, Any]
    replayed: bool = False  # the key was seen before: this is the earlier outcome, nothing new happened
    updates: tuple[dict[str, Any], ...] = ()  # waiting orders this call filled, rejected or re-dated

    @property
    def status(self) -> str:
        status: str = self.trade["status"]
        return status

    def to_dict(self) -> dict[str, Any]:
        out = {**self.trade, "replayed": self.replayed}
        if self.updates:
            out["order_updates"] = list(self.updates)
        return out


ProblemKind = Literal["quantity", "lot_buy", "cash", "t_plus_1", "holding", "lot_sell", "limit"]


@dataclass(frozen=True, slots=True)
class OrderProblem:
    """Why an order will not fill now: `kind` and its figures for a caller that words it in the
    user's language (an approval card), `text` as the ledger records it. A "limit" problem is a
    rejection only when `waits` is False; otherwise the order waits at the limit and is retried."""

    kind: ProblemKind
    text: str
    figures: dict[str, Any]
    waits: bool = False


@dataclass(frozen=True, slots=True)
class _Order:
    """One order as it is checked and filled: whose, what, which way, how much, at what price, in
    which session, under which market's rules."""

    rules: MarketRules
    user_id: str
    inst: Instrument
    market: str
    side: Side
    qty: float
    price: float
    day: date


def rules_for(market: str, settings: MarketSettings) -> MarketRules:
    if market == "crypto":
        return MarketRules.crypto(settings.crypto_fee)
    from markets.rules import Fees

    return MarketRules.cn(Fees(settings.commission, settings.commission_min, settings.stamp_duty_sell))


class PaperBroker:
    venue = "paper"
    # a `pending` row is a reservation whose fill never ran (fills are one transaction): the same
    # key asked again fills it. Never for a live order, whose request may have reached the venue.
    refills_pending = True

    def __init__(
        self,
        sessions: SessionFactory,
        data: MarketData,
        settings: MarketSettings | None = None,
        clock: Callable[[], datetime] | None = None,
    ):
        self.sessions = sessions
        self.data = data
        self.settings = settings or MarketSettings()
        self.portfolio = Portfolio(sessions, data, self.settings)
        self.clock = clock or (lambda: datetime.now(UTC))

    def session_day(self, market: str) -> date:
        """The trading session an order placed now belongs to: today at the exchange before the
        close on a trading day, else the next one (Monday 20:00 is Tuesday's, Saturday is Monday's).
        Crypto: the UTC date."""
        now = self.clock()
        if market == "crypto":
            return now.astimezone(UTC).date()
        return self.data.calendar("cn").session_of(now)

    async def _existing(self, key: str) -> MarketTrade | None:
        async with self.sessions() as s:
            return (
                await s.execute(select(MarketTrade).where(MarketTrade.idempotency_key == key))
            ).scalar_one_or_none()

    async def _reserve(
        self,
        key: str,
        user_id: str,
        market: str,
        symbol: str,
        side: Side,
        qty: float,
        source: str,
        request_hash: str = "",
    ) -> tuple[int, MarketTrade | None]:
        """Insert the pending row; if the key exists already return the earlier trade instead."""
        try:
            async with self.sessions() as s, s.begin():
                t = MarketTrade(
                    idempotency_key=key,
                    request_hash=request_hash,
                    user_id=user_id,
                    market=market,
                    symbol=symbol,
                    side=side,
                    quantity=qty,
                    status="pending",
                    venue=self.venue,
                    source=source,
                    fee=0.0,
                    tax=0.0,
                    reason="",
                    external_id="",
                )
                s.add(t)
                await s.flush()
                return t.id, None
        except IntegrityError:
            prev = await self._existing(key)
            if prev is None:  # not the key: the database refused the row for another reason
                raise
            return prev.id, prev

    async def submit(
        self,
        user_id: str,
        symbol: str,
        side: Side,
        quantity: float,
        *,
        key: str,
        source: str = "chat",
        request_hash: str = "",
    ) -> TradeResult:
        """`request_hash` fingerprints the order as requested: the same key with another
        fingerprint raises IdempotencyConflict (naming the first order) instead of replaying it."""
        if not key:
            raise ValueError("an idempotency key is required")
        # Orders already waiting at a price limit go first when a newer bar has come (first come,
        # first served for the cash), and the caller hears what happened to them.
        updates = tuple(await self.retry_waiting(user_id))
        prev = await self._existing(key)
        inst = self.data.resolve(symbol)
        market = "crypto" if inst.market == "crypto" else "cn"
        if prev is None:
            trade_id, prev = await self._reserve(
                key, user_id, market, inst.symbol, side, float(quantity), source, request_hash
            )
        if prev is not None:
            # reserved by a process a crash cut off before its fill (a paper fill is one
            # transaction: nothing was applied): the same order, asked again by its key, fills
            # now, once — whoever claims the row. A reservation of this process is a fill in
            # flight: never a second one.
            if not (
                prev.status == "pending"
                and self.refills_pending
                and _before_this_process(prev)
                and self._replay(prev, key, request_hash) is not None  # a conflicting request raises
                and await self._claim(prev.id)
            ):
                return self._replay(prev, key, request_hash, updates)
            trade_id = prev.id
        try:
            trade = await self._fill(trade_id, user_id, inst, market, side, float(quantity))
        except _Settled as settled:  # another call with this key filled it first: its outcome
            return TradeResult(settled.trade, replayed=True, updates=updates)
        except Exception as exc:  # nothing was applied (one transaction): record it, never retry
            log.exception("paper fill failed for trade %s", trade_id)
            # a driver's text quotes SQL and parameters: the log has it, the reason does not
            why = "the database failed (details in the log)" if is_storage_failure(exc) else str(exc)
            trade = await self._finish(trade_id, "rejected", reason=f"not filled: {why}")
        return TradeResult(trade, updates=updates)

    async def _claim(self, trade_id: int) -> bool:
        """Take over a crashed run's reservation: one caller wins (a compare-and-set)."""
        async with self.sessions() as s, s.begin():
            won = await s.execute(
                update(MarketTrade)
                .where(MarketTrade.id == trade_id, MarketTrade.status == "pending", MarketTrade.reason == "")
                .values(reason=RESUMED)
                .execution_options(synchronize_session=False)
            )
            return rowcount(won) == 1

    @staticmethod
    def _replay(
        prev: MarketTrade, key: str, request_hash: str, updates: tuple[dict[str, Any], ...] = ()
    ) -> TradeResult:
        if request_hash and prev.request_hash and prev.request_hash != request_hash:
            raise IdempotencyConflict(key, trade_dict(prev))
        return TradeResult(trade_dict(prev), replayed=True, updates=updates)

    async def _finish(self, trade_id: int, status: str, **fields: Any) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            t = await _ledger_row(s, trade_id)
            t.status = status
            for k, v in fields.items():
                setattr(t, k, v)
            await s.flush()
            return trade_dict(t)

    async def _fill(
        self, trade_id: int, user_id: str, inst: Instrument, market: str, side: Side, qty: float
    ) -> dict[str, Any]:
        rules = rules_for(market, self.settings)
        bars = self.data.bars(inst)
        price = float(bars.close[-1])
        bar_day: date = bars.dates[-1].astype(object)  # prices: the last bar's close
        day = self.session_day(market)  # T+1 and "today": the wall-clock trading calendar
        blocked = _blocked_at_last_close(bars, inst, market, rules, side)

        async with self.sessions() as s, s.begin():
            t = await _ledger_row(s, trade_id, lock=True)
            if t.status != "pending":  # reconciled or filled meanwhile (the same key, twice at once)
                raise _Settled(trade_dict(t))
            t.trade_date, t.price_date = day, bar_day
            if blocked and not self.settings.retry_blocked:
                t.status = "rejected"
                t.reason = (
                    f"{inst.label} {blocked} on {bar_day}: no {side} fill at the limit; "
                    "place the order again on the next bar"
                )
                return trade_dict(t)
            # A blocked order is checked now too (all but T+1, which is the fill session's), so an
            # order that could never fill is refused at once instead of waiting.
            order = _Order(rules, user_id, inst, market, side, qty, price, day)
            problem = await self._problem(s, order, t_plus_1=not blocked)
            if problem:
                t.status, t.reason = "rejected", problem.text
                return trade_dict(t)
            if blocked:
                t.status = "waiting"
                t.reason = f"{_pending_note(blocked)} ({inst.label}, {bar_day} close)"
                return trade_dict(t)
            await self._apply(s, t, order)
            t.reason = f"paper fill at the {bar_day} close (the last bar), {day} session"
            await s.flush()
            return trade_dict(t)

    async def precheck(self, user_id: str, symbol: str, side: Side, quantity: float) -> OrderProblem | None:
        """What `submit` would run into now (lots, cash, holdings, T+1, the price limit), without
        placing anything: an approval card warns instead of showing the order as if it fills."""
        inst = self.data.resolve(symbol)
        market = "crypto" if inst.market == "crypto" else "cn"
        rules = rules_for(market, self.settings)
        bars = self.data.bars(inst)
        price = float(bars.close[-1])
        day = self.session_day(market)
        blocked = _blocked_at_last_close(bars, inst, market, rules, side)
        async with self.sessions() as s:  # read only: rolled back on leaving
            order = _Order(rules, user_id, inst, market, side, float(quantity), price, day)
            problem = await self._problem(s, order, t_plus_1=not blocked)
            await s.rollback()
        if problem is None and blocked:
            word = "limit-up" if side == "buy" else "limit-down"
            problem = OrderProblem(
                "limit", _pending_note(blocked), {"word": word}, self.settings.retry_blocked
            )
        return problem

    async def _problem(self, s: AsyncSession, o: _Order, *, t_plus_1: bool = True) -> OrderProblem | None:
        """Why an order cannot fill at `o.price` in session `o.day` (lots, cash, holdings, T+1), or None."""
        if o.qty <= 0:
            return OrderProblem("quantity", "quantity must be positive", {})
        if o.rules.lot and o.side == "buy" and abs(o.qty / o.rules.lot - round(o.qty / o.rules.lot)) > 1e-9:
            return OrderProblem(
                "lot_buy",
                f"A-share buys are whole lots of {o.rules.lot:g} shares; {o.qty:g} is not",
                {"lot": o.rules.lot, "quantity": o.qty},
            )
        acc = await self.portfolio._account(s, o.user_id, o.market)
        pos = await self.portfolio._position(s, o.user_id, o.market, o.inst.symbol, o.inst.name)
        value = notional(o.qty, o.price)
        fee, tax = o.rules.order_cost(o.side, value)
        if o.side == "buy":
            need = money_sum(value, fee, tax)
            if need > acc.cash + 1e-9:
                return OrderProblem(
                    "cash",
                    f"insufficient cash: need {need:,.2f}, have {acc.cash:,.2f}",
                    {"need": need, "have": acc.cash},
                )
            return None
        sellable = pos.quantity
        if o.rules.t_plus_1 and t_plus_1:
            bought_today = await self._bought_in(s, o.user_id, o.inst.symbol, o.day)
            sellable = max(0.0, pos.quantity - bought_today)
            if o.qty > sellable + 1e-9 and o.qty <= pos.quantity + 1e-9:
                return OrderProblem(
                    "t_plus_1",
                    f"T+1: {bought_today:g} shares were bought in the {o.day} session and can be "
                    f"sold from the next trading day; sellable now {sellable:g}",
                    {"bought": bought_today, "day": o.day, "sellable": sellable},
                )
        if o.qty > sellable + 1e-9:
            return OrderProblem(
                "holding",
                f"insufficient holding: have {pos.quantity:g}, sellable {sellable:g}",
                {"have": pos.quantity, "sellable": sellable},
            )
        if (
            o.rules.lot
            and o.qty < pos.quantity
            and abs(o.qty / o.rules.lot - round(o.qty / o.rules.lot)) > 1e-9
        ):
            return OrderProblem(
                "lot_sell",
                f"A-share sells are whole lots of {o.rules.lot:g} unless the whole position is sold",
                {"lot": o.rules.lot},
            )
        return None

    @staticmethod
    async def _bought_in(s: AsyncSession, user_id: str, symbol: str, day: date) -> float:
        got = (
            await s.execute(
                select(func.coalesce(func.sum(MarketTrade.quantity), 0.0)).where(
                    MarketTrade.user_id == user_id,
                    MarketTrade.symbol == symbol,
                    MarketTrade.side == "buy",
                    MarketTrade.status == "filled",
                    MarketTrade.trade_date == day,
                )
            )
        ).scalar_one()
        return float(got)

    async def _apply(self, s: AsyncSession, t: MarketTrade, o: _Order) -> None:
        """Move cash and shares for a checked order, and mark the trade filled (one transaction)."""
        acc = await self.portfolio._account(s, o.user_id, o.market)
        pos = await self.portfolio._position(s, o.user_id, o.market, o.inst.symbol, o.inst.name)
        value = notional(o.qty, o.price)
        fee, tax = o.rules.order_cost(o.side, value)
        if o.side == "buy":
            new_qty = pos.quantity + o.qty
            pos.avg_cost = (pos.avg_cost * pos.quantity + value + fee) / new_qty
            pos.quantity = new_qty
            pos.high_since_entry = max(pos.high_since_entry or 0.0, o.price)
            pos.opened_on = pos.opened_on or o.day
            acc.cash = money_sum(acc.cash, -value, -fee, -tax)
        else:
            t.realized_pnl = value - fee - tax - pos.avg_cost * o.qty
            pos.quantity -= o.qty
            acc.cash = money_sum(acc.cash, value, -fee, -tax)
            if pos.quantity <= 1e-12:
                pos.quantity, pos.avg_cost, pos.high_since_entry, pos.opened_on = 0.0, 0.0, 0.0, None
        t.status, t.price, t.fee, t.tax, t.trade_date = "filled", o.price, fee, tax, o.day

    # -- orders waiting at a price limit ---------------------------------------------------------
    async def retry_waiting(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """Try every waiting order whose instrument has a bar newer than the one that blocked it:
        filled at the first newer open off the limit, rejected when it no longer passes the checks
        (cash, holdings, T+1 in today's session), else still waiting as of the newest bar. Returns
        the orders that changed. Cheap when nothing waits (one indexed query) or no bar is new."""
        async with self.sessions() as s:
            q = select(MarketTrade.id, MarketTrade.market, MarketTrade.price_date).where(
                MarketTrade.venue == self.venue, MarketTrade.status == "waiting"
            )
            if user_id:
                q = q.where(MarketTrade.user_id == user_id)
            rows = (await s.execute(q.order_by(MarketTrade.id))).all()
        out = []
        for trade_id, market, seen in rows:
            as_of = self.data.as_of(market)
            if seen is not None and as_of is not None and as_of <= seen:
                continue  # no newer bar for this market at all
            try:
                got = await self._retry(trade_id, seen)
            except Exception:  # nothing was applied (one transaction): it keeps waiting
                log.exception("retry of waiting paper order %s failed", trade_id)
                continue
            if got is not None:
                out.append(got)
        return out

    async def _retry(self, trade_id: int, seen: date | None) -> dict[str, Any] | None:
        async with self.sessions() as s:
            row = await s.get(MarketTrade, trade_id)
            if row is None or row.status != "waiting":
                return None
            user_id, symbol, market, qty = row.user_id, row.symbol, row.market, float(row.quantity)
            side: Side = "sell" if row.side == "sell" else "buy"
        inst = self.data.resolve(symbol)
        rules = rules_for(market, self.settings)
        bars = await self.data.abars(inst)  # off the loop (and through the bar cache) for network data
        after = seen or bars.dates[-1].astype(object)
        k, why, last = first_open_off_the_limit(bars, after, side, _limit(inst, market, rules))
        if last is None:
            return None  # no newer bar for this instrument (suspended, or not updated yet)
        day = self.session_day(market)
        async with self.sessions() as s, s.begin():
            # Claim the order as last seen: of concurrent retries (two processes, a double-fired
            # job) exactly one passes this compare-and-set; the rest see no row and do nothing.
            claim = await s.execute(
                update(MarketTrade)
                .where(
                    MarketTrade.id == trade_id,
                    MarketTrade.status == "waiting",
                    MarketTrade.price_date == seen if seen is not None else MarketTrade.price_date.is_(None),
                )
                .values(status="retrying")
                .execution_options(synchronize_session=False)
            )
            if rowcount(claim) != 1:
                return None
            t = await _ledger_row(s, trade_id, refresh=True)
            if k is None:
                bar = bars.dates[last].astype(object)
                t.status, t.price_date = "waiting", bar
                t.reason = f"{_pending_note(why or 'blocked')} ({inst.label}, {bar} bar; still blocked after {after})"
                return trade_dict(t)
            bar = bars.dates[k].astype(object)
            price = float(bars.open[k])
            t.price_date, t.trade_date = bar, day
            order = _Order(rules, user_id, inst, market, side, qty, price, day)
            problem = await self._problem(s, order)
            if problem:
                t.status = "rejected"
                t.reason = (
                    f"not filled at the retry on the {bar} open ({price:g}): {problem.text} "
                    f"(it had waited at the price limit through the {after} bar)"
                )
                return trade_dict(t)
            await self._apply(s, t, order)
            t.reason = (
                f"paper fill at the {bar} open, the first bar off the price limit after the {after} "
                f"bar it waited at, {day} session"
            )
            await s.flush()
            return trade_dict(t)

    async def cancel(self, user_id: str, order_id: int, *, by: str = "the user") -> TradeResult:
        """Cancel a waiting order of this user. Cancelling one already cancelled returns it again
        (replayed); a filled or rejected order cannot be cancelled."""
        async with self.sessions() as s, s.begin():
            t = await s.get(MarketTrade, order_id)
            if t is None or t.user_id != user_id or t.venue != self.venue:
                raise OrderNotFound(f"no order #{order_id} of yours on the {self.venue} account")
            if t.status == "cancelled":
                return TradeResult(trade_dict(t), replayed=True)
            done = await s.execute(
                update(MarketTrade)
                .where(MarketTrade.id == order_id, MarketTrade.status == "waiting")
                .values(status="cancelled", reason=f"cancelled by {by} while waiting; was: {t.reason}")
                .execution_options(synchronize_session=False)
            )
            t = await _ledger_row(s, order_id, refresh=True)
            if rowcount(done) != 1:
                raise TradeRejected(f"order #{order_id} is {t.status}, not waiting: nothing to cancel")
            return TradeResult(trade_dict(t))

    async def reconcile(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """Pending paper trades were never applied (fills are atomic): mark them rejected, don't retry.
        Orders `waiting` at a price limit are not touched: they are retried by `retry_waiting`."""
        async with self.sessions() as s, s.begin():
            q = select(MarketTrade).where(
                MarketTrade.venue == self.venue, MarketTrade.status.in_(("pending", "unknown"))
            )
            if user_id:
                q = q.where(MarketTrade.user_id == user_id)
            rows = (await s.execute(q)).scalars().all()
            for t in rows:
                t.status, t.reason = (
                    "rejected",
                    "not applied (interrupted before the fill); reconciled, not retried",
                )
            return [trade_dict(t) for t in rows]


def _limit(inst: Instrument, market: str, rules: MarketRules) -> float | None:
    return inst.limit_pct if market == "cn" and rules.limits else None


def _blocked_at_last_close(
    bars: Bars, inst: Instrument, market: str, rules: MarketRules, side: Side
) -> str | None:
    """The backtester's rule (markets.rules.limit_block) at the fill price, the last close."""
    return limit_block(
        side,
        float(bars.close[-1]),
        float(bars.close[-2]) if len(bars) > 1 else float("nan"),
        float(bars.high[-1]),
        float(bars.low[-1]),
        _limit(inst, market, rules),
    )


def _pending_note(blocked: str) -> str:
    """What the user is told about a waiting order: "pending: blocked at limit-up, ..."."""
    word = "limit-up" if "limit-up" in blocked else "limit-down" if "limit-down" in blocked else "the limit"
    how = "locked at" if blocked.startswith("limit-locked") else "blocked at"
    return f"pending: {how} {word} ({blocked}), will retry at the next bar's open"


def first_open_off_the_limit(
    bars: Bars, after: date, side: Side, limit: float | None
) -> tuple[int | None, str | None, int | None]:
    """Walk the bars after `after` as the backtester walks a pending order: (index of the first bar
    whose open `rules.limit_block` lets through, None), else (None, the last bar's block reason);
    the third value is the last bar looked at (None when there is no newer bar)."""
    start = int(np.searchsorted(bars.dates, np.datetime64(after, "D"), side="right"))
    n = len(bars)
    why: str | None = None
    for k in range(start, n):
        why = limit_block(
            side,
            float(bars.open[k]),
            float(bars.close[k - 1]) if k > 0 else float("nan"),
            float(bars.high[k]),
            float(bars.low[k]),
            limit,
        )
        if why is None:
            return k, None, n - 1
    return None, why, (n - 1 if start < n else None)


def client_order_id(key: str) -> str:
    """Exchanges limit client ids (Binance: 36 chars of [A-Za-z0-9-_])."""
    return "tb" + hashlib.sha256(key.encode()).hexdigest()[:30]


class LiveCcxtBroker(PaperBroker):
    """Market orders on a ccxt exchange. Constructed only by the composition root when
    `settings.live` is true (it logs a banner); tests use a fake exchange object, never a real one."""

    venue = "live"
    refills_pending = False

    def __init__(self, sessions: SessionFactory, data: MarketData, settings: MarketSettings, exchange: Any):
        if not settings.live:
            raise RuntimeError("live trading is off: set [markets] live = true to enable it")
        super().__init__(sessions, data, settings)
        self.exchange = exchange
        log.warning("LIVE TRADING ENABLED on %s: orders will be sent to the exchange", settings.live_exchange)

    async def _fill(
        self, trade_id: int, user_id: str, inst: Instrument, market: str, side: Side, qty: float
    ) -> dict[str, Any]:
        if market != "crypto":
            return await self._finish(trade_id, "rejected", reason="live trading supports crypto (ccxt) only")
        import asyncio

        cid = client_order_id(str(trade_id) + ":" + inst.symbol)
        await self._finish(trade_id, "pending", external_id=cid)
        try:
            order = await asyncio.to_thread(
                self.exchange.create_order, inst.symbol, "market", side, qty, None, {"clientOrderId": cid}
            )
        except Exception as exc:  # noqa: BLE001 — ccxt raises many unrelated classes; _ccxt_error_kind sorts them
            kind = _ccxt_error_kind(exc)
            if kind == "rejected":
                return await self._finish(trade_id, "rejected", reason=f"exchange rejected: {exc}")
            return await self._finish(
                trade_id,
                "unknown",
                reason=f"outcome unknown ({type(exc).__name__}); will reconcile, not retry",
            )
        return await self._apply_order(trade_id, order)

    async def _apply_order(self, trade_id: int, order: dict[str, Any]) -> dict[str, Any]:
        status = {
            "closed": "filled",
            "canceled": "rejected",
            "rejected": "rejected",
            "expired": "rejected",
        }.get(order.get("status", ""), "unknown")
        fields: dict[str, Any] = {
            "price": order.get("average") or order.get("price"),
            "fee": float((order.get("fee") or {}).get("cost") or 0.0),
            "reason": f"exchange status {order.get('status')}",
        }
        if order.get("filled"):
            fields["quantity"] = float(order["filled"])
        return await self._finish(trade_id, status, **fields)

    async def reconcile(self, user_id: str | None = None) -> list[dict[str, Any]]:
        import asyncio

        async with self.sessions() as s:
            q = select(MarketTrade).where(
                MarketTrade.venue == self.venue, MarketTrade.status.in_(("pending", "unknown"))
            )
            if user_id:
                q = q.where(MarketTrade.user_id == user_id)
            rows = (await s.execute(q)).scalars().all()
        out = []
        for t in rows:
            try:
                order = await asyncio.to_thread(
                    self.exchange.fetch_order, None, t.symbol, {"clientOrderId": t.external_id}
                )
            except Exception as exc:  # noqa: BLE001 — ccxt raises many unrelated classes; _ccxt_error_kind sorts them
                if _ccxt_error_kind(exc) == "rejected":  # OrderNotFound: it never reached the book
                    out.append(
                        await self._finish(t.id, "rejected", reason="not found at the exchange; not retried")
                    )
                continue
            out.append(await self._apply_order(t.id, order))
        return out


def _ccxt_error_kind(exc: Exception) -> Literal["rejected", "unknown"]:
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {
        "InsufficientFunds",
        "InvalidOrder",
        "OrderNotFound",
        "BadSymbol",
        "AuthenticationError",
        "PermissionDenied",
    }:
        return "rejected"
    return "unknown"  # NetworkError, RequestTimeout, ExchangeNotAvailable, anything else
