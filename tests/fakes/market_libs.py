"""Stand-ins for akshare, yfinance and ccxt that answer in the libraries' own shapes.

What each real call returns (read from the libraries' code):
- `akshare.stock_zh_a_hist(symbol, period, start_date, end_date, adjust)`: a DataFrame with columns
  日期 (`datetime.date`: `pd.to_datetime(...).dt.date`), 股票代码 (str), 开盘, 收盘, 最高, 最低
  (float64), 成交量 (int64, lots), 成交额 (float64, 元), 振幅, 涨跌幅, 涨跌额, 换手率 (float64).
- `akshare.index_zh_a_hist(symbol, period, start_date, end_date)`: the same without 股票代码.
- `akshare.stock_info_a_code_name()`: columns code, name (str).
- `yfinance.download(ticker, ..., auto_adjust=True, multi_level_index=False)`: a DataFrame indexed by
  a tz-naive DatetimeIndex named Date, columns Close, High, Low, Open (float64), Volume (int64).
- ccxt `exchange.fetch_ohlcv(symbol, "1d", since, limit)`: a list of [int ms (UTC open), float open,
  high, low, close, volume].
- akshare `stock_zh_a_hist_min_em(symbol, start_date, end_date, period="1", adjust="")`: 时间
  ("YYYY-MM-DD HH:MM:SS" str, Asia/Shanghai, the minute the bar closes), 开盘, 收盘, 最高, 最低
  (float64), 成交量 (float64, lots), 成交额 (float64), 均价 (float64, the running average price).
- yfinance `download(ticker, period="1d", interval="1m", ...)`: indexed by a tz-aware DatetimeIndex
  named Datetime (Asia/Shanghai for .SS/.SZ, UTC for crypto); a minute without a trade is NaN.
- ccxt `exchange.fetch_ticker(symbol)`: the unified ticker dict (every key present, None where the
  exchange has no value; high/low/open over a rolling 24 hours).

The frames here are `RecordedFrame`s: `reset_index().to_dict("records")` gives what pandas gives
(numpy scalars, date/datetime objects), which is all the providers read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np


class RecordedFrame:
    def __init__(self, rows: list[dict[str, Any]], index_name: str | None = None):
        self.rows, self.index_name = rows, index_name

    def reset_index(self) -> RecordedFrame:
        return self

    def to_dict(self, orient: str) -> list[dict[str, Any]]:
        assert orient == "records"
        return [dict(r) for r in self.rows]

    def __len__(self) -> int:
        return len(self.rows)


def weekdays(end: date, n: int) -> list[date]:
    out: list[date] = []
    d = end
    while len(out) < n:
        if d.weekday() < 5:
            out.append(d)
        d -= timedelta(days=1)
    return out[::-1]


def path(days: list[date], start: float, seed: int) -> list[float]:
    """A smooth, deterministic price of each day (two decimals, as the exchanges quote them): a
    function of the date, so a later request repeats the earlier one's prices."""
    t0 = date(2025, 1, 1).toordinal()
    return [
        round(start * (1 + 0.08 * math.sin((d.toordinal() + seed) / 13) + 0.0003 * (d.toordinal() - t0)), 2)
        for d in days
    ]


def akshare_rows(code: str | None, days: list[date], closes: list[float]) -> list[dict[str, Any]]:
    rows = []
    prev = closes[0]
    for d, c in zip(days, closes, strict=True):
        o = round(prev * 1.001, 2)
        h, lo = round(max(o, c) * 1.006, 2), round(min(o, c) * 0.994, 2)
        vol = np.int64(50_000 + (d.toordinal() % 97) * 100)
        row: dict[str, Any] = {"日期": d}
        if code is not None:
            row["股票代码"] = code
        row.update(
            {
                "开盘": np.float64(o),
                "收盘": np.float64(c),
                "最高": np.float64(h),
                "最低": np.float64(lo),
                "成交量": vol,
                "成交额": np.float64(float(vol) * 100 * c),
                "振幅": np.float64(round((h - lo) / prev * 100, 2)),
                "涨跌幅": np.float64(round((c / prev - 1) * 100, 2)),
                "涨跌额": np.float64(round(c - prev, 2)),
                "换手率": np.float64(0.35),
            }
        )
        rows.append(row)
        prev = c
    return rows


def session_minutes(n: int) -> list[str]:
    """The first `n` minute stamps of an A-share session as akshare has them: 09:30 (the opening
    auction), 09:31 … 11:30, 13:01 … 15:00."""
    out = ["09:30"]
    for h, m0, m1 in ((9, 31, 60), (10, 0, 60), (11, 0, 31), (13, 1, 60), (14, 0, 60)):
        out += [f"{h:02d}:{m:02d}" for m in range(m0, m1)]
    return [*out, "15:00"][:n]


