"""End to end: a transient Bot API failure on the answer or on the approval card
does not fail the turn; a send that fails for good is reported in plain words."""

from __future__ import annotations

import asyncio

from agent.providers.scripted import ScriptedClient, reply
from bot.i18n import t
from tests.bot.conftest import ALICE, Harness
from tests.fakes.clock import FakeClock
from tests.fakes.telegram_api import FakeBotAPI, _err, button_of


def bad_gateway() -> tuple[int, dict]:
    return _err(502, "Bad Gateway")


class QuickHarness(Harness):
    """The adapter's backoff waits on an injected sleep."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.clock = FakeClock()

    def telegram_options(self) -> dict:
        return {**super().telegram_options(), "sleep": self.clock.sleep}


async def _started(tmp_path, *turns) -> QuickHarness:
    h = QuickHarness(tmp_path / "home", FakeBotAPI(), ScriptedClient())
    h.script.add(*turns)
    await h.start()
    return h


def _has_text(m: dict, text: str) -> bool:
    return text in m.get("text", "")


async def test_one_502_on_the_answer_does_not_fail_the_turn(tmp_path):
    h = await _started(tmp_path, reply("The answer is 42."))
    try:
        api = h.api
        api.fail_when("sendMessage", bad_gateway(), match=lambda p: "42" in p.get("text", ""))
        api.push_text(ALICE, "question", user_id=ALICE)
        await api.wait_for(lambda: any("The answer is 42." in t for t in api.texts(ALICE)))
        await asyncio.sleep(0.1)  # absence: time for a duplicate answer or an error message
        texts = api.texts(ALICE)
        assert sum("The answer is 42." in t for t in texts) == 1
        assert not any("went wrong" in t for t in texts), texts
    finally:
        await h.stop()


async def test_one_502_on_the_approval_card_still_sends_it(tmp_path):
    h = await _started(
        tmp_path,
        reply(tool_calls=[("write_file", {"path": "c.txt", "content": "card"})]),
        reply("Written."),
    )
    try:
        api = h.api
        api.fail_when("sendMessage", bad_gateway(), match=lambda p: bool(p.get("reply_markup")))
        api.push_text(ALICE, "write c.txt", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        once = button_of(card, "o")
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: any("Written." in t for t in api.texts(ALICE)))
        assert (h.home / "workspace" / "c.txt").read_text() == "card"
        assert not any("went wrong" in t for t in api.texts(ALICE))
    finally:
        await h.stop()


async def test_an_answer_that_cannot_be_delivered_is_reported_in_plain_words(tmp_path):
    h = await _started(tmp_path, reply("Unlucky answer."), reply("Next answer."))
    try:
        api = h.api
        api.fail_when("sendMessage", bad_gateway(), match=lambda p: "Unlucky" in p.get("text", ""), times=50)
        api.push_text(ALICE, "question", user_id=ALICE)
        await api.wait_for(lambda: any("could not deliver" in t.lower() for t in api.texts(ALICE)))
        assert not any("went wrong" in t for t in api.texts(ALICE))
        # the chat goes on
        api.push_text(ALICE, "again", user_id=ALICE)
        await api.wait_for(lambda: any("Next answer." in t for t in api.texts(ALICE)))
    finally:
        await h.stop()


async def test_a_button_whose_answer_and_handler_fail_asks_to_tap_again(tmp_path):
    """Telegram: answerCallbackQuery fails and the handling fails too: the user is asked in the
    chat to tap again, and the next tap decides it."""
    h = await _started(
        tmp_path,
        reply(tool_calls=[("write_file", {"path": "t.txt", "content": "tapped"})]),
        reply("Written."),
    )
    try:
        api = h.api
        api.push_text(ALICE, "write t.txt", user_id=ALICE)
        card = await api.wait_for_card(ALICE)
        once = button_of(card, "o")
        assert h.app is not None
        runtime = h.app.runtime
        real = runtime.decide

        async def broken(*a, **kw):
            runtime.decide = real  # once
            raise RuntimeError("the handler failed")

        runtime.decide = broken
        api.fail("answerCallbackQuery", bad_gateway(), times=5)
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        again = t("en", "button_failed")
        await api.wait_for(lambda: any(again in x for x in api.texts(ALICE)))
        assert not (h.home / "workspace" / "t.txt").exists()
        api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: any("Written." in x for x in api.texts(ALICE)))
        assert (h.home / "workspace" / "t.txt").read_text() == "tapped"
    finally:
        await h.stop()
