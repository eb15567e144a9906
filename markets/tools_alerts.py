"""`manage_alerts`: price, indicator and Wyckoff-event alerts on a symbol or the watchlist, and the
watchlist itself. Setting or removing one needs no approval (it trades nothing); the result states
the exact condition as it will be checked and the bar it is checked after. Registered on
`markets.toolset.market_tools` (imported at the end of markets.tools)."""

from __future__ import annotations

from typing import Any, Literal

from agent.tools.registry import ToolContext
from markets.errors import MarketError
from markets.services import require
from markets.toolset import age_note, market_tools


@market_tools.tool(side_effect="mutating")
async def manage_alerts(
    ctx: ToolContext,
    action: Literal["create", "list", "remove", "watch", "unwatch", "watchlist"],
    kind: Literal[
        "close_above", "close_below", "price_above", "price_below", "move_pct", "rsi_above", "rsi_below",
        "cross_above_ma", "cross_below_ma", "wyckoff",
    ] | None = None,
    code: str | None = None,
    value: float | None = None,
    event: str | None = None,
    alert_id: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Price and signal alerts delivered into this chat on a new daily bar (price and % move also live in trading hours), on one symbol or the watchlist; also manages the watchlist.

    Conditions: close above/below a price (the day's close), price above/below (any traded price: live in trading hours with a live provider, else the day's high/low), a day's move of N % either way (also live), RSI(14) crossing a level, the close crossing its N-day moving average, a new Wyckoff event. Checked after each data refresh; no approval needed.

    Args:
        action: create, list, remove (alert_id), watch (code), unwatch (code), watchlist.
        kind: the condition for create.
        code: the stock or coin (code, name, BTC); omit for the whole watchlist.
        value: the price (close_/price_ above/below), the % move (move_pct), the RSI level, or the moving average's days.
        event: the Wyckoff event for kind=wyckoff (Spring, SOS, LPS, UTAD, SOW, ...).
        alert_id: the alert to remove.
    """
    # here, not at module level: the alert store's ORM models (~50 ms of import) load with the
    # first call, not with every process that registers the tools
    from markets.alerts import LIVE_KINDS, AlertSpec, AlertStore, num

    svc = require(ctx)
    store = AlertStore(svc.sessions())
    user = ctx.book
    if action == "list":
        return {
            "alerts": [a.to_dict() for a in await store.alerts(user)],
            "watchlist": await store.watchlist(user),
        }
    if action == "watchlist":
        return {"watchlist": await store.watchlist(user)}
    if action == "remove":
        if alert_id is None:
            raise MarketError("remove needs `alert_id` (see action=list)")
        a = await store.remove(user, int(alert_id))
        return {"removed": a.to_dict(), "note": f"alert #{a.id} removed: {a.condition()}"}
    if action in ("watch", "unwatch"):
        if not code:
            raise MarketError(f"{action} needs `code`")
        inst = svc.data.resolve(code)
        if action == "watch":
            added = await store.watch(user, inst.symbol, inst.market)
            note = f"{inst.label} {'added to' if added else 'is already on'} the watchlist"
        else:
            removed = await store.unwatch(user, inst.symbol)
            note = f"{inst.label} {'removed from' if removed else 'was not on'} the watchlist"
        return {"watchlist": await store.watchlist(user), "note": note, "refs": {"stock": inst.symbol}}
    if kind is None:
        raise MarketError("create needs `kind`")
    if not ctx.chat_key:
        raise MarketError("alerts are delivered into a chat: set them from one")
    spec = AlertSpec(kind, float(value or 0), "", event or "").check()  # a bad condition fails first
    market, symbol, now_note = "cn", "", ""
    if code:
        inst = svc.data.resolve(code)
        if inst.market == "index":
            raise MarketError("alerts watch stocks and coins; an index is not traded")
        symbol, market = inst.symbol, inst.market
        bars = await svc.data.abars(inst)  # its own newest bar: only later ones can trigger it
        as_of = bars.last_date
        now_note = f" (close {num(float(bars.close[-1]))} on {as_of})"
    elif not await store.watchlist(user):
        raise MarketError("the watchlist is empty: watch a symbol first (action=watch), or give `code`")
    else:
        as_of = svc.data.as_of(market)
    spec = AlertSpec(spec.kind, spec.value, symbol, spec.event)
    a = await store.create(user, ctx.chat_key, spec, market, as_of)
    live = ""
    if spec.kind in LIVE_KINDS and svc.settings.alert_poll_s > 0 and svc.data.has_live_quotes(market):
        live = f", and on live prices every {svc.settings.alert_poll_s:g} s in trading hours"
    return {
        "alert": a.to_dict(),
        "confirmed": f"alert #{a.id} set: {a.condition()} — checked on each new daily bar after "
        f"{age_note(as_of, svc.now())}{now_note}{live}",
        "refs": {"stock": symbol} if symbol else {},
    }
