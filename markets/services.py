"""What the market tools need, bundled for the composition root:

    services = MarketServices(data=MarketData(), session_factory=db.sessions, results_dir=home / "results",
                              charts_dir=home / "results" / "charts", settings=MarketSettings())
    deps.add(services)

Tools fetch it with `ctx.deps.get(MarketServices)`; `require(ctx)` turns a missing service into a
clear tool error instead of an AttributeError deep inside a tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markets.errors import ServiceMissing
from markets.settings import MarketSettings

if TYPE_CHECKING:
    from agent.providers.base import ModelClient
    from agent.tools.registry import ToolContext
    from markets.broker import LiveCcxtBroker
    from markets.data import MarketData
    from markets.models import SessionFactory

__all__ = ["MarketServices", "MarketSettings", "build_live_broker", "build_market_data", "require"]


@dataclass
class MarketServices:
    data: MarketData
    session_factory: SessionFactory | None = None
    results_dir: Path = field(default_factory=lambda: Path.cwd() / "results")
    charts_dir: Path | None = None
    settings: MarketSettings = field(default_factory=MarketSettings)
    model: ModelClient | None = None  # for AI write-ups (optional)
    live_broker: LiveCcxtBroker | None = None  # only when settings.live is true
    clock: Callable[[], datetime] | None = (
        None  # wall clock (paper "today", calendar warnings); tests inject it
    )

    def __post_init__(self) -> None:
        if self.charts_dir is None:
            self.charts_dir = self.results_dir / "charts"

    @property
    def chart_dir(self) -> Path:
        return self.charts_dir or self.results_dir / "charts"

    def calendar_warning(self, now: datetime | None = None, *, lang: str = "en") -> str | None:
        """The A-share calendar's range warning for today at the exchange (in `lang`), or None."""
        from markets.calendar import exchange_today  # numpy: loaded with the first market call

        return self.data.calendar("cn").warning(exchange_today(now or self.now()), lang=lang)

    def now(self) -> datetime:
        return self.clock() if self.clock is not None else datetime.now(UTC)

    def sessions(self) -> SessionFactory:
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


class LazyMarketData:
    """Stands in for a `MarketData` and builds it on first use: numpy, the providers and the
    bundled dataset load when a market tool or snapshot first needs them, not at every start
    (a one-shot "hi" never does). `built` says whether that happened."""

    def __init__(self, build: Callable[[], MarketData]):
        self._build = build
        self._real: MarketData | None = None

    @property
    def built(self) -> bool:
        return self._real is not None

    def get(self) -> MarketData:
        if self._real is None:
            self._real = self._build()
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


def build_market_data(
    settings: MarketSettings,
    session_factory: SessionFactory | None = None,
    clock: Callable[[], datetime] | None = None,
) -> MarketData:
    """Providers in the configured order (`bundled`, `csv`, `akshare`, `yfinance`, `ccxt`). With a
    data folder (`data_dir`), network providers' bars are kept in the local bar store under
    `data_dir/bars` (markets/store.py) and answers read it; without one they are cached in the
    database when a session factory is given. `akshare` also serves A-share minute bars (the
    intraday and tail-session tools); minute bars are not stored. Each live provider also serves
    live prices (markets/quotes.py) to the intraday alert poll."""
    from markets.data import MarketData
    from markets.providers import BundledProvider, CsvFolderProvider
    from markets.providers.network import AkshareProvider, CcxtProvider, YFinanceProvider

    providers: list[Any] = []
    for name in settings.providers or ["bundled"]:
        if name == "bundled":
            providers.append(BundledProvider())
        elif name == "csv":
            if not settings.csv_folder:
                raise ServiceMissing("provider 'csv' needs [markets] csv_folder")
            providers.append(CsvFolderProvider(settings.csv_folder))
        elif name == "akshare":
            providers.append(AkshareProvider())
        elif name == "yfinance":
            providers.append(YFinanceProvider())
        elif name == "ccxt":
            providers.append(CcxtProvider(settings.live_exchange))
        else:
            raise ServiceMissing(
                f"unknown market data provider {name!r} (bundled, csv, akshare, yfinance, ccxt)"
            )
    if settings.data_dir:
        from markets.providers.stored import StoredProvider
        from markets.store import BarStore

        store = BarStore(Path(settings.data_dir) / "bars")
        providers = [
            p if p.name in ("bundled", "csv") else StoredProvider(p, store, clock=clock) for p in providers
        ]
    cache = None
    if session_factory is not None and any(not getattr(p, "local", False) for p in providers):
        from markets.cache import BarCache

        cache = BarCache(session_factory)
    minute: list[Any] = []
    if "akshare" in (settings.providers or []):
        from markets.providers.akshare_minute import AkshareMinuteProvider

        minute.append(AkshareMinuteProvider())
    from markets.quotes import quote_providers

    return MarketData(
        providers,
        cache=cache,
        minute_providers=minute,
        quote_providers=quote_providers(settings.providers or [], settings.live_exchange),
        calendar_dir=settings.data_dir or None,
    )


def build_live_broker(
    settings: MarketSettings, session_factory: SessionFactory, data: MarketData, exchange: Any = None
) -> LiveCcxtBroker | None:
    """The live ccxt broker, only when `settings.live` is true (it logs a start-up banner)."""
    if not settings.live:
        return None
    from markets.broker import LiveCcxtBroker

    if exchange is None:
        import ccxt  # the `ccxt` extra

        exchange = getattr(ccxt, settings.live_exchange)(
            {"apiKey": settings.live_api_key, "secret": settings.live_secret, "enableRateLimit": True}
        )
    return LiveCcxtBroker(session_factory, data, settings, exchange)
