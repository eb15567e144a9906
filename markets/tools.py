"""The investing tools the model can call (names from seeds 000 and 003).

Services come from `ctx.deps.get(MarketServices)` (see markets/services.py); a missing service is a
clear tool error. Read-only tools are concurrency-safe; tools that change holdings, cash, trades,
strategies or traders require the user's approval; long ones (screen, backtest, AI write-ups) run
as background tasks. Every answer that quotes prices carries `as_of` (the last bar's date), and
results carry `refs` — what "this stock / this strategy / this trader" now refers to
(CurrentReferences).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent.ports import client_key, execution_key
from agent.tools.registry import Attachment, ToolContext, ToolOutput
from markets.errors import IdempotencyConflict, MarketError, NoData
from markets.services import MarketServices, require
from markets.toolset import age_days, age_note
from markets.toolset import market_tools as market_tools  # re-exported: the app installs it from here
from markets.toolset import source_note as _source

if TYPE_CHECKING:
    from markets import backtest as bt
    from markets.broker import PaperBroker
    from markets.portfolio import Portfolio
    from markets.strategies import StrategyConfig


def _user(ctx: ToolContext) -> str:
    return ctx.book


def _portfolio(svc: MarketServices) -> Portfolio:
    from markets.portfolio import Portfolio

    return Portfolio(svc.sessions(), svc.data, svc.settings)


def _broker(svc: MarketServices) -> PaperBroker:
    from markets.broker import PaperBroker

    if svc.settings.live and svc.live_broker is not None:
        return svc.live_broker
    return PaperBroker(svc.sessions(), svc.data, svc.settings, clock=svc.clock)


async def _retried(svc: MarketServices, ctx: ToolContext, out: dict[str, Any]) -> dict[str, Any]:
    """Retry the user's paper orders waiting at a price limit when a newer bar has come (each
    portfolio tool is a paper-broker call), and say what changed under `order_updates`."""
    updates = await _broker(svc).retry_waiting(_user(ctx))
    if updates:
        out["order_updates"] = updates
    return out


async def _held(svc: MarketServices, ctx: ToolContext) -> dict[str, Any]:
    """Positions by symbol for cost-aware analysis: recorded real holdings, else paper positions."""
    pf = _portfolio(svc)
    out = {p.symbol: p for p in await pf.positions(_user(ctx))}
    out.update({p.symbol: p for p in await pf.holdings(_user(ctx))})
    return out


async def _record(
    svc: MarketServices,
    ctx: ToolContext,
    kind: str,
    summary: str,
    payload: dict[str, Any],
    symbol: str = "",
    as_of: Any = None,
) -> None:
    """Keep analyses/recommendations queryable; best effort (no database → nothing recorded)."""
    if svc.session_factory is None:
        return
    try:
        await _portfolio(svc).record(_user(ctx), kind, summary, payload, symbol, as_of)
    except Exception:  # noqa: BLE001 — the journal entry is best effort; the tool's result stands
        pass


def _progress_bridge(ctx: ToolContext) -> bt.ProgressCb:
    loop = asyncio.get_running_loop()

    def prog(stage: str, detail: str = "", percent: float | None = None) -> None:
        asyncio.run_coroutine_threadsafe(ctx.progress(stage, detail, percent), loop)

    return prog


# ---- search and market data ---------------------------------------------------------------------
@market_tools.tool(concurrency_safe=True)
def search_stock_by_name(ctx: ToolContext, query: str, limit: int = 10) -> dict[str, Any]:
    """Find stocks (or BTC/ETH) by code, name, or pinyin initials.

    Args:
        query: a code (600519, 600519.SH, sh600519), a Chinese name or part of it (贵州茅台, 茅台), pinyin initials (GZMT), or a crypto symbol (BTC).
        limit: maximum number of matches.
    """
    svc = require(ctx)
    hits = svc.data.search(query, max(1, min(limit, 50)))
    return {
        "query": query,
        "matches": [
            {
                "symbol": i.symbol,
                "name": i.name,
                "market": i.market,
                "exchange": i.exchange,
                "board": i.board,
                "industry": i.industry,
                "initials": i.initials,
            }
            for i in hits
        ],
    }


@market_tools.tool(concurrency_safe=True)
async def analyze_stock(ctx: ToolContext, code: str, chart: bool = True) -> ToolOutput:
    """Wyckoff analysis of one stock or coin: trading range, events (SC, AR, ST, Spring, UTAD, SOS, SOW, LPS, effort vs result), phase with evidence, indicators, health rating, and a candlestick chart.

    Args:
        code: code, name, pinyin initials or crypto symbol (600519, 贵州茅台, GZMT, BTC).
        chart: also render a PNG chart with the range and event markers.
    """
    from markets.wyckoff import analyze

    svc = require(ctx)
    inst = svc.data.resolve(code)
    bars = await svc.data.abars(inst)
    position = None
    if svc.session_factory is not None:
        try:
            held = await _held(svc, ctx)
            if inst.symbol in held:
                p = held[inst.symbol]
                position = {
                    "quantity": p.quantity,
                    "avg_cost": p.avg_cost,
                    "high_since_entry": p.high_since_entry,
                }
        except Exception:  # noqa: BLE001 — the held position only adds context to the analysis
            position = None
    a = await asyncio.to_thread(
        analyze,
        bars,
        inst,
        cost=position["avg_cost"] if position else None,
        high_since_entry=position["high_since_entry"] if position else None,
    )
    out = a.to_dict()
    out["source"] = _source(svc, "crypto" if inst.market == "crypto" else "cn")
    out["age_days"] = age_days(a.as_of, svc.now())
    out["refs"] = {"stock": inst.symbol}
    if position:
        out["position"] = position
    attachments = []
    if chart:
        try:
            from markets import charts

            path = await asyncio.to_thread(charts.candles, bars, svc.chart_dir, name=inst.name, analysis=a)
            attachments.append(
                Attachment(
                    path, caption=f"{inst.label} · {a.phase.label} · as of {age_note(a.as_of, svc.now())}"
                )
            )
            out["chart"] = str(path)
        except Exception as exc:  # noqa: BLE001 — a chart failure is reported in the result; the analysis stands
            out["chart_error"] = f"{type(exc).__name__}: {exc}"
    await _record(
        svc,
        ctx,
        "analysis",
        f"{inst.label}: {a.phase.label}, health {a.health.rating}, close {a.close} as of {a.as_of}",
        {"phase": out["phase"], "health": out["health"]["rating"]},
        inst.symbol,
        a.as_of,
    )
    return ToolOutput(out, attachments)


@market_tools.tool(concurrency_safe=True)
async def get_market_price(ctx: ToolContext, code: str) -> dict[str, Any]:
    """Latest price of a stock or coin (the close of the last bar) with its change and the as-of date.

    Args:
        code: code, name or crypto symbol.
    """
    svc = require(ctx)
    inst = svc.data.resolve(code)
    b = (await svc.data.abars(inst)).tail(2)
    prev = float(b.close[0]) if len(b) > 1 else float("nan")
    c = float(b.close[-1])
    return {
        "symbol": inst.symbol,
        "name": inst.name,
        "price": c,
        "change_pct": round((c / prev - 1) * 100, 2) if prev == prev else None,
        "as_of": str(b.dates[-1]),
        "age_days": age_days(b.dates[-1].astype(object), svc.now()),
        "currency": "USDT" if inst.market == "crypto" else "CNY",
        "note": f"last close as of {age_note(b.dates[-1].astype(object), svc.now())} (daily data, not a live quote)",
        "refs": {"stock": inst.symbol},
    }


@market_tools.tool(concurrency_safe=True)
async def get_market_history(
    ctx: ToolContext, code: str, start: str | None = None, end: str | None = None, limit: int = 60
) -> dict[str, Any]:
    """Daily OHLCV bars of a stock, index (沪深300) or coin, newest last, with a short summary.

    Args:
        code: code, name, index name (沪深300) or crypto symbol.
        start: first date (YYYY-MM-DD), optional.
        end: last date (YYYY-MM-DD), optional.
        limit: at most this many most recent bars (max 500).
    """
    svc = require(ctx)
    inst = svc.data.resolve(code)
    b = (
        await svc.data.abars(inst, start, end)
        if inst.market != "index"
        else svc.data.index_bars(inst.symbol, start, end)
    )
    if b.empty:
        raise NoData(f"no bars for {inst.label} between {start} and {end}")
    tail = b.tail(max(1, min(limit, 500)))
    return {
        "symbol": inst.symbol,
        "name": inst.name,
        "as_of": str(b.dates[-1]),
        "as_of_note": f"as of {age_note(b.dates[-1].astype(object), svc.now())}",
        "volume_unit": "shares"
        if inst.market == "cn"
        else ("base asset" if inst.market == "crypto" else "n/a"),
        "summary": {
            "first": str(tail.dates[0]),
            "last": str(tail.dates[-1]),
            "bars": len(tail),
            "return_pct": round((tail.close[-1] / tail.close[0] - 1) * 100, 2),
            "high": round(float(tail.high.max()), 4),
            "low": round(float(tail.low.min()), 4),
        },
        "bars": tail.to_records(),
    }


@market_tools.tool(concurrency_safe=True)
async def get_market_overview(ctx: ToolContext) -> dict[str, Any]:
    """Market overview: CSI 300 trend, breadth (advancers/decliners, share above MA50/MA200), and the strongest industries."""
    svc = require(ctx)
    out = await asyncio.to_thread(_overview, svc)
    if warn := svc.calendar_warning():
        out["calendar_warning"] = warn
    return out


def _overview(svc: MarketServices) -> dict[str, Any]:
    import numpy as np

    from markets.indicators import sma

    data = svc.data
    idx = data.index_bars("000300")
    ic = idx.close
    m20, m60 = sma(ic, 20)[-1], sma(ic, 60)[-1]
    trend = "up" if ic[-1] > m20 > m60 else "down" if ic[-1] < m20 < m60 else "sideways"
    panel = data.panel(min_bars=60)
    C = panel.close
    last = C[:, -1]
    prev = C[:, -2]
    with np.errstate(invalid="ignore"):
        chg = last / prev - 1
        above50 = last > sma(C, 50)[:, -1]
        above200 = last > sma(C, 200)[:, -1]
        ret20 = last / C[:, -21] - 1
    ok = ~np.isnan(chg)
    by_ind: dict[str, list[float]] = {}
    for i, s in enumerate(panel.symbols):
        inst = data.directory.get(s)
        if inst and inst.industry and not np.isnan(ret20[i]):
            by_ind.setdefault(inst.industry, []).append(float(ret20[i]))
    inds = sorted(
        ((k, float(np.median(v)), len(v)) for k, v in by_ind.items() if len(v) >= 3), key=lambda t: -t[1]
    )
    return {
        "as_of": str(panel.dates[-1]),
        "index": {
            "name": "沪深300 (CSI 300)",
            "close": round(float(ic[-1]), 2),
            "change_pct": round((ic[-1] / ic[-2] - 1) * 100, 2),
            "ret_20d_pct": round((ic[-1] / ic[-21] - 1) * 100, 2),
            "ma20": round(float(m20), 2),
            "ma60": round(float(m60), 2),
            "trend": trend,
        },
        "breadth": {
            "universe": int(ok.sum()),
            "advancers": int((chg[ok] > 0).sum()),
            "decliners": int((chg[ok] < 0).sum()),
            "unchanged": int((chg[ok] == 0).sum()),
            "pct_above_ma50": round(100 * float(above50[ok].mean()), 1),
            "pct_above_ma200": round(100 * float(above200[ok].mean()), 1),
        },
        "strongest_industries": [
            {"industry": k, "median_ret_20d_pct": round(v * 100, 2), "members": n} for k, v, n in inds[:8]
        ],
        "weakest_industries": [
            {"industry": k, "median_ret_20d_pct": round(v * 100, 2), "members": n} for k, v, n in inds[-3:]
        ],
        "source": _source(svc),
        "note": f"breadth is measured over the configured universe: {len(panel.symbols)} A-shares from "
        + "+".join(p.name for p in data.providers),
    }


# ---- screening and backtests (background) ---------------------------------------------------------
@market_tools.tool(background=True, timeout=600)
async def screen_stocks(
    ctx: ToolContext,
    triggers: list[Literal["spring", "sos", "lps"]] | None = None,
    top: int = 20,
    min_amount_yi: float = 1.0,
    require_trigger: bool = False,
    require_strong_industry: bool = False,
) -> dict[str, Any]:
    """Whole-market Wyckoff screen: liquidity filter, trend/range/accumulation/relative-strength channels, industry resonance, Spring/SOS/LPS triggers; ranked with reasons.

    Args:
        triggers: which triggers score (default all of spring, sos, lps).
        top: number of ranked picks to return (max 100).
        min_amount_yi: minimum 20-day average turnover in 亿 CNY.
        require_trigger: keep only stocks with a trigger in the last 3 bars.
        require_strong_industry: keep only stocks in the strongest industries.
    """
    from markets.screen import ScreenConfig, screen

    svc = require(ctx)
    cfg = ScreenConfig(
        triggers=tuple(triggers or ("spring", "sos", "lps")),
        top=max(1, min(top, 100)),
        min_amount=min_amount_yi * 1e8,
        require_trigger=require_trigger,
        require_resonance=require_strong_industry,
    )
    result = await asyncio.to_thread(screen, svc.data, cfg, progress=_progress_bridge(ctx))
    out = result.to_dict()
    out["source"] = _source(svc)
    path = _save(svc, "screen", out)
    out["saved_to"] = str(path)
    await _record(
        svc,
        ctx,
        "screen",
        f"screen as of {result.as_of}: top "
        + ", ".join(f"{p['name']}({p['symbol']})" for p in result.picks[:5]),
        {"funnel": result.funnel, "top": [p["symbol"] for p in result.picks]},
        as_of=None,
    )
    return out


def _save(svc: MarketServices, kind: str, payload: dict[str, Any]) -> Path:
    svc.results_dir.mkdir(parents=True, exist_ok=True)
    path = (
        svc.results_dir
        / f"{kind}_{time.strftime('%Y%m%d_%H%M%S')}_{abs(hash(json.dumps(payload, default=str))) % 10_000:04d}.json"
    )
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    return path


@market_tools.tool(background=True, timeout=600)
async def run_backtest(
    ctx: ToolContext,
    codes: list[str] | None = None,
    strategy: str | None = None,
    config: dict[str, Any] | None = None,
    start: str | None = None,
    end: str | None = None,
    initial_cash: float = 1_000_000.0,
) -> ToolOutput:
    """Backtest a Wyckoff strategy (or the benchmarks buy_and_hold / ma_cross) on daily bars with A-share rules (T+1, 100-share lots, price limits, fees) or crypto rules; returns CAGR, max drawdown, Sharpe, win rate, trades, CSI 300 comparison over the stated period and an equity-curve chart.

    Args:
        codes: codes or names to trade (default: the strategy's universe, else every stock in the dataset); their market sets the rules (BTC, ETH: crypto).
        strategy: a saved strategy's name or id (default: the default Wyckoff strategy).
        config: overrides of the strategy config (entry, exit, stop_pct, max_positions, position_pct, ...). entry may be "buy_and_hold" (buy on the first tradable bar, hold to the end) or "ma_cross" (with ma_fast, ma_slow); these split cash equally unless position_pct is given.
        start: first trading date (YYYY-MM-DD); earlier bars warm up the indicators.
        end: last date (YYYY-MM-DD).
        initial_cash: starting cash.
    """
    from markets.strategies import DEFAULT_STRATEGY, StrategyStore

    svc = require(ctx)
    base: dict[str, Any] = DEFAULT_STRATEGY.model_dump()
    name = "default Wyckoff strategy"
    if strategy:
        saved = await StrategyStore(svc.sessions()).get(_user(ctx), strategy)
        base, name = saved["config"], saved["name"]
    insts = [svc.data.resolve(c) for c in (codes or base.get("universe") or [])]
    cfg = _backtest_config(base, {**_market_of(insts, config or {}), **(config or {})})
    if cfg.benchmark and not strategy:
        name = str(cfg.entry)
    syms = [i.symbol for i in insts] or None
    equal = cfg.benchmark and "position_pct" not in (config or {})
    res = await asyncio.to_thread(
        _backtest, svc, cfg, syms, start, end, initial_cash, _progress_bridge(ctx), equal
    )
    result, panel, st_note = res
    out = result.summary()
    out.update(
        strategy=name,
        config=cfg.model_dump(),
        universe=len(panel.symbols),
        source=_source(svc, cfg.market),
        **({"st": st_note} if st_note else {}),
        rules="A-share: T+1, lots of 100, ±10/20/5% limits (a blocked order waits for the next bar), "
        "commission 0.025% (min 5) + stamp duty 0.05% on sells"
        if cfg.market == "cn"
        else f"crypto: fractional, fee {svc.settings.crypto_fee:.2%}",
    )
    attachments = []
    try:
        from markets import charts

        # the chart shows exactly the curves the metrics measure (same period, same base)
        dates, equity, bench = result.curves()
        path = await asyncio.to_thread(
            charts.equity_curve, dates, equity, svc.chart_dir, benchmark=bench, title=f"Backtest: {name}"
        )
        m = out["metrics"]
        vs = f" vs CSI 300 {m['benchmark_return_pct']}%" if "benchmark_return_pct" in m else ""
        attachments.append(
            Attachment(
                path, caption=f"{name}: {m.get('total_return_pct')}%{vs} ({out['start']} → {out['end']})"
            )
        )
        out["chart"] = str(path)
    except Exception as exc:  # noqa: BLE001 — a chart failure is reported in the result; the backtest stands
        out["chart_error"] = f"{type(exc).__name__}: {exc}"
    out["saved_to"] = str(_save(svc, "backtest", out))
    await _record(
        svc,
        ctx,
        "backtest",
        f"backtest {name}: {out['metrics'].get('total_return_pct')}% ({out['start']}→{out['end']})",
        {"metrics": out["metrics"]},
    )
    return ToolOutput(out, attachments)


def _market_of(insts: list[Any], config: dict[str, Any]) -> dict[str, str]:
    """The market whose rules the instruments trade under (BTC: crypto), as a config override; an
    explicit `market` that contradicts them, or a mix of markets, is an error, not a silent rule."""
    found = {"crypto" if i.market == "crypto" else "cn" for i in insts}
    if len(found) > 1:
        raise MarketError("the codes mix crypto and A-shares; backtest each market on its own")
    if not found:
        return {}
    market = found.pop()
    asked = config.get("market")
    if asked is not None and asked != market:
        names = ", ".join(i.label for i in insts[:3])
        raise MarketError(f"{names} trade under {market} rules, not market={asked!r}")
    return {"market": market}


def _backtest_config(base: dict[str, Any], overrides: dict[str, Any]) -> StrategyConfig:
    """The strategy config with the call's overrides. A benchmark entry (buy_and_hold, ma_cross) runs
    without stop, trailing stop or holding limit unless the call sets them: the default Wyckoff
    strategy's 7 % stop would turn buy-and-hold into something else."""
    from markets.strategies import StrategyConfig

    cfg = StrategyConfig.model_validate({**base, **overrides})
    if cfg.benchmark:
        plain = {"stop_pct": None, "trail_after": None, "max_hold": None}
        keep = set(overrides) if cfg.entry == "ma_cross" else set()
        cfg = cfg.model_copy(update={k: v for k, v in plain.items() if k not in keep})
    return cfg


def _backtest(
    svc: MarketServices,
    cfg: StrategyConfig,
    syms: list[str] | None,
    start: str | None,
    end: str | None,
    cash: float,
    prog: bt.ProgressCb,
    equal_weights: bool = False,
) -> tuple[bt.BacktestResult, Any, str]:
    import numpy as np

    from markets import backtest as bt
    from markets.broker import rules_for
    from markets.st import st_limits
    from markets.strategies import strategy_signals

    data = svc.data
    panel = data.panel(syms, cfg.market, min_bars=60)
    if not panel.symbols:
        raise NoData("no instruments with bars for this backtest")
    if end:
        keep = panel.dates <= np.datetime64(end)
        panel = type(panel)(
            panel.symbols,
            panel.dates[keep],
            *(getattr(panel, k)[:, keep] for k in ("open", "high", "low", "close", "volume", "amount")),
        )
    s0 = int(np.searchsorted(panel.dates, np.datetime64(start))) if start else min(200, panel.shape[1] // 3)
    prog("signals", f"{len(panel.symbols)} instruments", 5.0)
    st = st_limits(data, panel.symbols, panel.dates) if cfg.market == "cn" else None
    limits = st.limits if st is not None else None
    sig = strategy_signals(panel, cfg, limits, start=s0)
    bench = data.index_bars("000300") if cfg.market == "cn" else None
    result = bt.run(
        panel,
        rules=rules_for(cfg.market, svc.settings),
        entries=sig.entries,
        exits=sig.exits,
        limits=limits,
        benchmark=bench,
        cfg=bt.BacktestConfig(
            initial_cash=cash,
            # a benchmark without an explicit position size splits the cash equally over the universe
            max_positions=len(panel.symbols) if equal_weights else cfg.max_positions,
            position_pct=1 / len(panel.symbols) if equal_weights else cfg.position_pct,
            stop_pct=cfg.stop_pct,
            trail_after=cfg.trail_after,
            trail_pct=cfg.trail_pct,
            max_hold=cfg.max_hold,
            start=s0,
            # buy-and-hold needs no close to decide: it buys at the open of the start bar
            enter_same_bar=cfg.entry == "buy_and_hold",
            equal_weight=equal_weights,
        ),
        progress=prog,
    )
    return result, panel, st.note if st is not None else ""


# ---- portfolio ----------------------------------------------------------------------------------
@market_tools.tool(concurrency_safe=True)
async def portfolio(ctx: ToolContext, mode: Literal["view", "diagnose"] = "view") -> dict[str, Any]:
    """The user's portfolio in two labelled books, the paper account (simulated trades, with realized P&L) and the recorded real holdings, at the last close; `diagnose` adds a Wyckoff health rating per position.

    Each book lists positions with price, value and P&L, cash and totals; prices are the last bar's close, as of the date stated. The health rating is green/yellow/red with reasons and stop levels.

    Args:
        mode: view or diagnose.
    """
    from markets.wyckoff import analyze

    svc = require(ctx)
    pf = _portfolio(svc)
    updates = await _retried(svc, ctx, {})
    out = {**await pf.view(_user(ctx)), **updates}
    both = out["paper"]["positions"] + out["recorded"]["positions"]
    if mode == "diagnose":
        for p in both:
            try:
                inst = svc.data.resolve(p["symbol"])
                a = await asyncio.to_thread(
                    analyze,
                    await svc.data.abars(inst),
                    inst,
                    cost=p["avg_cost"] or None,
                    high_since_entry=p["high_since_entry"] or None,
                )
                p["health"] = a.health.to_dict()
                p["phase"] = a.phase.label
            except (NoData, ValueError) as exc:
                p["health"] = {"rating": "unknown", "reason": str(exc)}
        red = sorted({p["symbol"] for p in both if p.get("health", {}).get("rating") == "red"})
        out["summary"] = f"{len(both)} position(s) (paper and recorded); red: {', '.join(red) or 'none'}"
        await _record(
            svc,
            ctx,
            "diagnosis",
            out["summary"],
            {"ratings": {p["symbol"]: p.get("health", {}).get("rating") for p in both}},
        )
    out["source"] = _source(svc)
    return out


@market_tools.tool(requires_approval=True, side_effect="mutating")
async def update_portfolio(
    ctx: ToolContext,
    action: Literal["set", "remove", "cash"],
    code: str | None = None,
    quantity: float | None = None,
    cost: float | None = None,
    market: Literal["cn", "crypto"] = "cn",
    cash: float | None = None,
) -> dict[str, Any]:
    """Record the user's real holdings (bookkeeping, no trade; kept apart from the paper account): set a holding's quantity and average cost, remove it, or set cash.

    Args:
        action: set (code, quantity, cost), remove (code), or cash (market, cash).
        code: code or name of the holding.
        quantity: shares (or coins) held.
        cost: average cost per share.
        market: cn or crypto, for `cash`.
        cash: the cash amount, for `cash`.
    """
    svc = require(ctx)
    pf = _portfolio(svc)
    if action == "cash":
        if cash is None:
            raise MarketError("action 'cash' needs `cash`")
        return {"updated": await pf.set_cash(_user(ctx), market, cash)}
    if not code:
        raise MarketError(f"action '{action}' needs `code`")
    if action == "remove":
        return {
            "updated": await pf.set_holding(_user(ctx), code, 0, 0),
            "refs": {"stock": svc.data.resolve(code).symbol},
        }
    if quantity is None or cost is None:
        raise MarketError("action 'set' needs `quantity` and `cost`")
    return {
        "updated": await pf.set_holding(_user(ctx), code, quantity, cost),
        "refs": {"stock": svc.data.resolve(code).symbol},
    }


@market_tools.tool(concurrency_safe=True)
async def get_positions(ctx: ToolContext, market: Literal["cn", "crypto"] | None = None) -> dict[str, Any]:
    """Current positions of the paper account and the recorded real holdings (two lists), with prices, value and unrealized P&L, as of the last bar; `pending` lists paper orders waiting at a price limit.

    Args:
        market: cn or crypto; both when omitted.
    """
    svc = require(ctx)
    pf = _portfolio(svc)
    updates = await _retried(svc, ctx, {})
    return {
        "paper": [p.to_dict() for p in await pf.positions(_user(ctx), market)],
        "pending": await pf.waiting(_user(ctx), market),
        "recorded": [p.to_dict() for p in await pf.holdings(_user(ctx), market)],
        "as_of": {m: str(svc.data.as_of(m)) for m in ("cn", "crypto")},
        **updates,
    }


@market_tools.tool(concurrency_safe=True)
async def get_balance(ctx: ToolContext, market: Literal["cn", "crypto"] | None = None) -> dict[str, Any]:
    """Cash balance of the paper account per market (it starts with the configured amount); recorded real cash is in `portfolio`.

    Args:
        market: cn or crypto; both when omitted.
    """
    svc = require(ctx)
    updates = await _retried(svc, ctx, {})
    return {
        "balances": await _portfolio(svc).balance(_user(ctx), market),
        "venue": "live" if svc.settings.live else "paper",
        **updates,
    }


@market_tools.tool(concurrency_safe=True)
async def get_trade_history(ctx: ToolContext, code: str | None = None, limit: int = 20) -> dict[str, Any]:
    """Past trades (fills, rejections, orders waiting at a price limit, cancellations, unknown outcomes) newest first, plus recent analyses and recommendations.

    Args:
        code: only this stock or coin.
        limit: maximum number of trades.
    """
    svc = require(ctx)
    pf = _portfolio(svc)
    updates = await _retried(svc, ctx, {})
    return {
        "trades": await pf.trades(_user(ctx), code, max(1, min(limit, 200))),
        "records": await pf.records(_user(ctx), None, code, 10),
        **updates,
    }


@market_tools.tool(requires_approval=True, side_effect="mutating", idempotent=True)
async def execute_trade(
    ctx: ToolContext, code: str, side: Literal["buy", "sell"], quantity: float
) -> dict[str, Any]:
    """Buy or sell on the paper account (live only when explicitly enabled) at the last close, with A-share rules (lots of 100, T+1 on the trading calendar, price limits, fees) or crypto rules. The same approved call never fills twice.

    An order blocked by a price limit waits (status `waiting`) and is retried at the next bar's open; cancel_order cancels it.

    Args:
        code: code, name or crypto symbol.
        side: buy or sell.
        quantity: shares (A-shares: multiples of 100 to buy) or coins.
    """
    svc = require(ctx)
    order = {"code": code, "side": side, "quantity": quantity}
    if ctx.idempotency_key:  # a client's own key: it alone names the order, in any process
        key = client_key(ctx.source, _user(ctx), ctx.idempotency_key)
    elif ctx.call_id:
        key = execution_key(ctx.session_id, "execute_trade", order, ctx.call_id)
    else:
        raise MarketError("execute_trade needs a call id to derive its idempotency key")
    try:
        r = await _broker(svc).submit(
            _user(ctx),
            code,
            side,
            quantity,
            key=key,
            source=ctx.source or "chat",
            request_hash=execution_key("", "execute_trade", order, ""),
        )
    except IdempotencyConflict as exc:  # named as the caller knows it, not as stored
        raise IdempotencyConflict(ctx.idempotency_key or ctx.call_id, exc.first) from None
    out = r.to_dict()
    out["refs"] = {"stock": out["symbol"]}
    if r.replayed:
        out["note"] = "already executed earlier: this is the earlier outcome, nothing was traded again"
    elif out["status"] == "waiting":
        out["note"] = f"{out['reason']}; order #{out['id']} (cancel_order cancels it)"
    else:
        out["note"] = f"{'live' if svc.settings.live else 'paper'} {out['status']}"
    return out


@market_tools.tool(requires_approval=True, side_effect="idempotent")
async def cancel_order(ctx: ToolContext, order_id: int) -> dict[str, Any]:
    """Cancel a paper order that is waiting at a price limit (status `waiting`, listed under pending orders in `portfolio`). Filled or rejected orders cannot be cancelled; cancelling twice returns the first outcome.

    Args:
        order_id: the order's id (`id` in the trade, the pending list or the trade history).
    """
    svc = require(ctx)
    broker = _broker(svc)
    updates = await broker.retry_waiting(_user(ctx))  # it may have filled at a newer bar already
    r = await broker.cancel(_user(ctx), int(order_id))
    out: dict[str, Any] = {
        "order": r.trade,
        "replayed": r.replayed,
        "note": f"order #{order_id} was cancelled earlier" if r.replayed else f"order #{order_id} cancelled",
        "refs": {"stock": r.trade["symbol"]},
    }
    if updates:
        out["order_updates"] = updates
    return out


# ---- strategies and traders ---------------------------------------------------------------------
@market_tools.tool(concurrency_safe=True)
async def get_strategies(ctx: ToolContext) -> dict[str, Any]:
    """List saved strategies and traders, plus the default strategy config."""
    from markets.strategies import DEFAULT_STRATEGY, StrategyStore

    svc = require(ctx)
    store = StrategyStore(svc.sessions())
    return {
        "strategies": await store.strategies(_user(ctx)),
        "traders": await store.traders(_user(ctx)),
        "default_config": DEFAULT_STRATEGY.model_dump(),
    }


@market_tools.tool(requires_approval=True, side_effect="mutating")
async def manage_strategy(
    ctx: ToolContext,
    action: Literal["list", "get_default_config", "create", "update", "delete", "activate", "duplicate"],
    strategy: str | None = None,
    name: str | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Manage strategy templates (independent of exchanges and models): list, get_default_config, create, update, delete, activate, duplicate. For read-only listing prefer get_strategies (no approval needed).

    Args:
        action: what to do.
        strategy: the strategy's name or id (update, delete, activate, duplicate).
        name: the name for create, duplicate, or a rename in update.
        config: strategy fields (entry triggers, exit, stop_pct, max_positions, position_pct, universe, prompt, ...).
    """
    from markets.strategies import StrategyConfig, StrategyStore

    svc = require(ctx)
    store = StrategyStore(svc.sessions())
    user = _user(ctx)
    if action == "list":
        return {"strategies": await store.strategies(user)}
    if action == "get_default_config":
        return {"default_config": StrategyConfig().model_dump(), "schema": StrategyConfig.model_json_schema()}
    if action == "create":
        if not name:
            raise MarketError("create needs `name`")
        row = await store.create(user, name, config)
    elif not strategy:
        raise MarketError(f"{action} needs `strategy` (name or id)")
    elif action == "update":
        row = await store.update(user, strategy, config, name)
    elif action == "delete":
        row = await store.delete(user, strategy)
    elif action == "activate":
        row = await store.activate(user, strategy)
    else:
        row = await store.duplicate(user, strategy, name)
    return {"action": action, "strategy": row, "refs": {"strategy": row["id"]}}


@market_tools.tool(requires_approval=True, side_effect="mutating")
async def manage_trader(
    ctx: ToolContext,
    action: Literal["list", "create", "update", "delete", "start", "stop"],
    trader: str | None = None,
    name: str | None = None,
    strategy: str | None = None,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Manage traders: a trader runs a strategy on the paper broker on schedule (once per trading day after the close). Actions: list, create, update, delete, start, stop.

    Args:
        action: what to do.
        trader: the trader's name or id (update, delete, start, stop).
        name: the name for create.
        strategy: the strategy (name or id) to bind (create, update).
        config: trader settings (e.g. {"schedule": "15:30"}).
    """
    from markets.strategies import StrategyStore

    svc = require(ctx)
    store = StrategyStore(svc.sessions())
    user = _user(ctx)
    if action == "list":
        return {"traders": await store.traders(user)}
    if action == "create":
        if not name or not strategy:
            raise MarketError("create needs `name` and `strategy`")
        row = await store.create_trader(user, name, strategy, config)
    elif not trader:
        raise MarketError(f"{action} needs `trader` (name or id)")
    elif action == "update":
        row = await store.update_trader(user, trader, strategy=strategy, config=config)
    elif action == "delete":
        row = await store.delete_trader(user, trader)
    else:
        row = await store.update_trader(user, trader, status="running" if action == "start" else "stopped")
    return {
        "action": action,
        "trader": row,
        "refs": {"trader": row["id"], "strategy": row.get("strategy_id")},
    }


# ---- AI write-ups (background) --------------------------------------------------------------------
@market_tools.tool(background=True, timeout=300, open_world=True)
async def generate_ai_report(ctx: ToolContext, code: str) -> dict[str, Any]:
    """A written Wyckoff report on one stock, grounded in the engine's output (phase, range, events, health), stating the model and sources used.

    Args:
        code: code, name or crypto symbol.
    """
    from markets import reports
    from markets.wyckoff import analyze

    svc = require(ctx)
    inst = svc.data.resolve(code)
    a = await asyncio.to_thread(analyze, await svc.data.abars(inst), inst)
    f = reports.facts(a, _source(svc, "crypto" if inst.market == "crypto" else "cn"))
    text, model = await reports.write(svc.model, f, f"Write an analysis report on {inst.label}.")
    await _record(
        svc, ctx, "report", f"report on {inst.label} as of {a.as_of}", {"model": model}, inst.symbol, a.as_of
    )
    return {
        "symbol": inst.symbol,
        "name": inst.name,
        "as_of": str(a.as_of),
        "report": text,
        "model": model,
        "sources": [f["source"], "markets.wyckoff engine"],
        "refs": {"stock": inst.symbol},
    }


@market_tools.tool(background=True, timeout=300, open_world=True)
async def generate_strategy_decision(ctx: ToolContext, code: str | None = None) -> dict[str, Any]:
    """A rule-based decision (consider_buy / watch / avoid, or for holdings hold / hold_with_caution / reduce_or_exit) with a written rationale grounded in the engine's output; for one stock, or for every holding when no code is given.

    Args:
        code: a stock or coin; omit to decide for every holding.
    """
    from markets import reports
    from markets.wyckoff import analyze

    svc = require(ctx)
    held: dict[str, Any] = {}
    if svc.session_factory is not None:
        held = await _held(svc, ctx)
    targets = [svc.data.resolve(code)] if code else [svc.data.resolve(s) for s in held]
    if not targets:
        raise MarketError("no code given and no holdings recorded")
    decisions = []
    for inst in targets:
        p = held.get(inst.symbol)
        a = await asyncio.to_thread(
            analyze,
            await svc.data.abars(inst),
            inst,
            cost=p.avg_cost if p else None,
            high_since_entry=p.high_since_entry if p else None,
        )
        action, why = reports.decide(a, p is not None)
        f = reports.facts(
            a,
            _source(svc, "crypto" if inst.market == "crypto" else "cn"),
            {"quantity": p.quantity, "avg_cost": p.avg_cost} if p else None,
        )
        f["decision"] = {"action": action, "why": why}
        text, model = await reports.write(
            svc.model, f, f"Explain the rule-based decision '{action}' for {inst.label}."
        )
        decisions.append(
            {
                "symbol": inst.symbol,
                "name": inst.name,
                "as_of": str(a.as_of),
                "action": action,
                "why": why,
                "rationale": text,
                "model": model,
            }
        )
        await _record(
            svc,
            ctx,
            "recommendation",
            f"{inst.label}: {action} as of {a.as_of}",
            {"why": why, "model": model},
            inst.symbol,
            a.as_of,
        )
    return {"decisions": decisions, "note": "observations from rules, not investment advice"}


# The intraday/tail-session tools, market_regime, wyckoff_diagnose and manage_alerts register on
# market_tools too.
from markets import tools_alerts, tools_intraday  # noqa: E402,F401
