"""The backtest's trading-range levels read off the whole series are, to the bit, what the
per-window computation gives: swing points, the median of the last pivots, the touch counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from markets.indicators import shift, swing_points
from markets.wyckoff import WyckoffParams
from markets.wyckoff.range import (
    _median_last,
    _visits,
    range_levels,
    series_pivots,
    window_pivot_median,
)
from markets.wyckoff.signals import rolling_levels

P = WyckoffParams()


def _panel(seed: int, symbols: int, days: int, gaps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = 10 * np.exp(np.cumsum(rng.normal(0, 0.02, (symbols, days)), axis=-1))
    c = np.round(c, 2)  # ties, as real prices have: equal highs/lows are both swing points
    h = np.round(c * (1 + rng.uniform(0, 0.03, c.shape)), 2)
    low = np.round(c * (1 - rng.uniform(0, 0.03, c.shape)), 2)
    missing = rng.random(c.shape) < gaps  # suspended days are NaN
    for x in (h, low, c):
        x[missing] = np.nan
    return h, low, c


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    symbols=st.integers(1, 4),
    days=st.integers(10, 90),
    lb=st.integers(3, 40),
    gaps=st.sampled_from([0.0, 0.05, 0.4]),
    pivots=st.integers(1, 6),
)
def test_window_pivot_median_is_the_per_window_median(seed, symbols, days, lb, gaps, pivots):
    h, low, _ = _panel(seed, symbols, days, gaps)
    if days < lb:
        return
    sw = P.swing_window
    k = np.arange(days - lb + 1)
    sh, sl = swing_points(h, low, sw)
    wh, wl = sliding_window_view(h, lb, axis=-1)[:, k], sliding_window_view(low, lb, axis=-1)[:, k]
    wsh, wsl = swing_points(wh, wl, sw)
    for values, win, series_mask, win_mask in ((low, wl, sl, wsl), (h, wh, sh, wsh)):
        fast, n_fast = window_pivot_median(values, series_pivots(series_mask, pivots), k, lb, sw)
        slow, n_slow = _median_last(win, win_mask, pivots)
        assert np.array_equal(n_fast, n_slow)
        assert np.array_equal(fast, slow, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(bits=st.lists(st.lists(st.booleans(), min_size=1, max_size=30), min_size=1, max_size=5))
def test_visits_count_the_runs(bits):
    width = max(len(b) for b in bits)
    touching = np.array([b + [False] * (width - len(b)) for b in bits])
    before = (touching & ~(shift(touching.astype(float), 1, 0.0) > 0)).sum(axis=-1)
    assert np.array_equal(_visits(touching), before)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), gaps=st.sampled_from([0.0, 0.1]), days=st.integers(30, 160))
def test_rolling_levels_match_range_levels_day_by_day(seed, gaps, days):
    h, low, c = _panel(seed, 3, days, gaps)
    atr_pct = np.full(c.shape, 0.02)
    lookbacks = (20, 60)
    sup, res, valid = rolling_levels(h, low, c, atr_pct, P, lookbacks, chunk=7)
    for d in range(days):
        best_q = np.full(3, -np.inf)
        want_sup, want_res, want_valid = np.full(3, np.nan), np.full(3, np.nan), np.zeros(3, bool)
        for lb in lookbacks:
            if d < lb or days <= lb:
                continue
            lv = range_levels(h[:, d - lb : d], low[:, d - lb : d], c[:, d - lb : d], atr_pct[:, d - 1], P)
            better = lv.valid & (lv.quality >= best_q - P.quality_tie)
            want_sup[better], want_res[better] = lv.support[better], lv.resistance[better]
            best_q[better] = lv.quality[better]
            want_valid |= lv.valid
        assert np.array_equal(sup[:, d], want_sup, equal_nan=True)
        assert np.array_equal(res[:, d], want_res, equal_nan=True)
        assert np.array_equal(valid[:, d], want_valid)
