"""Trading calendars: the SSE calendar for A-shares (bundled, 1990-12-19 → 2026-12-31) and an
every-day calendar for crypto. Outside the bundled range, weekdays are assumed to be trading days
(`TradingCalendar.covers(d)` tells whether a date is inside the known range).
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from importlib import resources

import numpy as np


def _to_date(d: date | str) -> date:
    if isinstance(d, str):
        return date.fromisoformat(d if "-" in d else f"{d[:4]}-{d[4:6]}-{d[6:]}")
    if hasattr(d, "date") and type(d) is not date:  # datetime → date
        return d.date()  # type: ignore[union-attr]
    return d


class TradingCalendar:
    """Sorted set of trading days with fast neighbour lookups."""

    def __init__(self, days: list[date] | np.ndarray | None, name: str = "SSE"):
        self.name = name
        self.every_day = days is None
        self._days = np.array(sorted(set(days or [])), dtype="datetime64[D]")

    @classmethod
    def sse(cls) -> TradingCalendar:
        text = resources.files("markets.dataset").joinpath("cn_trade_calendar.json").read_text("utf-8")
        return cls([date.fromisoformat(s) for s in json.loads(text)], name="SSE")

    @classmethod
    def crypto(cls) -> TradingCalendar:
        return cls(None, name="24/7")

    @property
    def first(self) -> date | None:
        return None if self.every_day or not len(self._days) else self._days[0].astype(object)

    @property
    def last(self) -> date | None:
        return None if self.every_day or not len(self._days) else self._days[-1].astype(object)

    def covers(self, d: date | str) -> bool:
        d = _to_date(d)
        return self.every_day or (self.first is not None and self.first <= d <= self.last)  # type: ignore[operator]

    def is_trading_day(self, d: date | str) -> bool:
        d = _to_date(d)
        if self.every_day:
            return True
        if not self.covers(d):
            return d.weekday() < 5
        x = np.datetime64(d, "D")
        i = int(np.searchsorted(self._days, x))
        return i < len(self._days) and self._days[i] == x

    def next_trading_day(self, d: date | str, n: int = 1) -> date:
        """The n-th trading day strictly after `d`."""
        d = _to_date(d)
        for _ in range(n):
            d = d + timedelta(days=1)
            while not self.is_trading_day(d):
                d = d + timedelta(days=1)
        return d

    def prev_trading_day(self, d: date | str, n: int = 1) -> date:
        """The n-th trading day strictly before `d`."""
        d = _to_date(d)
        for _ in range(n):
            d = d - timedelta(days=1)
            while not self.is_trading_day(d):
                d = d - timedelta(days=1)
        return d

    def trading_days(self, start: date | str, end: date | str) -> list[date]:
        s, e = _to_date(start), _to_date(end)
        out, d = [], s
        while d <= e:
            if self.is_trading_day(d):
                out.append(d)
            d += timedelta(days=1)
        return out
