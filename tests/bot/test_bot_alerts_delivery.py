"""Alert delivery's rules on a real SQLite store and the live bar store: at most `per_chat_hour`
firings an hour per chat (the last message a summary of the rest; beyond that they wait for the
hour's window), in the chat's language; a failed send goes back to pending and is sent later,
once; a chat on a platform this process does not serve is left alone; a live-price firing says
it was live, with the daily bars' date."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from adapters.base import ChatRef, DeliveryError
from bot.alert_delivery import AlertDelivery
from bot.chats import ChatState
from markets.alerts import AlertSpec, AlertStore, evaluate_alerts
from markets.data import MarketData
from markets.providers.bundled import BundledProvider
from markets.providers.network import AkshareProvider
from markets.providers.stored import StoredProvider
from markets.refresh import refresh_market
from markets.services import MarketServices
from markets.store import BarStore
from memory.db import Database
from tests.fakes.market_libs import FakeAkshare

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


class FakeChatSender:
    """A chat platform's sending side, recording what reached the chat (or failing on demand)."""

    def __init__(self):
        self.texts: list[str] = []
        self.images: list[str] = []
        self.fail = 0

    async def send_text(self, chat, text, format="plain"):
        if self.fail:
            self.fail -= 1
            raise DeliveryError("502 Bad Gateway")
        self.texts.append(text)

    async def send_image(self, chat, path, caption=""):
        self.images.append(str(path))


class Chats:
    def __init__(self, states):
        self.states = {s.key: s for s in states}

    async def by_key(self, key):
        return self.states.get(key)


@pytest.fixture
async def world(tmp_path):
    ak = FakeAkshare(end=date(2026, 12, 3))
    md = MarketData(
        [
            StoredProvider(AkshareProvider(module=ak), BarStore(tmp_path / "bars"), clock=lambda: NOW),
            BundledProvider(),
        ]
    )
    async with Database(f"sqlite+aiosqlite:///{tmp_path / 'tapebot.db'}") as db:
        svc = MarketServices(
            data=md, session_factory=db.sessionmaker, results_dir=tmp_path, clock=lambda: NOW
        )
        yield ak, md, svc, AlertStore(db.sessionmaker)


async def test_rate_limit_summary_language_and_retry(world):
    ak, md, svc, store = world
    for code in ("600519", "000001", "300750"):
        md.bars(code)
    zh = ChatState("telegram:1", ChatRef("telegram", "1"), "s1", lang="zh")
    for code in ("600519", "000001", "300750"):
        for level in (1, 2):  # six alerts that all fire on the next bar
            await store.create("u1", zh.key, AlertSpec("close_above", level, code), "cn", date(2026, 12, 3))
    await store.create("u2", "discord:9", AlertSpec("close_above", 1, "600519"), "cn", date(2026, 12, 3))
    ak.end = date(2026, 12, 4)
    refresh_market(md, "cn")
    assert len(await evaluate_alerts(store, md, ["cn"])) == 7

    tg = FakeChatSender()
    tg.fail = 1  # the first send fails outright: that firing stays pending
    clock = [NOW]
    delivery = AlertDelivery(store, svc, Chats([zh]), {"telegram": tg}, per_chat_hour=3, now=lambda: clock[0])
    assert await delivery.deliver_pending() == 1 + 4  # 1 sent + 4 in the summary; 1 failed
    assert tg.texts[0].startswith("🔔 提醒 #") and "收盘价高于" in tg.texts[0]
    assert "2026-12-04（2 天前）" in tg.texts[0]
    assert tg.texts[1].startswith("🔔 另有 4 条提醒触发") and len(tg.texts) == 2
    assert len(tg.images) == 1  # a single alert comes with its chart

    # the hour's budget is spent: the one that failed waits (not dropped, not a message a minute)
    for minutes in (1, 30, 59):
        clock[0] = NOW + timedelta(minutes=minutes)
        assert await delivery.deliver_pending() == 0
    assert len(tg.texts) == 2
    clock[0] = NOW + timedelta(minutes=61)
    assert await delivery.deliver_pending() == 1
    assert tg.texts[-1].startswith("🔔 提醒 #") and len(tg.texts) == 3
    assert await delivery.deliver_pending() == 0  # nothing twice
    left = await store.pending()
    assert [f.alert.chat_key for f in left] == ["discord:9"]  # not this process's platform: left alone


async def test_a_firing_whose_bars_are_gone_is_still_delivered_once(world, tmp_path):
    _ak, md, svc, store = world
    md.bars("600519")
    en = ChatState("telegram:2", ChatRef("telegram", "2"), "s2", lang="en")
    await store.create("u1", en.key, AlertSpec("close_above", 1, "600519"), "cn", date(2026, 12, 2))
    assert len(await evaluate_alerts(store, md, ["cn"])) == 1
    svc.data = MarketData([])  # the data cannot render it any more (no provider has the symbol)
    tg = FakeChatSender()
    delivery = AlertDelivery(store, svc, Chats([en]), {"telegram": tg}, now=lambda: NOW)
    assert await delivery.deliver_pending() == 1 and await delivery.deliver_pending() == 0
    assert tg.texts == ["🔔 Alert #1: 600519 — close above 1 (2026-12-03, " + tg.texts[0].split(", ", 1)[1]]
    assert tg.images == []


async def test_a_live_firing_says_live_with_the_daily_bars_date_and_its_chart(world):
    _ak, md, svc, store = world
    md.bars("600519")  # stored daily bars end 2026-12-03
    en = ChatState("telegram:3", ChatRef("telegram", "3"), "s3", lang="en")
    zh = ChatState("telegram:4", ChatRef("telegram", "4"), "s4", lang="zh")
    for chat in (en, zh):
        a = await store.create(
            "u1", chat.key, AlertSpec("price_below", 1e6, "600519"), "cn", date(2026, 12, 3)
        )
        await store.record(a, "600519", date(2026, 12, 4), 1234.5)  # as the intraday poll records it
    tg = FakeChatSender()
    delivery = AlertDelivery(store, svc, Chats([en, zh]), {"telegram": tg}, now=lambda: NOW)
    assert await delivery.deliver_pending() == 2
    assert tg.texts[0] == (
        "🔔 Alert #1: 贵州茅台 600519 — price trades below 1000000\nLive in the 2026-12-04 session: 1234.5. "
        "Daily bars to 2026-12-03 (3 days old).\nlive"
    )
    assert tg.texts[1].startswith(
        "🔔 提醒 #2：贵州茅台 600519 — 价格低于 1000000\n2026-12-04 盘中实时：1234.5。"
    )
    assert len(tg.images) == 2
