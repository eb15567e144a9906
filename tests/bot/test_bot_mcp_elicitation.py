"""An MCP server's question during a tool call becomes a question in the chat (MCP elicitation):
a real MCP server subprocess asks for a form in the middle of `toy__survey`; the person whose turn
made the call answers field by field with taps and a typed number, through the fake Telegram Bot
API, and the server gets the typed answers. "cancel" declines; a one-shot with nobody present
declines without asking."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.elicit import LiveQuestions, ask_form
from agent.providers.scripted import reply
from agent.tools.registry import Deps, ToolContext
from tests.bot.conftest import ALICE, BOB, Harness
from tests.fakes.telegram_api import FakeBotAPI, buttons_of

TOY = str(Path(__file__).resolve().parents[1] / "mcp" / "mcp_toy_server.py")


def _harness(tmp_path) -> Harness:
    from agent.providers.scripted import ScriptedClient

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "[[mcp_servers]]\n"
        'name = "toy"\n'
        f"command = {json.dumps([sys.executable, TOY, 'normal'])}\n"
        "timeout = 30\n"
        "tool_overrides = { survey = false }\n"
    )
    return Harness(home, FakeBotAPI(), ScriptedClient())


async def _question(api, n: int):
    """The n-th question the server asked (1-based), once it is in the chat."""
    try:
        return await api.wait_for(
            lambda: (
                (qs := [m for m in api.sent(ALICE) if "❓ toy: Set up the order" in m.get("text", "")])
                and len(qs) >= n
                and qs[n - 1]
            ),
            timeout=20,
        )
    except AssertionError as exc:
        raise AssertionError(f"no question {n}; the chat has: {api.texts(ALICE)}") from exc


async def test_the_servers_form_is_asked_in_the_chat_and_answered(tmp_path):
    h = _harness(tmp_path)
    h.script.add(reply(tool_calls=[("toy__survey", {})]), reply("All set."))
    try:
        await h.start()
        api = h.api
        api.push_text(ALICE, "set up the order with the survey", user_id=ALICE)
        first = await _question(api, 1)
        assert "Account" in first["text"] and [b["text"] for b in buttons_of(first)] == ["paper", "live"]
        # someone else's tap does not answer it
        api.push_callback(BOB, first["message_id"], buttons_of(first)[1]["callback_data"], user_id=BOB)
        api.push_callback(ALICE, first["message_id"], buttons_of(first)[0]["callback_data"], user_id=ALICE)
        second = await _question(api, 2)
        assert "Lots" in second["text"] and "(integer)" in second["text"]
        api.push_text(ALICE, "2.5", user_id=ALICE)  # not an integer: asked again
        await api.wait_for(lambda: any("is not a valid integer" in t for t in api.texts(ALICE)))
        api.push_text(ALICE, "3", user_id=ALICE)
        third = await _question(api, 4)
        assert [b["text"] for b in buttons_of(third)] == ["yes", "no"]
        api.push_callback(ALICE, third["message_id"], buttons_of(third)[0]["callback_data"], user_id=ALICE)
        await api.wait_for(lambda: any("All set." in t for t in api.texts(ALICE)))
    finally:
        await h.stop()
    result = h.script.requests[1].messages[-1].tool_results[0].content
    assert json.loads(result) == {
        "action": "accept",
        "content": {"account": "paper", "confirm": True, "lots": 3},
    }


async def test_cancel_declines_the_form(tmp_path):
    h = _harness(tmp_path)
    h.script.add(reply(tool_calls=[("toy__survey", {})]), reply("Not done."))
    try:
        await h.start()
        api = h.api
        api.push_text(ALICE, "survey please", user_id=ALICE)
        await _question(api, 1)
        api.push_text(ALICE, "取消", user_id=ALICE)
        await api.wait_for(lambda: any("Not done." in t for t in api.texts(ALICE)))
    finally:
        await h.stop()
    result = h.script.requests[1].messages[-1].tool_results[0].content
    assert json.loads(result)["action"] == "decline"


async def test_nobody_present_declines_without_asking():
    class AnswersPaper(LiveQuestions):
        asked = 0

        async def ask(self, *a, **kw):
            AnswersPaper.asked += 1
            return "paper"

    schema = {"type": "object", "properties": {"account": {"type": "string"}}}
    unattended = ToolContext(chat_key="telegram:1", user_id="1", unattended=True, deps=Deps())
    assert (await ask_form(AnswersPaper(), unattended, "toy", "?", schema)).action == "decline"
    no_chat = ToolContext(chat_key="", user_id="1", deps=Deps())
    assert (await ask_form(AnswersPaper(), no_chat, "toy", "?", schema)).action == "decline"
    assert AnswersPaper.asked == 0
    present = ToolContext(chat_key="telegram:1", user_id="1", deps=Deps())
    answer = await ask_form(AnswersPaper(), present, "toy", "?", schema)
    assert answer.action == "accept" and answer.content == {"account": "paper"}
