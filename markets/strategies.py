"""Strategies (templates) and traders (a strategy running on the paper broker), after NOFXi:
a strategy is an independent resource; a trader binds one to an account and runs it on schedule.

A strategy config drives both the backtester and traders:
entries = the chosen Wyckoff triggers (signals.compute) on liquid names, optionally only above a
rising MA50 over MA200; exits = SOW/upthrust triggers, stops, trailing stop and a holding limit.
Two benchmark strategies sit beside them: `entry = "buy_and_hold"` and `entry = "ma_cross"`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from markets.data import MarketData
from markets.errors import MarketError, NotFound
from markets.indicators import sma
from markets.models import MarketStrategy, MarketTrader, SessionFactory
from markets.panel import Panel
from markets.wyckoff import signals
from markets.wyckoff.params import DEFAULT_PARAMS, WyckoffParams

if TYPE_CHECKING:  # both import this module's neighbours: named for annotations only
    from markets.broker import PaperBroker
    from markets.rules import Side
    from markets.services import MarketServices

log = logging.getLogger(__name__)

Trigger = Literal["spring", "sos", "lps"]
ExitTrigger = Literal["sow", "upthrust"]
Benchmark = Literal["buy_and_hold", "ma_cross"]
BENCHMARKS = ("buy_and_hold", "ma_cross")
MAX_NAME_CHARS = 128  # a strategy's or a trader's name (the column's length)


def checked_name(name: str) -> str:
    """A name the model chose, refused with a clear error when the column could not hold it."""
    if len(name) > MAX_NAME_CHARS:
        raise MarketError(
            f"a name can be at most {MAX_NAME_CHARS} characters long (this one has {len(name)})"
        )
    return name


class StrategyConfig(BaseModel):
    """A strategy template. Every field has a default (`manage_strategy get_default_config`)."""

    market: Literal["cn", "crypto"] = "cn"
    universe: list[str] = Field(default_factory=list, description="codes; empty = every instrument with data")
    # Wyckoff triggers, or a benchmark strategy: "buy_and_hold" (buy on the first tradable bar, hold
    # to the end) or "ma_cross" (buy when the ma_fast SMA crosses above the ma_slow SMA, sell when it
    # crosses below). Benchmarks ignore `exit`, `trend_filter` and `min_amount`.
    entry: list[Trigger] | Benchmark = ["spring", "sos", "lps"]
    ma_fast: int = Field(default=5, ge=1, le=250)
    ma_slow: int = Field(default=20, ge=2, le=500)
    exit: list[ExitTrigger] = ["sow", "upthrust"]
    trend_filter: bool = True  # enter only when MA50 > MA200 or price > MA200
    min_amount: float = 2e8  # average daily turnover (CNY/USDT) over 20 bars
    max_positions: int = Field(default=10, ge=1, le=100)
    position_pct: float = Field(default=0.10, gt=0, le=1)
    stop_pct: float | None = Field(default=0.07, ge=0, le=0.5)
    trail_after: float | None = 0.15
    trail_pct: float = 0.10
    max_hold: int | None = 60
    description: str = ""
    prompt: str = ""  # free-text guidance for AI decisions (NOFXi "strategy prompt")

    @field_validator("entry", mode="before")
    @classmethod
    def _one_entry(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)) and len(v) == 1 and v[0] in BENCHMARKS:
            return v[0]
        if isinstance(v, str) and v not in BENCHMARKS:
            return [v]
        return v

    @model_validator(mode="after")
    def _fast_below_slow(self) -> StrategyConfig:
        if self.entry == "ma_cross" and self.ma_fast >= self.ma_slow:
            raise ValueError(f"ma_fast ({self.ma_fast}) must be shorter than ma_slow ({self.ma_slow})")
        return self

    @property
    def benchmark(self) -> bool:
        return isinstance(self.entry, str)


DEFAULT_STRATEGY = StrategyConfig()


@dataclass(frozen=True, slots=True)
class StrategySignals:
    entries: np.ndarray
    exits: np.ndarray
    raw: signals.Signals | None  # None for the benchmark strategies


def ma_cross(close: np.ndarray, fast: int, slow: int) -> tuple[np.ndarray, np.ndarray]:
    """(up, down) crossings of the fast over the slow SMA at each close. As backtrader's CrossOver: a
    cross compares today's difference with the last non-zero one before it, so a day of equal averages
    neither makes nor hides a cross. The averages are rounded to 1e-8 (prices have 2 decimals, so
    real differences are far larger) so that float noise cannot fake a non-zero difference."""
    f, s = np.round(sma(close, fast), 8), np.round(sma(close, slow), 8)
    d = f - s
    sign = np.sign(d)
    valid = ~np.isnan(d)
    # last non-zero sign up to each bar (NaN where none yet), carried forward along the last axis
    nz = np.where(valid & (sign != 0), sign, np.nan)
    idx = np.where(~np.isnan(nz), np.arange(d.shape[-1]), 0)
    np.maximum.accumulate(idx, axis=-1, out=idx)
    carried = np.take_along_axis(nz, idx, axis=-1)
    prev = np.concatenate([np.full((*d.shape[:-1], 1), np.nan), carried[..., :-1]], axis=-1)
    with np.errstate(invalid="ignore"):
        up = valid & (d > 0) & (prev < 0)
        down = valid & (d < 0) & (prev > 0)
    return up, down


def strategy_signals(
    panel: Panel,
    cfg: StrategyConfig,
    limits: np.ndarray | None = None,
    params: WyckoffParams | None = None,
    days: np.ndarray | None = None,
    start: int | None = None,
) -> StrategySignals:
    """Entry and exit masks. With `start` (a backtest), buy-and-hold's entry is each stock's first
    bar from `start` on, once: a buy that no cash can pay for is reported, not retried every day
    until a cheaper bar; without it (a running trader) every bar is an entry."""
    if cfg.entry == "buy_and_hold":  # nothing sells
        entries = ~np.isnan(panel.close)
        if start is not None:
            entries[:, :start] = False
            first = np.cumsum(entries, axis=1) == 1
            entries &= first
        return StrategySignals(entries, np.zeros_like(entries), None)
    if cfg.entry == "ma_cross":
        up, down = ma_cross(panel.close, cfg.ma_fast, cfg.ma_slow)
        return StrategySignals(up, down, None)
    p = params or DEFAULT_PARAMS
    s = signals.compute(panel.open, panel.high, panel.low, panel.close, panel.volume, p, limits, days=days)
    assert not isinstance(cfg.entry, str)
    entries = s.any_entry(tuple(cfg.entry))
    amt = sma(np.nan_to_num(panel.amount, nan=0.0), 20)
    entries &= amt >= cfg.min_amount
    if cfg.trend_filter:
        m50, m200 = sma(panel.close, 50), sma(panel.close, 200)
        with np.errstate(invalid="ignore"):
            entries &= (m50 > m200) | (panel.close > m200) | np.isnan(m200)
    exits = np.zeros_like(entries)
    for k in cfg.exit:
        exits |= getattr(s, k)
    return StrategySignals(entries, exits, s)


def limits_for(data: MarketData, symbols: list[str]) -> np.ndarray:
    out = np.full(len(symbols), np.nan)
    for i, s in enumerate(symbols):
        try:
            lim = data.resolve(s).limit_pct
        except NotFound:
            lim = 0.10
        out[i] = np.nan if lim is None else lim
    return out


# ---- storage ------------------------------------------------------------------------------------
def strategy_dict(s: MarketStrategy) -> dict[str, Any]:
    return {"id": s.id, "name": s.name, "is_active": s.is_active, "config": s.config}


def trader_dict(t: MarketTrader) -> dict[str, Any]:
    return {
        "id": t.id,
        "name": t.name,
        "strategy_id": t.strategy_id,
        "market": t.market,
        "status": t.status,
        "config": t.config,
        "last_run_on": str(t.last_run_on) if t.last_run_on else None,
        "last_result": t.last_result,
    }


class StrategyStore:
    def __init__(self, sessions: SessionFactory):
        self.sessions = sessions

    async def strategies(self, user_id: str) -> list[dict[str, Any]]:
        async with self.sessions() as s:
            rows = (
                (
                    await s.execute(
                        select(MarketStrategy)
                        .where(MarketStrategy.user_id == user_id)
                        .order_by(MarketStrategy.id)
                    )
                )
                .scalars()
                .all()
            )
            return [strategy_dict(r) for r in rows]

    async def _get(self, s: AsyncSession, user_id: str, ref: int | str) -> MarketStrategy:
        q = select(MarketStrategy).where(MarketStrategy.user_id == user_id)
        q = (
            q.where(MarketStrategy.id == int(ref))
            if str(ref).isdigit()
            else q.where(MarketStrategy.name == str(ref))
        )
        row = (await s.execute(q)).scalar_one_or_none()
        if row is None:
            names = [
                r.name
                for r in (
                    await s.execute(select(MarketStrategy).where(MarketStrategy.user_id == user_id))
                ).scalars()
            ]
            raise NotFound(str(ref), names[:5], what="strategy")
        return row

    async def get(self, user_id: str, ref: int | str) -> dict[str, Any]:
        async with self.sessions() as s:
            return strategy_dict(await self._get(s, user_id, ref))

    async def create(self, user_id: str, name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
        cfg = StrategyConfig.model_validate(config or {})
        async with self.sessions() as s, s.begin():
            exists = (
                await s.execute(
                    select(MarketStrategy).where(
                        MarketStrategy.user_id == user_id, MarketStrategy.name == name
                    )
                )
            ).scalar_one_or_none()
            if exists:
                raise MarketError(f"a strategy named {name!r} exists already (id {exists.id})")
            row = MarketStrategy(
                user_id=user_id, name=checked_name(name), config=cfg.model_dump(), is_active=False
            )
            s.add(row)
            await s.flush()
            return strategy_dict(row)

    async def update(
        self, user_id: str, ref: int | str, config: dict[str, Any] | None = None, name: str | None = None
    ) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            row = await self._get(s, user_id, ref)
            if config:
                row.config = StrategyConfig.model_validate({**row.config, **config}).model_dump()
            if name:
                row.name = checked_name(name)
            await s.flush()
            return strategy_dict(row)

    async def delete(self, user_id: str, ref: int | str) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            row = await self._get(s, user_id, ref)
            out = strategy_dict(row)
            for t in (
                await s.execute(select(MarketTrader).where(MarketTrader.strategy_id == row.id))
            ).scalars():
                t.strategy_id, t.status = None, "stopped"
            await s.delete(row)
            return out

    async def activate(self, user_id: str, ref: int | str) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            row = await self._get(s, user_id, ref)
            for other in (
                await s.execute(select(MarketStrategy).where(MarketStrategy.user_id == user_id))
            ).scalars():
                other.is_active = other.id == row.id
            await s.flush()
            return strategy_dict(row)

    async def duplicate(self, user_id: str, ref: int | str, name: str | None = None) -> dict[str, Any]:
        src = await self.get(user_id, ref)
        return await self.create(user_id, name or f"{src['name']} copy", src["config"])

    # -- traders ----------------------------------------------------------------------------------
    async def traders(self, user_id: str) -> list[dict[str, Any]]:
        async with self.sessions() as s:
            rows = (
                (
                    await s.execute(
                        select(MarketTrader).where(MarketTrader.user_id == user_id).order_by(MarketTrader.id)
                    )
                )
                .scalars()
                .all()
            )
            return [trader_dict(r) for r in rows]

    async def _trader(self, s: AsyncSession, user_id: str, ref: int | str) -> MarketTrader:
        q = select(MarketTrader).where(MarketTrader.user_id == user_id)
        q = (
            q.where(MarketTrader.id == int(ref))
            if str(ref).isdigit()
            else q.where(MarketTrader.name == str(ref))
        )
        row = (await s.execute(q)).scalar_one_or_none()
        if row is None:
            raise NotFound(str(ref), what="trader")
        return row

    async def create_trader(
        self, user_id: str, name: str, strategy: int | str, config: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        checked_name(name)
        async with self.sessions() as s, s.begin():
            st = await self._get(s, user_id, strategy)
            row = MarketTrader(
                user_id=user_id,
                name=name,
                strategy_id=st.id,
                market=st.config.get("market", "cn"),
                status="stopped",
                config=config or {},
                last_result="",
            )
            s.add(row)
            await s.flush()
            return trader_dict(row)

    async def update_trader(
        self,
        user_id: str,
        ref: int | str,
        *,
        strategy: int | str | None = None,
        config: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            row = await self._trader(s, user_id, ref)
            if strategy is not None:
                st = await self._get(s, user_id, strategy)
                row.strategy_id, row.market = st.id, st.config.get("market", "cn")
            if config:
                row.config = {**(row.config or {}), **config}
            if status:
                if status == "running" and row.strategy_id is None:
                    raise MarketError("the trader has no strategy; bind one first (manage_trader update)")
                row.status = status
            await s.flush()
            return trader_dict(row)

    async def delete_trader(self, user_id: str, ref: int | str) -> dict[str, Any]:
        async with self.sessions() as s, s.begin():
            row = await self._trader(s, user_id, ref)
            out = trader_dict(row)
            await s.delete(row)
            return out


async def run_trader_once(
    store: StrategyStore, broker: PaperBroker, data: MarketData, user_id: str, trader_ref: int | str
) -> dict[str, Any]:
    """One scheduled step of a running trader: evaluate its strategy as of the last bar and send
    paper orders. Keys are `trader:<id>:<session>:<symbol>:<side>` with the wall-clock trading
    session (the broker's injected-clock "today", as T+1 uses), so a re-run in the same session (a
    restart, a double-fired job) never trades twice while a running trader still trades once per
    session on data whose last bar does not move (the bundled set). A symbol with an order already
    waiting at a price limit on the same side gets no second order; the opposite signal cancels the
    trader's own waiting order (as the backtester's pending orders)."""
    async with store.sessions() as s:
        t = await store._trader(s, user_id, trader_ref)
        if t.status != "running":
            return {"trader": t.name, "skipped": f"status {t.status}"}
        st = await store._get(s, user_id, t.strategy_id) if t.strategy_id else None
        trader_id, trader_name = t.id, t.name
    if st is None:
        return {"trader": trader_name, "skipped": "no strategy"}
    cfg = StrategyConfig.model_validate(st.config)
    syms = cfg.universe or [i.symbol for i in data.universe(cfg.market)]
    panel = data.panel(syms, cfg.market, min_bars=60)
    T = panel.shape[1]
    sig = strategy_signals(panel, cfg, limits_for(data, panel.symbols), days=np.arange(max(0, T - 2), T))
    as_of: date = panel.dates[-1].astype(object)
    session: date = broker.session_day(cfg.market)
    await broker.retry_waiting(user_id)
    held = {p.symbol: p for p in await broker.portfolio.positions(user_id, cfg.market)}
    # As in the backtester, the opposite signal cancels this trader's order waiting at a limit.
    index = {sym: i for i, sym in enumerate(panel.symbols)}
    cancelled = []
    waiting = set()
    for w in await broker.portfolio.waiting(user_id, cfg.market):
        i = index.get(w["symbol"])
        mine = w["source"] == f"trader:{trader_id}" and i is not None
        if mine and (sig.exits[i, -1] if w["side"] == "buy" else sig.entries[i, -1]):
            r = await broker.cancel(user_id, w["id"], by=f"the opposite signal as of {as_of}")
            cancelled.append(r.trade)
            continue
        waiting.add((w["symbol"], w["side"]))
    buys_waiting = sum(side == "buy" and sym not in held for sym, side in waiting)
    orders: list[tuple[str, Side, float, str]] = []  # (symbol, side, quantity, why)
    for i, sym in enumerate(panel.symbols):
        if sym in held and sig.exits[i, -1]:
            if (sym, "sell") not in waiting:
                orders.append((sym, "sell", held[sym].quantity, "exit signal"))
        elif (
            sym not in held
            and (sym, "buy") not in waiting
            and sig.entries[i, -1]
            and len(held) + buys_waiting + sum(o[1] == "buy" for o in orders) < cfg.max_positions
        ):
            cash = (await broker.portfolio.balance(user_id, cfg.market))[0]["cash"]
            price = float(panel.close[i, -1])
            from markets.broker import rules_for

            qty = rules_for(cfg.market, broker.settings).max_affordable(cash * cfg.position_pct, price)
            if qty > 0:
                orders.append((sym, "buy", qty, "entry signal"))
    results = []
    for sym, side, qty, why in orders:
        r = await broker.submit(
            user_id,
            sym,
            side,
            qty,
            key=f"trader:{trader_id}:{session}:{sym}:{side}",
            source=f"trader:{trader_id}",
        )
        results.append({**r.to_dict(), "why": why})
    summary = f"{session} session (bars as of {as_of}): {len(results)} order(s)"
    async with store.sessions() as s, s.begin():
        t = await store._trader(s, user_id, trader_id)
        t.last_run_on, t.last_result = session, summary
    out = {"trader": trader_name, "session": str(session), "as_of": str(as_of), "orders": results}
    if cancelled:
        out["cancelled"] = cancelled
    return out


async def run_all_traders(services: MarketServices) -> list[dict[str, Any]]:
    """The daily job: retry paper orders waiting at a price limit, then one step of every running
    trader of every user, on the paper broker (live only when explicitly enabled). A failing trader
    is reported and never stops the others."""
    from markets.broker import PaperBroker

    store = StrategyStore(services.sessions())
    broker = (
        services.live_broker
        if services.settings.live and services.live_broker
        else PaperBroker(services.sessions(), services.data, services.settings, clock=services.clock)
    )
    try:  # the periodic hook for paper orders waiting at a price limit (every user's)
        await broker.retry_waiting()
    except Exception:
        log.exception("retrying waiting paper orders failed")
    async with store.sessions() as s:
        rows = (await s.execute(select(MarketTrader).where(MarketTrader.status == "running"))).scalars().all()
        todo = [(r.user_id, r.id) for r in rows]
    results = []
    for user_id, trader_id in todo:
        try:
            results.append(await run_trader_once(store, broker, services.data, user_id, trader_id))
        except Exception as exc:  # one broken trader must not stop the rest
            log.exception("trader %s of %s failed", trader_id, user_id)
            results.append({"trader": trader_id, "error": str(exc)})
    return results
