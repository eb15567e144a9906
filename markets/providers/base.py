"""The provider port. Providers are synchronous: local ones answer from memory, network ones block,
so async callers use `asyncio.to_thread` (MarketData's async helpers do)."""

from __future__ import annotations

from datetime import date
from typing import Protocol, runtime_checkable

from markets.bars import Bars
from markets.symbols import Instrument


@runtime_checkable
class BarProvider(Protocol):
    name: str

    def has(self, inst: Instrument) -> bool:
        """Whether this provider can serve bars for the instrument."""
        ...

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        """Daily bars in canonical units; raises NoData when there are none."""
        ...

    def instruments(self) -> list[Instrument]:
        """Instruments this provider knows (may be empty for network providers)."""
        ...

    def as_of(self, market: str = "cn") -> date | None:
        """Date of the last bar this provider has for the market (None: live / unknown)."""
        ...
