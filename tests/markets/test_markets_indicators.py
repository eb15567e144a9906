"""Indicators against TA-Lib: Wilder's ATR and a vectorised RSI, equal to TA-Lib's
to 1e-9. The reference values were recorded once with the TA-Lib 0.8.2 wheel
(tests/markets/data/record_talib_reference.py); TA-Lib itself is not needed to run these tests."""

from __future__ import annotations

import json

import numpy as np
import pytest
from markets_helpers import DATA

from markets.data import MarketData
from markets.indicators import atr, rsi, wilder

REF = json.loads((DATA / "talib_reference.json").read_text())
MD = MarketData()


def ref(values: list[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values])


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.max(np.abs(got[ok] - want[ok])) < 1e-9


@pytest.mark.parametrize("sym", sorted(REF["series"]))
def test_rsi_and_atr_equal_talib(sym):
    b = MD.bars(sym)
    r = REF["series"][sym]
    same(rsi(b.close, 14), ref(r["rsi14"]))
    same(rsi(b.close, 6), ref(r["rsi6"]))
    same(atr(b.high, b.low, b.close, 14), ref(r["atr14"]))


def test_rsi_of_a_flat_series_equals_talib():
    f = REF["flat"]
    same(rsi(np.array(f["close"]), 14), ref(f["rsi14"]))


def test_panel_rows_equal_single_series_and_gaps_carry():
    rows = [MD.bars(s).close[-300:] for s in ("600519", "300750")]
    panel = np.vstack(rows)
    both = rsi(panel, 14)
    for i, row in enumerate(rows):
        np.testing.assert_allclose(both[i], rsi(row, 14), rtol=0, atol=1e-12, equal_nan=True)
    # a suspension (NaN) inside a panel row: the smoothed value is carried over the gap
    x = np.array([1.0, 2.0, 3.0, np.nan, 5.0, 7.0])
    w = wilder(x, 2)
    assert np.isnan(w[0]) and w[1] == 1.5 and w[2] == 2.25 and w[3] == 2.25 and w[4] == 3.625
    assert w[5] == pytest.approx(5.3125)


def test_wilder_long_series_stays_exact():
    # the chunked closed form must not lose precision over thousands of bars
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 10, 5000)
    for n in (1, 2, 3, 14, 50):
        want = np.full_like(x, np.nan)
        v = x[:n].mean()
        want[n - 1] = v
        for t in range(n, len(x)):
            v = (v * (n - 1) + x[t]) / n
            want[t] = v
        np.testing.assert_allclose(wilder(x, n), want, rtol=1e-11, equal_nan=True)
