"""A panel: many instruments' bars aligned on one date axis as 2-D arrays [symbol, day].

Missing bars (before listing, suspensions) are NaN. The screen and the backtester work on panels so
that indicators are computed for the whole universe at once with numpy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from markets.bars import Bars


@dataclass(frozen=True, slots=True, eq=False)
class Panel:
    symbols: list[str]
    dates: np.ndarray  # datetime64[D], sorted union of all bars' dates
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    amount: np.ndarray

    @classmethod
    def from_bars(cls, bars: Mapping[str, Bars], dates: np.ndarray | None = None) -> Panel:
        symbols = list(bars)
        if dates is None:
            dates = (
                np.unique(np.concatenate([b.dates for b in bars.values()]))
                if bars
                else np.empty(0, "datetime64[D]")
            )
        n, t = len(symbols), len(dates)
        mats = {k: np.full((n, t), np.nan) for k in ("open", "high", "low", "close", "volume", "amount")}
        for i, s in enumerate(symbols):
            b = bars[s]
            pos = np.searchsorted(dates, b.dates)
            ok = (pos < t) & (dates[np.minimum(pos, t - 1)] == b.dates)
            for k, m in mats.items():
                m[i, pos[ok]] = getattr(b, k)[ok]
        return cls(symbols, dates, **mats)

    @property
    def shape(self) -> tuple[int, int]:
        return self.close.shape

    def row(self, symbol: str) -> int:
        return self.symbols.index(symbol)

    def tail(self, n: int) -> Panel:
        sl = slice(max(0, len(self.dates) - n), None)
        return Panel(
            self.symbols,
            self.dates[sl],
            self.open[:, sl],
            self.high[:, sl],
            self.low[:, sl],
            self.close[:, sl],
            self.volume[:, sl],
            self.amount[:, sl],
        )

    def bars_of(self, symbol: str, market: str = "cn") -> Bars:
        i = self.row(symbol)
        ok = ~np.isnan(self.close[i])
        return Bars(
            symbol,
            self.dates[ok],
            self.open[i, ok],
            self.high[i, ok],
            self.low[i, ok],
            self.close[i, ok],
            self.volume[i, ok],
            self.amount[i, ok],
            market=market,
        )
