"""The `market_tools` toolset, in a module of its own: markets.tools and markets.tools_intraday both
register on it, and markets.tools imports tools_intraday so that importing `markets.tools` brings
every market tool. Keeping the toolset here avoids the tools ↔ tools_intraday import cycle.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from agent.tools.registry import Toolset
from markets.services import MarketServices

market_tools = Toolset("markets")


def _day(value: Any) -> date | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def age_days(as_of: Any, now: datetime) -> int | None:
    """Whole days from a bar's date to today (UTC): 0 for today's bar."""
    d = _day(as_of)
    return None if d is None else (now.date() - d).days


def age_note(as_of: Any, now: datetime, lang: str = "en") -> str:
    """`2025-09-03 (459 days old)`: a date as every answer states it (`zh`: 2025-09-03（459 天前）)."""
    d = _day(as_of)
    if d is None:
        return "日期未知" if lang.startswith("zh") else "an unknown date"
    n = (now.date() - d).days
    if lang.startswith("zh"):
        return f"{d}（{'今天' if n <= 0 else f'{n} 天前'}）"
    age = "today" if n <= 0 else "1 day old" if n == 1 else f"{n} days old"
    return f"{d} ({age})"


def data_dates(svc: MarketServices, now: datetime, lang: str = "en") -> str:
    """Each market's newest bar with its age: `A-shares 2026-12-04 (2 days old), crypto ...`."""
    zh = lang.startswith("zh")
    parts = []
    for market, en, cn in (("cn", "A-shares", "A股"), ("crypto", "crypto", "加密货币")):
        as_of = svc.data.as_of(market)
        if as_of is not None:
            parts.append(f"{cn if zh else en} {age_note(as_of, now, lang)}")
    return ("，" if zh else ", ").join(parts) or ("无" if zh else "none")


def source_note(svc: MarketServices, market: str = "cn") -> str:
    """Where daily bars came from and how fresh they are, for a tool result's `source`."""
    names = "+".join(p.name for p in svc.data.providers)
    as_of = svc.data.as_of(market)
    return f"{names} daily bars" + (f", as of {age_note(as_of, svc.now())}" if as_of else "")
