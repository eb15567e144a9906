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


def age_note(as_of: Any, now: datetime) -> str:
    """`2025-09-03 (459 days old)`: a date as every answer states it."""
    d = _day(as_of)
    if d is None:
        return "an unknown date"
    n = (now.date() - d).days
    age = "today" if n <= 0 else "1 day old" if n == 1 else f"{n} days old"
    return f"{d} ({age})"


def source_note(svc: MarketServices, market: str = "cn") -> str:
    """Where daily bars came from and how fresh they are, for a tool result's `source`."""
    names = "+".join(p.name for p in svc.data.providers)
    as_of = svc.data.as_of(market)
    return f"{names} daily bars" + (f", as of {age_note(as_of, svc.now())}" if as_of else "")
