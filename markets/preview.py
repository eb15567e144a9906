"""What a trade would do, for its approval card: the facts a user needs for informed consent.

Read-only and best effort: the instrument, the last close and its date (the price the paper broker
fills at), the estimated amount with fees and tax, and the cash before and after. A fact that cannot
be had (unknown code, no bars) is left out rather than guessed; the card still shows the raw
arguments.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import Any

from markets.broker import OrderProblem, PaperBroker, rules_for
from markets.portfolio import Portfolio
from markets.rules import notional
from markets.services import MarketServices

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TradePreview:
    code: str
    name: str
    side: str
    quantity: float
    live: bool
    price: float | None = None
    as_of: date | None = None
    amount: float | None = None  # quantity × price
    fees: float | None = None  # commission + tax
    cash: float | None = None
    cash_after: float | None = None
    currency: str = ""
    problem: OrderProblem | None = None  # what the paper broker would run into (T+1, lots, limits…)


async def trade_preview(svc: MarketServices, user_id: str, arguments: dict[str, Any]) -> TradePreview | None:
    code = str(arguments.get("code") or "")
    side = str(arguments.get("side") or "")
    try:
        quantity = float(arguments.get("quantity") or 0)
    except (TypeError, ValueError):
        quantity = 0.0
    live = bool(svc.settings.live)
    try:
        inst = svc.data.resolve(code)
    except Exception:  # noqa: BLE001 — an unknown code: the card says what it can
        return TradePreview(code, "", side, quantity, live)
    market = "crypto" if inst.market == "crypto" else "cn"
    preview = TradePreview(inst.symbol, inst.name, side, quantity, live)
    try:
        bars = svc.data.bars(inst)
        price = float(bars.close[-1])
        day: date = bars.dates[-1].astype(object)
    except Exception as exc:  # noqa: BLE001 — the card is best effort: without a price it has no amount line
        log.debug("no price for the card of %s: %s", code, exc)
        return preview
    amount = notional(quantity, price)
    fee, tax = rules_for(market, svc.settings).order_cost("sell" if side == "sell" else "buy", amount)
    cash = currency = None
    if svc.session_factory is not None and not live:  # the paper account's cash
        try:
            row = (await Portfolio(svc.sessions(), svc.data, svc.settings).balance(user_id, market))[0]
            cash, currency = float(row["cash"]), str(row.get("currency") or "")
        except Exception as exc:  # noqa: BLE001 — the card is best effort: without a balance it has no cash line
            log.debug("no balance for the card: %s", exc)
    problem = None
    if svc.session_factory is not None and not live:
        try:
            broker = PaperBroker(svc.sessions(), svc.data, svc.settings, clock=svc.clock)
            problem = await broker.precheck(
                user_id, inst.symbol, "sell" if side == "sell" else "buy", quantity
            )
        except Exception as exc:  # noqa: BLE001 — the card is best effort: without it, no warning line
            log.debug("no order check for the card: %s", exc)
    after = None
    if cash is not None:
        after = cash - amount - fee - tax if side != "sell" else cash + amount - fee - tax
    return TradePreview(
        inst.symbol,
        inst.name,
        side,
        quantity,
        live,
        price=price,
        as_of=day,
        amount=amount,
        fees=fee + tax,
        cash=cash,
        cash_after=after,
        currency=currency or "",
        problem=problem,
    )
