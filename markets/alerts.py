"""Alerts: standing conditions on a symbol or the user's watchlist, checked after every data refresh.

    store = AlertStore(sessions)
    a = await store.create(user, chat_key, AlertSpec("close_below", 1400, symbol="600519"), baseline)
    fired = await evaluate_alerts(store, md, ["cn"])      # new firings, recorded once each

Conditions (`AlertSpec.kind`):
- close_above / close_below `value`: the close beyond a price; fires once, then the alert is done;
- price_above / price_below `value`: any traded price beyond it — a live price in trading hours
  (markets/alerts_live.py) or, at the latest, the day's high/low after the close; fires once;
- move_pct `value`: a day's move of at least `value` % either way against the previous close — the
  close, or a live price in trading hours (once a day at most: the first that reaches it);
- rsi_above / rsi_below `value`: RSI(14) crossing the level (each crossing);
- cross_above_ma / cross_below_ma `value`: the close crossing its `value`-day moving average;
- wyckoff `event`: a new Wyckoff event (Spring, SOS, UTAD, ...) appearing; failed ones do not count.

Only bars after `baseline` (the newest bar when the alert was set) can trigger. A firing is a row
unique per (alert, symbol, bar), so two evaluations of the same bars — a retried job, a second
replica, `tapebot data update` next to the bot — record it once; delivery (bot/alert_delivery.py) takes
each recorded firing once. A live-price firing is keyed by its session's date, so the refresh after
that close does not fire the same alert again for that day.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError

from markets.errors import MarketError, NoData
from markets.models import (
    MarketAlert,
    MarketAlertTrigger,
    MarketHolding,
    MarketPosition,
    MarketWatch,
    SessionFactory,
)

if TYPE_CHECKING:
    from markets.bars import Bars
    from markets.data import MarketData

log = logging.getLogger(__name__)

AlertKind = Literal[
    "close_above",
    "close_below",
    "price_above",
    "price_below",
    "move_pct",
    "rsi_above",
    "rsi_below",
    "cross_above_ma",
    "cross_below_ma",
    "wyckoff",
]
KINDS: tuple[str, ...] = get_args(AlertKind)
WYCKOFF_EVENTS = ("SC", "BC", "AR", "ST", "Spring", "UT", "UTAD", "SOS", "SOW", "LPS", "LPSY")
ONE_SHOT = {"close_above", "close_below", "price_above", "price_below"}
LIVE_KINDS = ("price_above", "price_below", "move_pct")  # also checked against live prices
MAX_ACTIVE = 50  # per user: an alert is checked after every refresh


@dataclass(frozen=True, slots=True)
class AlertSpec:
    kind: str
    value: float = 0.0
    symbol: str = ""  # "" = the user's watchlist
    event: str = ""

    def check(self) -> AlertSpec:
        """Raise MarketError with the reason when the condition cannot be checked as given."""
        if self.kind not in KINDS:
            raise MarketError(f"unknown alert kind {self.kind!r}; one of {', '.join(KINDS)}")
        if self.kind == "wyckoff":
            names = {e.lower(): e for e in WYCKOFF_EVENTS}
            if self.event.lower() not in names:
                raise MarketError(f"unknown Wyckoff event {self.event!r}; one of {', '.join(WYCKOFF_EVENTS)}")
            return AlertSpec(self.kind, 0.0, self.symbol, names[self.event.lower()])
        if not self.value > 0:
            raise MarketError(f"{self.kind} needs a positive `value`")
        if self.kind in ("rsi_above", "rsi_below") and not self.value < 100:
            raise MarketError("an RSI level is between 0 and 100")
        if self.kind in ("cross_above_ma", "cross_below_ma") and not 2 <= self.value <= 250:
            raise MarketError("the moving average's length is 2 to 250 days")
        return self


def num(x: float) -> str:
    """A price or level as given, every digit kept (`:g` would show 151234.5 as 151234)."""
    text = f"{x:.8f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def describe(kind: str, value: float, event: str, lang: str = "en") -> str:
    """The condition in words, exactly as it is checked."""
    v = num(value)
    zh = lang.startswith("zh")
    texts = {
        "close_above": (f"close above {v}", f"收盘价高于 {v}"),
        "close_below": (f"close below {v}", f"收盘价低于 {v}"),
        "price_above": (f"price trades above {v}", f"价格高于 {v}"),
        "price_below": (f"price trades below {v}", f"价格低于 {v}"),
        "move_pct": (f"daily move of {v}% or more (up or down)", f"单日涨跌幅达到 {v}%（涨或跌）"),
        "rsi_above": (f"RSI(14) crosses above {v}", f"RSI(14) 上穿 {v}"),
        "rsi_below": (f"RSI(14) crosses below {v}", f"RSI(14) 下穿 {v}"),
        "cross_above_ma": (f"close crosses above its {int(value)}-day moving average", f"收盘价上穿 {int(value)} 日均线"),
        "cross_below_ma": (f"close crosses below its {int(value)}-day moving average", f"收盘价下穿 {int(value)} 日均线"),
        "wyckoff": (f"a new Wyckoff {event} event", f"出现新的威科夫 {event} 事件"),
    }  # fmt: skip
    en, cn = texts[kind]
    return cn if zh else en


@dataclass(frozen=True, slots=True)
class Alert:
    id: int
    user_id: str
    chat_key: str
    symbol: str
    market: str
    kind: str
    value: float
    event: str
    baseline: date | None
    status: str

    @classmethod
    def of(cls, r: MarketAlert) -> Alert:
        return cls(
            r.id, r.user_id, r.chat_key, r.symbol, r.market, r.kind, r.value, r.event, r.baseline, r.status
        )

    def condition(self, lang: str = "en") -> str:
        where = self.symbol or ("自选股" if lang.startswith("zh") else "watchlist")
        return f"{where}: {describe(self.kind, self.value, self.event, lang)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "symbol": self.symbol or "watchlist",
            "market": self.market,
            "condition": self.condition(),
            "status": self.status,
            "checks_bars_after": str(self.baseline) if self.baseline else None,
        }


@dataclass(frozen=True, slots=True)
class Firing:
    """A recorded trigger: what to deliver."""

    id: int
    alert: Alert
    symbol: str
    bar_date: date
    observed: float
    status: str = "pending"


class AlertStore:
    def __init__(self, sessions: SessionFactory):
        self.sessions = sessions

    async def create(
        self, user_id: str, chat_key: str, spec: AlertSpec, market: str, baseline: date | None
    ) -> Alert:
        spec = spec.check()
        async with self.sessions() as s, s.begin():
            n = await s.scalar(
                select(func.count()).where(MarketAlert.user_id == user_id, MarketAlert.status == "active")
            )
            if (n or 0) >= MAX_ACTIVE:
                raise MarketError(f"{MAX_ACTIVE} alerts are active already: remove one first")
            row = MarketAlert(
                user_id=user_id, chat_key=chat_key, symbol=spec.symbol, market=market, kind=spec.kind,
                value=spec.value, event=spec.event, baseline=baseline, status="active",
            )  # fmt: skip
            s.add(row)
            await s.flush()
            return Alert.of(row)

    async def alerts(self, user_id: str, include_done: bool = False) -> list[Alert]:
        async with self.sessions() as s:
            q = select(MarketAlert).where(MarketAlert.user_id == user_id)
            q = q.where(MarketAlert.status.in_(("active", "done") if include_done else ("active",)))
            return [Alert.of(r) for r in (await s.execute(q.order_by(MarketAlert.id))).scalars()]

    async def remove(self, user_id: str, alert_id: int) -> Alert:
        async with self.sessions() as s, s.begin():
            row = await s.get(MarketAlert, alert_id)
            if row is None or row.user_id != user_id or row.status == "removed":
                raise MarketError(f"no alert #{alert_id} of yours is set")
            row.status = "removed"
            return Alert.of(row)

    async def active(self, markets: list[str]) -> list[Alert]:
        async with self.sessions() as s:
            q = select(MarketAlert).where(MarketAlert.status == "active", MarketAlert.market.in_(markets))
            return [Alert.of(r) for r in (await s.execute(q.order_by(MarketAlert.id))).scalars()]

    # -- the watchlist ----------------------------------------------------------------------------
    async def watch(self, user_id: str, symbol: str, market: str) -> bool:
        try:
            async with self.sessions() as s, s.begin():
                s.add(MarketWatch(user_id=user_id, symbol=symbol, market=market))
            return True
        except IntegrityError:
            return False  # already on the list

    async def unwatch(self, user_id: str, symbol: str) -> bool:
        async with self.sessions() as s, s.begin():
            row = (
                await s.execute(
                    select(MarketWatch).where(MarketWatch.user_id == user_id, MarketWatch.symbol == symbol)
                )
            ).scalar_one_or_none()
            if row is None:
                return False
            await s.delete(row)
            return True

    async def watchlist(self, user_id: str, market: str | None = None) -> list[str]:
        """The watched symbols, and the paper positions and recorded holdings (they are watched too)."""
        out: dict[str, None] = {}
        async with self.sessions() as s:
            queries = [select(MarketWatch.symbol, MarketWatch.market).where(MarketWatch.user_id == user_id)]
            for held in (MarketPosition, MarketHolding):
                queries.append(
                    select(held.symbol, held.market).where(held.user_id == user_id, held.quantity > 0)
                )
            for q in queries:
                for sym, m in (await s.execute(q)).all():
                    if market is None or m == market:
                        out[sym] = None
        return [*out]

    # -- firings ----------------------------------------------------------------------------------
    async def record(self, alert: Alert, symbol: str, bar_date: date, observed: float) -> Firing | None:
        """Record a firing; None when it was recorded before (by this or another process)."""
        try:
            async with self.sessions() as s, s.begin():
                if alert.kind in ONE_SHOT:  # done by whoever records first: one firing in all
                    res = await s.execute(
                        update(MarketAlert)
                        .where(MarketAlert.id == alert.id, MarketAlert.status == "active")
                        .values(status="done")
                    )
                    if getattr(res, "rowcount", 0) != 1:
                        return None
                row = MarketAlertTrigger(
                    alert_id=alert.id, chat_key=alert.chat_key, symbol=symbol, bar_date=bar_date,
                    observed=observed, status="pending",
                )  # fmt: skip
                s.add(row)
                await s.flush()
                return Firing(row.id, alert, symbol, bar_date, observed)
        except IntegrityError:
            return None

    async def pending(self, limit: int = 200) -> list[Firing]:
        async with self.sessions() as s:
            rows = (
                await s.execute(
                    select(MarketAlertTrigger, MarketAlert)
                    .join(MarketAlert, MarketAlert.id == MarketAlertTrigger.alert_id)
                    .where(MarketAlertTrigger.status == "pending")
                    .order_by(MarketAlertTrigger.id)
                    .limit(limit)
                )
            ).all()
        return [Firing(t.id, Alert.of(a), t.symbol, t.bar_date, t.observed, t.status) for t, a in rows]

    async def claim(self, firing_id: int) -> bool:
        """pending → sending, for exactly one caller (compare-and-set)."""
        async with self.sessions() as s, s.begin():
            res = await s.execute(
                update(MarketAlertTrigger)
                .where(MarketAlertTrigger.id == firing_id, MarketAlertTrigger.status == "pending")
                .values(status="sending", attempts=MarketAlertTrigger.attempts + 1)
            )
            return bool(getattr(res, "rowcount", 0) == 1)

    async def finish(self, firing_id: int, *, delivered: bool, error: str = "", at: datetime | None = None,
                     give_up_after: int = 5) -> None:  # fmt: skip
        async with self.sessions() as s, s.begin():
            row = await s.get(MarketAlertTrigger, firing_id)
            if row is None:
                return
            if delivered:
                row.status, row.delivered_at, row.error = "delivered", at or datetime.now(UTC), ""
            else:  # the send failed outright: nothing reached the chat, so it may be tried again
                row.status = "failed" if row.attempts >= give_up_after else "pending"
                row.error = error[:500]

    async def delivered_since(self, chat_key: str, since: datetime) -> int:
        async with self.sessions() as s:
            n = await s.scalar(
                select(func.count()).where(
                    MarketAlertTrigger.chat_key == chat_key,
                    MarketAlertTrigger.status.in_(("delivered", "sending")),
                    or_(MarketAlertTrigger.delivered_at >= since, MarketAlertTrigger.delivered_at.is_(None)),
                )
            )
        return int(n or 0)


# ---- evaluation -----------------------------------------------------------------------------------
def fires(alert: Alert, bars: Bars) -> list[tuple[date, float]]:
    """The (bar date, observed value) firings of `alert` on `bars` after its baseline."""
    from markets.indicators import rsi, sma

    if len(bars) < 2:
        return []
    last = bars.last_date
    if last is None or (alert.baseline is not None and last <= alert.baseline):
        return []
    c = bars.close
    now, prev = float(c[-1]), float(c[-2])
    hit: float | None = None
    if (alert.kind == "close_above" and now > alert.value) or (
        alert.kind == "close_below" and now < alert.value
    ):
        hit = now
    elif alert.kind == "price_above" and float(bars.high[-1]) > alert.value:
        hit = float(bars.high[-1])
    elif alert.kind == "price_below" and float(bars.low[-1]) < alert.value:
        hit = float(bars.low[-1])
    elif alert.kind == "move_pct":
        move = (now / prev - 1) * 100
        hit = round(move, 2) if abs(move) >= alert.value else None
    elif alert.kind in ("rsi_above", "rsi_below"):
        r = rsi(c, 14)
        a, b = float(r[-2]), float(r[-1])
        if a == a and b == b:
            crossed = (a <= alert.value < b) if alert.kind == "rsi_above" else (a >= alert.value > b)
            hit = round(b, 2) if crossed else None
    elif alert.kind in ("cross_above_ma", "cross_below_ma"):
        ma = sma(c, int(alert.value))
        m0, m1 = float(ma[-2]), float(ma[-1])
        if m0 == m0 and m1 == m1:
            up = prev <= m0 and now > m1
            down = prev >= m0 and now < m1
            hit = now if (up if alert.kind == "cross_above_ma" else down) else None
    elif alert.kind == "wyckoff":
        return _events(alert, bars)
    return [] if hit is None else [(last, hit)]


def _events(alert: Alert, bars: Bars) -> list[tuple[date, float]]:
    from markets.wyckoff import analyze

    try:
        a = analyze(bars)
    except (NoData, ValueError):
        return []
    lo = max(alert.baseline or date.min, (bars.last_date or date.min) - timedelta(days=10))
    return [
        (e.date, float(e.price))
        for e in a.events
        if e.kind == alert.event and e.date > lo and e.status != "failed"
    ]


async def evaluate_alerts(store: AlertStore, md: MarketData, markets: list[str]) -> list[Firing]:
    """Check every active alert of these markets against the newest bars; record new firings."""
    out: list[Firing] = []
    cache: dict[str, Bars | None] = {}
    for alert in await store.active(markets):
        symbols = [alert.symbol] if alert.symbol else await store.watchlist(alert.user_id, alert.market)
        for sym in symbols:
            if sym not in cache:
                try:
                    cache[sym] = await md.abars(sym)
                except MarketError as exc:
                    log.warning("alert #%s: no bars for %s: %s", alert.id, sym, exc)
                    cache[sym] = None
            bars = cache[sym]
            if bars is None:
                continue
            for day, observed in await asyncio.to_thread(fires, alert, bars):
                got = await store.record(alert, sym, day, observed)
                if got is not None:
                    out.append(got)
            if alert.kind in ONE_SHOT and any(f.alert.id == alert.id for f in out):
                break
    return out
