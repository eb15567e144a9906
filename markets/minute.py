"""The minute-bar port: intraday bars for the intraday and tail-session tools.

    class MinuteProvider(Protocol):
        name: str
        def has_minutes(self, inst) -> bool
        def minute_bars(self, inst, day: date | None = None) -> MinuteBars   # NoMinuteData when none

`MarketData(minute_providers=[...])` asks them in order (`MarketData.minute_bars`). The bundled
dataset has daily bars only, so without a live provider (akshare: `markets.providers.akshare_minute`)
every intraday question gets `NoMinuteData`, which the tools turn into a plain answer.

Times are exchange-local wall-clock minutes (Asia/Shanghai for A-shares) as `datetime64[m]`, each
bar stamped with the minute it closes (akshare's convention: 09:31 covers 09:30–09:31; the 09:30
row is the opening auction). Volume is in shares, amount in CNY. `vwap()` is the running
volume-weighted average price of the session: Σ amount / Σ volume (the typical price × volume
where a source has no amount).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Protocol, runtime_checkable

import numpy as np

from markets.errors import NoMinuteData as NoMinuteData  # re-exported: it lives in markets.errors now
from markets.symbols import Instrument


@dataclass(frozen=True, slots=True, eq=False)
class MinuteBars:
    symbol: str
    times: np.ndarray  # datetime64[m], ascending, exchange-local
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray  # shares
    amount: np.ndarray  # CNY (NaN where the source has none)
    source: str = ""

    @classmethod
    def from_arrays(
        cls,
        symbol: str,
        times: np.ndarray,
        open_: np.ndarray,
        high: np.ndarray,
        low: np.ndarray,
        close: np.ndarray,
        volume: np.ndarray,
        amount: np.ndarray | None = None,
        source: str = "",
    ) -> MinuteBars:
        t = np.asarray(times).astype("datetime64[m]")
        order = np.argsort(t, kind="stable")

        def f(x: np.ndarray) -> np.ndarray:
            return np.asarray(x, dtype=np.float64)[order]

        amt = f(amount) if amount is not None else np.full(len(t), np.nan)
        return cls(symbol, t[order], f(open_), f(high), f(low), f(close), f(volume), amt, source)

    def __len__(self) -> int:
        return len(self.times)

    @property
    def empty(self) -> bool:
        return len(self.times) == 0

    def days(self) -> list[date]:
        return [d.astype(object) for d in np.unique(self.times.astype("datetime64[D]"))]

    @property
    def day(self) -> date:
        """The session of the last bar."""
        day: date = self.times[-1].astype("datetime64[D]").astype(object)  # numpy: a date
        return day

    @property
    def last_time(self) -> datetime:
        last: datetime = self.times[-1].astype(object)  # datetime64[m] → datetime
        return last

    def _take(self, mask: np.ndarray) -> MinuteBars:
        return replace(
            self,
            times=self.times[mask],
            open=self.open[mask],
            high=self.high[mask],
            low=self.low[mask],
            close=self.close[mask],
            volume=self.volume[mask],
            amount=self.amount[mask],
        )

    def on(self, day: date | str) -> MinuteBars:
        """The bars of one session."""
        return self._take(self.times.astype("datetime64[D]") == np.datetime64(str(day), "D"))

    def last_session(self) -> MinuteBars:
        return self.on(self.day) if not self.empty else self

    def vwap(self) -> np.ndarray:
        """Running VWAP, restarting each session."""
        amt = np.where(
            np.isnan(self.amount), (self.high + self.low + self.close) / 3 * self.volume, self.amount
        )
        out = np.full(len(self), np.nan)
        days = self.times.astype("datetime64[D]")
        for d in np.unique(days):
            ix = np.flatnonzero(days == d)
            cv = np.cumsum(self.volume[ix])
            ca = np.cumsum(amt[ix])
            with np.errstate(invalid="ignore", divide="ignore"):
                out[ix] = np.where(cv > 0, ca / np.where(cv > 0, cv, 1), np.nan)
            # Before the first traded share the VWAP is undefined: use the price itself.
            nan = np.isnan(out[ix])
            out[ix[nan]] = self.close[ix[nan]]
        return out


@runtime_checkable
class MinuteProvider(Protocol):
    name: str

    def has_minutes(self, inst: Instrument) -> bool:
        """Whether this provider can serve minute bars for the instrument."""
        ...

    def minute_bars(self, inst: Instrument, day: date | None = None) -> MinuteBars:
        """1-minute bars of one session (default: the latest); NoMinuteData when there are none."""
        ...


NEEDS_LIVE = (
    "minute bars need a live provider: the bundled dataset has daily bars only. For A-share minute "
    'data set `provider = "akshare"` under [markets] in config.toml (the akshare extra: '
    "pip install akshare pandas)"
)
