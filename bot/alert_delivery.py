"""Alert firings into their chats: each recorded firing (markets/alerts.py) is claimed once
(pending → sending, a compare-and-set), sent with its chart, and marked delivered; a send that
failed outright goes back to pending and is tried at the next run. A chat gets at most
`per_chat_hour` alert firings an hour: when more are waiting than the hour has room for, the last
message is one summary line of the rest, and with no room left they wait (pending, not dropped)
until the hour's window has room — so a volatile watchlist polled every minute cannot flood a
chat. A chat on a platform this process does not serve is left to the process that serves it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.base import ChatAdapter, DeliveryError
from bot.i18n import t
from markets.alerts import AlertStore, Firing, describe, num
from markets.toolset import age_note

if TYPE_CHECKING:
    from bot.chats import ChatDirectory, ChatState
    from markets.bars import Bars
    from markets.services import MarketServices
    from markets.symbols import Instrument

log = logging.getLogger(__name__)


def observed_text(f: Firing) -> str:
    kind = f.alert.kind
    if kind == "move_pct":
        return f"{f.observed:+.2f}%"
    if kind.startswith("rsi"):
        return f"RSI(14) {f.observed:.1f}"
    if kind == "wyckoff":
        return f"{f.alert.event} @ {num(f.observed)}"
    return num(f.observed)


class AlertDelivery:
    def __init__(
        self,
        store: AlertStore,
        market: MarketServices,
        chats: ChatDirectory,
        adapters: Mapping[str, ChatAdapter],
        *,
        per_chat_hour: int = 5,
        now: Callable[[], datetime] | None = None,
    ):
        self.store, self.market, self.chats, self.adapters = store, market, chats, adapters
        self.per_chat_hour = per_chat_hour
        self.now = now or market.now

    async def deliver_pending(self) -> int:
        """Send what is pending; how many firings reached their chats."""
        by_chat: dict[str, list[Firing]] = {}
        for f in await self.store.pending():
            by_chat.setdefault(f.alert.chat_key, []).append(f)
        sent = 0
        for chat_key, firings in by_chat.items():
            state = await self.chats.by_key(chat_key)
            if state is None or state.chat.platform not in self.adapters:
                continue
            used = await self.store.delivered_since(chat_key, self.now() - timedelta(hours=1))
            budget = self.per_chat_hour - used
            if budget <= 0:
                continue  # they wait for the hour's window to free a slot
            single = firings if len(firings) <= budget else firings[: budget - 1]
            for f in single:
                sent += await self._one(state, f)
            if rest := firings[len(single) :]:
                sent += await self._summary(state, rest)
        return sent

    async def _one(self, state: ChatState, f: Firing) -> int:
        if not await self.store.claim(f.id):
            return 0  # another process took it
        adapter = self.adapters[state.chat.platform]
        try:
            text, chart = await self._render(state.lang, f)
        except Exception as exc:  # noqa: BLE001 — the data went missing since: the firing is still sent
            log.warning("alert firing %s rendered without its bars: %s", f.id, exc)
            text, chart = self._plain(state.lang, f), None
        try:
            await adapter.send_text(state.chat, text, format="plain")
        except (DeliveryError, OSError) as exc:
            await self.store.finish(f.id, delivered=False, error=f"{type(exc).__name__}: {exc}")
            log.warning("alert firing %s not delivered to %s: %s", f.id, state.key, exc)
            return 0
        await self.store.finish(f.id, delivered=True, at=self.now())
        if chart is not None:
            with contextlib.suppress(DeliveryError, OSError):  # the text is the alert; the chart adds to it
                await adapter.send_image(state.chat, chart, f"{f.symbol} · {f.bar_date}")
        return 1

    def _plain(self, lang: str, f: Firing) -> str:
        return t(
            lang,
            "alert_fired_plain",
            id=f.alert.id,
            symbol=f.symbol,
            condition=describe(f.alert.kind, f.alert.value, f.alert.event, lang),
            day=f.bar_date,
            observed=observed_text(f),
        )

    async def _summary(self, state: ChatState, firings: list[Firing]) -> int:
        claimed = [f for f in firings if await self.store.claim(f.id)]
        if not claimed:
            return 0
        items = "; ".join(
            f"#{f.alert.id} {f.symbol} {describe(f.alert.kind, f.alert.value, f.alert.event, state.lang)}"
            f" ({f.bar_date}, {observed_text(f)})"
            for f in claimed
        )
        try:
            await self.adapters[state.chat.platform].send_text(
                state.chat, t(state.lang, "alert_fired_more", n=len(claimed), items=items), format="plain"
            )
        except DeliveryError as exc:
            for f in claimed:
                await self.store.finish(f.id, delivered=False, error=str(exc))
            return 0
        for f in claimed:
            await self.store.finish(f.id, delivered=True, at=self.now())
        return len(claimed)

    async def _render(self, lang: str, f: Firing) -> tuple[str, Path | None]:
        data = self.market.data
        inst = data.resolve(f.symbol)
        bars = await data.abars(inst)
        if bars.last_date is not None and f.bar_date > bars.last_date:  # a live price in the session
            text = t(
                lang,
                "alert_fired_live",
                id=f.alert.id,
                name=inst.name,
                symbol=inst.symbol,
                condition=describe(f.alert.kind, f.alert.value, f.alert.event, lang),
                observed=observed_text(f),
                day=f.bar_date,
                prev=age_note(bars.last_date, self.now(), lang),
                source="+".join(p.name for p in data.quote_providers) or "live",
            )
            return text, await self._chart(bars, inst, f)
        close = float(bars.between(None, str(f.bar_date)).close[-1])
        text = t(
            lang,
            "alert_fired",
            id=f.alert.id,
            name=inst.name,
            symbol=inst.symbol,
            condition=describe(f.alert.kind, f.alert.value, f.alert.event, lang),
            close=num(close),
            day=age_note(f.bar_date, self.now(), lang),
            observed=observed_text(f),
            source="+".join(p.name for p in data.providers),
        )
        return text, await self._chart(bars, inst, f)

    async def _chart(self, bars: Bars, inst: Instrument, f: Firing) -> Path | None:
        try:
            from markets import charts
            from markets.wyckoff import analyze

            a = await asyncio.to_thread(analyze, bars, inst)
            chart: Path = await asyncio.to_thread(
                charts.candles, bars, self.market.chart_dir, name=inst.name, analysis=a
            )
        except Exception as exc:  # noqa: BLE001 — an alert without its chart is still the alert
            log.warning("alert chart for %s failed: %s", f.symbol, exc)
            return None
        return chart
