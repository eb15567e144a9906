"""A button's callback data is read once (bot/cards.parse_callback) into a typed tap; forged or
stale data is answered as an invalid button, never as a failure."""

from __future__ import annotations

import pytest

from tests.bot.conftest import ALICE
from tests.bot.test_bot_questions_transport import ask, echo_answer, question_card
from tests.fakes.telegram_api import buttons_of


@pytest.mark.parametrize("forged", ["q²", "q٣", "x", "q0", "q9"])
async def test_a_forged_option_tap_is_answered_as_an_invalid_button(harness, forged):
    harness.script.add(ask(), echo_answer)
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen for me", user_id=ALICE)
    q = await question_card(api)
    turn_id = buttons_of(q)[0]["callback_data"].split(":", 1)[1]
    api.push_callback(ALICE, q["message_id"], f"{forged}:{turn_id}", user_id=ALICE)
    await api.wait_for(lambda: api.callback_answers)
    assert api.callback_answers[0].get("text") == "This button is no longer valid."
    assert not any("tap didn't go through" in text for text in api.texts(ALICE))
    # the question still waits: its real button still answers it
    api.push_callback(ALICE, q["message_id"], buttons_of(q)[1]["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: "You picked SOS." in api.texts(ALICE))
