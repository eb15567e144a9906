"""Bars from network providers cached in the database (table market_bar_cache).

`BarCache.get_or_fetch` serves a (provider, symbol) from the cache when it was fetched within
`ttl` and covers the requested window; otherwise it fetches (in a worker thread), stores the rows
(upsert by provider/symbol/day) and returns them. Local providers (bundled, csv) are never cached.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from typing import cast

import numpy as np
from sqlalchemy import delete, func, select

from markets.bars import Adjust, Bars, day64
from markets.models import MarketBarCache, SessionFactory
from markets.providers.base import BarProvider
from markets.symbols import Instrument

LOCAL = {"bundled", "csv"}


class BarCache:
    def __init__(self, sessions: SessionFactory, ttl: timedelta = timedelta(hours=12)):
        self.sessions = sessions
        self.ttl = ttl

    async def load(
        self, source: str, symbol: str, start: date | str | None = None, end: date | str | None = None
    ) -> Bars | None:
        async with self.sessions() as s:
            q = select(MarketBarCache).where(MarketBarCache.source == source, MarketBarCache.symbol == symbol)
            if start:
                q = q.where(MarketBarCache.day >= day64(start).astype(object))
            if end:
                q = q.where(MarketBarCache.day <= day64(end).astype(object))
            rows = (await s.execute(q.order_by(MarketBarCache.day))).scalars().all()
        if not rows:
            return None

        def col(k: str) -> np.ndarray:
            return np.array([v if (v := getattr(r, k)) is not None else np.nan for r in rows], dtype=float)

        return Bars(
            symbol,
            np.array([r.day for r in rows], dtype="datetime64[D]"),
            col("open"),
            col("high"),
            col("low"),
            col("close"),
            col("volume"),
            col("amount"),
            market="crypto" if "/" in symbol else "cn",
            adjust=cast(Adjust, rows[0].adjust),  # stored from a Bars' adjust by store()
            source=f"{source} (cached)",
        )

    async def fresh(self, source: str, symbol: str) -> bool:
        async with self.sessions() as s:
            last = (
                await s.execute(
                    select(func.max(MarketBarCache.fetched_at)).where(
                        MarketBarCache.source == source, MarketBarCache.symbol == symbol
                    )
                )
            ).scalar_one_or_none()
        if last is None:
            return False
        last = last if last.tzinfo else last.replace(tzinfo=UTC)
        return datetime.now(UTC) - last < self.ttl

    async def store(self, source: str, bars: Bars) -> None:
        if bars.empty:
            return
        days = [d.astype(object) for d in bars.dates]
        async with self.sessions() as s, s.begin():
            await s.execute(
                delete(MarketBarCache).where(
                    MarketBarCache.source == source,
                    MarketBarCache.symbol == bars.symbol,
                    MarketBarCache.day.in_(days),
                )
            )
            now = datetime.now(UTC)
            for i, d in enumerate(days):
                amt = float(bars.amount[i])
                s.add(
                    MarketBarCache(
                        source=source, symbol=bars.symbol, day=d, open=float(bars.open[i]), high=float(bars.high[i]),
                        low=float(bars.low[i]), close=float(bars.close[i]), volume=float(bars.volume[i]),
                        amount=None if amt != amt else amt, adjust=bars.adjust, fetched_at=now,
                    )
                )  # fmt: skip

    async def get_or_fetch(
        self,
        provider: BarProvider,
        inst: Instrument,
        start: date | str | None = None,
        end: date | str | None = None,
    ) -> Bars:
        if provider.name in LOCAL or getattr(provider, "local", False):
            return await asyncio.to_thread(provider.bars, inst, start, end)
        if await self.fresh(provider.name, inst.symbol):
            cached = await self.load(provider.name, inst.symbol, start, end)
            if cached is not None and len(cached):
                return cached
        bars = await asyncio.to_thread(provider.bars, inst, start, end)
        await self.store(provider.name, bars)
        return bars
