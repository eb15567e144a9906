"""Whole-market screening funnel, vectorised over a panel [symbol, day] (3,000 stocks in seconds).

Stages (each reports progress as (stage, detail, percent)):
1. Liquidity: ≥ `min_bars` bars, a bar on the last day, 20-bar average turnover ≥ `min_amount`,
   close ≥ `min_price`, not ST.
2. Channels (any one passes): mark-up (close > MA50 > MA200, MA50 rising), range (a valid trading
   range ends at the last bar), accumulation (close ≤ 1.45 × the 250-bar low, 60-bar range ≤ 40 %,
   20/120-bar volume < 0.75), relative strength (20-bar return ≥ CSI 300's + 2 points).
3. Industry resonance: industries ranked by the median 20-bar return of their liquid members;
   those at or above the 70th percentile with ≥ 3 members are "strong" and add to the score
   (with `require_resonance`, other industries are dropped).
4. Pre-ranking: the vectorised trigger rules (signals.compute) in the last `trigger_window` bars
   plus channel + industry + RS points pick a pool of 2 × max(top, confirm_top) candidates; with
   `require_trigger` the pool is every candidate, filtered in step 5 on the engine's triggers.
5. Ranking: every candidate in the pool is read by the per-stock engine (`analyze`, the same call
   `analyze_stock` makes, on the same bars and as-of date); its events in the last
   `trigger_window` bars ARE the pick's triggers (`triggers_of`: Spring that has not failed, SOS,
   LPS; penalties for SOW and a UT/UTAD that has not failed), so the screen and `analyze_stock`
   cannot disagree. Score = trigger points from those + channel + industry + RS points; the phase,
   health and evidence come with each pick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from markets.data import MarketData
from markets.errors import NotFound
from markets.indicators import rolling, sma
from markets.panel import Panel
from markets.symbols import Instrument
from markets.wyckoff import WyckoffAnalysis, analyze, signals
from markets.wyckoff.params import DEFAULT_PARAMS, WyckoffParams

Progress = Callable[[str, str, float | None], None]

TRIGGER_POINTS = {"spring": 3.0, "sos": 3.0, "lps": 2.5}
PENALTY_POINTS = {"sow": -3.0, "upthrust": -2.0}


@dataclass
class ScreenConfig:
    min_bars: int = 120
    min_amount: float = 1e8  # CNY per day, 20-bar average
    min_price: float = 2.0
    exclude_st: bool = True
    triggers: tuple[str, ...] = ("spring", "sos", "lps")
    trigger_window: int = 3
    require_trigger: bool = False  # False: channels alone can rank (triggers add points)
    require_resonance: bool = False
    strong_quantile: float = 0.70
    top: int = 20
    confirm_top: int = 30
    params: WyckoffParams = field(default_factory=lambda: DEFAULT_PARAMS)


@dataclass
class ScreenResult:
    as_of: str
    funnel: dict[str, int]
    picks: list[dict[str, Any]]
    industries: list[dict[str, Any]]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of,
            "funnel": self.funnel,
            "picks": self.picks,
            "strong_industries": self.industries,
            "seconds": round(self.seconds, 2),
        }


# Engine event kinds → screen trigger names.
_TRIGGER_OF_EVENT = {
    "Spring": "spring",
    "SOS": "sos",
    "LPS": "lps",
    "SOW": "sow",
    "UT": "upthrust",
    "UTAD": "upthrust",
}
_TRIGGER_ORDER = ("spring", "sos", "lps", "sow", "upthrust")


def triggers_of(a: WyckoffAnalysis, window: int = 3, kinds: tuple[str, ...] = _TRIGGER_ORDER) -> list[str]:
    """The screen's trigger names for an analysis: its events on the last `window` bars (a failed
    spring or upthrust is no trigger), in the order of `kinds`."""
    seen = {
        _TRIGGER_OF_EVENT[e.kind]
        for e in a.recent_events(window)
        if e.kind in _TRIGGER_OF_EVENT and e.status != "failed"
    }
    return [k for k in kinds if k in seen]


def _noop(stage: str, detail: str = "", percent: float | None = None) -> None:
    return None


def screen(
    data: MarketData,
    cfg: ScreenConfig | None = None,
    *,
    panel: Panel | None = None,
    progress: Progress | None = None,
) -> ScreenResult:
    cfg = cfg or ScreenConfig()
    prog = progress or _noop
    t0 = time.perf_counter()
    prog("load", "building the panel", 0.0)
    if panel is None:
        panel = data.panel(min_bars=1)
    n, T = panel.shape
    insts: list[Instrument | None] = []
    for s in panel.symbols:
        try:
            insts.append(data.resolve(s))
        except NotFound:
            insts.append(None)
    C, V, A = panel.close, panel.volume, panel.amount
    last = T - 1
    funnel: dict[str, int] = {"universe": n}

    # -- 1. liquidity ------------------------------------------------------------------------------
    prog("liquidity", f"{n} instruments", 10.0)
    nbars = (~np.isnan(C)).sum(axis=1)
    amt20 = sma(np.nan_to_num(A, nan=0.0), 20)[:, last]
    is_st = np.array([bool(i and i.is_st) for i in insts])
    with np.errstate(invalid="ignore"):
        liquid = (
            (nbars >= cfg.min_bars)
            & ~np.isnan(C[:, last])
            & (amt20 >= cfg.min_amount)
            & (C[:, last] >= cfg.min_price)
        )
    if cfg.exclude_st:
        liquid &= ~is_st
    funnel["liquid"] = int(liquid.sum())

    # -- 2. channels -------------------------------------------------------------------------------
    prog("channels", f"{funnel['liquid']} liquid", 25.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        m50, m200 = sma(C, 50), sma(C, 200)
        c = C[:, last]
        rising = m50[:, last] > m50[:, last - 5]
        markup = (c > m50[:, last]) & (m50[:, last] > m200[:, last]) & rising
        low250 = rolling(panel.low, min(250, T), "min")[:, last]
        hi60, lo60 = rolling(panel.high, 60, "max")[:, last], rolling(panel.low, 60, "min")[:, last]
        v20, v120 = sma(V, 20)[:, last], sma(V, 120)[:, last]
        accum = (c <= 1.45 * low250) & ((hi60 - lo60) / lo60 <= 0.40) & (v20 / v120 < 0.75)
        ret20 = c / C[:, last - 20] - 1
    bench20 = 0.0
    try:
        ib = data.index_bars("000300", end=str(panel.dates[last]))
        if len(ib) > 21:
            bench20 = float(ib.close[-1] / ib.close[-21] - 1)
    except Exception:  # noqa: BLE001 — no index bars: relative strength is measured against 0
        pass
    rs = np.nan_to_num(ret20 - bench20, nan=-1.0) >= 0.02
    prog("triggers", "Wyckoff rules on the last bars", 40.0)
    cand = np.flatnonzero(liquid)
    days = np.arange(max(1, T - cfg.trigger_window), T)
    lim = np.array([np.nan if (i is None or i.limit_pct is None) else i.limit_pct for i in insts])[cand]
    sg = signals.compute(
        panel.open[cand], panel.high[cand], panel.low[cand], C[cand], V[cand], cfg.params, lim, days=days
    )
    in_range = sg.valid[:, last]
    ranged = np.zeros(n, dtype=bool)
    ranged[cand] = in_range
    channels = {"markup": markup, "range": ranged, "accumulation": accum, "relative_strength": rs}
    any_channel = liquid & (markup | ranged | accum | rs)
    funnel["channels"] = int(any_channel.sum())

    # -- 3. industry resonance ---------------------------------------------------------------------
    prog("industries", "ranking industries", 60.0)
    industry = np.array([(i.industry if i and i.industry else "") for i in insts])
    strong: set[str] = set()
    ind_rows = []
    groups: dict[str, list[int]] = {}
    for kk in np.flatnonzero(liquid):
        if industry[kk]:
            groups.setdefault(str(industry[kk]), []).append(int(kk))
    if groups:
        med = {g: float(np.nanmedian(ret20[ix])) for g, ix in groups.items() if len(ix) >= 3}
        if med:
            cut = float(np.quantile(list(med.values()), cfg.strong_quantile))
            strong = {g for g, v in med.items() if v >= cut}
            ind_rows = sorted(
                (
                    {
                        "industry": str(g),
                        "median_ret20_pct": round(v * 100, 2),
                        "members": len(groups[g]),
                        "in_channels": int(any_channel[groups[g]].sum()),
                    }
                    for g, v in med.items()
                    if g in strong
                ),
                key=lambda r: -float(r["median_ret20_pct"]),  # type: ignore[arg-type]
            )
    resonant = np.array([industry[k] in strong for k in range(n)])
    keep = any_channel & (resonant if cfg.require_resonance else True)
    funnel["resonance"] = int((any_channel & resonant).sum())

    # -- 4. pre-ranking on the vectorised triggers ---------------------------------------------------
    trig: dict[str, np.ndarray] = {}
    for name in _TRIGGER_ORDER:
        full = np.zeros(n, dtype=bool)
        full[cand] = getattr(sg, name)[:, days].any(axis=1)
        trig[name] = full
    base = 1.0 * markup + 0.8 * ranged + 0.8 * accum + 0.6 * rs + 1.0 * resonant
    base = base + np.clip(np.nan_to_num(ret20 - bench20), -0.2, 0.2) * 5
    pre = base.copy()
    for name, pts in (*TRIGGER_POINTS.items(), *PENALTY_POINTS.items()):
        if name in cfg.triggers or name in PENALTY_POINTS:
            pre += pts * trig[name]
    pool = [int(k) for k in np.argsort(-pre, kind="stable") if keep[k]]
    if not cfg.require_trigger:
        pool = pool[: 2 * max(cfg.top, cfg.confirm_top)]
    # With require_trigger every candidate is read by the engine (a few ms each): its events are the
    # triggers, and the vectorised rules both miss some and fire on others, so they cannot filter.

    # -- 5. ranking on the engine's own read -------------------------------------------------------
    prog("ranking", f"engine read of {len(pool)} candidates", 75.0)
    scored: list[tuple[float, int, list[str], WyckoffAnalysis | None]] = []
    for j, k in enumerate(pool):
        sym = panel.symbols[k]
        try:
            a: WyckoffAnalysis | None = analyze(panel.bars_of(sym), insts[k], cfg.params)
        except ValueError:
            a = None
        found = triggers_of(a, cfg.trigger_window) if a is not None else []
        names = [t for t in found if t in cfg.triggers or t in PENALTY_POINTS]
        if cfg.require_trigger and not set(names) & set(cfg.triggers):
            continue
        pts = sum(
            TRIGGER_POINTS.get(t, 0.0) if t in cfg.triggers else PENALTY_POINTS.get(t, 0.0) for t in names
        )
        scored.append((float(base[k]) + pts, k, names, a))
        if j % 10 == 0:
            prog("confirm", f"{sym}", 75.0 + 25.0 * j / max(1, len(pool)))
    scored.sort(key=lambda t: -t[0])
    funnel["triggers"] = sum(1 for _, _, names, _ in scored if set(names) & set(cfg.triggers))
    funnel["ranked"] = int(keep.sum())
    picks = []
    for j, (sc, k, names, a) in enumerate(scored[: cfg.top]):
        inst = insts[k]
        sym = panel.symbols[k]
        reasons = [
            f"{name} in the last {cfg.trigger_window} bars (engine event)"
            for name in names
            if name in cfg.triggers
        ]
        reasons += [
            f"{'SOW' if name == 'sow' else 'upthrust'} in the last {cfg.trigger_window} bars (penalty)"
            for name in names
            if name in PENALTY_POINTS
        ]
        reasons += [f"channel: {name}" for name, mask in channels.items() if mask[k]]
        if resonant[k]:
            reasons.append(f"industry {industry[k]} is among the strongest (20-bar median return)")
        reasons.append(f"20-bar return {ret20[k] * 100:+.1f}% vs CSI 300 {bench20 * 100:+.1f}%")
        pick: dict[str, Any] = {
            "rank": j + 1,
            "symbol": sym,
            "name": inst.name if inst else "",
            "industry": str(industry[k]),
            "score": round(sc, 2),
            "close": round(float(C[k, last]), 4),
            "amount_20d_yi": round(float(amt20[k]) / 1e8, 2),
            "triggers": names,
            "channels": [name for name, mask in channels.items() if mask[k]],
            "reasons": reasons,
        }
        if a is not None:
            pick["as_of"] = str(a.as_of)
            pick["phase"] = a.phase.label
            pick["health"] = a.health.rating
            pick["evidence"] = a.phase.evidence[-3:]
        picks.append(pick)
    picks = picks[: cfg.top]
    prog("done", f"{len(picks)} picks", 100.0)
    return ScreenResult(str(panel.dates[last]), funnel, picks, ind_rows[:10], time.perf_counter() - t0)
