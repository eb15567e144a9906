"""Hand-built bar sequences for the markets tests (imported by name; no conftest needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from markets.bars import Bars

DATA = Path(__file__).parent / "data"


class Builder:
    """Append bars by intent: trends, zig-zag ranges and single hand-made bars."""

    def __init__(self, start: float = 150.0, vol: float = 1e6, first_day: str = "2022-01-03"):
        self.rows: list[tuple[float, float, float, float, float]] = []
        self.c = start
        self.vol = vol
        self.first = np.datetime64(first_day)

    def bar(self, o: float, h: float, lo: float, c: float, v: float | None = None) -> int:
        self.rows.append((o, max(h, o, c), min(lo, o, c), c, self.vol if v is None else v))
        self.c = c
        return len(self.rows) - 1

    def trend(self, n: int, to: float, vol: float | None = None) -> None:
        start = self.c
        for i in range(1, n + 1):
            c = start + (to - start) * i / n
            o = self.c
            self.bar(o, max(o, c) * 1.004, min(o, c) * 0.996, c, vol)

    def zigzag(
        self, n: int, lo: float, hi: float, leg: int = 6, vol: float | None = None, first_up: bool = True
    ) -> None:
        """Closes oscillate between lo and hi; turning bars touch the level exactly."""
        up = first_up
        target = hi if up else lo
        for _ in range(n):
            step = (target - self.c) / max(1, leg - (len(self.rows) % leg))
            c = self.c + step
            o = self.c
            h, low = max(o, c) * 1.003, min(o, c) * 0.997
            if abs(c - target) < 1e-9 or abs(step) < 1e-9:
                up = not up
                target = hi if up else lo
            if c >= hi - 1e-9:
                h = hi
            if c <= lo + 1e-9:
                low = lo
            self.bar(o, h, low, c, vol)

    def build(self, symbol: str = "TEST", market: str = "cn") -> Bars:
        a = np.array(self.rows)
        dates = self.first + np.arange(len(a))
        return Bars(
            symbol, dates.astype("datetime64[D]"), a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], market=market
        )


def accumulation(
    spring_vol: float = 0.5e6, with_test: bool = True, upto: str = "all"
) -> tuple[Bars, dict[str, int]]:
    """Decline → SC → AR → ST → range → spring (→ test) → SOS → LPS → mark-up."""
    b = Builder(150.0)
    idx: dict[str, int] = {}
    b.zigzag(150, 146, 154, leg=8)
    b.trend(60, 100.0)
    idx["SC"] = b.bar(100.0, 100.5, 92.0, 94.0, 3.5e6)
    b.trend(5, 108.0, 1.4e6)
    idx["AR"] = b.bar(108.0, 110.0, 107.5, 109.5, 1.0e6)
    b.trend(7, 96.0, 0.7e6)
    idx["ST"] = b.bar(96.0, 96.5, 93.0, 95.5, 0.6e6)
    b.trend(5, 109.0, 0.8e6)
    for _ in range(4):
        b.trend(6, 96.0, 0.8e6)
        b.bar(96.0, 96.3, 95.0, 95.8, 0.7e6)
        b.trend(6, 109.0, 0.8e6)
        b.bar(109.0, 110.0, 108.6, 109.2, 0.8e6)
    b.trend(6, 97.0, 0.8e6)
    idx["Spring"] = b.bar(97.0, 97.2, 91.0, 96.2, spring_vol)
    b.trend(2, 98.5, 0.7e6)
    if with_test:
        idx["test"] = b.bar(97.5, 98.0, 94.0, 97.8, 0.3e6)
    if upto == "spring":
        b.trend(2, 100.0, 0.6e6)
        return b.build(), idx
    b.trend(7, 108.0, 0.9e6)
    idx["SOS"] = b.bar(108.5, 116.0, 108.0, 115.5, 3.0e6)
    b.trend(3, 119.0, 1.5e6)
    b.trend(3, 113.0, 0.9e6)
    idx["LPS"] = b.bar(112.5, 113.0, 111.0, 112.5, 0.6e6)
    b.trend(4, 118.0, 1.0e6)
    return b.build(), idx


def distribution() -> tuple[Bars, dict[str, int]]:
    """Advance → BC → AR → ST → range → UTAD → SOW → LPSY."""
    b = Builder(100.0)
    idx: dict[str, int] = {}
    b.zigzag(150, 96, 104, leg=8)
    b.trend(60, 150.0)
    idx["BC"] = b.bar(150.0, 160.0, 149.5, 156.0, 3.5e6)
    b.trend(5, 142.0, 1.4e6)
    idx["AR"] = b.bar(142.0, 142.5, 139.0, 140.5, 1.0e6)
    b.trend(7, 155.0, 0.7e6)
    idx["ST"] = b.bar(155.0, 158.5, 154.5, 155.5, 0.6e6)
    b.trend(5, 142.0, 0.8e6)
    for _ in range(4):
        b.trend(6, 154.0, 0.8e6)
        b.bar(154.0, 155.0, 153.7, 154.2, 0.7e6)
        b.trend(6, 142.0, 0.8e6)
        b.bar(142.0, 142.3, 141.0, 141.8, 0.8e6)
    b.trend(6, 153.0, 0.8e6)
    idx["UTAD"] = b.bar(153.0, 160.0, 152.5, 153.5, 2.0e6)
    b.trend(6, 143.0, 0.9e6)
    idx["SOW"] = b.bar(143.0, 143.2, 134.0, 135.0, 3.0e6)
    b.trend(3, 131.0, 1.5e6)
    b.trend(3, 138.0, 0.9e6)
    idx["LPSY"] = b.bar(138.0, 139.5, 137.5, 138.2, 0.6e6)
    b.trend(4, 130.0, 1.0e6)
    return b.build(), idx


async def make_sessions(tmp_path, url: str | None = None):
    """A real SQLite file (or the database at `url`) with every table on Base.metadata; returns
    (engine, async_sessionmaker)."""
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    import markets.models  # noqa: F401
    from memory.base import Base

    engine = create_async_engine(url or f"sqlite+aiosqlite:///{tmp_path / 'markets.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    return engine, async_sessionmaker(engine, expire_on_commit=False)
