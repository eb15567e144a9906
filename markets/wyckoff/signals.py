"""The engine's trigger rules vectorised over a panel [symbol, day], without look-ahead.

For every day t the trading range is measured on the window that ends at t − 1 (`range.range_levels`
on `lookback` bars; the better of the lookbacks in `lookbacks`, same acceptance rules as the
per-stock engine), and the bar t is tested against it:

- spring: the low of t or t − 1 pierces support by ≥ `pierce` and ≤ `spring_max_depth`, the close
  is back above support and below mid + `spring_max_close_pos` × width;
- sos: close over resistance, the previous close ≤ `sos_max_prev_above` over it, move ≥
  `sos_min_pct`, volume ≥ `sos_vol` × average; sow mirrors it under support;
- upthrust: high over resistance by ≥ `pierce` and over the previous close (no gap-down bar),
  close back under it, upper shadow ≥ `upthrust_shadow`, volume ≥ `shakeout_vol` × average;
- lps: within `lps_window` bars after an SOS, a bar whose low holds within `lps_tol` of that SOS's
  resistance, ≥ 2 % under the highest close since, on ≤ `lps_vol` × the SOS volume and ≤ average.

Limit-locked bars never trigger. This is what the backtester uses, and what the screen uses to
pre-rank; the screen's reported triggers come from the per-stock engine (`engine.analyze`), which
adds climaxes, tests, phases and evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from markets.indicators import atr, rolling, shift, sma, swing_points
from markets.wyckoff.params import WyckoffParams
from markets.wyckoff.range import range_levels, series_pivots, window_pivot_median


@dataclass(frozen=True, slots=True)
class Signals:
    support: np.ndarray
    resistance: np.ndarray
    valid: np.ndarray
    spring: np.ndarray
    sos: np.ndarray
    sow: np.ndarray
    upthrust: np.ndarray
    lps: np.ndarray
    vol_ratio: np.ndarray

    def any_entry(self, kinds: tuple[str, ...] = ("spring", "sos", "lps")) -> np.ndarray:
        out = np.zeros(self.spring.shape, dtype=bool)
        for k in kinds:
            out |= getattr(self, k.lower())
        return out


def rolling_levels(
    H: np.ndarray,
    L: np.ndarray,
    C: np.ndarray,
    atr_pct: np.ndarray,
    p: WyckoffParams,
    lookbacks: tuple[int, ...] = (60, 120),
    days: np.ndarray | None = None,
    chunk: int = 64,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Support, resistance and validity for each [symbol, day] from the window ending the day before.
    `days` restricts the computation to some day indices (the screen needs only the last few)."""
    n, t = C.shape
    sup = np.full((n, t), np.nan)
    res = np.full((n, t), np.nan)
    valid = np.zeros((n, t), dtype=bool)
    best_q = np.full((n, t), -np.inf)
    all_days = np.arange(t) if days is None else np.asarray(days)
    # swing points of the whole series once; each window's pivots are read off them
    sw = p.swing_window
    swing_h, swing_l = swing_points(H, L, sw)
    piv_h, piv_l = series_pivots(swing_h, p.range_pivots), series_pivots(swing_l, p.range_pivots)
    for lb in sorted(lookbacks):
        if t <= lb:
            continue
        wh, wl, wc = (
            sliding_window_view(x, lb, axis=-1) for x in (H, L, C)
        )  # [n, t-lb+1, lb], window k ends at k+lb-1
        for lo in range(0, len(all_days), chunk):
            dd = all_days[lo : lo + chunk]
            dd = dd[dd >= lb]  # window ends at d-1 → window index d-lb
            if not len(dd):
                continue
            k = dd - lb
            ap = atr_pct[:, dd - 1]
            pivots = (window_pivot_median(L, piv_l, k, lb, sw), window_pivot_median(H, piv_h, k, lb, sw))
            # consecutive days (a whole backtest): a slice of the window views, not a copy
            run = np.array_equal(k, np.arange(k[0], k[0] + len(k)))
            at: slice | np.ndarray = slice(k[0], k[0] + len(k)) if run else k
            lv = range_levels(wh[:, at], wl[:, at], wc[:, at], np.nan_to_num(ap, nan=0.02), p, pivots)
            ok = lv.valid
            better = ok & (lv.quality >= best_q[:, dd] - p.quality_tie)  # longer lookbacks come later
            for arr, val in ((sup, lv.support), (res, lv.resistance)):
                cur = arr[:, dd]
                cur[better] = val[better]
                arr[:, dd] = cur
            q = best_q[:, dd]
            q[better] = lv.quality[better]
            best_q[:, dd] = q
            v = valid[:, dd]
            v |= ok
            valid[:, dd] = v
    return sup, res, valid


