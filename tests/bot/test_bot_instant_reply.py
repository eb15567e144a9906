"""An instant reply is handled: a message that reaches the bot between
the delivery of a card or question and its turn's suspension is read against it — as the answer,
the decision, or a new request that closes it — within seconds, never parked until it expires.

The window is made exact through the fake Telegram Bot API: the card's (or question's)
sendMessage is answered only after the user's reply has been fetched and handled by the bot, so
the reply always lands while the turn that sent it still runs.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from agent.providers.scripted import reply
from tests.bot.conftest import ALICE
from tests.bot.test_bot_consent_flow import BUY, said, trades
from tests.bot.test_bot_questions_transport import ask, echo_answer

WITHIN = 5.0  # seconds: "within seconds", far below the 30 min expiry


def _received(home, update_id: int) -> bool:
    con = sqlite3.connect(home / "tapebot.db")
    try:
        return (
            con.execute("SELECT 1 FROM processed_updates WHERE update_id = ?", (str(update_id),)).fetchone()
            is not None
        )
    finally:
        con.close()


def reply_before_the_send_returns(harness, marker: str, *texts: str) -> list[int]:
    """When the bot sends the message containing `marker`, the user answers at once: each of
    `texts` is pushed, fetched and handled before the bot's sendMessage returns."""
    api, pushed = harness.api, []

    async def user_answers(_result) -> None:
        for text in texts:
            uid = api.push_text(ALICE, text, user_id=ALICE)
            pushed.append(uid)
            await api.wait_for(lambda u=uid: _received(harness.home, u), timeout=WITHIN)
        await asyncio.sleep(0.2)  # the router's last steps after the record (the lane takes it)

    api.delay_reply("sendMessage", user_answers, match=lambda p: marker in str(p.get("text", "")))
    return pushed


async def test_instant_reply_yes_at_a_trade_card_fills_it_once(harness):
    """Instant reply: "yes" sent the moment the card arrives approves it (it used to wait, held,
    until the card expired)."""
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought."))
    await harness.start()
    reply_before_the_send_returns(harness, "🔐", "yes")
    harness.api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    await said(harness.api, ALICE, "Bought.", timeout=WITHIN)
    assert [(r[0], r[1], r[2]) for r in trades(harness.home)] == [("600519", "buy", 100)]


async def test_instant_reply_no_at_a_card_denies_it(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Not bought."))
    await harness.start()
    reply_before_the_send_returns(harness, "🔐", "no")
    harness.api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    await said(harness.api, ALICE, "Not bought.", timeout=WITHIN)
    assert trades(harness.home) == []


async def test_instant_reply_question_word_at_a_card_gets_the_hint_and_the_card_stays(harness):
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought."))
    await harness.start()
    reply_before_the_send_returns(harness, "🔐", "ok?")
    harness.api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    from bot.i18n import t

    await said(harness.api, ALICE, t("en", "approval_question"), timeout=WITHIN)
    assert trades(harness.home) == []
    harness.api.push_text(ALICE, "yes", user_id=ALICE)
    await said(harness.api, ALICE, "Bought.", timeout=WITHIN)
    assert len(trades(harness.home)) == 1


async def test_instant_reply_2_answers_a_question(harness):
    """Instant reply: the answer "2" sent within the question's own delivery is its answer."""
    harness.script.add(ask(), echo_answer)
    await harness.start()
    reply_before_the_send_returns(harness, "Which phase", "2")
    harness.api.push_text(ALICE, "screen for me", user_id=ALICE)
    await said(harness.api, ALICE, "You picked SOS.", timeout=WITHIN)


async def test_instant_reply_a_new_request_closes_the_card_and_runs(harness):
    """A longer message on its way while the card is delivered is a new request: the card closes
    unrun and the message gets its answer."""
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Your biggest position is cash."))
    await harness.start()
    reply_before_the_send_returns(harness, "🔐", "what is my biggest position right now")
    harness.api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    await said(harness.api, ALICE, "Your biggest position is cash.", timeout=WITHIN)
    assert trades(harness.home) == []
    req = harness.script.requests[-1]
    assert sum("biggest position" in (m.text or "") for m in req.messages if m.role == "user") == 1


@pytest.mark.parametrize("second", ["yes", "2"])
async def test_instant_reply_two_messages_in_the_window_are_each_read_once(harness, second):
    """Two quick messages: the first decides the card, the second joins the resumed turn as the
    user's next words — in the model's input once, and the order fills once."""
    harness.script.add(reply(tool_calls=[("execute_trade", BUY)]), reply("Bought."), reply("Next."))
    await harness.start()
    reply_before_the_send_returns(harness, "🔐", "yes", f"and then tell me {second} things")
    harness.api.push_text(ALICE, "buy 100 moutai", user_id=ALICE)
    await said(harness.api, ALICE, "Bought.", timeout=WITHIN)
    await harness.app.gateway.lanes.of(await _state(harness)).wait_idle()
    assert len(trades(harness.home)) == 1
    last = harness.script.requests[-1]
    seen = [m.text for m in last.messages if m.role == "user" and "tell me" in (m.text or "")]
    assert seen == [f"and then tell me {second} things"]


async def _state(harness):
    return await harness.app.gateway.chats.by_key(f"telegram:{ALICE}")
