"""The canonical daily bar: one schema, explicit units, numpy columns.

Every provider converts to this schema at its edge and says which units it was given:

| field | unit |
|---|---|
| `dates` | `datetime64[D]`, exchange-local trading date (UTC candle-open date for crypto) |
| `open/high/low/close` | price in the quote currency (CNY per share, USDT per coin) |
| `volume` | **shares** for A-shares (sources in lots of 100 are multiplied by 100), base-asset units for crypto |
| `amount` | turnover in the quote currency (CNY / USDT); NaN when unknown; `amount_estimated` when it is close × volume |
| `adjust` | `none`, `qfq` (forward-adjusted as of the download), `hfq` |

Columns are numpy arrays so indicators, the Wyckoff engine, the screen and the backtester work on
whole columns at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Literal

import numpy as np

VolumeUnit = Literal["share", "lot", "base"]
AmountUnit = Literal["yuan", "thousand_yuan", "yi", "quote"]
Adjust = Literal["none", "qfq", "hfq"]

LOT_SIZE = 100  # A-share board lot: 1 手 = 100 shares
_VOLUME_FACTOR = {"share": 1.0, "lot": float(LOT_SIZE), "base": 1.0}
_AMOUNT_FACTOR = {"yuan": 1.0, "thousand_yuan": 1_000.0, "yi": 1e8, "quote": 1.0}


def volume_to_canonical(values: np.ndarray, unit: VolumeUnit) -> np.ndarray:
    """Lots → shares (×100); shares and base-asset units unchanged."""
    return np.asarray(values, dtype=np.float64) * _VOLUME_FACTOR[unit]


def amount_to_canonical(values: np.ndarray, unit: AmountUnit) -> np.ndarray:
    """千元 (Tushare) ×1,000, 亿 ×1e8, 元 / quote currency unchanged."""
    return np.asarray(values, dtype=np.float64) * _AMOUNT_FACTOR[unit]


def to_date64(values: Sequence[str] | Sequence[date] | np.ndarray) -> np.ndarray:
    """ISO strings (`2025-09-03`), compact strings (`20250903`) or dates → datetime64[D]."""
    arr = np.asarray(values)
    if arr.dtype.kind in "US" and arr.size and len(str(arr.flat[0])) == 8 and str(arr.flat[0]).isdigit():
        arr = np.array([f"{s[:4]}-{s[4:6]}-{s[6:]}" for s in arr.astype(str)])
    if arr.dtype.kind == "M":
        return arr.astype("datetime64[D]")
    return arr.astype("datetime64[D]")


def day64(value: str | date | np.datetime64) -> np.datetime64:
    """`2025-09-03`, `20250903`, a date or a datetime64 → datetime64[D]."""
    if isinstance(value, str) and len(value) == 8 and value.isdigit():
        value = f"{value[:4]}-{value[4:6]}-{value[6:]}"
    # numpy's stubs have no overload for this union (each member alone is accepted)
    day: np.datetime64 = np.datetime64(value, "D")  # type: ignore[call-overload]
    return day


def as_date64(value: str | date | np.datetime64 | None) -> np.datetime64 | None:
    return None if value is None else day64(value)


@dataclass(frozen=True, slots=True, eq=False)
class Bars:
    """Daily bars of one instrument, oldest first, canonical units."""

    symbol: str
    dates: np.ndarray
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    amount: np.ndarray = field(default_factory=lambda: np.empty(0))
    market: str = "cn"
    adjust: Adjust = "none"
    amount_estimated: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.dates)
        if self.amount.size == 0 and n:
            object.__setattr__(self, "amount", np.full(n, np.nan))
        for name in ("open", "high", "low", "close", "volume", "amount"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"Bars({self.symbol}): column {name} has {len(getattr(self, name))} rows, dates {n}"
                )

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_columns(
        cls,
        symbol: str,
        dates: Sequence[str] | Sequence[date] | np.ndarray,
        open: Sequence[float] | np.ndarray,
        high: Sequence[float] | np.ndarray,
        low: Sequence[float] | np.ndarray,
        close: Sequence[float] | np.ndarray,
        volume: Sequence[float] | np.ndarray,
        amount: Sequence[float] | np.ndarray | None = None,
        *,
        volume_unit: VolumeUnit,
        amount_unit: AmountUnit = "yuan",
        market: str = "cn",
        adjust: Adjust = "none",
        estimate_amount: bool = True,
        source: str = "",
    ) -> Bars:
        """Build bars from raw source columns, converting units; rows are sorted by date and
        duplicate dates keep the last row."""
        d = to_date64(dates)
        cols = [np.asarray(c, dtype=np.float64) for c in (open, high, low, close)]
        vol = volume_to_canonical(np.asarray(volume, dtype=np.float64), volume_unit)
        estimated = False
        if amount is None:
            if estimate_amount:
                amt, estimated = cols[3] * vol, True
            else:
                amt = np.full(len(d), np.nan)
        else:
            amt = amount_to_canonical(np.asarray(amount, dtype=np.float64), amount_unit)
        order = np.argsort(d, kind="stable")
        d = d[order]
        keep = np.ones(len(d), dtype=bool)
        if len(d) > 1:
            keep[:-1] = d[1:] != d[:-1]  # duplicate date → keep the last occurrence
        idx = order[keep]
        return cls(
            symbol=symbol,
            dates=d[keep],
            open=cols[0][idx],
            high=cols[1][idx],
            low=cols[2][idx],
            close=cols[3][idx],
            volume=vol[idx],
            amount=amt[idx],
            market=market,
            adjust=adjust,
            amount_estimated=estimated,
            source=source,
        )

    # -- access -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.dates)

    @property
    def empty(self) -> bool:
        return len(self.dates) == 0

    @property
    def last_date(self) -> date | None:
        return None if self.empty else self.dates[-1].astype(object)

    @property
    def first_date(self) -> date | None:
        return None if self.empty else self.dates[0].astype(object)

    def _take(self, sl: slice | np.ndarray) -> Bars:
        return replace(
            self,
            dates=self.dates[sl],
            open=self.open[sl],
            high=self.high[sl],
            low=self.low[sl],
            close=self.close[sl],
            volume=self.volume[sl],
            amount=self.amount[sl],
        )

    def between(self, start: str | date | None = None, end: str | date | None = None) -> Bars:
        s, e = as_date64(start), as_date64(end)
        lo = 0 if s is None else int(np.searchsorted(self.dates, s, "left"))
        hi = len(self) if e is None else int(np.searchsorted(self.dates, e, "right"))
        return self._take(slice(lo, hi))

    def tail(self, n: int) -> Bars:
        return self._take(slice(max(0, len(self) - n), None))

    def index_of(self, day: str | date) -> int:
        """Index of the bar on `day`; KeyError if there is none."""
        d = day64(day)
        i = int(np.searchsorted(self.dates, d))
        if i >= len(self) or self.dates[i] != d:
            raise KeyError(f"{self.symbol}: no bar on {d}")
        return i

    def pct_change(self) -> np.ndarray:
        """Close-to-close change as a fraction; NaN for the first bar."""
        out = np.full(len(self), np.nan)
        if len(self) > 1:
            out[1:] = self.close[1:] / self.close[:-1] - 1.0
        return out

    def to_records(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Plain dicts for tool output (newest last)."""
        b = self.tail(limit) if limit else self
        return [
            {
                "date": str(b.dates[i]),
                "open": round(float(b.open[i]), 4),
                "high": round(float(b.high[i]), 4),
                "low": round(float(b.low[i]), 4),
                "close": round(float(b.close[i]), 4),
                "volume": round(float(b.volume[i]), 2),
            }
            for i in range(len(b))
        ]
