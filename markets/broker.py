"""Brokers: the paper broker (default) and a ccxt live broker that exists only behind `live = true`.

Idempotency. Every order carries a key (for chat trades it is derived from the approved tool call, so
a replayed or double-tapped approval reuses it). The key is reserved first — a `pending` trade row
under a UNIQUE constraint — and only then is the order executed:
- the same key again returns the first outcome and never fills twice;
- paper fills update cash, position and the trade's status in ONE transaction, so a crash leaves a
  `pending` row with nothing applied; `reconcile` marks such rows `rejected` (not filled) and never
  re-runs them;
- a live order whose request may have reached the exchange without a confirmed answer is marked
  `unknown`; `reconcile` asks the exchange by client order id and records what really happened. It
  is never blindly retried.

The paper broker fills at the last bar's close ("as of" the dataset, stated on every fill) with the
market's rules: lots of 100 for A-share buys, T+1 on the wall-clock trading calendar (shares bought in
today's session — the injected clock's date at the exchange, or the next trading day when today is
none — can be sold from the next session, even while the bars stay frozen), the
backtester's price-limit rule (`rules.limit_block`: no fill on a limit-locked bar, no buy at a
limit-up close, no sell at a limit-down close; the order is rejected and can be placed again on the
next bar), commission/stamp duty, cash and holdings checks.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from markets.calendar import exchange_today
from markets.data import MarketData
from markets.models import MarketTrade
from markets.portfolio import Portfolio, trade_dict
from markets.rules import MarketRules, Side, limit_block
from markets.services import MarketSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TradeResult:
    trade: dict[str, Any]
    replayed: bool = False  # the key was seen before: this is the earlier outcome, nothing new happened

    @property
    def status(self) -> str:
        return self.trade["status"]

    def to_dict(self) -> dict[str, Any]:
        return {**self.trade, "replayed": self.replayed}


def rules_for(market: str, settings: MarketSettings) -> MarketRules:
    if market == "crypto":
        return MarketRules.crypto(settings.crypto_fee)
    from markets.rules import Fees

    return MarketRules.cn(Fees(settings.commission, settings.commission_min, settings.stamp_duty_sell))


class PaperBroker:
    venue = "paper"

    def __init__(
        self,
        sessions: Any,
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
        """The trading session an order placed now belongs to: today at the exchange when it is a
        trading day, else the next one (an order on Saturday is Monday's). Crypto: the UTC date."""
        now = self.clock()
        if market == "crypto":
            return now.astimezone(UTC).date()
        cal = self.data.calendar("cn")
        today = exchange_today(now)
        return today if cal.is_trading_day(today) else cal.next_trading_day(today)

    async def _existing(self, key: str) -> MarketTrade | None:
        async with self.sessions() as s:
            return (
                await s.execute(select(MarketTrade).where(MarketTrade.idempotency_key == key))
            ).scalar_one_or_none()

    async def _reserve(
        self, key: str, user_id: str, market: str, symbol: str, side: Side, qty: float, source: str
    ) -> tuple[int, MarketTrade | None]:
        """Insert the pending row; if the key exists already return the earlier trade instead."""
        try:
            async with self.sessions() as s, s.begin():
                t = MarketTrade(
                    idempotency_key=key,
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
            assert prev is not None
            return prev.id, prev

    async def submit(
        self, user_id: str, symbol: str, side: Side, quantity: float, *, key: str, source: str = "chat"
    ) -> TradeResult:
        if not key:
            raise ValueError("an idempotency key is required")
        prev = await self._existing(key)
        if prev is not None:
            return TradeResult(trade_dict(prev), replayed=True)
        inst = self.data.resolve(symbol)
        market = "crypto" if inst.market == "crypto" else "cn"
        trade_id, prev = await self._reserve(key, user_id, market, inst.symbol, side, float(quantity), source)
        if prev is not None:
            return TradeResult(trade_dict(prev), replayed=True)
        try:
            return TradeResult(await self._fill(trade_id, user_id, inst, market, side, float(quantity)))
        except Exception as exc:  # nothing was applied (one transaction): record it, never retry
            log.exception("paper fill failed for trade %s", trade_id)
            return TradeResult(await self._finish(trade_id, "rejected", reason=f"not filled: {exc}"))

    async def _finish(self, trade_id: int, status: str, **fields: Any) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            t = await s.get(MarketTrade, trade_id)
            t.status = status
            for k, v in fields.items():
                setattr(t, k, v)
            await s.flush()
            return trade_dict(t)

    async def _fill(
        self, trade_id: int, user_id: str, inst: Any, market: str, side: Side, qty: float
    ) -> dict[str, Any]:
        rules = rules_for(market, self.settings)
        bars = self.data.bars(inst)
        price = float(bars.close[-1])
        bar_day: date = bars.dates[-1].astype(object)  # prices: the last bar's close
        day = self.session_day(market)  # T+1 and "today": the wall-clock trading calendar
        # The backtester's rule (markets.rules.limit_block) at the fill price, the last close.
        blocked = limit_block(
            side,
            price,
            float(bars.close[-2]) if len(bars) > 1 else float("nan"),
            float(bars.high[-1]),
            float(bars.low[-1]),
            inst.limit_pct if market == "cn" and rules.limits else None,
        )

        async with self.sessions() as s, s.begin():
            t = await s.get(MarketTrade, trade_id)
            if t.status != "pending":  # reconciled meanwhile
                return trade_dict(t)

            def reject(reason: str) -> dict[str, Any]:
                t.status, t.reason, t.trade_date, t.price_date = "rejected", reason, day, bar_day
                return trade_dict(t)

            if qty <= 0:
                return reject("quantity must be positive")
            if blocked:
                return reject(
                    f"{inst.label} {blocked} on {bar_day}: no {side} fill at the limit; "
                    "place the order again on the next bar"
                )
            if rules.lot and side == "buy" and abs(qty / rules.lot - round(qty / rules.lot)) > 1e-9:
                return reject(f"A-share buys are whole lots of {rules.lot:g} shares; {qty:g} is not")
            acc = await self.portfolio._account(s, user_id, market)
            pos = await self.portfolio._position(s, user_id, market, inst.symbol, inst.name)
            notional = qty * price
            fee, tax = rules.order_cost(side, notional)
            if side == "buy":
                if notional + fee + tax > acc.cash + 1e-9:
                    return reject(
                        f"insufficient cash: need {notional + fee + tax:,.2f}, have {acc.cash:,.2f}"
                    )
                new_qty = pos.quantity + qty
                pos.avg_cost = (pos.avg_cost * pos.quantity + notional + fee) / new_qty
                pos.quantity = new_qty
                pos.high_since_entry = max(pos.high_since_entry or 0.0, price)
                pos.opened_on = pos.opened_on or day
                acc.cash -= notional + fee + tax
            else:
                sellable = pos.quantity
                if rules.t_plus_1:
                    bought_today = (
                        await s.execute(
                            select(func.coalesce(func.sum(MarketTrade.quantity), 0.0)).where(
                                MarketTrade.user_id == user_id,
                                MarketTrade.symbol == inst.symbol,
                                MarketTrade.side == "buy",
                                MarketTrade.status == "filled",
                                MarketTrade.trade_date == day,
                            )
                        )
                    ).scalar_one()
                    sellable = max(0.0, pos.quantity - float(bought_today))
                    if qty > sellable + 1e-9 and qty <= pos.quantity + 1e-9:
                        return reject(
                            f"T+1: {bought_today:g} shares were bought in the {day} session and can be "
                            f"sold from the next trading day; sellable now {sellable:g}"
                        )
                if qty > sellable + 1e-9:
                    return reject(f"insufficient holding: have {pos.quantity:g}, sellable {sellable:g}")
                if rules.lot and qty < pos.quantity and abs(qty / rules.lot - round(qty / rules.lot)) > 1e-9:
                    return reject(
                        f"A-share sells are whole lots of {rules.lot:g} unless the whole position is sold"
                    )
                t.realized_pnl = notional - fee - tax - pos.avg_cost * qty
                pos.quantity -= qty
                acc.cash += notional - fee - tax
                if pos.quantity <= 1e-12:
                    pos.quantity, pos.avg_cost, pos.high_since_entry, pos.opened_on = 0.0, 0.0, 0.0, None
            t.status, t.price, t.fee, t.tax, t.trade_date = "filled", price, fee, tax, day
            t.price_date = bar_day
            t.reason = f"paper fill at the {bar_day} close (the last bar), {day} session"
            await s.flush()
            return trade_dict(t)

    async def reconcile(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """Pending paper trades were never applied (fills are atomic): mark them rejected, don't retry."""
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


def client_order_id(key: str) -> str:
    """Exchanges limit client ids (Binance: 36 chars of [A-Za-z0-9-_])."""
    return "tb" + hashlib.sha256(key.encode()).hexdigest()[:30]


class LiveCcxtBroker(PaperBroker):
    """Market orders on a ccxt exchange. Constructed only by the composition root when
    `settings.live` is true (it logs a banner); tests use a fake exchange object, never a real one."""

    venue = "live"

    def __init__(self, sessions: Any, data: MarketData, settings: MarketSettings, exchange: Any):
        if not settings.live:
            raise RuntimeError("live trading is off: set [markets] live = true to enable it")
        super().__init__(sessions, data, settings)
        self.exchange = exchange
        log.warning("LIVE TRADING ENABLED on %s: orders will be sent to the exchange", settings.live_exchange)

    async def _fill(
        self, trade_id: int, user_id: str, inst: Any, market: str, side: Side, qty: float
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
        except Exception as exc:
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
            except Exception as exc:
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
