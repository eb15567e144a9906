"""Indicators against hand references (plain loops, as TA-Lib defines them) and, when TA-Lib is
installed (an optional dev dependency), against TA-Lib itself: ATR and RSI of a panel row equal the
series of the stock's own bars (suspended days excluded), and `indicators.atr14` is the as-of
bar's ATR."""

from __future__ import annotations

import numpy as np
import pytest

from markets.data import MarketData
from markets.indicators import atr, rsi
from markets.wyckoff import analyze

MD = MarketData()
PANEL = MD.panel()


def hand_atr(h: np.ndarray, lo: np.ndarray, c: np.ndarray, n: int = 14) -> np.ndarray:
    out = np.full(len(c), np.nan)
    tr = [np.nan] + [max(h[k] - lo[k], abs(h[k] - c[k - 1]), abs(lo[k] - c[k - 1])) for k in range(1, len(c))]
    if len(c) <= n:
        return out
    out[n] = sum(tr[1 : n + 1]) / n
    for k in range(n + 1, len(c)):
        out[k] = (out[k - 1] * (n - 1) + tr[k]) / n
    return out


def hand_rsi(c: np.ndarray, n: int = 14) -> np.ndarray:
    out = np.full(len(c), np.nan)
    if len(c) <= n:
        return out
    d = [c[k] - c[k - 1] for k in range(1, len(c))]
    up = sum(max(x, 0) for x in d[:n]) / n
    down = sum(max(-x, 0) for x in d[:n]) / n
    out[n] = 100 * up / (up + down) if up + down else 0.0
    for k in range(n + 1, len(c)):
        x = d[k - 1]
        up = (up * (n - 1) + max(x, 0)) / n
        down = (down * (n - 1) + max(-x, 0)) / n
        out[k] = 100 * up / (up + down) if up + down else 0.0
    return out


def suspended() -> list[int]:
    """Rows of the bundled panel with suspended days between their first and last bar."""
    rows = []
    for i in range(len(PANEL.symbols)):
        v = ~np.isnan(PANEL.close[i])
        first, last = int(np.argmax(v)), len(v) - int(np.argmax(v[::-1]))
        if not v[first:last].all():
            rows.append(i)
    return rows


def test_the_bundled_panel_has_suspensions():
    assert len(suspended()) >= 10


def test_panel_atr_and_rsi_equal_each_stocks_own_bars():
    P = PANEL
    a, r = atr(P.high, P.low, P.close, 14), rsi(P.close, 14)
    for i in suspended():
        ok = ~np.isnan(P.close[i])
        h, lo, c = P.high[i, ok], P.low[i, ok], P.close[i, ok]
        np.testing.assert_allclose(
            a[i, ok], hand_atr(h, lo, c), rtol=1e-10, equal_nan=True, err_msg=P.symbols[i]
        )
        np.testing.assert_allclose(r[i, ok], hand_rsi(c), rtol=1e-10, equal_nan=True, err_msg=P.symbols[i])


def test_a_suspension_inside_the_first_window_still_seeds():
    c = np.array([10.0, 10.2, np.nan, 10.1, 10.4, 10.3, np.nan, np.nan, 10.6, 10.5, 10.8])
    h, lo = c + 0.1, c - 0.1
    own = ~np.isnan(c)
    np.testing.assert_allclose(atr(h, lo, c, 3)[own], hand_atr(h[own], lo[own], c[own], 3), equal_nan=True)
    np.testing.assert_allclose(rsi(c, 3)[own], hand_rsi(c[own], 3), equal_nan=True)


def test_atr14_is_the_as_of_bars():
    for code in ("300274", "600519"):
        bars = MD.bars(MD.resolve(code))
        a = analyze(bars, MD.resolve(code))
        want = hand_atr(bars.high, bars.low, bars.close)[-1]
        assert a.indicators["atr14"] == round(want, 4)
        assert a.indicators["atr_pct"] == round(want / bars.close[-1] * 100, 2)