def akshare_minute_rows(day: date, closes: list[float], lots: float = 120.0) -> list[dict[str, Any]]:
    """One session's first len(closes) 1-minute rows in akshare's shape."""
    rows, prev, amt, vol = [], closes[0], 0.0, 0.0
    for hhmm, c in zip(session_minutes(len(closes)), closes, strict=True):
        o = prev
        amt += lots * 100 * c
        vol += lots * 100
        rows.append(
            {
                "时间": f"{day} {hhmm}:00",
                "开盘": np.float64(o),
                "收盘": np.float64(c),
                "最高": np.float64(round(max(o, c) + 0.01, 2)),
                "最低": np.float64(round(min(o, c) - 0.01, 2)),
                "成交量": np.float64(lots),
                "成交额": np.float64(lots * 100 * c),
                "均价": np.float64(round(amt / vol, 3)),
            }
        )
        prev = c
    return rows


def _ymd(s: str) -> date:
    return date(int(s[:4]), int(s[4:6]), int(s[6:8]))


class FakeAkshare:
    """`akshare` for the providers: stocks and indexes with bars up to `end`; `calls` records every
    request; `fail` (an exception) makes every call raise it, as an unreachable Eastmoney does."""

    def __init__(self, end: date = date(2026, 12, 4), n: int = 300, stocks: dict[str, str] | None = None):
        self.end, self.n = end, n
        self.stocks = stocks or {"600519": "贵州茅台", "000001": "平安银行", "300750": "宁德时代"}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: Exception | None = None
        self.bump: dict[str, float] = {}  # symbol → factor applied to every price (a re-adjustment)
        self.override: dict[str, Callable[[list[float]], list[float]]] = {}
        self.rows_override: dict[tuple[str, date], dict[str, float]] = {}  # one bar's fields, by hand
        self.minutes: dict[str, list[dict[str, Any]]] = {}  # symbol → minute rows (akshare_minute_rows)

    def _closes(self, symbol: str, days: list[date], seed: int, base: float) -> list[float]:
        closes = path(days, base, seed)
        if symbol in self.override:
            closes = self.override[symbol](closes)
        f = self.bump.get(symbol, 1.0)
        return [round(c * f, 2) for c in closes]

    def _window(self, rows: list[dict[str, Any]], start_date: str, end_date: str) -> RecordedFrame:
        lo, hi = _ymd(start_date), _ymd(end_date)
        return RecordedFrame([r for r in rows if lo <= r["日期"] <= hi])

    def stock_zh_a_hist(
        self, symbol: str, period: str = "daily", start_date: str = "19700101", end_date: str = "20500101",
        adjust: str = "",
    ) -> RecordedFrame:  # fmt: skip
        self.calls.append(("stock_zh_a_hist", {"symbol": symbol, "start_date": start_date, "adjust": adjust}))
        if self.fail is not None:
            raise self.fail
        if symbol not in self.stocks:
            return RecordedFrame([])
        days = weekdays(self.end, self.n)
        rows = akshare_rows(
            symbol, days, self._closes(symbol, days, int(symbol) % 13, 100.0 + int(symbol) % 900)
        )
        for r in rows:
            for k, v in self.rows_override.get((symbol, r["日期"]), {}).items():
                r[k] = np.float64(v)
        return self._window(rows, start_date, end_date)

    def index_zh_a_hist(
        self, symbol: str, period: str = "daily", start_date: str = "19700101", end_date: str = "22220101"
    ) -> RecordedFrame:
        self.calls.append(("index_zh_a_hist", {"symbol": symbol, "start_date": start_date}))
        if self.fail is not None:
            raise self.fail
        days = weekdays(self.end, self.n)
        base = 4000.0 if symbol == "000300" else 3300.0
        return self._window(
            akshare_rows(None, days, self._closes("idx" + symbol, days, 3, base)), start_date, end_date
        )

    def stock_zh_a_hist_min_em(
        self, symbol: str, start_date: str = "1979-09-01 09:32:00", end_date: str = "2222-01-01 09:32:00",
        period: str = "1", adjust: str = "",
    ) -> RecordedFrame:  # fmt: skip
        self.calls.append(("stock_zh_a_hist_min_em", {"symbol": symbol, "start_date": start_date}))
        if self.fail is not None:
            raise self.fail
        rows = [r for r in self.minutes.get(symbol, []) if start_date <= r["时间"] <= end_date]
        return RecordedFrame(rows)

    def stock_info_a_code_name(self) -> RecordedFrame:
        self.calls.append(("stock_info_a_code_name", {}))
        if self.fail is not None:
            raise self.fail
        return RecordedFrame([{"code": c, "name": n} for c, n in self.stocks.items()])


