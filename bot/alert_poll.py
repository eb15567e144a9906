"""The intraday alert poll: while a market trades, every `every` seconds the live-price alerts
(markets/alerts_live.py) are checked against the live provider's prices and what fired is
delivered at once (bot/alert_delivery.py: once per firing, rate-limited per chat).

It runs only with a live provider configured (akshare for A-shares, yfinance for both, ccxt for
crypto), asks only for symbols that have such an alert, and with replicas only in the process
holding the scheduler's lease (a second poller would record nothing new — the firing row is
unique — but would double the provider's load)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

from markets.alerts import AlertStore

if TYPE_CHECKING:
    from bot.alert_delivery import AlertDelivery
    from markets.data import MarketData
    from markets.services import MarketServices

log = logging.getLogger(__name__)

LIVE_PROVIDERS = ("akshare", "yfinance", "ccxt")
MARKETS = ("cn", "crypto")


class Leader(Protocol):
    @property
    def is_leader(self) -> bool: ...


def polls(market: MarketServices) -> bool:
    """Whether this configuration has anything to poll (a live provider, the database, an interval)."""
    s = market.settings
    return (
        market.session_factory is not None
        and s.alert_poll_s > 0
        and any(p in LIVE_PROVIDERS for p in s.providers)
    )


class IntradayAlertPoll:
    def __init__(
        self,
        market: MarketServices,
        delivery: AlertDelivery,
        *,
        leader: Leader | None = None,
        now: Callable[[], datetime] | None = None,
    ):
        self.market, self.delivery, self.leader = market, delivery, leader
        self.now = now or market.now
        self.store = AlertStore(market.sessions())

    async def tick(self) -> tuple[int, int]:
        """One poll: (firings recorded, firings delivered)."""
        if self.leader is not None and not self.leader.is_leader:
            return 0, 0
        # here, not at module level: it brings numpy, whose import (and its BLAS threads spinning
        # after it) `tapebot run` would otherwise pay as the chats open even with no live provider
        from markets.alerts_live import evaluate_live

        data = cast("MarketData", getattr(self.market.data, "get", lambda: self.market.data)())
        now = self.now()
        fired = 0
        for m in MARKETS:
            fired += len(await evaluate_live(self.store, data, m, now))
        return fired, (await self.delivery.deliver_pending() if fired else 0)

    async def run(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                fired, sent = await self.tick()
                if fired:
                    log.info("intraday alerts: %d fired, %d delivered", fired, sent)
            except Exception:  # a provider or database hiccup: the next poll tries again
                log.exception("intraday alert poll failed")
