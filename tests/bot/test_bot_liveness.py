"""The chat is never silent while the bot works. Typing starts as soon as a turn
starts and is refreshed on the platform's rhythm through long model waits; one progress message
per turn, edited in place (⏳ → ✓/✗), also across an approval; a rejected order shows ✗.

Time is injected: the typing loop sleeps on a `FakeClock` the test advances; we count typing actions
in the fake's log at those points (never timings)."""

from __future__ import annotations

import asyncio
import json

from adapters.base import ChatAdapter, ChatRef, SentMessage
from agent import events as ev
from agent.providers.scripted import ScriptedClient, reply
from bot.delivery import ProgressBoard, TurnView
from tests.bot.conftest import ALICE, Harness
from tests.fakes.clock import FakeClock
from tests.fakes.telegram_api import FakeBotAPI, button_of, buttons_of


class HeldModel:
    """A model that answers only once released (a long wait or a stall before the first token)."""

    def __init__(self, script: ScriptedClient) -> None:
        self.script, self.info, self.requests = script, script.info, script.requests
        self.release = asyncio.Event()

    async def stream(self, request):
        await self.release.wait()
        async for chunk in self.script.stream(request):
            yield chunk

    async def aclose(self) -> None:
        pass


class HeldHarness(Harness):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.model = HeldModel(self.script)

    def model_for(self, model_id):
        return self.model


async def _settle() -> None:
    """Time for an edit or a typing action still on its way (before a step whose order matters,
    or before asserting that nothing more comes)."""
    await asyncio.sleep(0.05)


async def test_telegram_typing_from_the_start_and_through_a_long_model_wait(tmp_path):
    h = HeldHarness(tmp_path / "home", FakeBotAPI(), ScriptedClient())
    h.script.add(reply("Finally, the answer."))
    ticker = FakeClock(auto=False, poll=0.002)
    await h.start()
    try:
        h.app.gateway.output.typing_sleep = ticker.sleep
        api = h.api
        api.push_text(ALICE, "think hard", user_id=ALICE)
        await api.wait_for(lambda: len(api.chat_actions) == 1)  # before any model output
        assert api.texts(ALICE) == []
        await ticker.advance_when_asleep(4)  # Telegram's indicator lasts ~5 s: refreshed every 4
        await api.wait_for(lambda: len(api.chat_actions) == 2)
        await ticker.advance_when_asleep(4)
        await api.wait_for(lambda: len(api.chat_actions) == 3)
        assert all(a["action"] == "typing" for a in api.chat_actions)
        h.model.release.set()
        await api.wait_for(lambda: any("Finally" in t for t in api.texts(ALICE)))
        await _settle()
        seen = len(api.chat_actions)
        await ticker.advance_when_asleep(20)
        await _settle()
        assert len(api.chat_actions) == seen  # the turn is over: no more typing
    finally:
        await h.stop()


