"""What the market tools need, bundled for the composition root:

    services = MarketServices(data=MarketData(), session_factory=db.sessions, results_dir=home / "results",
                              charts_dir=home / "results" / "charts", settings=MarketSettings())
    deps.add(services)

Tools fetch it with `ctx.deps.get(MarketServices)`; `require(ctx)` turns a missing service into a
clear tool error instead of an AttributeError deep inside a tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from markets.data import MarketData
from markets.errors import ServiceMissing

if TYPE_CHECKING:
    from agent.tools.registry import ToolContext


class MarketSettings(BaseModel):
    """Market-related settings (a `[markets]` table of config.toml maps onto this)."""

    initial_cash_cn: float = 1_000_000.0  # a new paper account's cash (CNY)
    initial_cash_crypto: float = 100_000.0  # USDT
    crypto_fee: float = 0.001
    commission: float = 0.00025
    commission_min: float = 5.0
    stamp_duty_sell: float = 0.0005
    live: bool = False  # live trading through ccxt: never on unless set explicitly
    live_exchange: str = "binance"
    live_api_key: str = ""
    live_secret: str = ""
    csv_folder: str = ""
    providers: list[str] = ["bundled"]  # order of providers: bundled, csv, akshare, yfinance, ccxt


@dataclass
class MarketServices:
    data: MarketData
    session_factory: Any = None  # async_sessionmaker[AsyncSession]
    results_dir: Path = field(default_factory=lambda: Path.cwd() / "results")
    charts_dir: Path | None = None
    settings: MarketSettings = field(default_factory=MarketSettings)
    model: Any = None  # agent ModelClient for AI write-ups (optional)
    live_broker: Any = None  # a LiveBroker, only when settings.live is true

    def __post_init__(self) -> None:
        if self.charts_dir is None:
            self.charts_dir = self.results_dir / "charts"

    def sessions(self) -> Any:
        if self.session_factory is None:
            raise ServiceMissing(
                "the database is not configured for market tools (portfolio, trades, strategies)"
            )
        return self.session_factory


def require(ctx: ToolContext) -> MarketServices:
    try:
        return ctx.deps.get(MarketServices)
    except LookupError:
        raise ServiceMissing(
            "market services are not configured: the composition root must add MarketServices to the tool deps"
        ) from None
