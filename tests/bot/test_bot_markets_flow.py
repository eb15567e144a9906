"""The investing conversation of issue 6 through Telegram (fake Bot API) with the real toolkit:
"analyze 600519" → chart + phase; "buy 100 shares" → approval → exactly one fill;
"how is my portfolio" → P&L as of the last bar."""

from __future__ import annotations

import asyncio
import json

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE


def buttons_of(msg):
    return [b for row in (msg.get("reply_markup") or {}).get("inline_keyboard", []) for b in row]


def last_tool_json(req) -> dict:
    assert req.messages[-1].role == "tool", [(m.role, m.text[:60]) for m in req.messages]
    return json.loads(req.messages[-1].tool_results[0].content)


async def test_analyze_buy_portfolio_over_telegram(harness):
    seen: dict = {}

    def after_analysis(req):
        data = last_tool_json(req)
        seen["analysis"] = data
        return reply(f"600519 is in phase {data['phase']['phase']} ({data['phase']['label']}).")

    def after_fill(req):
        seen["fill"] = last_tool_json(req)
        return reply("Bought 100 shares of 600519 (paper).")

    def after_portfolio(req):
        seen["portfolio"] = last_tool_json(req)
        return reply("Your portfolio is up to date.")

    harness.script.add(
        reply(tool_calls=[("analyze_stock", {"code": "600519"})]),
        after_analysis,
        reply(tool_calls=[("execute_trade", {"code": "600519", "side": "buy", "quantity": 100})]),
        after_fill,
        reply(tool_calls=[("portfolio", {"mode": "view"})]),
        after_portfolio,
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "analyze 600519", user_id=ALICE)
    await api.wait_for(lambda: any("is in phase" in t for t in api.texts(ALICE)), timeout=20)
    assert api.calls_to("sendPhoto"), "the chart is delivered as a photo"
    assert "2025-09-03" in json.dumps(seen["analysis"], ensure_ascii=False)

    api.push_text(ALICE, "buy 100 shares", user_id=ALICE)
    card = await api.wait_for(lambda: next((m for m in api.sent(ALICE) if buttons_of(m)), None), timeout=10)
    assert "execute_trade" in card["text"]
    once = next(b for b in buttons_of(card) if b["callback_data"].startswith("o:"))
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)  # double tap
    await api.wait_for(lambda: any("Bought 100 shares" in t for t in api.texts(ALICE)), timeout=10)
    await asyncio.sleep(0.2)

    api.push_text(ALICE, "how is my portfolio", user_id=ALICE)
    await api.wait_for(lambda: any("portfolio is up to date" in t for t in api.texts(ALICE)), timeout=10)
    pf = json.dumps(seen["portfolio"], ensure_ascii=False)
    assert "600519" in pf and "2025-09-03" in pf
    positions = seen["portfolio"]["paper"]["positions"]  # a paper trade: the paper book
    held = [p for p in positions if "600519" in p.get("symbol", "")]
    assert len(held) == 1 and held[0]["quantity"] == 100  # exactly one fill despite the double tap
