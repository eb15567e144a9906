"""The `market_tools` toolset, in a module of its own: markets.tools and markets.tools_intraday both
register on it, and markets.tools imports tools_intraday so that importing `markets.tools` brings
every market tool. Keeping the toolset here avoids the tools ↔ tools_intraday import cycle.
"""

from __future__ import annotations

from agent.tools.registry import Toolset
from markets.services import MarketServices

market_tools = Toolset("markets")


def source_note(svc: MarketServices, market: str = "cn") -> str:
    """Where daily bars came from and how fresh they are, for a tool result's `source`."""
    names = "+".join(p.name for p in svc.data.providers)
    as_of = svc.data.as_of(market)
    return f"{names} daily bars" + (f", as of {as_of}" if as_of else "")
