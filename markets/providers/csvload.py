"""Fast readers for the dataset's long CSV format (`date,code|symbol,open,high,low,close,volume`) and
a tolerant reader for per-symbol CSV files with English or Chinese headers."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import numpy as np

from markets.bars import AmountUnit, Bars, VolumeUnit, volume_to_canonical

# Header aliases → canonical column (akshare's Chinese names, Yahoo/Binance/Tushare names).
ALIASES = {
    "date": "date",
    "日期": "date",
    "trade_date": "date",
    "open time": "date",
    "time": "date",
    "timestamp": "date",
    "open": "open",
    "开盘": "open",
    "high": "high",
    "最高": "high",
    "low": "low",
    "最低": "low",
    "close": "close",
    "收盘": "close",
    "close price": "close",
    "adj close": "adj_close",
    "volume": "volume",
    "vol": "volume",
    "成交量": "volume",
    "amount": "amount",
    "成交额": "amount",
    "turnover": "amount",
    "code": "code",
    "symbol": "code",
    "股票代码": "code",
    "ts_code": "code",
}


def ymd_to_date64(v: np.ndarray) -> np.ndarray:
    """20250903 (int/float) → datetime64[D], vectorised."""
    v = v.astype(np.int64)
    y, m, d = v // 10000, (v // 100) % 100, v % 100
    months = (y - 1970) * 12 + (m - 1)
    days: np.ndarray = months.astype("datetime64[M]").astype("datetime64[D]") + (d - 1).astype(
        "timedelta64[D]"
    )
    return days


def read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" or data[:2] == b"\x1f\x8b" else data


def read_long_cn(
    raw: bytes, *, volume_unit: VolumeUnit = "lot", adjust: str = "qfq", source: str = ""
) -> dict[str, Bars]:
    """Parse `date,code,open,high,low,close,volume` (numeric 6-digit codes, ISO dates) into Bars per code.

    Fast path: the dates' dashes are removed so numpy's C parser reads every column as a number
    (2.6 M rows in a few seconds)."""
    header, _, body = raw.partition(b"\n")
    cols = [c.strip().lower() for c in header.decode().split(",")]
    if cols[:2] != ["date", "code"]:
        raise ValueError(f"expected a date,code,... header, got {cols}")
    arr = np.loadtxt(io.BytesIO(body.replace(b"-", b"")), delimiter=",", dtype=np.float64, ndmin=2)
    return _split_by_code(arr, cols, volume_unit=volume_unit, adjust=adjust, source=source)


def _split_by_code(
    arr: np.ndarray, cols: list[str], *, volume_unit: VolumeUnit, adjust: str, source: str
) -> dict[str, Bars]:
    ix = {c: i for i, c in enumerate(cols)}
    codes = arr[:, ix["code"]].astype(np.int64)
    order = np.lexsort((arr[:, ix["date"]], codes))
    arr, codes = arr[order], codes[order]
    dates = ymd_to_date64(arr[:, ix["date"]])
    bounds = np.flatnonzero(np.diff(codes)) + 1
    out: dict[str, Bars] = {}
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(codes)], strict=True):
        code = f"{codes[lo]:06d}"
        sl = slice(lo, hi)
        vol = volume_to_canonical(arr[sl, ix["volume"]], volume_unit)  # lots → shares
        close = arr[sl, ix["close"]]
        out[code] = Bars(
            symbol=code,
            dates=dates[sl],
            open=arr[sl, ix["open"]],
            high=arr[sl, ix["high"]],
            low=arr[sl, ix["low"]],
            close=close,
            volume=vol,
            amount=close * vol,  # the dataset has no amount: estimate it (labelled)
            market="cn",
            adjust=adjust,  # type: ignore[arg-type]
            amount_estimated=True,
            source=source,
        )
    return out


def read_table(text: str) -> tuple[list[str], list[list[str]]]:
    """Header (canonical names where known) and rows of a small CSV."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    rows = [r for r in reader if r]
    if not rows:
        return [], []
    header = [ALIASES.get(h.strip().lower(), h.strip().lower()) for h in rows[0]]
    return header, rows[1:]


def bars_from_table(
    symbol: str,
    header: list[str],
    rows: list[list[str]],
    *,
    volume_unit: VolumeUnit,
    amount_unit: AmountUnit = "yuan",
    market: str = "cn",
    adjust: str = "none",
    source: str = "",
) -> Bars:
    ix = {c: i for i, c in enumerate(header)}
    missing = {"date", "open", "high", "low", "close", "volume"} - set(ix)
    if missing:
        raise ValueError(f"{symbol}: CSV lacks columns {sorted(missing)} (header: {header})")

    def col(name: str) -> np.ndarray:
        return np.array([float(r[ix[name]]) if r[ix[name]].strip() else np.nan for r in rows])

    dates = [r[ix["date"]].strip()[:10].replace("/", "-") for r in rows]
    amount = col("amount") if "amount" in ix else None
    return Bars.from_columns(
        symbol,
        dates,
        col("open"),
        col("high"),
        col("low"),
        col("close"),
        col("volume"),
        amount,
        volume_unit=volume_unit,
        amount_unit=amount_unit,
        market=market,
        adjust=adjust,  # type: ignore[arg-type]
        source=source,
    )
