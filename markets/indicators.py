"""Indicators on numpy arrays. Every function works along the last axis, so the same code serves one
stock (1-D) and a whole panel (2-D [symbol, day]). Values that need more history than exists are NaN;
no value ever uses a later bar (no look-ahead)."""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def shift(x: np.ndarray, n: int = 1, fill: float = np.nan) -> np.ndarray:
    """Shift right along the last axis (out[t] = x[t-n])."""
    out = np.full_like(x, fill, dtype=np.float64)
    if n == 0:
        return x.astype(np.float64)
    if n > 0:
        out[..., n:] = x[..., :-n]
    else:
        out[..., :n] = x[..., -n:]
    return out


def prev_valid(x: np.ndarray) -> np.ndarray:
    """The last non-NaN value strictly before each position along the last axis (NaN when none):
    on a panel, a stock's previous close across its suspended days, as on its own bars."""
    x = np.asarray(x, dtype=np.float64)
    T = x.shape[-1]
    idx = np.where(np.isnan(x), -1, np.arange(T))
    np.maximum.accumulate(idx, axis=-1, out=idx)
    before = np.concatenate([np.full((*x.shape[:-1], 1), -1), idx[..., :-1]], axis=-1)
    out = np.take_along_axis(x, np.clip(before, 0, None), axis=-1)
    out[before < 0] = np.nan
    return out


def sma(x: np.ndarray, n: int) -> np.ndarray:
    """Simple moving average; NaN until n values exist (a NaN inside the window gives NaN)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full_like(x, np.nan)
    if x.shape[-1] < n:
        return out
    c = np.cumsum(np.nan_to_num(x), axis=-1)
    bad = np.cumsum(np.isnan(x), axis=-1)
    c = np.concatenate([np.zeros((*x.shape[:-1], 1)), c], axis=-1)
    bad = np.concatenate([np.zeros((*x.shape[:-1], 1)), bad], axis=-1)
    s = (c[..., n:] - c[..., :-n]) / n
    nb = bad[..., n:] - bad[..., :-n]
    s[nb > 0] = np.nan
    out[..., n - 1 :] = s
    return out


def wilder(x: np.ndarray, n: int) -> np.ndarray:
    """Wilder's smoothing (RMA, alpha = 1/n): seeded with the mean of the first n present values
    of a row, then y[t] = (y[t-1]·(n-1) + x[t]) / n over present values; a NaN input (a suspension)
    is skipped and carries the previous value, so a panel row equals the series of the stock's own
    bars. NaN before the seed and for rows with fewer than n values."""
    return smooth(x, n, 1.0 / n)


def ema(x: np.ndarray, n: int) -> np.ndarray:
    """Exponential moving average as TA-Lib's EMA: alpha = 2/(n+1), seeded with the mean of the
    first n present values (first value at the n-th bar); NaN inputs are skipped as in `wilder`."""
    return smooth(x, n, 2.0 / (n + 1))


def macd(
    close: np.ndarray, fast: int = 12, slow: int = 26, signal: int = 9
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(MACD line, signal line, histogram) as TA-Lib's MACD: the fast EMA is seeded on the `fast`
    closes that end where the slow EMA's seed ends (not on the first closes), the signal is the
    `signal`-bar EMA of the line, and all three start once the signal exists (bar slow + signal - 2
    of the stock's own bars). NaN on suspended days."""
    close = np.asarray(close, dtype=np.float64)
    absent = np.isnan(close)
    line = smooth(close, fast, 2.0 / (fast + 1), skip=slow - fast) - smooth(close, slow, 2.0 / (slow + 1))
    line[absent] = np.nan
    sig = ema(line, signal)
    sig[absent] = np.nan
    line[np.isnan(sig)] = np.nan
    return line, sig, line - sig


