"""Trade approval cards over the fake Telegram Bot API with the real toolkit and paper broker: a
decided card keeps its readable summary and appends the decision with its time in the chat's zone;
the expiry is shown in that zone; a sell card that T+1 will reject says so, in the chat's language,
instead of showing the cash after the sale as if it filled."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE
from tests.bot.test_bot_markets_flow import buttons_of

ZONE = "America/New_York"


def _card(api, after: int = 0):
    return next((m for m in api.sent(ALICE)[after:] if buttons_of(m)), None)


def _tap(api, card, kind: str) -> None:
    button = next(b for b in buttons_of(card) if b["callback_data"].startswith(f"{kind}:"))
    api.push_callback(ALICE, card["message_id"], button["callback_data"], user_id=ALICE)


def _decided(api, message_id: int):
    m = api.messages[(ALICE, message_id)]
    return m if not buttons_of(m) else None


async def test_a_decided_card_keeps_its_summary_and_a_t1_sell_card_warns(harness):
    harness.script.add(
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        reply("Bought 100 shares (paper)."),
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "sell", "quantity": 100})]),
        reply("好的，不卖。"),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, f"/brief tz {ZONE}", user_id=ALICE)
    await api.wait_for(lambda: any(ZONE in t for t in api.texts(ALICE)), timeout=10)

    api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    card = await api.wait_for(lambda: _card(api), timeout=10)
    text = card["text"]
    headline = next(line for line in text.splitlines() if line.startswith("📈"))
    assert "BUY 100 × " in headline and "600519" in headline and "PAPER" in headline
    expiry = re.search(r"Expires (\d{4}-\d\d-\d\d \d\d:\d\d) America/New_York", text)
    assert expiry, text
    record = (await harness.app.store.pending_approvals())[0]
    assert record.expires_at is not None
    shown = datetime.strptime(expiry.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=ZoneInfo(ZONE))
    assert abs(shown - record.expires_at) < timedelta(minutes=1)  # the same instant, in the chat's zone
    assert "UTC" not in text

    _tap(api, card, "o")
    decided = await api.wait_for(lambda: _decided(api, card["message_id"]), timeout=10)
    final = decided["text"]
    assert headline.removeprefix("📈 ") in final  # the readable line survives the decision
    assert "Estimated amount ≈" in final
    when = re.search(r"Approved by .* · (\d\d:\d\d)$", final.strip())
    assert when, final
    now = datetime.now(UTC).astimezone(ZoneInfo(ZONE))
    assert when.group(1) in {(now - timedelta(minutes=m)).strftime("%H:%M") for m in range(3)}
    await api.wait_for(lambda: any("Bought 100 shares" in t for t in api.texts(ALICE)), timeout=10)

    # the same session: the shares cannot be sold before the next trading day
    api.push_text(ALICE, "/lang zh", user_id=ALICE)
    await api.wait_for(lambda: any("中文" in t for t in api.texts(ALICE)), timeout=10)
    seen = len(api.sent(ALICE))
    api.push_text(ALICE, "卖出 100 股茅台", user_id=ALICE)
    sell = await api.wait_for(lambda: _card(api, seen), timeout=10)
    text = sell["text"]
    assert "卖出 100 × " in text
    assert "⚠️ 将被拒绝——T+1" in text and "当前可卖 0" in text, text
    assert "交易后" not in text  # no cash after a sale that will not fill
    assert "不变：此订单将被拒绝" in text
    _tap(api, sell, "d")
    decided = await api.wait_for(lambda: _decided(api, sell["message_id"]), timeout=10)
    assert "⚠️ 将被拒绝——T+1" in decided["text"] and "已被" in decided["text"]
