"""A network provider behind the local bar store: answers come from the stored files, the provider
is asked only when a symbol was never fetched, its copy is older than `ttl`, or a refresh runs.

    p = StoredProvider(AkshareProvider(), BarStore(home / "data" / "bars"))
    p.bars(inst)        # stored bars (fetched first when missing or due); the stored copy when the
                        # provider is unreachable
    p.refresh(inst)     # fetch the newest bars now (a few days' overlap; all history again when the
                        # overlap disagrees, as when a dividend re-adjusts qfq prices)
    p.as_of("cn")       # the newest stored bar: as-of dates follow the provider, not the bundle

A failed fetch is not retried for `backoff`, so an unreachable provider costs one timeout, not one
per symbol of a screen. Inside `stored_only()` (the whole-universe panel of a screen or the
overview) nothing is fetched at all: thousands of symbols are read from the files as they are, and
the scheduled refresh is what brings them up to date.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from markets.bars import Bars
from markets.calendar import EXCHANGE_TZ, SSE_CLOSE
from markets.errors import NoData
from markets.providers.base import BarProvider
from markets.store import BarStore
from markets.symbols import Instrument, board_of, exchange_of, is_st_name

log = logging.getLogger(__name__)

_STORED_ONLY: ContextVar[bool] = ContextVar("tapebot_stored_only", default=False)


@contextmanager
def stored_only() -> Iterator[None]:
    """Reads in this block come from the store alone (no network call, however old the copy)."""
    token = _STORED_ONLY.set(True)
    try:
        yield
    finally:
        _STORED_ONLY.reset(token)


class StoredProvider:
    local = True  # answers from local files (the directory may list its instruments at start)
    live = True  # its stock list is the screen's universe

    def __init__(
        self,
        inner: BarProvider,
        store: BarStore,
        *,
        clock: Callable[[], datetime] | None = None,
        ttl: timedelta = timedelta(hours=12),
        backoff: timedelta = timedelta(minutes=5),
        overlap: int = 5,
    ):
        self.inner, self.store = inner, store
        self.name = inner.name
        self.coverage = f"{inner.name} (bars kept in {store.folder})"
        self.clock = clock or (lambda: datetime.now(UTC))
        self.ttl, self.backoff, self.overlap = ttl, backoff, overlap
        self._failed_at: datetime | None = None
        self._lock = threading.Lock()

    # -- port -------------------------------------------------------------------------------------
    def has(self, inst: Instrument) -> bool:
        return self.inner.has(inst)

    def bars(self, inst: Instrument, start: date | str | None = None, end: date | str | None = None) -> Bars:
        info = self.store.info(self.name, inst.symbol, inst.market)
        stored = self.store.read(self.name, inst.symbol, inst.market) if info is not None else None
        due = stored is None or (info is not None and self.clock() - info.fetched_at > self.ttl)
        if due and not self._backing_off() and not _STORED_ONLY.get():
            try:
                stored = self.refresh(inst)
            except Exception as exc:  # any provider failure falls back to the stored copy
                if stored is None:
                    if isinstance(exc, NoData):
                        raise
                    raise NoData(
                        f"{self.name} is unreachable ({type(exc).__name__}: {exc}) and no bars "
                        f"of {inst.label} are stored"
                    ) from exc
                log.warning(
                    "%s refresh of %s failed, serving the stored bars: %s", self.name, inst.symbol, exc
                )
        if stored is None:
            why = "reads stored bars only here" if _STORED_ONLY.get() else "was unreachable moments ago"
            raise NoData(f"{self.name} {why} and no bars of {inst.label} are stored")
        return stored.between(start, end) if (start or end) else stored

    def instruments(self) -> list[Instrument]:
        out = [
            Instrument(c, n, exchange=exchange_of(c), board=board_of(c), is_st=is_st_name(n))
            for c, n in self.store.stock_list(self.name)
        ]
        out += [
            Instrument(i.symbol, i.symbol.split("/")[0], market="crypto", board="crypto")
            for i in self.store.infos(self.name, "crypto")
        ]
        return out

    def symbols(self, market: str = "cn") -> list[str]:
        """Stored symbols of a market; for A-shares those on the provider's stock list when one was
        fetched (delisted codes drop out of the universe)."""
        stored = [i.symbol for i in self.store.infos(self.name, market)]
        listed = {c for c, _ in self.store.stock_list(self.name)}
        if market == "cn" and listed:
            return [s for s in stored if s in listed]
        return stored

    def as_of(self, market: str = "cn") -> date | None:
        return self.store.last(self.name, market)

    # -- refreshing -------------------------------------------------------------------------------
    def _backing_off(self) -> bool:
        return self._failed_at is not None and self.clock() - self._failed_at < self.backoff

    def refresh(self, inst: Instrument) -> Bars:
        """Fetch the newest bars of one instrument into the store; the whole stored series back."""
        stored = self.store.read(self.name, inst.symbol, inst.market)
        start = (
            str(stored.dates[-self.overlap]) if stored is not None and len(stored) > self.overlap else None
        )
        try:
            fresh = settled(self.inner.bars(inst, start, None), self.clock())
            replace = start is None or stored is None or not _agrees(stored, fresh)
            if replace and start is not None:
                log.info("%s: %s history changed (re-adjusted); fetching it all", self.name, inst.symbol)
                fresh = settled(self.inner.bars(inst, None, None), self.clock())
        except NoData:
            raise
        except Exception:
            with self._lock:
                self._failed_at = self.clock()
            raise
        with self._lock:
            self._failed_at = None
        fresh = _as_market(fresh, inst.market)
        return self.store.write(self.name, fresh, self.clock(), replace=replace)

    def refresh_stock_list(self) -> int:
        """The provider's stock list into the store (the universe); how many codes it holds."""
        rows = [(i.symbol, i.name) for i in self.inner.instruments() if i.market == "cn"]
        if rows:
            self.store.put_stock_list(self.name, rows)
        return len(rows)


def settled(b: Bars, now: datetime) -> Bars:
    """The bars without one of a session still trading at `now` (Eastmoney and Yahoo serve today's
    bar during the session, its "close" the latest price): stored, it would pass for a close,
    and an alert set then would only watch the bars after it. A-shares settle at 15:00 Beijing;
    a crypto day at 00:00 UTC."""
    if not len(b) or b.last_date is None:
        return b
    if b.market == "crypto":
        trading: date | None = now.astimezone(UTC).date()
    else:
        local = now.astimezone(EXCHANGE_TZ)
        trading = local.date() if local.time() < SSE_CLOSE else None
    if trading is None or b.last_date < trading:
        return b
    out = b.between(None, trading - timedelta(days=1))
    if not len(out):
        raise NoData(f"{b.symbol} has no settled daily bar yet (its first session is still trading)")
    return out


def _agrees(stored: Bars, fresh: Bars) -> bool:
    """Whether the fetched bars repeat the stored closes on the dates both hold."""
    common, si, fi = np.intersect1d(stored.dates, fresh.dates, return_indices=True)
    if not len(common):
        return False
    return bool(np.allclose(stored.close[si], fresh.close[fi], rtol=1e-6, atol=1e-9))


def _as_market(b: Bars, market: str) -> Bars:
    if b.market == market:
        return b
    fields: dict[str, Any] = {
        k: getattr(b, k) for k in ("dates", "open", "high", "low", "close", "volume", "amount")
    }
    return Bars(b.symbol, **fields, market=market, adjust=b.adjust, source=b.source)
