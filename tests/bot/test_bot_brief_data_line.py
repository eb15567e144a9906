"""The brief opens with the market data's date and age, written by the product (not the model):
through the fake Telegram with live bars to 2026-12-04 — 2 days old on Sunday 2026-12-06 is the
plain line; 6 days old on Thursday 2026-12-10 says these are not today's prices; in Chinese too."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime

from agent.providers.scripted import ScriptedClient, reply
from tests.bot.conftest import ALICE, Harness
from tests.fakes.market_libs import FakeAkshare
from tests.fakes.telegram_api import FakeBotAPI


async def test_the_brief_states_the_data_date_and_age_before_the_model_speaks(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "akshare", FakeAkshare(end=date(2026, 12, 4)))
    api = FakeBotAPI()
    script = ScriptedClient()
    script.add(reply("hello"), reply("Brief one."), reply("简报二。"))
    h = Harness(tmp_path / "home", api, script, extra_env={"TAPEBOT_MARKETS__PROVIDER": "akshare"})
    try:
        app = await h.start()
        assert app.market is not None
        app.market.data.bars("600519")  # a stock in the store: A-shares are as of 2026-12-04
        api.push_text(ALICE, "hi", user_id=ALICE)
        await api.wait_for(lambda: "hello" in api.texts(ALICE), timeout=20)
        key = f"telegram:{ALICE}"

        app.market.clock = lambda: datetime(2026, 12, 6, 0, 30, tzinfo=UTC)
        await app.gateway.briefs.deliver(key, "Morning brief")
        brief = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if "Brief one." in t), None), 20)
        texts = api.texts(ALICE)
        line = texts[texts.index(brief) - 1]
        assert line.startswith("📅 Market data as of A-shares 2026-12-04 (2 days old)") and line.endswith(".")

        app.market.clock = lambda: datetime(2026, 12, 10, 0, 30, tzinfo=UTC)
        api.push_text(ALICE, "/lang zh", user_id=ALICE)
        await api.wait_for(lambda: any("中文" in t for t in api.texts(ALICE)), timeout=10)
        await app.gateway.briefs.deliver(key, "Morning brief")
        brief = await api.wait_for(lambda: next((t for t in api.texts(ALICE) if "简报二。" in t), None), 20)
        texts = api.texts(ALICE)
        line = texts[texts.index(brief) - 1]
        assert line.startswith("📅 行情数据截至 A股 2026-12-04（6 天前）") and line.endswith(
            "不是今天的价格。"
        )
    finally:
        await h.stop()