def compute(
    Op: np.ndarray,
    H: np.ndarray,
    L: np.ndarray,
    C: np.ndarray,
    V: np.ndarray,
    p: WyckoffParams,
    limit: np.ndarray | None = None,
    lookbacks: tuple[int, ...] = (60, 120),
    days: np.ndarray | None = None,
) -> Signals:
    """Trigger masks for a panel. `limit` is the daily limit per symbol, or per [symbol, day] (an
    ST spell narrows it); NaN: none."""
    with np.errstate(all="ignore"):
        prev_c = shift(C)
        pct = C / prev_c - 1
        a = atr(H, L, C, 14)
        atr_pct = a / C
        vavg = shift(sma(V, p.vol_avg))
        vr = V / vavg
        if limit is None:
            locked = np.zeros(C.shape, dtype=bool)
        else:
            lim = np.asarray(limit, dtype=float)
            lim = lim if lim.ndim == 2 else lim[:, None]
            locked = (H == L) & (np.abs(np.nan_to_num(pct)) >= np.nan_to_num(lim, nan=9.0) - p.limit_tol)
        sup, res, valid = rolling_levels(H, L, C, atr_pct, p, lookbacks, days)
        mid, width = (sup + res) / 2, res - sup
        low2 = np.fmin(L, shift(L))
        ok = valid & ~locked
        spring = (
            ok
            & (low2 <= sup * (1 - p.pierce))
            & (low2 >= sup * (1 - p.spring_max_depth))
            & (sup < C)
            & (mid + p.spring_max_close_pos * width > C)
        )
        big = vr >= p.sos_vol
        sos = ok & big & (res < C) & (prev_c <= res * (1 + p.sos_max_prev_above)) & (pct >= p.sos_min_pct)
        sow = ok & big & (sup > C) & (prev_c >= sup * (1 - p.sos_max_prev_above)) & (pct <= -p.sos_min_pct)
        bar = H - L
        shadow = np.where(bar > 0, (H - np.fmax(Op, C)) / np.where(bar > 0, bar, 1), 0)
        upthrust = (
            ok
            & (res * (1 + p.pierce) <= H)
            & (res > C)
            & (prev_c < H)  # not a gap-down bar (see events.find_upthrusts)
            & (shadow >= p.upthrust_shadow)
            & (vr >= p.shakeout_vol)
        )
        lps = _lps(sos, res, C, L, V, vavg, p) & ~locked
    return Signals(sup, res, valid, spring, sos, sow, upthrust, lps, vr)


def _lps(
    sos: np.ndarray,
    res: np.ndarray,
    C: np.ndarray,
    L: np.ndarray,
    V: np.ndarray,
    vavg: np.ndarray,
    p: WyckoffParams,
) -> np.ndarray:
    n, t = sos.shape
    idx = np.where(sos, np.arange(t)[None, :], -1)
    last = np.maximum.accumulate(idx, axis=1)
    last_prev = shift(last.astype(float), 1, -1).astype(int)  # the SOS must be before the bar
    has = (last_prev >= 0) & (np.arange(t)[None, :] - last_prev <= p.lps_window)
    rows = np.arange(n)[:, None]
    li = np.clip(last_prev, 0, t - 1)
    level = res[rows, li]
    sos_vol = V[rows, li]
    peak = shift(rolling(C, p.lps_window, "max"))
    with np.errstate(all="ignore"):
        lps: np.ndarray = (
            has
            & (level * (1 - p.lps_tol) <= L)
            & (peak * 0.98 >= L)
            & (p.lps_vol * sos_vol >= V)
            & (vavg >= V)
        )
    return lps
