"""Price alerts against live prices, in trading hours: the intraday poll's evaluation.

    firings = await evaluate_live(store, md, "cn", now)   # [] outside trading hours

Which alerts: price_above / price_below (the session's high / low so far against the level) and
move_pct (the latest price against the previous daily close), on symbols that have an active
alert of these kinds (directly or through the watchlist) — nothing else is fetched. close_above /
close_below mean the close and are left to the refresh after it; RSI, moving-average and Wyckoff
conditions are read on daily bars only.

When: A-shares in the continuous sessions (09:30–11:30, 13:00–15:00 Asia/Shanghai) of a trading
day of the calendar; crypto always. A firing is recorded under its session's date through the
same unique (alert, symbol, bar date) row as the daily check, so a second poll, a second replica
or the refresh after the close never records the same day's trigger again.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, time

import numpy as np

from markets.alerts import LIVE_KINDS, ONE_SHOT, Alert, AlertStore, Firing
from markets.calendar import EXCHANGE_TZ
from markets.data import MarketData
from markets.errors import MarketError
from markets.quotes import Quote, session_date

log = logging.getLogger(__name__)

CN_SESSIONS = ((time(9, 30), time(11, 30)), (time(13, 0), time(15, 0)))


def live_session(md: MarketData, market: str, now: datetime) -> date | None:
    """The session trading at `now`, or None when the market is closed."""
    if market == "crypto":
        return session_date("crypto", now)
    if market != "cn":
        return None
    local = now.astimezone(EXCHANGE_TZ)
    if not md.calendar("cn").is_trading_day(local.date()):
        return None
    t = local.time()
    return local.date() if any(a <= t <= b for a, b in CN_SESSIONS) else None


def live_fire(alert: Alert, q: Quote, prev_close: float | None) -> float | None:
    """The observed value when `alert` is met by the live quote, else None."""
    if alert.baseline is not None and q.session <= alert.baseline:
        return None
    if alert.kind == "price_above":
        return q.high if q.high > alert.value else None
    if alert.kind == "price_below":
        return q.low if q.low < alert.value else None
    if alert.kind == "move_pct" and prev_close:
        move = (q.price / prev_close - 1) * 100
        return round(move, 2) if abs(move) >= alert.value else None
    return None


async def _prev_close(md: MarketData, symbol: str, session: date) -> float | None:
    """The last daily close before the session (the stored bars, as the refresh left them)."""
    bars = await md.abars(symbol)
    before = bars.dates < np.datetime64(session, "D")
    return float(bars.close[before][-1]) if before.any() else None


async def evaluate_live(store: AlertStore, md: MarketData, market: str, now: datetime) -> list[Firing]:
    """Check the live-price alerts of one market against its live quotes; record new firings."""
    alerts = [a for a in await store.active([market]) if a.kind in LIVE_KINDS]
    if not alerts:
        return []  # one indexed query, and the market data is not even loaded
    session = live_session(md, market, now)
    if session is None or not md.has_live_quotes(market):
        return []
    targets: dict[str, list[Alert]] = {}
    for a in alerts:
        for sym in [a.symbol] if a.symbol else await store.watchlist(a.user_id, market):
            targets.setdefault(sym, []).append(a)
    out: list[Firing] = []
    done: set[int] = set()  # one-shot alerts fired in this poll (a watchlist alert fires once)
    for sym, watching in targets.items():
        try:
            q = await md.aquote(sym, now)
        except MarketError as exc:  # nothing traded yet, suspended, provider down: the next poll tries
            log.info("live alerts: no price for %s: %s", sym, exc)
            continue
        except Exception as exc:  # noqa: BLE001 — one symbol's provider failure never stops the poll
            log.warning("live alerts: %s quote failed: %s", sym, exc)
            continue
        if q.session != session:
            continue  # a price of an earlier session (suspended today): not today's move
        prev: float | None = None
        if any(a.kind == "move_pct" for a in watching):
            try:
                prev = await _prev_close(md, sym, session)
            except MarketError as exc:
                log.info("live alerts: no daily bars for %s: %s", sym, exc)
        for a in watching:
            observed = None if a.id in done else live_fire(a, q, prev)
            if observed is None:
                continue
            got = await store.record(a, sym, session, observed)
            if got is not None:
                out.append(got)
                if a.kind in ONE_SHOT:
                    done.add(a.id)
    return out
