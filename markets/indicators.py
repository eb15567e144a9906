"""Indicators on numpy arrays. Every function works along the last axis, so the same code serves one
stock (1-D) and a whole panel (2-D [symbol, day]). Values that need more history than exists are NaN;
no value ever uses a later bar (no look-ahead)."""

from __future__ import annotations

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
    """Wilder's smoothing (RMA), seeded with the first n-value mean; NaN-aware per row."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.reshape(-1, x.shape[-1])
    out = np.full_like(flat, np.nan)
    for r in range(flat.shape[0]):
        row = flat[r]
        ok = np.flatnonzero(~np.isnan(row))
        if len(ok) < n:
            continue
        start = ok[0]
        seed = start + n - 1
        if np.isnan(row[start : seed + 1]).any():
            continue
        val = row[start : seed + 1].mean()
        out[r, seed] = val
        for t in range(seed + 1, len(row)):
            v = row[t]
            if not np.isnan(v):
                val = (val * (n - 1) + v) / n
            out[r, t] = val
    return out.reshape(x.shape)


def true_range(high: np.ndarray, low: np.ndarray, close: np.ndarray) -> np.ndarray:
    prev = shift(close)
    tr = np.fmax(high - low, np.fmax(np.abs(high - prev), np.abs(low - prev)))
    first = np.isnan(prev)
    tr[first] = (high - low)[first]
    return tr


def atr(high: np.ndarray, low: np.ndarray, close: np.ndarray, n: int = 14) -> np.ndarray:
    """Average true range, SMA of the true range (vectorised; close to Wilder's after warm-up)."""
    return sma(true_range(high, low, close), n)


def rsi(close: np.ndarray, n: int = 14) -> np.ndarray:
    d = np.diff(close, axis=-1, prepend=np.nan)
    up, down = (
        wilder(np.where(np.isnan(d), np.nan, np.clip(d, 0, None)), n),
        wilder(np.where(np.isnan(d), np.nan, np.clip(-d, 0, None)), n),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        rs = up / down
        return np.where(down == 0, 100.0, 100 - 100 / (1 + rs))


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
        return x / shift(x, n) - 1.0


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
