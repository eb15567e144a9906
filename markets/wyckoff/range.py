"""The trading range as a first-class object, and its detection.

Rule (vectorised over any leading axes, so one stock, a whole panel or every day of a backtest use
the same code):

1. Take a window of `lookback` bars that ends `range_exclude_last` bars before the bar being judged
   (the newest bar is compared with the range *before* it: that is what makes a spring or a break).
2. Swing lows/highs are the extremes of the ±`swing_window` bars around them.
   support = median of the last `range_pivots` swing lows; resistance = median of the last swing
   highs; with fewer than 2 swings on a side, the 10 % / 90 % quantile of lows / highs.
3. A window is a trading range when: width (res − sup) / sup is within [min_width, max_width];
   the drift from its first to its last close is ≤ `range_max_drift`; ≥ `range_min_containment`
   of the closes are inside the band (levels ± `touch_tol`); each side was touched (within
   `touch_tol`) on ≥ `min_touches` separate visits.
4. quality = 0.45 × touch score (min(touches)/3, capped at 1) + 0.35 × width score (width relative
   to 4 × ATR %, capped at 1) + 0.20 × drift score (1 − drift / max_drift).
5. Several lookbacks are tried; the longest valid one wins unless a shorter one is better by more
   than `quality_tie`. The range's body: the window is cut at every run of `range_escape_bars`
   closes outside the band, the segment with most closes inside is the body (extended back past
   the window while closes stay inside). `start`/`end` are the body's first/last bars; age = end −
   start + 1. When `end` is well before the last bar, price has left the range.

Naming: here support is the "creek" and resistance the "ice" (as bmad4's detectors have them), and
the object exposes those aliases. Classical texts (Pruden, Villahermosa) use "creek" for the
resistance an accumulation must jump (JAC) and "ice" for the support a distribution falls through;
`support`/`resistance` are the unambiguous names.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

import numpy as np

from markets.indicators import swing_points
from markets.wyckoff.params import WyckoffParams


def _sorted_pick(x: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """The q-quantile (linear) of the non-NaN values along the last axis, and their count.
    np.sort puts NaN last, so this is a plain C sort (np.nanquantile/nanmedian fall back to slow
    per-row paths on 3-D input)."""
    xs = np.sort(x, axis=-1)
    c = (~np.isnan(x)).sum(axis=-1)
    pos = q * np.maximum(c - 1, 0)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(c - 1, 0))
    a = np.take_along_axis(xs, lo[..., None], axis=-1)[..., 0]
    b = np.take_along_axis(xs, hi[..., None], axis=-1)[..., 0]
    out = a + (b - a) * (pos - lo)
    return np.where(c > 0, out, np.nan), c


def _median_last(values: np.ndarray, mask: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Median of the last n values where mask is set (along the last axis) and how many were used.
    The (at most n) chosen values are gathered into n slots first, so the sort is over n values,
    not the whole window: the same sorted values, so the same median to the bit."""
    m = mask & ~np.isnan(values)
    rc = np.cumsum(m[..., ::-1], axis=-1, dtype=np.int32)[..., ::-1]
    where = np.nonzero(m & (rc <= n))
    picked = np.full((*values.shape[:-1], n), np.nan)
    slot: tuple[np.ndarray, ...] = (*where[:-1], rc[where] - 1)
    picked[slot] = values[where]
    return _sorted_pick(picked, 0.5)


def _visits(touching: np.ndarray) -> np.ndarray:
    """Separate visits along the last axis: bars touching whose previous bar did not."""
    visits: np.ndarray = touching[..., 0] + (touching[..., 1:] & ~touching[..., :-1]).sum(axis=-1)
    return visits


def _quantile_where(x: np.ndarray, q: float, need: np.ndarray) -> np.ndarray:
    """`_sorted_pick(x, q)` for the windows where `need` is set (NaN elsewhere): the fallback
    levels are wanted only for the few windows with fewer than two swing points."""
    out = np.full(x.shape[:-1], np.nan)
    if need.any():
        out[need] = _sorted_pick(x[need], q)[0]
    return out


