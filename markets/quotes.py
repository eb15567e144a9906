"""The live-quote port: the price now, for the intraday alert poll.

    class QuoteProvider(Protocol):
        name: str
        def has_quotes(self, inst) -> bool
        def quote(self, inst, now: datetime) -> Quote      # NoMinuteData when nothing traded today

`Quote.session` is the session the price belongs to (the exchange's date for A-shares, the UTC
date for crypto, as the daily candles are cut); `high`/`low` are that session's extremes so far
where the source has them (minute bars do; a ccxt ticker's high/low span a rolling 24 hours, so
they are not used and both equal the last price).

What each library returns (read from the libraries' code and docs):
- akshare `stock_zh_a_hist_min_em(symbol, start_date, end_date, period="1", adjust="")`: rows of
  时间 ("YYYY-MM-DD HH:MM:SS", Asia/Shanghai), 开盘, 收盘, 最高, 最低, 成交量 (lots), 成交额, 均价;
  read through `AkshareMinuteProvider` (markets/providers/akshare_minute.py) for today only.
- yfinance `download(ticker, period="1d", interval="1m", auto_adjust=True, multi_level_index=False)`:
  a DataFrame indexed by a tz-aware DatetimeIndex named Datetime (the exchange's zone; UTC for
  crypto), columns Close, High, Low, Open (float64), Volume (int64); a minute with no trade is NaN.
- ccxt `exchange.fetch_ticker("BTC/USDT")`: the unified ticker dict — symbol, timestamp (int ms,
  UTC), datetime (ISO 8601), high, low (24 h), bid, ask, vwap, open, close, last, previousClose,
  change, percentage, average, baseVolume, quoteVolume, info; any of them may be None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Protocol, runtime_checkable

from markets.calendar import EXCHANGE_TZ
from markets.errors import NoMinuteData
from markets.providers.network import _import, _records, yahoo_ticker
from markets.symbols import Instrument


@dataclass(frozen=True, slots=True)
class Quote:
    symbol: str
    price: float
    high: float  # the session's high so far (the price itself where the source has no extremes)
    low: float
    at: datetime  # tz-aware: when the price traded
    session: date
    source: str


def session_date(market: str, at: datetime) -> date:
    """The daily bar a live price belongs to: the exchange's day for A-shares, the UTC day for crypto."""
    return at.astimezone(UTC if market == "crypto" else EXCHANGE_TZ).date()


@runtime_checkable
class QuoteProvider(Protocol):
    name: str

    def has_quotes(self, inst: Instrument) -> bool:
        """Whether this provider has live prices for the instrument."""
        ...

    def quote(self, inst: Instrument, now: datetime) -> Quote:
        """The latest price of today's session; NoMinuteData when nothing traded today yet."""
        ...


# ---- akshare: today's 1-minute bars -------------------------------------------------------------
class AkshareQuotes:
    name = "akshare"

    def __init__(self, module: Any | None = None):
        from markets.providers.akshare_minute import AkshareMinuteProvider

        self.minutes = AkshareMinuteProvider(module)

    def has_quotes(self, inst: Instrument) -> bool:
        return inst.market == "cn"

    def quote(self, inst: Instrument, now: datetime) -> Quote:
        m = self.minutes.minute_bars(inst, session_date("cn", now))
        return Quote(
            inst.symbol,
            float(m.close[-1]),
            float(m.high.max()),
            float(m.low.min()),
            m.last_time.replace(tzinfo=EXCHANGE_TZ),
            m.day,
            "akshare",
        )


# ---- yfinance: today's 1-minute bars -------------------------------------------------------------
def parse_yfinance_minutes(
    records: Sequence[Mapping[str, Any]], symbol: str, market: str, now: datetime
) -> Quote:
    """`yf.download(..., interval="1m").reset_index()` rows → the quote of today's session."""
    today = session_date(market, now)
    rows = []
    for r in records:
        close, when = r.get("Close"), r.get("Datetime") or r.get("Date")
        if close is None or close != close or when is None:  # NaN: a minute with no trade
            continue
        at = when.to_pydatetime() if hasattr(when, "to_pydatetime") else when
        if not isinstance(at, datetime):
            at = datetime.fromisoformat(str(at))
        if at.tzinfo is None:  # tz-naive frames are in the exchange's zone
            at = at.replace(tzinfo=UTC if market == "crypto" else EXCHANGE_TZ)
        if session_date(market, at) == today:
            rows.append((at, float(close), float(r["High"]), float(r["Low"])))
    if not rows:
        raise NoMinuteData(f"yfinance has no minute bars of {symbol} for {today} yet")
    rows.sort(key=lambda x: x[0])
    return Quote(
        symbol,
        rows[-1][1],
        max(max(x[2], x[1]) for x in rows),
        min(min(x[3], x[1]) for x in rows),
        rows[-1][0],
        today,
        "yfinance",
    )


class YFinanceQuotes:
    name = "yfinance"

    def __init__(self, module: Any | None = None):
        self._module = module

    def has_quotes(self, inst: Instrument) -> bool:
        return inst.market in ("cn", "crypto")

    def quote(self, inst: Instrument, now: datetime) -> Quote:
        yf = _import("yfinance", "yfinance", self._module)
        frame = yf.download(
            yahoo_ticker(inst),
            period="1d",
            interval="1m",
            auto_adjust=True,
            multi_level_index=False,
            progress=False,
        )
        return parse_yfinance_minutes(_records(frame), inst.symbol, inst.market, now)


# ---- ccxt: the ticker ----------------------------------------------------------------------------
def parse_ccxt_ticker(ticker: Mapping[str, Any], symbol: str, now: datetime) -> Quote:
    """A unified ccxt ticker → a quote (`last`, else `close`; `timestamp`, else `now`)."""
    price = ticker.get("last")
    if price is None:
        price = ticker.get("close")
    if price is None:
        raise NoMinuteData(f"the exchange's ticker of {symbol} has no last price")
    ts = ticker.get("timestamp")
    at = datetime.fromtimestamp(int(ts) / 1000, UTC) if ts is not None else now.astimezone(UTC)
    p = float(price)
    return Quote(symbol, p, p, p, at, at.date(), "ccxt")


class CcxtQuotes:
    name = "ccxt"

    def __init__(self, exchange: str = "binance", module: Any | None = None):
        from markets.providers.network import CcxtProvider

        self.daily = CcxtProvider(exchange, module)  # shares its exchange client

    def has_quotes(self, inst: Instrument) -> bool:
        return inst.market == "crypto"

    def quote(self, inst: Instrument, now: datetime) -> Quote:
        return parse_ccxt_ticker(self.daily.client().fetch_ticker(inst.symbol), inst.symbol, now)


def quote_providers(names: Sequence[str], exchange: str = "binance") -> list[QuoteProvider]:
    """The live-quote providers of the configured data providers (none for bundled and csv)."""
    out: list[QuoteProvider] = []
    for name in names:
        if name == "akshare":
            out.append(AkshareQuotes())
        elif name == "yfinance":
            out.append(YFinanceQuotes())
        elif name == "ccxt":
            out.append(CcxtQuotes(exchange))
    return out
