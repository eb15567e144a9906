"""In a group, a question (ask_user) asked in one member's turn is answered
only by that member or an admin. Another member's message — addressed to the bot, a reply to the
question, a tap — neither answers nor closes it; it waits and is taken up once the question is
closed. Fake Telegram Bot API → adapter → gateway → runtime (scripted model) → real SQLite."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import reply
from bot.i18n import t
from tests.bot.conftest import ADMIN, ALICE, BOB
from tests.bot.test_bot_approval_integrity import GROUP, MENTION, answer_to, tap
from tests.bot.test_bot_questions_transport import answer_seen, ask, echo_answer
from tests.fakes.telegram_api import FakeBotAPI, buttons_of


async def group_question(api: FakeBotAPI) -> dict:
    return await api.wait_for(
        lambda: next((m for m in api.sent(GROUP) if "Which phase" in m.get("text", "")), None)
    )


def still_open(api: FakeBotAPI, q: dict) -> bool:
    return bool(buttons_of(api.messages[(GROUP, q["message_id"])]))


def seen_by_model(req) -> str:
    return "\n".join(m.text for m in req.messages if m.role == "user")


async def test_another_members_message_neither_answers_nor_closes_the_question(harness):
    harness.script.add(ask(), echo_answer, reply("Noted, Bob."))
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} screen for me", user_id=ALICE)
    q = await group_question(api)

    # Bob (allowed, not an admin, not the requester): a mention with an option, a new request,
    # a reply to the question, plain chatter, and a tap on an option
    api.push_text(GROUP, f"{MENTION} 3", user_id=BOB)
    api.push_text(GROUP, f"{MENTION} what is the market doing", user_id=BOB)
    api.push_text(GROUP, "LPS", user_id=BOB, reply_to=q["message_id"])
    api.push_text(GROUP, "1", user_id=BOB)
    press = tap(api, GROUP, q["message_id"], buttons_of(q)[0]["callback_data"], user_id=BOB)
    await api.wait_for(lambda: answer_to(api, press))
    await asyncio.sleep(0.3)  # absence: time for a member's message to close it or start a turn
    assert still_open(api, q), "another member's message closed the question"
    assert len(harness.script.requests) == 1, "another member's message started a turn"
    assert t("en", "approval_not_allowed") in answer_to(api, press).get("text", "")
    assert api.texts(GROUP).count(t("en", "held_until_answered")) == 1  # Bob hears once why he waits

    # the requester answers; then what Bob addressed to the bot is taken up
    api.push_text(GROUP, "2", user_id=ALICE)
    await api.wait_for(lambda: "You picked SOS." in api.texts(GROUP))
    assert answer_seen(harness.script.requests[1]) == {"status": "answered", "answer": "SOS"}
    await api.wait_for(lambda: len(harness.script.requests) >= 3)
    assert "what is the market doing" in seen_by_model(harness.script.requests[2])


async def test_an_admin_may_answer_a_members_question(harness):
    harness.script.add(ask(), echo_answer)
    await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} screen for me", user_id=ALICE)
    q = await group_question(api)
    api.push_text(GROUP, "2", user_id=ADMIN)
    await api.wait_for(lambda: "You picked SOS." in api.texts(GROUP))
    assert not still_open(api, q)


async def test_a_members_waiting_message_is_taken_up_when_the_question_expires(harness):
    from datetime import UTC, datetime, timedelta

    harness.script.add(ask(), reply("Nobody answered."), reply("Noted, Bob."))
    app = await harness.start()
    api = harness.api
    api.push_text(GROUP, f"{MENTION} screen for me", user_id=ALICE)
    q = await group_question(api)
    api.push_text(GROUP, f"{MENTION} what is the market doing", user_id=BOB)
    await api.wait_for(lambda: t("en", "held_until_answered") in api.texts(GROUP))  # held, not a turn
    assert still_open(api, q) and len(harness.script.requests) == 1
    assert await app.gateway.waiting.expire_due(now=datetime.now(UTC) + timedelta(days=2)) == 1
    await api.wait_for(lambda: "Noted, Bob." in api.texts(GROUP))
    assert "what is the market doing" in seen_by_model(harness.script.requests[2])
