"""Intraday and tail-session tools on the minute-bar port, the market regime, and a Wyckoff
diagnosis of codes given in the call (`intraday_analysis`, `intraday_rescue_check`,
`query_tail_buy`, `market_regime`, `wyckoff_diagnose`).

They register on `markets.toolset.market_tools` (this module is imported at the end of markets.tools). Minute bars
come from `MarketData.minute_bars`; with the bundled dataset alone there are none, and the tools
answer plainly that minute data needs a live provider (`available: false`, with the daily
context they do have). The daily context of a session — previous close, the Wyckoff support and
resistance — is read from the daily bars *before* the session, so the session's own bar is never
part of its own yardstick.
"""

from __future__ import annotations

import asyncio
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from agent.tools.registry import ToolContext
from markets.errors import MarketError, NoData, NoMinuteData
from markets.services import MarketServices, require
from markets.symbols import Instrument
from markets.toolset import market_tools
from markets.toolset import source_note as _source

if TYPE_CHECKING:
    from markets.bars import Bars
    from markets.minute import MinuteBars
TAIL_PLAYBOOK = (
    "尾盘二次确认买入 (tail-session second confirmation): after 14:45 check the support, the VWAP, the "
    "close position and the volume; no buy when the confirmed support is broken or on an "
    "extreme-volume spike that falls back"
)
MAX_CODES = 20


