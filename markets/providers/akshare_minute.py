"""A-share 1-minute bars from akshare (Eastmoney): the live `MinuteProvider`.

Request: `ak.stock_zh_a_hist_min_em(symbol="600519", start_date="2025-09-03 09:00:00",
end_date="2025-09-03 15:30:00", period="1", adjust="")`. Eastmoney serves 1-minute bars for the
last few sessions only; without a day the whole answer is asked for and the latest session kept.
Rows: 时间 ("YYYY-MM-DD HH:MM:SS", the minute the bar closes), 开盘, 收盘, 最高, 最低 (CNY, not
adjusted), 成交量 (lots of 100 shares), 成交额 (CNY), and 均价 (the running average price; newer
akshare) or 最新价 (older) — neither is used: the VWAP is computed from 成交额 / 成交量 so every
source gets the same definition. An 开盘 of 0 (seen on auction rows) is read as the close.

The library call is injectable (`module=`) so tests fake it at its function boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

import numpy as np

from markets.minute import MinuteBars, NoMinuteData
from markets.providers.network import _import, _records
from markets.symbols import Instrument

EARLIEST, LATEST = "1979-09-01 09:32:00", "2222-01-01 09:32:00"  # akshare's own defaults


def parse_akshare_minute(records: Sequence[Mapping[str, Any]], symbol: str) -> MinuteBars:
    if not records:
        raise NoMinuteData(f"akshare returned no minute bars for {symbol}")

    def f(k: str) -> np.ndarray:
        return np.array([float(r[k]) for r in records])

    close = f("收盘")
    op = f("开盘")
    op = np.where(op > 0, op, close)
    times = np.array([np.datetime64(str(r["时间"]).replace(" ", "T")[:16], "m") for r in records])
    return MinuteBars.from_arrays(
        symbol,
        times,
        op,
        np.maximum(f("最高"), np.maximum(op, close)),
        np.minimum(f("最低"), np.minimum(op, close)),
        close,
        f("成交量") * 100.0,  # lots → shares
        f("成交额") if "成交额" in records[0] else None,
        source="akshare",
    )


class AkshareMinuteProvider:
    name = "akshare"

    def __init__(self, module: Any | None = None):
        self._module = module

    def has_minutes(self, inst: Instrument) -> bool:
        return inst.market == "cn"

    def minute_bars(self, inst: Instrument, day: date | None = None) -> MinuteBars:
        ak = _import("akshare", "akshare", self._module)
        frame = ak.stock_zh_a_hist_min_em(
            symbol=inst.symbol,
            start_date=f"{day} 09:00:00" if day else EARLIEST,
            end_date=f"{day} 15:30:00" if day else LATEST,
            period="1",
            adjust="",
        )
        rows = _records(frame)
        if not rows:
            when = f"on {day}" if day else "for the latest sessions"
            raise NoMinuteData(f"akshare has no minute bars for {inst.label} {when}")
        m = parse_akshare_minute(rows, inst.symbol)
        out = m.on(day) if day else m.last_session()
        if out.empty:
            raise NoMinuteData(
                f"akshare has no minute bars for {inst.label} on {day} (Eastmoney keeps 1-minute bars "
                f"for the last few sessions only; it returned {', '.join(map(str, m.days()))})"
            )
        return out