def test_panel_indicators_equal_talib_on_own_bars():
    talib = pytest.importorskip("talib")
    P = PANEL
    a, r = atr(P.high, P.low, P.close, 14), rsi(P.close, 14)
    for i in suspended():
        ok = ~np.isnan(P.close[i])
        h, lo, c = P.high[i, ok], P.low[i, ok], P.close[i, ok]
        np.testing.assert_allclose(a[i, ok], talib.ATR(h, lo, c, 14), rtol=1e-10, equal_nan=True)
        np.testing.assert_allclose(r[i, ok], talib.RSI(c, 14), rtol=1e-10, equal_nan=True)


def hand_ema(x: list[float], n: int, skip: int = 0) -> list[float]:
    """TA-Lib's EMA: k = 2/(n+1), seeded with the mean of n values after the first `skip`."""
    out = [np.nan] * len(x)
    if len(x) < skip + n:
        return out
    k = 2 / (n + 1)
    y = sum(x[skip : skip + n]) / n
    out[skip + n - 1] = y
    for t in range(skip + n, len(x)):
        y = (x[t] - y) * k + y
        out[t] = y
    return out


def hand_macd(c: list[float], fast: int = 12, slow: int = 26, signal: int = 9):
    """TA-Lib's MACD: the fast EMA seeded on the `fast` closes ending at the slow EMA's first value;
    the signal an EMA of the line; everything from the signal's first value on."""
    f, s = hand_ema(c, fast, skip=slow - fast), hand_ema(c, slow)
    line = [a - b for a, b in zip(f, s, strict=True)]
    start = slow - 1
    sig = [np.nan] * start + hand_ema(line[start:], signal)
    first = start + signal - 1
    line = [np.nan] * first + line[first:]
    return line, sig, [a - b for a, b in zip(line, sig, strict=True)]


@pytest.mark.parametrize("code", ["600519", "300274", "BTC"])
def test_ema_and_macd_equal_the_ta_lib_definitions(code):
    from markets.indicators import ema, macd

    c = MD.bars(MD.resolve(code)).close
    for n in (5, 12, 26, 50):
        np.testing.assert_allclose(ema(c, n), hand_ema(list(c), n), rtol=1e-12, equal_nan=True)
    for got, want in zip(macd(c), hand_macd(list(c)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * float(np.max(c)), equal_nan=True)
    line, sig, _ = macd(c)
    assert np.isnan(line[32]) and not np.isnan(line[33]) and not np.isnan(sig[33])


def test_panel_ema_and_macd_equal_each_stocks_own_bars():
    from markets.indicators import ema, macd

    P = PANEL
    e = ema(P.close, 20)
    m = macd(P.close)
    for i in suspended():
        ok = ~np.isnan(P.close[i])
        c = list(P.close[i, ok])
        np.testing.assert_allclose(e[i, ok], hand_ema(c, 20), rtol=1e-12, equal_nan=True)
        for got, want in zip(m, hand_macd(c), strict=True):
            np.testing.assert_allclose(got[i, ok], want, rtol=1e-9, atol=1e-9, equal_nan=True)


def test_analysis_reports_ema_and_macd_of_the_as_of_bar():
    bars = MD.bars(MD.resolve("600519"))
    ind = analyze(bars, MD.resolve("600519")).indicators
    c = list(bars.tail(500).close)  # the analysis window
    line, sig, hist = hand_macd(c)
    assert ind["ema12"] == round(hand_ema(c, 12)[-1], 4) and ind["ema26"] == round(hand_ema(c, 26)[-1], 4)
    assert (ind["macd"], ind["macd_signal"], ind["macd_hist"]) == tuple(
        round(v[-1], 4) for v in (line, sig, hist)
    )


def test_ema_and_macd_equal_talib():
    talib = pytest.importorskip("talib")
    from markets.indicators import ema, macd

    for code in ("600519", "300274", "BTC"):
        c = MD.bars(MD.resolve(code)).close
        np.testing.assert_allclose(ema(c, 12), talib.EMA(c, 12), rtol=1e-12, equal_nan=True)
        for got, want in zip(macd(c), talib.MACD(c, 12, 26, 9), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * float(np.max(c)), equal_nan=True)