def series_pivots(mask: np.ndarray, n: int) -> np.ndarray:
    """For every bar of a series, the indices of the last `n` bars at or before it where `mask` is
    set, most recent first (-1 where there are fewer): shape [..., n, T]."""
    t = mask.shape[-1]
    last = np.where(mask, np.arange(t), -1)
    np.maximum.accumulate(last, axis=-1, out=last)
    before = np.concatenate([np.full((*mask.shape[:-1], 1), -1), last[..., :-1]], axis=-1)
    out = [last]
    for _ in range(n - 1):  # the one before bar i is the last set bar at or before i - 1
        out.append(np.take_along_axis(before, np.maximum(out[-1], 0), axis=-1))
    return np.stack(out, axis=-2)


def window_pivot_median(
    values: np.ndarray, pivots: np.ndarray, k: np.ndarray, lb: int, swing_window: int
) -> tuple[np.ndarray, np.ndarray]:
    """`_median_last` of the swing points of the windows of `lb` bars starting at bars `k`
    (shape [S, len(k)]), from the whole series' `values` [S, T] and `series_pivots` of its swing
    mask: what `range_levels` computes per window, without a per-window pass over `lb` bars.

    A bar at least `swing_window` bars from both ends of its window sees the same neighbours in
    the window as in the series, so it is a swing point of the window exactly when it is one of the
    series; bars nearer the ends cannot be the window's swing points. So the window's last n swing
    points are the series' last n at or before its last inner bar that are not before its first
    inner bar — the same values, hence the same median to the bit."""
    s = values.shape[0]
    if lb < 2 * swing_window + 1:  # too short for any swing point (as in `swing_points`)
        return np.full((s, len(k)), np.nan), np.zeros((s, len(k)), dtype=np.int64)
    idx = pivots[:, :, k + lb - 1 - swing_window]  # [S, n, D]
    inside = idx >= (k + swing_window)[None, None, :]
    got = np.take_along_axis(
        values, np.maximum(idx, 0).reshape(s, idx.shape[1] * idx.shape[2]), axis=-1
    ).reshape(idx.shape)
    picked = np.where(inside, got, np.nan).transpose(0, 2, 1)  # [S, D, n]
    return _sorted_pick(picked, 0.5)


@dataclass(frozen=True, slots=True)
class RangeLevels:
    """Arrays over the leading axes of the windows passed to `range_levels`."""

    support: np.ndarray
    resistance: np.ndarray
    width: np.ndarray
    drift: np.ndarray
    containment: np.ndarray
    touches_support: np.ndarray
    touches_resistance: np.ndarray
    quality: np.ndarray
    valid: np.ndarray