class FakeYfinance:
    def __init__(self, end: date = date(2026, 12, 4), n: int = 120):
        self.end, self.n = end, n
        self.calls: list[str] = []
        self.minutes: dict[str, list[tuple[datetime, float]]] = {}  # ticker → (tz-aware minute, close)

    def _minutes(self, ticker: str) -> RecordedFrame:
        rows = []
        for at, c in self.minutes.get(ticker, []):
            nan = c != c
            rows.append(
                {
                    "Datetime": at,
                    "Close": np.float64(c),
                    "High": np.float64(c if nan else round(c * 1.001, 4)),
                    "Low": np.float64(c if nan else round(c * 0.999, 4)),
                    "Open": np.float64(c),
                    "Volume": np.int64(0 if nan else 1200),
                }
            )
        return RecordedFrame(rows, index_name="Datetime")

    def download(
        self, ticker: str, start: str | None = None, end: str | None = None, **kw: Any
    ) -> RecordedFrame:
        self.calls.append(ticker)
        if kw.get("interval") == "1m":
            return self._minutes(ticker)
        days = weekdays(self.end, self.n)
        closes = path(days, 3900.0 if ticker.startswith("000300") else 50.0, 5)
        rows = []
        for i, (d, c) in enumerate(zip(days, closes, strict=True)):
            rows.append(
                {
                    "Date": datetime(d.year, d.month, d.day),  # noqa: DTZ001 — a tz-naive Timestamp in the real frame
                    "Close": np.float64(c),
                    "High": np.float64(round(c * 1.01, 4)),
                    "Low": np.float64(round(c * 0.99, 4)),
                    "Open": np.float64(closes[i - 1] if i else c),
                    "Volume": np.int64(0 if ticker.startswith("000") else 1_000_000 + i),
                }
            )
        lo = date.fromisoformat(start) if start else date.min
        return RecordedFrame([r for r in rows if r["Date"].date() >= lo], index_name="Date")


class FakeCcxtExchange:
    def __init__(self, end: date = date(2026, 12, 5), n: int = 60):
        self.end, self.n = end, n
        self.calls: list[tuple[str, int | None]] = []
        self.tickers: dict[str, dict[str, Any]] = {}  # symbol → ccxt_ticker(...)

    def fetch_ticker(self, symbol: str) -> dict[str, Any]:
        self.calls.append((f"ticker {symbol}", None))
        return self.tickers[symbol]

    def fetch_ohlcv(
        self, symbol: str, timeframe: str = "1d", since: int | None = None, limit: int | None = None
    ) -> list[list[float]]:
        self.calls.append((symbol, since))
        days = [self.end - timedelta(days=self.n - 1 - i) for i in range(self.n)]
        closes = path(days, 90_000.0 if symbol.startswith("BTC") else 3_000.0, 1)
        rows = [
            [
                int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp() * 1000),
                c * 0.99,
                c * 1.02,
                c * 0.97,
                c,
                1234.5,
            ]
            for d, c in zip(days, closes, strict=True)
        ]
        rows = [r for r in rows if since is None or r[0] >= since]
        return rows[:limit] if limit else rows


def ccxt_ticker(symbol: str, last: float | None, at: datetime) -> dict[str, Any]:
    """A unified ticker as ccxt's binance returns it (`fetch_ticker`)."""
    ms = int(at.timestamp() * 1000)
    return {
        "symbol": symbol, "timestamp": ms, "datetime": at.astimezone(UTC).isoformat(timespec="milliseconds")[:23] + "Z",
        "high": None if last is None else last * 1.04, "low": None if last is None else last * 0.95,
        "bid": last, "bidVolume": 1.2, "ask": last, "askVolume": 0.8, "vwap": last,
        "open": None if last is None else last * 0.98, "close": last, "last": last,
        "previousClose": None if last is None else last * 0.98, "change": None, "percentage": None,
        "average": None, "baseVolume": 20_000.0, "quoteVolume": 1.8e9,
        "info": {"symbol": symbol.replace("/", ""), "lastPrice": str(last), "closeTime": ms},
    }  # fmt: skip


class FakeCcxtModule:
    def __init__(self, exchange: FakeCcxtExchange):
        self.binance = lambda config: exchange
