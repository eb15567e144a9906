"""`analyze(bars)`: range, events, phase with evidence, indicators and health for one instrument.

Pipeline: indicators (MAs, ATR, average volume, limit-locked mask) → the trading range
(`range.find_range`) → climaxes and AR/ST (`events.find_climax` …) → springs, upthrusts, SOS/SOW,
LPS/LPSY, effort vs result → the phase with its evidence (`phase.classify`) → the health rating
(`health.rate`). Board-aware thresholds come from `WyckoffParams.for_board`.

One window: the analysis reads the last `lookback` (500) bars and states them (`window`: first and
last date, bar count); event and range indices are positions in that window, so a chart of the same
instrument places them by date (`charts.overlay`), whatever the length of the series it was given.
No volume (an index without volume data, or all-zero volume): the volume rules are skipped and the
output says so (`volume_rules`, and a line of evidence); see `events`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from markets.bars import Bars
from markets.indicators import atr as atr_fn
from markets.indicators import ema, macd, shift, sma
from markets.indicators import rsi as rsi_fn
from markets.symbols import Instrument
from markets.wyckoff import range_events as ev
from markets.wyckoff.holding_health import Health, rate
from markets.wyckoff.params import DEFAULT_PARAMS, WyckoffParams
from markets.wyckoff.phase import Phase, classify
from markets.wyckoff.range import TradingRange, find_range

MIN_BARS = 60


LISTED_EVENTS = 12  # the events an analysis lists (and its chart must draw)


@dataclass(frozen=True, slots=True)
class WyckoffAnalysis:
    symbol: str
    name: str
    as_of: date
    close: float
    change_pct: float
    range: TradingRange | None
    events: list[ev.Event]
    phase: Phase
    health: Health
    indicators: dict[str, float | None] = field(default_factory=dict)
    params_board: str = "main"
    bars_used: int = 0
    first_date: date | None = None  # the first bar of the analysis window
    has_volume: bool = True

    def recent_events(self, bars: int = 20) -> list[ev.Event]:
        """Events on the last `bars` bars."""
        return [e for e in self.events if e.index >= self.bars_used - bars]

    def to_dict(self, max_events: int = LISTED_EVENTS) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "name": self.name,
            "as_of": str(self.as_of),
            "close": round(self.close, 4),
            "change_pct": round(self.change_pct * 100, 2),
            "phase": self.phase.to_dict(),
            "range": self.range.to_dict() if self.range else None,
            "events": [e.to_dict() for e in self.events[-max_events:]],
            "indicators": self.indicators,
            "health": self.health.to_dict(),
            "board": self.params_board,
            "window": {"from": str(self.first_date), "to": str(self.as_of), "bars": self.bars_used},
            "volume_rules": "applied" if self.has_volume else "skipped: no volume data",
        }


def limit_locked(bars: Bars, limit: float | None, tol: float) -> np.ndarray:
    """One-price bars at the daily limit (high == low and |move| ≥ limit − tol): no trading happened
    at any other price, so the bar carries no supply/demand information and cannot be filled."""
    pct = bars.pct_change()
    one_price = bars.high == bars.low
    if limit is None:
        return np.zeros(len(bars), dtype=bool)
    locked: np.ndarray = one_price & (np.abs(np.nan_to_num(pct)) >= limit - tol)
    return locked


def has_volume(bars: Bars) -> bool:
    """Whether the bars carry volume at all (an index file may have none, read as 0 or NaN)."""
    v = bars.volume
    return bool(len(v)) and bool(np.nansum(np.abs(v)) > 0)


def prepare(bars: Bars, p: WyckoffParams, limit: float | None) -> ev.Series:
    a = atr_fn(bars.high, bars.low, bars.close, 14)
    return ev.Series(
        dates=bars.dates,
        open=bars.open,
        high=bars.high,
        low=bars.low,
        close=bars.close,
        volume=bars.volume,
        pct=bars.pct_change(),
        atr=shift(a),
        vol_avg=shift(sma(bars.volume, p.vol_avg)),
        locked=limit_locked(bars, limit, p.limit_tol),
        has_volume=has_volume(bars),
    )


def analyze(
    bars: Bars,
    inst: Instrument | None = None,
    params: WyckoffParams | None = None,
    *,
    cost: float | None = None,
    high_since_entry: float | None = None,
    lookback: int = 500,
) -> WyckoffAnalysis:
    """Wyckoff analysis of the last bar of `bars` (at most `lookback` bars are used)."""
    if len(bars) < MIN_BARS:
        raise ValueError(
            f"{bars.symbol}: {len(bars)} bars; the engine needs at least {MIN_BARS} (250+ for MA200)"
        )
    bars = bars.tail(lookback)
    base = params or DEFAULT_PARAMS
    board = inst.board if inst else ("crypto" if bars.market == "crypto" else "main")
    is_st = bool(inst and inst.is_st)
    p = base.for_board(board, is_st)
    limit = inst.limit_pct if inst else (None if bars.market != "cn" else 0.10)
    s = prepare(bars, p, limit)
    end = len(bars) - 1
    atr_pct = s.atr / bars.close
    rng = find_range(bars.dates, bars.high, bars.low, bars.close, np.nan_to_num(atr_pct, nan=0.02), p)

    events: list[ev.Event] = []
    evidence: list[str] = []
    if not s.has_volume:
        evidence.append(
            "No volume data for this instrument: the volume rules were skipped (no climaxes SC/BC and "
            "their ST, no UTAD, no effort vs result, springs untested); SOS/SOW/LPS are judged on price alone."
        )
    if rng is not None:
        evidence.append(
            f"Trading range {rng.support:,.2f}–{rng.resistance:,.2f} (width {rng.width_pct * 100:.1f}%, "
            f"{rng.age} bars since {rng.start_date}, touches {rng.touches_support} support / "
            f"{rng.touches_resistance} resistance, quality {rng.quality:.2f})."
        )
        sc = ev.find_climax(s, rng, p, "SC")
        bc = ev.find_climax(s, rng, p, "BC")
        # Tests of the range's edges count only once the range exists: after the AR (and the
        # first ST), or 10 bars into the range when no climax was found.
        established = rng.start + 10
        for climax in (sc, bc):
            if climax is None:
                continue
            events.append(climax)
            ar = ev.find_ar(s, climax, p)
            if ar:
                events.append(ar)
                sts = ev.find_st(s, climax, ar, p)
                events.extend(sts)
                established = max(ar.index + 3, sts[0].index + 3 if sts else 0)
        springs = ev.find_springs(s, rng, p, end, established)
        breaks = ev.find_breaks(s, rng, p, end, established)
        events += springs + ev.find_upthrusts(s, rng, p, end, established) + breaks
        events += ev.find_lps(s, rng, breaks, springs, p, end)
        events += ev.find_evr(s, rng, p, end)
        edge_tests = {e.index for e in events if e.kind in ("Spring", "UT", "UTAD")}
        events = [e for e in events if not (e.kind == "ST" and e.index in edge_tests)]
        events = list({(e.kind, e.index): e for e in events}.values())  # one label per bar and kind
        events.sort(key=lambda e: e.index)
        if not sc and not bc and s.has_volume:
            evidence.append("No selling or buying climax found at the start of the range.")
        for e in events:
            if e.kind != "EvR" or e.index >= end - 20:
                evidence.append(f"{e.date} {e.kind}: {e.detail}.")
    locked_n = int(s.locked[-120:].sum())
    if locked_n:
        evidence.append(f"{locked_n} limit-locked bar(s) in the last 120 were excluded from event detection.")

    mas = {f"ma{n}": sma(bars.close, n) for n in (5, 10, 20, 50, 200)}
    p_mid = mas["ma50"]
    p_slow = mas["ma200"]
    phase = classify(rng, events, bars.close, p_mid, p_slow, p, evidence)
    health = rate(bars.close, mas, rng, phase, events, p, cost=cost, high_since_entry=high_since_entry)

    def last(x: np.ndarray) -> float | None:
        v = x[-1]
        return None if np.isnan(v) else round(float(v), 4)

    vol20, vol60 = sma(bars.volume, 20)[-1], sma(bars.volume, 60)[-1]
    if not s.has_volume:
        vol20 = vol60 = float("nan")
    c = float(bars.close[-1])
    atr_now = atr_fn(bars.high, bars.low, bars.close, 14)[
        -1
    ]  # the as-of bar's ATR (events use the one before)
    hi250 = float(np.max(bars.high[-250:]))
    lo250 = float(np.min(bars.low[-250:]))
    indicators = {
        **{k: last(v) for k, v in mas.items()},
        "atr14": None if np.isnan(atr_now) else round(float(atr_now), 4),
        "atr_pct": None if np.isnan(atr_now) else round(float(atr_now / c) * 100, 2),
        "rsi14": last(rsi_fn(bars.close, 14)),
        "ema12": last(ema(bars.close, 12)),
        "ema26": last(ema(bars.close, 26)),
        **dict(
            zip(("macd", "macd_signal", "macd_hist"), map(last, macd(bars.close, 12, 26, 9)), strict=True)
        ),
        "ret_5d_pct": round((c / bars.close[-6] - 1) * 100, 2) if len(bars) > 5 else None,
        "ret_20d_pct": round((c / bars.close[-21] - 1) * 100, 2) if len(bars) > 20 else None,
        "ret_60d_pct": round((c / bars.close[-61] - 1) * 100, 2) if len(bars) > 60 else None,
        "vol_ratio_20_60": None if np.isnan(vol60) or not vol60 else round(float(vol20 / vol60), 2),
        "high_250d": round(hi250, 4),
        "low_250d": round(lo250, 4),
        "from_high_pct": round((c / hi250 - 1) * 100, 2),
    }
    pct = bars.pct_change()[-1]
    return WyckoffAnalysis(
        symbol=bars.symbol,
        name=inst.name if inst else "",
        as_of=bars.dates[-1].astype(object),
        close=c,
        change_pct=0.0 if np.isnan(pct) else float(pct),
        range=rng,
        events=events,
        phase=phase,
        health=health,
        indicators=indicators,
        params_board="st" if is_st else board,
        bars_used=len(bars),
        first_date=bars.dates[0].astype(object),
        has_volume=s.has_volume,
    )