def range_levels(
    H: np.ndarray,
    L: np.ndarray,
    C: np.ndarray,
    atr_pct: np.ndarray,
    p: WyckoffParams,
    pivot_medians: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
) -> RangeLevels:
    """Levels and acceptance of windows H/L/C shaped [..., W] (NaN where no bar).
    `pivot_medians`: ((support, swing lows used), (resistance, swing highs used)) when the caller
    has them (`window_pivot_median`), else computed here from the windows' swing points."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        if pivot_medians is None:
            sh, sl = swing_points(H, L, p.swing_window)
            sup, ns = _median_last(L, sl, p.range_pivots)
            res, nr = _median_last(H, sh, p.range_pivots)
        else:
            (sup, ns), (res, nr) = pivot_medians
        sup = np.where(ns >= 2, sup, _quantile_where(L, 0.10, ns < 2))
        res = np.where(nr >= 2, res, _quantile_where(H, 0.90, nr < 2))
        width = (res - sup) / sup
        have = ~np.isnan(C)
        n_have = have.sum(axis=-1)
        first_idx = np.argmax(have, axis=-1)
        first = np.take_along_axis(C, first_idx[..., None], axis=-1)[..., 0]
        drift = np.abs(C[..., -1] / first - 1.0)
        tol = p.touch_tol
        lo_band, hi_band = (sup * (1 - tol))[..., None], (res * (1 + tol))[..., None]
        inside = (lo_band <= C) & (hi_band >= C)
        containment = inside.sum(axis=-1) / np.maximum(n_have, 1)
        ts_bar = (sup * (1 + tol))[..., None] >= L
        tr_bar = (res * (1 - tol))[..., None] <= H
        ts, tr = _visits(ts_bar), _visits(tr_bar)
        touch_score = np.minimum(1.0, np.minimum(ts, tr) / 3.0)
        width_score = np.minimum(1.0, width / np.maximum(4.0 * atr_pct, 1e-9))
        drift_score = np.clip(1.0 - drift / p.range_max_drift, 0.0, 1.0)
        quality = 0.45 * touch_score + 0.35 * width_score + 0.20 * drift_score
        valid = (
            (n_have >= 0.9 * H.shape[-1])
            & (width >= p.range_min_width)
            & (width <= p.range_max_width)
            & (drift <= p.range_max_drift)
            & (containment >= p.range_min_containment)
            & (ts >= p.min_touches)
            & (tr >= p.min_touches)
        )
    return RangeLevels(sup, res, width, drift, containment, ts, tr, np.round(quality, 4), valid)


@dataclass(frozen=True, slots=True)
class TradingRange:
    support: float
    resistance: float
    start: int  # index of the first bar of the range
    end: int  # index of the last bar used to draw it
    start_date: date
    end_date: date
    lookback: int
    touches_support: int
    touches_resistance: int
    width_pct: float
    drift: float
    containment: float
    quality: float

    @property
    def creek(self) -> float:  # naming: see the module doc
        return self.support

    @property
    def ice(self) -> float:
        return self.resistance

    @property
    def mid(self) -> float:
        return (self.support + self.resistance) / 2

    @property
    def width(self) -> float:
        return self.resistance - self.support

    @property
    def age(self) -> int:
        return self.end - self.start + 1

    def position(self, price: float) -> float:
        """0 at support, 1 at resistance (below 0 / above 1 outside the range)."""
        return (price - self.support) / self.width if self.width else 0.5

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            start_date=str(self.start_date),
            end_date=str(self.end_date),
            mid=round(self.mid, 4),
            age=self.age,
            width_pct=round(self.width_pct * 100, 2),
            drift=round(self.drift * 100, 2),
            support=round(self.support, 4),
            resistance=round(self.resistance, 4),
            containment=round(self.containment, 3),
            quality=round(self.quality, 3),
        )
        return d


def find_range(
    dates: np.ndarray,
    high: np.ndarray,
    low: np.ndarray,
    close: np.ndarray,
    atr_pct: np.ndarray,
    p: WyckoffParams,
    end: int | None = None,
) -> TradingRange | None:
    """The current (or most recent) trading range of one stock as of bar `end` (default: the last).

    Windows ending `range_exclude_last` + offset bars before `end` are tried for every offset in
    `range_offsets` (nearest first), so a range that price has just left is still found."""
    n = len(close)
    end = n - 1 if end is None else end
    for off in p.range_offsets:
        we = end - p.range_exclude_last - off  # window end (inclusive)
        if we < 30:
            break
        best: tuple[int, RangeLevels, int] | None = None
        lbs = [lb for lb in p.range_lookbacks if we - lb + 1 >= 0]
        if not lbs:
            continue
        W = max(lbs)
        # One stacked call per candidate lookback: windows right-aligned at `we`, NaN-padded.
        stack_h = np.full((len(lbs), W), np.nan)
        stack_l, stack_c = stack_h.copy(), stack_h.copy()
        for j, lb in enumerate(lbs):
            s = we - lb + 1
            stack_h[j, W - lb :], stack_l[j, W - lb :], stack_c[j, W - lb :] = (
                high[s : we + 1],
                low[s : we + 1],
                close[s : we + 1],
            )
        ap = np.full(len(lbs), atr_pct[we] if not np.isnan(atr_pct[we]) else 0.02)
        lv = _levels_ragged(stack_h, stack_l, stack_c, ap, lbs, p)
        for j, lb in enumerate(lbs):
            if not lv.valid[j]:
                continue
            if best is None or lv.quality[j] >= lv.quality[best[2]] - p.quality_tie:
                best = (lb, lv, j)
        if best is None:
            continue
        lb, lv, j = best
        sup, res = float(lv.support[j]), float(lv.resistance[j])
        start, body_end = _body(close, we - lb + 1, we, sup, res, p)
        return TradingRange(
            support=sup,
            resistance=res,
            start=start,
            end=body_end,
            start_date=dates[start].astype(object),
            end_date=dates[body_end].astype(object),
            lookback=lb,
            touches_support=int(lv.touches_support[j]),
            touches_resistance=int(lv.touches_resistance[j]),
            width_pct=float(lv.width[j]),
            drift=float(lv.drift[j]),
            containment=float(lv.containment[j]),
            quality=float(lv.quality[j]),
        )
    return None


def _levels_ragged(
    H: np.ndarray, L: np.ndarray, C: np.ndarray, ap: np.ndarray, lbs: list[int], p: WyckoffParams
) -> RangeLevels:
    """range_levels on right-aligned windows of different lengths: the NaN padding is ignored
    except for the bar-count test, which is applied per window length."""
    lv = range_levels(H, L, C, ap, p)
    n_have = (~np.isnan(C)).sum(axis=-1)
    ok = n_have >= 0.9 * np.asarray(lbs)
    core = (
        (lv.width >= p.range_min_width)
        & (lv.width <= p.range_max_width)
        & (lv.drift <= p.range_max_drift)
        & (lv.containment >= p.range_min_containment)
        & (lv.touches_support >= p.min_touches)
        & (lv.touches_resistance >= p.min_touches)
    )
    return RangeLevels(
        lv.support,
        lv.resistance,
        lv.width,
        lv.drift,
        lv.containment,
        lv.touches_support,
        lv.touches_resistance,
        lv.quality,
        core & ok,
    )


def _body(close: np.ndarray, ws: int, we: int, sup: float, res: float, p: WyckoffParams) -> tuple[int, int]:
    """First and last bar of the range's body: the window is cut into segments at every run of
    `range_escape_bars` closes outside the band; the segment with the most closes inside is the
    body, and its start is extended back past the window while closes stay in the band."""
    lo, hi = sup * (1 - p.touch_tol), res * (1 + p.touch_tol)
    inside = (close >= lo) & (close <= hi)
    segs: list[tuple[int, int, int]] = []  # (start, end, inside count)
    seg_start, run, last_in = None, 0, None
    for i in range(ws, we + 1):
        if inside[i]:
            if seg_start is None:
                seg_start = i
            last_in, run = i, 0
        else:
            run += 1
            if run >= p.range_escape_bars and seg_start is not None and last_in is not None:
                segs.append((seg_start, last_in, int(inside[seg_start : last_in + 1].sum())))
                seg_start = None
    if seg_start is not None and last_in is not None:
        segs.append((seg_start, last_in, int(inside[seg_start : last_in + 1].sum())))
    if not segs:
        return ws, we
    start, end, _ = max(segs, key=lambda t: (t[2], t[1]))
    run = 0
    i = start - 1
    while i >= 0:
        run = run + 1 if not inside[i] else 0
        if run >= p.range_escape_bars:
            break
        if inside[i]:
            start = i
        i -= 1
    return start, end
