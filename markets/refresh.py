"""Bringing the local bar store up to the providers' newest bars (the scheduled refresh after each
market's close, and `tapebot data update`).

    report = refresh_market(md, "cn", symbols=["600519"], full_list=False)

For A-shares: the indexes (CSI 300, the Shanghai Composite), every stored stock, the given symbols,
and with `full_list` the provider's stock list and all its stocks (the screen's universe). For
crypto: every stored pair, the given ones, and BTC/USDT and ETH/USDT. Each symbol's failure is
recorded and the rest go on: an unreachable provider leaves the stored bars as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from markets.data import MarketData
from markets.errors import MarketError
from markets.providers.stored import StoredProvider
from markets.symbols import Instrument, board_of, exchange_of

INDEXES = ("000300", "000001")  # CSI 300 and the Shanghai Composite
CRYPTO_DEFAULT = ("BTC/USDT", "ETH/USDT")

Progress = Callable[[str, int, int], Any]  # (symbol, done, total)


@dataclass
class RefreshReport:
    market: str
    providers: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    listed: int = 0  # codes on the provider's stock list, when it was fetched
    as_of: date | None = None  # the market's date as answers state it
    fetched_as_of: date | None = None  # the provider's newest bar among what this refresh stored

    def to_dict(self) -> dict[str, Any]:
        return {
            "market": self.market,
            "providers": self.providers,
            "updated": len(self.updated),
            "failed": self.failed,
            "listed": self.listed,
            "as_of": str(self.as_of) if self.as_of else None,
        }

    def summary(self) -> str:
        fails = f", {len(self.failed)} failed" if self.failed else ""
        src = "+".join(self.providers) or "no live provider"
        line = f"{self.market}: {len(self.updated)} updated{fails} from {src}; newest bar {self.as_of or '—'}"
        if self.fetched_as_of is not None and (self.as_of is None or self.fetched_as_of > self.as_of):
            # only indexes are stored yet: the stocks still answer from the bundled bars
            line += (
                f" (the provider's bars reach {self.fetched_as_of}, but no stock of this market is "
                "stored yet: name some (tapebot data update 600519 …) or fetch them all with --all)"
            )
        return line


def stored_providers(md: MarketData) -> list[StoredProvider]:
    return [p for p in md.providers if isinstance(p, StoredProvider)]


def refresh_market(
    md: MarketData,
    market: str,
    symbols: Iterable[str] = (),
    *,
    full_list: bool = False,
    progress: Progress | None = None,
) -> RefreshReport:
    report = RefreshReport(market)
    for p in stored_providers(md):
        targets = _targets(md, p, market, list(symbols), full_list, report)
        if not targets:
            continue
        report.providers.append(p.name)
        with p.store.batch():
            for n, inst in enumerate(targets, 1):
                key = inst.symbol if inst.market != "index" else f"index {inst.symbol}"
                try:
                    p.refresh(inst)
                    report.updated.append(key)
                except Exception as exc:  # noqa: BLE001 — one symbol's failure is reported; the rest go on
                    report.failed[key] = f"{type(exc).__name__}: {exc}"[:200]
                if progress is not None:
                    progress(inst.symbol, n, len(targets))
    md.refreshed()
    report.as_of = md.as_of(market)
    lasts = [
        d
        for p in stored_providers(md)
        for m in ([market, "index"] if market == "cn" else [market])
        if (d := p.store.last(p.name, m)) is not None
    ]
    report.fetched_as_of = max(lasts, default=None) if report.updated else None
    return report


def _targets(
    md: MarketData,
    p: StoredProvider,
    market: str,
    symbols: list[str],
    full_list: bool,
    report: RefreshReport,
) -> list[Instrument]:
    out: dict[str, Instrument] = {}

    def add(inst: Instrument) -> None:
        if p.has(inst):
            out.setdefault(f"{inst.market}:{inst.symbol}", inst)

    if market == "cn":
        for code in INDEXES:
            if (idx := md.directory.index(code)) is not None:
                add(idx)
        if full_list:
            try:
                report.listed = p.refresh_stock_list()
            except Exception as exc:  # noqa: BLE001 — the stored list stays; the stored stocks still refresh
                report.failed["stock list"] = f"{type(exc).__name__}: {exc}"[:200]
            md.refreshed()
            for code, name in p.store.stock_list(p.name):
                add(
                    md.directory.get(code)
                    or Instrument(code, name, exchange=exchange_of(code), board=board_of(code))
                )
    stored = [i.symbol for i in p.store.infos(p.name, market)]
    defaults = list(CRYPTO_DEFAULT) if market == "crypto" else []
    for s in [*stored, *symbols, *defaults]:
        try:
            inst = md.resolve(s)
        except MarketError:
            report.failed[s] = f"unknown symbol {s}"
            continue
        if inst.market == market:
            add(inst)
    return list(out.values())
