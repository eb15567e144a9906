"""Portfolio bookkeeping per user, in two separate books: the paper account (cash and positions the
paper broker trades, with realized P&L) and the recorded real holdings (`update_portfolio`,
bookkeeping only). Nothing moves between them: a paper sell can only sell what the paper account
bought. Prices come from MarketData "as of" its last bar, and every view says so."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from markets.data import MarketData
from markets.errors import NoData, TradeRejected
from markets.models import (
    MarketAccount,
    MarketHolding,
    MarketHoldingCash,
    MarketPosition,
    MarketRecord,
    MarketTrade,
    SessionFactory,
)
from markets.settings import MarketSettings

CURRENCY = {"cn": "CNY", "crypto": "USDT"}
MAX_NAME_CHARS = 64  # an instrument's display name, as a provider gave it: cut to the column


@dataclass(frozen=True, slots=True)
class PositionView:
    symbol: str
    name: str
    market: str
    quantity: float
    avg_cost: float
    price: float | None
    value: float | None
    pnl: float | None
    pnl_pct: float | None
    as_of: str | None
    high_since_entry: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("avg_cost", "price", "value", "pnl"):
            if d[k] is not None:
                d[k] = round(d[k], 2 if k in ("value", "pnl") else 4)
        if d["pnl_pct"] is not None:
            d["pnl_pct"] = round(d["pnl_pct"] * 100, 2)
        return d


def market_of(symbol: str) -> str:
    return "crypto" if "/" in symbol else "cn"


class Portfolio:
    def __init__(self, sessions: SessionFactory, data: MarketData, settings: MarketSettings | None = None):
        self.sessions = sessions
        self.data = data
        self.settings = settings or MarketSettings()

    # -- accounts -------------------------------------------------------------------------------
    def initial_cash(self, market: str) -> float:
        return self.settings.initial_cash_crypto if market == "crypto" else self.settings.initial_cash_cn

    async def _account(self, s: AsyncSession, user_id: str, market: str) -> MarketAccount:
        acc = (
            await s.execute(
                select(MarketAccount).where(MarketAccount.user_id == user_id, MarketAccount.market == market)
            )
        ).scalar_one_or_none()
        if acc is None:
            acc = MarketAccount(
                user_id=user_id,
                market=market,
                cash=self.initial_cash(market),
                currency=CURRENCY.get(market, ""),
            )
            s.add(acc)
            await s.flush()
        return acc

    async def balance(self, user_id: str, market: str | None = None) -> list[dict[str, Any]]:
        markets = [market] if market else ["cn", "crypto"]
        async with self.sessions() as s, s.begin():
            return [
                {
                    "market": m,
                    "cash": round((a := await self._account(s, user_id, m)).cash, 2),
                    "currency": a.currency,
                }
                for m in markets
            ]

    # -- holdings -------------------------------------------------------------------------------
    def _price(self, symbol: str) -> tuple[float | None, str | None]:
        try:
            b = self.data.bars(symbol)
        except NoData:
            return None, None
        return float(b.close[-1]), str(b.dates[-1])

    def _views(self, rows: Any) -> list[PositionView]:
        out = []
        for r in rows:
            price, as_of = self._price(r.symbol)
            value = None if price is None else price * r.quantity
            pnl = None if value is None else value - r.avg_cost * r.quantity
            pct = None if price is None or not r.avg_cost else price / r.avg_cost - 1
            out.append(
                PositionView(
                    r.symbol,
                    r.name,
                    r.market,
                    r.quantity,
                    r.avg_cost,
                    price,
                    value,
                    pnl,
                    pct,
                    as_of,
                    r.high_since_entry,
                )
            )
        return out

    async def _rows(self, model: Any, user_id: str, market: str | None) -> Any:
        async with self.sessions() as s:
            q = select(model).where(model.user_id == user_id, model.quantity > 0)
            if market:
                q = q.where(model.market == market)
            return (await s.execute(q.order_by(model.symbol))).scalars().all()

    async def positions(self, user_id: str, market: str | None = None) -> list[PositionView]:
        """The paper account's positions (what the paper broker can sell)."""
        return self._views(await self._rows(MarketPosition, user_id, market))

    async def holdings(self, user_id: str, market: str | None = None) -> list[PositionView]:
        """The recorded real holdings (`update_portfolio`; bookkeeping only)."""
        return self._views(await self._rows(MarketHolding, user_id, market))

    async def realized(self, user_id: str) -> dict[str, float]:
        """Realized P&L of the paper account per market (sum over filled sells)."""
        async with self.sessions() as s:
            rows = (
                await s.execute(
                    select(MarketTrade.market, func.coalesce(func.sum(MarketTrade.realized_pnl), 0.0))
                    .where(MarketTrade.user_id == user_id, MarketTrade.status == "filled")
                    .group_by(MarketTrade.market)
                )
            ).all()
        return {m: float(v or 0.0) for m, v in rows}  # coalesce: never None

    async def waiting(self, user_id: str, market: str | None = None) -> list[dict[str, Any]]:
        """Paper orders waiting for a bar off the price limit (markets/broker.py), oldest first."""
        async with self.sessions() as s:
            q = select(MarketTrade).where(MarketTrade.user_id == user_id, MarketTrade.status == "waiting")
            if market:
                q = q.where(MarketTrade.market == market)
            rows = (await s.execute(q.order_by(MarketTrade.id))).scalars().all()
        return [trade_dict(t) for t in rows]

    async def recorded_cash(self, user_id: str) -> dict[str, float | None]:
        async with self.sessions() as s:
            rows = (
                (await s.execute(select(MarketHoldingCash).where(MarketHoldingCash.user_id == user_id)))
                .scalars()
                .all()
            )
        got = {r.market: r.cash for r in rows}
        return {m: got.get(m) for m in ("cn", "crypto")}

    @staticmethod
    def _totals(positions: list[PositionView], cash: dict[str, float | None]) -> dict[str, dict[str, Any]]:
        totals: dict[str, dict[str, Any]] = {}
        for m in ("cn", "crypto"):
            ps = [p for p in positions if p.market == m]
            mv = sum(p.value or 0.0 for p in ps)
            cost = sum(p.avg_cost * p.quantity for p in ps)
            c = cash.get(m)
            totals[m] = {
                "cash": None if c is None else round(c, 2),
                "market_value": round(mv, 2),
                "equity": round((c or 0.0) + mv, 2),
                "unrealized_pnl": round(mv - cost, 2),
                "currency": CURRENCY[m],
            }
        return totals

    async def view(self, user_id: str) -> dict[str, Any]:
        """Both books, each labelled: the paper account (simulated trades, with realized P&L) and the
        recorded real holdings. Prices are the last bar's close, as of the date stated."""
        paper = await self.positions(user_id)
        recorded = await self.holdings(user_id)
        cash: dict[str, float | None] = {b["market"]: b["cash"] for b in await self.balance(user_id)}
        realized = await self.realized(user_id)
        paper_totals = self._totals(paper, cash)
        for m, t in paper_totals.items():
            t["realized_pnl"] = round(realized.get(m, 0.0), 2)
        as_of = {m: str(d) if (d := self.data.as_of(m)) else None for m in ("cn", "crypto")}
        return {
            "as_of": as_of,
            "prices": "last close of the latest bar: "
            + ", ".join(f"{m} as of {d}" for m, d in as_of.items() if d),
            "paper": {
                "label": "Paper account — simulated trades (execute_trade, traders); not real money",
                "positions": [p.to_dict() for p in paper],
                "totals": paper_totals,
                # blocked by a price limit; retried at the next bar's open, cancellable (cancel_order)
                "pending_orders": await self.waiting(user_id),
            },
            "recorded": {
                "label": "Recorded holdings — your real positions as you entered them (update_portfolio); "
                "bookkeeping only, never traded here",
                "positions": [p.to_dict() for p in recorded],
                "totals": self._totals(recorded, await self.recorded_cash(user_id)),
            },
        }

    async def set_holding(
        self, user_id: str, symbol: str, quantity: float, avg_cost: float, note: str = ""
    ) -> dict[str, Any]:
        """Record a real holding (bookkeeping, no trade; the paper account is not touched):
        quantity 0 removes it."""
        inst = self.data.resolve(symbol)
        if quantity < 0 or avg_cost < 0:
            raise TradeRejected("quantity and cost must not be negative")
        market = "crypto" if inst.market == "crypto" else "cn"
        async with self.sessions() as s, s.begin():
            pos = await self._position(s, user_id, market, inst.symbol, inst.name, model=MarketHolding)
            pos.quantity, pos.avg_cost, pos.note = float(quantity), float(avg_cost), note or pos.note
            pos.high_since_entry = max(pos.high_since_entry or 0.0, avg_cost)
            if pos.opened_on is None:
                pos.opened_on = self.data.as_of(market)
            s.add(
                MarketRecord(
                    user_id=user_id,
                    kind="portfolio_update",
                    symbol=inst.symbol,
                    summary=f"recorded {inst.label}: {quantity:g} @ {avg_cost:g}",
                    payload={"quantity": quantity, "avg_cost": avg_cost},
                )
            )
        return {
            "book": "recorded",
            "symbol": inst.symbol,
            "name": inst.name,
            "quantity": quantity,
            "avg_cost": avg_cost,
        }

    async def set_cash(self, user_id: str, market: str, cash: float) -> dict[str, Any]:
        """Record the user's real cash (bookkeeping; the paper account's cash is not touched)."""
        if cash < 0:
            raise TradeRejected("cash must not be negative")
        async with self.sessions() as s, s.begin():
            row = (
                await s.execute(
                    select(MarketHoldingCash).where(
                        MarketHoldingCash.user_id == user_id, MarketHoldingCash.market == market
                    )
                )
            ).scalar_one_or_none()
            if row is None:
                row = MarketHoldingCash(user_id=user_id, market=market, currency=CURRENCY.get(market, ""))
                s.add(row)
            row.cash = float(cash)
            s.add(
                MarketRecord(
                    user_id=user_id,
                    kind="portfolio_update",
                    summary=f"recorded {market} cash: {cash:g}",
                    payload={"cash": cash},
                )
            )
        return {"book": "recorded", "market": market, "cash": cash}

    async def _position(
        self,
        s: AsyncSession,
        user_id: str,
        market: str,
        symbol: str,
        name: str = "",
        model: Any = MarketPosition,
    ) -> Any:
        pos = (
            await s.execute(
                select(model).where(model.user_id == user_id, model.market == market, model.symbol == symbol)
            )
        ).scalar_one_or_none()
        if pos is None:
            pos = model(
                user_id=user_id,
                market=market,
                symbol=symbol,
                name=name[:MAX_NAME_CHARS],
                quantity=0.0,
                avg_cost=0.0,
                high_since_entry=0.0,
                note="",
            )
            s.add(pos)
            await s.flush()
        return pos

    # -- history --------------------------------------------------------------------------------
    async def trades(self, user_id: str, symbol: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        async with self.sessions() as s:
            q = select(MarketTrade).where(MarketTrade.user_id == user_id)
            if symbol:
                q = q.where(MarketTrade.symbol == self.data.resolve(symbol).symbol)
            rows = (await s.execute(q.order_by(MarketTrade.id.desc()).limit(limit))).scalars().all()
        return [trade_dict(t) for t in rows]

    async def record(
        self,
        user_id: str,
        kind: str,
        summary: str,
        payload: dict[str, Any] | None = None,
        symbol: str = "",
        as_of: date | None = None,
    ) -> int:
        async with self.sessions() as s, s.begin():
            rec = MarketRecord(
                user_id=user_id,
                kind=kind,
                symbol=symbol,
                summary=summary[:2000],
                payload=payload or {},
                as_of=as_of,
            )
            s.add(rec)
            await s.flush()
            return rec.id

    async def records(
        self, user_id: str, kind: str | None = None, symbol: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        async with self.sessions() as s:
            q = select(MarketRecord).where(MarketRecord.user_id == user_id)
            if kind:
                q = q.where(MarketRecord.kind == kind)
            if symbol:
                q = q.where(MarketRecord.symbol == self.data.resolve(symbol).symbol)
            rows = (await s.execute(q.order_by(MarketRecord.id.desc()).limit(limit))).scalars().all()
        return [
            {
                "id": r.id,
                "kind": r.kind,
                "symbol": r.symbol,
                "summary": r.summary,
                "as_of": str(r.as_of) if r.as_of else None,
                "created_at": r.created_at.isoformat() if r.created_at else None,
            }
            for r in rows
        ]


def trade_dict(t: MarketTrade) -> dict[str, Any]:
    return {
        "id": t.id,
        "symbol": t.symbol,
        "market": t.market,
        "side": t.side,
        "quantity": t.quantity,
        "price": t.price,
        "fee": t.fee,
        "tax": t.tax,
        "status": t.status,
        "venue": t.venue,
        "trade_date": str(t.trade_date) if t.trade_date else None,  # the trading session
        "price_as_of": str(t.price_date) if t.price_date else None,  # the bar that priced it
        "realized_pnl": None if t.realized_pnl is None else round(t.realized_pnl, 2),
        "source": t.source,
        "reason": t.reason,
        "created_at": t.created_at.isoformat() if t.created_at else None,
    }
