"""A decided card stays readable: its trade line ("BUY 100 × 贵州茅台 (600519) · PAPER") is kept
and the decision appended, with the time in the chat's zone; the card's expiry is in that zone
too (the chat's /brief zone, else `[scheduler] timezone`)."""

from __future__ import annotations

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE
from tests.fakes.telegram_api import buttons_of

BUY = {"code": "600519", "side": "buy", "quantity": 100}


async def test_a_decided_trade_card_keeps_its_line_and_says_when_in_the_chats_zone(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "buy 100 600519", user_id=ALICE)
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None))
    assert "Asia/Shanghai (in " in card["text"] and " UTC" not in card["text"]  # expiry in the chat's zone
    line = next(ln for ln in card["text"].splitlines() if ln.startswith("📈"))
    once = next(b for b in buttons_of(card) if b["callback_data"].startswith("o:"))
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Bought." in t for t in api.texts(ALICE)))
    decided = await api.wait_for(
        lambda: next(
            (m for m in api.sent(ALICE) if m["message_id"] == card["message_id"] and not buttons_of(m)), None
        )
    )
    text = decided["text"]
    assert line in text and "BUY" in line.upper() and "PAPER" in line  # the readable line is kept
    assert "Approved" in text and "Asia/Shanghai" in text
    assert '"code"' not in text  # no raw JSON instead of the trade