def _day(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise MarketError(f"day must be YYYY-MM-DD, got {text!r}") from None


async def _daily(svc: MarketServices, inst: Instrument) -> Bars | None:
    try:
        return await svc.data.abars(inst)
    except NoData:
        return None


def _unavailable(inst: Instrument, daily: Bars | None, exc: NoMinuteData) -> dict[str, Any]:
    out: dict[str, Any] = {
        "symbol": inst.symbol,
        "name": inst.name,
        "available": False,
        "message": str(exc),
        "daily_as_of": str(daily.last_date) if daily is not None and len(daily) else None,
        "refs": {"stock": inst.symbol},
    }
    if daily is not None and len(daily):
        out["daily_close"] = float(daily.close[-1])
    return out


def _context(svc: MarketServices, inst: Instrument, daily: Bars | None, m: MinuteBars) -> dict[str, Any]:
    """Previous close and the Wyckoff levels from the daily bars before the session."""
    from markets.wyckoff import analyze

    ctx: dict[str, Any] = {"prev_close": None, "support": None, "resistance": None, "support_from": None}
    if daily is None:
        ctx["note"] = "no daily bars: no previous close or support"
        return ctx
    before = daily.between(None, m.day - timedelta(days=1))
    if not len(before):
        ctx["note"] = "no daily bars before the session"
        return ctx
    ctx["as_of"] = str(before.last_date)
    expected: date | None
    try:
        expected = svc.data.calendar("crypto" if inst.market == "crypto" else "cn").prev_trading_day(m.day)
    except Exception:  # noqa: BLE001 — outside the calendar's range: trust the bars
        expected = before.last_date
    if before.last_date == expected:
        ctx["prev_close"] = float(before.close[-1])
    else:
        ctx["note"] = (
            f"the daily bars end {before.last_date}, not on the trading day before the session "
            f"({expected}): previous close unknown, levels are as of {before.last_date}"
        )
    try:
        a = analyze(before, inst)
    except ValueError:
        a = None
    if a is not None and a.range is not None:
        ctx.update(
            support=round(a.range.support, 4),
            resistance=round(a.range.resistance, 4),
            support_from="trading-range support",
            phase=a.phase.label,
        )
    else:
        ctx.update(support=float(before.low[-10:].min()), support_from="lowest low of the last 10 daily bars")
        if a is not None:
            ctx["phase"] = a.phase.label
    return ctx


async def _session(
    svc: MarketServices, code: str, day: date | None
) -> tuple[Instrument, MinuteBars, dict[str, Any]] | dict[str, Any]:
    """The stock, its minute bars for `day` and their daily context; or, without minute data, the
    plain "needs a live provider" answer the tool returns as it is."""
    inst = svc.data.resolve(code)
    daily = await _daily(svc, inst)
    try:
        m = await svc.data.aminute_bars(inst, day)
    except NoMinuteData as exc:
        return _unavailable(inst, daily, exc)
    return inst, m, await asyncio.to_thread(_context, svc, inst, daily, m)


def _minute_source(m: MinuteBars) -> str:
    return f"{m.source or 'minute'} 1-minute bars, session {m.day} (exchange-local time)"


@market_tools.tool(concurrency_safe=True)
async def intraday_analysis(ctx: ToolContext, code: str, day: str | None = None) -> dict[str, Any]:
    """Intraday read of one stock from 1-minute bars: VWAP and where the price sits against it, the session's high/low and their times, volume at the open and the close, and what the daily Wyckoff support/resistance did today. Needs a live minute-data provider (akshare).

    Args:
        code: code, name or pinyin initials (600519, 贵州茅台).
        day: the session (YYYY-MM-DD); default the latest.
    """
    from markets.intraday import read_day

    got = await _session(require(ctx), code, _day(day))
    if isinstance(got, dict):
        return got
    inst, m, c = got
    out: dict[str, Any] = {"symbol": inst.symbol, "name": inst.name, "available": True}
    out.update(read_day(m, c["prev_close"], c["support"], c["resistance"]).to_dict())
    out.update(daily=c, source=_minute_source(m), refs={"stock": inst.symbol})
    return out


@market_tools.tool(concurrency_safe=True)
async def intraday_rescue_check(
    ctx: ToolContext, code: str, level: float | None = None, cost: float | None = None, day: str | None = None
) -> dict[str, Any]:
    """Rescue check from 1-minute bars: whether today's break of a stop or support was reclaimed (no_break, rescued = reclaimed and above VWAP, reclaimed_under_vwap, not_rescued), with the low's time and the rebound's volume. Needs a live minute-data provider (akshare).

    Args:
        code: code or name.
        level: the price level to check (a stop or support); default the hard stop under `cost`, else the daily Wyckoff support.
        cost: the position's average cost (the hard stop is 7% under it).
        day: the session (YYYY-MM-DD); default the latest.
    """
    from markets.intraday import rescue_check
    from markets.wyckoff import DEFAULT_PARAMS

    got = await _session(require(ctx), code, _day(day))
    if isinstance(got, dict):
        return got
    inst, m, c = got
    if level is not None:
        lvl, why = float(level), "the level given"
    elif cost is not None:
        lvl, why = (
            float(cost) * (1 - DEFAULT_PARAMS.stop_pct),
            f"hard stop {DEFAULT_PARAMS.stop_pct:.0%} under the cost",
        )
    elif c["support"] is not None:
        lvl, why = float(c["support"]), c["support_from"]
    else:
        raise MarketError(f"no level to check for {inst.label}: pass `level` or `cost`")
    out: dict[str, Any] = {
        "symbol": inst.symbol,
        "name": inst.name,
        "available": True,
        "as_of": str(m.times[-1]).replace("T", " "),
    }
    out.update(rescue_check(m, lvl).to_dict())
    out.update(
        level_from=why,
        daily=c,
        source=_minute_source(m),
        note="observations from rules, not investment advice",
        refs={"stock": inst.symbol},
    )
    return out


@market_tools.tool(concurrency_safe=True)
async def query_tail_buy(ctx: ToolContext, codes: list[str], day: str | None = None) -> dict[str, Any]:
    """Tail-session (尾盘, after 14:45) second confirmation for buy candidates, from 1-minute bars: support held, price above VWAP, close position, no extreme-volume spike that fades; verdict ok / wait / no_buy per stock with each check. Needs a live minute-data provider (akshare).

    Args:
        codes: the candidates' codes or names (at most 20).
        day: the session (YYYY-MM-DD); default the latest.
    """
    svc = require(ctx)
    if not codes:
        raise MarketError("query_tail_buy needs at least one code")
    the_day = _day(day)
    results: list[dict[str, Any]] = []
    for code in codes[:MAX_CODES]:
        try:
            results.append(await _tail_one(svc, code, the_day))
        except MarketError as exc:
            results.append({"code": code, "error": str(exc)})
    out: dict[str, Any] = {
        "results": results,
        "playbook": TAIL_PLAYBOOK,
        "note": "observations from rules, not investment advice",
    }
    if len(codes) > MAX_CODES:
        out["truncated"] = f"checked the first {MAX_CODES} of {len(codes)} codes"
    syms = [r["symbol"] for r in results if "symbol" in r]
    if len(syms) == 1:
        out["refs"] = {"stock": syms[0]}
    return out


async def _tail_one(svc: MarketServices, code: str, day: date | None) -> dict[str, Any]:
    from markets.intraday import tail_check

    got = await _session(svc, code, day)
    if isinstance(got, dict):
        return got
    inst, m, c = got
    row: dict[str, Any] = {
        "symbol": inst.symbol,
        "name": inst.name,
        "available": True,
        "as_of": str(m.times[-1]).replace("T", " "),
    }
    if c["support"] is None:
        row.update(verdict="wait", reason="no confirmed support level from the daily bars", daily=c)
        return row
    row.update(tail_check(m, float(c["support"])).to_dict())
    row.update(support_from=c["support_from"], daily=c, source=_minute_source(m))
    return row


@market_tools.tool(concurrency_safe=True)
async def market_regime(ctx: ToolContext) -> dict[str, Any]:
    """Market regime (risk_on / neutral / risk_off) from the CSI 300's trend (MA50/MA200, slope, drawdown, volatility) and the universe's breadth, with the scored reasons and the index's Wyckoff read."""
    from markets.regime import market_regime as regime_of

    svc = require(ctx)
    out = (await asyncio.to_thread(regime_of, svc.data)).to_dict()
    out["source"] = _source(svc)
    return out


@market_tools.tool(concurrency_safe=True)
async def wyckoff_diagnose(
    ctx: ToolContext, codes: list[str], costs: dict[str, float] | None = None
) -> dict[str, Any]:
    """Wyckoff health diagnosis of the codes given (no stored portfolio needed): phase, health rating green/yellow/red with dangers, warnings and stop levels (hard stop under a given cost), range and recent events, per code.

    Args:
        codes: codes or names to diagnose (at most 20).
        costs: average cost per code, e.g. {"600519": 1400}; adds the hard stop and P&L-aware reasons.
    """
    from markets.wyckoff import analyze

    svc = require(ctx)
    if not codes:
        raise MarketError("wyckoff_diagnose needs at least one code")
    costs = costs or {}
    results: list[dict[str, Any]] = []
    for code in codes[:MAX_CODES]:
        try:
            inst = svc.data.resolve(code)
            cost = costs.get(code, costs.get(inst.symbol))
            a = await asyncio.to_thread(analyze, await svc.data.abars(inst), inst, cost=cost)
        except (MarketError, ValueError) as exc:
            results.append({"code": code, "error": str(exc)})
            continue
        d = a.to_dict(max_events=6)
        results.append(
            {
                "symbol": inst.symbol,
                "name": inst.name,
                "as_of": d["as_of"],
                "close": d["close"],
                "cost": cost,
                "phase": d["phase"]["label"],
                "health": d["health"],
                "range": d["range"],
                "recent_events": [e.to_dict() for e in a.recent_events(20)],
                "window": d["window"],
                "volume_rules": d["volume_rules"],
            }
        )
    red = [r["symbol"] for r in results if r.get("health", {}).get("rating") == "red"]
    return {
        "results": results,
        "summary": f"{len(results)} code(s); red: {', '.join(red) or 'none'}",
        "note": "observations from rules, not investment advice",
    }
