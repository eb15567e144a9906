"""DynamicSnapshots and CurrentReferences for the investing toolkit.

- `dynamic_snapshot(services, user_id, text)`: before a turn that concerns holdings, balances,
  strategies or traders, fresh facts read from the database and the market data (never stored as
  memory). The composition root passes the string as `TurnRequest.system_dynamic`.
- `references_from(result)`: what "this stock / this strategy / this trader" refers to after a tool
  result (the tools put them under `refs`); the session keeps the latest of each.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markets.services import MarketServices

TOPICS = re.compile(
    r"portfolio|holding|position|balance|cash|p&l|pnl|strateg|trader|buy|sell|"
    r"持仓|仓位|组合|余额|现金|资金|盈亏|策略|交易员|买|卖|止损|调仓",
    re.I,
)


def concerns_account(text: str) -> bool:
    return bool(TOPICS.search(text or ""))


async def dynamic_snapshot(
    services: MarketServices, user_id: str, text: str = "", *, force: bool = False
) -> str:
    """A short fact block, or "" when the message is not about the account (or no database)."""
    if services.session_factory is None or not (force or concerns_account(text)):
        return ""
    from markets.portfolio import Portfolio  # here: a turn not about the account imports no numpy
    from markets.strategies import StrategyStore

    pf = Portfolio(services.session_factory, services.data, services.settings)
    view = await pf.view(user_id)
    store = StrategyStore(services.session_factory)
    strategies = await store.strategies(user_id)
    traders = await store.traders(user_id)
    lines = [
        f"[Account snapshot, as of {view['as_of']['cn']} (cn) / {view['as_of']['crypto']} (crypto); fresh, not memory]"
    ]
    for book, word in (("recorded", "recorded holding"), ("paper", "paper position")):
        part = view[book]
        lines.append(f"{part['label']}:")
        for m, t in part["totals"].items():
            if not t["market_value"] and t["cash"] is None:
                continue
            cash = "cash not recorded" if t["cash"] is None else f"cash {t['cash']:,} {t['currency']}"
            extra = f", realized P&L {t['realized_pnl']:,}" if "realized_pnl" in t else ""
            lines.append(
                f"  {m}: {cash}, market value {t['market_value']:,}, unrealized P&L {t['unrealized_pnl']:,}{extra}"
            )
        for p in part["positions"][:20]:
            lines.append(
                f"  {word} {p['name']}({p['symbol']}): {p['quantity']:g} @ {p['avg_cost']} → {p['price']} ({p['pnl_pct']}%)"
            )
        for o in part.get("pending_orders", [])[:20]:
            lines.append(
                f"  pending paper order #{o['id']}: {o['side']} {o['quantity']:g} {o['symbol']} — {o['reason']}"
            )
    if strategies:
        lines.append(
            "strategies: "
            + ", ".join(
                f"#{s['id']} {s['name']}{' (active)' if s['is_active'] else ''}" for s in strategies[:10]
            )
        )
    if traders:
        lines.append(
            "traders: "
            + ", ".join(
                f"#{t['id']} {t['name']} [{t['status']}] strategy #{t['strategy_id']}" for t in traders[:10]
            )
        )
    return "\n".join(lines)


def references_from(result: Any) -> dict[str, Any]:
    """The `refs` of a tool result (dict, ToolOutput or its JSON text)."""
    content = getattr(result, "content", result)
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            return {}
    refs = content.get("refs") if isinstance(content, dict) else None
    return {k: v for k, v in (refs or {}).items() if v is not None}