async def test_an_approved_action_makes_one_progress_message_a_card_and_the_answer(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "o.txt", "content": "order"})]),
        reply("Done: written."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write o.txt", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    once = button_of(card, "o")
    await _settle()
    api.push_callback(ALICE, card["message_id"], once["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Done: written." in t for t in api.texts(ALICE)))
    done = ("✓ write_file", "⏳", "⏸")
    await api.wait_for(
        lambda: any(done[0] in t and done[1] not in t and done[2] not in t for t in api.texts(ALICE))
    )
    progress = [m for m in api.sent(ALICE) if "write_file" in m.get("text", "") and not buttons_of(m)]
    progress = [m for m in progress if m["message_id"] != card["message_id"]]
    assert len(progress) == 1, api.texts(ALICE)  # one progress message, edited in place
    assert "✓ write_file" in progress[0]["text"] and "⏳" not in progress[0]["text"]
    assert "⏸" not in progress[0]["text"]
    assert len(api.sent(ALICE)) == 3, api.texts(ALICE)  # progress, card, answer


async def test_a_denied_action_shows_a_cross_not_an_hourglass(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "d.txt", "content": "x"})]),
        reply("Not written."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write d.txt", user_id=ALICE)
    card = await api.wait_for_card(ALICE)
    deny = button_of(card, "d")
    await _settle()
    api.push_callback(ALICE, card["message_id"], deny["callback_data"], user_id=ALICE)
    await api.wait_for(lambda: any("Not written." in t for t in api.texts(ALICE)))
    await api.wait_for(lambda: any(t.startswith("✗ write_file") for t in api.texts(ALICE)))  # the last edit
    lines = [m["text"] for m in api.sent(ALICE) if m["text"].startswith(("⏳", "✓", "✗", "⏸"))]
    assert len(lines) == 1 and lines[0].startswith("✗ write_file"), api.texts(ALICE)


# ---- TurnView on a recording adapter (no network) ---------------------------------------------
class Recording(ChatAdapter):
    platform = "test"

    def __init__(self, typing_interval: float = 4.0) -> None:
        self.typing_interval = typing_interval
        self.sent: dict[str, str] = {}
        self.typing = 0

    async def start(self, handler):  # pragma: no cover
        pass

    async def stop(self):  # pragma: no cover
        pass

    async def send_text(self, chat, text, *, buttons=None, reply_to=None, format="markdown"):
        mid = str(len(self.sent) + 1)
        self.sent[mid] = text
        return SentMessage(chat, mid)

    async def edit_text(self, msg, text, *, buttons=None, format="markdown"):
        self.sent[msg.message_id] = text

    async def send_typing(self, chat):
        self.typing += 1

    async def send_image(self, chat, path, caption=""):  # pragma: no cover
        raise NotImplementedError

    async def set_commands(self, commands, *, translations=None):  # pragma: no cover
        pass


CHAT = ChatRef("test", "1")


def _view(adapter, board=None, sleep=None) -> TurnView:
    async def nothing(_e):
        pass

    return TurnView(adapter, CHAT, "en", on_approval=nothing, on_question=nothing,
                    board=board or ProgressBoard(), sleep=sleep or FakeClock(auto=False, poll=0.002).sleep)  # fmt: skip


async def test_a_rejected_order_is_shown_as_a_cross():
    ad = Recording()
    view = _view(ad)
    rejected = json.dumps({"status": "rejected", "reason": "T+1: bought today"})
    for event in (
        ev.ToolStart("c1", "execute_trade", {}),
        ev.ToolResult("c1", "execute_trade", rejected, 0.2),
        ev.Done("ok", "t1"),
    ):
        await view.render(event)
    await view.close()
    (progress,) = ad.sent.values()
    assert progress.startswith("✗ execute_trade") and "rejected" in progress


async def test_cancel_leaves_no_hourglass():
    ad = Recording()
    view = _view(ad)
    for event in (ev.ToolStart("c1", "backtest", {}), ev.Done("", "t1", status="cancelled")):
        await view.render(event)
    await view.close()
    (progress,) = ad.sent.values()
    assert "⏳" not in progress and progress.startswith("✗ backtest")


async def test_discord_typing_is_refreshed_on_its_own_rhythm():
    ad = Recording(typing_interval=8.0)
    ticker = FakeClock(auto=False, poll=0.002)
    view = _view(ad, sleep=ticker.sleep)
    view.start()
    for _ in range(50):
        if ad.typing == 1:
            break
        await asyncio.sleep(0.002)
    await ticker.advance_when_asleep(4)
    await _settle()
    assert ad.typing == 1  # Discord's indicator lasts ~10 s: no refresh yet
    await ticker.advance_when_asleep(4)
    for _ in range(50):
        if ad.typing == 2:
            break
        await asyncio.sleep(0.002)
    assert ad.typing == 2
    await view.close()


async def test_a_question_leaves_no_hourglass_and_no_second_progress_message(harness):
    harness.script.add(
        reply(tool_calls=[("ask_user", {"question": "Which phase?", "options": ["Spring", "SOS"]})]),
        reply("Screening for SOS."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "screen", user_id=ALICE)
    await api.wait_for(lambda: any("Which phase?" in t for t in api.texts(ALICE)))
    await _settle()
    api.push_text(ALICE, "2", user_id=ALICE)
    await api.wait_for(lambda: any("Screening for SOS." in t for t in api.texts(ALICE)))
    await _settle()
    lines = [t for t in api.texts(ALICE) if t.startswith(("⏳", "✓", "✗", "⏸"))]
    assert len(lines) <= 1, api.texts(ALICE)
    assert not any(t.startswith(("⏳", "⏸")) for t in lines), lines


async def test_a_moved_on_approval_is_settled_as_not_run(harness):
    harness.script.add(
        reply(tool_calls=[("write_file", {"path": "m.txt", "content": "x"})]),
        reply("Something else then."),
    )
    await harness.start()
    api = harness.api
    api.push_text(ALICE, "write m.txt", user_id=ALICE)
    await api.wait_for(lambda: any(buttons_of(m) for m in api.sent(ALICE)))
    await _settle()
    api.push_text(ALICE, "never mind, what is 600519?", user_id=ALICE)
    await api.wait_for(lambda: any("Something else then." in t for t in api.texts(ALICE)))
    await _settle()
    lines = [t for t in api.texts(ALICE) if t.startswith(("⏳", "✓", "✗", "⏸"))]
    assert lines and all(t.startswith("✗ write_file") for t in lines), api.texts(ALICE)
