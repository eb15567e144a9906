"""Optional network backends: akshare (A-shares, Eastmoney), yfinance (Yahoo), ccxt (crypto exchanges).

Their libraries are optional extras (`pip install akshare pandas` for the akshare extra, etc.) imported only when a
provider is used. Each backend is split into a *request* (the library call, injectable as `module=`
so tests can record the call) and a pure *parse* function over plain records (the rows of the
library's DataFrame as dicts, or ccxt's lists), tested against hand-made response fixtures.

Units at the source: akshare 成交量 in lots, 成交额 in 元; Yahoo volume in shares; ccxt volume in
base-asset units.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from markets.bars import Bars, as_date64, day64
from markets.errors import NoData, ProviderUnavailable
from markets.symbols import Instrument


def _import(name: str, extra: str, module: Any | None) -> Any:
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ProviderUnavailable(f"{name} is not installed: pip install 'tapebot[{extra}]'") from exc


def _records(frame: Any) -> list[Mapping[str, Any]]:
    """A pandas DataFrame (index reset) or an already-plain list of dicts → list of dicts."""
    if isinstance(frame, list):
        return frame
    if hasattr(frame, "reset_index") and hasattr(frame, "to_dict"):
        records: list[Mapping[str, Any]] = frame.reset_index().to_dict("records")  # pandas
        return records
    raise TypeError(f"unexpected response type {type(frame).__name__}")


def _ymd(d: date | str | None) -> str | None:
    return None if d is None else str(as_date64(d)).replace("-", "")


# ---- akshare -----------------------------------------------------------------------------------
def parse_akshare_hist(
    records: Sequence[Mapping[str, Any]], symbol: str, adjust: str = "qfq", market: str = "cn"
) -> Bars:
    """`ak.stock_zh_a_hist` / `ak.index_zh_a_hist` rows: 日期 (a datetime.date), 股票代码 (stocks
    only), 开盘, 收盘, 最高, 最低, 成交量 (int64, lots), 成交额 (float64, 元), 振幅, 涨跌幅, 涨跌额, 换手率."""
    if not records:
        raise NoData(f"akshare returned no bars for {symbol}")

    def col(k: str) -> list[float]:
        return [float(r[k]) for r in records]

    return Bars.from_columns(
        symbol,
        [str(r["日期"])[:10] for r in records],
        col("开盘"),
        col("最高"),
        col("最低"),
        col("收盘"),
        col("成交量"),
        col("成交额"),
        volume_unit="lot",
        amount_unit="yuan",
        market=market,
        adjust="none"
        if market == "index"
        else "qfq"
        if adjust == "qfq"
        else "hfq"
        if adjust == "hfq"
        else "none",
        source="akshare",
    )


def parse_akshare_code_names(records: Sequence[Mapping[str, Any]]) -> list[Instrument]:
    from markets.symbols import board_of, exchange_of, is_st_name

    return [
        Instrument(
            str(r["code"]).zfill(6),
            str(r["name"]),
            exchange=exchange_of(str(r["code"]).zfill(6)),
            board=board_of(str(r["code"]).zfill(6)),
            is_st=is_st_name(str(r["name"])),
        )
        for r in records
    ]


class AkshareProvider:
    name = "akshare"

    def __init__(self, adjust: str = "qfq", module: Any | None = None):
        self.adjust = adjust
        self._module = module

    def has(self, inst: Instrument) -> bool:
        return inst.market in ("cn", "index")

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        ak = _import("akshare", "akshare", self._module)
        if inst.market == "index":  # CSI 300 (000300), the Shanghai Composite (000001), ...
            frame = ak.index_zh_a_hist(
                symbol=inst.symbol,
                period="daily",
                start_date=_ymd(start) or "19900101",
                end_date=_ymd(end) or "20991231",
            )
            return parse_akshare_hist(_records(frame), inst.symbol, market="index")
        frame = ak.stock_zh_a_hist(
            symbol=inst.symbol,
            period="daily",
            start_date=_ymd(start) or "19900101",
            end_date=_ymd(end) or "20991231",
            adjust="" if self.adjust == "none" else self.adjust,
        )
        return parse_akshare_hist(_records(frame), inst.symbol, self.adjust)

    def instruments(self) -> list[Instrument]:
        ak = _import("akshare", "akshare", self._module)
        return parse_akshare_code_names(_records(ak.stock_info_a_code_name()))

    def as_of(self, market: str = "cn") -> date | None:
        return None


# ---- yfinance ----------------------------------------------------------------------------------
def yahoo_ticker(inst: Instrument) -> str:
    """600519 → 600519.SS, 000001 → 000001.SZ, BTC/USDT → BTC-USD; indexes: CSI 300 → 000300.SS,
    the Shanghai Composite → 000001.SS, 399001 → 399001.SZ."""
    if inst.market == "index":
        return f"{inst.symbol}.{'SZ' if inst.symbol.startswith('399') else 'SS'}"
    if inst.market == "cn":
        return f"{inst.symbol}.{'SS' if inst.exchange == 'SH' else inst.exchange}"
    if inst.market == "crypto":
        return inst.symbol.split("/")[0] + "-USD"
    return inst.symbol


def parse_yfinance(records: Sequence[Mapping[str, Any]], symbol: str, market: str = "cn") -> Bars:
    """`yf.download(..., multi_level_index=False).reset_index()` rows: Date (a pandas Timestamp,
    tz-naive for daily bars), Close, High, Low, Open (float64), Volume (int64: shares; base units for
    crypto). Prices are auto-adjusted (yfinance's default)."""
    rows = [r for r in records if r.get("Close") is not None and r["Close"] == r["Close"]]  # drop NaN rows
    if not rows:
        raise NoData(f"yfinance returned no bars for {symbol}")

    def col(k: str) -> list[float]:
        return [float(r[k]) for r in rows]

    dates = [str(r.get("Date") or r.get("Datetime"))[:10] for r in rows]
    return Bars.from_columns(
        symbol,
        dates,
        col("Open"),
        col("High"),
        col("Low"),
        col("Close"),
        col("Volume"),
        volume_unit="base" if market == "crypto" else "share",
        market=market,
        adjust="none" if market == "index" else "qfq",
        source="yfinance",
    )


class YFinanceProvider:
    name = "yfinance"

    def __init__(self, module: Any | None = None):
        self._module = module

    def has(self, inst: Instrument) -> bool:
        return inst.market in ("cn", "crypto", "index")

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        yf = _import("yfinance", "yfinance", self._module)
        frame = yf.download(
            yahoo_ticker(inst),
            start=str(as_date64(start)) if start else "2015-01-01",
            end=str(day64(end) + 1) if end else None,
            interval="1d",
            auto_adjust=True,
            multi_level_index=False,
            progress=False,
        )
        return parse_yfinance(_records(frame), inst.symbol, inst.market)

    def instruments(self) -> list[Instrument]:
        return []

    def as_of(self, market: str = "cn") -> date | None:
        return None


# ---- ccxt --------------------------------------------------------------------------------------
def parse_ccxt_ohlcv(rows: Sequence[Sequence[float]], symbol: str) -> Bars:
    """`exchange.fetch_ohlcv(symbol, "1d")` rows: [timestamp_ms (UTC open), open, high, low, close, volume (base)]."""
    if not rows:
        raise NoData(f"ccxt returned no bars for {symbol}")
    a = np.asarray(rows, dtype=np.float64)
    dates = (a[:, 0] // 86_400_000).astype("int64").astype("datetime64[D]")
    return Bars.from_columns(
        symbol,
        dates,
        a[:, 1],
        a[:, 2],
        a[:, 3],
        a[:, 4],
        a[:, 5],
        a[:, 4] * a[:, 5],
        volume_unit="base",
        amount_unit="quote",
        market="crypto",
        source="ccxt",
    )


class CcxtProvider:
    """Daily OHLCV from a ccxt exchange (default Binance), paginated by `since`."""

    name = "ccxt"

    def __init__(self, exchange: str = "binance", module: Any | None = None, page: int = 1000):
        self.exchange_id, self._module, self.page = exchange, module, page
        self._client: Any = None

    def client(self) -> Any:
        if self._client is None:
            ccxt = _import("ccxt", "ccxt", self._module)
            self._client = getattr(ccxt, self.exchange_id)({"enableRateLimit": True})
        return self._client

    def has(self, inst: Instrument) -> bool:
        return inst.market == "crypto"

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        ex = self.client()
        since_d = as_date64(start) if start else np.datetime64("2020-01-01")
        since = int(datetime.fromisoformat(str(since_d)).replace(tzinfo=UTC).timestamp() * 1000)
        rows: list[list[float]] = []
        while True:
            batch = ex.fetch_ohlcv(inst.symbol, timeframe="1d", since=since, limit=self.page)
            if not batch:
                break
            rows.extend(batch)
            if len(batch) < self.page:
                break
            since = int(batch[-1][0]) + 86_400_000
        b = parse_ccxt_ohlcv(rows, inst.symbol)
        today = np.datetime64(datetime.now(UTC).date(), "D")
        if len(b) and b.dates[-1] >= today:  # drop today's still-open candle
            b = b.between(None, str(today - 1))
        return b.between(start, end) if end else b

    def instruments(self) -> list[Instrument]:
        return []

    def as_of(self, market: str = "crypto") -> date | None:
        return None
