"""Alert delivery's rules on a real SQLite store and the live bar store: at most `per_chat_hour`
messages an hour per chat (the rest in one summary line), in the chat's language; a failed send
goes back to pending and is sent later, once; a chat on a platform this process does not serve
is left alone."""

from __future__ import annotations

from datetime import UTC, date, datetime

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
    delivery = AlertDelivery(store, svc, Chats([zh]), {"telegram": tg}, per_chat_hour=3, now=lambda: NOW)
    assert await delivery.deliver_pending() == 2 + 3  # 2 sent + 3 in the summary; 1 failed
    assert all(t.startswith("🔔 提醒 #") for t in tg.texts[:2]) and "收盘价高于" in tg.texts[0]
    assert "2026-12-04（2 天前）" in tg.texts[0]
    assert tg.texts[2].startswith("🔔 另有 3 条提醒触发")
    assert len(tg.images) == 2  # each single alert with its chart

    # an hour's budget is spent: the one that failed waits (summarised, not dropped) in the next run
    assert await delivery.deliver_pending() == 1
    assert tg.texts[-1].startswith("🔔 另有 1 条提醒触发")
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
