"""A sell card warns when the broker will refuse it (T+1, lots, holdings) instead of showing the
cash after the sale as if it would fill — checked as placing the order would, without placing it."""

from __future__ import annotations

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE
from tests.fakes.telegram_api import buttons_of

BUY = {"code": "600519", "side": "buy", "quantity": 100}
SELL = {"code": "600519", "side": "sell", "quantity": 100}


def _cards(api):
    return [m for m in api.sent(ALICE) if buttons_of(m)]


async def test_a_sell_the_same_session_as_its_buy_warns_of_t_plus_1(harness):
    harness.script.add(
        reply(tool_calls=[("execute_trade", BUY)]),
        reply("Bought."),
        reply(tool_calls=[("execute_trade", SELL)]),
        reply("Tried."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "buy 100 600519", user_id=ALICE)
    buy = await api.wait_for(lambda: _cards(api) and _cards(api)[0])
    assert "will not fill" not in buy["text"] and "Cash" in buy["text"]
    once = next(b for b in buttons_of(buy) if b["callback_data"].startswith("o:"))
    api.push_callback(ALICE, buy["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Bought." in t for t in api.texts(ALICE)))

    api.push_text(ALICE, "sell them", user_id=ALICE)
    sell = await api.wait_for(
        lambda: next((m for m in _cards(api) if m is not buy and m["message_id"] != buy["message_id"]), None)
    )
    assert "⚠️ As things stand this order will not fill: T+1" in sell["text"]
    assert "after" not in sell["text"].split("will not fill")[0].splitlines()[-1]  # no cash-after line


async def test_selling_what_is_not_held_warns_too(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", SELL)]), reply("Tried."))
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "sell 100 600519", user_id=ALICE)
    card = await api.wait_for(lambda: _cards(api) and _cards(api)[0])
    assert "will not fill: insufficient holding" in card["text"]