def smooth(x: np.ndarray, n: int, alpha: float, skip: int = 0) -> np.ndarray:
    """y[t] = y[t-1]·(1 - alpha) + x[t]·alpha over a row's present values, seeded with the mean of
    n present values after the first `skip` (the first value at the (skip + n)-th present one); a NaN
    input carries the previous value. NaN before the seed and for rows that never reach it.

    Vectorised over rows and time: inside chunks of bars the recursion has the closed form
    y[t] = P[t]·(y[c-1] + Σ c[k]/P[k]) with P the running product of (1 - alpha); a chunk is short
    enough that P stays above 1e-2, so the division loses no precision (≤ 1e-13 relative)."""
    x = np.asarray(x, dtype=np.float64)
    T = x.shape[-1]
    flat = x.reshape(-1, T)
    out = np.full_like(flat, np.nan)
    if n + skip > T or flat.shape[0] == 0:
        return out.reshape(x.shape)
    valid = ~np.isnan(flat)
    count = np.cumsum(valid, axis=1)
    ok = count[:, -1] >= skip + n
    if not ok.any():
        return out.reshape(x.shape)
    rows = np.flatnonzero(ok)
    seed = np.argmax(count >= skip + n, axis=1)  # the (skip + n)-th present value
    head = valid & (count > skip) & (count <= skip + n)
    f, sd = flat[rows], seed[rows]
    seeds = np.where(head[rows], np.nan_to_num(f), 0.0).sum(axis=1) / n
    t = np.arange(T)
    after = (t[None, :] > sd[:, None]) & ~np.isnan(f)
    if alpha >= 1.0:  # y = x, carried over gaps
        idx = np.where(after | (t[None, :] == sd[:, None]), t[None, :], 0)
        np.maximum.accumulate(idx, axis=1, out=idx)
        y = np.take_along_axis(f, idx, axis=1)
    else:
        b = np.where(after, 1.0 - alpha, 1.0)
        c = np.where(after, np.nan_to_num(f) * alpha, 0.0)
        c[np.arange(len(rows)), sd] = seeds  # y[seed] = seed mean (y before it is 0, b = 1)
        y = np.empty_like(f)
        step = max(1, int(math.log(1e-2) / math.log(1.0 - alpha)))
        prev = np.zeros(len(rows))
        for c0 in range(0, T, step):
            c1 = min(T, c0 + step)
            P = np.cumprod(b[:, c0:c1], axis=1)
            y[:, c0:c1] = P * (prev[:, None] + np.cumsum(c[:, c0:c1] / P, axis=1))
            prev = y[:, c1 - 1]
    y[t[None, :] < sd[:, None]] = np.nan
    out[rows] = y
    return out.reshape(x.shape)


def true_range(high: np.ndarray, low: np.ndarray, close: np.ndarray) -> np.ndarray:
    """max(high, previous close) - min(low, previous close); NaN on a row's first bar (TA-Lib's TRANGE).
    The previous close is the stock's last one, across suspended (NaN) days."""
    prev = prev_valid(close)
    out: np.ndarray = np.fmax(high - low, np.fmax(np.abs(high - prev), np.abs(low - prev))) + np.where(
        np.isnan(prev), np.nan, 0.0
    )
    return out


def atr(high: np.ndarray, low: np.ndarray, close: np.ndarray, n: int = 14) -> np.ndarray:
    """Wilder's average true range (TA-Lib's ATR): seeded with the mean true range of bars 1..n,
    first value at bar n."""
    return wilder(true_range(high, low, close), n)


def rsi(close: np.ndarray, n: int = 14) -> np.ndarray:
    """Wilder's RSI (TA-Lib's RSI): average gain / (average gain + average loss) × 100, first value at
    bar n; 0 when nothing moved. Changes are from the stock's previous close, across suspended days."""
    d = close - prev_valid(close)
    up = wilder(np.where(np.isnan(d), np.nan, np.clip(d, 0, None)), n)
    down = wilder(np.where(np.isnan(d), np.nan, np.clip(-d, 0, None)), n)
    total = up + down
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total == 0, 0.0, 100.0 * up / total)


def rolling(x: np.ndarray, n: int, fn: str) -> np.ndarray:
    """Rolling max/min/median over the last n values (inclusive), NaN-aware."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full_like(x, np.nan)
    if x.shape[-1] < n:
        return out
    w = sliding_window_view(x, n, axis=-1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows
        out[..., n - 1 :] = getattr(np, f"nan{fn}")(w, axis=-1)
    return out


def slope(x: np.ndarray, n: int) -> np.ndarray:
    """Relative change over n bars: x[t] / x[t-n] - 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = x / shift(x, n) - 1.0
    return out


def swing_points(high: np.ndarray, low: np.ndarray, k: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks of swing highs/lows: the extreme of the ±k bars around it. The last k bars can
    never be swing points (their right side is unknown)."""
    n = high.shape[-1]
    sh = np.zeros(high.shape, dtype=bool)
    sl = np.zeros(low.shape, dtype=bool)
    if n < 2 * k + 1:
        return sh, sl
    # max/min of the 2k+1 bars around each bar by folding shifted slices (fast, NaN-ignoring)
    mx = high[..., : n - 2 * k].copy()
    mn = low[..., : n - 2 * k].copy()
    for j in range(1, 2 * k + 1):
        mx = np.fmax(mx, high[..., j : n - 2 * k + j])
        mn = np.fmin(mn, low[..., j : n - 2 * k + j])
    with np.errstate(invalid="ignore"):
        sh[..., k : n - k] = high[..., k : n - k] >= mx
        sl[..., k : n - k] = low[..., k : n - k] <= mn
    return sh, sl
