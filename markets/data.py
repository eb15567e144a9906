"""The MarketData port: one object the tools use for instruments and bars, whatever the source.

    md = MarketData()                      # bundled dataset only
    md = MarketData([CsvFolderProvider("~/bars"), BundledProvider()])   # first provider that has it wins
    inst = md.resolve("贵州茅台")            # or 600519 / 600519.SH / sh600519 / GZMT / BTC
    bars = md.bars("600519", start="2025-01-01")
    md.as_of("cn")                         # date of the last bar: every answer quotes it
    md = MarketData(minute_providers=[AkshareMinuteProvider()])   # intraday bars (markets/minute.py)
    md.minute_bars("600519")               # the latest session's 1-minute bars, or NoMinuteData
    md = MarketData(quote_providers=[AkshareQuotes()])   # live prices (markets/quotes.py)
    md.quote("600519", now)                # today's latest price, or NoMinuteData

Methods are synchronous (local providers answer from memory); async code uses `abars`, which runs
the provider in a worker thread so a network backend never blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from markets.bars import Bars
from markets.calendar import TradingCalendar
from markets.directory import Directory, load_cn_instruments
from markets.errors import NoData
from markets.minute import NEEDS_LIVE, MinuteBars, MinuteProvider, NoMinuteData
from markets.panel import Panel
from markets.providers.base import BarProvider
from markets.providers.bundled import BundledProvider
from markets.quotes import Quote, QuoteProvider
from markets.symbols import Instrument, board_of, exchange_of

if TYPE_CHECKING:  # the cache needs the database; the bundled data does not
    from markets.cache import BarCache


class MarketData:
    def __init__(
        self,
        providers: Sequence[BarProvider] | None = None,
        directory: Directory | None = None,
        cache: BarCache | None = None,
        calendar_dir: Path | str | None = None,
        minute_providers: Sequence[MinuteProvider] = (),
        quote_providers: Sequence[QuoteProvider] = (),
    ):
        self.minute_providers: list[MinuteProvider] = list(minute_providers)
        self.quote_providers: list[QuoteProvider] = list(quote_providers)
        self.providers: list[BarProvider] = list(providers) if providers is not None else [BundledProvider()]
        self._directory = directory
        self.cache = cache  # a markets.cache.BarCache: network providers' bars kept in the database
        self._calendars: dict[str, TradingCalendar] = {}
        self.calendar_dir = calendar_dir  # where a newer cn_trade_calendar.json may be dropped

    # -- instruments ------------------------------------------------------------------------------
    @property
    def directory(self) -> Directory:
        if self._directory is None:
            d = Directory(load_cn_instruments())
            for p in self.providers:
                if not getattr(p, "local", False):
                    continue  # a network provider's instrument list is a remote call: never at start-up
                for inst in p.instruments():
                    if d.get(inst.symbol) is None:
                        d.add(inst)
                for code in getattr(p, "symbols", lambda market="cn": [])("cn"):
                    if d.get(code) is None:  # bars without a stock-list entry (e.g. delisted 601989)
                        d.add(Instrument(code, "", exchange=exchange_of(code), board=board_of(code)))
            self._directory = d
        return self._directory

    def resolve(self, query: str | Instrument) -> Instrument:
        """Any code form, name, pinyin initials or crypto symbol → Instrument; NotFound with suggestions."""
        return query if isinstance(query, Instrument) else self.directory.resolve(str(query))

    def search(self, query: str, limit: int = 10) -> list[Instrument]:
        return self.directory.search(query, limit)

    def universe(self, market: str = "cn") -> list[Instrument]:
        """Instruments that have bars from some provider (the screen's universe). A live provider's
        stored stock list, when it has one, is the universe alone: the bundled 300 stay a fallback."""
        seen: dict[str, Instrument] = {}
        live = [p for p in self.providers if getattr(p, "live", False) and p.symbols(market)]  # type: ignore[attr-defined]
        for p in live or self.providers:
            for s in getattr(p, "symbols", lambda market="cn": [])(market):
                if s not in seen:
                    seen[s] = self.directory.get(s) or Instrument(s, market=market)  # type: ignore[arg-type]
        return list(seen.values())

    # -- bars -------------------------------------------------------------------------------------
    def bars(
        self, query: str | Instrument, start: date | str | None = None, end: date | str | None = None
    ) -> Bars:
        inst = self.resolve(query)
        end = self._index_end(inst, end)
        errors = []
        for p in self.providers:
            if p.has(inst):
                try:
                    b = p.bars(inst, start, end)
                except NoData as exc:
                    errors.append(str(exc))
                    continue
                if len(b):
                    return b
        if errors:
            raise NoData(errors[0])
        names = ", ".join(getattr(p, "coverage", p.name) for p in self.providers)
        raise NoData(f"no bars for {inst.label} from the configured providers ({names})")

    async def abars(
        self, query: str | Instrument, start: date | str | None = None, end: date | str | None = None
    ) -> Bars:
        """`bars` without blocking the loop; network providers go through the database cache if set."""
        if self.cache is None:
            return await asyncio.to_thread(self.bars, query, start, end)
        inst = self.resolve(query)
        end = self._index_end(inst, end)
        errors = []
        for p in self.providers:
            if not p.has(inst):
                continue
            try:
                b = await self.cache.get_or_fetch(p, inst, start, end)
            except NoData as exc:
                errors.append(str(exc))
                continue
            if len(b):
                return b
        if errors:
            raise NoData(errors[0])
        return await asyncio.to_thread(self.bars, inst, start, end)

    def _index_end(self, inst: Instrument, end: date | str | None) -> date | str | None:
        """An index file may run past the stock data (the bundled CSI 300 ends 2026-08-21, the
        stocks 2025-09-03): index bars stop at the stocks' as-of date, so an instrument has one
        as-of date in every tool (analysis, chart, overview, backtest benchmark)."""
        if inst.market != "index" or end is not None:
            return end
        if any(getattr(p, "live", False) and p.has(inst) for p in self.providers):
            return None  # a live provider's index and stocks both end at its newest bar
        return self.as_of("cn")

    def index_bars(
        self, code: str = "000300", start: date | str | None = None, end: date | str | None = None
    ) -> Bars:
        inst = self.directory.index(code)
        if inst is None:
            raise NoData(f"unknown index {code}; available: 000300 (CSI 300)")
        return self.bars(inst, start, end)

    def panel(self, symbols: Iterable[str] | None = None, market: str = "cn", min_bars: int = 1) -> Panel:
        """Aligned 2-D bars of many symbols (default: the whole universe of the market)."""
        from markets.providers.stored import stored_only

        syms = list(symbols) if symbols is not None else [i.symbol for i in self.universe(market)]
        got = {}
        with stored_only():  # a universe is read from local files, never fetched symbol by symbol
            for s in syms:
                try:
                    b = self.bars(s)
                except NoData:
                    continue
                if len(b) >= min_bars:
                    got[s] = b
        return Panel.from_bars(got)

    # -- minute bars ------------------------------------------------------------------------------
    def minute_bars(self, query: str | Instrument, day: date | None = None) -> MinuteBars:
        """1-minute bars of one session (default: the latest) from the first minute provider that
        has the instrument; NoMinuteData saying a live provider is needed when none is configured."""
        inst = self.resolve(query)
        errors = []
        for p in self.minute_providers:
            if not p.has_minutes(inst):
                continue
            try:
                return p.minute_bars(inst, day)
            except NoMinuteData as exc:
                errors.append(str(exc))
        if errors:
            raise NoMinuteData(errors[0])
        if self.minute_providers:
            names = ", ".join(p.name for p in self.minute_providers)
            raise NoMinuteData(
                f"no minute bars for {inst.label}: the minute providers ({names}) do not cover it"
            )
        raise NoMinuteData(f"{inst.label}: {NEEDS_LIVE}")

    async def aminute_bars(self, query: str | Instrument, day: date | None = None) -> MinuteBars:
        return await asyncio.to_thread(self.minute_bars, query, day)

    # -- live prices ------------------------------------------------------------------------------
    def has_live_quotes(self, market: str) -> bool:
        """Whether a live-quote provider covers the market (the intraday alert poll runs only then)."""
        probe = Instrument("BTC/USDT", market="crypto") if market == "crypto" else Instrument("600519")
        return any(p.has_quotes(probe) for p in self.quote_providers)

    def quote(self, query: str | Instrument, now: datetime) -> Quote:
        """Today's latest price from the first quote provider that has the instrument."""
        inst = self.resolve(query)
        errors = []
        for p in self.quote_providers:
            if not p.has_quotes(inst):
                continue
            try:
                return p.quote(inst, now)
            except NoMinuteData as exc:
                errors.append(str(exc))
        raise NoMinuteData(
            errors[0] if errors else f"no live price for {inst.label}: no live provider covers it"
        )

    async def aquote(self, query: str | Instrument, now: datetime) -> Quote:
        return await asyncio.to_thread(self.quote, query, now)

    def refreshed(self) -> None:
        """Newer bars or a newer stock list arrived: forget what was derived from the old ones."""
        self._directory = None
        for p in self.providers:
            reload = getattr(p, "reload", None)
            if reload is not None:
                reload()

    # -- time -------------------------------------------------------------------------------------
    def as_of(self, market: str = "cn") -> date | None:
        """Date of the latest bar known for a market (None when only live providers are configured)."""
        dates = [d for p in self.providers if (d := p.as_of(market)) is not None]
        return max(dates) if dates else None

    def calendar(self, market: str = "cn") -> TradingCalendar:
        if market not in self._calendars:
            self._calendars[market] = (
                TradingCalendar.crypto() if market == "crypto" else TradingCalendar.sse(self.calendar_dir)
            )
        return self._calendars[market]
